//! Reading secret files (ESP key files, IKE PSK and private key files, API
//! token files): the one place that decides what a secret file may be
//! (and, in [`read_public_file`], what a certificate or CRL file may be).
//!
//! A secret file is a regular file (no FIFO that would block a reader
//! forever, no `/dev/zero` that would fill memory, no directory, no
//! symbolic link that could point anywhere), small, and readable by its
//! owner only. The file is opened first (`O_NOFOLLOW | O_NONBLOCK`) and
//! the checks are made on the opened descriptor (`fstat`), so a file
//! swapped between check and read is never read; the read itself is
//! capped. Contents are zeroized when dropped.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use zeroize::Zeroizing;

/// Largest secret file accepted (keys, PSKs and tokens are far smaller).
pub const MAX_SECRET_LEN: usize = 4096;

/// Why a secret file was refused. The messages name the path and the
/// reason; a missing file and one the process may not open read the same,
/// so an API caller cannot probe which files exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretError {
    /// Missing, not permitted, below a non-directory, or a symbolic link.
    Unreadable,
    /// Not a regular file (FIFO, socket, device, directory).
    NotRegular(&'static str),
    /// Group or others may access it (`mode & 0o077 != 0`).
    Exposed(u32),
    /// Larger than the cap.
    TooLarge(usize),
    /// Owned by another user than the one required (its uid).
    WrongOwner(u32),
    /// Another I/O error while reading.
    Io(String),
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::Unreadable => f.write_str(
                "cannot be opened (missing, not accessible, or a symbolic link; a secret file must be a regular file, not a link)",
            ),
            SecretError::NotRegular(kind) => {
                write!(f, "is a {kind}, not a regular file")
            }
            SecretError::Exposed(mode) => write!(
                f,
                "has mode {mode:04o}: group or others may access it (a secret file must be readable by its owner only: chmod 600)"
            ),
            SecretError::TooLarge(max) => write!(f, "is larger than {max} bytes"),
            SecretError::WrongOwner(uid) => write!(
                f,
                "is owned by uid {uid}: it must belong to the user vecgate runs as (root: chown root:root)"
            ),
            SecretError::Io(e) => write!(f, "cannot be read: {e}"),
        }
    }
}

impl std::error::Error for SecretError {}

fn kind_of(ft: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "directory"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else if ft.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}

/// Reads secret file `path`: a regular file of at most `max_len` bytes
/// (capped at [`MAX_SECRET_LEN`]) that neither group nor others may
/// access. Never blocks on the file's type (a FIFO is opened non-blocking
/// and refused) and never reads more than `max_len + 1` bytes.
pub fn read_secret_file(path: &Path, max_len: usize) -> Result<Zeroizing<Vec<u8>>, SecretError> {
    read_checked(path, max_len, None)
}

/// [`read_secret_file`], and the file must belong to `owner` (the state
/// sync's key, which authenticates a peer that may take over SAs: a file
/// another user could have written is refused).
pub fn read_owned_secret_file(
    path: &Path,
    max_len: usize,
    owner: u32,
) -> Result<Zeroizing<Vec<u8>>, SecretError> {
    read_checked(path, max_len, Some(owner))
}

fn read_checked(
    path: &Path,
    max_len: usize,
    owner: Option<u32>,
) -> Result<Zeroizing<Vec<u8>>, SecretError> {
    let max_len = max_len.min(MAX_SECRET_LEN);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT | libc::EACCES | libc::EPERM | libc::ELOOP | libc::ENOTDIR) => {
                SecretError::Unreadable
            }
            _ => SecretError::Io(e.kind().to_string()),
        })?;
    // fstat of the descriptor just opened: what is read is what was checked.
    let meta = file
        .metadata()
        .map_err(|e| SecretError::Io(e.kind().to_string()))?;
    if !meta.file_type().is_file() {
        return Err(SecretError::NotRegular(kind_of(meta.file_type())));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SecretError::Exposed(mode));
    }
    if owner.is_some_and(|o| o != meta.uid()) {
        return Err(SecretError::WrongOwner(meta.uid()));
    }
    if meta.len() > max_len as u64 {
        return Err(SecretError::TooLarge(max_len));
    }
    // Room for one byte more than allowed, allocated once: the buffer never
    // grows, so no unzeroized copy is left behind by a reallocation.
    let mut buf = Zeroizing::new(Vec::with_capacity(max_len + 1));
    file.take(max_len as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| SecretError::Io(e.kind().to_string()))?;
    if buf.len() > max_len {
        return Err(SecretError::TooLarge(max_len));
    }
    Ok(buf)
}

/// Largest certificate, CA or CRL file accepted (a large CA's CRL lists
/// tens of thousands of serials).
pub const MAX_PUBLIC_LEN: usize = 4 << 20;

/// Reads a public file the configuration names (certificates, CA
/// certificates, CRLs): a regular file of at most [`MAX_PUBLIC_LEN`]
/// bytes, opened non-blocking so that a FIFO is refused rather than
/// waited on. Unlike a secret file it may be a symbolic link (such files
/// are often linked from a shared store) and readable by anyone.
pub fn read_public_file(path: &Path) -> Result<Vec<u8>, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("cannot be opened: {}", e.kind()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot be read: {}", e.kind()))?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "is a {}, not a regular file",
            kind_of(meta.file_type())
        ));
    }
    if meta.len() > MAX_PUBLIC_LEN as u64 {
        return Err(format!("is larger than {MAX_PUBLIC_LEN} bytes"));
    }
    let mut buf = Vec::new();
    file.take(MAX_PUBLIC_LEN as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot be read: {}", e.kind()))?;
    if buf.len() > MAX_PUBLIC_LEN {
        return Err(format!("is larger than {MAX_PUBLIC_LEN} bytes"));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    struct Dir(std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn dir(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("vg-secret-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn write(path: &Path, data: &[u8], mode: u32) {
        std::fs::write(path, data).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn public_files_are_regular_and_bounded() {
        let d = dir("pub");
        let p = d.0.join("ca.pem");
        write(&p, b"cert", 0o644);
        assert_eq!(read_public_file(&p).unwrap(), b"cert");
        let l = d.0.join("link.pem");
        std::os::unix::fs::symlink(&p, &l).unwrap();
        assert_eq!(read_public_file(&l).unwrap(), b"cert");
        assert!(read_public_file(&d.0).unwrap_err().contains("directory"));
        assert!(read_public_file(Path::new("/dev/zero"))
            .unwrap_err()
            .contains("character device"));
        assert!(read_public_file(&d.0.join("none")).is_err());
    }

    #[test]
    fn regular_private_file_is_read() {
        let d = dir("ok");
        let p = d.0.join("k");
        write(&p, b"00112233\n", 0o600);
        assert_eq!(&read_secret_file(&p, 64).unwrap()[..], b"00112233\n");
        write(&p, b"x", 0o400);
        assert_eq!(&read_secret_file(&p, 64).unwrap()[..], b"x");
    }

    #[test]
    fn owner_is_checked_when_asked() {
        let d = dir("owner");
        let p = d.0.join("k");
        write(&p, b"k", 0o600);
        let me = std::fs::metadata(&p).unwrap().uid();
        assert_eq!(&read_owned_secret_file(&p, 64, me).unwrap()[..], b"k");
        assert_eq!(
            read_owned_secret_file(&p, 64, me.wrapping_add(1)),
            Err(SecretError::WrongOwner(me))
        );
        // The mode is still checked first.
        write(&p, b"k", 0o640);
        assert_eq!(
            read_owned_secret_file(&p, 64, me),
            Err(SecretError::Exposed(0o640))
        );
    }

    #[test]
    fn exposed_large_and_missing_are_refused() {
        let d = dir("bad");
        let p = d.0.join("k");
        write(&p, b"secret", 0o644);
        assert_eq!(read_secret_file(&p, 64), Err(SecretError::Exposed(0o644)));
        assert!(read_secret_file(&p, 64)
            .unwrap_err()
            .to_string()
            .contains("chmod 600"));
        write(&p, b"secret", 0o620);
        assert_eq!(read_secret_file(&p, 64), Err(SecretError::Exposed(0o620)));
        write(&p, &[b'a'; 65], 0o600);
        assert_eq!(read_secret_file(&p, 64), Err(SecretError::TooLarge(64)));
        write(&p, &[b'a'; 5000], 0o600);
        assert_eq!(
            read_secret_file(&p, usize::MAX),
            Err(SecretError::TooLarge(MAX_SECRET_LEN))
        );
        // Missing and below a file read the same.
        let missing = read_secret_file(&d.0.join("nope"), 64).unwrap_err();
        assert_eq!(missing, SecretError::Unreadable);
        assert_eq!(read_secret_file(&p.join("below"), 64).unwrap_err(), missing);
    }

    #[test]
    fn special_files_are_refused_without_blocking() {
        let d = dir("special");
        assert_eq!(
            read_secret_file(Path::new("/dev/zero"), 64),
            Err(SecretError::NotRegular("character device"))
        );
        assert_eq!(
            read_secret_file(&d.0, 64),
            Err(SecretError::NotRegular("directory"))
        );
        let fifo = d.0.join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg("-m")
            .arg("600")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        // No writer: a blocking open would hang here forever.
        assert_eq!(
            read_secret_file(&fifo, 64),
            Err(SecretError::NotRegular("FIFO"))
        );
        let target = d.0.join("real");
        write(&target, b"k", 0o600);
        let link = d.0.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(read_secret_file(&link, 64), Err(SecretError::Unreadable));
    }
}
