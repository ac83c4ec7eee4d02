//! `vecgate perf receive`: waits for a sender, counts what arrives in the
//! window and reports it.

use super::*;

/// Accepts one connection before `deadline` (polling a non-blocking
/// listener; this is the control path, not the data path).
fn accept_until(
    l: &TcpListener,
    deadline: Instant,
) -> std::io::Result<Option<(TcpStream, SocketAddr)>> {
    l.set_nonblocking(true)?;
    loop {
        match l.accept() {
            Ok((s, p)) => {
                s.set_nonblocking(false)?;
                return Ok(Some((s, p)));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

pub(super) fn receive(a: ReceiveArgs) -> Result<(), String> {
    let timeout = secs(a.common.timeout, "--timeout")?;
    let cpus = affinity(&a.common)?;
    let bind = SocketAddr::new(a.bind, a.common.port);
    let listener = TcpListener::bind(bind).map_err(|e| format!("cannot listen on {bind}: {e}"))?;
    bufs(&listener, &a.common)?;
    // On stderr even with --json (stdout stays pure JSON): scripts wait for it.
    if !a.common.quiet {
        eprintln!("vecgate perf: waiting for a sender on {bind}");
    }
    let (ctl_stream, peer) = accept_until(&listener, Instant::now() + timeout)
        .map_err(|e| format!("accept on {bind}: {e}"))?
        .ok_or_else(|| {
            format!(
                "no sender connected to {bind} within {} s (--timeout)",
                timeout.as_secs_f64()
            )
        })?;
    let local = ctl_stream
        .local_addr()
        .map(|l| l.to_string())
        .unwrap_or_default();
    let mut ctl = Control::new(ctl_stream).map_err(|e| e.to_string())?;
    let cfg = match ctl.recv(Some(timeout)).map_err(|e| e.to_string())? {
        Ctl::Hello { version, config } if version == control::VERSION => config,
        Ctl::Hello { version, .. } => {
            let reason = format!(
                "protocol version {version}, this receiver speaks {}",
                control::VERSION
            );
            let _ = ctl.send(&Ctl::Refused {
                reason: reason.clone(),
            });
            return Err(reason);
        }
        other => return Err(format!("unexpected control message {other:?}")),
    };
    if let Err(reason) = cfg.validate() {
        let _ = ctl.send(&Ctl::Refused {
            reason: reason.clone(),
        });
        return Err(format!("refused the sender's test: {reason}"));
    }
    let mode = cfg.mode;
    let nconn = (cfg.threads * cfg.connections) as usize;
    let nworkers = if mode == Mode::Udp {
        cfg.threads as usize
    } else {
        nconn
    };
    let shared = Arc::new(Shared::new(nworkers));
    let io = cfg.io_size as usize;

    let mut udp_socks = Vec::new();
    let mut udp_port = 0u16;
    if mode == Mode::Udp {
        udp_port = a.common.port.checked_add(1).ok_or("UDP port overflows")?;
        for t in 0..cfg.threads as u16 {
            let p = udp_port.checked_add(t).ok_or("UDP port overflows")?;
            let s = UdpSocket::bind(SocketAddr::new(a.bind, p))
                .map_err(|e| format!("cannot bind UDP port {p}: {e}"))?;
            bufs(&s, &a.common)?;
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .map_err(|e| e.to_string())?;
            udp_socks.push(s);
        }
    }
    ctl.send(&Ctl::Ready { udp_port })
        .map_err(|e| e.to_string())?;

    let mut data = Vec::with_capacity(nconn);
    if mode != Mode::Udp {
        let deadline = Instant::now() + timeout;
        while data.len() < nconn {
            let Some((s, _)) =
                accept_until(&listener, deadline).map_err(|e| format!("accept: {e}"))?
            else {
                let reason = format!("only {} of {nconn} data connections arrived", data.len());
                let _ = ctl.send(&Ctl::Refused {
                    reason: reason.clone(),
                });
                return Err(reason);
            };
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut h = [0u8; 8];
            if (&s).read_exact(&mut h).is_err() || !control::check_data_hello(&h, cfg.token) {
                continue; // not ours: dropped, not measured
            }
            let io_err = |e: std::io::Error| e.to_string();
            s.set_read_timeout(Some(Duration::from_secs(1)))
                .map_err(io_err)?;
            s.set_nodelay(mode == Mode::Rr).map_err(io_err)?;
            data.push(s);
        }
    }

    let mut run = Run::new(shared.clone(), mode, &a.common);
    for (i, s) in data.into_iter().enumerate() {
        let sh = shared.clone();
        if mode == Mode::Rr {
            run.spawn(i, &cpus, move || crate::rr::receive(s, io, sh, i))?;
        } else {
            run.spawn(i, &cpus, move || crate::tcp::receive(s, io, sh, i))?;
        }
    }
    for (i, s) in udp_socks.into_iter().enumerate() {
        let sh = shared.clone();
        let from = peer.ip();
        run.spawn(i, &cpus, move || crate::udp::receive(s, io, from, sh, i))?;
    }
    run.start_progress(&a.common);
    let phases = receiver_phases(&mut ctl, &run, &cfg, timeout);
    let (begin, end, peer_totals) = match phases {
        Ok(v) => v,
        Err(e) => {
            run.finish();
            return Err(e);
        }
    };
    let (hist, first_error) = run.finish();
    let own = run_totals(shared.totals());
    ctl.send(&Ctl::Final { totals: own })
        .map_err(|e| e.to_string())?;
    let w = shared::window(&begin, &end, &run.cycles, cycles::ncpus());
    let r = build_report(
        &run,
        &w,
        ReportInput {
            role: Role::Receiver,
            cfg: &cfg,
            local,
            peer: peer.to_string(),
            own,
            peer_totals: Some(peer_totals),
            retrans: None,
            hist,
            first_error,
        },
    );
    print_report(&r, a.common.json);
    Ok(())
}

/// Follows the sender's edges; after `stop`, waits for the data to drain.
fn receiver_phases(
    ctl: &mut Control,
    run: &Run,
    cfg: &TestConfig,
    timeout: Duration,
) -> Result<(Snapshot, Snapshot, RunTotals), String> {
    let longest = Duration::from_millis(cfg.warmup_ms.max(cfg.duration_ms).max(cfg.cooldown_ms));
    let wait = timeout + longest;
    ctl.send(&Ctl::Go).map_err(|e| e.to_string())?;
    let mut begin = None;
    let mut end = None;
    let peer = loop {
        match ctl.recv(Some(wait)) {
            Ok(Ctl::Begin) => {
                begin = Some(Snapshot::take(&run.shared, &run.cycles));
                run.shared.set_phase(MEASURE);
            }
            Ok(Ctl::End) => {
                run.shared.set_phase(COOLDOWN);
                end = Some(Snapshot::take(&run.shared, &run.cycles));
            }
            Ok(Ctl::Stop { totals }) => break totals,
            Ok(other) => return Err(format!("unexpected control message {other:?}")),
            Err(e) => return Err(format!("lost the sender: {e}")),
        }
    };
    drain(run, cfg, &peer);
    let end = end.unwrap_or_else(|| Snapshot::take(&run.shared, &run.cycles));
    let begin = begin.unwrap_or_else(|| end.clone());
    Ok((begin, end, peer))
}

/// TCP: the sender half-closed, so workers end at EOF (bounded wait).
/// UDP: stop when everything sent arrived or nothing arrived for 300 ms.
fn drain(run: &Run, cfg: &TestConfig, peer: &RunTotals) {
    let start = Instant::now();
    let mut last = (Instant::now(), run.shared.totals().datagrams);
    while start.elapsed() < Duration::from_secs(10) {
        if cfg.mode == Mode::Udp {
            let got = run.shared.totals().datagrams;
            if got >= peer.datagrams {
                break;
            }
            if got != last.1 {
                last = (Instant::now(), got);
            } else if last.0.elapsed() > Duration::from_millis(300) {
                break;
            }
        } else if run.workers.iter().all(|h| h.is_finished()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
