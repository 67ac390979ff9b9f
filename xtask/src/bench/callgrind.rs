//! Instructions a server executes, counted by callgrind (valgrind): the same count for the same
//! binary and calls whether the machine is busy or quiet, where CPU time on a shared 2-core VM
//! drifts by more than the costs some rows judge.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// How long a dump may take to appear: callgrind writes it when the process next runs, and a
/// server idle in `epoll_wait` is woken for it by `vgdb`.
const DUMP_WITHIN: Duration = Duration::from_secs(30);

/// `command` run under callgrind, collecting only what [`Counter::read`] needs: instructions,
/// by function, no per-line or per-instruction detail. Its dumps are written as `out.N`.
pub(crate) fn under_callgrind(command: &Command, out: &Path) -> Command {
    let mut valgrind = Command::new("valgrind");
    valgrind
        .args([
            "--tool=callgrind",
            "--dump-line=no",
            "--dump-instr=no",
            "--vgdb=yes",
        ])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        if let Some(value) = value {
            valgrind.env(key, value);
        }
    }
    valgrind
}

/// The instructions a process under callgrind executes from [`Counter::zero`] to
/// [`Counter::read`], through `callgrind_control`.
pub(crate) struct Counter {
    pid: u32,
    out: PathBuf,
}

impl Counter {
    /// The counter of the process `pid`, started by [`under_callgrind`] with `out`.
    pub(crate) fn new(pid: u32, out: &Path) -> Self {
        Self {
            pid,
            out: out.to_owned(),
        }
    }

    /// Sets the process's counts to zero.
    pub(crate) fn zero(&self) -> anyhow::Result<()> {
        self.control("--zero")
    }

    /// The instructions executed since the last [`Counter::zero`]: the total of a new dump.
    pub(crate) fn read(&self) -> anyhow::Result<u64> {
        let before = self.last_dump()?.map_or(0, |(number, _)| number);
        self.control("--dump")?;
        let deadline = Instant::now() + DUMP_WITHIN;
        loop {
            if let Some((number, path)) = self.last_dump()?
                && number > before
            {
                // callgrind writes the totals last: a dump without them is still being written.
                if let Some(total) = dump_total(&std::fs::read_to_string(&path)?) {
                    return Ok(total);
                }
            }
            if Instant::now() >= deadline {
                bail!(
                    "callgrind wrote no dump of process {} within {} s",
                    self.pid,
                    DUMP_WITHIN.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn control(&self, request: &str) -> anyhow::Result<()> {
        let output = Command::new("callgrind_control")
            .arg(request)
            .arg(self.pid.to_string())
            .stdin(Stdio::null())
            .output()
            .context("cannot run callgrind_control: install valgrind (Debian's valgrind package)")?;
        if !output.status.success() {
            bail!(
                "callgrind_control {request} {} failed: {}",
                self.pid,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(())
    }

    /// The highest-numbered dump `out.N` so far, with its number.
    fn last_dump(&self) -> anyhow::Result<Option<(u64, PathBuf)>> {
        let dir = self.out.parent().context("callgrind's output has no directory")?;
        let prefix = format!(
            "{}.",
            self.out
                .file_name()
                .and_then(OsStr::to_str)
                .context("callgrind's output is not named in UTF-8")?
        );
        let mut last = None;
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            let number = path
                .file_name()
                .and_then(OsStr::to_str)
                .and_then(|name| name.strip_prefix(&prefix))
                .and_then(|suffix| suffix.parse::<u64>().ok());
            if let Some(number) = number
                && last.as_ref().is_none_or(|(highest, _)| number > *highest)
            {
                last = Some((number, path));
            }
        }
        Ok(last)
    }
}

/// The instructions a callgrind dump totals: its last line, `totals:`, or `None` while the dump
/// is still being written.
fn dump_total(dump: &str) -> Option<u64> {
    dump.split_inclusive('\n')
        .filter_map(|line| line.strip_suffix('\n'))
        .find_map(|line| line.strip_prefix("totals:"))
        .and_then(|counts| counts.split_whitespace().next())
        .and_then(|first| first.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_is_read_by_its_totals_and_not_before_they_are_written() {
        let dump = "version: 1\ncreator: callgrind-3.19.0\npid: 7\ncmd: tserver\npart: 1\n\nevents: Ir\n\nfn=(1) main\n0 12\n\ntotals: 123456\n";
        assert_eq!(dump_total(dump), Some(123_456));
        assert_eq!(dump_total("events: Ir\nsummary: 99\n"), None);
        assert_eq!(dump_total("events: Ir\ntotals: 12"), None, "cut mid-line");
        assert_eq!(dump_total("version: 1\nevents: Ir\n\nfn=(1) main\n0 12\n"), None);
    }

    #[test]
    fn the_command_under_callgrind_keeps_the_program_its_arguments_and_environment() {
        let mut tserver = Command::new("/bin/tserver");
        tserver
            .args(["serve", "--metrics", "off"])
            .env("RUST_LOG", "warn");
        let valgrind = under_callgrind(&tserver, Path::new("/tmp/counts"));
        let args: Vec<_> = valgrind.get_args().filter_map(OsStr::to_str).collect();
        assert_eq!(valgrind.get_program(), "valgrind");
        assert!(args.contains(&"--callgrind-out-file=/tmp/counts"));
        assert_eq!(
            args[args.len() - 4..],
            ["/bin/tserver", "serve", "--metrics", "off"]
        );
        assert!(
            valgrind
                .get_envs()
                .any(|(key, value)| key == "RUST_LOG" && value == Some(OsStr::new("warn")))
        );
    }
}
