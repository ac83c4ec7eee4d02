//! What a sealed blob holds ([`crate::seal`]): one connection's SA state
//! as its owner last wrote it, in the HA sync's encodings (one format
//! for one concept: [`vecgate_ha::sync`]'s SA records and IKE SAs).
//!
//! ```text
//! body: flags (1) | 0 (3) | placement revision (8)
//!       | SA state length (4) | SA state (the sync's SaState body)
//!       | IKE length (4) | IKE SAs (the sync's IkeSas body, named by the connection)
//! flags: 1 = released (a handover: the owner stopped sending first)
//! ```
//!
//! **Takeover** ([`resume_out`]). A new owner resumes each outbound SA:
//! - after a *handover*, the old owner stopped sending before it wrote
//!   the blob, which is therefore exact: resume at `used + 1`;
//! - after a *failover*, the old owner may have gone on after its last
//!   write (blocks it reserved before it died, or while etcd had no
//!   quorum and nothing could be written): resume past the stored
//!   ceiling plus what it could have reserved since, at its bounded rate,
//!   over the time since the write (the HA sync's `takeover_floor`,
//!   applied by the caller to [`Resume::After`]). The time is measured
//!   by the wall clocks of the writer and the new owner, never less than
//!   zero.
//!
//! Inbound SAs adopt the stored replay window: a packet the old owner
//! accepted after its last write may be accepted once more by the new
//! owner (a replay, never a repeated nonce), as with the HA sync.

use crate::seal::Info;
use std::time::Duration;
use vecgate_ha::sync::{Body, BodyRepr, IkeSaRepr, IkeSasBody, IkeSasRepr, RecordRepr, Reject};
use zeroize::Zeroizing;

const HEADER_LEN: usize = 12;
const RELEASED: u8 = 1;

/// One connection's SA state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Written after the owner stopped sending (a handover).
    pub released: bool,
    /// The placement revision the owner held the connection under.
    pub placement_rev: i64,
    /// Static SAs and IKE child SAs: outbound ceilings and use, inbound
    /// windows.
    pub sas: Vec<RecordRepr>,
    /// The connection's IKE SAs (keys, SPIs, message IDs, child SAs).
    pub ike: Vec<IkeSaRepr>,
}

/// Why a snapshot was not written or read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotError {
    /// More SA state than one sync body holds.
    TooLarge,
    /// The opened body does not parse (a blob sealed by something else).
    Malformed,
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SnapshotError::TooLarge => "more SA state than a sealed blob holds",
            SnapshotError::Malformed => "the sealed state does not parse",
        })
    }
}

impl From<Reject> for SnapshotError {
    fn from(_: Reject) -> Self {
        SnapshotError::Malformed
    }
}

fn be32(b: &[u8]) -> usize {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize
}

impl Snapshot {
    /// The body to seal (zeroizing: it holds keys). `written_ms` goes in
    /// the sync bodies' send time too.
    pub fn emit(&self, conn: &str, written_ms: u64) -> Result<Zeroizing<Vec<u8>>, SnapshotError> {
        let sa = BodyRepr {
            sent_ms: written_ms,
            master: true,
            records: self.sas.clone(),
        }
        .emit();
        if self.sas.len() > usize::from(u16::MAX) || Body::new_checked(&sa[..]).is_err() {
            return Err(SnapshotError::TooLarge);
        }
        let ike = IkeSasRepr {
            sent_ms: written_ms,
            master: true,
            full_set: true,
            tunnel: conn.to_owned(),
            sas: self.ike.clone(),
        }
        .emit()
        .ok_or(SnapshotError::TooLarge)?;
        if IkeSasBody::new_checked(&ike[..]).is_err() {
            return Err(SnapshotError::TooLarge);
        }
        let mut out = Zeroizing::new(Vec::with_capacity(HEADER_LEN + 8 + sa.len() + ike.len()));
        out.push(if self.released { RELEASED } else { 0 });
        out.extend_from_slice(&[0, 0, 0]);
        out.extend_from_slice(&self.placement_rev.to_be_bytes());
        out.extend_from_slice(&(sa.len() as u32).to_be_bytes());
        out.extend_from_slice(&sa);
        out.extend_from_slice(&(ike.len() as u32).to_be_bytes());
        out.extend_from_slice(&ike);
        Ok(out)
    }

    /// Parses an opened body of connection `conn`.
    pub fn parse(b: &[u8], conn: &str) -> Result<Snapshot, SnapshotError> {
        let h = b.get(..HEADER_LEN).ok_or(SnapshotError::Malformed)?;
        if h[0] & !RELEASED != 0 || h[1..4] != [0, 0, 0] {
            return Err(SnapshotError::Malformed);
        }
        let mut rev = [0u8; 8];
        rev.copy_from_slice(&h[4..12]);
        let mut at = HEADER_LEN;
        let mut section = || -> Result<&[u8], SnapshotError> {
            let l = be32(b.get(at..at + 4).ok_or(SnapshotError::Malformed)?);
            let s = b.get(at + 4..at + 4 + l).ok_or(SnapshotError::Malformed)?;
            at += 4 + l;
            Ok(s)
        };
        let sa = BodyRepr::parse(&Body::new_checked(section()?)?);
        let ike = IkeSasRepr::parse(&IkeSasBody::new_checked(section()?)?);
        if at != b.len() || ike.tunnel != conn {
            return Err(SnapshotError::Malformed);
        }
        Ok(Snapshot {
            released: h[0] & RELEASED != 0,
            placement_rev: i64::from_be_bytes(rev),
            sas: sa.records,
            ike: ike.sas,
        })
    }
}

/// Where a new owner resumes one outbound SA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// The old owner stopped first: this is the next unused number.
    Exact { next: u64 },
    /// The old owner stood at `ceiling` `since` ago and may have gone on:
    /// resume at the HA sync's takeover floor of both.
    After { ceiling: u64, since: Duration },
}

/// How a new owner resumes outbound SA `rec` of a snapshot sealed with
/// `info`, at wall-clock time `now_ms`.
pub fn resume_out(snap: &Snapshot, rec: &RecordRepr, info: &Info, now_ms: u64) -> Resume {
    if snap.released {
        return Resume::Exact {
            next: rec.used.saturating_add(1),
        };
    }
    Resume::After {
        ceiling: rec.ceiling.max(rec.used),
        since: Duration::from_millis(now_ms.saturating_sub(info.written_ms)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use vecgate_ha::sync::Dir;

    fn snap() -> Snapshot {
        Snapshot {
            released: false,
            placement_rev: 77,
            sas: vec![
                RecordRepr {
                    dir: Dir::Out,
                    spi: 0x1001,
                    key_id: [7; 32],
                    ceiling: 5000,
                    used: 4321,
                    window: vec![],
                },
                RecordRepr {
                    dir: Dir::In,
                    spi: 0x2002,
                    key_id: [8; 32],
                    ceiling: 99,
                    used: 0,
                    window: vec![u64::MAX, 5],
                },
            ],
            ike: vec![IkeSaRepr {
                spi_i: 0x1122334455667788,
                spi_r: 0x99aabbccddeeff00,
                state: Zeroizing::new(vec![1, 2, 3]),
            }],
        }
    }

    #[test]
    fn round_trip() {
        let s = snap();
        let b = s.emit("c1", 1000).unwrap();
        assert_eq!(Snapshot::parse(&b, "c1"), Ok(s.clone()));
        // Named by its connection.
        assert_eq!(Snapshot::parse(&b, "c2"), Err(SnapshotError::Malformed));
        let mut r = s;
        r.released = true;
        r.sas.clear();
        r.ike.clear();
        let b = r.emit("c1", 1).unwrap();
        assert_eq!(Snapshot::parse(&b, "c1"), Ok(r));
        // Trailing bytes, bad flags: refused.
        let mut t = b.to_vec();
        t.push(0);
        assert!(Snapshot::parse(&t, "c1").is_err());
        let mut t = b.to_vec();
        t[0] = 2;
        assert!(Snapshot::parse(&t, "c1").is_err());
    }

    #[test]
    fn resume_rules() {
        let s = snap();
        let info = Info {
            epoch: 1,
            written_ms: 10_000,
            generation: 3,
        };
        assert_eq!(
            resume_out(&s, &s.sas[0], &info, 12_500),
            Resume::After {
                ceiling: 5000,
                since: Duration::from_millis(2500)
            }
        );
        // A writer's clock ahead of ours: no negative time.
        assert_eq!(
            resume_out(&s, &s.sas[0], &info, 9_000),
            Resume::After {
                ceiling: 5000,
                since: Duration::ZERO
            }
        );
        let mut r = s;
        r.released = true;
        assert_eq!(
            resume_out(&r, &r.sas[0], &info, 99_999),
            Resume::Exact { next: 4322 }
        );
    }

    #[test]
    fn too_large_is_an_error_not_a_truncation() {
        let mut s = snap();
        s.ike = vec![IkeSaRepr {
            spi_i: 1,
            spi_r: 2,
            state: Zeroizing::new(vec![0; 20_000]),
        }];
        assert_eq!(s.emit("c", 0), Err(SnapshotError::TooLarge));
    }

    proptest! {
        #[test]
        fn parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = Snapshot::parse(&b, "c");
        }
    }
}
