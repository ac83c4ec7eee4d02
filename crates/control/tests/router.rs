//! The API router without a network: a config, tables built from it by
//! the gateway's own builder, one worker's counters and mailbox (answered
//! by a stand-in thread).

use axum::body::Body;
use axum::http::{Request, StatusCode};
use dataplane::tables::SharedTables;
use http_body_util::BodyExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tower::ServiceExt;
use vecgate_control::api::router;
use vecgate_control::build::{Inputs, Ports};
use vecgate_control::{Auth, Capabilities, Control, Dataplane, NetdevFacts, TableBuilder, Token};

const CFG: &str = r#"
[gateway]
name = "t"
api = "unix:/tmp/unused.sock"

[[interface]]
name = "lan0"
host = "veth0"
driver = "af_packet"
addresses = ["10.1.0.1/24"]

[[route]]
prefix = "10.9.0.0/16"
via = "10.1.0.254"
"#;

const NETDEV: NetdevFacts = NetdevFacts {
    mac: [2, 0, 0, 0, 0, 1],
    mtu: 1500,
    offloads: false,
};

/// The gateway's own table builder, every interface on a netdev like
/// [`NETDEV`].
fn builder(cfg: &vecgate_config::Config) -> TableBuilder {
    let ports = Mutex::new(Ports::new(cfg));
    let netdevs: HashMap<String, NetdevFacts> = cfg
        .interfaces
        .iter()
        .map(|i| (i.name.clone(), NETDEV))
        .collect();
    Box::new(move |c, learned| {
        let inputs = Inputs {
            netdevs: &netdevs,
            learned,
            held: &HashMap::new(),
            ipsec: None,
        };
        ports.lock().unwrap().tables(c, &inputs)
    })
}

fn control() -> (Arc<Control>, Arc<SharedTables>) {
    let (ctl, tables, _) = control_with_counters();
    (ctl, tables)
}

/// As [`control`], with the worker's counters for the test to move.
fn control_with_counters() -> (
    Arc<Control>,
    Arc<SharedTables>,
    Arc<dataplane::counters::WorkerCounters>,
) {
    let cfg = vecgate_config::parse(CFG).unwrap();
    let build = builder(&cfg);
    let tables = SharedTables::new(build(&cfg, &Default::default()).unwrap());
    let w = dataplane::worker::Worker::new(0, Vec::new(), tables.clone(), Default::default());
    let dp = Dataplane {
        tables: tables.clone(),
        build,
        counters: vec![w.counters()],
        mailboxes: vec![w.mailbox()],
        netdevs: vec![NETDEV],
        sas: None,
        sa_ops: None,
    };
    let counters = w.counters();
    // Keep the worker alive (its mailbox) for the test's duration.
    std::mem::forget(w);
    (
        Control::new(cfg, dp, Capabilities::default()),
        tables,
        counters,
    )
}

async fn call(
    app: &axum::Router,
    method: &str,
    uri: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (StatusCode, String) {
    let mut r = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        r = r.header("authorization", format!("Bearer {t}"));
    }
    if body.is_some() {
        r = r.header("content-type", "application/json");
    }
    let req = r
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let st = resp.status();
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    (st, String::from_utf8_lossy(&b).into_owned())
}

#[tokio::test]
async fn routes_crud_and_errors() {
    let (ctl, tables) = control();
    let app = router(ctl.clone(), Auth::None);
    let gen0 = tables.load().generation;
    let (st, b) = call(&app, "GET", "/routes", None, None).await;
    assert_eq!(st, 200);
    assert!(
        b.contains("10.9.0.0/16") && b.contains("\"connected\""),
        "{b}"
    );
    let (st, b) = call(
        &app,
        "POST",
        "/routes",
        Some(r#"{"prefix":"10.8.0.0/24","via":"lan0"}"#),
        None,
    )
    .await;
    assert_eq!(st, 201, "{b}");
    assert!(tables.load().generation > gen0);
    assert!(ctl.config().to_toml().contains("10.8.0.0/24"));
    // Duplicate, host bits, bad via, missing field: each a 4xx naming it.
    for (body, code, field) in [
        (r#"{"prefix":"10.8.0.0/24","via":"lan0"}"#, 409, "prefix"),
        (r#"{"prefix":"10.8.0.1/24","via":"lan0"}"#, 400, "prefix"),
        (r#"{"prefix":"10.7.0.0/24","via":"nope"}"#, 400, "via"),
        (r#"{"prefix":"10.7.0.0/33","via":"lan0"}"#, 400, "prefix"),
        (r#"{"prefix":"10.7.0.0/24"}"#, 400, "via"),
        (r#"{"prefix":"10.7.0.0/24","via":"lan0","x":1}"#, 400, "x"),
    ] {
        let (st, b) = call(&app, "POST", "/routes", Some(body), None).await;
        assert_eq!(st.as_u16(), code, "{body}: {b}");
        let v: serde_json::Value = serde_json::from_str(&b).unwrap();
        assert_eq!(v["field"], field, "{body}: {b}");
    }
    let (st, _) = call(&app, "DELETE", "/routes?prefix=10.8.0.0/24", None, None).await;
    assert_eq!(st, 204);
    let (st, _) = call(&app, "DELETE", "/routes?prefix=10.8.0.0/24", None, None).await;
    assert_eq!(st, 404);
    assert!(!ctl.config().to_toml().contains("10.8.0.0/24"));
}

#[tokio::test]
async fn interfaces_patch_and_misc() {
    let (ctl, tables) = control();
    let app = router(ctl.clone(), Auth::None);
    let (st, b) = call(
        &app,
        "PATCH",
        "/interfaces/lan0",
        Some(r#"{"rsc":false}"#),
        None,
    )
    .await;
    assert_eq!(st, 200, "{b}");
    assert!(b.contains("\"rsc\":false"), "{b}");
    assert!(!ctl.config().interfaces[0].rsc);
    let (st, _) = call(
        &app,
        "PATCH",
        "/interfaces/zz",
        Some(r#"{"rsc":false}"#),
        None,
    )
    .await;
    assert_eq!(st, 404);
    let (st, b) = call(
        &app,
        "PATCH",
        "/interfaces/lan0",
        Some(r#"{"mtu":5}"#),
        None,
    )
    .await;
    assert_eq!(st, 400);
    assert!(b.contains("\"field\":\"mtu\""), "{b}");
    // An interface needs its name and netdev; this dataplane (no port
    // operations) cannot attach one live.
    let (st, b) = call(&app, "POST", "/interfaces", Some("{}"), None).await;
    assert_eq!(st, 400, "{b}");
    let (st, b) = call(
        &app,
        "POST",
        "/interfaces",
        Some(r#"{"name":"lan9","host":"veth9","addresses":["10.9.0.1/24"]}"#),
        None,
    )
    .await;
    assert_eq!(st, 409, "{b}");
    assert!(b.contains("restart"), "{b}");
    assert!(ctl.config().interface("lan9").is_none());
    let (st, b) = call(&app, "GET", "/config", None, None).await;
    assert_eq!(st, 200);
    assert_eq!(vecgate_config::parse(&b).unwrap(), ctl.config());
    let (st, b) = call(&app, "GET", "/metrics", None, None).await;
    assert_eq!(st, 200);
    assert!(
        b.contains("vecgate_interface_rx_packets_total{interface=\"lan0\"} 0"),
        "{b}"
    );
    assert!(b.contains("vecgate_node_drops_total{"), "{b}");
    let (st, b) = call(&app, "GET", "/openapi.json", None, None).await;
    assert_eq!(st, 200);
    let doc: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert!(doc["paths"]["/routes"]["delete"].is_object());
    let (st, b) = call(&app, "GET", "/sas", None, None).await;
    assert_eq!((st.as_u16(), b.as_str()), (200, "[]"));
    // GET /ike: documented, empty without IKE, the thread's list once set.
    assert!(doc["paths"]["/ike"]["get"].is_object());
    assert!(doc["components"]["schemas"]["IkeTunnelInfo"].is_object());
    assert!(doc["components"]["schemas"]["IkeChildSaInfo"]["properties"]["spi_in"].is_object());
    let (st, b) = call(&app, "GET", "/ike", None, None).await;
    assert_eq!((st.as_u16(), b.as_str()), (200, "[]"));
    ctl.set_ike_source(Box::new(|| {
        vec![vecgate_control::model::IkeTunnelInfo {
            tunnel: "to-b".into(),
            local: "192.0.2.1".into(),
            remote: "192.0.2.2".into(),
            initiator: true,
            state: "failed".into(),
            last_error: Some("IKE SA: AUTHENTICATION_FAILED".into()),
            ike_sas: vec![],
            child_sas: vec![],
            ike_rekeys: 0,
            child_rekeys: 0,
            ..Default::default()
        }]
    }));
    let (st, b) = call(&app, "GET", "/ike", None, None).await;
    assert_eq!(st, 200);
    let v: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v[0]["state"], "failed");
    assert_eq!(v[0]["last_error"], "IKE SA: AUTHENTICATION_FAILED");
    let (st, b) = call(
        &app,
        "POST",
        "/tunnels",
        Some(r#"{"name":"t1","kind":"gre","local":"10.1.0.1","remote":"x"}"#),
        None,
    )
    .await;
    assert_eq!(st, 400, "{b}");
    assert!(b.contains("\"field\":\"remote\""), "{b}");
    let _ = tables;
}

/// Port losses reach /counters, /interfaces, /metrics and the OpenAPI
/// schema under their own names, beside the existing fields.
#[tokio::test]
async fn port_drop_counters_are_exported() {
    let (ctl, _tables, c) = control_with_counters();
    let app = router(ctl, Auth::None);
    let p = &c.ports[0];
    p.rx_packets.add(100);
    p.rx_missed.add(7);
    p.rx_errors.add(2);
    p.tx_errors.add(1);
    p.drops.add(7 + 2 + 3);
    let (st, b) = call(&app, "GET", "/counters", None, None).await;
    assert_eq!(st, 200);
    let v: serde_json::Value = serde_json::from_str(&b).unwrap();
    let i = &v["interfaces"][0];
    assert_eq!(i["interface"], "lan0", "{b}");
    assert_eq!(
        (
            &i["rx_packets"],
            &i["drops"],
            &i["rx_missed"],
            &i["rx_errors"],
            &i["tx_errors"]
        ),
        (&100.into(), &12.into(), &7.into(), &2.into(), &1.into()),
        "{b}"
    );
    let (_, b) = call(&app, "GET", "/interfaces", None, None).await;
    let v: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_eq!(
        (&v[0]["rx_missed"], &v[0]["drops"]),
        (&7.into(), &12.into()),
        "{b}"
    );
    let (_, b) = call(&app, "GET", "/metrics", None, None).await;
    for line in [
        "vecgate_interface_rx_missed_total{interface=\"lan0\"} 7",
        "vecgate_interface_rx_errors_total{interface=\"lan0\"} 2",
        "vecgate_interface_tx_errors_total{interface=\"lan0\"} 1",
        "vecgate_interface_drops_total{interface=\"lan0\"} 12",
    ] {
        assert!(b.lines().any(|l| l == line), "{line} missing in:\n{b}");
    }
    let (_, b) = call(&app, "GET", "/openapi.json", None, None).await;
    let doc: serde_json::Value = serde_json::from_str(&b).unwrap();
    for schema in ["InterfaceCounters", "InterfaceInfo"] {
        let props = properties(&doc, schema);
        for f in ["drops", "rx_missed", "rx_errors", "tx_errors"] {
            assert_eq!(props[f]["type"], "integer", "{schema}.{f}: {props:?}");
        }
    }
}

/// The properties of an OpenAPI component schema, with those of the
/// schemas it is composed of (`allOf`, `$ref`: serde's flatten).
fn properties(doc: &serde_json::Value, schema: &str) -> serde_json::Map<String, serde_json::Value> {
    fn walk(
        doc: &serde_json::Value,
        s: &serde_json::Value,
        out: &mut serde_json::Map<String, serde_json::Value>,
    ) {
        if let Some(r) = s["$ref"].as_str() {
            let name = r.rsplit('/').next().unwrap();
            return walk(doc, &doc["components"]["schemas"][name], out);
        }
        if let Some(p) = s["properties"].as_object() {
            out.extend(p.clone());
        }
        for part in s["allOf"].as_array().into_iter().flatten() {
            walk(doc, part, out);
        }
    }
    let mut out = serde_json::Map::new();
    walk(doc, &doc["components"]["schemas"][schema], &mut out);
    assert!(!out.is_empty(), "no schema {schema}");
    out
}

#[tokio::test]
async fn tokens() {
    let (ctl, tables) = control();
    let auth = Auth::Bearer {
        admin: Token::new(b"admin-secret-0123456789abcdef012345").unwrap(),
        readonly: Token::new(b"ro-secret-0123456789abcdef0123456789").ok(),
    };
    let app = router(ctl.clone(), auth);
    let gen0 = tables.load().generation;
    let add = Some(r#"{"prefix":"10.8.0.0/24","via":"lan0"}"#);
    assert_eq!(call(&app, "GET", "/routes", None, None).await.0, 401);
    assert_eq!(call(&app, "GET", "/routes", None, Some("bad")).await.0, 401);
    assert_eq!(
        call(
            &app,
            "GET",
            "/routes",
            None,
            Some("ro-secret-0123456789abcdef0123456789")
        )
        .await
        .0,
        200
    );
    assert_eq!(call(&app, "POST", "/routes", add, None).await.0, 401);
    assert_eq!(call(&app, "POST", "/routes", add, Some("bad")).await.0, 401);
    assert_eq!(
        call(
            &app,
            "POST",
            "/routes",
            add,
            Some("ro-secret-0123456789abcdef0123456789")
        )
        .await
        .0,
        403
    );
    assert_eq!(tables.load().generation, gen0, "nothing changed");
    assert!(!ctl.config().to_toml().contains("10.8.0.0/24"));
    assert_eq!(
        call(
            &app,
            "POST",
            "/routes",
            add,
            Some("admin-secret-0123456789abcdef012345")
        )
        .await
        .0,
        201
    );
    assert_eq!(call(&app, "GET", "/openapi.json", None, None).await.0, 200);
}

/// A VRRP speaker stand-in: one group, master until asked to resign.
struct FakeHa(std::sync::Mutex<Vec<vecgate_control::model::HaSwitchover>>);

impl vecgate_control::HaOps for FakeHa {
    fn groups(&self) -> Vec<vecgate_control::model::HaGroupInfo> {
        let resigned = !self.0.lock().unwrap().is_empty();
        vec![vecgate_control::model::HaGroupInfo {
            interface: "lan0".into(),
            vrid: 51,
            family: "ipv4".into(),
            state: if resigned { "backup" } else { "master" }.into(),
            priority: 150,
            effective_priority: 150,
            ..Default::default()
        }]
    }
    fn switchover(
        &self,
        spec: &vecgate_control::model::HaSwitchover,
    ) -> Result<Vec<vecgate_control::model::HaGroupInfo>, vecgate_control::ApiError> {
        if !self.0.lock().unwrap().is_empty() {
            return Err(vecgate_control::ApiError::new(409, "not master", None));
        }
        self.0.lock().unwrap().push(spec.clone());
        Ok(self.groups())
    }
}

/// GET /ha and POST /ha/switchover: documented, empty / 409 without
/// `[ha]`, the speaker's answers once set, bad input refused before it.
#[tokio::test]
async fn ha_status_and_switchover() {
    let (ctl, _tables) = control();
    let app = router(ctl.clone(), Auth::None);
    let (_, b) = call(&app, "GET", "/openapi.json", None, None).await;
    let doc: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert!(doc["paths"]["/ha"]["get"].is_object());
    assert!(doc["paths"]["/ha/switchover"]["post"].is_object());
    assert!(
        doc["components"]["schemas"]["HaGroupInfo"]["properties"]["effective_priority"].is_object()
    );
    let (st, b) = call(&app, "GET", "/ha", None, None).await;
    assert_eq!((st.as_u16(), b.as_str()), (200, "[]"));
    let (st, _) = call(&app, "POST", "/ha/switchover", None, None).await;
    assert_eq!(st, 409);
    let fake = Arc::new(FakeHa(Default::default()));
    ctl.set_ha(fake.clone());
    let (st, b) = call(&app, "GET", "/ha", None, None).await;
    assert_eq!(st, 200);
    let v: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v[0]["state"], "master");
    for bad in [
        r#"{"hold_secs":86401}"#,
        r#"{"vrid":0}"#,
        r#"{"bogus":1}"#,
        "[]",
    ] {
        let (st, b) = call(&app, "POST", "/ha/switchover", Some(bad), None).await;
        assert_eq!(st, 400, "{bad}: {b}");
    }
    assert!(fake.0.lock().unwrap().is_empty());
    let (st, b) = call(&app, "POST", "/ha/switchover", Some(r#"{"vrid":51}"#), None).await;
    assert_eq!(st, 200, "{b}");
    // The default hold is filled in before the speaker sees the request.
    assert_eq!(fake.0.lock().unwrap()[0].hold_secs, Some(60));
    let v: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v[0]["state"], "backup");
    let (st, _) = call(&app, "POST", "/ha/switchover", None, None).await;
    assert_eq!(st, 409);
    let (_, m) = call(&app, "GET", "/metrics", None, None).await;
    assert!(
        m.contains(
            "vecgate_vrrp_state{interface=\"lan0\",vrid=\"51\",family=\"ipv4\",state=\"backup\"} 1"
        ),
        "{m}"
    );
}
