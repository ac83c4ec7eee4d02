//! `vecgate-floor`: the I/O floor the benchmarks measure vecgate against
//! (see `vecgate_io::floor`), and the machine's `memcpy` bandwidth.
//!
//! ```text
//! vecgate-floor forward --a IF --b IF --a-peer MAC --b-peer MAC
//!                       [--gre LOCAL,REMOTE] [--workers N] [--driver af_packet|af_xdp] [--no-vnet]
//! vecgate-floor generate --if IF --dst-mac MAC --src IP --dst IP
//!                        [--size BYTES] [--seconds S] [--count N] [--driver af_xdp|af_packet]
//! vecgate-floor memcpy
//! ```
//!
//! `forward` prints `ready` on stderr once its sockets are open and runs
//! until killed (the ingress guards go with the process).

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use vecgate_io::floor::{self, FloorConfig, GenConfig, Mode};

const USAGE: &str = "usage: vecgate-floor forward --a IF --b IF --a-peer MAC --b-peer MAC \
[--gre LOCAL,REMOTE] [--workers N] [--driver af_packet|af_xdp] [--no-vnet]\n       \
vecgate-floor generate --if IF --dst-mac MAC --src IP --dst IP [--size BYTES] [--seconds S] \
[--count N] [--driver af_xdp|af_packet]\n       vecgate-floor memcpy";

fn mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let mut m = [0u8; 6];
    if parts.len() != 6 {
        return Err(format!("bad MAC address '{s}'"));
    }
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| format!("bad MAC address '{s}'"))?;
    }
    Ok(m)
}

fn parse_forward(args: &[String]) -> Result<FloorConfig, String> {
    let mut cfg = FloorConfig {
        a: String::new(),
        b: String::new(),
        a_peer: [0; 6],
        b_peer: [0; 6],
        mode: Mode::Route,
        workers: 1,
        vnet_hdr: true,
        driver: "af_packet".into(),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--no-vnet" {
            cfg.vnet_hdr = false;
            continue;
        }
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--a" => cfg.a = v.clone(),
            "--b" => cfg.b = v.clone(),
            "--a-peer" => cfg.a_peer = mac(v)?,
            "--b-peer" => cfg.b_peer = mac(v)?,
            "--driver" => cfg.driver = v.clone(),
            "--workers" => cfg.workers = v.parse().map_err(|_| format!("bad --workers '{v}'"))?,
            "--gre" => {
                let (l, r) = v.split_once(',').ok_or("--gre LOCAL,REMOTE")?;
                let ip = |s: &str| s.parse::<Ipv4Addr>().map_err(|_| format!("bad IPv4 '{s}'"));
                cfg.mode = Mode::Gre {
                    local: ip(l)?,
                    remote: ip(r)?,
                };
            }
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    if cfg.a.is_empty() || cfg.b.is_empty() {
        return Err("--a and --b are required".into());
    }
    Ok(cfg)
}

fn parse_generate(args: &[String]) -> Result<GenConfig, String> {
    let mut cfg = GenConfig {
        ifname: String::new(),
        driver: "af_xdp".into(),
        dst_mac: [0; 6],
        src: Ipv4Addr::UNSPECIFIED,
        dst: Ipv4Addr::UNSPECIFIED,
        frame_len: 60,
        seconds: 3.0,
        count: None,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let ip = |s: &str| s.parse::<Ipv4Addr>().map_err(|_| format!("bad IPv4 '{s}'"));
        match flag.as_str() {
            "--if" => cfg.ifname = v.clone(),
            "--driver" => cfg.driver = v.clone(),
            "--dst-mac" => cfg.dst_mac = mac(v)?,
            "--src" => cfg.src = ip(v)?,
            "--dst" => cfg.dst = ip(v)?,
            "--size" => cfg.frame_len = v.parse().map_err(|_| format!("bad --size '{v}'"))?,
            "--seconds" => cfg.seconds = v.parse().map_err(|_| format!("bad --seconds '{v}'"))?,
            "--count" => cfg.count = Some(v.parse().map_err(|_| format!("bad --count '{v}'"))?),
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    if cfg.ifname.is_empty() {
        return Err("--if is required".into());
    }
    Ok(cfg)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("memcpy") => {
            let (cold, hot) = floor::memcpy_bandwidth();
            println!(
                "{{\"cold_gbs\": {cold:.2}, \"hot_gbs\": {hot:.2}, \"cold_bytes\": {}, \"hot_bytes\": {}}}",
                256u64 << 20,
                64u64 << 10
            );
            ExitCode::SUCCESS
        }
        Some("generate") => {
            let cfg = match parse_generate(&args[1..]) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("vecgate-floor: {e}\n{USAGE}");
                    return ExitCode::from(2);
                }
            };
            match floor::generate(&cfg) {
                Ok((sent, secs)) => {
                    println!(
                        "{{\"sent\": {sent}, \"seconds\": {secs:.3}, \"pps\": {:.0}}}",
                        sent as f64 / secs.max(1e-9)
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("vecgate-floor: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Some("forward") => {
            let cfg = match parse_forward(&args[1..]) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("vecgate-floor: {e}\n{USAGE}");
                    return ExitCode::from(2);
                }
            };
            let stop = Arc::new(AtomicBool::new(false));
            match floor::run(&cfg, stop, || eprintln!("vecgate-floor: ready")) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("vecgate-floor: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
