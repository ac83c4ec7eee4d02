//! The thin etcd driver: every request the pool makes, each bounded in
//! time, translated to and from the sans-I/O core's types. The member's
//! loop that ties them together is [`member`]; the lease's keepalives and
//! the fence live in their own task ([`keepalive`]), so nothing the loop
//! waits for can delay them.
//!
//! All requests go with `require-leader` (etcd's `hasleader` metadata):
//! a member of a cluster without quorum answers at once with "no leader"
//! instead of hanging, which is how a lost quorum is told from a slow one.

use crate::connection::Connection;
use crate::fence::Probe;
use crate::keys::Keys;
use crate::leader::Write;
use crate::records::{encode, DrainRecord, MemberRecord, RebalanceRecord};
use crate::seal::{self, PoolKey};
use crate::view::{Kv, AUDIT_KEPT};
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions,
    Identity, KeyValue, PutOptions, TlsOptions, Txn, TxnOp, WatchOptions, WatchStream,
};
use std::time::Duration;
use zeroize::Zeroizing;

pub mod keepalive;
pub mod member;

/// How long one request may take before it counts as failed.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// TLS towards etcd: the CA's PEM, and a client certificate and key.
#[derive(Clone)]
pub struct TlsFiles {
    pub ca_pem: Vec<u8>,
    pub identity: Option<(Vec<u8>, Zeroizing<Vec<u8>>)>,
}

/// How to reach the pool.
#[derive(Clone)]
pub struct Settings {
    pub pool: String,
    pub member: String,
    pub endpoints: Vec<String>,
    pub tls: Option<TlsFiles>,
    pub ttl: Duration,
    pub capacity: crate::records::Capacity,
    pub addresses: Vec<std::net::IpAddr>,
    pub api: Option<String>,
    /// N of M+N.
    pub redundant: usize,
}

/// Why a request failed, as an operator reads it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No etcd endpoint answered.
    #[error("etcd is unreachable ({0})")]
    Unreachable(String),
    /// etcd answered but has no leader (quorum lost): pool changes wait.
    #[error("etcd has no leader (quorum lost): pool changes are refused until it returns")]
    NoLeader,
    /// A compare of the transaction failed (someone else wrote first).
    #[error("{0}")]
    Conflict(String),
    /// This member's key does not open the pool's key check.
    #[error("pool_key_file does not match the key of pool \"{0}\" (its key check does not open)")]
    WrongKey(String),
    #[error("etcd: {0}")]
    Other(String),
}

impl Error {
    /// Whether retrying later may help (etcd away or without quorum).
    pub fn unavailable(&self) -> bool {
        matches!(self, Error::Unreachable(_) | Error::NoLeader)
    }
}

fn classify(e: etcd_client::Error) -> Error {
    let s = e.to_string();
    if s.contains("no leader") {
        Error::NoLeader
    } else if s.contains("transport")
        || s.contains("connect")
        || s.contains("Unavailable")
        || s.contains("unavailable")
        || s.contains("deadline")
    {
        Error::Unreachable(s)
    } else {
        Error::Other(s)
    }
}

/// Runs `f` bounded by [`REQUEST_TIMEOUT`].
pub(crate) async fn bounded<T>(
    what: &str,
    f: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(REQUEST_TIMEOUT, f).await {
        Ok(r) => r.map_err(classify),
        Err(_) => Err(Error::Unreachable(format!(
            "{what}: no answer within {REQUEST_TIMEOUT:?}"
        ))),
    }
}

/// HTTP/2 pings on the client's connections: no more often than etcd's
/// server allows (`--grpc-keepalive-min-time`, 5 s by default; a client
/// that pings more often is sent GOAWAY and its requests in flight fail
/// with a broken pipe). Requests and the fence have timeouts of their own.
const PING_EVERY: Duration = Duration::from_secs(10);
const PING_TIMEOUT: Duration = Duration::from_secs(3);

fn options(tls: &Option<TlsFiles>, require_leader: bool) -> ConnectOptions {
    let mut o = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(1))
        .with_keep_alive(PING_EVERY, PING_TIMEOUT)
        .with_require_leader(require_leader);
    if let Some(t) = tls {
        let mut tls = TlsOptions::new().ca_certificate(Certificate::from_pem(&t.ca_pem));
        if let Some((cert, key)) = &t.identity {
            tls = tls.identity(Identity::from_pem(cert, &key[..]));
        }
        o = o.with_tls(tls);
    }
    o
}

/// Converts one of etcd's key-values.
pub(crate) fn kv_put(kv: &KeyValue) -> Kv {
    Kv::Put {
        key: kv.key().to_vec(),
        value: kv.value().to_vec(),
        create_rev: kv.create_revision(),
        mod_rev: kv.mod_revision(),
        lease: kv.lease(),
    }
}

/// A connected client of one pool.
#[derive(Clone)]
pub struct Etcd {
    client: Client,
    pub keys: Keys,
    pool: String,
    endpoints: Vec<String>,
    tls: Option<TlsFiles>,
}

impl Etcd {
    /// Connects and checks that etcd answers (an unreachable etcd at
    /// start-up is an error, not a wait).
    pub async fn connect(s: &Settings) -> Result<Etcd, Error> {
        let client = bounded(
            "connect",
            Client::connect(s.endpoints.clone(), Some(options(&s.tls, true))),
        )
        .await?;
        let mut e = Etcd {
            client,
            keys: Keys::new(&s.pool),
            pool: s.pool.clone(),
            endpoints: s.endpoints.clone(),
            tls: s.tls.clone(),
        };
        let mut c = e.client.clone();
        bounded("status", c.status())
            .await
            .map_err(|err| match err {
                Error::Other(m) | Error::Unreachable(m) => {
                    Error::Unreachable(format!("{}: {m}", s.endpoints.join(", ")))
                }
                other => other,
            })?;
        e.client = c;
        Ok(e)
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Everything under the pool's prefix and the revision it is at.
    pub async fn list(&self) -> Result<(i64, Vec<Kv>), Error> {
        let mut c = self.client.clone();
        let r = bounded(
            "list",
            c.get(self.keys.root(), Some(GetOptions::new().with_prefix())),
        )
        .await?;
        let rev = r.header().map_or(0, |h| h.revision());
        Ok((rev, r.kvs().iter().map(kv_put).collect()))
    }

    /// Watches the pool's prefix from `from` (events before it were in a
    /// listing).
    pub async fn watch(&self, from: i64) -> Result<WatchStream, Error> {
        let mut c = self.client.clone();
        let w = bounded(
            "watch",
            c.watch(
                self.keys.root(),
                Some(
                    WatchOptions::new()
                        .with_prefix()
                        .with_start_revision(from)
                        .with_progress_notify(),
                ),
            ),
        )
        .await?;
        Ok(w)
    }

    /// A lease of `ttl`: its id and the TTL etcd granted.
    pub async fn grant(&self, ttl: Duration) -> Result<(i64, i64), Error> {
        let mut c = self.client.clone();
        let r = bounded(
            "lease grant",
            c.lease_grant(ttl.as_secs().max(1) as i64, None),
        )
        .await?;
        Ok((r.id(), r.ttl()))
    }

    /// Gives a lease back (its keys go with it).
    pub async fn revoke(&self, lease: i64) -> Result<(), Error> {
        let mut c = self.client.clone();
        bounded("lease revoke", c.lease_revoke(lease))
            .await
            .map(drop)
    }

    /// Whether etcd no longer knows `lease`. A TTL of 0 or less is not
    /// enough on its own: a leader that has lost its quorum (it steps down
    /// only an election timeout later) answers from its own lessor, where
    /// a lease past its expiry stays until a revoke that cannot commit,
    /// and etcd rounds what is left down to whole seconds. So the answer
    /// counts only if a linearizable read (which needs a quorum) succeeds
    /// after it and the leader then asked says the same.
    pub async fn lease_gone(&self, lease: i64) -> Result<bool, Error> {
        let mut c = self.client.clone();
        let r = bounded("lease ttl", c.lease_time_to_live(lease, None)).await?;
        if r.ttl() > 0 {
            return Ok(false);
        }
        bounded(
            "quorum read",
            c.get(
                self.keys.keycheck(),
                Some(GetOptions::new().with_count_only()),
            ),
        )
        .await?;
        let r = bounded("lease ttl", c.lease_time_to_live(lease, None)).await?;
        Ok(r.ttl() <= 0)
    }

    /// Puts our member record under `lease` if no member of that name is
    /// registered; `Ok(Some(lease))` names the lease holding it instead.
    pub async fn register(&self, rec: &MemberRecord) -> Result<Option<i64>, Error> {
        let key = self.keys.member(&rec.name);
        let txn = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                encode(rec),
                Some(PutOptions::new().with_lease(rec.lease)),
            )])
            .or_else([TxnOp::get(key, None)]);
        let mut c = self.client.clone();
        let r = bounded("register", c.txn(txn)).await?;
        if r.succeeded() {
            return Ok(None);
        }
        let holder = r.op_responses().into_iter().find_map(|o| match o {
            etcd_client::TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.lease()),
            _ => None,
        });
        Ok(Some(holder.unwrap_or(0)))
    }

    /// Refreshes our member record (health) if it still holds our lease.
    pub async fn update_member(&self, rec: &MemberRecord) -> Result<bool, Error> {
        let key = self.keys.member(&rec.name);
        let txn = Txn::new()
            .when([Compare::lease(key.clone(), CompareOp::Equal, rec.lease)])
            .and_then([TxnOp::put(
                key,
                encode(rec),
                Some(PutOptions::new().with_lease(rec.lease)),
            )]);
        let mut c = self.client.clone();
        Ok(bounded("update member", c.txn(txn)).await?.succeeded())
    }

    /// Makes sure the pool's key check exists and opens with `key`: the
    /// first member writes it, the others must open it.
    pub async fn ensure_keycheck(&self, key: &PoolKey) -> Result<(), Error> {
        let k = self.keys.keycheck();
        let mine = seal::keycheck(key, &self.pool).map_err(|e| Error::Other(e.to_string()))?;
        let txn = Txn::new()
            .when([Compare::version(k.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(k.clone(), mine, None)])
            .or_else([TxnOp::get(k, None)]);
        let mut c = self.client.clone();
        let r = bounded("key check", c.txn(txn)).await?;
        if r.succeeded() {
            return Ok(());
        }
        let theirs = r.op_responses().into_iter().find_map(|o| match o {
            etcd_client::TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.value().to_vec()),
            _ => None,
        });
        match theirs {
            Some(b) if seal::keycheck_opens(key, &self.pool, &b).is_ok() => Ok(()),
            _ => Err(Error::WrongKey(self.pool.clone())),
        }
    }

    /// Runs one write of the core as a transaction. Leader writes compare
    /// `leader_key`'s create revision with `epoch`; owner writes compare
    /// the placement's mod revision and our member key's lease. `Ok(false)`:
    /// a compare failed (nothing written).
    pub async fn run(
        &self,
        w: &Write,
        leader: Option<(&str, i64)>,
        member: &str,
        lease: i64,
    ) -> Result<bool, Error> {
        let k = &self.keys;
        let epoch_guard = |extra: Vec<Compare>| -> Option<Vec<Compare>> {
            let (key, epoch) = leader?;
            let mut v = vec![Compare::create_revision(key, CompareOp::Equal, epoch)];
            v.extend(extra);
            Some(v)
        };
        let txn = match w {
            Write::Place {
                conn,
                expect_rev,
                record,
                audit,
            } => {
                let Some(when) = epoch_guard(vec![Compare::mod_revision(
                    k.placement(conn),
                    CompareOp::Equal,
                    *expect_rev,
                )]) else {
                    return Ok(false);
                };
                let mut ops = vec![TxnOp::put(k.placement(conn), encode(record), None)];
                if let Some(a) = audit {
                    ops.push(TxnOp::put(k.audit(a.seq), encode(a), None));
                    if a.seq > AUDIT_KEPT as u64 {
                        ops.push(TxnOp::delete(k.audit(a.seq - AUDIT_KEPT as u64), None));
                    }
                }
                Txn::new().when(when).and_then(ops)
            }
            Write::Forget { conn } => {
                let Some(when) = epoch_guard(vec![]) else {
                    return Ok(false);
                };
                Txn::new().when(when).and_then([
                    TxnOp::delete(k.placement(conn), None),
                    TxnOp::delete(k.state(conn), None),
                    TxnOp::delete(k.status(conn), None),
                ])
            }
            Write::EndRebalance { rev } => {
                let Some(when) = epoch_guard(vec![Compare::mod_revision(
                    k.rebalance(),
                    CompareOp::Equal,
                    *rev,
                )]) else {
                    return Ok(false);
                };
                Txn::new()
                    .when(when)
                    .and_then([TxnOp::delete(k.rebalance(), None)])
            }
            Write::Owner {
                conn,
                guard_rev,
                state,
                status,
            } => {
                let mut ops = vec![TxnOp::put(k.status(conn), encode(status), None)];
                if let Some(b) = state {
                    ops.push(TxnOp::put(k.state(conn), b.clone(), None));
                }
                Txn::new()
                    .when([
                        Compare::mod_revision(k.placement(conn), CompareOp::Equal, *guard_rev),
                        Compare::lease(k.member(member), CompareOp::Equal, lease),
                    ])
                    .and_then(ops)
            }
        };
        let mut c = self.client.clone();
        Ok(bounded("write", c.txn(txn)).await?.succeeded())
    }

    /// Every stored connection and the revision they were read at (what
    /// an admission is judged on); values that do not decode are left
    /// out.
    pub async fn connections(&self) -> Result<(i64, Vec<Connection>), Error> {
        let mut c = self.client.clone();
        let r = bounded(
            "connections",
            c.get(
                self.keys.connections(),
                Some(GetOptions::new().with_prefix()),
            ),
        )
        .await?;
        let rev = r.header().map_or(0, |h| h.revision());
        let conns = r
            .kvs()
            .iter()
            .filter_map(|kv| crate::records::decode::<Connection>(kv.value()).ok())
            .collect();
        Ok((rev, conns))
    }

    /// Stores a connection (an operator's add or change) if no connection
    /// changed since `seen_rev` (the revision its admission was judged at).
    pub async fn put_connection(&self, c: &Connection, seen_rev: i64) -> Result<(), Error> {
        let txn = Txn::new()
            .when([
                Compare::mod_revision(self.keys.connections(), CompareOp::Less, seen_rev + 1)
                    .with_prefix(),
            ])
            .and_then([TxnOp::put(self.keys.connection(c.id()), encode(c), None)]);
        let mut cl = self.client.clone();
        if bounded("add connection", cl.txn(txn)).await?.succeeded() {
            Ok(())
        } else {
            Err(Error::Conflict(
                "the pool's connections changed while this one was judged: try again".into(),
            ))
        }
    }

    /// Deletes a connection; `Ok(false)` when there was none.
    pub async fn delete_connection(&self, id: &str) -> Result<bool, Error> {
        let mut c = self.client.clone();
        let r = bounded(
            "delete connection",
            c.delete(self.keys.connection(id), None),
        )
        .await?;
        Ok(r.deleted() > 0)
    }

    /// An operator's drain of `member` (`on = false`: undo).
    pub async fn drain(&self, member: &str, on: bool, now_ms: u64) -> Result<(), Error> {
        let mut c = self.client.clone();
        if on {
            let rec = DrainRecord {
                requested_ms: now_ms,
            };
            bounded("drain", c.put(self.keys.drain(member), encode(&rec), None)).await?;
        } else {
            bounded("undrain", c.delete(self.keys.drain(member), None)).await?;
        }
        Ok(())
    }

    /// An operator's request to apply the rebalance plan.
    pub async fn request_rebalance(&self, r: &RebalanceRecord) -> Result<(), Error> {
        let mut c = self.client.clone();
        bounded("rebalance", c.put(self.keys.rebalance(), encode(r), None))
            .await
            .map(drop)
    }

    /// Deletes everything of the pool (tests and `pool destroy`).
    pub async fn wipe(&self) -> Result<(), Error> {
        let mut c = self.client.clone();
        bounded(
            "wipe",
            c.delete(self.keys.root(), Some(DeleteOptions::new().with_prefix())),
        )
        .await
        .map(drop)
    }

    /// Asks every endpoint, one client each and without `require-leader`,
    /// whether it answers and names a leader ([`crate::fence`]). A leader
    /// named by an answering member but whose own endpoint refused the
    /// connection is dead (the survivor has not noticed yet): it counts
    /// as none.
    pub async fn probe(&self, timeout: Duration) -> Probe {
        let mut p = Probe {
            cluster: self.endpoints.len(),
            ..Probe::default()
        };
        let asks = self.endpoints.iter().map(|e| {
            let opts = options(&self.tls, false).with_connect_timeout(timeout);
            let e = e.clone();
            async move {
                let r = tokio::time::timeout(timeout, async {
                    let mut c = Client::connect([e.clone()], Some(opts)).await?;
                    let s = c.status().await?;
                    let leader = s.leader();
                    let mut urls = Vec::new();
                    if leader != 0 {
                        if let Ok(l) = c.member_list().await {
                            urls = l
                                .members()
                                .iter()
                                .filter(|m| m.id() == leader)
                                .flat_map(|m| m.client_urls().to_vec())
                                .collect();
                        }
                    }
                    Ok::<_, etcd_client::Error>((leader, urls))
                })
                .await;
                let outcome = match r {
                    Ok(Ok((leader, urls))) => Outcome::Answered { leader, urls },
                    Ok(Err(err)) if refused(&err) => Outcome::Refused,
                    _ => Outcome::TimedOut,
                };
                (e, outcome)
            }
        });
        let results = futures_join(asks).await;
        let norm = |u: &str| u.trim_end_matches('/').to_owned();
        let dead: Vec<String> = results
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Refused))
            .map(|(e, _)| norm(e))
            .collect();
        for (_, o) in &results {
            match o {
                Outcome::Answered { leader, urls } => {
                    p.answered += 1;
                    let leader_dead = urls.iter().any(|u| dead.contains(&norm(u)));
                    p.with_leader += usize::from(*leader != 0 && !leader_dead);
                }
                Outcome::TimedOut => p.timed_out += 1,
                Outcome::Refused => {}
            }
        }
        p
    }
}

/// What one endpoint said to a probe.
enum Outcome {
    /// It answered, naming `leader` (0: none) and the leader's client URLs.
    Answered {
        leader: u64,
        urls: Vec<String>,
    },
    /// Nothing listens there.
    Refused,
    TimedOut,
}

/// Whether an error says the endpoint refused the connection (nothing
/// listens: that etcd member is not running).
fn refused(e: &etcd_client::Error) -> bool {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(x) = src {
        s.push_str(&x.to_string());
        src = x.source();
    }
    s.contains("Connection refused") || s.contains("os error 111")
}

/// Runs futures concurrently and collects their outputs in order.
async fn futures_join<F>(fs: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = fs.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        if let Ok(v) = h.await {
            out.push(v);
        }
    }
    out
}

/// Converts a watch response's events; `Err(compact_revision)` when the
/// watch was cancelled because its start was compacted away (re-list).
pub(crate) fn watch_events(r: &etcd_client::WatchResponse) -> Result<Vec<Kv>, i64> {
    if r.canceled() || r.compact_revision() > 0 {
        return Err(r.compact_revision());
    }
    Ok(r.events()
        .iter()
        .filter_map(|e| {
            let kv = e.kv()?;
            Some(match e.event_type() {
                EventType::Put => kv_put(kv),
                EventType::Delete => Kv::Delete {
                    key: kv.key().to_vec(),
                    mod_rev: kv.mod_revision(),
                },
            })
        })
        .collect())
}
