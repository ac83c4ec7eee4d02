//! `[[routing.punt]]` TUNs set up: the host's stack as the gateway's
//! control plane in a VRF, the way VPP's linux-cp plugin mirrors an
//! interface into Linux. One L3 TUN per VRF (`vecgate_io::host_tun`)
//! carries the BGP and BFD packets the workers punt to the host, and
//! everything the host sends on it back into the VRF's routing
//! (`dataplane::punt::host::relay`, on the host punt thread). The TUN gets the
//! VRF's interface and tunnel addresses, so bgpd binds and connects from
//! the gateway's own addresses and the host's connected routes point at
//! the TUN; the host's kernel never sees vecgate's netdevs. A tenant
//! VRF's TUN lives in a namespace of its own (`netns`), its host routing
//! domain, where the tenant's zebra and bgpd run and reach vecgate's FPM
//! server through a listener made inside that namespace.

use dataplane::punt::host::relay::HostIf;
use std::io;
use std::path::Path;
use tracing::info;
use vecgate_config::Config;
use vecgate_control::fpm;
use vecgate_io::host_tun::HostTun;

/// A punt VRF's TUN as the relay's host interface.
pub struct Tun(HostTun);

impl HostIf for Tun {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
    fn write(&self, ip: &[u8]) -> io::Result<usize> {
        self.0.write(ip)
    }
}

/// Each punt VRF's name and TUN.
pub type Taps = Vec<(String, Box<dyn HostIf>)>;

/// Creates every `[[routing.punt]]` TUN, gives it the VRF's addresses and
/// sets it up (before the workers punt anything to it). A TUN with a
/// `netns` is created inside that namespace (made when missing, its
/// loopback up), with the FPM listener of the tenant's own zebra when
/// `fpm` is set: sockets and devices stay in the namespace they were
/// made in, whichever thread uses them later.
pub fn open(cfg: &Config) -> Result<(Taps, Vec<fpm::Source>), String> {
    let mut out = Vec::new();
    let mut sources = Vec::new();
    for p in &cfg.routing.punt {
        let what = |e: String| format!("[[routing.punt]] {}: {e}", p.tap);
        let (tun, listener) = match &p.netns {
            None => (
                HostTun::create(&p.tap).map_err(|e| what(e.to_string()))?,
                None,
            ),
            Some(ns) => {
                if !Path::new(NETNS_DIR).join(ns).exists() {
                    ip(&["netns", "add", ns]).map_err(what)?;
                }
                ip(&["-n", ns, "link", "set", "lo", "up"]).map_err(what)?;
                in_netns(ns, || {
                    let tun = HostTun::create(&p.tap).map_err(|e| e.to_string())?;
                    let l = match p.fpm {
                        Some(a) => Some(fpm::listen(a).map_err(|e| format!("FPM on {a}: {e}"))?),
                        None => None,
                    };
                    Ok((tun, l))
                })
                .map_err(what)?
            }
        };
        let mut addrs: Vec<String> = Vec::new();
        for i in cfg.interfaces.iter().filter(|i| i.vrf == p.vrf) {
            addrs.extend(
                i.addresses
                    .iter()
                    .map(|a| format!("{}/{}", a.addr, a.prefix_len)),
            );
        }
        for t in cfg.tunnels.iter().filter(|t| t.vrf == p.vrf) {
            addrs.extend(
                t.addresses
                    .iter()
                    .map(|a| format!("{}/{}", a.addr, a.prefix_len)),
            );
        }
        let ns: Vec<&str> = p.netns.iter().flat_map(|n| ["-n", n.as_str()]).collect();
        let ip_in = |args: &[&str]| ip(&[ns.as_slice(), args].concat());
        for a in &addrs {
            ip_in(&["addr", "replace", a, "dev", tun.name()])?;
        }
        ip_in(&["link", "set", tun.name(), "up"])?;
        let netns = p.netns.as_deref().unwrap_or("-");
        info!(tap = %tun.name(), vrf = %p.vrf, %netns, addresses = %addrs.join(","), "host punt TUN up");
        if let (Some(l), Some(a)) = (listener, p.fpm) {
            info!(%a, %netns, vrf = %p.vrf, "FPM server listening for the VRF's zebra");
            sources.push(fpm::Source {
                listener: l,
                label: format!("{a} in netns {netns}"),
                settings: fpm::FpmSettings::from_config(&cfg.routing),
                vrf: Some(p.vrf.clone()),
            });
        }
        out.push((p.vrf.clone(), Box::new(Tun(tun)) as Box<dyn HostIf>));
    }
    Ok((out, sources))
}

/// Where `ip netns` keeps its named namespaces.
const NETNS_DIR: &str = "/var/run/netns";

/// Runs `f` on a thread of its own inside namespace `ns`.
fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> Result<T, String> + Send) -> Result<T, String> {
    let path = Path::new(NETNS_DIR).join(ns);
    std::thread::scope(|s| {
        s.spawn(|| {
            vecgate_io::netdev::enter_netns(&path).map_err(|e| format!("netns {ns}: {e}"))?;
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(format!("netns {ns}: thread panicked")))
    })
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
