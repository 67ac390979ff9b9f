//! How a call that acts on the plant reaches the acting path: the connection as the actor, its
//! allowance of refusal rows as the bound of what goes in the audit, and an act's refusal as the
//! call's error reply.

use localai::secrets::SecretValue;
use plant::actions::{ActError, Actor, AuditBound, AuditRow, GivenSignature, Meaning};
use store::AuditEntry;
use tserver_proto::v1::{ErrorCode, SignatureMeaning};

use super::audit_bounds::{
    Allowed, REFUSED_ROWS_PER_CALL, REFUSED_ROWS_PER_MINUTE, SHARED_REFUSED_ROWS_PER_MINUTE,
};
use super::context::ConnectionContext;
use super::to_proto::CallError;

impl ConnectionContext {
    /// The logged-in user of this connection as the one who acts, or the refusal of a call
    /// made before a login.
    pub(crate) fn actor(&self) -> Result<Actor, CallError> {
        let login = self.logged_in()?;
        Ok(Actor::User {
            name: std::sync::Arc::clone(&login.name),
            role: login.role,
            connection: self.guid.to_string(),
            peer: self.peer.to_string(),
        })
    }
}

/// The signatures a call carries, as the acting path takes them; a meaning left unspecified is
/// refused.
pub(crate) fn signatures(given: Vec<tserver_proto::v1::Signature>) -> Result<Vec<GivenSignature>, CallError> {
    given
        .into_iter()
        .enumerate()
        .map(|(index, signature)| {
            let meaning = match SignatureMeaning::try_from(signature.meaning) {
                Ok(SignatureMeaning::Approved) => Meaning::Approved,
                Ok(SignatureMeaning::Performed) => Meaning::Performed,
                Ok(SignatureMeaning::Reviewed) => Meaning::Reviewed,
                _ => {
                    return Err(CallError::new(
                        ErrorCode::InvalidArgument,
                        format!(
                            "signatures[{index}].meaning: give SIGNATURE_MEANING_APPROVED, _PERFORMED or _REVIEWED"
                        ),
                    ));
                }
            };
            Ok(GivenSignature {
                user: signature.user,
                password: SecretValue::new(signature.password),
                meaning,
            })
        })
        .collect()
}

/// The call error of an act's refusal.
pub(crate) fn act_error(refusal: ActError) -> CallError {
    let code = match refusal {
        ActError::Invalid(_) => ErrorCode::InvalidArgument,
        ActError::NotAudited { .. } => ErrorCode::Internal,
        ActError::NotPermitted { .. } => ErrorCode::PermissionDenied,
        ActError::SignatureRequired(_) => ErrorCode::SignatureRequired,
        ActError::SignatureRefused(_) => ErrorCode::SignatureRefused,
    };
    CallError::new(code, refusal.to_string())
}

/// A connection bounds what it puts in the audit: every row that acts, and its refused ones
/// bounded: text cut, [`REFUSED_ROWS_PER_CALL`] rows then one with the count, and the
/// connection's allowance of refusal rows a minute (past it they are counted, and a row says so).
impl AuditBound for ConnectionContext {
    fn bound(&self, rows: Vec<AuditRow>) -> Vec<AuditRow> {
        let Some(first) = rows.first().map(|row| row.entry.clone()) else {
            return Vec::new();
        };
        let note = |target: String, outcome: String| AuditRow {
            entry: AuditEntry {
                target,
                old_value: None,
                new_value: None,
                outcome,
                ..first.clone()
            },
            acts: false,
        };
        // In the call's order; a row that does not act is a refusal.
        let mut kept = Vec::with_capacity(rows.len().min(REFUSED_ROWS_PER_CALL + 2));
        let mut listed = 0;
        let mut refused: u64 = 0;
        for AuditRow { entry, acts } in rows {
            let entry = entry.cut_to_bounds();
            if !acts {
                refused += 1;
                if listed >= REFUSED_ROWS_PER_CALL {
                    continue;
                }
                listed += 1;
            }
            kept.push(AuditRow { entry, acts });
        }
        if refused == 0 {
            return kept;
        }
        let unlisted = refused - listed as u64;
        if unlisted > 0 {
            listed += 1;
            kept.push(note(
                format!("{unlisted} more"),
                format!("refused: {unlisted} more requests of this call, not listed one by one"),
            ));
        }
        let user = self.login.as_ref().map_or("", |login| &login.name);
        let (allowed, scope) = self.shared_audit_allowances.take(
            &self.audit_allowance,
            user,
            self.peer.ip(),
            (listed, refused),
            std::time::Instant::now(),
        );
        let mut entries = kept;
        if matches!(allowed, Allowed::Count) {
            entries.retain(|row| row.acts);
        }
        match allowed {
            Allowed::Record { counted } if counted > 0 => entries.push(note(
                format!("{counted} refused"),
                format!(
                    "{counted} refused requests were counted, not recorded (past an allowance of audit rows of refusals a minute: {REFUSED_ROWS_PER_MINUTE} a connection, {SHARED_REFUSED_ROWS_PER_MINUTE} a user or a client address)"
                ),
            )),
            Allowed::RecordLast => entries.push(note(
                "allowance".to_owned(),
                format!(
                    "{} reached its {} audit rows of refusals a minute: its further refusals this minute are counted, not recorded",
                    scope.words(),
                    scope.limit()
                ),
            )),
            _ => {}
        }
        entries
    }
}
