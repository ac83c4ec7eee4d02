//! `vecgate perf`: NTttcp-style traffic measurement.
//!
//! `vecgate perf receive` waits for one sender; `vecgate perf send HOST`
//! connects, agrees on the test over a control connection (see [`control`]),
//! sends for `--warmup + --duration + --cooldown` seconds, and both sides
//! print a report over the same measured window (the sender announces the
//! window edges). Modes: TCP bulk (default), `--udp`, `--rr`
//! (request/response latency).
//!
//! Progress (elapsed, Gbit/s each second) goes to stderr when it is a
//! terminal, unless `--json` or `--quiet`; `VECGATE_PERF_PROGRESS=1` forces
//! it for pipes. On failure nothing is printed on stdout and the exit status
//! is non-zero.
//!
//! # JSON report (`--json`, schema 1)
//! Window figures cover only the measured window; `total_*` cover the whole
//! run (warmup and cooldown included), which is what the two sides can
//! compare exactly (TCP: sender `total_bytes` == receiver `total_bytes`).
//! - `schema` (1), `role` (`sender`|`receiver`), `mode` (`tcp`|`udp`|`rr`),
//!   `local`, `peer` (addresses), `threads`, `connections`, `io_size` (bytes)
//! - `duration_s`: measured window length; `bytes`: payload bytes in it
//!   (rr: request + response bytes)
//! - `window_start_monotonic_ns`, `window_end_monotonic_ns`: the window's
//!   edges on the host's CLOCK_MONOTONIC, so that an observer outside the
//!   process (interface counters sampled on the same clock) can check
//!   `bytes` over exactly this window
//! - `throughput_gbps` (10^9 bit/s), `throughput_mbyte_s` (10^6 B/s)
//! - `total_bytes`, `peer_total_bytes` (the other side's whole-run count)
//! - UDP only, else null: `datagrams` (window), `packets_per_s`,
//!   `total_datagrams`, `peer_total_datagrams`, `loss_pct` (whole run,
//!   sent vs received)
//! - `ncpus`; `cpu_pct_system`: all CPUs busy, normalised 0–100 (from
//!   /proc/stat); `cpu_pct_system_sum`: the same as a per-core sum
//!   (0–100 × ncpus); `cpu_pct_process`: this process, per-core sum
//! - `cycles_method`: `perf_event` (hardware counters) or `cputime_x_tsc`;
//!   `tsc_hz`; `cycles_fallback_reason` (why not `perf_event`, else null);
//!   `cycles_system` (all CPUs: the machine's cost, as NTttcp),
//!   `cycles_process`; `cycles_per_byte_system`, `cycles_per_byte_process`
//!   (null when no bytes moved)
//! - `tcp_retrans`: retransmitted segments in the window from the sender's
//!   own sockets (TCP_INFO `tcpi_total_retrans`); null on the receiver/UDP
//! - `errors`, `first_error`: I/O errors of the workers
//! - `rr` (null unless rr): `transactions`, `transactions_per_s`,
//!   `latency_us` {`min`,`mean`,`p50`,`p90`,`p99`,`p99_9`,`max`} (sender
//!   only), `cycles_per_transaction_system`
pub mod cli;
pub mod control;
pub mod cpu;
pub mod crypto;
pub mod cycles;
pub mod os;
pub mod report;
pub mod rr;
pub mod shared;
pub mod tcp;
pub mod udp;
pub mod units;
