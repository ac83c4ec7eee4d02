//! The sans-IO IKEv2 state machine (RFC 7296): IKE_SA_INIT, IKE_AUTH with
//! PSK and the first child SA, CREATE_CHILD_SA (new child, child rekey,
//! IKE rekey), INFORMATIONAL (delete, liveness), retransmission.
//!
//! Input: datagrams with their addresses and the current time. Output:
//! [`Action`]s drained with [`Ike::poll_action`]. Timers: the caller asks
//! [`Ike::next_timeout`] and calls [`Ike::handle_timeout`] then.

use crate::config::{ChildPolicy, EspProposal, IkeConfig, Prefix};
use crate::crypto::{self, child_keymat, DhGroup, DhPrivate, IkeKeys, IkeSuite, Secret, SkKeys};
use crate::error::{Error, Result};
use crate::message::{
    exchange, flags, open_fragment, Fragment, Header, Message, MAX_FRAGMENTS, MAX_MESSAGE_LEN,
};
use crate::payload::kind;
use crate::payload::{notify, sa as sap, Delete, Notify, Payload, Proposal, TrafficSelector};
use crate::select::{self, EspSuite};
use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

/// At most this many IKE SAs per peer (established, half-open, rekeyed).
const MAX_SAS: usize = 64;
/// Queued exchanges per IKE SA waiting for the window (size 1).
const MAX_TASKS: usize = 16;
/// Child SAs per IKE SA.
const MAX_CHILDREN: usize = 64;
/// A responder's half-open SA is dropped after this long.
const HALF_OPEN_TIMEOUT: Duration = Duration::from_secs(30);
/// Nonce length we send (RFC 7296 §2.10: at least half the PRF key size).
const NONCE_LEN: usize = 32;
/// RFC 3948 §2.2: non-ESP marker before IKE messages on the NAT-T port.
pub const NON_ESP_MARKER: [u8; 4] = [0; 4];

/// A negotiated child SA as plain data, for the ESP dataplane.
#[derive(Clone)]
pub struct ChildSaKeys {
    /// SPI we allocated: the peer sends ESP to us with it.
    pub spi_in: u32,
    /// SPI the peer allocated: we send with it.
    pub spi_out: u32,
    /// ESP algorithm, strongSwan style (`aes128gcm16`, `aes256-sha256`).
    pub algorithm: String,
    /// Decryption key for inbound traffic (for GCM: key ‖ 4-byte salt).
    pub enc_key_in: Secret,
    /// Encryption key for outbound traffic.
    pub enc_key_out: Secret,
    /// Integrity key inbound (empty for AEAD).
    pub integ_key_in: Secret,
    /// Integrity key outbound (empty for AEAD).
    pub integ_key_out: Secret,
    /// Our side's selectors.
    pub local_ts: Vec<TrafficSelector>,
    /// The peer's selectors.
    pub remote_ts: Vec<TrafficSelector>,
    /// Encapsulate ESP in UDP (RFC 3948) between `local` and `remote`.
    pub udp_encap: bool,
    /// Outer local address (port is the NAT-T port when `udp_encap`).
    pub local: SocketAddr,
    /// Outer remote address.
    pub remote: SocketAddr,
    /// The [`ChildPolicy`] whose selectors it was negotiated for; None for
    /// the peer's own `local_ts`/`remote_ts`.
    pub policy: Option<u32>,
}

impl fmt::Debug for ChildSaKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSaKeys")
            .field("spi_in", &format_args!("{:08x}", self.spi_in))
            .field("spi_out", &format_args!("{:08x}", self.spi_out))
            .field("algorithm", &self.algorithm)
            .field("keys", &"<redacted>")
            .field("local_ts", &self.local_ts)
            .field("remote_ts", &self.remote_ts)
            .field("udp_encap", &self.udp_encap)
            .field("local", &self.local)
            .field("remote", &self.remote)
            .field("policy", &self.policy)
            .finish()
    }
}

/// Why an exchange failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailReason {
    /// PSK or identity mismatch (ours or the peer's AUTHENTICATION_FAILED).
    AuthenticationFailed,
    /// No common proposal.
    NoProposalChosen,
    /// Traffic selectors do not overlap.
    TsUnacceptable,
    /// DH group disagreement that could not be resolved.
    InvalidKePayload,
    /// No response after all retransmissions (also: liveness check failed).
    Timeout,
    /// Another error notify from the peer.
    PeerError(u16),
    /// Malformed or unexpected content.
    Protocol(String),
}

impl FailReason {
    fn from_notify(ty: u16) -> FailReason {
        match ty {
            notify::AUTHENTICATION_FAILED => FailReason::AuthenticationFailed,
            notify::NO_PROPOSAL_CHOSEN => FailReason::NoProposalChosen,
            notify::TS_UNACCEPTABLE => FailReason::TsUnacceptable,
            notify::INVALID_KE_PAYLOAD => FailReason::InvalidKePayload,
            t => FailReason::PeerError(t),
        }
    }
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailReason::AuthenticationFailed => f.write_str("AUTHENTICATION_FAILED"),
            FailReason::NoProposalChosen => f.write_str("NO_PROPOSAL_CHOSEN"),
            FailReason::TsUnacceptable => f.write_str("TS_UNACCEPTABLE"),
            FailReason::InvalidKePayload => f.write_str("INVALID_KE_PAYLOAD"),
            FailReason::Timeout => f.write_str("peer not responding"),
            FailReason::PeerError(t) => write!(f, "peer error notify {t}"),
            FailReason::Protocol(s) => write!(f, "protocol error: {s}"),
        }
    }
}

/// Something that happened, for logs and for tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// IKE SA authenticated.
    IkeEstablished {
        /// Initiator SPI.
        spi_i: u64,
        /// Responder SPI.
        spi_r: u64,
        /// Negotiated algorithms.
        suite: IkeSuite,
        /// NAT detected (or forced): IKE and ESP use the NAT-T port.
        nat: bool,
    },
    /// A child SA was installed.
    ChildEstablished {
        /// Our SPI.
        spi_in: u32,
        /// Peer SPI.
        spi_out: u32,
    },
    /// A child SA was replaced (the old one is deleted afterwards).
    ChildRekeyed {
        /// Old inbound SPI.
        old_spi_in: u32,
        /// New inbound SPI.
        new_spi_in: u32,
    },
    /// The IKE SA was replaced.
    IkeRekeyed {
        /// Old SPIs.
        old: (u64, u64),
        /// New SPIs.
        new: (u64, u64),
    },
    /// A child SA was removed.
    ChildDeleted {
        /// Our SPI.
        spi_in: u32,
        /// Peer SPI.
        spi_out: u32,
    },
    /// The IKE SA is gone.
    IkeDeleted {
        /// Initiator SPI.
        spi_i: u64,
        /// Responder SPI.
        spi_r: u64,
    },
    /// A child SA request (ours or the peer's) was refused because its
    /// selectors fit no policy (followed by `Failed { TsUnacceptable }`).
    TsRejected {
        /// The peer refused ours (else we refused the peer's).
        by_peer: bool,
        /// The initiator's selectors as offered.
        tsi: Vec<TrafficSelector>,
        /// The responder's selectors as offered.
        tsr: Vec<TrafficSelector>,
    },
    /// An exchange failed; `child` tells if only a child SA failed.
    Failed {
        /// Why.
        reason: FailReason,
        /// Only the child SA negotiation failed; the IKE SA lives on.
        child: bool,
    },
}

/// What the caller must do.
#[derive(Debug)]
pub enum Action {
    /// Send `data` from `local` to `remote` (the non-ESP marker is already
    /// prepended when the local port is the NAT-T port).
    Send {
        /// Our address (selects the socket: IKE or NAT-T port).
        local: SocketAddr,
        /// Destination.
        remote: SocketAddr,
        /// UDP payload.
        data: Vec<u8>,
    },
    /// Install a child SA (both directions).
    InstallChild(ChildSaKeys),
    /// Remove a child SA.
    RemoveChild {
        /// Our SPI.
        spi_in: u32,
        /// Peer SPI.
        spi_out: u32,
    },
    /// Log-worthy event.
    Event(Event),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    InitSent,
    AuthSent,
    HalfOpen,
    Established,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    /// A new child for the own selectors (None) or a [`ChildPolicy`].
    NewChild(Option<u32>),
    RekeyChild(u32),
    RekeyIke,
    DeleteChild(u32),
    DeleteIke,
    Dpd,
}

enum Req {
    Init,
    Auth {
        spi_in: u32,
    },
    CreateChild {
        spi_in: u32,
        rekey_of: Option<u32>,
        dh: Option<DhPrivate>,
        ni: Vec<u8>,
        ts: (Vec<TrafficSelector>, Vec<TrafficSelector>),
        policy: Option<u32>,
    },
    RekeyIke {
        spi: u64,
        dh: DhPrivate,
        ni: Vec<u8>,
    },
    DeleteChild(u32),
    DeleteIke,
    Dpd,
}

/// Fragments of one message being reassembled (RFC 7383 §2.6).
struct Reassembly {
    msg_id: u32,
    response: bool,
    first: u8,
    parts: Vec<Option<Secret>>,
    bytes: usize,
}

struct Pending {
    msg_id: u32,
    data: Vec<Vec<u8>>,
    req: Req,
    tries: u32,
    next_retx: Instant,
    started: Instant,
}

struct Child {
    spi_in: u32,
    spi_out: u32,
    local_ts: Vec<TrafficSelector>,
    remote_ts: Vec<TrafficSelector>,
    rekey_at: Option<Instant>,
    expire_at: Option<Instant>,
    policy: Option<u32>,
}

struct IkeSa {
    spi_i: u64,
    spi_r: u64,
    initiator: bool,
    state: St,
    suite: Option<IkeSuite>,
    keys: Option<IkeKeys>,
    sk: Option<SkKeys>,
    ni: Vec<u8>,
    nr: Vec<u8>,
    dh: Option<DhPrivate>,
    cookie: Option<Vec<u8>>,
    init_req: Vec<u8>,
    init_resp: Vec<u8>,
    local: SocketAddr,
    remote: SocketAddr,
    natt: bool,
    next_req: u32,
    pending: Option<Pending>,
    queue: VecDeque<Task>,
    peer_next: u32,
    last_resp: Option<(u32, Vec<Vec<u8>>)>,
    frag_size: Option<usize>,
    reasm: Option<Reassembly>,
    children: Vec<Child>,
    created: Instant,
    last_rx: Instant,
    rekey_at: Option<Instant>,
    expire_at: Option<Instant>,
    dead: bool,
}

impl IkeSa {
    fn new(initiator: bool, local: SocketAddr, remote: SocketAddr, now: Instant) -> IkeSa {
        IkeSa {
            spi_i: 0,
            spi_r: 0,
            initiator,
            state: if initiator {
                St::InitSent
            } else {
                St::HalfOpen
            },
            suite: None,
            keys: None,
            sk: None,
            ni: Vec::new(),
            nr: Vec::new(),
            dh: None,
            cookie: None,
            init_req: Vec::new(),
            init_resp: Vec::new(),
            local,
            remote,
            natt: false,
            next_req: 0,
            pending: None,
            queue: VecDeque::new(),
            peer_next: 0,
            last_resp: None,
            frag_size: None,
            reasm: None,
            children: Vec::new(),
            created: now,
            last_rx: now,
            rekey_at: None,
            expire_at: None,
            dead: false,
        }
    }

    fn header(&self, exch: u8, msg_id: u32, response: bool) -> Header {
        let mut f = 0;
        if self.initiator {
            f |= flags::INITIATOR;
        }
        if response {
            f |= flags::RESPONSE;
        }
        Header {
            spi_i: self.spi_i,
            spi_r: self.spi_r,
            next: 0,
            exchange: exch,
            flags: f,
            msg_id,
            length: 0,
        }
    }

    /// Encrypt a message; fragment it (RFC 7383) when the peer supports
    /// fragmentation and it would exceed the fragment size.
    fn protect(
        &self,
        exch: u8,
        msg_id: u32,
        response: bool,
        payloads: Vec<Payload>,
    ) -> Result<Vec<Vec<u8>>> {
        let sk = self.sk.as_ref().ok_or(Error::Malformed("no keys"))?;
        let m = Message {
            header: self.header(exch, msg_id, response),
            payloads,
        };
        let whole = m.build_protected(sk)?;
        match self.frag_size {
            Some(max) if whole.len() + if self.natt { 4 } else { 0 } > max => {
                m.build_fragments(sk, max - if self.natt { 4 } else { 0 })
            }
            _ => Ok(vec![whole]),
        }
    }

    fn wrap(&self, msg: Vec<u8>) -> Vec<u8> {
        if self.natt {
            let mut d = Vec::with_capacity(msg.len() + 4);
            d.extend_from_slice(&NON_ESP_MARKER);
            d.extend_from_slice(&msg);
            d
        } else {
            msg
        }
    }

    fn prf(&self) -> Result<crypto::Prf> {
        Ok(self.suite.ok_or(Error::Malformed("no suite"))?.prf)
    }
}

fn ts_of(v: &[Prefix]) -> Vec<TrafficSelector> {
    v.iter().map(|p| p.to_ts()).collect()
}

fn rand_spi64() -> Result<u64> {
    let mut b = [0u8; 8];
    loop {
        crypto::random(&mut b)?;
        let v = u64::from_be_bytes(b);
        if v != 0 {
            return Ok(v);
        }
    }
}

fn rand_spi32() -> Result<u32> {
    let mut b = [0u8; 4];
    loop {
        crypto::random(&mut b)?;
        let v = u32::from_be_bytes(b);
        // SPIs 1..=255 are reserved by IANA (RFC 4303 §2.1).
        if v > 255 {
            return Ok(v);
        }
    }
}

/// Random 1–4 s delay before retrying a rekey that collided.
fn retry_jitter() -> Result<Duration> {
    let mut b = [0u8; 2];
    crypto::random(&mut b)?;
    Ok(Duration::from_millis(
        1000 + u64::from(u16::from_be_bytes(b)) % 3000,
    ))
}

fn nonce() -> Result<Vec<u8>> {
    let mut n = vec![0u8; NONCE_LEN];
    crypto::random(&mut n)?;
    Ok(n)
}

fn find<'a, T>(m: &'a Message, f: impl Fn(&'a Payload) -> Option<T>) -> Option<T> {
    m.payloads.iter().find_map(f)
}

fn nat_payloads(
    spi_i: u64,
    spi_r: u64,
    local: SocketAddr,
    remote: SocketAddr,
    force: bool,
) -> [Payload; 2] {
    // With `force`, a source hash over port 0 makes the peer believe we
    // are behind a NAT, so both sides float to NAT-T (as strongSwan's
    // kernel-libipsec does).
    let src_port = if force { 0 } else { local.port() };
    [
        Payload::Notify(Notify::new(
            notify::NAT_DETECTION_SOURCE_IP,
            crypto::nat_hash(spi_i, spi_r, local.ip(), src_port),
        )),
        Payload::Notify(Notify::new(
            notify::NAT_DETECTION_DESTINATION_IP,
            crypto::nat_hash(spi_i, spi_r, remote.ip(), remote.port()),
        )),
    ]
}

/// NAT present per RFC 7296 §2.23: our address not what the peer saw, or
/// the peer's source not what it claims. No NAT-D payloads: no NAT.
fn nat_detected(
    m: &Message,
    spi_i: u64,
    spi_r: u64,
    local: SocketAddr,
    remote: SocketAddr,
) -> bool {
    let mut srcs = m.payloads.iter().filter_map(|p| match p {
        Payload::Notify(n) if n.ty == notify::NAT_DETECTION_SOURCE_IP => Some(&n.data),
        _ => None,
    });
    let dst = m.notify(notify::NAT_DETECTION_DESTINATION_IP);
    let mut nat = false;
    if let Some(d) = dst {
        nat |= d.data != crypto::nat_hash(spi_i, spi_r, local.ip(), local.port());
    }
    let want = crypto::nat_hash(spi_i, spi_r, remote.ip(), remote.port());
    let mut any = false;
    let mut matched = false;
    for s in srcs.by_ref() {
        any = true;
        matched |= *s == want;
    }
    nat | (any && !matched)
}

/// One IKE peer: the configured connection and its IKE SAs.
pub struct Ike {
    cfg: IkeConfig,
    sas: Vec<IkeSa>,
    actions: VecDeque<Action>,
    cookie_secret: Zeroizing<[u8; 32]>,
    dropped: u64,
    last_error: Option<Error>,
    reconnect_at: Option<Instant>,
    /// Other tunnels' selectors this peer's IKE SAs may carry children for.
    policies: Vec<ChildPolicy>,
    /// The own selectors no longer take new children ([`Ike::retire`]).
    retired: bool,
}

impl fmt::Debug for Ike {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ike")
            .field("cfg", &self.cfg)
            .field("sas", &self.sas.len())
            .finish_non_exhaustive()
    }
}

impl Ike {
    /// New peer; nothing is sent until [`Ike::initiate`] or a datagram.
    pub fn new(cfg: IkeConfig) -> Result<Ike> {
        if cfg.ike_proposals.is_empty() || cfg.esp_proposals.is_empty() {
            return Err(Error::Config("no proposals".into()));
        }
        let mut cookie_secret = Zeroizing::new([0u8; 32]);
        crypto::random(&mut cookie_secret[..])?;
        Ok(Ike {
            cfg,
            sas: Vec::new(),
            actions: VecDeque::new(),
            cookie_secret,
            dropped: 0,
            last_error: None,
            reconnect_at: None,
            policies: Vec::new(),
            retired: false,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &IkeConfig {
        &self.cfg
    }

    /// Next action for the caller, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Datagrams rejected as malformed or unusable, and the last reason.
    pub fn dropped(&self) -> (u64, Option<&Error>) {
        (self.dropped, self.last_error.as_ref())
    }

    /// Whether an IKE SA is established.
    pub fn is_established(&self) -> bool {
        self.sas
            .iter()
            .any(|s| s.state == St::Established && !s.dead)
    }

    /// (SPIi, SPIr) of established IKE SAs.
    pub fn ike_sas(&self) -> Vec<(u64, u64)> {
        self.sas
            .iter()
            .filter(|s| s.state == St::Established && !s.dead)
            .map(|s| (s.spi_i, s.spi_r))
            .collect()
    }

    /// Whether `spi` is either SPI of a live IKE SA (half-open included):
    /// lets a caller with several peers behind one address pair hand a
    /// datagram to the state machine it belongs to (RFC 7296 §2.6: SPIs
    /// identify the IKE SA, not the addresses). The peer's SPI counts too,
    /// so a retransmitted IKE_SA_INIT (responder SPI still zero) finds the
    /// half-open SA it created.
    pub fn owns_spi(&self, spi: u64) -> bool {
        spi != 0
            && self
                .sas
                .iter()
                .any(|s| !s.dead && (s.spi_i == spi || s.spi_r == spi))
    }

    /// Whether any IKE SA exists (half-open, established or rekeyed).
    pub fn has_sa(&self) -> bool {
        self.sas.iter().any(|s| !s.dead)
    }

    /// (spi_in, spi_out) of installed child SAs.
    pub fn child_sas(&self) -> Vec<(u32, u32)> {
        self.sas
            .iter()
            .flat_map(|s| s.children.iter().map(|c| (c.spi_in, c.spi_out)))
            .collect()
    }

    /// Replaces the other tunnels' selectors ([`ChildPolicy`]) this peer's
    /// IKE SAs may carry children for. Installed children keep their tags.
    pub fn set_policies(&mut self, policies: Vec<ChildPolicy>) {
        self.policies = policies;
    }

    /// The other tunnels' selectors (see [`Ike::set_policies`]).
    pub fn policies(&self) -> &[ChildPolicy] {
        &self.policies
    }

    /// The own selectors' tunnel is gone while its IKE SA still carries
    /// children of other policies: no new child for the own selectors, no
    /// reconnection; the IKE SA lives on (DPD, rekeys) for the others.
    pub fn retire(&mut self) {
        self.retired = true;
        self.cfg.initiate = false;
        self.reconnect_at = None;
    }

    /// Whether [`Ike::retire`] was called.
    pub fn is_retired(&self) -> bool {
        self.retired
    }

    /// (spi_in, policy tag) of installed child SAs; None is the own
    /// selectors.
    pub fn child_policies(&self) -> Vec<(u32, Option<u32>)> {
        self.sas
            .iter()
            .filter(|s| !s.dead)
            .flat_map(|s| s.children.iter().map(|c| (c.spi_in, c.policy)))
            .collect()
    }

    fn event(&mut self, e: Event) {
        self.actions.push_back(Action::Event(e));
    }

    fn send(&mut self, idx: usize, msg: Vec<u8>) {
        let sa = &self.sas[idx];
        let data = sa.wrap(msg);
        self.actions.push_back(Action::Send {
            local: sa.local,
            remote: sa.remote,
            data,
        });
    }

    fn fail(&mut self, reason: FailReason, child: bool) {
        self.event(Event::Failed { reason, child });
    }

    /// Start a new IKE SA towards the configured peer.
    pub fn initiate(&mut self, now: Instant) -> Result<()> {
        if self.sas.len() >= MAX_SAS {
            return Err(Error::TooMany("IKE SAs"));
        }
        let mut sa = IkeSa::new(true, self.cfg.local_addr, self.cfg.remote_addr, now);
        sa.spi_i = rand_spi64()?;
        sa.ni = nonce()?;
        let group = self
            .cfg
            .ike_proposals
            .iter()
            .find_map(|p| p.dh.first().copied())
            .ok_or_else(|| Error::Config("no DH group in the IKE proposals".into()))?;
        sa.dh = Some(DhPrivate::generate(group)?);
        self.sas.push(sa);
        let idx = self.sas.len() - 1;
        self.send_init(idx, now)
    }

    fn send_init(&mut self, idx: usize, now: Instant) -> Result<()> {
        let sa = &self.sas[idx];
        let dh = sa.dh.as_ref().ok_or(Error::Malformed("no DH"))?;
        let mut p = Vec::new();
        if let Some(c) = &sa.cookie {
            p.push(Payload::Notify(Notify::new(notify::COOKIE, c.clone())));
        }
        let props: Vec<Proposal> = self
            .cfg
            .ike_proposals
            .iter()
            .enumerate()
            .map(|(i, pr)| pr.to_wire(i as u8 + 1, Vec::new()))
            .collect();
        p.push(Payload::Sa(props));
        p.push(Payload::Ke {
            group: dh.group().id(),
            data: dh.public().to_vec(),
        });
        p.push(Payload::Nonce(sa.ni.clone()));
        p.extend(nat_payloads(
            sa.spi_i,
            0,
            sa.local,
            sa.remote,
            self.cfg.force_encap,
        ));
        if self.cfg.fragment_size.is_some() {
            p.push(Payload::Notify(Notify::new(
                notify::IKEV2_FRAGMENTATION_SUPPORTED,
                vec![],
            )));
        }
        let msg = Message {
            header: sa.header(exchange::IKE_SA_INIT, 0, false),
            payloads: p,
        }
        .build_plain()?;
        let sa = &mut self.sas[idx];
        sa.init_req = msg.clone();
        self.start_request(idx, 0, vec![msg], Req::Init, now);
        Ok(())
    }

    fn start_request(
        &mut self,
        idx: usize,
        msg_id: u32,
        msg: Vec<Vec<u8>>,
        req: Req,
        now: Instant,
    ) {
        let base = self.cfg.retransmit_base;
        let sa = &mut self.sas[idx];
        sa.pending = Some(Pending {
            msg_id,
            data: msg.clone(),
            req,
            tries: 0,
            next_retx: now + base,
            started: now,
        });
        self.send_all(idx, msg);
    }

    fn send_all(&mut self, idx: usize, msgs: Vec<Vec<u8>>) {
        for m in msgs {
            self.send(idx, m);
        }
    }

    /// Queue a new child SA with the configured selectors.
    pub fn create_child(&mut self, now: Instant) {
        self.queue_task(Task::NewChild(None), now);
    }

    /// Queue a new child SA for the [`ChildPolicy`] tagged `tag` inside
    /// the current IKE SA (CREATE_CHILD_SA, RFC 7296 §1.3.1).
    pub fn create_child_for(&mut self, tag: u32, now: Instant) {
        self.queue_task(Task::NewChild(Some(tag)), now);
    }

    /// Rekey the child whose inbound SPI is `spi_in` (make-before-break).
    pub fn rekey_child(&mut self, spi_in: u32, now: Instant) {
        self.queue_task(Task::RekeyChild(spi_in), now);
    }

    /// Rekey the IKE SA (RFC 7296 §1.3.2).
    pub fn rekey_ike(&mut self, now: Instant) {
        self.queue_task(Task::RekeyIke, now);
    }

    /// Delete one child SA.
    pub fn delete_child(&mut self, spi_in: u32, now: Instant) {
        self.queue_task(Task::DeleteChild(spi_in), now);
    }

    /// Delete the IKE SA and with it all child SAs.
    pub fn delete_ike(&mut self, now: Instant) {
        self.queue_task(Task::DeleteIke, now);
    }

    fn current(&self) -> Option<usize> {
        self.sas
            .iter()
            .rposition(|s| s.state == St::Established && !s.dead)
    }

    fn queue_task(&mut self, t: Task, now: Instant) {
        let idx = match t {
            Task::RekeyChild(spi) | Task::DeleteChild(spi) => self
                .sas
                .iter()
                .position(|s| !s.dead && s.children.iter().any(|c| c.spi_in == spi)),
            _ => self.current(),
        };
        if let Some(i) = idx {
            if self.sas[i].queue.len() < MAX_TASKS && !self.sas[i].queue.contains(&t) {
                self.sas[i].queue.push_back(t);
            }
            self.run_queue(i, now);
        }
    }

    fn run_queue(&mut self, idx: usize, now: Instant) {
        while self.sas[idx].pending.is_none()
            && self.sas[idx].state == St::Established
            && !self.sas[idx].dead
        {
            let Some(t) = self.sas[idx].queue.pop_front() else {
                return;
            };
            match self.start_task(idx, t, now) {
                Ok(()) => {}
                Err(e) => self.fail(FailReason::Protocol(e.to_string()), true),
            }
        }
    }

    fn start_task(&mut self, idx: usize, t: Task, now: Instant) -> Result<()> {
        let sa = &self.sas[idx];
        let id = sa.next_req;
        let (payloads, exch, req) = match t {
            Task::NewChild(_) | Task::RekeyChild(_) => {
                let rekey_of = if let Task::RekeyChild(s) = t {
                    Some(s)
                } else {
                    None
                };
                let (ts, policy) = match t {
                    Task::RekeyChild(s) => match sa.children.iter().find(|c| c.spi_in == s) {
                        Some(c) => ((c.local_ts.clone(), c.remote_ts.clone()), c.policy),
                        None => return Ok(()),
                    },
                    Task::NewChild(Some(tag)) => {
                        match self.policies.iter().find(|p| p.tag == tag) {
                            Some(p) => ((ts_of(&p.local_ts), ts_of(&p.remote_ts)), Some(tag)),
                            None => return Ok(()),
                        }
                    }
                    _ if self.retired => return Ok(()),
                    _ => (self.config_ts(), None),
                };
                let spi_in = rand_spi32()?;
                let ni = nonce()?;
                let pfs = self
                    .esp_proposals(policy)
                    .first()
                    .and_then(|p| p.dh.first().copied());
                let dh = pfs.map(DhPrivate::generate).transpose()?;
                let mut p = Vec::new();
                if let Some(old) = rekey_of {
                    p.push(Payload::Notify(Notify {
                        protocol: sap::PROTO_ESP,
                        spi: old.to_be_bytes().to_vec(),
                        ty: notify::REKEY_SA,
                        data: vec![],
                    }));
                }
                p.push(Payload::Sa(self.esp_offer(spi_in, true, policy)));
                p.push(Payload::Nonce(ni.clone()));
                if let Some(d) = &dh {
                    p.push(Payload::Ke {
                        group: d.group().id(),
                        data: d.public().to_vec(),
                    });
                }
                p.push(Payload::TsI(ts.0.clone()));
                p.push(Payload::TsR(ts.1.clone()));
                (
                    p,
                    exchange::CREATE_CHILD_SA,
                    Req::CreateChild {
                        spi_in,
                        rekey_of,
                        dh,
                        ni,
                        ts,
                        policy,
                    },
                )
            }
            Task::RekeyIke => {
                let suite = sa.suite.ok_or(Error::Malformed("no suite"))?;
                let spi = rand_spi64()?;
                let ni = nonce()?;
                let dh = DhPrivate::generate(suite.dh)?;
                let props: Vec<Proposal> = self
                    .cfg
                    .ike_proposals
                    .iter()
                    .enumerate()
                    .map(|(i, pr)| pr.to_wire(i as u8 + 1, spi.to_be_bytes().to_vec()))
                    .collect();
                let p = vec![
                    Payload::Sa(props),
                    Payload::Nonce(ni.clone()),
                    Payload::Ke {
                        group: dh.group().id(),
                        data: dh.public().to_vec(),
                    },
                ];
                (p, exchange::CREATE_CHILD_SA, Req::RekeyIke { spi, dh, ni })
            }
            Task::DeleteChild(spi) => {
                if !sa.children.iter().any(|c| c.spi_in == spi) {
                    return Ok(());
                }
                (
                    vec![Payload::Delete(Delete {
                        protocol: sap::PROTO_ESP,
                        spis: vec![spi],
                    })],
                    exchange::INFORMATIONAL,
                    Req::DeleteChild(spi),
                )
            }
            Task::DeleteIke => (
                vec![Payload::Delete(Delete {
                    protocol: sap::PROTO_IKE,
                    spis: vec![],
                })],
                exchange::INFORMATIONAL,
                Req::DeleteIke,
            ),
            Task::Dpd => (vec![], exchange::INFORMATIONAL, Req::Dpd),
        };
        let msg = sa.protect(exch, id, false, payloads)?;
        self.start_request(idx, id, msg, req, now);
        Ok(())
    }

    fn config_ts(&self) -> (Vec<TrafficSelector>, Vec<TrafficSelector>) {
        (ts_of(&self.cfg.local_ts), ts_of(&self.cfg.remote_ts))
    }

    /// The ESP proposals of the own selectors (None) or of a policy.
    fn esp_proposals(&self, policy: Option<u32>) -> &[EspProposal] {
        policy
            .and_then(|tag| self.policies.iter().find(|p| p.tag == tag))
            .map(|p| &p.esp_proposals[..])
            .filter(|v| !v.is_empty())
            .unwrap_or(&self.cfg.esp_proposals)
    }

    /// The policy whose selectors fit a peer's request (RFC 7296 §2.9):
    /// `tsi` are the initiator's (our remote side), `tsr` ours. A policy
    /// that takes the request whole (nothing narrowed away) beats one that
    /// only overlaps; then the own selectors come first, then the policies
    /// in order. `only` restricts the choice (a rekey keeps its policy).
    /// Returns the tag and the narrowed (tsi, tsr).
    #[allow(clippy::type_complexity)]
    fn fit_policy(
        &self,
        tsi: &[TrafficSelector],
        tsr: &[TrafficSelector],
        only: Option<Option<u32>>,
    ) -> Option<(Option<u32>, Vec<TrafficSelector>, Vec<TrafficSelector>)> {
        let own = (!self.retired).then_some((None, &self.cfg.remote_ts, &self.cfg.local_ts));
        let others = self
            .policies
            .iter()
            .map(|p| (Some(p.tag), &p.remote_ts, &p.local_ts));
        let mut partial = None;
        for (tag, remote, local) in own.into_iter().chain(others) {
            if only.is_some_and(|o| o != tag) {
                continue;
            }
            let (Some(n_i), Some(n_r)) = (select::narrow(tsi, remote), select::narrow(tsr, local))
            else {
                continue;
            };
            let whole = |offered: &[TrafficSelector], got: &[TrafficSelector]| {
                offered.iter().all(|t| got.contains(t))
            };
            if whole(tsi, &n_i) && whole(tsr, &n_r) {
                return Some((tag, n_i, n_r));
            }
            if partial.is_none() {
                partial = Some((tag, n_i, n_r));
            }
        }
        partial
    }

    fn esp_offer(&self, spi: u32, pfs: bool, policy: Option<u32>) -> Vec<Proposal> {
        self.esp_proposals(policy)
            .iter()
            .enumerate()
            .map(|(i, p)| p.to_wire(i as u8 + 1, spi, pfs))
            .collect()
    }

    /// Feed one received UDP payload. `local` is the address it arrived on
    /// (the NAT-T port means a non-ESP marker precedes IKE messages).
    pub fn handle_datagram(
        &mut self,
        data: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) {
        let data = if local.port() == self.cfg.natt_port {
            match data.strip_prefix(&NON_ESP_MARKER[..]) {
                Some(d) => d,
                None => return, // ESP-in-UDP: the dataplane's business.
            }
        } else {
            data
        };
        let h = match Header::parse(data) {
            Ok(h) => h,
            Err(e) => {
                self.dropped += 1;
                self.last_error = Some(e);
                return;
            }
        };
        let r = if h.exchange == exchange::IKE_SA_INIT {
            if h.is_response() {
                self.on_init_response(&h, data, now)
            } else {
                self.on_init_request(&h, data, local, remote, now)
            }
        } else {
            self.on_protected(&h, data, local, remote, now)
        };
        if let Err(e) = r {
            // Unauthenticated junk must not be able to flood the event log:
            // count it and keep the last reason for diagnostics.
            self.dropped += 1;
            self.last_error = Some(e);
        }
        self.sweep(now);
    }

    fn sweep(&mut self, now: Instant) {
        let before = self.sas.len();
        let mut i = 0;
        while i < self.sas.len() {
            if self.sas[i].dead {
                let sa = self.sas.remove(i);
                for c in &sa.children {
                    self.actions.push_back(Action::RemoveChild {
                        spi_in: c.spi_in,
                        spi_out: c.spi_out,
                    });
                    self.event(Event::ChildDeleted {
                        spi_in: c.spi_in,
                        spi_out: c.spi_out,
                    });
                }
                if sa.state == St::Established {
                    self.event(Event::IkeDeleted {
                        spi_i: sa.spi_i,
                        spi_r: sa.spi_r,
                    });
                }
            } else {
                i += 1;
            }
        }
        if let (true, true, Some(d)) = (
            self.sas.len() < before && self.sas.is_empty(),
            self.cfg.initiate,
            self.cfg.reconnect_delay,
        ) {
            self.reconnect_at = Some(now + d);
        }
    }

    fn cookie_for(&self, ni: &[u8], remote: SocketAddr, spi_i: u64) -> Vec<u8> {
        // RFC 7296 §2.6: Cookie = <VersionIDofSecret> | Hash(Ni | IPi | SPIi | <secret>).
        let ip = match remote.ip() {
            std::net::IpAddr::V4(a) => a.octets().to_vec(),
            std::net::IpAddr::V6(a) => a.octets().to_vec(),
        };
        let mut c = vec![0u8];
        c.extend_from_slice(
            &crypto::Prf::HmacSha256.prf(&self.cookie_secret[..], &[ni, &ip, &spi_i.to_be_bytes()]),
        );
        c
    }

    fn plain_reply(
        &mut self,
        h: &Header,
        local: SocketAddr,
        remote: SocketAddr,
        n: Notify,
    ) -> Result<()> {
        let msg = Message {
            header: Header {
                spi_i: h.spi_i,
                spi_r: 0,
                next: 0,
                exchange: exchange::IKE_SA_INIT,
                flags: flags::RESPONSE,
                msg_id: 0,
                length: 0,
            },
            payloads: vec![Payload::Notify(n)],
        }
        .build_plain()?;
        self.actions.push_back(Action::Send {
            local,
            remote,
            data: msg,
        });
        Ok(())
    }

    fn on_init_request(
        &mut self,
        h: &Header,
        data: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> Result<()> {
        if h.spi_r != 0 || h.msg_id != 0 || h.is_response() {
            return Ok(());
        }
        // A retransmitted request gets the same response (RFC 7296 §2.1).
        if let Some(i) = self
            .sas
            .iter()
            .position(|s| !s.initiator && s.spi_i == h.spi_i && s.remote == remote)
        {
            if self.sas[i].state == St::HalfOpen && self.sas[i].init_req == data {
                if let Some((_, r)) = self.sas[i].last_resp.clone() {
                    self.send_all(i, r);
                }
            }
            return Ok(());
        }
        let m = Message::parse_plain(data)?;
        let ni = find(&m, |p| {
            if let Payload::Nonce(n) = p {
                Some(n.clone())
            } else {
                None
            }
        })
        .ok_or(Error::Malformed("IKE_SA_INIT without nonce"))?;
        let half_open = self.sas.iter().filter(|s| s.state == St::HalfOpen).count();
        if half_open >= self.cfg.cookie_threshold {
            let want = self.cookie_for(&ni, remote, h.spi_i);
            let ok = m
                .notify(notify::COOKIE)
                .is_some_and(|c| crypto::ct_eq(&c.data, &want));
            if !ok {
                return self.plain_reply(h, local, remote, Notify::new(notify::COOKIE, want));
            }
        }
        if self.sas.len() >= MAX_SAS {
            return Ok(());
        }
        let props = find(&m, |p| {
            if let Payload::Sa(s) = p {
                Some(s)
            } else {
                None
            }
        })
        .ok_or(Error::Malformed("IKE_SA_INIT without SA"))?;
        let Some((num, suite)) = select::select_ike(props, &self.cfg.ike_proposals) else {
            self.fail(FailReason::NoProposalChosen, false);
            return self.plain_reply(
                h,
                local,
                remote,
                Notify::new(notify::NO_PROPOSAL_CHOSEN, vec![]),
            );
        };
        let (group, ke) = find(&m, |p| {
            if let Payload::Ke { group, data } = p {
                Some((*group, data))
            } else {
                None
            }
        })
        .ok_or(Error::Malformed("IKE_SA_INIT without KE"))?;
        if group != suite.dh.id() {
            return self.plain_reply(
                h,
                local,
                remote,
                Notify::new(
                    notify::INVALID_KE_PAYLOAD,
                    suite.dh.id().to_be_bytes().to_vec(),
                ),
            );
        }
        let dh = DhPrivate::generate(suite.dh)?;
        let shared = dh.agree(ke)?;
        let mut sa = IkeSa::new(false, local, remote, now);
        sa.spi_i = h.spi_i;
        sa.spi_r = rand_spi64()?;
        sa.nr = nonce()?;
        sa.ni = ni;
        let keys = IkeKeys::initial(&suite, &shared, &sa.ni, &sa.nr, sa.spi_i, sa.spi_r)?;
        sa.sk = Some(keys.sk_keys(&suite, false));
        sa.keys = Some(keys);
        sa.suite = Some(suite);
        sa.natt = local.port() == self.cfg.natt_port;
        let mut p = vec![
            Payload::Sa(vec![select::ike_reply(num, &suite, Vec::new())]),
            Payload::Ke {
                group: suite.dh.id(),
                data: dh.public().to_vec(),
            },
            Payload::Nonce(sa.nr.clone()),
        ];
        p.extend(nat_payloads(
            sa.spi_i,
            sa.spi_r,
            local,
            remote,
            self.cfg.force_encap,
        ));
        if m.notify(notify::IKEV2_FRAGMENTATION_SUPPORTED).is_some() {
            if let Some(f) = self.cfg.fragment_size {
                sa.frag_size = Some(f);
                p.push(Payload::Notify(Notify::new(
                    notify::IKEV2_FRAGMENTATION_SUPPORTED,
                    vec![],
                )));
            }
        }
        let resp = Message {
            header: sa.header(exchange::IKE_SA_INIT, 0, true),
            payloads: p,
        }
        .build_plain()?;
        sa.init_req = data.to_vec();
        sa.init_resp = resp.clone();
        sa.peer_next = 1;
        sa.last_resp = Some((0, vec![resp.clone()]));
        self.sas.push(sa);
        let idx = self.sas.len() - 1;
        self.send(idx, resp);
        Ok(())
    }

    fn on_init_response(&mut self, h: &Header, data: &[u8], now: Instant) -> Result<()> {
        let Some(idx) = self
            .sas
            .iter()
            .position(|s| s.initiator && s.state == St::InitSent && s.spi_i == h.spi_i)
        else {
            return Ok(());
        };
        if self.sas[idx].pending.as_ref().map(|p| p.msg_id) != Some(0) {
            return Ok(());
        }
        let m = Message::parse_plain(data)?;
        if let Some(c) = m.notify(notify::COOKIE) {
            if c.data.is_empty() || c.data.len() > 64 {
                return Err(Error::Malformed("cookie"));
            }
            self.sas[idx].cookie = Some(c.data.clone());
            return self.send_init(idx, now);
        }
        if let Some(n) = m.notify(notify::INVALID_KE_PAYLOAD) {
            let want = <[u8; 2]>::try_from(n.data.as_slice())
                .ok()
                .map(u16::from_be_bytes);
            let offered = self.cfg.ike_proposals.iter().flat_map(|p| p.dh.iter());
            let cur = self.sas[idx].dh.as_ref().map(|d| d.group().id());
            match want.and_then(DhGroup::from_id) {
                Some(g) if Some(g.id()) != cur && offered.clone().any(|o| *o == g) => {
                    self.sas[idx].dh = Some(DhPrivate::generate(g)?);
                    return self.send_init(idx, now);
                }
                _ => {
                    self.sas[idx].dead = true;
                    self.fail(FailReason::InvalidKePayload, false);
                    return Ok(());
                }
            }
        }
        if let Some(e) = m.error_notify() {
            self.sas[idx].dead = true;
            self.fail(FailReason::from_notify(e), false);
            return Ok(());
        }
        let props = find(&m, |p| {
            if let Payload::Sa(s) = p {
                Some(s)
            } else {
                None
            }
        })
        .ok_or(Error::Malformed("no SA"))?;
        let suite = match select::select_ike(props, &self.cfg.ike_proposals) {
            Some((_, s)) if props.len() == 1 => s,
            _ => {
                self.sas[idx].dead = true;
                self.fail(FailReason::NoProposalChosen, false);
                return Ok(());
            }
        };
        let (group, ke) = find(&m, |p| {
            if let Payload::Ke { group, data } = p {
                Some((*group, data))
            } else {
                None
            }
        })
        .ok_or(Error::Malformed("no KE"))?;
        let nr = find(&m, |p| {
            if let Payload::Nonce(n) = p {
                Some(n.clone())
            } else {
                None
            }
        })
        .ok_or(Error::Malformed("no nonce"))?;
        let sa = &mut self.sas[idx];
        let dh = sa.dh.take().ok_or(Error::Malformed("no DH"))?;
        if group != suite.dh.id() || dh.group() != suite.dh {
            sa.dead = true;
            self.fail(FailReason::InvalidKePayload, false);
            return Ok(());
        }
        let shared = dh.agree(ke)?;
        sa.spi_r = h.spi_r;
        sa.nr = nr;
        let keys = IkeKeys::initial(&suite, &shared, &sa.ni, &sa.nr, sa.spi_i, sa.spi_r)?;
        sa.sk = Some(keys.sk_keys(&suite, true));
        sa.keys = Some(keys);
        sa.suite = Some(suite);
        sa.init_resp = data.to_vec();
        sa.pending = None;
        if m.notify(notify::IKEV2_FRAGMENTATION_SUPPORTED).is_some() {
            sa.frag_size = self.cfg.fragment_size;
        }
        sa.next_req = 1;
        sa.last_rx = now;
        let nat = nat_detected(&m, sa.spi_i, sa.spi_r, sa.local, sa.remote);
        if nat || self.cfg.force_encap {
            // RFC 7296 §2.23: float to the NAT-T port from IKE_AUTH on.
            sa.natt = true;
            sa.local.set_port(self.cfg.natt_port);
            sa.remote.set_port(self.cfg.natt_port);
        }
        sa.state = St::AuthSent;
        self.send_auth(idx, now)
    }

    fn send_auth(&mut self, idx: usize, now: Instant) -> Result<()> {
        let spi_in = rand_spi32()?;
        let sa = &self.sas[idx];
        let keys = sa.keys.as_ref().ok_or(Error::Malformed("no keys"))?;
        let prf = sa.prf()?;
        let idi = self.cfg.local_id.to_body();
        let auth = crypto::psk_auth(prf, &self.cfg.psk, &sa.init_req, &sa.nr, &keys.sk_pi, &idi);
        let (tsi, tsr) = self.config_ts();
        let p = vec![
            Payload::IdI(self.cfg.local_id.clone()),
            Payload::IdR(self.cfg.remote_id.clone()),
            Payload::Auth {
                method: 2,
                data: auth,
            },
            Payload::Sa(self.esp_offer(spi_in, false, None)),
            Payload::TsI(tsi),
            Payload::TsR(tsr),
        ];
        let msg = sa.protect(exchange::IKE_AUTH, 1, false, p)?;
        self.start_request(idx, 1, msg, Req::Auth { spi_in }, now);
        Ok(())
    }

    fn on_protected(
        &mut self,
        h: &Header,
        data: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> Result<()> {
        let Some(idx) = self
            .sas
            .iter()
            .position(|s| !s.dead && s.spi_i == h.spi_i && s.spi_r == h.spi_r)
        else {
            return Ok(());
        };
        let sa = &self.sas[idx];
        let Some(sk) = sa.sk.as_ref() else {
            return Ok(());
        };
        if h.is_response() {
            if sa.pending.as_ref().map(|p| p.msg_id) != Some(h.msg_id) {
                return Ok(());
            }
        } else if h.msg_id.wrapping_add(1) == sa.peer_next {
            // RFC 7383 §2.6.1: a retransmitted fragmented request is
            // answered once, on its first fragment.
            let first_frag =
                h.next != kind::SKF || open_fragment(data, sk).is_ok_and(|f| f.info.number == 1);
            if let (Some((id, r)), true) = (sa.last_resp.clone(), first_frag) {
                if id == h.msg_id {
                    self.send_all(idx, r);
                }
            }
            return Ok(());
        } else if h.msg_id != sa.peer_next {
            return Ok(());
        }
        let m = if h.next == kind::SKF {
            // Integrity failures are dropped silently (RFC 7296 §2.21).
            let f = open_fragment(data, sk)?;
            match self.reassemble(idx, f)? {
                Some(m) => m,
                None => return Ok(()),
            }
        } else {
            Message::parse_protected(data, sk)?
        };
        let sa = &mut self.sas[idx];
        sa.last_rx = now;
        if sa.remote != remote || sa.local != local {
            // Follow the peer's NAT mapping once the message authenticated.
            sa.remote = remote;
            sa.local = local;
            sa.natt = local.port() == self.cfg.natt_port;
        }
        if h.is_response() {
            let p = sa.pending.take().ok_or(Error::Malformed("no pending"))?;
            sa.next_req = sa.next_req.wrapping_add(1);
            self.on_response(idx, &m, p.req, now)?;
        } else {
            let resp = self.on_request(idx, h, &m, now)?;
            if let Some(payloads) = resp {
                let sa = &mut self.sas[idx];
                let msg = sa.protect(h.exchange, h.msg_id, true, payloads)?;
                sa.peer_next = h.msg_id.wrapping_add(1);
                sa.last_resp = Some((h.msg_id, msg.clone()));
                self.send_all(idx, msg);
            }
        }
        if idx < self.sas.len() {
            self.run_queue(idx, now);
        }
        Ok(())
    }

    /// Collect a verified fragment; the whole message once complete.
    fn reassemble(&mut self, idx: usize, f: Fragment) -> Result<Option<Message>> {
        let sa = &mut self.sas[idx];
        let total = usize::from(f.info.total);
        if total > MAX_FRAGMENTS {
            return Err(Error::TooMany("fragments"));
        }
        let response = f.header.is_response();
        let fresh = sa.reasm.as_ref().is_none_or(|r| {
            r.msg_id != f.header.msg_id || r.response != response || r.parts.len() != total
        });
        if fresh {
            sa.reasm = Some(Reassembly {
                msg_id: f.header.msg_id,
                response,
                first: 0,
                parts: (0..total).map(|_| None).collect(),
                bytes: 0,
            });
        }
        let Some(r) = sa.reasm.as_mut() else {
            return Ok(None);
        };
        let slot = usize::from(f.info.number) - 1;
        if r.parts[slot].is_some() {
            return Ok(None);
        }
        r.bytes += f.plain.len();
        if r.bytes > MAX_MESSAGE_LEN {
            sa.reasm = None;
            return Err(Error::TooLong);
        }
        if slot == 0 {
            r.first = f.next;
        }
        r.parts[slot] = Some(f.plain);
        if r.parts.iter().any(Option::is_none) {
            return Ok(None);
        }
        let mut whole = Zeroizing::new(Vec::with_capacity(r.bytes));
        for p in r.parts.iter().flatten() {
            whole.extend_from_slice(p);
        }
        let first = r.first;
        sa.reasm = None;
        let payloads = crate::payload::decode_chain(first, &whole)?;
        Ok(Some(Message {
            header: f.header,
            payloads,
        }))
    }

    fn on_request(
        &mut self,
        idx: usize,
        h: &Header,
        m: &Message,
        now: Instant,
    ) -> Result<Option<Vec<Payload>>> {
        let state = self.sas[idx].state;
        match (h.exchange, state) {
            (exchange::IKE_AUTH, St::HalfOpen) if h.msg_id == 1 => {
                self.auth_request(idx, m, now).map(Some)
            }
            (exchange::CREATE_CHILD_SA, St::Established) => {
                self.create_child_request(idx, m, now).map(Some)
            }
            (exchange::INFORMATIONAL, St::Established | St::HalfOpen) => {
                self.info_request(idx, m).map(Some)
            }
            _ => Ok(None),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn install_child(
        &mut self,
        idx: usize,
        suite: &EspSuite,
        km: [Secret; 4],
        we_initiated_exchange: bool,
        (spi_in, spi_out): (u32, u32),
        local_ts: Vec<TrafficSelector>,
        remote_ts: Vec<TrafficSelector>,
        policy: Option<u32>,
        now: Instant,
    ) {
        let [ei, ai, er, ar] = km;
        let (enc_out, int_out, enc_in, int_in) = if we_initiated_exchange {
            (ei, ai, er, ar)
        } else {
            (er, ar, ei, ai)
        };
        let sa = &mut self.sas[idx];
        if sa.children.len() >= MAX_CHILDREN {
            self.fail(FailReason::Protocol("too many child SAs".into()), true);
            return;
        }
        let udp = sa.natt;
        let keys = ChildSaKeys {
            spi_in,
            spi_out,
            algorithm: suite.name(),
            enc_key_in: enc_in,
            enc_key_out: enc_out,
            integ_key_in: int_in,
            integ_key_out: int_out,
            local_ts: local_ts.clone(),
            remote_ts: remote_ts.clone(),
            udp_encap: udp,
            local: sa.local,
            remote: sa.remote,
            policy,
        };
        sa.children.push(Child {
            spi_in,
            spi_out,
            local_ts,
            remote_ts,
            policy,
            rekey_at: self.cfg.child_rekey_time.map(|d| now + d),
            expire_at: self.cfg.child_life_time.map(|d| now + d),
        });
        self.actions.push_back(Action::InstallChild(keys));
        self.event(Event::ChildEstablished { spi_in, spi_out });
    }

    fn established(&mut self, idx: usize, now: Instant) {
        let sa = &mut self.sas[idx];
        sa.state = St::Established;
        sa.rekey_at = self.cfg.ike_rekey_time.map(|d| now + d);
        sa.expire_at = self.cfg.ike_life_time.map(|d| now + d);
        let (spi_i, spi_r, nat) = (sa.spi_i, sa.spi_r, sa.natt);
        if let Some(suite) = sa.suite {
            self.event(Event::IkeEstablished {
                spi_i,
                spi_r,
                suite,
                nat,
            });
        }
    }

    /// Verifies the peer's PSK AUTH payload (RFC 7296 §2.15) in an IKE_AUTH
    /// request (`from_initiator`: IDi, signed over our view of its
    /// IKE_SA_INIT request, Nr and SK_pi) or response (IDr, IKE_SA_INIT
    /// response, Ni, SK_pr), and that the ID is the configured remote ID.
    fn peer_auth_ok(&self, idx: usize, m: &Message, from_initiator: bool) -> Result<bool> {
        let sa = &self.sas[idx];
        let keys = sa.keys.as_ref().ok_or(Error::Malformed("no keys"))?;
        let prf = sa.prf()?;
        let id = find(m, |p| match p {
            Payload::IdI(i) if from_initiator => Some(i),
            Payload::IdR(i) if !from_initiator => Some(i),
            _ => None,
        });
        let auth = find(m, |p| {
            if let Payload::Auth { method, data } = p {
                Some((*method, data))
            } else {
                None
            }
        });
        let (signed, nonce, sk_p) = if from_initiator {
            (&sa.init_req, &sa.nr, &keys.sk_pi)
        } else {
            (&sa.init_resp, &sa.ni, &keys.sk_pr)
        };
        Ok(match (id, auth) {
            (Some(id), Some((2, data))) if *id == self.cfg.remote_id => {
                let want = crypto::psk_auth(prf, &self.cfg.psk, signed, nonce, sk_p, &id.to_body());
                crypto::ct_eq(&want, data)
            }
            _ => false,
        })
    }

    fn auth_request(&mut self, idx: usize, m: &Message, now: Instant) -> Result<Vec<Payload>> {
        let ok = self.peer_auth_ok(idx, m, true)?;
        let sa = &self.sas[idx];
        let keys = sa.keys.as_ref().ok_or(Error::Malformed("no keys"))?;
        let prf = sa.prf()?;
        if !ok {
            self.sas[idx].dead = true;
            self.fail(FailReason::AuthenticationFailed, false);
            return Ok(vec![Payload::Notify(Notify::new(
                notify::AUTHENTICATION_FAILED,
                vec![],
            ))]);
        }
        let idr = self.cfg.local_id.to_body();
        let my_auth =
            crypto::psk_auth(prf, &self.cfg.psk, &sa.init_resp, &sa.ni, &keys.sk_pr, &idr);
        let mut out = vec![
            Payload::IdR(self.cfg.local_id.clone()),
            Payload::Auth {
                method: 2,
                data: my_auth,
            },
        ];
        let (ni, nr) = (sa.ni.clone(), sa.nr.clone());
        self.established(idx, now);
        out.extend(self.child_response(idx, m, (&ni, &nr), false, None, now)?);
        Ok(out)
    }

    /// Responder side of child negotiation (IKE_AUTH or CREATE_CHILD_SA).
    fn child_response(
        &mut self,
        idx: usize,
        m: &Message,
        (ni, nr): (&[u8], &[u8]),
        pfs_ctx: bool,
        only: Option<Option<u32>>,
        now: Instant,
    ) -> Result<Vec<Payload>> {
        let props = find(m, |p| {
            if let Payload::Sa(s) = p {
                Some(s)
            } else {
                None
            }
        })
        .ok_or(Error::Malformed("no SA"))?;
        let tsi = find(m, |p| {
            if let Payload::TsI(t) = p {
                Some(t)
            } else {
                None
            }
        })
        .ok_or(Error::Malformed("no TSi"))?;
        let tsr = find(m, |p| {
            if let Payload::TsR(t) = p {
                Some(t)
            } else {
                None
            }
        })
        .ok_or(Error::Malformed("no TSr"))?;
        // The peer's TSi is its side (our remote), TSr ours: the tunnel
        // (own selectors or a policy) is chosen by them (RFC 7296 §2.9).
        let Some((policy, n_i, n_r)) = self.fit_policy(tsi, tsr, only) else {
            self.event(Event::TsRejected {
                by_peer: false,
                tsi: tsi.clone(),
                tsr: tsr.clone(),
            });
            self.fail(FailReason::TsUnacceptable, true);
            return Ok(vec![Payload::Notify(Notify::new(
                notify::TS_UNACCEPTABLE,
                vec![],
            ))]);
        };
        let Some((num, spi_out, suite)) =
            select::select_esp(props, self.esp_proposals(policy), pfs_ctx)
        else {
            self.fail(FailReason::NoProposalChosen, true);
            return Ok(vec![Payload::Notify(Notify::new(
                notify::NO_PROPOSAL_CHOSEN,
                vec![],
            ))]);
        };
        let mut extra = Vec::new();
        let mut g_ir = None;
        let empty = Vec::new();
        if let (Some(g), true) = (suite.dh, pfs_ctx) {
            let (group, ke) = find(m, |p| {
                if let Payload::Ke { group, data } = p {
                    Some((*group, data))
                } else {
                    None
                }
            })
            .unwrap_or((0, &empty));
            if group != g.id() {
                return Ok(vec![Payload::Notify(Notify::new(
                    notify::INVALID_KE_PAYLOAD,
                    g.id().to_be_bytes().to_vec(),
                ))]);
            }
            let dh = DhPrivate::generate(g)?;
            g_ir = Some(dh.agree(ke)?);
            extra.push(Payload::Ke {
                group: g.id(),
                data: dh.public().to_vec(),
            });
        }
        let spi_in = rand_spi32()?;
        let sa = &self.sas[idx];
        let keys = sa.keys.as_ref().ok_or(Error::Malformed("no keys"))?;
        let integ_len = suite.integ.map_or(0, |i| i.key_len());
        let km = child_keymat(
            sa.prf()?,
            &keys.sk_d,
            g_ir.as_ref().map(|s| s.as_slice()),
            ni,
            nr,
            suite.encr.keymat_len(),
            integ_len,
        )?;
        self.install_child(
            idx,
            &suite,
            km,
            false,
            (spi_in, spi_out),
            n_r.clone(),
            n_i.clone(),
            policy,
            now,
        );
        let mut out = vec![Payload::Sa(vec![select::esp_reply(num, &suite, spi_in)])];
        if pfs_ctx {
            out.push(Payload::Nonce(nr.to_vec()));
        }
        out.extend(extra);
        out.push(Payload::TsI(n_i));
        out.push(Payload::TsR(n_r));
        Ok(out)
    }

    fn create_child_request(
        &mut self,
        idx: usize,
        m: &Message,
        now: Instant,
    ) -> Result<Vec<Payload>> {
        let props = find(m, |p| {
            if let Payload::Sa(s) = p {
                Some(s)
            } else {
                None
            }
        })
        .ok_or(Error::Malformed("no SA"))?;
        let ni = find(m, |p| {
            if let Payload::Nonce(n) = p {
                Some(n.clone())
            } else {
                None
            }
        })
        .ok_or(Error::Malformed("no nonce"))?;
        let nr = nonce()?;
        if props.iter().any(|p| p.protocol == sap::PROTO_IKE) {
            if matches!(
                self.sas[idx].pending.as_ref().map(|p| &p.req),
                Some(Req::RekeyIke { .. })
            ) {
                return Ok(vec![Payload::Notify(Notify::new(
                    notify::TEMPORARY_FAILURE,
                    vec![],
                ))]);
            }
            return self.ike_rekey_request(idx, m, props, &ni, &nr, now);
        }
        let rekey_of = m
            .notify(notify::REKEY_SA)
            .and_then(|n| <[u8; 4]>::try_from(n.spi.as_slice()).ok())
            .map(u32::from_be_bytes);
        let old = match rekey_of {
            Some(spi_out) => match self.sas[idx].children.iter().find(|c| c.spi_out == spi_out) {
                Some(c) => Some((c.spi_in, c.policy)),
                None => {
                    return Ok(vec![Payload::Notify(Notify {
                        protocol: sap::PROTO_ESP,
                        spi: spi_out.to_be_bytes().to_vec(),
                        ty: notify::CHILD_SA_NOT_FOUND,
                        data: vec![],
                    })])
                }
            },
            None => None,
        };
        // Both ends rekeying the same child at once (RFC 7296 §2.8.1):
        // refuse, and each side retries after a random delay.
        let colliding = matches!(
            self.sas[idx].pending.as_ref().map(|p| &p.req),
            Some(Req::CreateChild { rekey_of: Some(o), .. }) if Some(*o) == old.map(|x| x.0)
        );
        if colliding {
            return Ok(vec![Payload::Notify(Notify::new(
                notify::TEMPORARY_FAILURE,
                vec![],
            ))]);
        }
        let before = self.sas[idx].children.len();
        // A rekeyed child keeps its tunnel (the selectors are the same).
        let only = old.map(|x| x.1);
        let out = self.child_response(idx, m, (&ni, &nr), true, only, now)?;
        if let (Some((old_in, _)), true) = (old, self.sas[idx].children.len() > before) {
            if let Some(c) = self.sas[idx].children.last() {
                let new_spi_in = c.spi_in;
                self.event(Event::ChildRekeyed {
                    old_spi_in: old_in,
                    new_spi_in,
                });
            }
        }
        Ok(out)
    }

    fn ike_rekey_request(
        &mut self,
        idx: usize,
        m: &Message,
        props: &[Proposal],
        ni: &[u8],
        nr: &[u8],
        now: Instant,
    ) -> Result<Vec<Payload>> {
        let Some((num, suite)) = select::select_ike(props, &self.cfg.ike_proposals) else {
            self.fail(FailReason::NoProposalChosen, false);
            return Ok(vec![Payload::Notify(Notify::new(
                notify::NO_PROPOSAL_CHOSEN,
                vec![],
            ))]);
        };
        let Some(peer_spi) = props
            .iter()
            .find(|p| p.num == num && p.protocol == sap::PROTO_IKE)
            .and_then(|p| <[u8; 8]>::try_from(p.spi.as_slice()).ok())
            .map(u64::from_be_bytes)
        else {
            return Ok(vec![Payload::Notify(Notify::new(
                notify::INVALID_SYNTAX,
                vec![],
            ))]);
        };
        let (group, ke) = find(m, |p| {
            if let Payload::Ke { group, data } = p {
                Some((*group, data))
            } else {
                None
            }
        })
        .ok_or(Error::Malformed("no KE"))?;
        if group != suite.dh.id() {
            return Ok(vec![Payload::Notify(Notify::new(
                notify::INVALID_KE_PAYLOAD,
                suite.dh.id().to_be_bytes().to_vec(),
            ))]);
        }
        let dh = DhPrivate::generate(suite.dh)?;
        let shared = dh.agree(ke)?;
        let my_spi = rand_spi64()?;
        self.finish_ike_rekey(idx, suite, &shared, ni, nr, peer_spi, my_spi, false, now)?;
        Ok(vec![
            Payload::Sa(vec![select::ike_reply(
                num,
                &suite,
                my_spi.to_be_bytes().to_vec(),
            )]),
            Payload::Nonce(nr.to_vec()),
            Payload::Ke {
                group: suite.dh.id(),
                data: dh.public().to_vec(),
            },
        ])
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_ike_rekey(
        &mut self,
        idx: usize,
        suite: IkeSuite,
        shared: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
        we_initiated: bool,
        now: Instant,
    ) -> Result<()> {
        if self.sas.len() >= MAX_SAS {
            return Err(Error::TooMany("IKE SAs"));
        }
        let old = &mut self.sas[idx];
        let old_keys = old.keys.as_ref().ok_or(Error::Malformed("no keys"))?;
        let keys = IkeKeys::rekeyed(
            old.prf()?,
            &old_keys.sk_d,
            &suite,
            shared,
            ni,
            nr,
            spi_i,
            spi_r,
        )?;
        let mut sa = IkeSa::new(we_initiated, old.local, old.remote, now);
        sa.spi_i = spi_i;
        sa.spi_r = spi_r;
        sa.ni = ni.to_vec();
        sa.nr = nr.to_vec();
        sa.sk = Some(keys.sk_keys(&suite, we_initiated));
        sa.keys = Some(keys);
        sa.suite = Some(suite);
        sa.natt = old.natt;
        sa.frag_size = old.frag_size;
        sa.state = St::Established;
        sa.rekey_at = self.cfg.ike_rekey_time.map(|d| now + d);
        sa.expire_at = self.cfg.ike_life_time.map(|d| now + d);
        // Children move to the new IKE SA (RFC 7296 §2.18).
        sa.children = std::mem::take(&mut old.children);
        old.rekey_at = None;
        let old_spis = (old.spi_i, old.spi_r);
        self.sas.push(sa);
        self.event(Event::IkeRekeyed {
            old: old_spis,
            new: (spi_i, spi_r),
        });
        if we_initiated {
            self.sas[idx].queue.clear();
            self.sas[idx].queue.push_back(Task::DeleteIke);
        }
        Ok(())
    }

    fn info_request(&mut self, idx: usize, m: &Message) -> Result<Vec<Payload>> {
        let mut out = Vec::new();
        let mut removed = Vec::new();
        for p in &m.payloads {
            match p {
                Payload::Delete(d) if d.protocol == sap::PROTO_IKE => {
                    self.sas[idx].dead = true;
                    return Ok(vec![]);
                }
                Payload::Delete(d) if d.protocol == sap::PROTO_ESP => {
                    let sa = &mut self.sas[idx];
                    for spi in &d.spis {
                        if let Some(i) = sa.children.iter().position(|c| c.spi_out == *spi) {
                            removed.push(sa.children.remove(i));
                        }
                    }
                }
                Payload::Notify(n) if n.ty == notify::AUTHENTICATION_FAILED => {
                    self.sas[idx].dead = true;
                    self.fail(FailReason::AuthenticationFailed, false);
                    return Ok(vec![]);
                }
                _ => {}
            }
        }
        if !removed.is_empty() {
            out.push(Payload::Delete(Delete {
                protocol: sap::PROTO_ESP,
                spis: removed.iter().map(|c| c.spi_in).collect(),
            }));
            for c in removed {
                self.actions.push_back(Action::RemoveChild {
                    spi_in: c.spi_in,
                    spi_out: c.spi_out,
                });
                self.event(Event::ChildDeleted {
                    spi_in: c.spi_in,
                    spi_out: c.spi_out,
                });
            }
        }
        Ok(out)
    }

    fn on_response(&mut self, idx: usize, m: &Message, req: Req, now: Instant) -> Result<()> {
        match req {
            Req::Init => Ok(()),
            Req::Auth { spi_in } => self.auth_response(idx, m, spi_in, now),
            Req::CreateChild {
                spi_in,
                rekey_of,
                dh,
                ni,
                ts,
                policy,
            } => {
                if let (Some(notify::TEMPORARY_FAILURE), Some(old)) = (m.error_notify(), rekey_of) {
                    let at = now + retry_jitter()?;
                    if let Some(c) = self.sas[idx].children.iter_mut().find(|c| c.spi_in == old) {
                        c.rekey_at = Some(at);
                    }
                    return Ok(());
                }
                if let Some(e) = m.error_notify() {
                    if e == notify::TS_UNACCEPTABLE {
                        self.event(Event::TsRejected {
                            by_peer: true,
                            tsi: ts.0.clone(),
                            tsr: ts.1.clone(),
                        });
                    }
                    self.fail(FailReason::from_notify(e), true);
                    return Ok(());
                }
                let nr = find(m, |p| {
                    if let Payload::Nonce(n) = p {
                        Some(n.clone())
                    } else {
                        None
                    }
                })
                .ok_or(Error::Malformed("no nonce"))?;
                let g_ir = match &dh {
                    Some(d) => {
                        let (group, ke) = find(m, |p| {
                            if let Payload::Ke { group, data } = p {
                                Some((*group, data))
                            } else {
                                None
                            }
                        })
                        .ok_or(Error::Malformed("no KE"))?;
                        if group != d.group().id() {
                            self.fail(FailReason::InvalidKePayload, true);
                            return Ok(());
                        }
                        Some(d.agree(ke)?)
                    }
                    None => None,
                };
                let n_before = self.sas[idx].children.len();
                self.child_from_response(
                    idx,
                    m,
                    spi_in,
                    (&ni, &nr),
                    g_ir.as_ref(),
                    &ts,
                    policy,
                    true,
                    now,
                )?;
                if let (Some(old), true) = (rekey_of, self.sas[idx].children.len() > n_before) {
                    self.event(Event::ChildRekeyed {
                        old_spi_in: old,
                        new_spi_in: spi_in,
                    });
                    // Make-before-break: the old SA goes only now.
                    self.sas[idx].queue.push_front(Task::DeleteChild(old));
                }
                Ok(())
            }
            Req::RekeyIke { spi, dh, ni } => {
                if m.error_notify() == Some(notify::TEMPORARY_FAILURE) {
                    self.sas[idx].rekey_at = Some(now + retry_jitter()?);
                    return Ok(());
                }
                if let Some(e) = m.error_notify() {
                    self.fail(FailReason::from_notify(e), false);
                    return Ok(());
                }
                let props = find(m, |p| {
                    if let Payload::Sa(s) = p {
                        Some(s)
                    } else {
                        None
                    }
                })
                .ok_or(Error::Malformed("no SA"))?;
                let Some((num, suite)) = select::select_ike(props, &self.cfg.ike_proposals) else {
                    self.fail(FailReason::NoProposalChosen, false);
                    return Ok(());
                };
                let peer_spi = props
                    .iter()
                    .find(|p| p.num == num)
                    .and_then(|p| <[u8; 8]>::try_from(p.spi.as_slice()).ok())
                    .map(u64::from_be_bytes)
                    .ok_or(Error::Malformed("rekey SPI"))?;
                let nr = find(m, |p| {
                    if let Payload::Nonce(n) = p {
                        Some(n.clone())
                    } else {
                        None
                    }
                })
                .ok_or(Error::Malformed("no nonce"))?;
                let (group, ke) = find(m, |p| {
                    if let Payload::Ke { group, data } = p {
                        Some((*group, data))
                    } else {
                        None
                    }
                })
                .ok_or(Error::Malformed("no KE"))?;
                if group != dh.group().id() || suite.dh != dh.group() {
                    self.fail(FailReason::InvalidKePayload, false);
                    return Ok(());
                }
                let shared = dh.agree(ke)?;
                self.finish_ike_rekey(idx, suite, &shared, &ni, &nr, spi, peer_spi, true, now)
            }
            Req::DeleteChild(spi) => {
                let sa = &mut self.sas[idx];
                if let Some(i) = sa.children.iter().position(|c| c.spi_in == spi) {
                    let c = sa.children.remove(i);
                    self.actions.push_back(Action::RemoveChild {
                        spi_in: c.spi_in,
                        spi_out: c.spi_out,
                    });
                    self.event(Event::ChildDeleted {
                        spi_in: c.spi_in,
                        spi_out: c.spi_out,
                    });
                }
                Ok(())
            }
            Req::DeleteIke => {
                self.sas[idx].dead = true;
                Ok(())
            }
            Req::Dpd => Ok(()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn child_from_response(
        &mut self,
        idx: usize,
        m: &Message,
        spi_in: u32,
        (ni, nr): (&[u8], &[u8]),
        g_ir: Option<&Secret>,
        ts: &(Vec<TrafficSelector>, Vec<TrafficSelector>),
        policy: Option<u32>,
        pfs_ctx: bool,
        now: Instant,
    ) -> Result<()> {
        if let Some(e) = m.error_notify() {
            if e == notify::TS_UNACCEPTABLE {
                self.event(Event::TsRejected {
                    by_peer: true,
                    tsi: ts.0.clone(),
                    tsr: ts.1.clone(),
                });
            }
            self.fail(FailReason::from_notify(e), true);
            return Ok(());
        }
        let Some(props) = find(m, |p| {
            if let Payload::Sa(s) = p {
                Some(s)
            } else {
                None
            }
        }) else {
            self.fail(FailReason::Protocol("no child SA in response".into()), true);
            return Ok(());
        };
        let Some((_, spi_out, suite)) =
            select::select_esp(props, self.esp_proposals(policy), pfs_ctx && g_ir.is_some())
                .filter(|_| props.len() == 1)
        else {
            self.fail(FailReason::NoProposalChosen, true);
            return Ok(());
        };
        let tsi = find(m, |p| {
            if let Payload::TsI(t) = p {
                Some(t.clone())
            } else {
                None
            }
        });
        let tsr = find(m, |p| {
            if let Payload::TsR(t) = p {
                Some(t.clone())
            } else {
                None
            }
        });
        let (Some(tsi), Some(tsr)) = (tsi, tsr) else {
            self.fail(FailReason::TsUnacceptable, true);
            return Ok(());
        };
        let as_prefix_ok = |got: &[TrafficSelector], asked: &[TrafficSelector]| {
            !got.is_empty()
                && got
                    .iter()
                    .all(|g| asked.iter().any(|a| g.intersect(a) == Some(*g)))
        };
        if !as_prefix_ok(&tsi, &ts.0) || !as_prefix_ok(&tsr, &ts.1) {
            self.fail(FailReason::TsUnacceptable, true);
            return Ok(());
        }
        let sa = &self.sas[idx];
        let keys = sa.keys.as_ref().ok_or(Error::Malformed("no keys"))?;
        let integ_len = suite.integ.map_or(0, |i| i.key_len());
        let km = child_keymat(
            sa.prf()?,
            &keys.sk_d,
            g_ir.map(|s| s.as_slice()),
            ni,
            nr,
            suite.encr.keymat_len(),
            integ_len,
        )?;
        self.install_child(
            idx,
            &suite,
            km,
            true,
            (spi_in, spi_out),
            tsi,
            tsr,
            policy,
            now,
        );
        Ok(())
    }

    fn auth_response(&mut self, idx: usize, m: &Message, spi_in: u32, now: Instant) -> Result<()> {
        let ok = self.peer_auth_ok(idx, m, false)?;
        if !ok {
            let peer_said = m.error_notify();
            self.sas[idx].dead = true;
            self.fail(
                match peer_said {
                    Some(e) => FailReason::from_notify(e),
                    None => FailReason::AuthenticationFailed,
                },
                false,
            );
            if peer_said.is_none() {
                // RFC 7296 §2.21.2: tell the responder its AUTH failed.
                let sa = &mut self.sas[idx];
                let id = sa.next_req;
                let msg = sa.protect(
                    exchange::INFORMATIONAL,
                    id,
                    false,
                    vec![Payload::Notify(Notify::new(
                        notify::AUTHENTICATION_FAILED,
                        vec![],
                    ))],
                )?;
                self.send_all(idx, msg);
            }
            return Ok(());
        }
        let sa = &self.sas[idx];
        let (ni, nr) = (sa.ni.clone(), sa.nr.clone());
        self.established(idx, now);
        let ts = self.config_ts();
        self.child_from_response(idx, m, spi_in, (&ni, &nr), None, &ts, None, false, now)
    }

    /// Earliest time [`Ike::handle_timeout`] has work to do.
    pub fn next_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut add = |x: Instant| t = Some(t.map_or(x, |y| y.min(x)));
        for sa in self.sas.iter().filter(|s| !s.dead) {
            if let Some(p) = &sa.pending {
                add(p.next_retx);
            }
            if sa.state == St::HalfOpen {
                add(sa.created + HALF_OPEN_TIMEOUT);
            }
            if sa.state == St::Established {
                for r in sa.rekey_at.iter().chain(&sa.expire_at) {
                    add(*r);
                }
                for c in &sa.children {
                    for r in c.rekey_at.iter().chain(&c.expire_at) {
                        add(*r);
                    }
                }
                if let (Some(d), None) = (self.cfg.dpd_interval, &sa.pending) {
                    add(sa.last_rx + d);
                }
            }
        }
        if let Some(r) = self.reconnect_at {
            add(r);
        }
        t
    }

    /// Run timers: retransmissions (RFC 7296 §2.1, doubling, give-up),
    /// rekeying, liveness checks, half-open expiry.
    pub fn handle_timeout(&mut self, now: Instant) {
        for idx in 0..self.sas.len() {
            if self.sas[idx].dead {
                continue;
            }
            let base = self.cfg.retransmit_base;
            let tries_max = self.cfg.retransmit_tries;
            let mut resend = None;
            let mut give_up = false;
            let dpd_timeout = self.cfg.dpd_timeout;
            if let Some(p) = self.sas[idx].pending.as_mut() {
                let dpd_over =
                    matches!(p.req, Req::Dpd) && dpd_timeout.is_some_and(|t| now >= p.started + t);
                if dpd_over || now >= p.next_retx {
                    if dpd_over || p.tries >= tries_max {
                        give_up = true;
                    } else {
                        p.tries += 1;
                        let back = base.saturating_mul(1u32 << p.tries.min(10));
                        p.next_retx = now + back;
                        if let (Req::Dpd, Some(t)) = (&p.req, dpd_timeout) {
                            p.next_retx = p.next_retx.min(p.started + t);
                        }
                        resend = Some(p.data.clone());
                    }
                }
            }
            if give_up {
                self.sas[idx].dead = true;
                self.fail(FailReason::Timeout, false);
                continue;
            }
            if let Some(d) = resend {
                self.send_all(idx, d);
            }
            let sa = &mut self.sas[idx];
            match sa.state {
                St::HalfOpen if now >= sa.created + HALF_OPEN_TIMEOUT => {
                    sa.dead = true;
                    continue;
                }
                St::Established => {}
                _ => continue,
            }
            let mut tasks = Vec::new();
            if sa.rekey_at.is_some_and(|r| now >= r) {
                sa.rekey_at = None;
                tasks.push(Task::RekeyIke);
            }
            if sa.expire_at.is_some_and(|r| now >= r) {
                sa.expire_at = None;
                tasks.push(Task::DeleteIke);
            }
            for c in sa.children.iter_mut() {
                if c.expire_at.is_some_and(|r| now >= r) {
                    c.expire_at = None;
                    c.rekey_at = None;
                    tasks.push(Task::DeleteChild(c.spi_in));
                } else if c.rekey_at.is_some_and(|r| now >= r) {
                    c.rekey_at = None;
                    tasks.push(Task::RekeyChild(c.spi_in));
                }
            }
            if let Some(d) = self.cfg.dpd_interval {
                if sa.pending.is_none() && sa.queue.is_empty() && now >= sa.last_rx + d {
                    tasks.push(Task::Dpd);
                }
            }
            for t in tasks {
                if sa.queue.len() < MAX_TASKS && !sa.queue.contains(&t) {
                    sa.queue.push_back(t);
                }
            }
            self.run_queue(idx, now);
        }
        self.sweep(now);
        if self.reconnect_at.is_some_and(|r| now >= r) {
            self.reconnect_at = None;
            if let Err(e) = self.initiate(now) {
                self.dropped += 1;
                self.last_error = Some(e);
            }
        }
    }
}

impl IkeSuite {
    /// strongSwan-style name of the IKE suite, for logs.
    pub fn name(&self) -> String {
        let e = match self.encr {
            crypto::Encr::AesCbc(b) => format!("aes{}", u16::from(b) * 8),
            crypto::Encr::AesGcm16(b) => format!("aes{}gcm16", u16::from(b) * 8),
        };
        let p = match self.prf {
            crypto::Prf::HmacSha1 => "prfsha1",
            crypto::Prf::HmacSha256 => "prfsha256",
            crypto::Prf::HmacSha384 => "prfsha384",
            crypto::Prf::HmacSha512 => "prfsha512",
        };
        let d = match self.dh {
            DhGroup::Modp2048 => "modp2048",
            DhGroup::Ecp256 => "ecp256",
            DhGroup::Curve25519 => "x25519",
        };
        // strongSwan's proposal keywords: `sha256` alone stands for the
        // same hash as integrity and PRF; the PRF is spelled out otherwise.
        let i = match self.integ {
            None => None,
            Some(crypto::Integ::HmacSha1_96) => Some("sha1"),
            Some(crypto::Integ::HmacSha256_128) => Some("sha256"),
            Some(crypto::Integ::HmacSha384_192) => Some("sha384"),
            Some(crypto::Integ::HmacSha512_256) => Some("sha512"),
        };
        match i {
            Some(i) if p.strip_prefix("prf") == Some(i) => format!("{e}-{i}-{d}"),
            Some(i) => format!("{e}-{i}-{p}-{d}"),
            None => format!("{e}-{p}-{d}"),
        }
    }
}

/// Strip the RFC 3948 non-ESP marker; None if the datagram is ESP.
pub fn strip_marker(data: &[u8]) -> Option<&[u8]> {
    data.strip_prefix(&NON_ESP_MARKER[..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suite_names_are_strongswan_keywords() {
        let s = |encr, prf, integ, dh| {
            IkeSuite {
                encr,
                prf,
                integ,
                dh,
            }
            .name()
        };
        assert_eq!(
            s(
                crypto::Encr::AesCbc(32),
                crypto::Prf::HmacSha256,
                Some(crypto::Integ::HmacSha256_128),
                DhGroup::Modp2048
            ),
            "aes256-sha256-modp2048"
        );
        assert_eq!(
            s(
                crypto::Encr::AesCbc(16),
                crypto::Prf::HmacSha256,
                Some(crypto::Integ::HmacSha1_96),
                DhGroup::Ecp256
            ),
            "aes128-sha1-prfsha256-ecp256"
        );
        assert_eq!(
            s(
                crypto::Encr::AesGcm16(16),
                crypto::Prf::HmacSha256,
                None,
                DhGroup::Curve25519
            ),
            "aes128gcm16-prfsha256-x25519"
        );
    }
}
