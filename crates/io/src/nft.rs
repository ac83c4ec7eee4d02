//! The nftables ingress guard spoken directly over netlink, in a table the
//! kernel ties to our socket.
//!
//! Why netlink and not the `nft` command: a table created with
//! `NFT_TABLE_F_OWNER` (Linux ≥ 5.12) belongs to the netlink socket that
//! created it and is destroyed by the kernel when that socket is released
//! (`nft_rcv_nl_event`, NETLINK_URELEASE). Holding that socket in the
//! process makes the guard die with the process, whatever kills it
//! (`kill -9`, a panic, the OOM killer): the host is never left cut off from
//! a netdev nobody listens on any more. A `nft` child would own the table
//! only as long as it lives, which needs a second process kept in lockstep
//! with ours; a few dozen bytes of netlink here need none. No crate is used:
//! the well-known Rust ones wrap libnftnl (C) or do not cover netdev base
//! chains, and the messages below are three fixed shapes.
//!
//! Wire format: `linux/netfilter/nf_tables.h`, `linux/netfilter/nfnetlink.h`,
//! `linux/netlink.h` (stable UAPI). Integers inside nftables attributes are
//! big-endian; netlink headers are host-endian.

use crate::error::IoError;
use crate::sys;
use std::fs::File;
use std::io::{Read, Write};

const NETLINK_NETFILTER: i32 = 12;
const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_DELTABLE: u16 = 2;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFPROTO_NETDEV: u8 = 5;
const NFTA_TABLE_NAME: u16 = 1;
const NFTA_TABLE_FLAGS: u16 = 2;
/// The table is destroyed when its creating socket is released.
const NFT_TABLE_F_OWNER: u32 = 2;
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_CHAIN_POLICY: u16 = 5;
const NFTA_CHAIN_TYPE: u16 = 7;
const NFTA_HOOK_HOOKNUM: u16 = 1;
const NFTA_HOOK_PRIORITY: u16 = 2;
const NFTA_HOOK_DEV: u16 = 3;
const NF_NETDEV_INGRESS: u32 = 0;
const NF_DROP: u32 = 0;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_EXCL: u16 = 0x200;
const NLMSG_ERROR: u16 = 2;
const NLMSG_HDRLEN: usize = 16;

/// A netlink socket to nf_tables. Dropping it (or the process dying)
/// destroys every owner table it created.
#[derive(Debug)]
pub(crate) struct NftSocket {
    sock: File,
    seq: u32,
}

/// One netlink message being built: header, nfgenmsg, attributes.
struct Msg {
    buf: Vec<u8>,
}

impl Msg {
    fn new(ty: u16, flags: u16, seq: u32, family: u8, res_id: u16) -> Self {
        let mut buf = Vec::with_capacity(128);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, fixed in `finish`
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
        buf.push(family);
        buf.push(0); // NFNETLINK_V0
        buf.extend_from_slice(&res_id.to_be_bytes());
        Msg { buf }
    }

    fn attr(&mut self, ty: u16, data: &[u8]) {
        let len = 4 + data.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.pad();
    }

    fn str(&mut self, ty: u16, s: &str) {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        self.attr(ty, &v);
    }

    fn u32(&mut self, ty: u16, v: u32) {
        self.attr(ty, &v.to_be_bytes());
    }

    /// A nested attribute whose children `f` writes.
    fn nest(&mut self, ty: u16, f: impl FnOnce(&mut Msg)) {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        f(self);
        let len = (self.buf.len() - start) as u16;
        self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

impl NftSocket {
    /// Opens a socket in the calling thread's network namespace (it stays
    /// bound to that namespace whichever thread uses or drops it).
    pub(crate) fn open() -> Result<Self, IoError> {
        let fd = sys::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_NETFILTER,
        )
        .map_err(|e| IoError::Sys {
            op: "socket(AF_NETLINK, NETLINK_NETFILTER)",
            source: e,
        })?;
        // Never wait for ever on a kernel answer.
        let tv = libc::timeval {
            tv_sec: 5,
            tv_usec: 0,
        };
        sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv).map_err(|e| {
            IoError::Sys {
                op: "setsockopt(SO_RCVTIMEO)",
                source: e,
            }
        })?;
        Ok(NftSocket {
            sock: File::from(fd),
            seq: 1,
        })
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1).max(1);
        self.seq
    }

    /// Sends `msgs` as one nfnetlink batch (atomic in the kernel) and waits
    /// for the acknowledgement of the last one or the first error.
    fn batch(&mut self, build: impl FnOnce(&mut Self) -> Vec<Msg>) -> Result<(), i32> {
        let begin_seq = self.next_seq();
        let msgs = build(self);
        let end_seq = self.next_seq();
        let last = end_seq - 1;
        let mut out = Msg::new(
            NFNL_MSG_BATCH_BEGIN,
            NLM_F_REQUEST,
            begin_seq,
            0,
            NFNL_SUBSYS_NFTABLES,
        )
        .finish();
        for m in msgs {
            out.extend_from_slice(&m.finish());
        }
        out.extend_from_slice(
            &Msg::new(
                NFNL_MSG_BATCH_END,
                NLM_F_REQUEST,
                end_seq,
                0,
                NFNL_SUBSYS_NFTABLES,
            )
            .finish(),
        );
        match self.sock.write(&out) {
            Ok(n) if n == out.len() => {}
            Ok(_) => return Err(libc::EMSGSIZE),
            Err(e) => return Err(e.raw_os_error().unwrap_or(libc::EIO)),
        }
        let mut buf = vec![0u8; 8192];
        loop {
            let n = match self.sock.read(&mut buf) {
                Ok(n) => n,
                Err(e) => return Err(e.raw_os_error().unwrap_or(libc::EIO)),
            };
            let mut off = 0;
            while off + NLMSG_HDRLEN <= n {
                let h = &buf[off..n];
                let len = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]) as usize;
                let ty = u16::from_ne_bytes([h[4], h[5]]);
                let seq = u32::from_ne_bytes([h[8], h[9], h[10], h[11]]);
                if len < NLMSG_HDRLEN || len > h.len() {
                    break;
                }
                if ty == NLMSG_ERROR && len >= NLMSG_HDRLEN + 4 {
                    let err = i32::from_ne_bytes([h[16], h[17], h[18], h[19]]);
                    if err != 0 {
                        return Err(-err);
                    }
                    if seq == last {
                        return Ok(());
                    }
                }
                off += (len + 3) & !3;
            }
        }
    }

    /// Creates table `table` (family netdev) owned by this socket, with a
    /// base chain `ingress` hooked on `ifname`'s ingress with policy drop.
    /// Fails with EEXIST if a table of that name exists.
    pub(crate) fn add_owned_ingress_drop(&mut self, table: &str, ifname: &str) -> Result<(), i32> {
        let ty = |m: u16| (NFNL_SUBSYS_NFTABLES << 8) | m;
        let create = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
        self.batch(|s| {
            let mut t = Msg::new(
                ty(NFT_MSG_NEWTABLE),
                create,
                s.next_seq(),
                NFPROTO_NETDEV,
                0,
            );
            t.str(NFTA_TABLE_NAME, table);
            t.u32(NFTA_TABLE_FLAGS, NFT_TABLE_F_OWNER);
            let mut c = Msg::new(
                ty(NFT_MSG_NEWCHAIN),
                create,
                s.next_seq(),
                NFPROTO_NETDEV,
                0,
            );
            c.str(NFTA_CHAIN_TABLE, table);
            c.str(NFTA_CHAIN_NAME, "ingress");
            c.nest(NFTA_CHAIN_HOOK, |h| {
                h.u32(NFTA_HOOK_HOOKNUM, NF_NETDEV_INGRESS);
                h.u32(NFTA_HOOK_PRIORITY, 0);
                h.str(NFTA_HOOK_DEV, ifname);
            });
            c.u32(NFTA_CHAIN_POLICY, NF_DROP);
            c.str(NFTA_CHAIN_TYPE, "filter");
            vec![t, c]
        })
    }

    /// Deletes table `table` (family netdev). ENOENT if there is none; EPERM
    /// if another live socket owns it.
    pub(crate) fn delete_table(&mut self, table: &str) -> Result<(), i32> {
        let ty = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELTABLE;
        self.batch(|s| {
            let mut t = Msg::new(
                ty,
                NLM_F_REQUEST | NLM_F_ACK,
                s.next_seq(),
                NFPROTO_NETDEV,
                0,
            );
            t.str(NFTA_TABLE_NAME, table);
            vec![t]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_layout() {
        let mut m = Msg::new(0x0a00, NLM_F_REQUEST, 7, NFPROTO_NETDEV, 0);
        m.str(NFTA_TABLE_NAME, "abc");
        m.nest(NFTA_CHAIN_HOOK, |h| h.u32(NFTA_HOOK_HOOKNUM, 1));
        let b = m.finish();
        assert_eq!(b.len() % 4, 0);
        assert_eq!(
            u32::from_ne_bytes(b[0..4].try_into().unwrap()) as usize,
            b.len()
        );
        // nfgenmsg: family, version, res_id.
        assert_eq!(&b[16..20], &[NFPROTO_NETDEV, 0, 0, 0]);
        // "abc\0" attribute: len 8, type 1.
        assert_eq!(u16::from_ne_bytes([b[20], b[21]]), 8);
        assert_eq!(&b[24..28], b"abc\0");
        // nested: len 4 + 8, one big-endian u32 child.
        assert_eq!(u16::from_ne_bytes([b[28], b[29]]), 12);
        assert_eq!(&b[36..40], &1u32.to_be_bytes());
    }
}
