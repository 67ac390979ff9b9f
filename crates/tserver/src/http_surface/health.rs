//! `/healthz` and `/readyz`, for load balancers and orchestrators, answered without a token:
//! health is "the process answers"; readiness is "the solution is open and readable, and the
//! TCP listener accepts". The model is in neither: its outages are envelope statuses, and a
//! server without its model still serves panels.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::{Value, json};

use crate::Accepting;
use plant::Runtime;

/// What readiness looks at.
#[derive(Debug, Clone)]
struct Readiness {
    runtime: Runtime,
    accepting: Option<Accepting>,
}

/// The two routes.
pub(super) fn routes(runtime: Runtime, accepting: Option<Accepting>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(Readiness { runtime, accepting })
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// 200 when ready, 503 when not; either way a JSON body saying what was looked at.
async fn readyz(State(readiness): State<Readiness>) -> (StatusCode, Json<Value>) {
    // One point read: a file answers in microseconds, a database within its acquire timeout.
    let store = readiness.runtime.store();
    let solution = match store.lost() {
        Some(reason) => Err(reason.to_owned()),
        None => store
            .plant_revision()
            .await
            .map(drop)
            .map_err(|error| error.to_string()),
    };
    let accepting = readiness.accepting.as_ref().is_some_and(Accepting::is_accepting);
    let ready = solution.is_ok() && accepting;
    let body = json!({
        "ready": ready,
        "solution": solution.map_or_else(|reason| format!("unreadable: {reason}"), |()| "open".to_owned()),
        "listener": if accepting { "accepting" } else { "not accepting" },
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}
