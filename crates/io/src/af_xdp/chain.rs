//! Multi-buffer frames (kernel `Documentation/networking/af_xdp.rst`,
//! "Multi-Buffer Support"): a frame larger than one UMEM frame is carried
//! by a chain of descriptors, one UMEM frame each, every one but the last
//! with `XDP_PKT_CONTD` in its options. The kernel only ever publishes
//! whole chains on the receive ring, but a batch read from the ring may end
//! inside one.
//!
//! [`assemble`] puts a received chain back together; it is pure (the
//! descriptors and the frame memory come in through arguments), so what it
//! does with malformed chains is tested on its own.

use rustix::net::xdp::{XdpDesc, XdpDescOptions};

/// Frame memory a receive descriptor may point into: `len` bytes at UMEM
/// offset `off`, or `None` outside the memory.
pub(crate) trait FrameMem {
    fn frame(&self, off: u64, len: usize) -> Option<&[u8]>;
}

impl FrameMem for [u8] {
    fn frame(&self, off: u64, len: usize) -> Option<&[u8]> {
        let off = usize::try_from(off).ok()?;
        self.get(off..off.checked_add(len)?)
    }
}

impl FrameMem for crate::xdp_sys::Umem {
    #[inline]
    fn frame(&self, off: u64, len: usize) -> Option<&[u8]> {
        self.bytes(off, len)
    }
}

/// The receive half of a UMEM: frames of `frame` bytes (a power of two)
/// from offset 0 to `end` (a multiple of `frame`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxArea {
    pub frame: u64,
    pub end: u64,
}

impl RxArea {
    /// Whether `d` lies inside one frame of the area.
    #[inline]
    pub(crate) fn holds(&self, d: &XdpDesc) -> bool {
        d.addr < self.end && (d.addr & (self.frame - 1)) + u64::from(d.len) <= self.frame
    }
}

/// Why a received chain was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChainError {
    /// A descriptor outside the receive area, across a frame boundary, or
    /// with options other than `XDP_PKT_CONTD`.
    BadDesc,
    /// The frame is longer than the buffer.
    TooLong,
}

/// What [`assemble`] made of the chain at the start of the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Chain {
    /// A frame of `len` bytes, copied to the front of the buffer; it took
    /// `descs` descriptors.
    Frame { descs: u32, len: usize },
    /// Dropped: its `descs` descriptors are consumed all the same (their
    /// frames go back to the fill ring).
    Dropped { descs: u32, why: ChainError },
    /// The chain's last descriptor is not in the view: consume nothing yet.
    Incomplete,
}

/// Copies the frame whose descriptor chain starts at `desc(0)` into `buf`,
/// reading at most `avail` descriptors (`desc(i)` for `i < avail`). Every
/// descriptor is checked against `area` before its bytes are read; a chain
/// with a bad descriptor, or longer in total than `buf`, is dropped whole,
/// up to and including its last descriptor (the first one without
/// `XDP_PKT_CONTD`). Never reads outside `mem` nor writes past `buf`.
pub(crate) fn assemble<M: FrameMem + ?Sized>(
    desc: impl Fn(u32) -> XdpDesc,
    avail: u32,
    mem: &M,
    area: RxArea,
    buf: &mut [u8],
) -> Chain {
    let mut len = 0usize;
    let mut bad = None;
    for i in 0..avail {
        let d = desc(i);
        let contd = d.options.contains(XdpDescOptions::XDP_PKT_CONTD);
        if bad.is_none() {
            let n = d.len as usize;
            let ok = area.holds(&d)
                && d.options
                    .difference(XdpDescOptions::XDP_PKT_CONTD)
                    .is_empty();
            match mem.frame(d.addr, n).filter(|_| ok) {
                None => bad = Some(ChainError::BadDesc),
                Some(src) => match len.checked_add(n).and_then(|e| buf.get_mut(len..e)) {
                    Some(dst) => {
                        dst.copy_from_slice(src);
                        len += n;
                    }
                    None => bad = Some(ChainError::TooLong),
                },
            }
        }
        if !contd {
            let descs = i + 1;
            return match bad {
                None => Chain::Frame { descs, len },
                Some(why) => Chain::Dropped { descs, why },
            };
        }
    }
    Chain::Incomplete
}

/// Descriptors a frame of `len` bytes takes on the transmit ring, with
/// `frame` bytes per UMEM frame (at least one: an empty frame is refused
/// before this).
#[inline]
pub(crate) fn tx_descs(len: usize, frame: usize) -> usize {
    len.div_ceil(frame).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FRAME: u64 = 4096;
    const HR: u64 = 256;
    const CONTD: XdpDescOptions = XdpDescOptions::XDP_PKT_CONTD;

    /// A receive area of 8 frames in a 16-frame UMEM whose byte at offset
    /// `o` is `o % 251`.
    fn umem() -> (Vec<u8>, RxArea) {
        let m = (0..16 * FRAME).map(|o| (o % 251) as u8).collect();
        (
            m,
            RxArea {
                frame: FRAME,
                end: 8 * FRAME,
            },
        )
    }

    fn d(addr: u64, len: u32, options: XdpDescOptions) -> XdpDesc {
        XdpDesc { addr, len, options }
    }

    fn run(descs: &[XdpDesc], buf: &mut [u8]) -> Chain {
        let (m, area) = umem();
        assemble(|i| descs[i as usize], descs.len() as u32, &m[..], area, buf)
    }

    #[test]
    fn three_frames_make_one_jumbo_frame() {
        let (m, _) = umem();
        let descs = [
            d(2 * FRAME + HR, 3840, CONTD),
            d(5 * FRAME + HR, 3840, CONTD),
            d(HR, 1334, XdpDescOptions::empty()),
        ];
        let mut buf = vec![0u8; 65600];
        assert_eq!(
            run(&descs, &mut buf),
            Chain::Frame {
                descs: 3,
                len: 9014
            }
        );
        let mut want = Vec::new();
        for x in &descs {
            want.extend_from_slice(&m[x.addr as usize..][..x.len as usize]);
        }
        assert_eq!(&buf[..9014], &want[..]);
    }

    #[test]
    fn single_descriptor_is_a_frame() {
        let mut buf = vec![0u8; 2000];
        let descs = [d(3 * FRAME + HR, 1514, XdpDescOptions::empty())];
        assert_eq!(
            run(&descs, &mut buf),
            Chain::Frame {
                descs: 1,
                len: 1514
            }
        );
    }

    #[test]
    fn descriptors_after_the_end_are_not_read() {
        let mut buf = vec![0u8; 9000];
        let descs = [
            d(HR, 100, CONTD),
            d(FRAME + HR, 100, XdpDescOptions::empty()),
            // Garbage that belongs to the next frame.
            d(u64::MAX, u32::MAX, CONTD),
        ];
        assert_eq!(run(&descs, &mut buf), Chain::Frame { descs: 2, len: 200 });
    }

    #[test]
    fn chain_cut_by_the_view_is_incomplete() {
        let mut buf = vec![0u8; 9000];
        let descs = [d(HR, 3840, CONTD), d(FRAME + HR, 3840, CONTD)];
        assert_eq!(run(&descs, &mut buf), Chain::Incomplete);
        assert_eq!(run(&[], &mut buf), Chain::Incomplete);
    }

    #[test]
    fn bad_descriptor_drops_the_whole_chain() {
        let mut buf = vec![0u8; 65600];
        for bad in [
            // Past the receive area (in the transmit half).
            d(9 * FRAME + HR, 100, CONTD),
            // Past the UMEM.
            d(100 * FRAME, 100, CONTD),
            d(u64::MAX - 10, 100, CONTD),
            // Across a frame boundary.
            d(FRAME + HR, 3841, CONTD),
            d(2 * FRAME - 1, 2, CONTD),
            // An option other than XDP_PKT_CONTD.
            d(FRAME + HR, 100, CONTD | XdpDescOptions::from_bits_retain(2)),
        ] {
            let descs = [
                d(HR, 3840, CONTD),
                bad,
                d(2 * FRAME + HR, 3840, CONTD),
                d(3 * FRAME + HR, 10, XdpDescOptions::empty()),
                d(4 * FRAME + HR, 10, XdpDescOptions::empty()),
            ];
            assert_eq!(
                run(&descs, &mut buf),
                Chain::Dropped {
                    descs: 4,
                    why: ChainError::BadDesc
                },
                "{bad:?}"
            );
        }
        // A bad last descriptor ends the chain too.
        let descs = [d(HR, 10, CONTD), d(1 << 40, 10, XdpDescOptions::empty())];
        assert_eq!(
            run(&descs, &mut buf),
            Chain::Dropped {
                descs: 2,
                why: ChainError::BadDesc
            }
        );
    }

    #[test]
    fn too_long_chain_is_dropped_up_to_its_end() {
        let mut buf = vec![0u8; 9000];
        let descs = [
            d(HR, 3840, CONTD),
            d(FRAME + HR, 3840, CONTD),
            d(2 * FRAME + HR, 3840, CONTD),
            d(3 * FRAME + HR, 3840, XdpDescOptions::empty()),
        ];
        assert_eq!(
            run(&descs, &mut buf),
            Chain::Dropped {
                descs: 4,
                why: ChainError::TooLong
            }
        );
        // Exactly the buffer fits.
        let descs = [
            d(HR, 3840, CONTD),
            d(FRAME + HR, 3840, CONTD),
            d(2 * FRAME + HR, 1320, XdpDescOptions::empty()),
        ];
        assert_eq!(
            run(&descs, &mut buf),
            Chain::Frame {
                descs: 3,
                len: 9000
            }
        );
    }

    #[test]
    fn tx_descs_per_frame_size() {
        assert_eq!(tx_descs(1, 4096), 1);
        assert_eq!(tx_descs(4096, 4096), 1);
        assert_eq!(tx_descs(4097, 4096), 2);
        assert_eq!(tx_descs(9014, 4096), 3);
        assert_eq!(tx_descs(65600, 4096), 17);
    }

    fn arb_desc() -> impl Strategy<Value = XdpDesc> {
        (
            prop_oneof![
                (0..16 * FRAME),
                (0..8u64).prop_map(|f| f * FRAME + HR),
                any::<u64>()
            ],
            prop_oneof![0..=4096u32, any::<u32>()],
            prop_oneof![Just(0u32), Just(1), any::<u32>()],
        )
            .prop_map(|(addr, len, o)| d(addr, len, XdpDescOptions::from_bits_retain(o)))
    }

    proptest! {
        /// Any descriptors: no panic; a frame is exactly the concatenation
        /// of its descriptors' bytes, ends at the first descriptor without
        /// XDP_PKT_CONTD, fits the buffer and only read the receive area.
        #[test]
        fn any_descriptors(descs in proptest::collection::vec(arb_desc(), 0..24),
                           cap in 0usize..20000) {
            let (m, area) = umem();
            let mut buf = vec![0u8; cap];
            let r = assemble(|i| descs[i as usize], descs.len() as u32, &m[..], area, &mut buf);
            let end = descs.iter().position(|x| !x.options.contains(CONTD));
            match r {
                Chain::Incomplete => prop_assert!(end.is_none()),
                Chain::Frame { descs: n, len } => {
                    prop_assert_eq!(Some(n as usize - 1), end);
                    let mut want = Vec::new();
                    for x in &descs[..n as usize] {
                        prop_assert!(area.holds(x));
                        prop_assert!(x.options.difference(CONTD).is_empty());
                        want.extend_from_slice(&m[x.addr as usize..][..x.len as usize]);
                    }
                    prop_assert!(len <= cap);
                    prop_assert_eq!(&buf[..len], &want[..]);
                }
                Chain::Dropped { descs: n, why } => {
                    prop_assert_eq!(Some(n as usize - 1), end);
                    let chain = &descs[..n as usize];
                    let all_ok = chain.iter().all(|x| area.holds(x)
                        && x.options.difference(CONTD).is_empty());
                    let total: u64 = chain.iter().map(|x| u64::from(x.len)).sum();
                    match why {
                        ChainError::BadDesc => prop_assert!(!all_ok),
                        ChainError::TooLong => prop_assert!(total > cap as u64),
                    }
                }
            }
        }
    }
}
