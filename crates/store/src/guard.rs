//! One server per solution file, and a file that vanishes under its server noticed at once.
//!
//! [`ServeLock`] is an advisory lock on `<solution>.lock`, held for as long as `tserver serve`
//! runs, whose text names the holder. [`FileIdentity`] is the file's device and inode when it
//! opened: a path that later names another file (or none) means the server's file was removed
//! or replaced, and anything written to it from then on would vanish with the process.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use super::SolutionError;

/// The advisory lock of a served solution; released when dropped (or when the process ends,
/// however it ends). Admin commands never take it: they work beside a running server.
#[derive(Debug)]
pub struct ServeLock {
    _file: File,
}

impl ServeLock {
    /// Takes the lock of `solution` for serving, writing who holds it (this process, its host,
    /// its start time and `listen`) into the lock file. Refused, naming the holder, when
    /// another process holds it.
    pub fn acquire(solution: &Path, listen: &str) -> Result<Self, SolutionError> {
        let since = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        Self::take(solution, &format!("serving since {since}, listening on {listen}"))
    }

    /// Takes the lock of `solution` for a one-off run of the script `script` in this process
    /// (no server may serve the solution meanwhile); refused as [`acquire`](Self::acquire) is.
    pub fn acquire_for_script_run(solution: &Path, script: &str) -> Result<Self, SolutionError> {
        let since = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        Self::take(
            solution,
            &format!("running the script {script} once, since {since}"),
        )
    }

    /// Takes the lock, saying in its file that this process holds it, `doing` what.
    fn take(solution: &Path, doing: &str) -> Result<Self, SolutionError> {
        let path = lock_path(solution);
        let failed = |source| SolutionError::LockFile {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(failed)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(SolutionError::AlreadyServed {
                    path: solution.to_owned(),
                    holder: if holder.is_empty() {
                        "another process".to_owned()
                    } else {
                        holder.chars().take(300).collect()
                    },
                });
            }
            Err(TryLockError::Error(source)) => return Err(failed(source)),
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|name| name.trim().to_owned())
            .unwrap_or_else(|_| "this host".to_owned());
        let holder = format!("tserver pid {} on {host}, {doing}\n", std::process::id());
        // Written over the old text, then cut to length: a reader never sees it empty.
        file.rewind()
            .and_then(|()| file.write_all(holder.as_bytes()))
            .and_then(|()| file.set_len(holder.len() as u64))
            .map_err(failed)?;
        Ok(Self { _file: file })
    }
}

/// The lock file of a solution: `plant.db` is locked through `plant.db.lock`.
pub fn lock_path(solution: &Path) -> PathBuf {
    let mut name = solution.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Which file a path named when the solution opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    device: u64,
    inode: u64,
}

impl FileIdentity {
    /// The identity of the file at `path` now.
    #[cfg(unix)]
    pub(crate) fn of(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let metadata = std::fs::metadata(path)?;
        Ok(Self {
            device: metadata.dev(),
            inode: metadata.ino(),
        })
    }

    /// Without inodes, a file is only noticed when it is gone.
    #[cfg(not(unix))]
    pub(crate) fn of(path: &Path) -> std::io::Result<Self> {
        std::fs::metadata(path).map(|_| Self { device: 0, inode: 0 })
    }

    /// Why `path` no longer names this file, if it does not.
    pub(crate) fn lost_at(self, path: &Path) -> Option<String> {
        match Self::of(path) {
            Ok(now) if now == self => None,
            Ok(_) => Some(format!(
                "the solution file {} was replaced by another file while serving",
                path.display()
            )),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Some(format!(
                "the solution file {} was removed while serving",
                path.display()
            )),
            // Cannot tell (permissions, I/O): not a verdict.
            Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder_and_the_first_release_frees_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let solution = dir.path().join("plant.db");
        let held = ServeLock::acquire(&solution, "127.0.0.1:3101").expect("the first server");
        match ServeLock::acquire(&solution, "127.0.0.1:3102") {
            Err(SolutionError::AlreadyServed { holder, .. }) => {
                assert!(
                    holder.contains(&format!("pid {}", std::process::id())),
                    "{holder}"
                );
                assert!(holder.contains("127.0.0.1:3101"), "{holder}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        drop(held);
        ServeLock::acquire(&solution, "127.0.0.1:3102").expect("free again");
    }

    #[test]
    fn a_removed_or_replaced_file_is_told_apart_from_the_same_one() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("plant.db");
        std::fs::write(&path, b"one").expect("write");
        let identity = FileIdentity::of(&path).expect("exists");
        assert_eq!(identity.lost_at(&path), None);
        std::fs::write(dir.path().join("other.db"), b"two").expect("write");
        std::fs::rename(dir.path().join("other.db"), &path).expect("replace");
        assert!(
            identity
                .lost_at(&path)
                .is_some_and(|why| why.contains("replaced"))
        );
        std::fs::remove_file(&path).expect("remove");
        assert!(identity.lost_at(&path).is_some_and(|why| why.contains("removed")));
    }
}
