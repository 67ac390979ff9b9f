//! The chat hook chain: `OnBeforeChat` (may rewrite the user text) and `OnAfterChatReply`
//! (may rewrite the answer), attached from Rust code.
//!
//! Handlers run one after another in registration order, each receiving the previous one's
//! output. A handler that fails or panics is skipped and named in the envelope's warnings; the
//! chain goes on with the input that handler received, and the turn's status is unchanged.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use futures::FutureExt;

/// The future a hook handler returns: the rewritten text, or why it failed.
pub(crate) type HookFuture = Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;

type HandlerFn = dyn Fn(String) -> HookFuture + Send + Sync;

/// One registered handler.
#[derive(Clone)]
struct Handler {
    name: Arc<str>,
    run: Arc<HandlerFn>,
}

/// A multicast chain of async text rewriters.
#[derive(Default)]
pub(crate) struct HookChain {
    handlers: RwLock<Arc<Vec<Handler>>>,
}

impl std::fmt::Debug for HookChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<Arc<str>> = self.snapshot().iter().map(|h| Arc::clone(&h.name)).collect();
        f.debug_struct("HookChain").field("handlers", &names).finish()
    }
}

impl HookChain {
    /// Appends a handler; it runs after those already attached.
    pub(crate) fn attach<F, Fut>(&self, name: &str, handler: F)
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, String>> + Send + 'static,
    {
        let handler = Handler {
            name: Arc::from(name),
            run: Arc::new(move |text| Box::pin(handler(text)) as HookFuture),
        };
        let mut handlers = self
            .handlers
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = Vec::clone(&handlers);
        next.push(handler);
        *handlers = Arc::new(next);
    }

    fn snapshot(&self) -> Arc<Vec<Handler>> {
        Arc::clone(
            &self
                .handlers
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Whether no handler is attached.
    pub(crate) fn is_empty(&self) -> bool {
        self.snapshot().is_empty()
    }

    /// Runs the chain over `text`; failures are appended to `warnings` as
    /// `"<hook> handler '<name>' failed: ..."`.
    pub(crate) async fn run(&self, hook: &str, text: String, warnings: &mut Vec<String>) -> String {
        let handlers = self.snapshot();
        let mut current = text;
        for handler in handlers.iter() {
            let outcome = AssertUnwindSafe((handler.run)(current.clone()))
                .catch_unwind()
                .await;
            match outcome {
                Ok(Ok(rewritten)) => current = rewritten,
                Ok(Err(reason)) => {
                    warnings.push(format!("{hook} handler '{}' failed: {reason}", handler.name));
                }
                Err(_) => warnings.push(format!("{hook} handler '{}' panicked", handler.name)),
            }
        }
        current
    }
}
