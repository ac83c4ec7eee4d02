//! The raw `bpf(2)` calls of the tcx ingress guard ([`crate::IngressGuard`]):
//! load the two-instruction drop program, attach it at a netdev's tcx
//! ingress hook through a BPF link, detach it, and read back what is
//! attached there (for the log line and for tests). Every `unsafe` block is
//! small and commented.
//!
//! Layouts follow the kernel's stable UAPI `linux/bpf.h` (`union bpf_attr`,
//! `struct bpf_insn`, `struct bpf_prog_info`, `struct bpf_link_info`);
//! tcx is Linux ≥ 6.6 (`BPF_TCX_INGRESS`, `BPF_LINK_TYPE_TCX`).

use crate::bpf_sys::{bpf, insn, link_create, load_program, owned, BpfInsn, Program};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

// linux/bpf.h: commands.
const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_PROG_QUERY: libc::c_long = 16;
const BPF_LINK_DETACH: libc::c_long = 34;
/// `enum bpf_prog_type`: BPF_PROG_TYPE_SCHED_CLS.
const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
/// `enum bpf_attach_type`: BPF_TCX_INGRESS.
pub const BPF_TCX_INGRESS: u32 = 46;
/// `BPF_F_BEFORE` without a relative program: attach at the front.
const BPF_F_BEFORE: u32 = 1 << 3;
/// `TC_ACT_SHOT` (`TCX_DROP`): the frame is freed at the hook.
const TC_ACT_SHOT: i32 = 2;

/// The program's name (`bpftool prog` shows it; at most 15 bytes).
pub const PROG_NAME: &str = "vecgate_guard";

/// The whole program: `r0 = TC_ACT_SHOT; exit`.
const DROP_PROGRAM: [BpfInsn; 2] = [
    // BPF_ALU64 | BPF_MOV | BPF_K, dst r0
    insn(0xb7, 0, 0, 0, TC_ACT_SHOT),
    // BPF_JMP | BPF_EXIT
    insn(0x95, 0, 0, 0, 0),
];

/// `union bpf_attr` for BPF_LINK_DETACH.
#[repr(C)]
struct LinkDetachAttr {
    link_fd: u32,
}

/// `union bpf_attr` for BPF_PROG_QUERY.
#[repr(C)]
#[derive(Default)]
struct ProgQueryAttr {
    target_ifindex: u32,
    attach_type: u32,
    query_flags: u32,
    attach_flags: u32,
    prog_ids: u64,
    count: u32,
    _pad: u32,
    prog_attach_flags: u64,
    link_ids: u64,
    link_attach_flags: u64,
    revision: u64,
}

/// `union bpf_attr` for BPF_PROG_GET_FD_BY_ID.
#[repr(C)]
#[derive(Default)]
struct GetFdByIdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

/// `union bpf_attr` for BPF_OBJ_GET_INFO_BY_FD.
#[repr(C)]
struct InfoByFdAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// `struct bpf_prog_info` up to `name` (the kernel fills what fits).
#[repr(C)]
#[derive(Default)]
struct ProgInfo {
    prog_type: u32,
    id: u32,
    tag: [u8; 8],
    jited_prog_len: u32,
    xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
    load_time: u64,
    created_by_uid: u32,
    nr_map_ids: u32,
    map_ids: u64,
    name: [u8; 16],
}

/// `struct bpf_link_info` up to `prog_id` (the kernel fills what fits).
#[repr(C)]
#[derive(Default)]
struct LinkInfo {
    link_type: u32,
    id: u32,
    prog_id: u32,
}

/// Loads the drop program as a tcx ingress program (needs CAP_BPF and
/// CAP_NET_ADMIN).
pub fn load_drop_program() -> io::Result<OwnedFd> {
    load_program(&Program {
        prog_type: BPF_PROG_TYPE_SCHED_CLS,
        insns: &DROP_PROGRAM,
        name: PROG_NAME,
        flags: 0,
        attach_type: BPF_TCX_INGRESS,
    })
}

/// Attaches `prog` at the tcx ingress hook of `ifindex` (in the calling
/// thread's network namespace), in front of the programs already there
/// (one of them returning `TC_ACT_OK` would end the chain, and hand the
/// frame to the stack, before a program behind it runs). The
/// program stays attached while the returned link descriptor is open (in
/// this process or a child that inherited it) or until [`link_detach`].
/// Kernels before 6.6 answer EINVAL.
pub fn link_tcx_ingress(prog: &OwnedFd, ifindex: i32) -> io::Result<OwnedFd> {
    link_create(prog, ifindex, BPF_TCX_INGRESS, BPF_F_BEFORE)
}

/// Detaches the program of `link` now, whoever else still holds the
/// descriptor (a child between fork and exec).
pub fn link_detach(link: &OwnedFd) -> io::Result<()> {
    let mut a = LinkDetachAttr {
        link_fd: link.as_raw_fd() as u32,
    };
    bpf(BPF_LINK_DETACH, &mut a).map(|_| ())
}

fn info_by_fd<T>(fd: &OwnedFd, info: &mut T) -> io::Result<()> {
    let mut a = InfoByFdAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: std::mem::size_of::<T>() as u32,
        info: info as *mut T as u64,
    };
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a).map(|_| ())
}

/// The id of link `link` (`bpftool link show id N`).
pub fn link_id(link: &OwnedFd) -> io::Result<u32> {
    let mut info = LinkInfo::default();
    info_by_fd(link, &mut info)?;
    Ok(info.id)
}

/// The programs attached at the tcx ingress hook of `ifindex` (in the
/// calling thread's network namespace), in the order they run: (program
/// id, link id; 0 when attached without a link). Needs CAP_NET_ADMIN.
pub fn tcx_ingress_query(ifindex: i32) -> io::Result<Vec<(u32, u32)>> {
    let mut progs = vec![0u32; 64];
    let mut links = vec![0u32; 64];
    let mut a = ProgQueryAttr {
        target_ifindex: ifindex as u32,
        attach_type: BPF_TCX_INGRESS,
        prog_ids: progs.as_mut_ptr() as u64,
        count: progs.len() as u32,
        link_ids: links.as_mut_ptr() as u64,
        ..ProgQueryAttr::default()
    };
    match bpf(BPF_PROG_QUERY, &mut a) {
        // More than fit: the first ones were filled in.
        Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {}
        r => {
            r?;
        }
    }
    let n = (a.count as usize).min(progs.len());
    Ok(progs[..n]
        .iter()
        .copied()
        .zip(links[..n].iter().copied())
        .collect())
}

/// The name of program `id` (needs CAP_SYS_ADMIN to open it by id).
pub fn prog_name(id: u32) -> io::Result<String> {
    let mut a = GetFdByIdAttr {
        id,
        ..GetFdByIdAttr::default()
    };
    let fd = owned(bpf(BPF_PROG_GET_FD_BY_ID, &mut a)?)?;
    let mut info = ProgInfo::default();
    info_by_fd(&fd, &mut info)?;
    let end = info.name.iter().position(|&c| c == 0).unwrap_or(16);
    Ok(String::from_utf8_lossy(&info.name[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        assert_eq!(std::mem::size_of::<ProgQueryAttr>(), 64);
        assert_eq!(std::mem::offset_of!(ProgQueryAttr, link_ids), 40);
        assert_eq!(std::mem::offset_of!(ProgInfo, name), 64);
        assert!(PROG_NAME.len() <= 15);
        // r0 = 2; exit
        let bytes: Vec<[u8; 8]> = DROP_PROGRAM
            .iter()
            .map(|i| {
                let mut b = [0u8; 8];
                b[0] = i.code;
                b[1] = i.regs;
                b[2..4].copy_from_slice(&i.off.to_le_bytes());
                b[4..].copy_from_slice(&i.imm.to_le_bytes());
                b
            })
            .collect();
        assert_eq!(
            bytes,
            vec![[0xb7, 0, 0, 0, 2, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]]
        );
    }
}
