//! `POST /tunnels` / `DELETE /tunnels/{name}` for `kind = "ipsec"` through
//! the router, with a recording stand-in for vecgate's SA registry: field
//! names of validation errors, no key echo, 409s, the order of the
//! registry steps around the table swap, and rollback.

use axum::body::Body;
use axum::http::Request;
use dataplane::tables::{SharedTables, TablesBuilder};
use http_body_util::BodyExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tower::ServiceExt;
use vecgate_config::{Config, Tunnel};
use vecgate_control::api::router;
use vecgate_control::build::{Inputs, Placement, Ports};
use vecgate_control::{
    ApiError, Auth, Capabilities, Control, Dataplane, KeySource, NetdevFacts, SaOps, TableBuilder,
};

const CFG: &str = r#"
[gateway]
name = "t"
api = "unix:/tmp/unused.sock"

[[interface]]
name = "wan"
host = "veth0"
driver = "af_packet"
addresses = ["192.0.2.1/24"]

[[interface]]
name = "lan"
host = "veth1"
driver = "af_packet"
addresses = ["10.1.0.1/24"]
"#;

/// An inline key that must never come back.
const SECRET: &str = "c0ffee00112233445566778899aabbccddeeff01";

/// Records what the control plane asks of the registry.
#[derive(Default)]
struct Fake {
    calls: Mutex<Vec<String>>,
    /// Refuse the next `add_tunnel` with this.
    refuse: Mutex<Option<ApiError>>,
}

struct Ops(Arc<Fake>);

impl Fake {
    fn log(&self, s: String) {
        self.calls.lock().unwrap().push(s);
    }
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

impl SaOps for Ops {
    fn install_inbound(
        &self,
        _: &Tunnel,
        _: &vecgate_config::StaticSa,
        _: KeySource<'_>,
    ) -> Result<(), ApiError> {
        Ok(())
    }
    fn switch_outbound(
        &self,
        _: &Tunnel,
        _: &vecgate_config::StaticSa,
        _: KeySource<'_>,
    ) -> Result<u32, ApiError> {
        Ok(0)
    }
    fn remove_inbound(&self, _: u32) -> Result<String, ApiError> {
        Ok(String::new())
    }
    fn add_tunnel(
        &self,
        _: &Config,
        t: &Tunnel,
        keys: &[KeySource<'_>],
        _psk: Option<&[u8]>,
    ) -> Result<(), ApiError> {
        if let Some(e) = self.0.refuse.lock().unwrap().take() {
            return Err(e);
        }
        let sas = t.ipsec.as_ref().map_or(0, |x| x.sas.len());
        assert_eq!(sas, keys.len(), "one key source per SA");
        let kinds: Vec<&str> = keys
            .iter()
            .map(|k| match k {
                KeySource::Hex(h) => {
                    // The key reaches the registry intact.
                    assert_eq!(*h, SECRET);
                    "hex"
                }
                KeySource::File(_) => "file",
            })
            .collect();
        self.0.log(format!("add {} {}", t.name, kinds.join(",")));
        Ok(())
    }
    fn start_tunnel(&self, name: &str) {
        self.0.log(format!("start {name}"));
    }
    fn stop_tunnel(&self, name: &str) {
        self.0.log(format!("stop {name}"));
    }
    fn remove_tunnel(&self, name: &str) -> Result<(), ApiError> {
        self.0.log(format!("remove {name}"));
        Ok(())
    }
}

const NETDEV: NetdevFacts = NetdevFacts {
    mac: [2, 0, 0, 0, 0, 1],
    mtu: 1500,
    offloads: false,
};

/// The gateway's own table builder; an ipsec tunnel goes in as an
/// interface without SAs, except one called "unbuildable", which fails the
/// build (as a dataplane refusal would).
fn builder(cfg: &Config) -> TableBuilder {
    let ports = Mutex::new(Ports::new(cfg));
    let netdevs: HashMap<String, NetdevFacts> = cfg
        .interfaces
        .iter()
        .map(|i| (i.name.clone(), NETDEV))
        .collect();
    let ipsec = |b: &mut TablesBuilder, t: &Tunnel, at: Placement<'_>| {
        if t.name == "unbuildable" {
            return Err("tunnel unbuildable: refused by the builder".to_owned());
        }
        b.add_interface(at.port, &t.name, NETDEV.mac, at.underlay_mtu, at.vrf, &[]);
        Ok(())
    };
    Box::new(move |c, learned| {
        let inputs = Inputs {
            netdevs: &netdevs,
            learned,
            held: &HashMap::new(),
            ipsec: Some(&ipsec),
        };
        ports.lock().unwrap().tables(c, &inputs)
    })
}

fn control() -> (Arc<Control>, Arc<Fake>, Arc<SharedTables>) {
    let cfg = vecgate_config::parse(CFG).unwrap();
    let build = builder(&cfg);
    let tables = SharedTables::new(build(&cfg, &Default::default()).unwrap());
    let fake = Arc::new(Fake::default());
    let dp = Dataplane {
        tables: tables.clone(),
        build,
        counters: Vec::new(),
        mailboxes: Vec::new(),
        netdevs: vec![NETDEV, NETDEV],
        sas: None,
        sa_ops: Some(Box::new(Ops(fake.clone()))),
    };
    (
        Control::new(cfg, dp, Capabilities { tunnels: true }),
        fake,
        tables,
    )
}

async fn call(app: &axum::Router, method: &str, uri: &str, body: Option<&str>) -> (u16, String) {
    let mut r = Request::builder().method(method).uri(uri);
    if body.is_some() {
        r = r.header("content-type", "application/json");
    }
    let req = r
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let st = resp.status().as_u16();
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    (st, String::from_utf8_lossy(&b).into_owned())
}

fn field(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    v["field"].as_str().unwrap_or_default().to_owned()
}

/// A directory of private key and PSK files (`out.hex`, `in.hex`,
/// `i1.psk`), a world-readable one (`open.hex`) and a FIFO (`fifo`);
/// removed on drop.
struct SecretDir(std::path::PathBuf);

impl SecretDir {
    fn new() -> SecretDir {
        use std::os::unix::fs::PermissionsExt;
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let d = std::env::temp_dir().join(format!(
            "vg-ctl-keys-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for (f, mode) in [
            ("out.hex", 0o600),
            ("in.hex", 0o600),
            ("i1.psk", 0o600),
            ("open.hex", 0o644),
        ] {
            let p = d.join(f);
            std::fs::write(&p, format!("{}\n", "ab".repeat(36))).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        assert!(std::process::Command::new("mkfifo")
            .arg(d.join("fifo"))
            .status()
            .unwrap()
            .success());
        SecretDir(d)
    }
    fn path(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for SecretDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A static ipsec tunnel body with `sas` as its `sa` array.
fn static_body(name: &str, sas: &str) -> String {
    format!(
        r#"{{"name":"{name}","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.2",
            "traffic":["10.2.0.0/24"],"sa":{sas}}}"#
    )
}

fn inline_sas(out_spi: u32, in_spi: u32) -> String {
    format!(
        r#"[{{"direction":"out","spi":{out_spi},"algorithm":"aes128gcm16","key":"{SECRET}"}},
            {{"direction":"in","spi":"{in_spi:#x}","algorithm":"aes128gcm16","key":"{SECRET}"}}]"#
    )
}

#[tokio::test]
async fn invalid_ipsec_tunnels_are_400_naming_the_field_without_key_echo() {
    let (ctl, fake, tables) = control();
    let app = router(ctl.clone(), Auth::None);
    let gen0 = tables.load().generation;
    let k = SECRET;
    let sa_out =
        format!(r#"{{"direction":"out","spi":4097,"algorithm":"aes128gcm16","key":"{k}"}}"#);
    let sa_in = format!(r#"{{"direction":"in","spi":4098,"algorithm":"aes128gcm16","key":"{k}"}}"#);
    let cases: Vec<(String, &str)> = vec![
        // SPI in the reserved range (RFC 4303 §2.1).
        (
            static_body(
                "x",
                &format!(
                    r#"[{sa_out},{{"direction":"in","spi":5,"algorithm":"aes128gcm16","key":"{k}"}}]"#
                ),
            ),
            "sa[1].spi",
        ),
        (
            static_body(
                "x",
                &format!(
                    r#"[{sa_out},{{"direction":"in","spi":4098,"algorithm":"des","key":"{k}"}}]"#
                ),
            ),
            "sa[1].algorithm",
        ),
        (
            static_body(
                "x",
                &format!(
                    r#"[{{"direction":"sideways","spi":4097,"algorithm":"aes128gcm16","key":"{k}"}},{sa_in}]"#
                ),
            ),
            "sa[0].direction",
        ),
        (
            static_body(
                "x",
                &format!(
                    r#"[{{"direction":"out","spi":4097,"algorithm":"aes128gcm16","key":"{k}","key_file":"/k"}},{sa_in}]"#
                ),
            ),
            "sa[0].key",
        ),
        (
            static_body(
                "x",
                &format!(r#"[{{"direction":"out","spi":4097,"algorithm":"aes128gcm16"}},{sa_in}]"#),
            ),
            "sa[0].key",
        ),
        (
            static_body(
                "x",
                &format!(
                    r#"[{sa_out},{{"direction":"in","spi":4098,"algorithm":"aes128gcm16","key":"{k}","lifetime_bytes":0}}]"#
                ),
            ),
            "sa[1].lifetime_bytes",
        ),
        // Two outbound SAs: the validator's rule, on the list.
        (
            static_body(
                "x",
                &format!(
                    r#"[{sa_out},{{"direction":"out","spi":4099,"algorithm":"aes128gcm16","key":"{k}"}},{sa_in}]"#
                ),
            ),
            "sa",
        ),
        (static_body("x", &format!("[{sa_out}]")), "sa"),
        // Selectors with host bits set.
        (
            format!(
                r#"{{"name":"x","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.2",
                    "traffic":["10.2.0.1/24"],"sa":[{sa_out},{sa_in}]}}"#
            ),
            "traffic",
        ),
        (
            format!(
                r#"{{"name":"x","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.2",
                    "traffic":["10.2.0.0/99x"],"sa":[{sa_out},{sa_in}]}}"#
            ),
            "traffic[0]",
        ),
        (
            r#"{"name":"x","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.2",
                "ike":{"psk_file":""}}"#
                .to_owned(),
            "ike.psk_file",
        ),
        (
            r#"{"name":"x","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.2",
                "ike":{"psk_file":"/p","ike_proposals":["aes256-sha256-rot13"]}}"#
                .to_owned(),
            "ike.ike_proposals",
        ),
        (
            r#"{"name":"x","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.2",
                "ike":{"psk_file":"/p","dpd_interval":0}}"#
                .to_owned(),
            "ike.dpd_interval",
        ),
        (
            r#"{"name":"x","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.2",
                "ike":{"psk_file":"/p","local_traffic":["10.1.0.0/24","10.1.0.0/99x"]}}"#
                .to_owned(),
            "ike.local_traffic[1]",
        ),
        (
            r#"{"name":"x","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.2",
                "ike":{"psk_file":"/p","psk":"hunter2"}}"#
                .to_owned(),
            "ike",
        ),
        (
            format!(
                r#"{{"name":"x","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.2",
                    "ike":{{"psk_file":"/p"}},"sa":[{sa_out},{sa_in}]}}"#
            ),
            "ike",
        ),
        // IPsec keys on another kind.
        (
            r#"{"name":"x","kind":"gre","local":"192.0.2.1","remote":"192.0.2.2","nat_t":true}"#
                .to_owned(),
            "nat_t",
        ),
        (
            format!(
                r#"{{"name":"x","kind":"ipsec","local":"192.0.2.1","remote":"2001:db8::2",
                    "sa":[{sa_out},{sa_in}]}}"#
            ),
            "local",
        ),
    ];
    // Key and PSK files that are not private regular files: refused
    // before the registry is asked, without blocking on the FIFO or
    // reading /dev/zero.
    let dir = SecretDir::new();
    let mut cases = cases;
    for (path, why) in [
        ("/dev/zero".to_owned(), "character device"),
        (format!("{}/fifo", dir.path()), "FIFO"),
        (format!("{}/open.hex", dir.path()), "mode 0644"),
        (format!("{}/missing.hex", dir.path()), "cannot be opened"),
        (dir.path(), "directory"),
    ] {
        let sa = format!(
            r#"{{"direction":"in","spi":4098,"algorithm":"aes256gcm16","key_file":"{path}"}}"#
        );
        cases.push((
            static_body("x", &format!("[{sa_out},{sa}]")),
            "sa[1].key_file",
        ));
        let (st, b) = call(&app, "POST", "/tunnels", Some(&cases.last().unwrap().0)).await;
        assert!(st == 400 && b.contains(why), "{path}: {st} {b}");
        let ike = format!(
            r#"{{"name":"x","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.2",
                "ike":{{"psk_file":"{path}"}}}}"#
        );
        cases.push((ike, "ike.psk_file"));
    }
    for (body, want) in &cases {
        let (st, b) = call(&app, "POST", "/tunnels", Some(body)).await;
        assert_eq!(st, 400, "{body}: {b}");
        let f = field(&b);
        assert!(
            f == *want || (*want == "ike" && f.starts_with("ike")),
            "{body}: field {f}, want {want}: {b}"
        );
        assert!(!b.contains(SECRET), "key echoed: {b}");
    }
    // Nothing reached the registry or the tables.
    assert_eq!(fake.take(), Vec::<String>::new());
    assert_eq!(tables.load().generation, gen0);
    assert!(ctl.config().tunnels.is_empty());
}

#[tokio::test]
async fn ipsec_tunnel_lifecycle_duplicate_route_and_rollback() {
    let (ctl, fake, tables) = control();
    let app = router(ctl.clone(), Auth::None);
    let gen0 = tables.load().generation;

    // Inline keys: registered, published, started; the answer and the
    // running configuration hold no key.
    let (st, b) = call(
        &app,
        "POST",
        "/tunnels",
        Some(&static_body("s1", &inline_sas(0x1001, 0x2001))),
    )
    .await;
    assert_eq!(st, 201, "{b}");
    assert!(!b.contains(SECRET), "{b}");
    assert_eq!(fake.take(), vec!["add s1 hex,hex", "start s1"]);
    assert!(tables.load().generation > gen0);
    let (_, conf) = call(&app, "GET", "/config", None).await;
    assert!(
        conf.contains("name = \"s1\"") && conf.contains("10.2.0.0/24"),
        "{conf}"
    );
    assert!(
        !conf.contains(SECRET) && !conf.contains("tunnel.sa"),
        "{conf}"
    );
    let (_, list) = call(&app, "GET", "/tunnels", None).await;
    assert!(
        list.contains("\"ipsec\"") && !list.contains(SECRET),
        "{list}"
    );

    // Same name again: 409 before the registry is asked.
    let (st, b) = call(
        &app,
        "POST",
        "/tunnels",
        Some(&static_body("s1", &inline_sas(0x1003, 0x2003))),
    )
    .await;
    assert_eq!((st, field(&b).as_str()), (409, "name"), "{b}");
    // A name an interface has.
    let (st, _) = call(
        &app,
        "POST",
        "/tunnels",
        Some(&static_body("lan", &inline_sas(0x1003, 0x2003))),
    )
    .await;
    assert_eq!(st, 409);
    assert!(fake.take().is_empty());

    // Key files: recorded as paths, so GET /config reproduces the tunnel.
    // They are read (private regular files) before the registry is asked.
    let dir = SecretDir::new();
    let files = r#"[{"direction":"out","spi":"0x3001","algorithm":"aes256gcm16","key_file":"/etc/vg/out.hex"},
                    {"direction":"in","spi":"0x3002","algorithm":"aes256gcm16","key_file":"/etc/vg/in.hex","replay_window":64}]"#;
    let files = files.replace("/etc/vg", &dir.path());
    let (st, b) = call(&app, "POST", "/tunnels", Some(&static_body("s2", &files))).await;
    assert_eq!(st, 201, "{b}");
    assert_eq!(fake.take(), vec!["add s2 file,file", "start s2"]);
    let conf = ctl.config().to_toml();
    assert!(
        conf.contains(&format!("{}/out.hex", dir.path())) && conf.contains("replay_window = 64"),
        "{conf}"
    );
    // An inbound SPI the file-keyed tunnel already has: the validator's 409-free 400.
    let dup = r#"[{"direction":"out","spi":"0x4001","algorithm":"aes256gcm16","key_file":"/k1"},
                  {"direction":"in","spi":"0x3002","algorithm":"aes256gcm16","key_file":"/k2"}]"#;
    let (st, b) = call(&app, "POST", "/tunnels", Some(&static_body("s3", dup))).await;
    assert_eq!((st, field(&b).as_str()), (400, "sa[1].spi"), "{b}");

    // IKE-keyed.
    let ike = r#"{"name":"i1","kind":"ipsec","local":"192.0.2.1","remote":"192.0.2.9",
                  "traffic":["10.9.0.0/24"],
                  "ike":{"psk_file":"/etc/vg/i1.psk","remote_id":"peer.example","initiate":false,
                         "esp_proposals":["aes128gcm16"],"ike_proposals":null,"local_traffic":null}}"#;
    let ike = ike.replace("/etc/vg", &dir.path());
    let (st, b) = call(&app, "POST", "/tunnels", Some(&ike)).await;
    assert_eq!(st, 201, "{b}");
    assert_eq!(fake.take(), vec!["add i1 ", "start i1"]);
    let conf = ctl.config().to_toml();
    assert!(
        conf.contains("[tunnel.ike]")
            && conf.contains(&format!("{}/i1.psk", dir.path()))
            && conf.contains("initiate = false"),
        "{conf}"
    );

    // A route through it blocks the delete, and the peer is not told.
    let (st, _) = call(
        &app,
        "POST",
        "/routes",
        Some(r#"{"prefix":"10.8.0.0/24","via":"i1"}"#),
    )
    .await;
    assert_eq!(st, 201);
    let (st, b) = call(&app, "DELETE", "/tunnels/i1", None).await;
    assert_eq!((st, field(&b).as_str()), (409, "name"), "{b}");
    assert!(b.contains("10.8.0.0/24"), "{b}");
    assert!(fake.take().is_empty(), "nothing stopped while routed");
    let (st, _) = call(&app, "DELETE", "/routes?prefix=10.8.0.0/24", None).await;
    assert_eq!(st, 204);
    // Stop (IKE DELETE) while still in the tables, then the swap, then the SAs.
    let (st, b) = call(&app, "DELETE", "/tunnels/i1", None).await;
    assert_eq!(st, 204, "{b}");
    assert_eq!(fake.take(), vec!["stop i1", "remove i1"]);
    assert!(ctl.config().tunnel("i1").is_none());
    let (st, _) = call(&app, "DELETE", "/tunnels/i1", None).await;
    assert_eq!(st, 404);

    // The registry refuses (say, an SPI in use): nothing is published.
    *fake.refuse.lock().unwrap() = Some(ApiError::new(
        409,
        "inbound SPI 0x00002001 is in use",
        Some("sa[1].spi"),
    ));
    let gen = tables.load().generation;
    let (st, b) = call(
        &app,
        "POST",
        "/tunnels",
        Some(&static_body("s4", &inline_sas(0x1005, 0x2001))),
    )
    .await;
    assert_eq!((st, field(&b).as_str()), (409, "sa[1].spi"), "{b}");
    assert_eq!(tables.load().generation, gen);
    assert!(ctl.config().tunnel("s4").is_none());

    // The tables refuse: the registration is undone.
    let (st, b) = call(
        &app,
        "POST",
        "/tunnels",
        Some(&static_body("unbuildable", &inline_sas(0x1006, 0x2006))),
    )
    .await;
    assert_eq!(st, 409, "{b}");
    assert_eq!(
        fake.take(),
        vec!["add unbuildable hex,hex", "remove unbuildable"]
    );
    assert!(ctl.config().tunnel("unbuildable").is_none());

    // Static tunnels go the same way (their stop is a no-op in vecgate).
    for n in ["s1", "s2"] {
        let (st, _) = call(&app, "DELETE", &format!("/tunnels/{n}"), None).await;
        assert_eq!(st, 204);
    }
    assert_eq!(
        fake.take(),
        vec!["stop s1", "remove s1", "stop s2", "remove s2"]
    );
    assert!(ctl.config().tunnels.is_empty());
}

#[tokio::test]
async fn openapi_describes_ipsec_tunnels() {
    let (ctl, _, _) = control();
    let app = router(ctl, Auth::None);
    let (st, doc) = call(&app, "GET", "/openapi.json", None).await;
    assert_eq!(st, 200);
    let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
    let schemas = &v["components"]["schemas"];
    let spec = &schemas["TunnelSpec"]["properties"];
    for k in ["nat_t", "traffic", "sa", "ike"] {
        assert!(spec.get(k).is_some(), "TunnelSpec lacks {k}: {spec}");
    }
    assert!(
        schemas["TunnelSaSpec"]["properties"]["key_file"].is_object(),
        "{schemas}"
    );
    assert!(
        schemas["IkeSpec"]["properties"]["psk_file"].is_object(),
        "{schemas}"
    );
    assert_eq!(
        schemas["TunnelSaSpec"]["properties"]["key"]["format"],
        "password"
    );
}
