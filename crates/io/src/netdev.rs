//! Queries and changes on Linux netdevs through ioctls (no netlink), and the
//! ingress guard.
//!
//! # What vecgate does to the host
//!
//! When vecgate owns a netdev through AF_PACKET, the kernel stack still sees
//! every frame too and would answer ARP, ping and TCP (with RSTs) for the
//! addresses configured on it. [`IngressGuard`] drops every frame at that
//! netdev's ingress hook: AF_PACKET taps run before it, so vecgate still
//! receives every frame, but the kernel's IP stack gets none. It does so
//! with a tcx ingress BPF program returning `TC_ACT_SHOT` (Linux ≥ 6.6),
//! attached through a BPF link: a few ns per frame, where the nftables
//! chain used before cost ~5 % of all CPU time in a GRE flow over a
//! 1500-byte veth (`nf_hook_slow` / `nft_do_chain` for every frame). Where
//! tcx cannot be attached it falls back to an nftables table
//! `netdev vecgate_<ifname>` whose ingress chain has `policy drop` (owned by
//! the guard's netlink socket, see [`crate::nft`]). Either way the guard is
//! removed when it is dropped, and by the kernel when the process dies
//! (the link's descriptor, or the table's socket, closes with it); the log
//! says at install which mechanism is used. Nothing else on the host is
//! changed; in particular the netdev's ethtool offload settings are left
//! alone and only reported ([`offload_report`]).

use crate::error::IoError;
use crate::nft::NftSocket;
use crate::sys;
use crate::tcx_sys;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

pub(crate) fn ctl_socket() -> Result<OwnedFd, IoError> {
    sys::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0).map_err(|e| IoError::Sys {
        op: "socket(AF_INET)",
        source: e,
    })
}

fn ifreq(name: &str) -> Result<sys::Ifreq, IoError> {
    sys::Ifreq::new(name).ok_or_else(|| IoError::InvalidName(name.to_string()))
}

fn query(name: &str, req: libc::c_ulong, op: &'static str) -> Result<sys::Ifreq, IoError> {
    let s = ctl_socket()?;
    query_on(s.as_raw_fd(), name, req, op)
}

/// The ioctl on an existing socket: it answers for the socket's network
/// namespace, whatever namespace the calling thread is in.
fn query_on(
    fd: RawFd,
    name: &str,
    req: libc::c_ulong,
    op: &'static str,
) -> Result<sys::Ifreq, IoError> {
    let mut ifr = ifreq(name)?;
    sys::ioctl_ifreq(fd, req, &mut ifr).map_err(|e| IoError::sys(op, name, e))?;
    Ok(ifr)
}

/// [`ifindex`] in the network namespace of socket `fd`.
pub(crate) fn ifindex_on(fd: RawFd, name: &str) -> Result<i32, IoError> {
    Ok(query_on(fd, name, libc::SIOCGIFINDEX, "SIOCGIFINDEX")?.i32_at0())
}

/// [`link_state`] in the network namespace of socket `fd`.
pub(crate) fn link_state_on(fd: RawFd, name: &str) -> Result<LinkState, IoError> {
    Ok(flags_to_state(
        query_on(fd, name, libc::SIOCGIFFLAGS, "SIOCGIFFLAGS")?.i16_at0(),
    ))
}

/// [`mtu`] in the network namespace of socket `fd`.
pub(crate) fn mtu_on(fd: RawFd, name: &str) -> Result<u32, IoError> {
    let v = query_on(fd, name, libc::SIOCGIFMTU, "SIOCGIFMTU")?.i32_at0();
    Ok(v.max(0) as u32)
}

fn flags_to_state(f: i16) -> LinkState {
    let f = i32::from(f);
    LinkState {
        admin_up: f & libc::IFF_UP != 0,
        running: f & libc::IFF_RUNNING != 0,
    }
}

/// Interface index of `name` in the calling thread's network namespace.
pub fn ifindex(name: &str) -> Result<i32, IoError> {
    Ok(query(name, libc::SIOCGIFINDEX, "SIOCGIFINDEX")?.i32_at0())
}

/// Hardware (MAC) address of `name`.
pub fn mac(name: &str) -> Result<[u8; 6], IoError> {
    let ifr = query(name, libc::SIOCGIFHWADDR, "SIOCGIFHWADDR")?;
    // struct sockaddr: 2 bytes family, then the address.
    let mut m = [0u8; 6];
    m.copy_from_slice(&ifr.data[2..8]);
    Ok(m)
}

/// MTU of `name` (L3 bytes).
pub fn mtu(name: &str) -> Result<u32, IoError> {
    let v = query(name, libc::SIOCGIFMTU, "SIOCGIFMTU")?.i32_at0();
    Ok(v.max(0) as u32)
}

/// Administrative and operational state of a netdev.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkState {
    /// IFF_UP: configured up.
    pub admin_up: bool,
    /// IFF_RUNNING: carrier present (for a veth: the peer is up too).
    pub running: bool,
}

/// Link state of `name` (SIOCGIFFLAGS).
pub fn link_state(name: &str) -> Result<LinkState, IoError> {
    Ok(flags_to_state(
        query(name, libc::SIOCGIFFLAGS, "SIOCGIFFLAGS")?.i16_at0(),
    ))
}

/// Sets `name` administratively up (SIOCSIFFLAGS with IFF_UP).
pub fn set_up(name: &str) -> Result<(), IoError> {
    let s = ctl_socket()?;
    let mut ifr = ifreq(name)?;
    sys::ioctl_ifreq(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr)
        .map_err(|e| IoError::sys("SIOCGIFFLAGS", name, e))?;
    let f = ifr.i16_at0() | libc::IFF_UP as i16;
    ifr.set_i16_at0(f);
    sys::ioctl_ifreq(s.as_raw_fd(), libc::SIOCSIFFLAGS, &mut ifr)
        .map_err(|e| IoError::sys("SIOCSIFFLAGS", name, e))
}

/// Moves the calling thread into the network namespace at `path` (for
/// example `/run/netns/NAME`). Sockets and taps opened afterwards on this
/// thread live in that namespace, and stay there when used from other threads.
pub fn enter_netns(path: &std::path::Path) -> Result<(), IoError> {
    let f = File::open(path).map_err(|e| IoError::Sys {
        op: "open netns",
        source: e,
    })?;
    sys::setns_net(f.as_raw_fd()).map_err(|e| IoError::Sys {
        op: "setns",
        source: e,
    })
}

/// The offload settings of a netdev, as ethtool reports them. vecgate only
/// reports these (super-packets need tx checksum, TSO/GSO on the peer side);
/// it never changes them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffloadReport {
    pub rx_csum: bool,
    pub tx_csum: bool,
    pub tso: bool,
    pub gso: bool,
    pub gro: bool,
}

/// Reads the offload settings of `name` (legacy ETHTOOL_G* ioctls).
pub fn offload_report(name: &str) -> Result<OffloadReport, IoError> {
    let s = ctl_socket()?;
    let fd = s.as_raw_fd();
    let get = |cmd| {
        sys::ethtool_get_value(fd, name, cmd)
            .map(|v| v != 0)
            .map_err(|e| IoError::sys("SIOCETHTOOL", name, e))
    };
    Ok(OffloadReport {
        rx_csum: get(sys::ETHTOOL_GRXCSUM)?,
        tx_csum: get(sys::ETHTOOL_GTXCSUM)?,
        tso: get(sys::ETHTOOL_GTSO)?,
        gso: get(sys::ETHTOOL_GGSO)?,
        gro: get(sys::ETHTOOL_GGRO)?,
    })
}

/// Whether `name` takes UDP GSO super-packets as they are
/// (`tx-udp-segmentation`, NETIF_F_GSO_UDP_L4). A socket with
/// PACKET_QDISC_BYPASS cannot leave the segmentation to the kernel: its
/// direct transmit path drops whatever would need software GSO.
pub fn udp_segmentation(name: &str) -> Result<bool, IoError> {
    let s = ctl_socket()?;
    sys::ethtool_feature_active(s.as_raw_fd(), name, "tx-udp-segmentation")
        .map(|v| v.unwrap_or(false))
        .map_err(|e| IoError::sys("SIOCETHTOOL", name, e))
}

/// How an [`IngressGuard`] keeps frames from the kernel's stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardMechanism {
    /// A tcx ingress BPF program returning `TC_ACT_SHOT`, attached through
    /// a BPF link (Linux ≥ 6.6).
    Tcx,
    /// An nftables `netdev` table whose ingress chain has `policy drop`,
    /// owned by the guard's netlink socket (Linux ≥ 5.12).
    Nftables,
}

impl std::fmt::Display for GuardMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GuardMechanism::Tcx => "tcx",
            GuardMechanism::Nftables => "nftables",
        })
    }
}

/// Which mechanism [`IngressGuard`] uses: tcx where the kernel attaches it,
/// nftables otherwise ([`GuardMode::Auto`], the default), or one of them
/// only. [`IngressGuard::install`] and [`IngressGuard::install_named`]
/// take it from the environment variable `VECGATE_INGRESS_GUARD`
/// (`auto`, `tcx` or `nftables`; unset: `auto`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GuardMode {
    /// tcx; nftables if the tcx program cannot be loaded or attached.
    #[default]
    Auto,
    /// tcx only: an error where it cannot be attached.
    Tcx,
    /// nftables only (the guard of vecgate before tcx).
    Nftables,
}

/// The environment variable that chooses the [`GuardMode`].
pub const GUARD_MODE_ENV: &str = "VECGATE_INGRESS_GUARD";

impl std::str::FromStr for GuardMode {
    type Err = IoError;

    fn from_str(s: &str) -> Result<Self, IoError> {
        match s {
            "" | "auto" => Ok(GuardMode::Auto),
            "tcx" => Ok(GuardMode::Tcx),
            "nft" | "nftables" => Ok(GuardMode::Nftables),
            other => Err(IoError::Guard(format!(
                "{GUARD_MODE_ENV}={other:?}: expected auto, tcx or nftables"
            ))),
        }
    }
}

impl GuardMode {
    /// The mode `VECGATE_INGRESS_GUARD` asks for (`Auto` when unset).
    pub fn from_env() -> Result<Self, IoError> {
        match std::env::var(GUARD_MODE_ENV) {
            Ok(v) => v.trim().parse(),
            Err(std::env::VarError::NotPresent) => Ok(GuardMode::Auto),
            Err(e) => Err(IoError::Guard(format!("{GUARD_MODE_ENV}: {e}"))),
        }
    }
}

/// The name of the tcx program every guard attaches (`bpftool prog`
/// lists it; [`tcx_ingress_programs`] finds it on a netdev).
pub const GUARD_PROGRAM_NAME: &str = tcx_sys::PROG_NAME;

/// Keeps the kernel stack from seeing what arrives on one netdev — it
/// neither answers (ARP, ping, TCP RSTs) nor forwards it — while AF_PACKET
/// still receives every frame: AF_PACKET taps run before the netdev's
/// ingress hook, where the guard drops.
///
/// Two mechanisms, the first one that works ([`GuardMode`]):
///
/// - **tcx** (Linux ≥ 6.6): a tcx ingress BPF program of two instructions,
///   `r0 = TC_ACT_SHOT; exit`, named `vecgate_guard`, attached through a BPF
///   link (`BPF_LINK_CREATE`, `BPF_TCX_INGRESS`) in front of any tcx
///   program already on the netdev (one that passes a frame would
///   otherwise hand it to the stack first). Chosen first because it
///   costs a few ns per frame where the nftables chain cost ~5 % of all CPU
///   time on the machine (perf, a GRE flow over a 1500-byte veth underlay:
///   `nf_hook_slow` / `nft_do_chain_netdev` / `nft_do_chain` for every
///   received frame running the empty drop chain).
/// - **nftables**, where tcx cannot be loaded or attached (an older kernel:
///   EINVAL; no CAP_BPF: EPERM): a table `netdev <name>` whose ingress chain
///   has `policy drop`, owned by a netlink socket this guard holds
///   ([`crate::nft`]).
///
/// Either way the guard is removed on drop, and by the kernel when the
/// process dies however it dies: the BPF link is detached when its
/// descriptor closes, the owner table deleted when its socket closes.
/// Install logs `ingress guard installed: tcx (program vecgate_guard, BPF
/// link N)` (`bpftool link show id N`) or `ingress guard installed:
/// nftables (table netdev NAME)`, the latter after a warning saying why
/// tcx could not be used;
/// [`IngressGuard::mechanism`] tells the program. A table of the guard's
/// name left by an older vecgate (without the owner flag, so it outlived
/// its process) is deleted at install whichever mechanism is used.
#[derive(Debug)]
pub struct IngressGuard {
    table: String,
    ifname: String,
    inner: Option<Inner>,
}

#[derive(Debug)]
enum Inner {
    Tcx { link: OwnedFd, link_id: u32 },
    Nft(NftSocket),
}

impl IngressGuard {
    /// Installs the guard on `ifname` named `vecgate_<ifname>` (replacing a
    /// stale nftables table of that name left by an older vecgate).
    pub fn install(ifname: &str) -> Result<Self, IoError> {
        Self::install_named(ifname, &format!("vecgate_{}", sanitize(ifname)))
    }

    /// Installs the guard under an explicit name (one per gateway + netdev
    /// when several gateways share a namespace: the nftables table's name),
    /// in the calling thread's network namespace, with the mechanism
    /// `VECGATE_INGRESS_GUARD` asks for ([`GuardMode::from_env`]).
    pub fn install_named(ifname: &str, table: &str) -> Result<Self, IoError> {
        Self::install_with(ifname, table, GuardMode::from_env()?)
    }

    /// [`IngressGuard::install_named`] with an explicit [`GuardMode`].
    pub fn install_with(ifname: &str, table: &str, mode: GuardMode) -> Result<Self, IoError> {
        if sys::Ifreq::new(ifname).is_none() || ifname.contains('"') {
            return Err(IoError::InvalidName(ifname.to_string()));
        }
        let ifindex = ifindex(ifname)?;
        let table = sanitize(table);
        let nft_loaded = mode == GuardMode::Nftables || nf_tables_loaded();
        let mut sock = if nft_loaded {
            match NftSocket::open() {
                Ok(s) => Some(s),
                Err(e) if mode == GuardMode::Nftables => return Err(e),
                // No nf_tables in this kernel: no stale table either.
                Err(_) => None,
            }
        } else {
            None
        };
        if let Some(s) = sock.as_mut() {
            remove_stale(s, &table, mode)?;
        }
        let inner = match mode {
            GuardMode::Nftables => Inner::Nft(add_nft(sock, &table, ifname)?),
            GuardMode::Tcx => attach_tcx(ifindex).map_err(|e| {
                IoError::Guard(format!(
                    "attaching the tcx ingress program on {ifname} (Linux >= 6.6, CAP_BPF): {e}"
                ))
            })?,
            GuardMode::Auto => match attach_tcx(ifindex) {
                Ok(t) => t,
                Err(tcx) => {
                    tracing::warn!(
                        netdev = %ifname,
                        "ingress guard: no tcx program ({tcx}; needs Linux >= 6.6 and CAP_BPF), \
                         falling back to an nftables table"
                    );
                    Inner::Nft(add_nft(sock, &table, ifname).map_err(|e| {
                        IoError::Guard(format!(
                            "on {ifname}: tcx ingress program: {tcx}; nftables fallback: {e}"
                        ))
                    })?)
                }
            },
        };
        let guard = IngressGuard {
            table,
            ifname: ifname.to_string(),
            inner: Some(inner),
        };
        match &guard.inner {
            Some(Inner::Tcx { link_id, .. }) => tracing::info!(
                netdev = %ifname,
                "ingress guard installed: tcx (program {GUARD_PROGRAM_NAME}, BPF link {link_id})"
            ),
            _ => tracing::info!(
                netdev = %ifname,
                "ingress guard installed: nftables (table netdev {})",
                guard.table
            ),
        }
        Ok(guard)
    }

    /// The guard's name: its nftables table's name under nftables (under
    /// tcx, the name of the stale table it would have replaced).
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Which mechanism this guard uses.
    pub fn mechanism(&self) -> GuardMechanism {
        match self.inner {
            Some(Inner::Nft(_)) => GuardMechanism::Nftables,
            _ => GuardMechanism::Tcx,
        }
    }

    /// The id of the BPF link holding the tcx program (`None` under
    /// nftables).
    pub fn link_id(&self) -> Option<u32> {
        match self.inner {
            Some(Inner::Tcx { link_id, .. }) => Some(link_id),
            _ => None,
        }
    }

    /// Removes the guard now, reporting failure (Drop does it silently).
    pub fn remove(mut self) -> Result<(), IoError> {
        self.remove_inner()
    }

    fn remove_inner(&mut self) -> Result<(), IoError> {
        // Removed explicitly (synchronous even while a forked child briefly
        // shares the descriptor), then the descriptor closes, which would
        // remove it too.
        match self.inner.take() {
            None => Ok(()),
            Some(Inner::Tcx { link, .. }) => tcx_sys::link_detach(&link)
                .map_err(|e| IoError::sys("BPF_LINK_DETACH (tcx ingress guard)", &self.ifname, e)),
            Some(Inner::Nft(mut sock)) => match sock.delete_table(&self.table) {
                Ok(()) | Err(libc::ENOENT) => Ok(()),
                Err(e) => Err(IoError::Nft(format!(
                    "deleting table {}: {}",
                    self.table,
                    std::io::Error::from_raw_os_error(e)
                ))),
            },
        }
    }
}

impl Drop for IngressGuard {
    fn drop(&mut self) {
        if let Err(e) = self.remove_inner() {
            tracing::warn!(netdev = %self.ifname, table = %self.table, error = %e,
                "could not remove ingress guard");
        }
    }
}

/// Loads the drop program and links it at `ifindex`'s tcx ingress.
fn attach_tcx(ifindex: i32) -> std::io::Result<Inner> {
    let prog = tcx_sys::load_drop_program()?;
    let link = tcx_sys::link_tcx_ingress(&prog, ifindex)?;
    // The link holds the program; its id only names it in the log.
    let link_id = tcx_sys::link_id(&link).unwrap_or(0);
    Ok(Inner::Tcx { link, link_id })
}

/// Creates the owner table `table` with its drop chain on `ifname`.
fn add_nft(sock: Option<NftSocket>, table: &str, ifname: &str) -> Result<NftSocket, IoError> {
    let mut sock = match sock {
        Some(s) => s,
        None => NftSocket::open()?,
    };
    sock.add_owned_ingress_drop(table, ifname).map_err(|e| {
        IoError::Nft(format!(
            "creating table netdev {table} (owner flag, Linux >= 5.12) on {ifname}: {}",
            std::io::Error::from_raw_os_error(e)
        ))
    })?;
    Ok(sock)
}

/// Deletes a table `table` without the owner flag (a vecgate before owner
/// tables, killed: stale). One owned by a live socket is not ours to take
/// (EPERM): an error. Under tcx other failures (nf_tables unusable) only
/// mean there is nothing stale to remove.
fn remove_stale(sock: &mut NftSocket, table: &str, mode: GuardMode) -> Result<(), IoError> {
    match sock.delete_table(table) {
        Ok(()) => {
            tracing::info!(%table, "removed a stale ingress guard table");
            Ok(())
        }
        Err(libc::ENOENT) => Ok(()),
        Err(libc::EPERM) => Err(IoError::Nft(format!(
            "table netdev {table} is owned by another running process"
        ))),
        Err(e) if mode == GuardMode::Nftables => Err(IoError::Nft(format!(
            "deleting stale table {table}: {}",
            std::io::Error::from_raw_os_error(e)
        ))),
        Err(e) => {
            tracing::debug!(%table, error = %std::io::Error::from_raw_os_error(e),
                "no stale ingress guard table checked");
            Ok(())
        }
    }
}

/// Whether nf_tables is in the kernel now, so that a stale table may
/// exist — without loading the module to find out (opening a netfilter
/// netlink socket would). True when unsure.
fn nf_tables_loaded() -> bool {
    let Ok(mods) = std::fs::read_to_string("/proc/modules") else {
        // A kernel without modules: nf_tables is built in or absent, and
        // asking loads nothing.
        return true;
    };
    if mods
        .lines()
        .any(|l| l.split(' ').next() == Some("nf_tables"))
        || std::path::Path::new("/sys/module/nf_tables").exists()
    {
        return true;
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    match std::fs::read_to_string(format!("/lib/modules/{}/modules.builtin", release.trim())) {
        Ok(builtin) => builtin.lines().any(|l| l.ends_with("/nf_tables.ko")),
        Err(_) => true,
    }
}

/// A program attached at a netdev's tcx ingress hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcxProgram {
    /// The program's id (`bpftool prog show id N`).
    pub id: u32,
    /// The BPF link's id; 0 for a program attached without a link.
    pub link_id: u32,
    /// The program's name ([`GUARD_PROGRAM_NAME`] for a guard).
    pub name: String,
}

/// The programs attached at `ifname`'s tcx ingress hook (in the calling
/// thread's network namespace), in the order they run: how to see a tcx
/// ingress guard (Debian 12's `bpftool net` predates tcx). Needs
/// CAP_SYS_ADMIN for the names; an empty list on kernels without tcx.
pub fn tcx_ingress_programs(ifname: &str) -> Result<Vec<TcxProgram>, IoError> {
    let ifindex = ifindex(ifname)?;
    let attached = match tcx_sys::tcx_ingress_query(ifindex) {
        Ok(v) => v,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Vec::new(),
        Err(e) => return Err(IoError::sys("BPF_PROG_QUERY (tcx ingress)", ifname, e)),
    };
    attached
        .into_iter()
        .map(|(id, link_id)| {
            let name = tcx_sys::prog_name(id)
                .map_err(|e| IoError::sys("BPF_PROG_GET_FD_BY_ID", ifname, e))?;
            Ok(TcxProgram { id, link_id, name })
        })
        .collect()
}

/// Keeps only characters valid in an nft identifier.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_queries() {
        assert_eq!(mtu("lo").unwrap(), 65536);
        assert_eq!(mac("lo").unwrap(), [0; 6]);
        assert!(ifindex("lo").unwrap() >= 1);
        assert!(link_state("lo").unwrap().admin_up);
    }

    #[test]
    fn missing_device_is_named() {
        let e = ifindex("nosuchdev0").unwrap_err();
        assert_eq!(e.to_string(), "no such network interface 'nosuchdev0'");
        assert!(matches!(
            ifindex("this-name-is-too-long"),
            Err(IoError::InvalidName(_))
        ));
    }

    #[test]
    fn guard_modes() {
        assert_eq!("".parse::<GuardMode>().unwrap(), GuardMode::Auto);
        assert_eq!("auto".parse::<GuardMode>().unwrap(), GuardMode::Auto);
        assert_eq!("tcx".parse::<GuardMode>().unwrap(), GuardMode::Tcx);
        assert_eq!("nft".parse::<GuardMode>().unwrap(), GuardMode::Nftables);
        assert_eq!(
            "nftables".parse::<GuardMode>().unwrap(),
            GuardMode::Nftables
        );
        assert_eq!(
            "iptables".parse::<GuardMode>().unwrap_err().to_string(),
            "ingress guard: VECGATE_INGRESS_GUARD=\"iptables\": expected auto, tcx or nftables"
        );
        assert_eq!(GuardMechanism::Tcx.to_string(), "tcx");
        assert_eq!(GuardMechanism::Nftables.to_string(), "nftables");
    }

    #[test]
    fn guard_errors_are_clear() {
        let e = IngressGuard::install_with("nosuchdev0", "t", GuardMode::Tcx).unwrap_err();
        assert_eq!(e.to_string(), "no such network interface 'nosuchdev0'");
        let e = IngressGuard::install_with("a\"b", "t", GuardMode::Auto).unwrap_err();
        assert!(matches!(e, IoError::InvalidName(_)), "{e}");
    }

    #[test]
    fn sanitize_table_names() {
        assert_eq!(sanitize("veth-a.1"), "veth_a_1");
    }
}
