//! The SA state a pool connection carries between members: its IKE SAs
//! (keys, SPIs, message IDs, child SAs) and its SAs' sequence ceilings
//! and replay windows, in the HA sync's encodings
//! ([`vecgate_pool::snapshot`]).
//!
//! - The IKE thread runs with a pool link ([`vecgate_keying::ike::HaLink`]
//!   with `pool`): it hands every tunnel's established IKE SAs here
//!   whenever one changes, and adopts the IKE SAs handed to it.
//! - The applier seals a connection's state whenever its IKE SAs changed
//!   (a rekey, an exchange) or one of its outbound ceilings moved (a
//!   block reserved), and at least every [`REFRESH`]: nothing is written
//!   per packet. A write that is late or lost is covered by the takeover
//!   rule (the ceiling plus what the old owner could have reserved since
//!   the write, at `max_sa_pps`); the refresh keeps that margin small for
//!   a connection that sends little (an hour-old write would allow more
//!   numbers than a 32-bit sequence has, and retire the SA).
//! - A new owner hands the sealed IKE SAs to the IKE thread *before* it
//!   adds the tunnel, with the old owner's word about each SA: the
//!   adopted child SAs start past the stored ceilings and keep the stored
//!   replay windows, and the peer sees the same SPIs and no IKE_SA_INIT.
//! - A connection that leaves this member is forgotten by the IKE thread
//!   without a delete: its new owner carries the IKE SA on.

use crossbeam_channel::{Receiver, Sender};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::warn;
use vecgate_ha::sync::{Dir, IkeSaRepr, RecordRepr};
use vecgate_ha::syncer::{record, Adoption, IkeShadow, Message, ToIke, Word, Words};
use vecgate_ipsec::seqstore::KeyId;
use vecgate_ipsec::SaState;
use vecgate_pool::seal::Info;
use vecgate_pool::snapshot::Snapshot;
use zeroize::Zeroizing;

/// IKE SA sets waiting for the applier (a full queue loses one: the IKE
/// thread resends every set each second).
const QUEUE: usize = 1024;

/// A connection's state is sealed again after this long unchanged: the
/// takeover's jump grows with the time since the last write.
pub const REFRESH: Duration = Duration::from_secs(10);

/// The applier's ends of the IKE thread's pool link.
pub struct IkeEnds {
    messages: Receiver<Message>,
    to_ike: Sender<ToIke>,
}

/// The IKE thread's pool link and the applier's ends of it.
pub fn ike_link(sas: Arc<SaState>) -> (vecgate_keying::ike::HaLink, IkeEnds) {
    let (to_sync, messages) = crossbeam_channel::bounded(QUEUE);
    let (to_ike, from_sync) = crossbeam_channel::unbounded();
    let link = vecgate_keying::ike::HaLink {
        sas,
        to_sync,
        from_sync,
        pool: true,
    };
    (link, IkeEnds { messages, to_ike })
}

/// What was last sealed of one tunnel: its IKE SAs' change keys and its
/// outbound ceilings, and when.
struct Sealed {
    ike: Vec<Zeroizing<Vec<u8>>>,
    ceilings: Vec<(u32, u64)>,
    at: Instant,
}

/// The applier's side of SA carrying.
pub(super) struct Carrier {
    ends: IkeEnds,
    ike: vecgate_keying::ike::IkeControl,
    sas: Arc<SaState>,
    max_pps: u64,
    /// The IKE thread's latest IKE SAs per tunnel.
    ike_sas: HashMap<String, Vec<IkeSaRepr>>,
    sealed: HashMap<String, Sealed>,
}

impl Carrier {
    pub(super) fn new(
        ends: IkeEnds,
        ike: vecgate_keying::ike::IkeControl,
        sas: Arc<SaState>,
        max_pps: u64,
    ) -> Carrier {
        // Our ceilings grow at most this fast: what a taker's floor
        // counts on ([`vecgate_ipsec::SaState::set_max_pps`]).
        sas.set_max_pps(max_pps);
        Carrier {
            ends,
            ike,
            sas,
            max_pps,
            ike_sas: HashMap::new(),
            sealed: HashMap::new(),
        }
    }

    /// Takes what the IKE thread said since the last turn.
    pub(super) fn hear(&mut self) {
        while let Ok(m) = self.ends.messages.try_recv() {
            match m {
                Message::IkeSas { tunnel, sas } => {
                    self.ike_sas.insert(tunnel, sas);
                }
                Message::IkeUnsafe(sa) => {
                    warn!(%sa, "pool: an adopted child SA had no unused sequence number left; IKE rekeys it");
                }
                _ => {}
            }
        }
    }

    /// Tunnel `tunnel`'s state as it stands, if the IKE thread has told
    /// it and it changed since last sealed (IKE SAs other than by the
    /// clock, or an outbound ceiling).
    pub(super) fn changed(&mut self, tunnel: &str) -> Option<(Vec<RecordRepr>, Vec<IkeSaRepr>)> {
        let (records, ike) = self.state(tunnel)?;
        let now = Sealed {
            at: Instant::now(),
            ike: ike
                .iter()
                .filter_map(|r| {
                    vecgate_ike::SaSnapshot::decode(&r.state)
                        .and_then(|s| s.change_key())
                        .ok()
                })
                .collect(),
            ceilings: records
                .iter()
                .filter(|r| r.dir == Dir::Out)
                .map(|r| (r.spi, r.ceiling))
                .collect(),
        };
        let same = self.sealed.get(tunnel).is_some_and(|s| {
            s.ike == now.ike && s.ceilings == now.ceilings && s.at.elapsed() < REFRESH
        });
        if same {
            return None;
        }
        self.sealed.insert(tunnel.to_owned(), now);
        Some((records, ike))
    }

    /// Tunnel `tunnel`'s state as it stands, if the IKE thread has told
    /// its IKE SAs.
    pub(super) fn state(&self, tunnel: &str) -> Option<(Vec<RecordRepr>, Vec<IkeSaRepr>)> {
        let ike = self.ike_sas.get(tunnel)?.clone();
        let records = self.sas.snapshot_of(tunnel).iter().map(record).collect();
        Some((records, ike))
    }

    /// Hands `snap`'s IKE SAs to the IKE thread for tunnel `tunnel`, with
    /// the old owner's word about each SA (sealed as `info` says), before
    /// the tunnel is added: it adopts them instead of initiating.
    pub(super) fn adopt(&self, tunnel: &str, snap: &Snapshot, info: &Info) {
        if snap.ike.is_empty() {
            return;
        }
        let arrived = Instant::now();
        let by_key = snap
            .sas
            .iter()
            .map(|r| {
                let w = Word {
                    dir: r.dir,
                    spi: r.spi,
                    ceiling: if r.dir == Dir::Out {
                        r.ceiling.max(r.used)
                    } else {
                        r.ceiling
                    },
                    window: r.window.clone(),
                    sent_ms: info.written_ms,
                    arrived,
                };
                (KeyId(r.key_id), w)
            })
            .collect();
        let shadow: IkeShadow = snap
            .ike
            .iter()
            .map(|s| ((s.spi_i, s.spi_r), s.state.clone()))
            .collect();
        let adoption = Adoption {
            shadow: HashMap::from([(tunnel.to_owned(), shadow)]),
            words: Words {
                max_pps: self.max_pps,
                by_key,
            },
        };
        let _ = self.ends.to_ike.send(ToIke::Adopt(adoption));
    }

    /// Tunnel `tunnel` leaves this member (or stops sending): the IKE
    /// thread forgets it without a delete.
    pub(super) fn forget(&mut self, tunnel: &str) {
        self.ike.forget(tunnel);
        // What it said of the tunnel before it forgot it is stale now.
        self.hear();
        self.ike_sas.remove(tunnel);
        self.sealed.remove(tunnel);
    }
}
