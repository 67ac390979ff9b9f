//! The files users hand the command line (plant files, their documents, questions files):
//! regular files only, read through a bound, so a FIFO never blocks a command and a device
//! never fills memory.

use std::fs::{File, Metadata};
use std::io::Read as _;
use std::path::Path;

/// Which file a path names, whatever the name: a hard link to the key file is the key file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileKey {
    #[cfg(unix)]
    device_and_inode: (u64, u64),
    #[cfg(not(unix))]
    resolved: PathBuf,
}

impl FileKey {
    pub(crate) fn of(metadata: &Metadata, resolved: &Path) -> Self {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            let _ = resolved;
            Self {
                device_and_inode: (metadata.dev(), metadata.ino()),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = metadata;
            Self {
                resolved: resolved.to_owned(),
            }
        }
    }
}

/// What a path names when it is not a regular file, in words.
pub(crate) fn kind_of(metadata: &Metadata) -> &'static str {
    let kind = metadata.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a folder"
    } else if kind.is_symlink() {
        "a link"
    } else {
        "not a regular file"
    }
}

/// Reads at most `limit + 1` bytes of the regular file at `path` (so a larger file shows as
/// one), refusing anything else before opening it: a FIFO would block the read for ever, a
/// device never end. The file opened is checked to be the file looked at.
pub(crate) fn read_regular(path: &Path, limit: usize) -> Result<(Vec<u8>, FileKey), String> {
    let looked = std::fs::metadata(path).map_err(|error| error.to_string())?;
    if !looked.is_file() {
        return Err(format!("is {}, not a regular file", kind_of(&looked)));
    }
    let file = File::open(path).map_err(|error| error.to_string())?;
    let opened = file.metadata().map_err(|error| error.to_string())?;
    let key = FileKey::of(&opened, path);
    if !opened.is_file() || key != FileKey::of(&looked, path) {
        return Err("changed while it was read; try again".to_owned());
    }
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| error.to_string())?;
    Ok((bytes, key))
}

/// The text of a user's file of `what` kind (`a plant file`, `a questions file`): at most
/// `limit` bytes of a regular file, UTF-8; every refusal names the file as `shown`.
pub fn read_text_file(path: &Path, shown: &str, what: &str, limit: usize) -> anyhow::Result<String> {
    let (bytes, _) =
        read_regular(path, limit).map_err(|reason| anyhow::anyhow!("cannot read {shown}: {reason}"))?;
    if bytes.len() > limit {
        anyhow::bail!("{shown} has more than {limit} bytes; {what} may have at most {limit}");
    }
    String::from_utf8(bytes).map_err(|error| {
        anyhow::anyhow!(
            "{shown} is not UTF-8 text (byte {} is not)",
            error.utf8_error().valid_up_to()
        )
    })
}
