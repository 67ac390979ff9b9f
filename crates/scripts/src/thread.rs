//! Where runs run: threads of their own with a stack deep enough for the deepest value the
//! limits let a script build, so no script, however its values nest, overflows a stack.
//!
//! Rhai drops, clones, sizes and prints a value by recursion, one frame per level of nesting.
//! Scripts cannot capture closures or curry (`no_closure`, `curry` disabled), so values nest
//! only through arrays and maps, and Rhai counts every nested item against
//! [`ScriptLimits::max_array_len`](crate::ScriptLimits) and `max_map_len`: a value nests at
//! most `max_array_len + max_map_len` levels (110,000 by default). Measured on x86-64, a level
//! costs at most about 2.4 KiB of stack unoptimized and 640 bytes optimized (70 MiB for the
//! deepest value), so an optimized build gives a run 256 MiB and an unoptimized one (tests)
//! 512 MiB: twice what each needs at least. The stack is address space: only as much is touched
//! as a run goes deep, and it is returned when the run's thread ends.
//!
//! A thread with such a stack costs tens of microseconds to start and end (the stack is mapped
//! and unmapped each time: it is too big for the C library's cache), more than a trivial run
//! itself, so a server keeps its run threads in [`RunThreads`] for the next run. tokio's
//! blocking pool would keep them too, but it panics when no thread can be had and queues work
//! past its cap, where a script's run must fail at once with why.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// The stack of every thread a run runs on.
pub const RUN_STACK_BYTES: usize = if cfg!(debug_assertions) {
    512 * 1024 * 1024
} else {
    256 * 1024 * 1024
};

/// Runs `work` on a new thread named `name` with [`RUN_STACK_BYTES`] of stack.
///
/// # Errors
/// The system refused a thread (out of threads or address space).
pub fn spawn_run_thread<T, F>(name: &str, work: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::Builder::new()
        .name(name.to_owned())
        .stack_size(RUN_STACK_BYTES)
        .spawn(work)
}

/// A run handed to a run thread.
type Work = Box<dyn FnOnce() + Send>;

/// Run threads kept for the next run: [`spawn`](Self::spawn) hands the work to a thread that
/// waits for work, or starts one; a thread waits `keep` after its last run, then ends.
#[derive(Debug, Clone)]
pub struct RunThreads {
    pool: Arc<Waiting>,
}

/// The threads waiting for work, each by its id and the channel it takes work from.
#[derive(Debug)]
struct Waiting {
    name: String,
    keep: Duration,
    next_id: AtomicU64,
    threads: Mutex<Vec<(u64, SyncSender<Work>)>>,
}

impl RunThreads {
    /// Threads named `name`, each kept `keep` after its last run.
    #[must_use]
    pub fn new(name: &str, keep: Duration) -> Self {
        Self {
            pool: Arc::new(Waiting {
                name: name.to_owned(),
                keep,
                next_id: AtomicU64::new(0),
                threads: Mutex::default(),
            }),
        }
    }

    /// Runs `work` on a waiting run thread, or on a new one when none waits.
    ///
    /// # Errors
    /// No thread waited and the system refused a new one (out of threads or address space).
    pub fn spawn(&self, work: impl FnOnce() + Send + 'static) -> io::Result<()> {
        let mut work: Work = Box::new(work);
        while let Some((_, thread)) = self.pool.lock().pop() {
            // A thread taken from the list waits for this work (see `serve`); one that ended
            // unwinding from a panicking run was never put back, so this is belt and braces.
            match thread.send(work) {
                Ok(()) => return Ok(()),
                Err(mpsc::SendError(back)) => work = back,
            }
        }
        let id = self.pool.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, jobs) = mpsc::sync_channel(1);
        let pool = Arc::clone(&self.pool);
        spawn_run_thread(&self.pool.name, move || serve(&pool, id, &sender, &jobs, work)).map(drop)
    }

    /// How many threads wait for work now.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.pool.lock().len()
    }
}

impl Waiting {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, SyncSender<Work>)>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A run thread's life: `first`, then each work handed to it, until it has waited `keep`.
fn serve(pool: &Waiting, id: u64, me: &SyncSender<Work>, jobs: &Receiver<Work>, first: Work) {
    first();
    loop {
        pool.lock().push((id, me.clone()));
        let work = match jobs.recv_timeout(pool.keep) {
            Ok(work) => work,
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                let mut threads = pool.lock();
                if let Some(at) = threads.iter().position(|(waiting, _)| *waiting == id) {
                    threads.swap_remove(at);
                    return;
                }
                drop(threads);
                // Taken from the list just now: its work is on the way.
                match jobs.recv() {
                    Ok(work) => work,
                    Err(_) => return,
                }
            }
        };
        work();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;
    use std::thread::ThreadId;

    const PATIENCE: Duration = Duration::from_secs(10);

    /// Runs a work on `threads` and says which thread ran it.
    fn run_on(threads: &RunThreads) -> ThreadId {
        let (done, ran) = channel();
        threads
            .spawn(move || done.send(std::thread::current().id()).expect("the test waits"))
            .expect("a run thread");
        ran.recv_timeout(PATIENCE).expect("the work ran")
    }

    /// Waits until `count` threads wait for work.
    fn wait_for_waiting(threads: &RunThreads, count: usize) {
        let deadline = std::time::Instant::now() + PATIENCE;
        while threads.waiting() != count {
            assert!(
                std::time::Instant::now() < deadline,
                "{} threads wait, not {count}",
                threads.waiting()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_finished_runs_thread_takes_the_next_run() {
        let threads = RunThreads::new("test-run", PATIENCE);
        let first = run_on(&threads);
        wait_for_waiting(&threads, 1);
        assert_eq!(run_on(&threads), first);
        assert_ne!(std::thread::current().id(), first);
    }

    #[test]
    fn runs_at_once_get_threads_of_their_own_and_all_run() {
        let threads = RunThreads::new("test-run", PATIENCE);
        let (done, ran) = channel();
        let gate = Arc::new(std::sync::Barrier::new(8));
        for _ in 0..8 {
            let done = done.clone();
            let gate = Arc::clone(&gate);
            threads
                .spawn(move || {
                    // All eight wait for each other: they can only meet on eight threads.
                    gate.wait();
                    done.send(std::thread::current().id()).expect("the test waits");
                })
                .expect("a run thread");
        }
        let mut seen: Vec<ThreadId> = (0..8)
            .map(|_| ran.recv_timeout(PATIENCE).expect("every work ran"))
            .collect();
        seen.sort_by_key(|id| format!("{id:?}"));
        seen.dedup();
        assert_eq!(seen.len(), 8);
        wait_for_waiting(&threads, 8);
    }

    #[test]
    fn a_thread_ends_after_waiting_its_keep() {
        let threads = RunThreads::new("test-run", Duration::from_millis(20));
        let first = run_on(&threads);
        wait_for_waiting(&threads, 1);
        wait_for_waiting(&threads, 0);
        assert_ne!(run_on(&threads), first);
    }

    #[test]
    fn a_panicking_run_leaves_the_pool_serving() {
        let threads = RunThreads::new("test-run", PATIENCE);
        threads
            .spawn(|| panic!("a run that panics"))
            .expect("a run thread");
        let (done, ran) = channel();
        threads
            .spawn(move || done.send(()).expect("the test waits"))
            .expect("a run thread");
        ran.recv_timeout(PATIENCE).expect("the next work ran");
    }
}
