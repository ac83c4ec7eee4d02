//! The `bpf(2)` plumbing both of vecgate's programs share — the AF_XDP
//! redirect program ([`crate::xdp_sys`]) and the tcx ingress guard
//! ([`crate::tcx_sys`]): the instruction and attribute layouts, the raw
//! call, loading a program (with the verifier's log on a rejection) and
//! attaching one through a BPF link. Every `unsafe` block is small and
//! commented.
//!
//! Layouts follow the kernel's stable UAPI `linux/bpf.h` (`union
//! bpf_attr`, `struct bpf_insn`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// linux/bpf.h: commands.
pub(crate) const BPF_PROG_LOAD: libc::c_long = 5;
pub(crate) const BPF_LINK_CREATE: libc::c_long = 28;

/// `struct bpf_insn`: opcode, dst (low nibble) and src (high nibble)
/// registers, offset, immediate. The register nibbles are in this order on
/// little-endian machines, the only ones vecgate builds for.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BpfInsn {
    pub(crate) code: u8,
    pub(crate) regs: u8,
    pub(crate) off: i16,
    pub(crate) imm: i32,
}

/// One instruction.
pub(crate) const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> BpfInsn {
    BpfInsn {
        code,
        regs: (dst & 0xf) | (src << 4),
        off,
        imm,
    }
}

/// `union bpf_attr` for BPF_PROG_LOAD (up to expected_attach_type).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` for BPF_LINK_CREATE, with the `tcx` tail (relative
/// fd/id and expected revision: zero, which an XDP link ignores).
#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    relative_fd: u32,
    _pad: u32,
    expected_revision: u64,
}

/// `bpf(cmd, attr, sizeof attr)`.
pub(crate) fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, exclusively borrowed repr(C) prefix of
    // `union bpf_attr` of exactly the size passed (the kernel treats the
    // missing tail as zero); pointers inside it, set by the callers,
    // reference memory alive and large enough for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A descriptor bpf(2) returned, owned.
pub(crate) fn owned(fd: libc::c_long) -> io::Result<OwnedFd> {
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    // SAFETY: `fd` was just returned by bpf(2) as a new descriptor that
    // nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An object name as bpf(2) takes it: at most 15 bytes and a NUL.
pub(crate) fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    let b = s.as_bytes();
    let l = b.len().min(15);
    n[..l].copy_from_slice(&b[..l]);
    n
}

/// What to load: type, instructions, name, `prog_flags`, attach type.
pub(crate) struct Program<'a> {
    pub prog_type: u32,
    pub insns: &'a [BpfInsn],
    pub name: &'a str,
    pub flags: u32,
    pub attach_type: u32,
}

/// Loads `p` (GPL). On a verifier rejection the error carries the
/// verifier's log (the load is tried again with it).
pub(crate) fn load_program(p: &Program<'_>) -> io::Result<OwnedFd> {
    let license = c"GPL";
    let mut a = ProgLoadAttr {
        prog_type: p.prog_type,
        insn_cnt: p.insns.len() as u32,
        insns: p.insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_flags: p.flags,
        prog_name: name16(p.name),
        expected_attach_type: p.attach_type,
        ..ProgLoadAttr::default()
    };
    match bpf(BPF_PROG_LOAD, &mut a) {
        Ok(fd) => owned(fd),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EACCES)) => {
            let mut log = vec![0u8; 4096];
            a.log_level = 1;
            a.log_size = log.len() as u32;
            a.log_buf = log.as_mut_ptr() as u64;
            match bpf(BPF_PROG_LOAD, &mut a) {
                Ok(fd) => owned(fd),
                Err(_) => {
                    let end = log.iter().position(|&c| c == 0).unwrap_or(log.len());
                    Err(io::Error::new(
                        e.kind(),
                        format!("{e}; verifier: {}", String::from_utf8_lossy(&log[..end])),
                    ))
                }
            }
        }
        Err(e) => Err(e),
    }
}

/// Attaches `prog` to `ifindex` (in the calling thread's network
/// namespace) at `attach_type` through a BPF link: the program is detached
/// when the returned descriptor closes (and with it at process exit,
/// however the process ends), so nothing stays behind on the host.
pub(crate) fn link_create(
    prog: &OwnedFd,
    ifindex: i32,
    attach_type: u32,
    flags: u32,
) -> io::Result<OwnedFd> {
    let mut a = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex as u32,
        attach_type,
        flags,
        ..LinkCreateAttr::default()
    };
    owned(bpf(BPF_LINK_CREATE, &mut a)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_uapi() {
        assert_eq!(std::mem::size_of::<BpfInsn>(), 8);
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 72);
        assert_eq!(std::mem::size_of::<LinkCreateAttr>(), 32);
        assert_eq!(insn(0x61, 2, 1, 16, 0).regs, 0x12);
        assert_eq!(
            &name16("vecgate_guard_and_more")[..16],
            b"vecgate_guard_a\0"
        );
    }
}
