//! Child processes for `bench` and `soak`: servers killed when dropped, address discovery,
//! and resident memory.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// A child process killed and reaped when dropped, so no run leaves servers behind.
pub(crate) struct Process {
    pub(crate) name: &'static str,
    pub(crate) child: Child,
}

impl Process {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        eprintln!("stopped {}", self.name);
    }
}

/// Starts a server that prints `listening on X` as its first line; returns it and X.
pub(crate) fn start_announcing(
    name: &'static str,
    command: &mut Command,
) -> anyhow::Result<(Process, String)> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {name}"))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let process = Process { name, child };
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .with_context(|| format!("{name} printed nothing"))?;
    let address = line
        .trim()
        .strip_prefix("listening on ")
        .with_context(|| format!("{name} printed {line:?}, not its address"))?
        .to_owned();
    Ok((process, address))
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Waits until something accepts connections at `addr`, at most 20 s.
pub(crate) fn wait_for_port(addr: SocketAddr) -> anyhow::Result<()> {
    wait_for_port_within(addr, Duration::from_secs(20))
}

/// Waits until something accepts connections at `addr`, at most `within`.
pub(crate) fn wait_for_port_within(addr: SocketAddr, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("nothing listens on {addr} after {} s", within.as_secs())
}

/// Resident memory of a process, in bytes.
pub(crate) fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// CPU time a process has used so far (user and system), in seconds.
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    cpu_time(pid).map(CpuTime::total)
}

/// CPU time a process has used so far, in seconds, in user space and in the kernel apart.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuTime {
    pub(crate) user: f64,
    pub(crate) system: f64,
}

impl CpuTime {
    /// User and system time together.
    pub(crate) fn total(self) -> f64 {
        self.user + self.system
    }

    /// The share of the time spent in user space (0 when no time was spent).
    pub(crate) fn user_share(self) -> f64 {
        self.user / self.total().max(f64::MIN_POSITIVE)
    }
}

impl std::ops::Sub for CpuTime {
    type Output = Self;

    fn sub(self, earlier: Self) -> Self {
        Self {
            user: self.user - earlier.user,
            system: self.system - earlier.system,
        }
    }
}

/// A process's [`CpuTime`] so far. `/proc` counts it in clock ticks of `USER_HZ`, which Linux
/// fixes at 100 for this interface.
pub(crate) fn cpu_time(pid: u32) -> Option<CpuTime> {
    // utime and stime are fields 14 and 15 of the line.
    stat_times(&pid.to_string(), 14)
}

/// The CPU time of this process's children that have ended and been waited for, theirs
/// included, so far (cutime and cstime of `/proc/self/stat`). Around a `cargo build` it is the
/// build's CPU: cargo waits for every rustc and build script, and this process for cargo.
pub(crate) fn ended_children_cpu_time() -> Option<CpuTime> {
    stat_times("self", 16)
}

/// The pair of tick counts at `field` and the next of `/proc/PID/stat` (fields counted from 1,
/// as proc(5) does), in seconds.
fn stat_times(pid: &str, field: usize) -> Option<CpuTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces: count fields after its end, which is
    // the second field.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let seconds = |field: usize| Some(fields.get(field - 3)?.parse::<u64>().ok()? as f64 / 100.0);
    Some(CpuTime {
        user: seconds(field)?,
        system: seconds(field + 1)?,
    })
}

/// CPU time this process's threads have run so far, in seconds: the scheduler's nanosecond
/// counts (`/proc/self/task/*/schedstat`), not `/proc`'s 10 ms ticks, so a window of a fraction
/// of a second reads true. A thread that has ended is no longer counted: read it around work
/// done by threads that outlive the window (a runtime's workers).
pub(crate) fn own_cpu_seconds() -> Option<f64> {
    Some(Scheduling::of_process("self")?.cpu_seconds())
}

/// What the scheduler counted for a process's threads so far (`/proc/PID/task/*/schedstat`):
/// the time they ran, the time they were ready to run but waited for a CPU, and how many
/// times one was put on a CPU (about one per wake-up). The difference of two readings tells
/// work from waiting: a latency that grows with `waited` is the machine's, not the code's.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Scheduling {
    pub(crate) ran_nanos: u64,
    pub(crate) waited_nanos: u64,
    pub(crate) runs: u64,
}

impl Scheduling {
    /// The counts of process `pid` ("self" for this one); `None` when it has gone.
    pub(crate) fn of_process(pid: &str) -> Option<Self> {
        let mut sum = Self::default();
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
            let Ok(text) = std::fs::read_to_string(task.ok()?.path().join("schedstat")) else {
                // The thread ended since the directory was read.
                continue;
            };
            let mut fields = text.split_whitespace().map(str::parse::<u64>);
            let (Some(Ok(ran)), Some(Ok(waited)), Some(Ok(runs))) =
                (fields.next(), fields.next(), fields.next())
            else {
                return None;
            };
            sum.ran_nanos += ran;
            sum.waited_nanos += waited;
            sum.runs += runs;
        }
        Some(sum)
    }

    pub(crate) fn cpu_seconds(&self) -> f64 {
        self.ran_nanos as f64 / 1e9
    }

    /// What happened between `earlier` and this reading.
    pub(crate) fn since(&self, earlier: &Self) -> Self {
        Self {
            ran_nanos: self.ran_nanos.saturating_sub(earlier.ran_nanos),
            waited_nanos: self.waited_nanos.saturating_sub(earlier.waited_nanos),
            runs: self.runs.saturating_sub(earlier.runs),
        }
    }
}

/// The machine's stolen time so far, in seconds (`/proc/stat`, every CPU): time a virtual
/// CPU was ready but its host ran something else.
pub(crate) fn machine_steal_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
    // user nice system idle iowait irq softirq steal: the eighth figure, in 10 ms ticks.
    let steal = cpu.split_whitespace().nth(7)?.parse::<u64>().ok()?;
    Some(steal as f64 / 100.0)
}

/// Runs `program` with `args` to completion, its standard output dropped (for admin commands
/// such as `tserver init` and `tserver settings set`); an error when it fails.
pub(crate) fn run_quietly(program: &Path, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("cannot run {}", program.display()))?;
    if !status.success() {
        bail!("{} {args:?} failed with {status}", program.display());
    }
    Ok(())
}

/// Runs `xtask TASK ARGS...` (the in-process measuring side of a bench scenario, from the
/// build in `xtask`) and returns the JSON report it prints; its progress goes to stderr, which
/// the error carries when it fails.
pub(crate) fn measuring_side(xtask: &Path, task: &str, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let output = Command::new(xtask)
        .arg(task)
        .args(args)
        .output()
        .with_context(|| format!("cannot run xtask {task}"))?;
    if !output.status.success() {
        bail!("xtask {task} failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// Runs `cargo ARGS` (the cargo that runs xtask), echoing the command; fails when it fails.
pub(crate) fn cargo(args: &[&str]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(&cargo)
        .args(args)
        .status()
        .with_context(|| format!("cannot run {cargo}"))?;
    if !status.success() {
        bail!("cargo {} failed with {status}", args.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_work_is_counted_as_user_time_and_in_the_total() {
        let pid = std::process::id();
        let before = cpu_time(pid).expect("this process's CPU time");
        // Work in user space until /proc has counted five of its 10 ms ticks of it, however
        // loaded the machine (bounded: ten seconds of wall-clock time at most).
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut x = 1u64;
        let spent = loop {
            for _ in 0..1_000_000 {
                x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
            }
            let spent = cpu_time(pid).expect("this process's CPU time") - before;
            if spent.user >= 0.05 || Instant::now() >= deadline {
                break spent;
            }
        };
        assert!(spent.user >= 0.05, "{spent:?}");
        assert!(spent.system >= 0.0, "{spent:?}");
        let now = cpu_time(pid).expect("this process's CPU time");
        let total = cpu_seconds(pid).expect("this process's CPU time");
        assert!(total >= now.total(), "{total} vs {now:?}");
    }

    #[test]
    fn a_child_that_worked_is_counted_once_it_is_waited_for() {
        let before = ended_children_cpu_time().expect("this process's children's CPU time");
        // A shell counting in user space, run again until /proc has counted five 10 ms ticks
        // of it (bounded: ten seconds of wall-clock time at most). This thread only waits, so
        // its own time cannot make the children's grow.
        let deadline = Instant::now() + Duration::from_secs(10);
        let spent = loop {
            let status = Command::new("sh")
                .args(["-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"])
                .status()
                .expect("sh runs");
            assert!(status.success(), "{status}");
            let spent = ended_children_cpu_time().expect("this process's children's CPU time") - before;
            if spent.total() >= 0.05 || Instant::now() >= deadline {
                break spent;
            }
        };
        assert!(spent.total() >= 0.05, "{spent:?}");
        assert!(
            spent.user > spent.system,
            "counting is user-space work: {spent:?}"
        );
    }

    #[test]
    fn a_thread_that_works_and_sleeps_is_counted_as_running_and_being_woken() {
        let before = Scheduling::of_process("self").expect("this process's schedstat");
        let worker = std::thread::spawn(|| {
            let mut x = 1u64;
            for _ in 0..5 {
                for _ in 0..1_000_000 {
                    x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        // Read while the worker lives: an ended thread leaves the process's counts.
        while !worker.is_finished() {
            std::thread::sleep(Duration::from_millis(1));
            let now = Scheduling::of_process("self").expect("this process's schedstat");
            let spent = now.since(&before);
            if spent.ran_nanos >= 1_000_000 && spent.runs >= 5 {
                worker.join().expect("the worker ends");
                return;
            }
        }
        panic!("five bouts of work and sleep were not counted as 1 ms run in 5 runs");
    }

    #[test]
    fn a_process_that_is_not_there_has_no_scheduling() {
        assert!(Scheduling::of_process("0").is_none());
        assert!(machine_steal_seconds().is_some_and(|stolen| stolen >= 0.0));
    }
}
