//! Proposal selection (RFC 7296 §2.7) and traffic selector narrowing (§2.9).

use crate::config::{EspProposal, IkeProposal, Prefix};
use crate::crypto::{DhGroup, Encr, IkeSuite, Integ, Prf};
use crate::payload::sa::{self, Proposal, Transform};
use crate::payload::TrafficSelector;

/// Negotiated ESP algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EspSuite {
    /// Cipher.
    pub encr: Encr,
    /// Integrity (None for AEAD).
    pub integ: Option<Integ>,
    /// PFS group, if any.
    pub dh: Option<DhGroup>,
    /// 64-bit extended sequence numbers (RFC 4303 §2.2.1): chosen whenever
    /// the peer offers them (RFC 7296 §3.3.2, ESN transform 1).
    pub esn: bool,
}

impl EspSuite {
    /// Algorithm name in the strongSwan style used by vecgate-ipsec:
    /// `aes128gcm16`, `aes256-sha256`, `aes128-sha1`.
    pub fn name(&self) -> String {
        let bits = self.encr.key_bits();
        match (self.encr, self.integ) {
            (Encr::AesGcm16(_), _) => format!("aes{bits}gcm16"),
            (Encr::AesCbc(_), i) => {
                let h = match i {
                    Some(Integ::HmacSha1_96) => "sha1",
                    Some(Integ::HmacSha256_128) => "sha256",
                    Some(Integ::HmacSha384_192) => "sha384",
                    Some(Integ::HmacSha512_256) => "sha512",
                    None => "none",
                };
                format!("aes{bits}-{h}")
            }
        }
    }
}

fn usable(t: &Transform, ty: u8) -> bool {
    t.ty == ty && !t.unknown_attr
}

fn pick_encr(p: &Proposal, ours: &[Encr]) -> Option<Encr> {
    p.transforms
        .iter()
        .filter(|t| usable(t, sa::TT_ENCR))
        .filter_map(|t| Encr::from_transform(t.id, t.key_len))
        .find(|e| ours.contains(e))
}

/// Integrity for a cipher: none (or only NONE) for AEAD, else one of ours.
fn pick_integ(p: &Proposal, encr: Encr, ours: &[Integ]) -> Option<Option<Integ>> {
    let mut it = p.transforms.iter().filter(|t| usable(t, sa::TT_INTEG));
    if encr.is_aead() {
        // RFC 5282 §8: INTEG omitted or NONE with a combined-mode cipher.
        return if it.all(|t| t.id == 0) {
            Some(None)
        } else {
            None
        };
    }
    it.filter_map(|t| Integ::from_id(t.id))
        .find(|i| ours.contains(i))
        .map(Some)
}

fn pick_dh(p: &Proposal, ours: &[DhGroup]) -> Option<DhGroup> {
    p.transforms
        .iter()
        .filter(|t| usable(t, sa::TT_DH))
        .filter_map(|t| DhGroup::from_id(t.id))
        .find(|g| ours.contains(g))
}

/// Choose an IKE suite from the peer's proposals (their order wins).
/// Returns the proposal number too.
pub fn select_ike(theirs: &[Proposal], ours: &[IkeProposal]) -> Option<(u8, IkeSuite)> {
    for p in theirs.iter().filter(|p| p.protocol == sa::PROTO_IKE) {
        for o in ours {
            let Some(encr) = pick_encr(p, &o.encr) else {
                continue;
            };
            let Some(integ) = pick_integ(p, encr, &o.integ) else {
                continue;
            };
            let prf = p
                .transforms
                .iter()
                .filter(|t| usable(t, sa::TT_PRF))
                .filter_map(|t| Prf::from_id(t.id))
                .find(|f| o.prf.contains(f));
            let (Some(prf), Some(dh)) = (prf, pick_dh(p, &o.dh)) else {
                continue;
            };
            return Some((
                p.num,
                IkeSuite {
                    encr,
                    prf,
                    integ,
                    dh,
                },
            ));
        }
    }
    None
}

/// Choose an ESP suite. `pfs` is true in CREATE_CHILD_SA, where DH
/// transforms count; in IKE_AUTH they are ignored (RFC 7296 §1.2).
/// Extended sequence numbers are chosen when offered (a 32-bit sequence
/// space can run out under load before a time-based rekey), 32-bit ones
/// otherwise.
pub fn select_esp(
    theirs: &[Proposal],
    ours: &[EspProposal],
    pfs: bool,
) -> Option<(u8, u32, EspSuite)> {
    for p in theirs.iter().filter(|p| p.protocol == sa::PROTO_ESP) {
        let Ok(spi) = <[u8; 4]>::try_from(p.spi.as_slice()) else {
            continue;
        };
        let esn_ids: Vec<u16> = p
            .transforms
            .iter()
            .filter(|t| usable(t, sa::TT_ESN))
            .map(|t| t.id)
            .collect();
        let esn = esn_ids.contains(&1);
        if !esn_ids.is_empty() && !esn && !esn_ids.contains(&0) {
            continue;
        }
        for o in ours {
            let Some(encr) = pick_encr(p, &o.encr) else {
                continue;
            };
            let Some(integ) = pick_integ(p, encr, &o.integ) else {
                continue;
            };
            let dh = if pfs {
                let theirs_dh: Vec<u16> = p
                    .transforms
                    .iter()
                    .filter(|t| usable(t, sa::TT_DH))
                    .map(|t| t.id)
                    .collect();
                if o.dh.is_empty() {
                    // We want no PFS: acceptable if they offer none or NONE.
                    if !theirs_dh.is_empty() && !theirs_dh.contains(&0) {
                        continue;
                    }
                    None
                } else {
                    match pick_dh(p, &o.dh) {
                        Some(g) => Some(g),
                        None => continue,
                    }
                }
            } else {
                None
            };
            return Some((
                p.num,
                u32::from_be_bytes(spi),
                EspSuite {
                    encr,
                    integ,
                    dh,
                    esn,
                },
            ));
        }
    }
    None
}

/// The single-choice proposal a responder returns.
pub fn ike_reply(num: u8, s: &IkeSuite, spi: Vec<u8>) -> Proposal {
    let mut t = vec![
        Transform::with_key_len(sa::TT_ENCR, s.encr.id(), s.encr.key_bits()),
        Transform::new(sa::TT_PRF, s.prf.id()),
    ];
    if let Some(i) = s.integ {
        t.push(Transform::new(sa::TT_INTEG, i.id()));
    }
    t.push(Transform::new(sa::TT_DH, s.dh.id()));
    Proposal {
        num,
        protocol: sa::PROTO_IKE,
        spi,
        transforms: t,
    }
}

/// The single-choice ESP proposal a responder returns.
pub fn esp_reply(num: u8, s: &EspSuite, spi: u32) -> Proposal {
    let mut t = vec![Transform::with_key_len(
        sa::TT_ENCR,
        s.encr.id(),
        s.encr.key_bits(),
    )];
    if let Some(i) = s.integ {
        t.push(Transform::new(sa::TT_INTEG, i.id()));
    }
    if let Some(g) = s.dh {
        t.push(Transform::new(sa::TT_DH, g.id()));
    }
    t.push(Transform::new(sa::TT_ESN, u16::from(s.esn)));
    Proposal {
        num,
        protocol: sa::PROTO_ESP,
        spi: spi.to_be_bytes().to_vec(),
        transforms: t,
    }
}

/// Narrow the peer's selectors to our configured prefixes (§2.9): every
/// non-empty intersection is kept; None when nothing is left.
pub fn narrow(offered: &[TrafficSelector], ours: &[Prefix]) -> Option<Vec<TrafficSelector>> {
    let mut out = Vec::new();
    for t in offered {
        for p in ours {
            if let Some(x) = t.intersect(&p.to_ts()) {
                if !out.contains(&x) {
                    out.push(x);
                }
            }
        }
    }
    if out.is_empty() {
        None
    } else {
        Some(out)
    }
}

/// Whether every selector the responder returned lies within what we asked.
pub fn within(got: &[TrafficSelector], ours: &[Prefix]) -> bool {
    !got.is_empty()
        && got
            .iter()
            .all(|t| ours.iter().any(|p| t.intersect(&p.to_ts()) == Some(*t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ike(s: &str) -> IkeProposal {
        s.parse().unwrap()
    }

    #[test]
    fn ike_selection_follows_their_order() {
        let theirs = vec![
            ike("aes128-sha1-modp2048").to_wire(1, vec![]),
            ike("aes256gcm16-prfsha256-x25519").to_wire(2, vec![]),
        ];
        let ours = vec![
            ike("aes256gcm16-prfsha256-x25519"),
            ike("aes128-sha1-modp2048"),
        ];
        let (num, s) = select_ike(&theirs, &ours).unwrap();
        assert_eq!(num, 1);
        assert_eq!(s.encr, Encr::AesCbc(16));
        assert_eq!(s.dh, DhGroup::Modp2048);
        assert!(select_ike(&theirs, &[ike("aes256-sha512-ecp256")]).is_none());
        // The single-choice reply is acceptable to the initiator again.
        let reply = ike_reply(num, &s, vec![]);
        assert_eq!(select_ike(&[reply], &ours).unwrap().1, s);
    }

    #[test]
    fn esp_selection_pfs_and_esn() {
        let ours: Vec<EspProposal> = vec!["aes128-sha1-modp2048".parse().unwrap()];
        let offer = ours[0].to_wire(1, 0x1234, true);
        let (_, spi, s) = select_esp(std::slice::from_ref(&offer), &ours, true).unwrap();
        assert_eq!(spi, 0x1234);
        assert_eq!(s.dh, Some(DhGroup::Modp2048));
        assert_eq!(s.name(), "aes128-sha1");
        // Without PFS in IKE_AUTH the DH transform is ignored.
        assert_eq!(select_esp(&[offer], &ours, false).unwrap().2.dh, None);
        let no_pfs: Vec<EspProposal> = vec!["aes128gcm16".parse().unwrap()];
        let offer = no_pfs[0].to_wire(1, 7, false);
        assert_eq!(
            select_esp(std::slice::from_ref(&offer), &no_pfs, true)
                .unwrap()
                .2
                .name(),
            "aes128gcm16"
        );
        // Our own offer has both: ESN is chosen, and the reply says so.
        let (n, spi, s) = select_esp(std::slice::from_ref(&offer), &no_pfs, false).unwrap();
        assert!(s.esn);
        let reply = esp_reply(n, &s, spi);
        assert!(select_esp(&[reply], &no_pfs, false).unwrap().2.esn);
        // ESN-only offers are taken, no-ESN-only ones run 32-bit numbers.
        let mut esn_only = offer.clone();
        esn_only
            .transforms
            .retain(|t| t.ty != sa::TT_ESN || t.id == 1);
        assert!(select_esp(&[esn_only], &no_pfs, false).unwrap().2.esn);
        let mut no_esn = offer;
        no_esn
            .transforms
            .retain(|t| t.ty != sa::TT_ESN || t.id == 0);
        assert!(!select_esp(&[no_esn], &no_pfs, false).unwrap().2.esn);
    }

    #[test]
    fn narrowing() {
        let offered = vec![TrafficSelector::from_prefix("10.0.0.0".parse().unwrap(), 8)];
        let ours: Vec<Prefix> = vec!["10.1.0.0/16".parse().unwrap()];
        let n = narrow(&offered, &ours).unwrap();
        assert_eq!(n, vec![ours[0].to_ts()]);
        assert!(within(&n, &ours));
        assert!(narrow(&offered, &["192.168.0.0/16".parse().unwrap()]).is_none());
        assert!(!within(&offered, &ours));
    }
}
