//! `on_own_runtime`: async work run to its end from synchronous admin code, whatever the
//! caller (a command line, or a test already inside a runtime, where `block_on` would panic).

use anyhow::Context;

/// Runs the future `make` makes to its end on a runtime of its own (two workers, so work that
/// blocks a worker, like a script's host calls, still progresses), in a thread of its own.
pub(crate) fn on_own_runtime<T: Send, E, F>(make: impl FnOnce() -> F + Send) -> anyhow::Result<T>
where
    F: Future<Output = Result<T, E>>,
    anyhow::Error: From<E>,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .context("cannot start the async runtime")?;
                Ok(runtime.block_on(make())?)
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the admin command's thread failed"))?
    })
}
