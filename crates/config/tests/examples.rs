//! Every shipped example must pass validation and survive a round trip.

use std::path::PathBuf;

#[test]
fn every_example_is_valid() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("examples/ exists") {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let cfg = match vecgate_config::load(&path) {
            Ok(c) => c,
            Err(e) => panic!("{}: {e}: {e:?}", path.display()),
        };
        let again = vecgate_config::parse(&cfg.to_toml()).expect("to_toml output parses");
        assert_eq!(again, cfg, "{} does not round-trip", path.display());
        seen.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    seen.sort();
    for required in [
        "multi-tenant-vxlan.toml",
        "nvgre.toml",
        "router.toml",
        "two-site-gre-a.toml",
        "two-site-gre-b.toml",
    ] {
        assert!(
            seen.iter().any(|s| s == required),
            "missing example {required}"
        );
    }
}
