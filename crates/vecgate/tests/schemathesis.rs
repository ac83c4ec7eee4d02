//! schemathesis (property-based API testing, PyPI) against the served
//! OpenAPI document of a real gateway on a TCP endpoint with a token: no
//! 5xx, no response that violates the document. The tool comes from the
//! project's .venv (scripts/venv.sh pins its version).
//!
//! `positive_data_acceptance` is excluded: it expects every schema-valid
//! request to succeed, but the API validates semantically beyond JSON
//! Schema (a prefix must parse, a `via` must exist) and answers 400
//! naming the field, as it should.

mod common;

use common::{unique, veth, Gateway, Netns};
use std::path::PathBuf;

fn st() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new(root.join("scripts/venv.sh"))
        .output()
        .expect("scripts/venv.sh");
    assert!(
        out.status.success(),
        "scripts/venv.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("st")
}

#[test]
fn schemathesis_finds_no_server_errors_or_schema_violations() {
    let st = st();
    let h1 = Netns::new("h1");
    let gw = Netns::new("gw");
    veth(&h1, "eth0", &gw, "gw-h1");
    let tok = std::env::temp_dir().join(format!("{}.token", unique("st")));
    common::write_secret(&tok, "schemathesis-token-0123456789abcdef0123456789\n");
    let cfg = format!(
        "[gateway]\nname = \"st\"\napi = \"tcp:127.0.0.1:9292\"\napi_token_file = \"{}\"\napi_insecure_loopback = true\n\n[[interface]]\nname = \"lan0\"\nhost = \"gw-h1\"\ndriver = \"af_packet\"\naddresses = [\"10.1.0.1/24\"]\n",
        tok.display()
    );
    let _g = Gateway::start(&gw, &cfg);
    // Every answer within 15 s, except POST /capture: it waits for its
    // frames up to the request's `timeout_ms` (≤ 60 s, as documented),
    // and the stateful phase reaches it with the real `lan0` (a link
    // inferred from GET /interfaces) on a link that carries nothing.
    // Timeouts set on the command line would override the per-operation
    // ones, so all of them live in the config file.
    let st_cfg = std::env::temp_dir().join(format!("{}.toml", unique("st")));
    std::fs::write(
        &st_cfg,
        "request-timeout = 30\n\n[checks]\nmax_response_time = 15\n\n\
         [[operations]]\ninclude-path = \"/capture\"\ninclude-method = \"POST\"\n\
         request-timeout = 75\nchecks.max_response_time = 65\n",
    )
    .unwrap();
    let out = gw.try_sh(&format!(
        "{} --config-file {} run http://127.0.0.1:9292/openapi.json --checks all --exclude-checks positive_data_acceptance -H 'Authorization: Bearer schemathesis-token-0123456789abcdef0123456789' --max-examples 25 --no-color 2>&1",
        st.display(),
        st_cfg.display()
    ));
    let _ = std::fs::remove_file(&st_cfg);
    let _ = std::fs::remove_file(&tok);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "schemathesis failed:\n{text}");
}
