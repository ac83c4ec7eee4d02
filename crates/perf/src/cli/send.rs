//! `vecgate perf send`: connects, drives warmup → window → cooldown and
//! reports what both ends counted.

use super::*;

fn connect_error(addr: SocketAddr, e: &std::io::Error) -> String {
    let why = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => "timed out".to_string(),
        _ => e.to_string(),
    };
    format!("cannot connect to {addr}: {why} — is `vecgate perf receive` running there?")
}

pub(super) fn send(a: SendArgs) -> Result<(), String> {
    let mode = if a.rr {
        Mode::Rr
    } else if a.udp {
        Mode::Udp
    } else {
        Mode::Tcp
    };
    let io_size = a.io_size.unwrap_or(match mode {
        Mode::Tcp => 64 * 1024,
        Mode::Udp => 1472,
        Mode::Rr => 1,
    });
    let timeout = secs(a.common.timeout, "--timeout")?;
    let cfg = TestConfig {
        mode,
        threads: a.threads,
        connections: a.connections,
        io_size: u32::try_from(io_size).map_err(|_| "--io-size is too large".to_string())?,
        duration_ms: ms(secs(a.duration, "--duration")?),
        warmup_ms: ms(secs(a.warmup, "--warmup")?),
        cooldown_ms: ms(secs(a.cooldown, "--cooldown")?),
        token: session_token(),
    };
    cfg.validate()?;
    let cpus = affinity(&a.common)?;
    let addr = (a.host.as_str(), a.common.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", a.host))?
        .next()
        .ok_or_else(|| format!("cannot resolve {}: no address", a.host))?;
    let connect_timeout = timeout
        .min(Duration::from_secs(10))
        .max(Duration::from_millis(100));
    let ctl_stream =
        TcpStream::connect_timeout(&addr, connect_timeout).map_err(|e| connect_error(addr, &e))?;
    let local = ctl_stream
        .local_addr()
        .map(|l| l.to_string())
        .unwrap_or_default();
    let mut ctl = Control::new(ctl_stream).map_err(|e| e.to_string())?;
    ctl.send(&Ctl::Hello {
        version: control::VERSION,
        config: cfg.clone(),
    })
    .map_err(|e| e.to_string())?;
    let udp_port = match ctl.recv(Some(timeout)).map_err(|e| e.to_string())? {
        Ctl::Ready { udp_port } => udp_port,
        Ctl::Refused { reason } => return Err(format!("the receiver refused the test: {reason}")),
        other => return Err(format!("unexpected control message {other:?}")),
    };

    let nworkers = cfg.threads as usize;
    let shared = Arc::new(Shared::new(nworkers));
    let per = cfg.connections as usize;
    let mut groups: Vec<Vec<TcpStream>> = Vec::with_capacity(nworkers);
    let mut ugroups: Vec<Vec<UdpSocket>> = Vec::with_capacity(nworkers);
    for t in 0..nworkers {
        if mode == Mode::Udp {
            let port = udp_port
                .checked_add(t as u16)
                .ok_or("UDP port range overflows")?;
            let target = SocketAddr::new(addr.ip(), port);
            let any = SocketAddr::new(
                if addr.is_ipv4() {
                    Ipv4Addr::UNSPECIFIED.into()
                } else {
                    Ipv6Addr::UNSPECIFIED.into()
                },
                0,
            );
            let mut g = Vec::with_capacity(per);
            for _ in 0..per {
                let s = UdpSocket::bind(any).map_err(|e| format!("UDP socket: {e}"))?;
                s.connect(target)
                    .map_err(|e| format!("UDP connect {target}: {e}"))?;
                bufs(&s, &a.common)?;
                g.push(s);
            }
            ugroups.push(g);
        } else {
            let mut g = Vec::with_capacity(per);
            for _ in 0..per {
                let s = TcpStream::connect_timeout(&addr, connect_timeout)
                    .map_err(|e| connect_error(addr, &e))?;
                bufs(&s, &a.common)?;
                let io = |e: std::io::Error| format!("data connection: {e}");
                s.set_nodelay(mode == Mode::Rr).map_err(io)?;
                std::io::Write::write_all(&mut &s, &control::data_hello(cfg.token)).map_err(io)?;
                if mode == Mode::Tcp {
                    // tcp::send multiplexes its connections with poll(2).
                    s.set_nonblocking(true).map_err(io)?;
                } else {
                    s.set_read_timeout(Some(Duration::from_secs(1)))
                        .map_err(io)?;
                }
                g.push(s);
            }
            groups.push(g);
        }
    }
    match ctl.recv(Some(timeout)).map_err(|e| e.to_string())? {
        Ctl::Go => {}
        Ctl::Refused { reason } => return Err(format!("the receiver gave up: {reason}")),
        other => return Err(format!("unexpected control message {other:?}")),
    }

    let mut run = Run::new(shared.clone(), mode, &a.common);
    let io = cfg.io_size as usize;
    let rate = a.udp_rate.map(|r| r / nworkers as f64);
    for t in 0..nworkers {
        let sh = shared.clone();
        match mode {
            Mode::Udp => {
                let g = std::mem::take(&mut ugroups[t]);
                run.spawn(t, &cpus, move || crate::udp::send(g, io, rate, sh, t))?;
            }
            Mode::Tcp => {
                let g = std::mem::take(&mut groups[t]);
                run.spawn(t, &cpus, move || crate::tcp::send(g, io, sh, t))?;
            }
            Mode::Rr => {
                let g = std::mem::take(&mut groups[t]);
                run.spawn(t, &cpus, move || crate::rr::send(g, io, sh, t))?;
            }
        }
    }
    run.start_progress(&a.common);

    let result = sender_phases(&mut ctl, &run, &cfg);
    let (begin, end) = match result {
        Ok(v) => v,
        Err(e) => {
            run.finish();
            return Err(e);
        }
    };
    let (hist, first_error) = run.finish();
    let own = run_totals(shared.totals());
    let peer_totals = ctl
        .send(&Ctl::Stop { totals: own })
        .and_then(|()| ctl.recv(Some(timeout.max(Duration::from_secs(15)))));
    let peer_totals = match peer_totals {
        Ok(Ctl::Final { totals }) => Some(totals),
        Ok(other) => return Err(format!("unexpected control message {other:?}")),
        Err(e) => return Err(format!("no final counts from the receiver: {e}")),
    };
    let w = shared::window(&begin, &end, &run.cycles, cycles::ncpus());
    let r = build_report(
        &run,
        &w,
        ReportInput {
            role: Role::Sender,
            cfg: &cfg,
            local,
            peer: addr.to_string(),
            own,
            peer_totals,
            retrans: (mode != Mode::Udp).then(|| shared.retrans()),
            hist,
            first_error,
        },
    );
    print_report(&r, a.common.json);
    Ok(())
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn session_token() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    nanos ^ std::process::id().rotate_left(16)
}

/// Drives warmup → window → cooldown, telling the receiver each edge.
fn sender_phases(
    ctl: &mut Control,
    run: &Run,
    cfg: &TestConfig,
) -> Result<(Snapshot, Snapshot), String> {
    let e = |e: CtlError| format!("lost the receiver: {e}");
    std::thread::sleep(Duration::from_millis(cfg.warmup_ms));
    let begin = Snapshot::take(&run.shared, &run.cycles);
    run.shared.set_phase(MEASURE);
    ctl.send(&Ctl::Begin).map_err(e)?;
    std::thread::sleep(Duration::from_millis(cfg.duration_ms));
    run.shared.set_phase(COOLDOWN);
    // Snapshot before telling the receiver, as at `Begin`: the receiver
    // snapshots the edge when `End` arrives, so its edge is never earlier
    // than ours (sending first let the receiver's snapshot win the race).
    let end = Snapshot::take(&run.shared, &run.cycles);
    ctl.send(&Ctl::End).map_err(e)?;
    std::thread::sleep(Duration::from_millis(cfg.cooldown_ms));
    Ok((begin, end))
}
