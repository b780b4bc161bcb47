//! The lanes daemon's loop: the I/O shell around [`crate::tracker::Tracker`].
//!
//! What it is: it opens the path-manager event listener and command socket
//! and a sock_diag socket in the calling thread's network namespace, then
//! repeats: wait for events (at most until the next reading), feed them to
//! the tracker, read sock_diag every `probe.sample_interval`, start the
//! probes the tracker asks for, run the path-manager commands it returns
//! and print its records.
//!
//! With BPF signals (`[signals] source = "bpf"`, or `"auto"` where the
//! program loads and the policy fits it; see [`crate::bpf`]) it waits on
//! the program's ring buffer, reads the path-manager events queued
//! meanwhile in batches ([`EVENT_BATCH`]; at once while a switch waits on
//! an LL subflow's event), hands each signal to [`Tracker::on_signal`] and
//! runs the switch at once; backup LL subflows open only at the program's
//! prepare signal (`signals.backups`), or active with a decision that
//! comes first; sock_diag
//! is then read only at start (adoption) and, every `probe.sample_interval`,
//! only while an adopted connection has not switched (no program saw it
//! open, so only readings can judge it). Handshake probes still time idle
//! LL lanes for link cost; their RTTs go to the program's lane samples.
//! `"auto"` that cannot use BPF says why in a warning record.
//!
//! What it is not: it never closes, resets or reconfigures a connection on
//! exit. Stopping the daemon (signal, `stop` flag, `--duration`) leaves
//! every connection and subflow as it is: a switched connection stays on LL,
//! an unswitched one stays on SL with its backup LL subflows.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tcpaccel_core::Instant;
use tcpaccel_sys::diag::{self, DiagSocketConn, DumpRequest};
use tcpaccel_sys::mptcp::{EventListener, Incoming, PmClient, PmError};

use crate::bpf::BpfSignals;
use crate::config::{Config, SignalSource};
use crate::env::{self, EnvError};
use crate::metrics::{LaneBytes, LanesMetrics};
use crate::probe::Prober;
use crate::record::{Ready, Record, Summary, Warning};
use crate::tracker::{Action, Existing, ExistingSubflow, PmCommand, Reading, Tracker, RETRY_DELAY};
use std::os::fd::AsFd;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON Lines, one [`Record`] per line.
    Json,
    /// One line of text per record.
    Text,
}

/// How to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Name of the namespace the caller entered (for messages only).
    pub netns: Option<String>,
    pub format: Format,
    /// Stop by itself after this long.
    pub duration: Option<Duration>,
    /// Read the configuration again whenever this flag is raised (SIGHUP).
    pub reload: Option<Reload>,
    /// Counters for the `--metrics` endpoint.
    pub metrics: Option<Arc<LanesMetrics>>,
}

/// Where a reload comes from: the flag a SIGHUP handler raises and the
/// file to read again. See [`Tracker::reload`] for what may change.
#[derive(Debug, Clone)]
pub struct Reload {
    pub requested: Arc<AtomicBool>,
    pub path: PathBuf,
}

/// Why the daemon could not start or stopped early.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error("opening {what}: {source}")]
    Open { what: &'static str, source: PmError },
    #[error("receiving MPTCP path-manager events: {0}")]
    Events(PmError),
    #[error("opening sock_diag: {0}")]
    Diag(tcpaccel_sys::Error),
    #[error("writing output: {0}")]
    Output(std::io::Error),
    #[error("starting the probe thread: {0}")]
    Spawn(std::io::Error),
    #[error("BPF lane signals (signals.source = \"bpf\"): {0}")]
    Bpf(crate::bpf::BpfError),
    #[error("reading the BPF ring buffer: {0}")]
    Ring(tcpaccel_sys::Error),
}

impl DaemonError {
    /// True when the kernel lacks something (exit code 4).
    pub fn is_missing_feature(&self) -> bool {
        match self {
            DaemonError::Env(e) => e.is_missing_feature(),
            DaemonError::Open { source, .. } => source.is_unsupported(),
            DaemonError::Bpf(e) => e.is_missing_feature(),
            _ => false,
        }
    }
    /// True when the daemon lacks a privilege it needs (exit code 3).
    pub fn is_missing_privilege(&self) -> bool {
        matches!(self, DaemonError::Bpf(e) if e.is_missing_privilege())
    }
    /// True when the configuration does not fit the namespace (exit code 2).
    pub fn is_config(&self) -> bool {
        matches!(self, DaemonError::Env(e) if !e.is_missing_feature())
            || matches!(self, DaemonError::Bpf(e) if e.is_config())
    }
}

/// The record lines, buffered: written out (one write) whenever the loop
/// is about to wait, not one write per line.
struct Out<'a> {
    w: std::io::BufWriter<&'a mut dyn Write>,
    format: Format,
}

impl Out<'_> {
    fn emit(&mut self, r: &Record) -> Result<(), DaemonError> {
        match self.format {
            Format::Json => {
                serde_json::to_writer(&mut self.w, r).map_err(|e| DaemonError::Output(e.into()))?
            }
            Format::Text => self.w.write_all(r.to_text().as_bytes()).map_err(DaemonError::Output)?,
        }
        self.w.write_all(b"\n").map_err(DaemonError::Output)
    }

    fn flush(&mut self) -> Result<(), DaemonError> {
        self.w.flush().map_err(DaemonError::Output)
    }
}

/// Checks the namespace (see [`crate::env`]) and runs until `stop` is set
/// or `opts.duration` passes. Must be called on a thread that is already in
/// the daemon's network namespace.
pub fn run(
    cfg: Config,
    opts: &Options,
    out: &mut dyn Write,
    stop: &AtomicBool,
) -> Result<Summary, DaemonError> {
    let cpu0 = crate::probe::thread_cpu_s();
    let ns_label = opts.netns.clone().map(|n| format!("namespace {n:?}")).unwrap_or("this namespace".into());
    env::check(&cfg, &ns_label)?;
    let mut events = EventListener::open()
        .map_err(|source| DaemonError::Open { what: "the mptcp_pm events group", source })?;
    let mut pm =
        PmClient::open().map_err(|source| DaemonError::Open { what: "the mptcp_pm family", source })?;
    let mut diag_conn = DiagSocketConn::open().map_err(DaemonError::Diag)?;
    let prober = Prober::spawn(cfg.probe.port, cfg.probe.timeout).map_err(DaemonError::Spawn)?;
    let families = {
        let mut f = Vec::new();
        if cfg.local_addresses().any(|a| a.is_ipv4()) {
            f.push(diag::Family::V4);
        }
        if cfg.local_addresses().any(|a| a.is_ipv6()) {
            f.push(diag::Family::V6);
        }
        f
    };
    let dump = DumpRequest { families, ..DumpRequest::default() };
    let locals: Vec<IpAddr> = cfg.local_addresses().collect();
    let mut sample_every = cfg.probe.sample_interval;
    // Per-ACK signals from the kernel where possible (see crate::bpf).
    let mut fallback_note = None;
    let mut bpf = match cfg.signals.source {
        SignalSource::Diag => None,
        SignalSource::Bpf => Some(BpfSignals::start(&cfg, &cfg.signals.cgroup).map_err(DaemonError::Bpf)?),
        SignalSource::Auto => match BpfSignals::start(&cfg, &cfg.signals.cgroup) {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::warn!("BPF lane signals unavailable, reading sock_diag instead: {e}");
                fallback_note = Some(format!("BPF lane signals unavailable, reading sock_diag instead: {e}"));
                None
            }
        },
    };
    let mut lane_bytes = LaneBytes::default();

    // Connections open before this start (e.g. across a restart) are taken
    // over; the kernel reports no event for them. Dumped before `ready`, so
    // a connection made after `ready` is never both adopted and created.
    let adopt_req = DumpRequest {
        states: diag::state::CONNECTED | diag::state::bit(diag::state::LISTEN),
        ext: diag::ext::INFO,
        families: dump.families.clone(),
        ..DumpRequest::default()
    };
    let before_start = diag_conn.dump(&adopt_req).map(|socks| existing_connections(&socks));
    let mut out = Out { w: std::io::BufWriter::with_capacity(64 * 1024, out), format: opts.format };
    let s = &cfg.switch;
    out.emit(&Record::Ready(Ready {
        netns: opts.netns.clone(),
        policy: s.policy.name().into(),
        t_deadline_ms: s.t_deadline.as_secs_f64() * 1e3,
        alpha: s.alpha,
        beta: s.beta,
        gamma: s.gamma,
        delta: s.delta,
        t0: s.t0,
        sl_lanes: cfg.sl_lanes.iter().map(|a| a.to_string()).collect(),
        ll_lanes: cfg.ll_lanes.iter().map(|a| a.to_string()).collect(),
        peers: cfg.peers.len(),
        signals: Some(if bpf.is_some() { "bpf" } else { "diag" }.into()),
    }))?;
    if let Some(note) = fallback_note {
        out.emit(&Record::Warning(Warning { t: 0.0, message: note }))?;
    }
    out.flush()?;
    tracing::info!("lanes daemon ready in {ns_label}");

    let clock = std::time::Instant::now();
    let now = || Instant::from_nanos(clock.elapsed().as_nanos().min(u64::MAX as u128) as u64);
    let mut tracker = Tracker::new(cfg.clone(), now());
    if bpf.is_some() {
        tracker.use_bpf_signals();
    }
    let mut summary = Summary {
        signals: if bpf.is_some() { "bpf" } else { "diag" },
        start_cpu_s: crate::probe::thread_cpu_s() - cpu0,
        ..Summary::default()
    };
    match before_start {
        Ok(existing) => {
            let t = now();
            let actions = tracker.adopt(t, &existing);
            summary.connections += tracker.managed_count() as u64;
            execute(actions, t, &mut tracker, &mut pm, &mut out, &mut summary)?;
        }
        Err(e) => {
            tracing::warn!("sock_diag dump for connections open before the start failed: {e}");
            out.emit(&Record::Warning(Warning {
                t: 0.0,
                message: format!("connections open before the start are not managed: sock_diag failed: {e}"),
            }))?;
        }
    }
    let mut next_sample = now() + sample_every;
    let mut last_flush = now();
    let mut sockets = Vec::new();
    let mut diag_failing = false;

    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let t = now();
        if opts.duration.is_some_and(|d| t.saturating_since(Instant::from_nanos(0)) >= d) {
            break;
        }
        if let Some(r) = opts.reload.as_ref().filter(|r| r.requested.swap(false, Ordering::Relaxed)) {
            let record = match Config::load(&r.path) {
                Ok(new) => tracker.reload(t, new),
                Err(e) => tracker.reload_refused(t, e.to_string()),
            };
            if let Record::Reload(rr) = &record {
                match &rr.error {
                    None => tracing::info!("reloaded {}", r.path.display()),
                    Some(e) => tracing::warn!("reload of {} refused: {e}", r.path.display()),
                }
                if let Some(m) = &opts.metrics {
                    m.reloaded(rr.ok);
                }
            }
            sample_every = tracker.config().probe.sample_interval;
            out.emit(&record)?;
        }
        // With BPF signals and no readings wanted, the timer only serves
        // probes and retries: no wake-ups while neither can be due.
        let idle = bpf.is_some() && !tracker.wants_readings() && !tracker.may_probe();
        let wait = if idle && !tracker.retry_pending() {
            Duration::from_millis(200)
        } else if idle {
            RETRY_DELAY
        } else {
            next_sample.saturating_since(t).min(Duration::from_millis(100))
        };
        // Records reach the output within FLUSH_EVERY (about one write per
        // FLUSH_EVERY while busy instead of one per wake-up), at once
        // before a long wait.
        if wait >= FLUSH_EVERY || t.saturating_since(last_flush) >= FLUSH_EVERY {
            out.flush()?;
            last_flush = t;
        }
        let items = match &bpf {
            // Woken by whichever comes first: a path-manager event or a
            // signal, when a switch waits for an LL subflow's event.
            Some(b) if tracker.switch_pending() => {
                match b.ring().wait_with(events.as_fd(), wait).map_err(DaemonError::Ring)? {
                    (_, true) => drain_events(&mut events)?,
                    _ => Vec::new(),
                }
            }
            // Otherwise no event is urgent: woken by a signal, or every
            // EVENT_BATCH to take the events queued meanwhile in one go
            // (most are short connections opening and closing).
            Some(b) => {
                b.ring().wait(wait.min(EVENT_BATCH)).map_err(DaemonError::Ring)?;
                drain_events(&mut events)?
            }
            None => events.recv(Some(wait)).map_err(DaemonError::Events)?,
        };
        for item in items {
            let t = now();
            match item {
                Incoming::Event(ev) => {
                    let was = ev.token.is_some_and(|tok| tracker.is_managed(tok));
                    let actions = tracker.on_event(t, &ev);
                    if !was && ev.token.is_some_and(|tok| tracker.is_managed(tok)) {
                        summary.connections += 1;
                    }
                    execute(actions, t, &mut tracker, &mut pm, &mut out, &mut summary)?;
                }
                Incoming::Malformed(e) => {
                    tracing::warn!("skipped a malformed mptcp_pm event: {e}");
                    out.emit(&Record::Warning(Warning {
                        t: secs(t),
                        message: format!("skipped a malformed event: {e}"),
                    }))?;
                }
                Incoming::Overrun => {
                    tracing::warn!("mptcp_pm events were lost (socket buffer overrun)");
                    out.emit(&Record::Warning(Warning {
                        t: secs(t),
                        message: "events were lost (netlink buffer overrun); some connections may be missed"
                            .into(),
                    }))?;
                }
            }
        }
        if let Some(b) = bpf.as_mut() {
            let (signals, bad) = b.drain();
            for sig in signals {
                let t = now();
                summary.bpf_signals += 1;
                let actions = tracker.on_signal(t, &sig);
                if actions.is_empty() {
                    summary.bpf_unmatched += 1;
                }
                execute(actions, t, &mut tracker, &mut pm, &mut out, &mut summary)?;
            }
            if bad > 0 {
                out.emit(&Record::Warning(Warning {
                    t: secs(now()),
                    message: format!("skipped {bad} undecodable BPF ring-buffer record(s)"),
                }))?;
            }
        }
        let t = now();
        let retries = tracker.retries_due(t);
        execute(retries, t, &mut tracker, &mut pm, &mut out, &mut summary)?;
        for (pair, rtt) in prober.results() {
            let t = now();
            if let Some(b) = &bpf {
                // The program keeps the costs: the probe is one more LL sample.
                if let (Some(lane), Some(rtt)) = (tracker.probe_done(pair), rtt.filter(|r| !r.is_zero())) {
                    if let Err(e) = b.lane_sample(lane, rtt) {
                        tracing::warn!("handing a probe sample to the BPF program: {e}");
                    }
                }
                continue;
            }
            let actions = tracker.on_probe(t, pair, rtt);
            execute(actions, t, &mut tracker, &mut pm, &mut out, &mut summary)?;
        }
        let t = now();
        if t >= next_sample && bpf.is_some() && !tracker.wants_readings() {
            // No readings: the program decides. Probes still time LL lanes
            // for link cost (an idle backup subflow carries no ACKs).
            next_sample = t + sample_every;
            for pair in tracker.probes_due(t) {
                prober.request(pair);
            }
        } else if t >= next_sample {
            next_sample = t + sample_every;
            match diag_conn.dump_into(&dump, &mut sockets) {
                Ok(_) => {
                    diag_failing = false;
                    let readings = to_readings(&sockets, &locals);
                    if let Some(m) = &opts.metrics {
                        m.add_lane_bytes(&lane_bytes.update(tracker.config(), &readings));
                    }
                    let actions = tracker.on_readings(t, &readings);
                    execute(actions, t, &mut tracker, &mut pm, &mut out, &mut summary)?;
                }
                Err(e) => {
                    // Keep running: the next reading may work; say it once.
                    if !diag_failing {
                        tracing::warn!("sock_diag reading failed: {e}");
                        out.emit(&Record::Warning(Warning {
                            t: secs(t),
                            message: format!("sock_diag reading failed: {e}"),
                        }))?;
                    }
                    diag_failing = true;
                }
            }
            for pair in tracker.probes_due(t) {
                prober.request(pair);
            }
        }
        if let Some(m) = &opts.metrics {
            m.observe(&summary, tracker.managed_count());
        }
    }
    summary.bpf_stats = bpf.as_ref().map(|b| b.stats());
    out.flush()?;
    summary.probe_cpu_s = prober.stop();
    Ok(summary)
}

fn secs(t: Instant) -> f64 {
    t.as_secs_f64()
}

/// With BPF signals and no switch waiting on an LL subflow, path-manager
/// events are read this often (and whenever a signal wakes the loop, before
/// the signal, so a signal never names a connection not yet seen). At the
/// lab's ~200 events/s per host most wake-ups were one event each; a batch
/// this short keeps well inside the event socket's buffer (an overrun is
/// reported as a warning record).
pub const EVENT_BATCH: Duration = Duration::from_millis(10);

/// How long a record may wait in the daemon's output buffer while the loop
/// is busy. Writing it out at every wake-up was 8 % of the daemons' CPU in
/// the web-search mix (BENCHMARKS.md, "Where the daemons' CPU goes").
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Every path-manager event queued now (at most 1024, the rest next time).
fn drain_events(events: &mut EventListener) -> Result<Vec<Incoming>, DaemonError> {
    let mut all = Vec::new();
    for _ in 0..1024 {
        let got = events.recv(Some(Duration::ZERO)).map_err(DaemonError::Events)?;
        if got.is_empty() {
            break;
        }
        all.extend(got);
    }
    Ok(all)
}

/// TCP sockets on the daemon's local addresses, with what the tracker needs.
fn to_readings(sockets: &[diag::DiagSocket], locals: &[IpAddr]) -> Vec<Reading> {
    sockets
        .iter()
        .filter(|s| s.state == diag::state::ESTABLISHED && locals.contains(&s.src.ip()))
        .filter_map(|s| {
            let info = s.tcp_info()?;
            Some(Reading {
                cookie: s.cookie,
                local: s.src,
                remote: s.dst,
                rtt: Duration::from_micros(info.rtt as u64),
                bytes_acked: info.bytes_acked.unwrap_or(0),
                bytes_received: info.bytes_received.unwrap_or(0),
                unacked: info.unacked,
            })
        })
        .collect()
}

/// Groups MPTCP subflows by connection (local token); a connection is
/// server side when its initial subflow's local port has a listener on its
/// address (or the wildcard).
fn existing_connections(sockets: &[diag::DiagSocket]) -> Vec<Existing> {
    let listening: Vec<std::net::SocketAddr> =
        sockets.iter().filter(|s| s.state == diag::state::LISTEN).map(|s| s.src).collect();
    let mut by_token: std::collections::BTreeMap<u32, Existing> = std::collections::BTreeMap::new();
    for s in sockets.iter().filter(|s| s.state == diag::state::ESTABLISHED) {
        let Some(sf) = s.mptcp_subflow() else { continue };
        let e = by_token.entry(sf.token_loc).or_insert_with(|| Existing {
            token: sf.token_loc,
            server_side: false,
            subflows: Vec::new(),
        });
        if sf.initial() {
            e.server_side = listening
                .iter()
                .any(|l| l.port() == s.src.port() && (l.ip() == s.src.ip() || l.ip().is_unspecified()));
        }
        e.subflows.push(ExistingSubflow {
            local: s.src,
            remote: s.dst,
            initial: sf.initial(),
            backup: sf.backup_local(),
        });
    }
    by_token.into_values().collect()
}

/// SUBFLOW_CREATE refused with ENOTCONN: the kernel's subflow connect
/// requires a fully established MPTCP connection, which a connection that
/// just reported ESTABLISHED may not be yet (or no longer is, when closing).
fn not_fully_established(e: &PmError) -> bool {
    e.errno() == Some(libc::ENOTCONN)
}

/// SET_FLAGS found no subflow with those addresses (kernel: "subflow not found").
fn subflow_not_found(e: &PmError) -> bool {
    e.errno() == Some(libc::EINVAL) && e.kernel_message().is_some_and(|m| m.contains("subflow not found"))
}

/// The kernel refused a command because the connection no longer exists
/// (its token is unknown) or its initial subflow is already closing.
fn connection_gone(e: &PmError) -> bool {
    match e.errno() {
        Some(libc::ENOTCONN) => true,
        Some(libc::EINVAL) => e.kernel_message().is_some_and(|m| m.contains("invalid token")),
        _ => false,
    }
}

/// Runs the actions' commands and prints their records. A switch decided
/// on a BPF signal (`signal_ktime_ns` in its record, also when it waited
/// for its LL subflow) gets the delay from the signal to the commands'
/// completion.
#[allow(clippy::too_many_arguments)]
fn execute(
    actions: Vec<Action>,
    now: Instant,
    tracker: &mut Tracker,
    pm: &mut PmClient,
    out: &mut Out<'_>,
    summary: &mut Summary,
) -> Result<(), DaemonError> {
    for a in actions {
        match a {
            Action::Emit(r) => out.emit(&r)?,
            Action::Apply { commands, mut record } => {
                for c in &commands {
                    let r = match c {
                        PmCommand::SubflowCreate { token, local, remote } => pm
                            .subflow_create(*token, local, remote)
                            .map_err(|e| (format!("{local} -> {remote}"), e)),
                        PmCommand::SetFlags { token, local, remote } => pm
                            .set_flags(Some(*token), local, Some(remote))
                            .map_err(|e| (format!("{local} -> {remote}"), e)),
                    };
                    if let Err((what, e)) = r {
                        let create = matches!(c, PmCommand::SubflowCreate { .. });
                        if create && not_fully_established(&e) && tracker.backup_not_ready(record.token) {
                            tracing::debug!(
                                "token {:#x}: not fully established yet, retrying: {e} ({what})",
                                record.token
                            );
                            summary.open_retries += 1;
                        } else if !create
                            && subflow_not_found(&e)
                            && tracker.switch_not_ready(now, record.token)
                        {
                            tracing::debug!(
                                "token {:#x}: subflow not listed yet, switching again: {e} ({what})",
                                record.token
                            );
                            summary.switch_retries += 1;
                        } else if connection_gone(&e) {
                            tracing::debug!("token {:#x}: connection gone: {e} ({what})", record.token);
                            summary.connection_gone += 1;
                        } else {
                            tracing::warn!("token {:#x}: {e} ({what})", record.token);
                            summary.failed_commands += 1;
                        }
                        record.ok = false;
                        record.error = Some(format!("{e} ({what})"));
                        break;
                    }
                }
                if record.ok && record.action == crate::record::DecisionAction::Switch {
                    summary.switches += 1;
                    if let Some(k) = record.signal_ktime_ns {
                        let now_ns = tcpaccel_sys::bpf::monotonic_ns();
                        record.signal_ms = Some(now_ns.saturating_sub(k) as f64 / 1e6);
                    }
                }
                out.emit(&Record::Decision(record))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(errno: i32, message: Option<&str>) -> PmError {
        PmError::Kernel {
            cmd: "SUBFLOW_CREATE".into(),
            errno,
            message: message.map(Into::into),
            missing_attr: None,
        }
    }

    /// A BPF permission error (EPERM from bpf(2)) is a missing privilege,
    /// exit 3, not a missing kernel feature (it was classed as one, exit 4).
    #[test]
    fn a_bpf_permission_error_is_a_missing_privilege_not_a_missing_feature() {
        let sys =
            |errno| tcpaccel_sys::Error::os("load BPF program", std::io::Error::from_raw_os_error(errno));
        let denied = DaemonError::Bpf(crate::bpf::BpfError::Sys(sys(libc::EPERM)));
        assert!(denied.is_missing_privilege() && !denied.is_missing_feature());
        let missing = DaemonError::Bpf(crate::bpf::BpfError::Sys(sys(libc::EOPNOTSUPP)));
        assert!(missing.is_missing_feature() && !missing.is_missing_privilege());
        assert!(DaemonError::Bpf(crate::bpf::BpfError::NoCgroup2).is_missing_feature());
    }

    #[test]
    fn a_closed_connection_is_not_a_failed_command() {
        assert!(connection_gone(&kernel(libc::EINVAL, Some("invalid token"))));
        assert!(connection_gone(&kernel(libc::ENOTCONN, None)));
        // Other EINVALs are real failures (a bad address, a bad flag).
        assert!(!connection_gone(&kernel(libc::EINVAL, Some("invalid addr id"))));
        assert!(!connection_gone(&kernel(libc::EINVAL, None)));
        assert!(!connection_gone(&kernel(libc::EPERM, None)));
    }

    #[test]
    fn refusals_worth_a_retry_are_told_apart() {
        assert!(not_fully_established(&kernel(libc::ENOTCONN, Some("connect error: -107"))));
        assert!(!not_fully_established(&kernel(libc::EINVAL, Some("invalid token"))));
        assert!(subflow_not_found(&kernel(libc::EINVAL, Some("subflow not found"))));
        assert!(!subflow_not_found(&kernel(libc::EINVAL, Some("invalid token"))));
        assert!(!subflow_not_found(&kernel(libc::ENOENT, Some("subflow not found"))));
    }
}
