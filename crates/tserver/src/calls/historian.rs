//! Historian queries for the calls that read history (TagHistory, Alarms): run on the
//! blocking pool, a failure answered as an `internal` error that names no database detail.

use tserver_proto::v1::{ErrorCode, server_frame};

use super::to_proto::CallError;

/// Runs `query` off the async workers; `Err` is the reply of a query that failed (logged with
/// its cause, which may name the database and stays out of the reply).
pub(crate) async fn query<T: Send + 'static>(
    what: &'static str,
    query: impl FnOnce() -> Result<T, store::SolutionError> + Send + 'static,
) -> Result<T, server_frame::Body> {
    match tokio::task::spawn_blocking(query).await {
        Ok(Ok(page)) => Ok(page),
        Ok(Err(error)) => {
            tracing::warn!(%error, what, "history query failed");
            Err(unreadable(what))
        }
        Err(error) => {
            tracing::error!(%error, what, "history query did not finish");
            Err(unreadable(what))
        }
    }
}

fn unreadable(what: &str) -> server_frame::Body {
    CallError::new(
        ErrorCode::Internal,
        format!("the history store could not be read for the {what}; try again"),
    )
    .into_body()
}
