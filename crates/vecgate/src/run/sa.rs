//! The SA state (sequence-number ceilings, replay windows) and its ticker
//! thread.

use anyhow::{anyhow, Context, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use vecgate_config::Config;

/// The SA state and the thread that keeps its durable ceilings ahead of
/// use.
pub struct SaStateThread {
    pub state: Arc<vecgate_ipsec::SaState>,
    stop: Arc<AtomicBool>,
    ticker: std::thread::JoinHandle<()>,
}

impl SaStateThread {
    /// Once nothing sends or accepts any more: the exact positions replace
    /// the durable ceilings, so a clean restart skips and drops nothing.
    pub fn shut_down(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.ticker.join();
        self.state.shutdown();
    }
}

/// The SA registry (static SAs loaded, resumed from the state directory)
/// and the thread that keeps the durable ceilings ahead of use; with a
/// state sync, each ceiling is told to it (`sync`) before it is used.
pub fn start(
    cfg: &Config,
    sync: Option<crossbeam_channel::Sender<vecgate_ha::syncer::Message>>,
) -> Result<(Option<Arc<vecgate_ipsec::EspRegistry>>, SaStateThread)> {
    use vecgate_ha::syncer::Message;
    let hook = sync.map(|tx| -> vecgate_ipsec::sastate::ReserveHook {
        // A full queue loses this word: the next interval's snapshot and
        // the standby's margin cover it.
        Box::new(move |snap| {
            let _ = tx.try_send(Message::Reserved(snap.clone()));
        })
    });
    let state =
        Arc::new(vecgate_ipsec::SaState::for_config(cfg, hook).map_err(|e| anyhow!("IPsec: {e}"))?);
    let esp = Some(
        vecgate_ipsec::static_sas::load(cfg, &*state)
            .map_err(|e| anyhow!("IPsec: {e}"))?
            .unwrap_or_default(),
    );
    // The first blocks are durable before any worker runs.
    let _ = state.tick(std::time::Instant::now());
    let stop = Arc::new(AtomicBool::new(false));
    let (st, halt) = (state.clone(), stop.clone());
    let ticker = std::thread::Builder::new()
        .name("vg-sastate".into())
        .spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                // A failed write is logged by the state and publishes
                // nothing: the SA waits at its durable ceiling.
                let _ = st.tick(std::time::Instant::now());
                std::thread::sleep(vecgate_ipsec::sastate::TICK);
            }
        })
        .context("spawning the state ticker")?;
    Ok((
        esp,
        SaStateThread {
            state,
            stop,
            ticker,
        },
    ))
}
