//! The operator panel's pages and assets, served at `/` and `/panel/*`.

/// The panel's routes.
pub(crate) fn routes() -> axum::Router {
    axum::Router::new()
}
