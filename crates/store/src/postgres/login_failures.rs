//! Failed logins counted in the PostgreSQL solution, so every node sees every node's: the same
//! rule as one node's `LoginThrottle` (per peer address, free failures, a doubling lockout,
//! forgotten after a quiet spell), on the database's clock so nodes whose clocks drift agree.

use std::net::IpAddr;
use std::time::Duration;

use super::PgStore;
use crate::{LoginThrottleConfig, SolutionError};

impl PgStore {
    /// How long `peer` must still wait before it may try to log in, if it is locked out.
    pub(crate) async fn login_lockout(&self, peer: IpAddr) -> Result<Option<Duration>, SolutionError> {
        let seconds: Option<f64> = sqlx::query_scalar(
            "SELECT EXTRACT(EPOCH FROM (LockedUntil - now()))::float8 FROM LoginFailures
             WHERE Peer = $1 AND LockedUntil > now()",
        )
        .bind(peer.to_string())
        .fetch_optional(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        Ok(seconds.and_then(|seconds| Duration::try_from_secs_f64(seconds).ok()))
    }

    /// Counts a failed login from `peer`, on whichever node it happened; returns its failures
    /// so far and the lockout it earned, if any. One transaction: concurrent failures from
    /// one peer on several nodes are counted one after the other.
    pub(crate) async fn record_login_failure(
        &self,
        peer: IpAddr,
        user: Option<&str>,
        config: &LoginThrottleConfig,
    ) -> Result<(u32, Option<Duration>), SolutionError> {
        let forget = config.forget_after.as_secs_f64();
        let mut transaction = self.pool.begin().await.map_err(|error| self.error(error))?;
        // Quiet peers are forgotten, so the table stays as small as the attacks are recent.
        sqlx::query(
            "DELETE FROM LoginFailures WHERE LastFailureAt < now() - make_interval(secs => $1)
             AND (LockedUntil IS NULL OR LockedUntil < now())",
        )
        .bind(forget)
        .execute(&mut *transaction)
        .await
        .map_err(|error| self.error(error))?;
        let count: i32 = sqlx::query_scalar(
            "INSERT INTO LoginFailures (Peer, Failures, LastFailureAt, OnlyUser) VALUES ($1, 1, now(), $3)
             ON CONFLICT (Peer) DO UPDATE SET
                 Failures = CASE WHEN LoginFailures.LastFailureAt < now() - make_interval(secs => $2)
                                 THEN 1 ELSE LoginFailures.Failures + 1 END,
                 OnlyUser = CASE WHEN LoginFailures.LastFailureAt < now() - make_interval(secs => $2)
                                 THEN $3
                                 WHEN LoginFailures.OnlyUser = $3 THEN $3 ELSE NULL END,
                 LastFailureAt = now()
             RETURNING Failures",
        )
        .bind(peer.to_string())
        .bind(forget)
        .bind(user)
        .fetch_one(&mut *transaction)
        .await
        .map_err(|error| self.error(error))?;
        let count = u32::try_from(count).unwrap_or(0);
        let lockout = config.lockout_after(count);
        sqlx::query(
            "UPDATE LoginFailures SET LockedUntil = now() + make_interval(secs => $2) WHERE Peer = $1",
        )
        .bind(peer.to_string())
        .bind(lockout.map(|lockout| lockout.as_secs_f64()))
        .execute(&mut *transaction)
        .await
        .map_err(|error| self.error(error))?;
        transaction.commit().await.map_err(|error| self.error(error))?;
        Ok((count, lockout))
    }

    /// A successful login wipes the peer's record, on every node.
    pub(crate) async fn clear_login_failures(&self, peer: IpAddr, user: &str) -> Result<(), SolutionError> {
        sqlx::query("DELETE FROM LoginFailures WHERE Peer = $1 AND OnlyUser = $2")
            .bind(peer.to_string())
            .bind(user)
            .execute(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        Ok(())
    }
}
