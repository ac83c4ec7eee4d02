//! Where the pool lives in etcd: one prefix per pool, one sub-prefix per
//! kind of record. Every key is built and parsed here and nowhere else.
//!
//! ```text
//! /vecgate/pool/<pool>/member/<member>     member record, under its lease
//! /vecgate/pool/<pool>/leader/<lease hex>  election keys (etcd's election API)
//! /vecgate/pool/<pool>/conn/<id>           a connection's desired state
//! /vecgate/pool/<pool>/place/<id>          which member runs it (leader only)
//! /vecgate/pool/<pool>/state/<id>          its sealed SA state (owner only)
//! /vecgate/pool/<pool>/status/<id>         its actual state (owner only)
//! /vecgate/pool/<pool>/drain/<member>      an operator's drain request
//! /vecgate/pool/<pool>/audit/<seq>         one move, 20 decimal digits
//! /vecgate/pool/<pool>/rebalance           an operator's rebalance request
//! /vecgate/pool/<pool>/keycheck            sealed marker: the pool's key
//! ```

/// Longest member name or connection id (as the configuration's names).
pub const MAX_NAME: usize = 64;

/// A member name or a connection id: what the configuration accepts as a
/// name (letters, digits, `-`, `_`, `.`, at most [`MAX_NAME`] bytes), so
/// it can sit in a key, a log line and a URL as it is.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// The keys of one pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    root: String,
}

/// A key of the pool, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKey<'a> {
    Member(&'a str),
    /// An election key (its suffix is etcd's, the lease in hex).
    Leader(&'a str),
    Connection(&'a str),
    Placement(&'a str),
    State(&'a str),
    Status(&'a str),
    Drain(&'a str),
    Audit(u64),
    Rebalance,
    KeyCheck,
}

const MEMBER: &str = "member/";
const LEADER: &str = "leader";
const CONN: &str = "conn/";
const PLACE: &str = "place/";
const STATE: &str = "state/";
const STATUS: &str = "status/";
const DRAIN: &str = "drain/";
const AUDIT: &str = "audit/";
const REBALANCE: &str = "rebalance";
const KEYCHECK: &str = "keycheck";

impl Keys {
    /// `pool` must be a [`valid_name`] (the configuration checks it).
    pub fn new(pool: &str) -> Keys {
        Keys {
            root: format!("/vecgate/pool/{pool}/"),
        }
    }

    /// The prefix of everything (what a member watches).
    pub fn root(&self) -> &str {
        &self.root
    }

    fn at(&self, kind: &str, name: &str) -> String {
        format!("{}{kind}{name}", self.root)
    }

    pub fn member(&self, m: &str) -> String {
        self.at(MEMBER, m)
    }
    pub fn members(&self) -> String {
        self.at(MEMBER, "")
    }
    /// The election's name (etcd puts the candidates' keys below it).
    pub fn election(&self) -> String {
        self.at(LEADER, "")
    }
    pub fn connection(&self, id: &str) -> String {
        self.at(CONN, id)
    }
    pub fn connections(&self) -> String {
        self.at(CONN, "")
    }
    pub fn placement(&self, id: &str) -> String {
        self.at(PLACE, id)
    }
    pub fn state(&self, id: &str) -> String {
        self.at(STATE, id)
    }
    pub fn status(&self, id: &str) -> String {
        self.at(STATUS, id)
    }
    pub fn drain(&self, m: &str) -> String {
        self.at(DRAIN, m)
    }
    pub fn audit(&self, seq: u64) -> String {
        format!("{}{AUDIT}{seq:020}", self.root)
    }
    pub fn audits(&self) -> String {
        self.at(AUDIT, "")
    }
    pub fn rebalance(&self) -> String {
        self.at(REBALANCE, "")
    }
    pub fn keycheck(&self) -> String {
        self.at(KEYCHECK, "")
    }

    /// What `key` is, if it is one of ours with a valid name.
    pub fn parse<'k>(&self, key: &'k [u8]) -> Option<PoolKey<'k>> {
        let key = std::str::from_utf8(key).ok()?;
        let rest = key.strip_prefix(self.root.as_str())?;
        let named = |p: &str| rest.strip_prefix(p).filter(|n| valid_name(n));
        if let Some(n) = named(MEMBER) {
            return Some(PoolKey::Member(n));
        }
        if let Some(n) = rest
            .strip_prefix(LEADER)
            .and_then(|r| r.strip_prefix('/'))
            .filter(|n| !n.is_empty())
        {
            return Some(PoolKey::Leader(n));
        }
        if let Some(n) = named(CONN) {
            return Some(PoolKey::Connection(n));
        }
        if let Some(n) = named(PLACE) {
            return Some(PoolKey::Placement(n));
        }
        if let Some(n) = named(STATE) {
            return Some(PoolKey::State(n));
        }
        if let Some(n) = named(STATUS) {
            return Some(PoolKey::Status(n));
        }
        if let Some(n) = named(DRAIN) {
            return Some(PoolKey::Drain(n));
        }
        if let Some(d) = rest.strip_prefix(AUDIT) {
            if d.len() == 20 && d.bytes().all(|b| b.is_ascii_digit()) {
                return d.parse().ok().map(PoolKey::Audit);
            }
            return None;
        }
        match rest {
            REBALANCE => Some(PoolKey::Rebalance),
            KEYCHECK => Some(PoolKey::KeyCheck),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trips() {
        let k = Keys::new("p1");
        assert_eq!(
            k.parse(k.member("gw-a").as_bytes()),
            Some(PoolKey::Member("gw-a"))
        );
        assert_eq!(
            k.parse(k.connection("blue.c1").as_bytes()),
            Some(PoolKey::Connection("blue.c1"))
        );
        assert_eq!(
            k.parse(k.placement("c").as_bytes()),
            Some(PoolKey::Placement("c"))
        );
        assert_eq!(k.parse(k.state("c").as_bytes()), Some(PoolKey::State("c")));
        assert_eq!(
            k.parse(k.status("c").as_bytes()),
            Some(PoolKey::Status("c"))
        );
        assert_eq!(k.parse(k.drain("m").as_bytes()), Some(PoolKey::Drain("m")));
        assert_eq!(k.parse(k.audit(42).as_bytes()), Some(PoolKey::Audit(42)));
        assert_eq!(k.parse(k.rebalance().as_bytes()), Some(PoolKey::Rebalance));
        assert_eq!(k.parse(k.keycheck().as_bytes()), Some(PoolKey::KeyCheck));
        let lead = format!("{}/694d7f3a2b1c", k.election());
        assert_eq!(
            k.parse(lead.as_bytes()),
            Some(PoolKey::Leader("694d7f3a2b1c"))
        );
        // Audit keys sort by number as strings do.
        assert!(k.audit(9) < k.audit(10));
    }

    #[test]
    fn refuses_foreign_and_bad_names() {
        let k = Keys::new("p1");
        for bad in [
            "/vecgate/pool/p2/member/a",
            "/vecgate/pool/p1/member/",
            "/vecgate/pool/p1/member/a/b",
            "/vecgate/pool/p1/member/..",
            "/vecgate/pool/p1/audit/12",
            "/vecgate/pool/p1/leader",
            "/vecgate/pool/p1/unknown/x",
            "/vecgate/pool/p1/rebalance/x",
        ] {
            assert_eq!(k.parse(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(k.parse(&[0xff, 0xfe]), None);
    }

    proptest! {
        #[test]
        fn parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..100)) {
            let k = Keys::new("p");
            let mut key = k.root().as_bytes().to_vec();
            key.extend_from_slice(&b);
            let _ = k.parse(&key);
            let _ = k.parse(&b);
        }

        #[test]
        fn names_round_trip(n in "[A-Za-z0-9._-]{1,64}") {
            prop_assume!(valid_name(&n));
            let k = Keys::new("pool");
            let (m, c) = (k.member(&n), k.connection(&n));
            prop_assert_eq!(k.parse(m.as_bytes()), Some(PoolKey::Member(&n)));
            prop_assert_eq!(k.parse(c.as_bytes()), Some(PoolKey::Connection(&n)));
        }
    }
}
