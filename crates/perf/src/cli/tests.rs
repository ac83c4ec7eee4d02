use super::*;
use clap::Parser;

#[derive(Parser)]
struct T {
    #[command(subcommand)]
    cmd: Top,
}
#[derive(clap::Subcommand)]
enum Top {
    Perf(PerfArgs),
}

fn parse(v: &[&str]) -> Result<PerfCmd, clap::Error> {
    let mut a = vec!["x", "perf"];
    a.extend_from_slice(v);
    T::try_parse_from(a).map(|t| match t.cmd {
        Top::Perf(p) => p.cmd,
    })
}

#[test]
fn send_args() {
    let PerfCmd::Send(s) = parse(&[
        "send",
        "10.0.0.2",
        "-p",
        "6000",
        "-t",
        "2",
        "-c",
        "3",
        "-l",
        "256K",
        "--udp",
        "--udp-rate",
        "500M",
    ])
    .unwrap() else {
        panic!("not send")
    };
    assert_eq!(s.host, "10.0.0.2");
    assert_eq!(s.common.port, 6000);
    assert_eq!((s.threads, s.connections), (2, 3));
    assert_eq!(s.io_size, Some(256 * 1024));
    assert!(s.udp);
    assert_eq!(s.udp_rate, Some(5e8));
    assert!(parse(&["send", "h", "--udp", "--rr"]).is_err());
    assert!(
        parse(&["send", "h", "--udp-rate", "1G"]).is_err(),
        "rate needs --udp"
    );
    assert!(parse(&["send", "h", "-l", "12X"]).is_err());
}

#[test]
fn ntttcp_aliases() {
    assert!(
        matches!(parse(&["-r", "-b", "127.0.0.1"]).unwrap(), PerfCmd::Receive(r) if r.bind.is_loopback())
    );
    assert!(
        matches!(parse(&["-s", "host", "--rr"]).unwrap(), PerfCmd::Send(s) if s.rr && s.host == "host")
    );
}

#[test]
fn rates() {
    assert_eq!(rate_arg("1G"), Ok(1e9));
    assert_eq!(rate_arg("2.5m"), Ok(2.5e6));
    assert_eq!(rate_arg("1000"), Ok(1000.0));
    assert!(rate_arg("0").is_err());
    assert!(rate_arg("1X").is_err());
    assert!(rate_arg("").is_err());
}
