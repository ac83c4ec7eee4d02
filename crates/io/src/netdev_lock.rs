//! One gateway per netdev: a lock file held with `flock` for the process
//! lifetime.
//!
//! Two gateways attached to one netdev would both receive and forward every
//! frame. Each gateway takes an exclusive `flock` on
//! `/run/vecgate/netdev-<netns inode>-<ifname>.lock` before attaching; the
//! kernel releases it when the process exits however it exits, so a stale
//! file never blocks a restart. The file holds the holder's gateway name and
//! pid, read back to name it in the error of a second instance. The network
//! namespace is part of the name because netdev names are per namespace.

use crate::error::IoError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where the lock files live.
pub const LOCK_DIR: &str = "/run/vecgate";

/// An exclusive claim on one netdev, released when dropped or when the
/// process dies.
#[derive(Debug)]
pub struct NetdevLock {
    _file: File,
    path: PathBuf,
}

impl NetdevLock {
    /// Claims `ifname` (in the calling thread's network namespace) for
    /// `holder` (written into the file: the gateway's name), or says who
    /// holds it.
    pub fn acquire(ifname: &str, holder: &str) -> Result<Self, IoError> {
        Self::acquire_in(Path::new(LOCK_DIR), ifname, holder)
    }

    /// [`NetdevLock::acquire`] with the lock files under `dir`.
    pub fn acquire_in(dir: &Path, ifname: &str, holder: &str) -> Result<Self, IoError> {
        let sys = |op: &'static str| move |e: std::io::Error| IoError::Sys { op, source: e };
        let ns = std::fs::metadata("/proc/thread-self/ns/net").map_err(sys("stat netns"))?;
        std::fs::create_dir_all(dir).map_err(sys("creating the lock directory"))?;
        let safe: String = ifname
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() && c != '/' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("netdev-{}-{safe}.lock", ns.ino()));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(&path)
            .map_err(sys("opening the netdev lock file"))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut who = String::new();
                let _ = file.read_to_string(&mut who);
                let who = who.trim();
                return Err(IoError::InUse {
                    ifname: ifname.to_string(),
                    holder: if who.is_empty() {
                        "another process".to_string()
                    } else {
                        who.to_string()
                    },
                    lock: path,
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(sys("flock")(e)),
        }
        let text = format!("gateway {holder} (pid {})\n", std::process::id());
        file.set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| file.write_all(text.as_bytes()))
            .map_err(sys("writing the netdev lock file"))?;
        Ok(NetdevLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_claim_names_the_first() {
        let dir = std::env::temp_dir().join(format!("vg-lock-{}", std::process::id()));
        let a = NetdevLock::acquire_in(&dir, "veth-x", "gw-a").unwrap();
        let e = NetdevLock::acquire_in(&dir, "veth-x", "gw-b").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("'veth-x'"), "{msg}");
        assert!(
            msg.contains(&format!("gateway gw-a (pid {})", std::process::id())),
            "{msg}"
        );
        // Another netdev is free; the first one is free again once dropped.
        let _b = NetdevLock::acquire_in(&dir, "veth-y", "gw-b").unwrap();
        drop(a);
        let _c = NetdevLock::acquire_in(&dir, "veth-x", "gw-b").unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
