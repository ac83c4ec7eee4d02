//! The XDP program, its XSKMAP and the BPF link attaching it to a netdev:
//! one per netdev (per network namespace and ifindex), shared by every
//! port on it and found through a process-wide registry of weak
//! references (see the parent module's docs, "Several workers").

use super::XdpMode;
use crate::error::IoError;
use crate::xdp_sys;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, Weak};

/// The XDP program, its XSKMAP and the link attaching it to one netdev,
/// shared by every port on that netdev (see the module docs).
pub struct Attachment {
    ifname: String,
    ifindex: i32,
    pub(super) map: OwnedFd,
    _prog: OwnedFd,
    /// Taken (closed) in `Drop` under the registry lock, so a concurrent
    /// open never sees a half-detached netdev.
    link: Option<OwnedFd>,
    pub(super) native: bool,
    /// The program was loaded with BPF_F_XDP_HAS_FRAGS.
    pub(super) frags: bool,
    key: AttachKey,
}

impl std::fmt::Debug for Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachment")
            .field("ifname", &self.ifname)
            .field("ifindex", &self.ifindex)
            .field("native", &self.native)
            .field("frags", &self.frags)
            .finish()
    }
}

/// (netns device, netns inode, ifindex): ifindexes are per namespace.
type AttachKey = (u64, u64, i32);

static REGISTRY: Mutex<Vec<(AttachKey, Weak<Attachment>)>> = Mutex::new(Vec::new());

fn registry() -> std::sync::MutexGuard<'static, Vec<(AttachKey, Weak<Attachment>)>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

fn netns_id() -> Result<(u64, u64), IoError> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata("/proc/thread-self/ns/net").map_err(|e| IoError::Sys {
        op: "stat /proc/thread-self/ns/net",
        source: e,
    })?;
    Ok((m.dev(), m.ino()))
}

impl Attachment {
    /// The netdev's attachment, created (program loaded and attached) if
    /// this is the first port on it in this process. With `frags` the
    /// program is loaded as multi-buffer aware (BPF_F_XDP_HAS_FRAGS) when
    /// the kernel takes the flag.
    pub(super) fn get_or_create(
        ifname: &str,
        ifindex: i32,
        max_entries: u32,
        mode: XdpMode,
        frags: bool,
    ) -> Result<Arc<Attachment>, IoError> {
        let (dev, ino) = netns_id()?;
        let key = (dev, ino, ifindex);
        let mut reg = registry();
        reg.retain(|(_, w)| w.strong_count() > 0);
        if let Some(a) = reg
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(a);
        }
        let xdp_err = |why: String| IoError::Xdp {
            ifname: ifname.to_string(),
            why,
        };
        let map = xdp_sys::xskmap_create(max_entries).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) => IoError::PermissionDenied {
                what: format!("creating an XSKMAP for '{ifname}'"),
            },
            _ => xdp_err(format!("creating the XSKMAP: {e}")),
        })?;
        let load = |flags| xdp_sys::load_redirect_program(&map, xdp_sys::XDP_DROP, flags);
        let (prog, frags) = match load(if frags {
            xdp_sys::BPF_F_XDP_HAS_FRAGS
        } else {
            0
        }) {
            Ok(p) => (p, frags),
            // Kernels before 5.18 refuse the flag (EINVAL): a program
            // without it still serves frames of one page.
            Err(e) if frags && e.raw_os_error() == Some(libc::EINVAL) => {
                tracing::warn!(netdev = ifname, reason = %e,
                    "the kernel refuses a multi-buffer XDP program (BPF_F_XDP_HAS_FRAGS, Linux 5.18): loading it single-buffer");
                (
                    load(0).map_err(|e| xdp_err(format!("loading the XDP program: {e}")))?,
                    false,
                )
            }
            Err(e) => return Err(xdp_err(format!("loading the XDP program: {e}"))),
        };
        let busy =
            |e: &io::Error| matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST));
        let busy_err = || {
            xdp_err(format!(
                "the netdev already has an XDP program attached (another vecgate, or \
                 `ip link set dev {ifname} xdp off` if it is stale)"
            ))
        };
        let (link, native) = match mode {
            XdpMode::Generic => (
                xdp_sys::link_xdp(&prog, ifindex, xdp_sys::XDP_FLAGS_SKB_MODE).map_err(|e| {
                    if busy(&e) {
                        busy_err()
                    } else {
                        xdp_err(format!("attaching XDP (generic): {e}"))
                    }
                })?,
                false,
            ),
            XdpMode::Native | XdpMode::Auto => {
                match xdp_sys::link_xdp(&prog, ifindex, xdp_sys::XDP_FLAGS_DRV_MODE) {
                    Ok(l) => (l, true),
                    Err(e) if busy(&e) => return Err(busy_err()),
                    Err(e) if mode == XdpMode::Native => {
                        return Err(xdp_err(format!("attaching XDP in native mode: {e}")))
                    }
                    Err(e) => {
                        tracing::info!(netdev = ifname, reason = %e, "no native XDP, attaching in generic (SKB) mode");
                        let l = xdp_sys::link_xdp(&prog, ifindex, xdp_sys::XDP_FLAGS_SKB_MODE)
                            .map_err(|e| {
                                if busy(&e) {
                                    busy_err()
                                } else {
                                    xdp_err(format!("attaching XDP (generic mode): {e}"))
                                }
                            })?;
                        (l, false)
                    }
                }
            }
        };
        tracing::debug!(
            netdev = ifname,
            native,
            frags,
            "XDP redirect program attached"
        );
        let a = Arc::new(Attachment {
            ifname: ifname.to_string(),
            ifindex,
            map,
            _prog: prog,
            link: Some(link),
            native,
            frags,
            key,
        });
        reg.push((key, Arc::downgrade(&a)));
        Ok(a)
    }

    /// Whether the program runs in native (driver) mode.
    pub fn native(&self) -> bool {
        self.native
    }

    /// Whether the program takes multi-buffer frames (BPF_F_XDP_HAS_FRAGS).
    pub fn frags(&self) -> bool {
        self.frags
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        let mut reg = registry();
        // Detaches the program (last reference to the link).
        drop(self.link.take());
        let key = self.key;
        reg.retain(|(k, w)| *k != key || w.strong_count() > 0);
    }
}
