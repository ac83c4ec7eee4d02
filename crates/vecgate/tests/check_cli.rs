//! `vecgate check` run as a real process: exit codes and output lines.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A temporary config file removed on drop, even when the test fails.
struct TempFile(PathBuf);

impl TempFile {
    fn new(text: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "vecgate-check-{}-{}.toml",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn check(path: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vecgate"))
        .arg("check")
        .arg("--config")
        .arg(path)
        .output()
        .expect("run vecgate")
}

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn good_file_exits_0_with_summary() {
    let out = check(&examples().join("multi-tenant-vxlan.toml"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("gateway \"gw-mt\""), "{stdout}");
    assert!(stdout.contains("3 interfaces"), "{stdout}");
    assert!(stdout.contains("2 tunnels (2 vxlan)"), "{stdout}");
    assert!(stdout.contains("3 routes"), "{stdout}");
    assert!(stdout.contains("3 VRFs (default, green, red)"), "{stdout}");
    assert!(out.stderr.is_empty());
}

#[test]
fn every_example_passes() {
    for entry in std::fs::read_dir(examples()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) == Some("toml") {
            let out = check(&path);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn bad_file_exits_1_with_every_error_as_file_line() {
    let f = TempFile::new(
        r#"[gateway]
name = "gw"
workers = 0

[[interface]]
name = "lan0"
host = "veth0"
driver = "af_packet"
adress = ["10.0.0.1/24"]

[[route]]
prefix = "10.2.0.1/24"
via = "nowhere"
"#,
    );
    let out = check(&f.0);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    let p = f.0.display().to_string();
    assert_eq!(
        lines,
        vec![
            format!("{p}:3: [gateway]: workers = 0 is out of range (expected 1..=64)"),
            format!("{p}:9: [[interface]] \"lan0\": unknown key \"adress\" (expected one of name, host, driver, addresses, vrf, mtu, rsc, offloads)"),
            format!("{p}:12: [[route]] \"10.2.0.1/24\": prefix 10.2.0.1/24 has host bits set; did you mean 10.2.0.0/24?"),
            format!("{p}:13: [[route]] \"10.2.0.1/24\": via \"nowhere\": no interface or tunnel has that name"),
            format!("{p}: 4 errors"),
        ]
    );
}

#[test]
fn syntax_error_reports_its_line() {
    let f = TempFile::new("[gateway]\nname = \"gw\"\nworkers = \n");
    let out = check(&f.0);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("{}:3: TOML syntax error", f.0.display())),
        "{stderr}"
    );
}

#[test]
fn missing_file_exits_2() {
    let missing = std::env::temp_dir().join(format!("vecgate-no-such-{}.toml", std::process::id()));
    let out = check(&missing);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot read"), "{stderr}");
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
}

/// `[ha] sync_key_file` is read as `vecgate run` reads it: 64 hex digits
/// in a private file of vecgate's user; a missing one is only a note.
#[test]
fn ha_sync_key_file_is_checked() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("vecgate-check-sync-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("sync.key");
    let cfg = |key: &Path| {
        TempFile::new(&format!(
            "[gateway]\nname = \"gw\"\nstate_dir = \"{}/state\"\n\n[ha]\nsync_local = \"192.0.2.1:4790\"\nsync_peer = \"192.0.2.2:4790\"\nsync_key_file = \"{}\"\n",
            dir.display(),
            key.display()
        ))
    };
    let write = |text: &str, mode: u32| {
        std::fs::write(&key, text).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    // Good: 32 bytes, 0600.
    write(&"ab".repeat(32), 0o600);
    let f = cfg(&key);
    let out = check(&f.0);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Exposed, short, missing.
    write(&"ab".repeat(32), 0o644);
    let out = check(&f.0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("sync_key_file") && err.contains("chmod 600"),
        "{err}"
    );
    write(&"ab".repeat(16), 0o600);
    let out = check(&f.0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the sync key is 32 bytes"), "{err}");
    let missing = cfg(&dir.join("nope.key"));
    let out = check(&missing.0);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("sync_key_file") && text.contains("not checked"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
