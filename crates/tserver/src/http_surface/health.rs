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

use crate::{Accepting, Runtime};

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
    let db = std::sync::Arc::clone(readiness.runtime.db());
    let solution = match tokio::task::spawn_blocking(move || match db.lost() {
        Some(reason) => Err(reason.to_owned()),
        None => db.plant_revision().map(drop).map_err(|error| error.to_string()),
    })
    .await
    {
        Ok(Ok(())) => Ok(()),
        Ok(Err(reason)) => Err(reason),
        Err(_) => Err("the check of the solution stopped".to_owned()),
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
