//! The Debian package, built as `make deb` builds it (scripts/deb.sh, the
//! cargo-deb metadata in crates/vecgate/Cargo.toml) but from the debug
//! binary this test suite already built:
//! - lintian accepts it (errors and warnings fail; each override in
//!   crates/vecgate/debian/lintian-overrides says why);
//! - `systemd-analyze verify` accepts the unit, with its commands and man
//!   pages taken from the package (no systemd runs as PID 1 here: this
//!   checks the unit file, not a boot);
//! - it installs into a throwaway root with dpkg (maintainer scripts run
//!   with DPKG_ROOT, dpkg's chrootless mode), with the state and run
//!   directories' owners and modes, the example configuration as a conffile
//!   that `vecgate check` accepts, a changed conffile kept on remove, and
//!   nothing left after purge — nor any process running from that root.
//!
//! Every tool is installed by scripts/install-deps.sh: a missing one fails
//! the test.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) -> (bool, String, String) {
    let what = format!("{cmd:?}");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e} (scripts/install-deps.sh installs it)"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(cmd: &mut Command) -> String {
    let what = format!("{cmd:?}");
    let (s, o, e) = run(cmd);
    assert!(s, "{what} failed:\n{o}\n{e}");
    o
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the .deb into `out` and returns its path.
fn build(out: &Path) -> PathBuf {
    let stdout = ok(Command::new("bash")
        .arg(repo().join("scripts/deb.sh"))
        .arg(common::vecgate_bin())
        .arg(out)
        .env("DEB_FAST", "1"));
    let deb = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    assert!(deb.is_file(), "no package from deb.sh: {stdout}");
    deb
}

/// A throwaway dpkg root knowing only the package's dependencies (their
/// status stanzas copied from this machine, no files).
fn dpkg_root(root: &Path, deb: &Path) {
    for d in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/lib/dpkg/triggers",
        "run",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("var/lib/dpkg/available"), "").unwrap();
    let depends = ok(Command::new("dpkg-deb").arg("-f").arg(deb).arg("Depends"));
    let mut status = String::new();
    for dep in depends.split(',') {
        let name = dep.split_whitespace().next().unwrap();
        status += &ok(Command::new("dpkg-query").args(["-s", name]));
        status += "\n";
        let full = ok(Command::new("dpkg-query").args(["-W", "-f=${binary:Package}", name]));
        std::fs::write(
            root.join(format!("var/lib/dpkg/info/{}.list", full.trim())),
            "",
        )
        .unwrap();
    }
    std::fs::write(root.join("var/lib/dpkg/status"), status).unwrap();
}

fn dpkg(root: &Path, args: &[&str]) -> String {
    ok(Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args(["--force-script-chrootless", "--log=/dev/null"])
        .args(args))
}

fn mode_owner(p: &Path) -> (u32, u32, u32) {
    let m = std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (m.permissions().mode() & 0o7777, m.uid(), m.gid())
}

/// Files and directories under `root` outside dpkg's own database.
fn leftovers(root: &Path) -> Vec<String> {
    let out = ok(Command::new("find")
        .arg(root)
        .args(["-mindepth", "1", "-path"])
        .arg(root.join("var/lib/dpkg"))
        .args(["-prune", "-o", "-print"]));
    let keep = ["var", "var/lib", "run"];
    out.lines()
        .map(|l| {
            l.strip_prefix(&format!("{}/", root.display()))
                .unwrap_or(l)
                .to_string()
        })
        .filter(|l| !keep.contains(&l.as_str()))
        .collect()
}

/// Processes whose executable lies under `root`.
fn processes_from(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(exe) = std::fs::read_link(e.path().join("exe")) {
            if exe.starts_with(root) {
                found.push(format!(
                    "{} {}",
                    e.file_name().to_string_lossy(),
                    exe.display()
                ));
            }
        }
    }
    found
}

#[test]
fn builds_lints_verifies_installs_and_purges() {
    let dir = std::env::temp_dir().join(common::unique("deb"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let deb = build(&dir.join("out"));

    // The package's control data and contents.
    let contents = ok(Command::new("dpkg-deb").arg("-c").arg(&deb));
    for p in [
        "./usr/bin/vecgate",
        "./etc/vecgate/vecgate.toml",
        "./lib/systemd/system/vecgate@.service",
        "./usr/lib/tmpfiles.d/vecgate.conf",
        "./usr/share/doc/vecgate/copyright",
        "./usr/share/man/man1/vecgate.1.gz",
        "./usr/share/man/man1/vecgate-run.1.gz",
        "./usr/share/bash-completion/completions/vecgate",
        "./usr/share/zsh/vendor-completions/_vecgate",
        "./usr/share/fish/vendor_completions.d/vecgate.fish",
    ] {
        assert!(
            contents.lines().any(|l| l.ends_with(p)),
            "{p} not in the package:\n{contents}"
        );
    }

    // lintian: errors and warnings fail (overrides are in the package).
    let (lint_ok, lo, le) = run(Command::new("lintian")
        .args([
            "--fail-on",
            "error,warning",
            "--display-info",
            "--no-tag-display-limit",
        ])
        .arg(&deb));
    assert!(lint_ok, "lintian rejects the package:\n{lo}\n{le}");

    // The throwaway root: install.
    let root = dir.join("root");
    dpkg_root(&root, &deb);
    dpkg(&root, &["-i", deb.to_str().unwrap()]);
    let status = ok(Command::new("dpkg-query")
        .arg(format!("--root={}", root.display()))
        .args(["-W", "-f=${Status} ${Conffiles}", "vecgate"]));
    assert!(status.starts_with("install ok installed"), "{status}");
    assert!(
        status.contains("/etc/vecgate/vecgate.toml"),
        "not a conffile: {status}"
    );
    assert_eq!(mode_owner(&root.join("var/lib/vecgate")), (0o700, 0, 0));
    assert_eq!(mode_owner(&root.join("run/vecgate")), (0o750, 0, 0));
    assert_eq!(mode_owner(&root.join("usr/bin/vecgate")), (0o755, 0, 0));
    assert_eq!(
        mode_owner(&root.join("etc/vecgate/vecgate.toml")),
        (0o644, 0, 0)
    );
    let bin = root.join("usr/bin/vecgate");
    ok(Command::new(&bin).arg("--version"));
    ok(Command::new(&bin)
        .args(["check", "--config"])
        .arg(root.join("etc/vecgate/vecgate.toml")));

    // The unit, as installed, with its commands and man pages from the
    // package (the paths rewritten into the root; any message fails).
    let unit = std::fs::read_to_string(root.join("lib/systemd/system/vecgate@.service")).unwrap();
    for d in [
        "Type=notify",
        "WatchdogSec=",
        "ExecReload=/usr/bin/vecgate reload --config /etc/vecgate/%i.toml",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "StateDirectory=vecgate",
        "RuntimeDirectory=vecgate",
        "CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_RAW CAP_BPF",
    ] {
        assert!(unit.lines().any(|l| l.starts_with(d)), "unit lacks {d}");
    }
    let udir = dir.join("units");
    std::fs::create_dir_all(&udir).unwrap();
    let test_unit = udir.join("vecgate@test.service");
    std::fs::write(
        &test_unit,
        unit.replace("/usr/bin/vecgate", bin.to_str().unwrap()),
    )
    .unwrap();
    let (v_ok, vo, ve) = run(Command::new("systemd-analyze")
        .arg("verify")
        .arg(&test_unit)
        .env("MANPATH", root.join("usr/share/man")));
    assert!(
        v_ok && vo.trim().is_empty() && ve.trim().is_empty(),
        "systemd-analyze verify:\n{vo}\n{ve}"
    );

    // Remove keeps the (changed) conffile, purge removes everything.
    let conf = root.join("etc/vecgate/vecgate.toml");
    let mut changed = std::fs::read_to_string(&conf).unwrap();
    changed.push_str("\n# changed by the administrator\n");
    std::fs::write(&conf, &changed).unwrap();
    dpkg(&root, &["-r", "vecgate"]);
    assert!(!bin.exists(), "binary left after remove");
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), changed);
    dpkg(&root, &["--purge", "vecgate"]);
    let left = leftovers(&root);
    assert!(left.is_empty(), "left after purge: {left:?}");
    let procs = processes_from(&root);
    assert!(
        procs.is_empty(),
        "processes from the package root: {procs:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
