//! FRR (zebra + bgpd, Debian's 8.4) in a test namespace: a private run
//! directory owned by the `frr` user (FRR refuses `-u root`), daemons
//! killed by their pids (see /work/shared/notes/peers-routing-ha.md).
#![allow(dead_code)]

use super::common::{sh, unique, wait_until};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// zebra and bgpd in namespace `ns`; killed by their pids on drop (the
/// namespace's own drop kills whatever is left).
pub struct Frr {
    pub ns: String,
    pub dir: PathBuf,
}

impl Frr {
    /// Starts zebra (with the FPM module when `fpm`) and bgpd in `ns`.
    pub fn start(ns: &str, tag: &str, zebra_conf: &str, bgpd_conf: &str, fpm: bool) -> Frr {
        let dir = std::env::temp_dir().join(unique(tag));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("zebra.conf"), zebra_conf).unwrap();
        std::fs::write(dir.join("bgpd.conf"), bgpd_conf).unwrap();
        sh(&format!("chown -R frr:frr {}", dir.display()));
        let f = Frr {
            ns: ns.to_owned(),
            dir,
        };
        f.start_zebra(fpm);
        f.daemon("bgpd", "");
        f
    }

    pub fn daemon(&self, name: &str, extra: &str) {
        let d = self.dir.display();
        sh(&format!(
            "ip netns exec {ns} /usr/lib/frr/{name} -d {extra} -f {d}/{name}.conf -i {d}/{name}.pid \
             -z {d}/zserv.api --vty_socket {d} -P 0",
            ns = self.ns
        ));
    }

    pub fn start_zebra(&self, fpm: bool) {
        self.daemon("zebra", if fpm { "-M dplane_fpm_nl" } else { "" });
    }

    pub fn kill(&self, name: &str) {
        let pid = self.dir.join(format!("{name}.pid"));
        if let Ok(p) = std::fs::read_to_string(&pid) {
            let p = p.trim();
            let _ = std::process::Command::new("kill").args(["-9", p]).status();
            // Gone once its pid no longer answers signal 0.
            wait_until(10, || {
                !std::process::Command::new("kill")
                    .args(["-0", p])
                    .status()
                    .is_ok_and(|s| s.success())
            });
            let _ = std::fs::remove_file(pid);
        }
    }

    pub fn vtysh(&self, cmds: &[&str]) -> String {
        let mut c = format!("vtysh --vty_socket {}", self.dir.display());
        for x in cmds {
            c.push_str(&format!(" -c '{x}'"));
        }
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&c)
            .output()
            .expect("vtysh");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The BGP prefixes zebra has selected (`show ip route bgp`).
    pub fn bgp_routes(&self) -> BTreeSet<String> {
        self.vtysh(&["show ip route bgp"])
            .lines()
            .filter(|l| l.starts_with("B>"))
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
            .collect()
    }

    /// Announces (`add`) or withdraws `prefix` from AS `asn`'s IPv4 table.
    pub fn network(&self, asn: u32, add: bool, prefix: &str) {
        let no = if add { "" } else { "no " };
        self.vtysh(&[
            "configure terminal",
            &format!("router bgp {asn}"),
            "address-family ipv4 unicast",
            &format!("{no}network {prefix}"),
        ]);
    }
}

impl Drop for Frr {
    fn drop(&mut self) {
        self.kill("bgpd");
        self.kill("zebra");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// zebra.conf that streams to an FPM server at `addr` port 2620.
pub fn zebra_fpm(addr: &str) -> String {
    format!("fpm address {addr} port 2620\n")
}

/// bgpd.conf of AS `asn`: eBGP with each `(address, AS)` neighbour on
/// 3 s / 9 s timers and a 1 s connect retry (8.4 needs `no bgp
/// ebgp-requires-policy` to exchange anything, and `no bgp network
/// import-check` for networks its RIB does not hold), announcing
/// `networks`.
pub fn bgpd_conf(asn: u32, neighbors: &[(&str, u32)], networks: &[String]) -> String {
    let mut s =
        format!("router bgp {asn}\n no bgp ebgp-requires-policy\n no bgp network import-check\n");
    for (a, r) in neighbors {
        s.push_str(&format!(
            " neighbor {a} remote-as {r}\n neighbor {a} timers 3 9\n neighbor {a} timers connect 1\n"
        ));
    }
    s.push_str(" address-family ipv4 unicast\n");
    for p in networks {
        s.push_str(&format!("  network {p}\n"));
    }
    s.push_str(" exit-address-family\n");
    s
}
