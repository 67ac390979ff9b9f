//! `WalIndexHeader`: whether any connection, in any process, committed to a WAL-mode solution
//! file since a moment, told by one `pread` of the WAL-index header instead of a read
//! transaction (two `fcntl` locks, an `fstat` and a statement).
//!
//! The WAL-index (`<file>-shm`, <https://www.sqlite.org/walformat.html>, "The WAL-Index
//! Header") begins with two copies of a 48-byte header that every commit rewrites: the commit
//! is the header's update. A commit adds frames (`mxFrame` and the checksums change); a WAL
//! restart draws new salts; so while the 96 bytes read the same, nothing was committed. The
//! check is used one way only: bytes that differ, or copies that disagree (a writer mid-update),
//! or a header not yet initialized, say "read the file", never "nothing changed".
//!
//! All writers of a WAL file run on this host (WAL needs the shared memory), so every commit
//! shows in this file's page cache; our own pooled connections keep the WAL-index alive for as
//! long as the solution is open.

use std::fs::File;
use std::path::Path;

/// Both copies of the header, as read.
pub(crate) type HeaderBytes = [u8; 96];

/// Offset of `isInit` in a header copy: 1 once the WAL-index is built.
const IS_INIT: usize = 12;

/// The WAL-index of one open solution file.
#[derive(Debug)]
pub(crate) struct WalIndexHeader {
    file: File,
}

impl WalIndexHeader {
    /// The WAL-index beside `database`, if it has one (a file in another journal mode has none,
    /// and its settings are read at every call).
    pub(crate) fn open(database: &Path) -> Option<Self> {
        let mut name = database.as_os_str().to_owned();
        name.push("-shm");
        File::open(name).ok().map(|file| Self { file })
    }

    /// The header as it is now, when it is initialized and its two copies agree; `None` says
    /// only "cannot tell".
    pub(crate) fn read(&self) -> Option<HeaderBytes> {
        let mut bytes = [0; 96];
        read_exact_at(&self.file, &mut bytes)?;
        let (first, second) = bytes.split_at(48);
        (first == second && first[IS_INIT] == 1).then_some(bytes)
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, bytes: &mut HeaderBytes) -> Option<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, bytes, 0).ok()
}

/// Without positioned reads the header is never trusted: settings are read at every call.
#[cfg(not(unix))]
fn read_exact_at(_: &File, _: &mut HeaderBytes) -> Option<()> {
    None
}
