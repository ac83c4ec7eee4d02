//! A real 3-member etcd cluster on loopback for one test, and pool
//! members on runtimes of their own (so "kill -9" of a member is the
//! runtime dropped: every task gone, its lease left to expire).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use vecgate_ha::sync::{Dir, RecordRepr};
use vecgate_pool::etcd::member::{self, Command as Cmd, CommandError, Handles, Report, Status};
use vecgate_pool::etcd::Settings;
use vecgate_pool::seal::{self, Info, PoolKey};
use vecgate_pool::snapshot::Snapshot;
use vecgate_pool::{Action, Capacity, Connection, Mode};

/// Free loopback ports, held until the caller binds them.
fn free_ports(n: usize) -> Vec<u16> {
    let ls: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    ls.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

pub struct Cluster {
    dir: PathBuf,
    client: Vec<u16>,
    peer: Vec<u16>,
    procs: Vec<Option<Child>>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let ports = free_ports(6);
        let dir = std::env::temp_dir().join(format!(
            "vecgate-pool-etcd-{}-{}",
            std::process::id(),
            ports[0]
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Cluster {
            dir,
            client: ports[..3].to_vec(),
            peer: ports[3..].to_vec(),
            procs: vec![None, None, None],
        };
        for i in 0..3 {
            c.spawn(i);
        }
        c.wait_healthy(Duration::from_secs(20));
        c
    }

    fn spawn(&mut self, i: usize) {
        let initial: Vec<String> = (0..3)
            .map(|j| format!("e{j}=http://127.0.0.1:{}", self.peer[j]))
            .collect();
        let child = Command::new("etcd")
            .args([
                "--name",
                &format!("e{i}"),
                "--data-dir",
                &self.dir.join(format!("e{i}")).display().to_string(),
                "--listen-client-urls",
                &format!("http://127.0.0.1:{}", self.client[i]),
                "--advertise-client-urls",
                &format!("http://127.0.0.1:{}", self.client[i]),
                "--listen-peer-urls",
                &format!("http://127.0.0.1:{}", self.peer[i]),
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{}", self.peer[i]),
                "--initial-cluster-state",
                "new",
                "--initial-cluster",
                &initial.join(","),
                "--heartbeat-interval",
                "100",
                "--election-timeout",
                "1000",
                "--logger",
                "zap",
                "--log-level",
                "error",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd (apt-get install etcd-server)");
        self.procs[i] = Some(child);
    }

    pub fn endpoints(&self) -> Vec<String> {
        self.client
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect()
    }

    /// etcdctl against every member until a put works.
    pub fn wait_healthy(&self, within: Duration) {
        let t0 = Instant::now();
        while t0.elapsed() < within {
            let ok = Command::new("etcdctl")
                .args([
                    "--endpoints",
                    &self.endpoints().join(","),
                    "--command-timeout=1s",
                    "put",
                    "/vecgate-test/health",
                    "1",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("etcd cluster not healthy within {within:?}");
    }

    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.procs[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..3 {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn key(b: u8) -> PoolKey {
    PoolKey::new(&[b; 32]).unwrap()
}

pub fn settings(c: &Cluster, pool: &str, member: &str, ttl_s: u64) -> Settings {
    Settings {
        pool: pool.into(),
        member: member.into(),
        endpoints: c.endpoints(),
        tls: None,
        ttl: Duration::from_secs(ttl_s),
        capacity: Capacity {
            ipsec_mbps: 1000,
            gre_mbps: 1000,
            tunnels: 100,
        },
        addresses: vec![],
        api: None,
        redundant: 1,
    }
}

/// What a fake gateway did with one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    pub mode: Mode,
    /// The outbound "sequence" it resumed at (from the sealed state).
    pub resumed_from: Option<u64>,
    pub placement_rev: i64,
}

/// A pool member on a runtime of its own, with a fake gateway that
/// applies at once and seals a snapshot of one outbound SA whose
/// ceiling it raises on every apply.
pub struct Node {
    pub name: String,
    rt: Option<tokio::runtime::Runtime>,
    pub commands: mpsc::Sender<Cmd>,
    pub status: tokio::sync::watch::Receiver<Arc<Status>>,
    pub served: Arc<Mutex<BTreeMap<String, Served>>>,
    pub log: Arc<Mutex<Vec<String>>>,
    stop: tokio::sync::watch::Sender<bool>,
}

pub fn start_node(s: Settings, k: PoolKey) -> Result<Node, vecgate_pool::etcd::Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let name = s.member.clone();
    let pool = s.pool.clone();
    let validator: member::Validator = Arc::new(|c: &Connection| {
        if c.bandwidth_mbps == 0 {
            return Err(vec![vecgate_config::FieldError {
                field: "bandwidth_mbps".into(),
                message: "bandwidth_mbps = 0 is out of range".into(),
            }]);
        }
        Ok(())
    });
    let (handles, _task) = rt.block_on(member::start(s, k.clone(), validator))?;
    let Handles {
        commands,
        reports,
        status,
        mut actions,
        stop,
        gate: _,
    } = handles;
    let served: Arc<Mutex<BTreeMap<String, Served>>> = Arc::default();
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    {
        let served = served.clone();
        let log = log.clone();
        let status = status.clone();
        rt.spawn(async move {
            let mut ceiling: BTreeMap<String, u64> = BTreeMap::new();
            while let Some(a) = actions.recv().await {
                let epoch = status.borrow().view.leader().map_or(0, |l| l.epoch);
                match a {
                    Action::Apply {
                        conn,
                        placement_rev,
                        mode,
                        blob,
                        ..
                    } => {
                        let resumed = blob.and_then(|b| {
                            let (info, body) = seal::open(&k, &pool, &conn, &b).ok()?;
                            let snap = Snapshot::parse(&body, &conn).ok()?;
                            let r = snap.sas.first()?;
                            let _ = info;
                            Some(r.ceiling)
                        });
                        log.lock()
                            .unwrap()
                            .push(format!("apply {conn} {mode:?} {resumed:?}"));
                        served.lock().unwrap().insert(
                            conn.clone(),
                            Served {
                                mode,
                                resumed_from: resumed,
                                placement_rev,
                            },
                        );
                        let c = ceiling.entry(conn.clone()).or_insert(0);
                        *c = resumed.unwrap_or(0) + 1000;
                        let _ = reports
                            .send(Report::Applied {
                                conn: conn.clone(),
                                result: Ok(vec![format!("{:08x}", 0x1000)]),
                            })
                            .await;
                        let blob = sealed(&k, &pool, &conn, epoch, *c, false, placement_rev);
                        let _ = reports.send(Report::State { conn, blob }).await;
                    }
                    Action::Update { conn, .. } => {
                        let _ = reports
                            .send(Report::Applied {
                                conn,
                                result: Ok(vec![]),
                            })
                            .await;
                    }
                    Action::Release {
                        conn,
                        placement_rev,
                    } => {
                        log.lock().unwrap().push(format!("release {conn}"));
                        let c = ceiling.get(&conn).copied().unwrap_or(0);
                        let blob = sealed(&k, &pool, &conn, epoch, c, true, placement_rev);
                        let _ = reports
                            .send(Report::Released {
                                conn,
                                placement_rev,
                                blob,
                            })
                            .await;
                    }
                    Action::Remove { conn } => {
                        log.lock().unwrap().push(format!("remove {conn}"));
                        served.lock().unwrap().remove(&conn);
                    }
                }
            }
        });
    }
    Ok(Node {
        name,
        rt: Some(rt),
        commands,
        status,
        served,
        log,
        stop,
    })
}

/// A snapshot of one outbound SA at `ceiling`, sealed.
pub fn sealed(
    k: &PoolKey,
    pool: &str,
    conn: &str,
    epoch: i64,
    ceiling: u64,
    released: bool,
    rev: i64,
) -> Vec<u8> {
    let snap = Snapshot {
        released,
        placement_rev: rev,
        sas: vec![RecordRepr {
            dir: Dir::Out,
            spi: 0x1000,
            key_id: [1; 32],
            ceiling,
            used: ceiling,
            window: vec![],
        }],
        ike: vec![],
    };
    let now = vecgate_pool::now_ms();
    let body = snap.emit(conn, now).unwrap();
    seal::seal(
        k,
        pool,
        conn,
        Info {
            epoch,
            written_ms: now,
            generation: 1,
        },
        &body,
    )
    .unwrap()
}

impl Node {
    /// `kill -9`: every task of the member gone at once, nothing revoked.
    pub fn kill(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }

    /// A clean stop (revokes the lease).
    pub fn stop(&mut self) {
        let _ = self.stop.send(true);
        std::thread::sleep(Duration::from_millis(300));
        self.kill();
    }

    pub fn st(&self) -> Arc<Status> {
        self.status.borrow().clone()
    }

    fn ask<T>(
        &self,
        f: impl FnOnce(oneshot::Sender<Result<T, CommandError>>) -> Cmd,
    ) -> Result<T, CommandError> {
        let (tx, rx) = oneshot::channel();
        self.commands.blocking_send(f(tx)).expect("member loop");
        rx.blocking_recv().expect("reply")
    }

    pub fn add(&self, c: Connection) -> Result<(), CommandError> {
        self.ask(|r| Cmd::AddConnection(Box::new(c), r))
    }

    pub fn delete(&self, id: &str) -> Result<(), CommandError> {
        self.ask(|r| Cmd::DeleteConnection(id.to_owned(), r))
    }

    pub fn drain(&self, m: &str, on: bool) -> Result<(), CommandError> {
        self.ask(|r| Cmd::Drain(m.to_owned(), on, r))
    }

    pub fn rebalance(
        &self,
        dry_run: bool,
    ) -> Result<Vec<vecgate_pool::placement::Decision>, CommandError> {
        self.ask(|reply| Cmd::Rebalance {
            dry_run,
            max_moves: 10,
            interval_ms: 200,
            reply,
        })
    }

    pub fn serves(&self) -> Vec<String> {
        self.served.lock().unwrap().keys().cloned().collect()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A GRE connection of `tenant` reserving `mbps`.
pub fn gre(name: &str, tenant: &str, mbps: u64, n: u8) -> Connection {
    let json = format!(
        r#"{{"tunnel":{{"name":"{name}","kind":"gre","local":"192.0.2.{n}",
        "remote":"198.51.100.{n}","key":{n},"vrf":"{tenant}","underlay_vrf":"default","mtu":null,
        "checksum":false,"sequence":false,"port":4789}},
        "routes":[],"bandwidth_mbps":{mbps}}}"#
    );
    serde_json::from_str(&json).unwrap()
}

/// Waits until `f` holds, polling; panics with `what` after `within`.
pub fn wait_for(within: Duration, what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if f() {
            return t0.elapsed();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out after {within:?} waiting for {what}");
}
