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
use crate::record::{DecisionRecord, LaneTotal, Ready, Record, Summary, SummaryRecord, Warning};
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
    let mut d = Daemon::setup(cfg, opts, out)?;
    while !stop.load(Ordering::Relaxed) {
        let t = d.now();
        if opts.duration.is_some_and(|limit| t.saturating_since(Instant::from_nanos(0)) >= limit) {
            break;
        }
        d.turn(t)?;
    }
    d.finish()
}

/// The daemon between setup and finish: its sockets, the tracker and the
/// loop's timers. One [`Daemon::turn`] waits for what comes first and
/// hands each thing that came to its handler.
struct Daemon<'a> {
    opts: &'a Options,
    clock: std::time::Instant,
    tracker: Tracker,
    pm: PmClient,
    out: Out<'a>,
    summary: Summary,
    events: EventListener,
    diag_conn: DiagSocketConn,
    /// The sock_diag request of the readings, and its last answer.
    dump: DumpRequest,
    sockets: Vec<diag::DiagSocket>,
    locals: Vec<IpAddr>,
    prober: Prober,
    bpf: Option<BpfSignals>,
    lane_bytes: LaneBytes,
    /// What the summary record adds to [`Summary`]: bytes per lane (by
    /// name), decisions per policy and action, switches per reason.
    lane_totals: std::collections::BTreeMap<String, u64>,
    decisions: std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>>,
    switch_reasons: std::collections::BTreeMap<String, u64>,
    /// Next lane-byte count with BPF signals (no readings otherwise).
    next_count: Instant,
    sample_every: Duration,
    next_sample: Instant,
    last_flush: Instant,
    /// The last reading failed (said once until one works again).
    diag_failing: bool,
}

impl<'a> Daemon<'a> {
    /// Opens the sockets, starts the probe thread and (where it can) the
    /// BPF program, writes `ready` and adopts the connections already open.
    fn setup(mut cfg: Config, opts: &'a Options, out: &'a mut dyn Write) -> Result<Daemon<'a>, DaemonError> {
        let cpu0 = crate::probe::thread_cpu_s();
        let ns_label =
            opts.netns.clone().map(|n| format!("namespace {n:?}")).unwrap_or("this namespace".into());
        env::check_in(&cfg, opts.netns.as_deref())?;
        // Lanes called as the user called their interfaces (issue 51).
        cfg.name_lanes(|a| tcpaccel_sys::link::interface_of(a).ok().flatten());
        let events = EventListener::open()
            .map_err(|source| DaemonError::Open { what: "the mptcp_pm events group", source })?;
        let pm =
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
        // Per-ACK signals from the kernel where possible (see crate::bpf).
        let mut fallback_note = None;
        let bpf = match cfg.signals.source {
            SignalSource::Diag => None,
            SignalSource::Bpf => {
                Some(BpfSignals::start(&cfg, &cfg.signals.cgroup).map_err(DaemonError::Bpf)?)
            }
            SignalSource::Auto => match BpfSignals::start(&cfg, &cfg.signals.cgroup) {
                Ok(b) => Some(b),
                Err(e) => {
                    tracing::warn!("BPF lane signals unavailable, reading sock_diag instead: {e}");
                    fallback_note =
                        Some(format!("BPF lane signals unavailable, reading sock_diag instead: {e}"));
                    None
                }
            },
        };

        // Connections open before this start (e.g. across a restart) are
        // taken over; the kernel reports no event for them. Dumped before
        // `ready`, so a connection made after `ready` is never both adopted
        // and created.
        let adopt_req = DumpRequest {
            states: diag::state::CONNECTED,
            ext: diag::ext::INFO,
            families: dump.families.clone(),
            ..DumpRequest::default()
        };
        let before_start = diag_conn.dump(&adopt_req).map(|socks| existing_connections(&socks));
        let mut out = Out { w: std::io::BufWriter::with_capacity(64 * 1024, out), format: opts.format };
        out.emit(&Record::Ready(ready(&cfg, opts, bpf.is_some())))?;
        if let Some(note) = fallback_note {
            out.emit(&Record::Warning(Warning { t: 0.0, message: note }))?;
        }
        out.flush()?;
        tracing::info!("lanes daemon ready in {ns_label}");

        let clock = std::time::Instant::now();
        let locals: Vec<IpAddr> = cfg.local_addresses().collect();
        let sample_every = cfg.probe.sample_interval;
        let mut tracker = Tracker::new(cfg, Instant::ZERO);
        if bpf.is_some() {
            tracker.use_bpf_signals();
        }
        let summary = Summary {
            signals: if bpf.is_some() { "bpf" } else { "diag" },
            start_cpu_s: crate::probe::thread_cpu_s() - cpu0,
            ..Summary::default()
        };
        let mut d = Daemon {
            opts,
            clock,
            tracker,
            pm,
            out,
            summary,
            events,
            diag_conn,
            dump,
            sockets: Vec::new(),
            locals,
            prober,
            bpf,
            lane_bytes: LaneBytes::default(),
            lane_totals: Default::default(),
            decisions: Default::default(),
            switch_reasons: Default::default(),
            next_count: Instant::ZERO + COUNT_EVERY,
            sample_every,
            next_sample: Instant::ZERO,
            last_flush: Instant::ZERO,
            diag_failing: false,
        };
        match before_start {
            Ok((existing, undecodable)) => {
                for why in undecodable {
                    tracing::warn!("connection open before the start not managed: {why}");
                    d.out.emit(&Record::Warning(Warning {
                        t: 0.0,
                        message: format!("a connection open before the start is not managed: {why}"),
                    }))?;
                }
                let t = d.now();
                let actions = d.tracker.adopt(t, &existing);
                d.summary.connections += d.tracker.managed_count() as u64;
                d.act(actions, t)?;
            }
            Err(e) => {
                tracing::warn!("sock_diag dump for connections open before the start failed: {e}");
                d.out.emit(&Record::Warning(Warning {
                    t: 0.0,
                    message: format!(
                        "connections open before the start are not managed: sock_diag failed: {e}"
                    ),
                }))?;
            }
        }
        d.next_sample = d.now() + d.sample_every;
        d.last_flush = d.now();
        Ok(d)
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.clock.elapsed().as_nanos().min(u64::MAX as u128) as u64)
    }

    /// One pass of the event loop: a reload if asked, a wait for events or
    /// signals (at most until the next timer), then every handler in turn.
    fn turn(&mut self, t: Instant) -> Result<(), DaemonError> {
        self.reload_if_asked(t)?;
        let wait = self.wait_time(t);
        // Records reach the output within FLUSH_EVERY (about one write per
        // FLUSH_EVERY while busy instead of one per wake-up), at once
        // before a long wait.
        if wait >= FLUSH_EVERY || t.saturating_since(self.last_flush) >= FLUSH_EVERY {
            self.out.flush()?;
            self.last_flush = t;
        }
        for item in self.wait_for_events(wait)? {
            self.on_incoming(item)?;
        }
        self.on_signals()?;
        let t = self.now();
        let retries = self.tracker.retries_due(t);
        self.act(retries, t)?;
        self.on_probe_results()?;
        self.on_sample_timer()?;
        tcpaccel_metrics::flood_tick!(crate::floodlog::FLOW_LOG);
        if let Some(m) = &self.opts.metrics {
            m.observe(&self.summary, self.tracker.managed_count());
        }
        Ok(())
    }

    /// SIGHUP: the file read again and handed to the tracker (or refused).
    fn reload_if_asked(&mut self, t: Instant) -> Result<(), DaemonError> {
        let Some(r) = self.opts.reload.as_ref().filter(|r| r.requested.swap(false, Ordering::Relaxed)) else {
            return Ok(());
        };
        let record = match Config::load(&r.path) {
            Ok(new) => self.tracker.reload(t, new),
            Err(e) => self.tracker.reload_refused(t, e.to_string()),
        };
        if let Record::Reload(rr) = &record {
            match &rr.error {
                None => tracing::info!("reloaded {}", r.path.display()),
                Some(e) => tracing::warn!("reload of {} refused: {e}", r.path.display()),
            }
            if let Some(m) = &self.opts.metrics {
                m.reloaded(rr.ok);
            }
        }
        self.sample_every = self.tracker.config().probe.sample_interval;
        self.out.emit(&record)
    }

    /// How long the next wait may last.
    fn wait_time(&self, t: Instant) -> Duration {
        // With BPF signals and no readings wanted, the timer only serves
        // probes and retries: no wake-ups while neither can be due.
        let idle = self.bpf.is_some() && !self.tracker.wants_readings() && !self.tracker.may_probe();
        if idle && !self.tracker.retry_pending() {
            Duration::from_millis(200)
        } else if idle {
            RETRY_DELAY
        } else {
            self.next_sample.saturating_since(t).min(Duration::from_millis(100))
        }
    }

    /// Waits up to `wait` and returns the path-manager events that came.
    fn wait_for_events(&mut self, wait: Duration) -> Result<Vec<Incoming>, DaemonError> {
        Ok(match &self.bpf {
            // Woken by whichever comes first: a path-manager event or a
            // signal, when a switch waits for an LL subflow's event.
            Some(b) if self.tracker.switch_pending() => {
                match b.ring().wait_with(self.events.as_fd(), wait).map_err(DaemonError::Ring)? {
                    (_, true) => drain_events(&mut self.events)?,
                    _ => Vec::new(),
                }
            }
            // Otherwise no event is urgent: woken by a signal, or every
            // EVENT_BATCH to take the events queued meanwhile in one go
            // (most are short connections opening and closing).
            Some(b) => {
                b.ring().wait(wait.min(EVENT_BATCH)).map_err(DaemonError::Ring)?;
                drain_events(&mut self.events)?
            }
            None => self.events.recv(Some(wait)).map_err(DaemonError::Events)?,
        })
    }

    /// One path-manager event (or what the listener said instead of one).
    fn on_incoming(&mut self, item: Incoming) -> Result<(), DaemonError> {
        let t = self.now();
        match item {
            Incoming::Event(ev) => {
                let was = ev.token.is_some_and(|tok| self.tracker.is_managed(tok));
                let actions = self.tracker.on_event(t, &ev);
                if !was && ev.token.is_some_and(|tok| self.tracker.is_managed(tok)) {
                    self.summary.connections += 1;
                }
                self.act(actions, t)
            }
            Incoming::Malformed(e) => {
                tcpaccel_metrics::flood_event!(
                    crate::floodlog::FLOW_LOG,
                    tracing::Level::WARN,
                    "skipped a malformed mptcp_pm event: {e}"
                );
                self.out.emit(&Record::Warning(Warning {
                    t: secs(t),
                    message: format!("skipped a malformed event: {e}"),
                }))
            }
            Incoming::Overrun => {
                tcpaccel_metrics::flood_event!(
                    crate::floodlog::FLOW_LOG,
                    tracing::Level::WARN,
                    "mptcp_pm events were lost (socket buffer overrun)"
                );
                self.out.emit(&Record::Warning(Warning {
                    t: secs(t),
                    message: "events were lost (netlink buffer overrun); some connections may be missed"
                        .into(),
                }))
            }
        }
    }

    /// The BPF program's signals read from its ring buffer.
    fn on_signals(&mut self) -> Result<(), DaemonError> {
        let Some(b) = self.bpf.as_mut() else { return Ok(()) };
        let (signals, bad) = b.drain();
        for sig in signals {
            let t = self.now();
            self.summary.bpf_signals += 1;
            let actions = self.tracker.on_signal(t, &sig);
            if actions.is_empty() {
                self.summary.bpf_unmatched += 1;
            }
            self.act(actions, t)?;
        }
        if bad > 0 {
            let t = secs(self.now());
            self.out.emit(&Record::Warning(Warning {
                t,
                message: format!("skipped {bad} undecodable BPF ring-buffer record(s)"),
            }))?;
        }
        Ok(())
    }

    /// Handshake probes that finished: to the BPF program's lane samples,
    /// or to the tracker.
    fn on_probe_results(&mut self) -> Result<(), DaemonError> {
        for (pair, rtt) in self.prober.results() {
            let t = self.now();
            if let Some(b) = &self.bpf {
                // The program keeps the costs: the probe is one more LL sample.
                if let (Some(lane), Some(rtt)) = (self.tracker.probe_done(pair), rtt.filter(|r| !r.is_zero()))
                {
                    if let Err(e) = b.lane_sample(lane, rtt) {
                        tracing::warn!("handing a probe sample to the BPF program: {e}");
                    }
                }
                continue;
            }
            let actions = self.tracker.on_probe(t, pair, rtt);
            self.act(actions, t)?;
        }
        Ok(())
    }

    /// Every `probe.sample_interval`: a sock_diag reading when one is
    /// wanted, and the probes that are due.
    fn on_sample_timer(&mut self) -> Result<(), DaemonError> {
        let t = self.now();
        if t < self.next_sample {
            return Ok(());
        }
        self.next_sample = t + self.sample_every;
        // With BPF signals and no readings wanted the program decides;
        // probes still time LL lanes for link cost (an idle backup subflow
        // carries no ACKs).
        if self.bpf.is_none() || self.tracker.wants_readings() {
            self.read_sockets(t, true)?;
        } else if t >= self.next_count {
            self.read_sockets(t, false)?;
        }
        for pair in self.tracker.probes_due(t) {
            self.prober.request(pair);
        }
        Ok(())
    }

    /// One sock_diag reading to the lane byte counters and, when `decide`,
    /// to the tracker.
    fn read_sockets(&mut self, t: Instant, decide: bool) -> Result<(), DaemonError> {
        self.next_count = t + COUNT_EVERY;
        match self.diag_conn.dump_into(&self.dump, &mut self.sockets) {
            Ok(_) => {
                self.diag_failing = false;
                let readings = to_readings(&self.sockets, &self.locals);
                let increments = self.lane_bytes.update(self.tracker.config(), &readings);
                for (lane, n) in &increments {
                    *self.lane_totals.entry(lane.clone()).or_default() += n;
                }
                if let Some(m) = &self.opts.metrics {
                    m.add_lane_bytes(&increments);
                }
                if !decide {
                    return Ok(());
                }
                let actions = self.tracker.on_readings(t, &readings);
                self.act(actions, t)
            }
            Err(e) => {
                // Keep running: the next reading may work; say it once.
                if !self.diag_failing {
                    tracing::warn!("sock_diag reading failed: {e}");
                    self.out.emit(&Record::Warning(Warning {
                        t: secs(t),
                        message: format!("sock_diag reading failed: {e}"),
                    }))?;
                }
                self.diag_failing = true;
                Ok(())
            }
        }
    }

    /// The end of the run: a last count of the lanes' bytes, the program's
    /// counters, the summary record, the output flushed and the probe
    /// thread stopped.
    fn finish(mut self) -> Result<Summary, DaemonError> {
        let t = self.now();
        self.read_sockets(t, false)?;
        if let Some(m) = &self.opts.metrics {
            m.observe(&self.summary, self.tracker.managed_count());
        }
        tcpaccel_metrics::flood_tick!(crate::floodlog::FLOW_LOG, flush);
        self.summary.bpf_stats = self.bpf.as_ref().map(|b| b.stats());
        let record = self.summary_record(t);
        self.out.emit(&Record::Summary(record))?;
        self.out.flush()?;
        self.summary.probe_cpu_s = self.prober.stop();
        Ok(self.summary)
    }

    /// The `summary` record: the counts, with the lanes in configuration
    /// order.
    fn summary_record(&self, t: Instant) -> SummaryRecord {
        let cfg = self.tracker.config();
        let lanes = cfg
            .local_addresses()
            .filter_map(|a| {
                let lane = cfg.lane_name(cfg.lane_of(a)?).to_string();
                let bytes_acked = self.lane_totals.get(&lane).copied().unwrap_or(0);
                Some(LaneTotal { lane, local: a.to_string(), bytes_acked })
            })
            .collect();
        SummaryRecord {
            t: secs(t),
            connections: self.summary.connections,
            switches: self.summary.switches,
            switch_reasons: self.switch_reasons.clone(),
            decisions: self.decisions.clone(),
            failed_commands: self.summary.failed_commands,
            connection_gone: self.summary.connection_gone,
            lanes,
            lanes_read_every_ms: if self.bpf.is_some() { COUNT_EVERY } else { self.sample_every }
                .as_secs_f64()
                * 1e3,
            signals: self.summary.signals.into(),
        }
    }

    /// A decision carried out, counted for the summary.
    fn count_decision(&mut self, d: &DecisionRecord) {
        if !d.ok {
            return;
        }
        let per_policy = self.decisions.entry(d.policy.clone()).or_default();
        *per_policy.entry(d.action.name().into()).or_default() += 1;
        if d.action == crate::record::DecisionAction::Switch {
            let reason = d.reason.clone().unwrap_or_else(|| "unknown".into());
            *self.switch_reasons.entry(reason).or_default() += 1;
        }
    }

    /// Runs the actions' commands and prints their records. A switch decided
    /// on a BPF signal (`signal_ktime_ns` in its record, also when it waited
    /// for its LL subflow) gets the delay from the signal to the commands'
    /// completion.
    fn act(&mut self, actions: Vec<Action>, now: Instant) -> Result<(), DaemonError> {
        for a in actions {
            match a {
                Action::Emit(r) => {
                    if let Record::Warning(w) = &r {
                        tcpaccel_metrics::flood_event!(
                            crate::floodlog::FLOW_LOG,
                            tracing::Level::WARN,
                            "{}",
                            w.message
                        );
                    }
                    if let Record::Decision(d) = &r {
                        self.count_decision(d);
                    }
                    self.out.emit(&r)?
                }
                Action::Apply { commands, mut record } => {
                    for c in &commands {
                        if let Err((what, e)) = run_command(&mut self.pm, c) {
                            let create = matches!(c, PmCommand::SubflowCreate { .. });
                            self.count_refusal(now, record.token, create, &e, &what);
                            record.ok = false;
                            record.error = Some(format!("{e} ({what})"));
                            break;
                        }
                    }
                    if record.ok && record.action == crate::record::DecisionAction::Switch {
                        self.summary.switches += 1;
                        if let Some(k) = record.signal_ktime_ns {
                            let now_ns = tcpaccel_sys::bpf::monotonic_ns();
                            record.signal_ms = Some(now_ns.saturating_sub(k) as f64 / 1e6);
                        }
                    }
                    self.count_decision(&record);
                    self.out.emit(&Record::Decision(record))?;
                }
            }
        }
        Ok(())
    }

    /// A refused command: retried (the tracker is told), gone, or failed.
    fn count_refusal(&mut self, now: Instant, token: u32, create: bool, e: &PmError, what: &str) {
        if create && not_fully_established(e) && self.tracker.backup_not_ready(token) {
            tcpaccel_metrics::flood_event!(
                crate::floodlog::FLOW_LOG,
                tracing::Level::DEBUG,
                "token {token:#x}: not fully established yet, retrying: {e} ({what})"
            );
            self.summary.open_retries += 1;
        } else if !create && subflow_not_found(e) && self.tracker.switch_not_ready(now, token) {
            tcpaccel_metrics::flood_event!(
                crate::floodlog::FLOW_LOG,
                tracing::Level::DEBUG,
                "token {token:#x}: subflow not listed yet, switching again: {e} ({what})"
            );
            self.summary.switch_retries += 1;
        } else if connection_gone(e) {
            tcpaccel_metrics::flood_event!(
                crate::floodlog::FLOW_LOG,
                tracing::Level::DEBUG,
                "token {token:#x}: connection gone: {e} ({what})"
            );
            self.summary.connection_gone += 1;
        } else {
            tcpaccel_metrics::flood_event!(
                crate::floodlog::FLOW_LOG,
                tracing::Level::WARN,
                "token {token:#x}: {e} ({what})"
            );
            self.summary.failed_commands += 1;
        }
    }
}

/// The `ready` record: what the daemon runs with.
fn ready(cfg: &Config, opts: &Options, bpf: bool) -> Ready {
    let s = &cfg.switch;
    Ready {
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
        sl_names: cfg.names.sl.clone(),
        ll_names: cfg.names.ll.clone(),
        peers: cfg.peers.len(),
        signals: Some(if bpf { "bpf" } else { "diag" }.into()),
    }
}

/// One path-manager command; an error with the addresses it was for.
fn run_command(pm: &mut PmClient, c: &PmCommand) -> Result<(), (String, PmError)> {
    match c {
        PmCommand::SubflowCreate { token, local, remote } => {
            pm.subflow_create(*token, local, remote).map_err(|e| (format!("{local} -> {remote}"), e))
        }
        PmCommand::SetFlags { token, local, remote } => {
            pm.set_flags(Some(*token), local, Some(remote)).map_err(|e| (format!("{local} -> {remote}"), e))
        }
    }
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

/// With BPF signals (no sock_diag readings to decide on), how often the
/// lanes' bytes are counted for the summary and `--metrics`: a dump a
/// second costs little beside the readings the program replaces.
pub const COUNT_EVERY: Duration = Duration::from_secs(1);

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
/// server side when the kernel flags its initial subflow as accepted here
/// (MP_CAPABLE received, not sent: [`diag::MptcpSubflow::accepted`]), with
/// or without a listener still open. A socket whose MPTCP subflow info does
/// not decode is left out and described in the second list, for a warning.
fn existing_connections(sockets: &[diag::DiagSocket]) -> (Vec<Existing>, Vec<String>) {
    let mut by_token: std::collections::BTreeMap<u32, Existing> = std::collections::BTreeMap::new();
    let mut undecodable = Vec::new();
    for s in sockets.iter().filter(|s| s.state == diag::state::ESTABLISHED) {
        let sf = match s.mptcp_subflow() {
            Ok(Some(sf)) => sf,
            Ok(None) => continue,
            Err(e) => {
                undecodable.push(format!("subflow {} -> {}: its sock_diag MPTCP info: {e}", s.src, s.dst));
                continue;
            }
        };
        let e = by_token.entry(sf.token_loc).or_insert_with(|| Existing {
            token: sf.token_loc,
            server_side: false,
            subflows: Vec::new(),
        });
        e.server_side |= sf.accepted();
        e.subflows.push(ExistingSubflow {
            local: s.src,
            remote: s.dst,
            initial: sf.initial(),
            backup: sf.backup_local(),
        });
    }
    (by_token.into_values().collect(), undecodable)
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

    /// The real dump of one loopback MPTCP connection (both ends,
    /// crates/sys/testdata/README.md) as the daemon's start sees it, with
    /// `manage_server_side` on and 127.0.0.1 both SL addresses: the
    /// accepting end (local port 5202; its initial subflow flagged MCAP_REM
    /// only) is adopted server side, opening nothing (its peer opens the LL
    /// joins); the connecting end is adopted and opens its LL backup. It
    /// used to be skipped, for lack of a subflow flagged initial. With the
    /// option off it is left alone.
    #[test]
    fn the_accepting_end_of_a_captured_connection_is_adopted_server_side() {
        const DUMP: &[u8] = include_bytes!("../../sys/testdata/diag_mptcp.bin");
        let seq = tcpaccel_sys::netlink::messages(DUMP).next().unwrap().unwrap().header.seq;
        let mut socks = Vec::new();
        diag::parse_datagram(DUMP, seq, &mut socks).unwrap();
        let (existing, bad) = existing_connections(&socks);
        assert!(bad.is_empty(), "{bad:?}");
        let server: std::net::SocketAddr = "127.0.0.1:5202".parse().unwrap();
        let side = |e: &Existing| (e.server_side, e.subflows.iter().find(|s| s.initial).map(|s| s.local));
        let mut sides: Vec<_> = existing.iter().map(side).collect();
        sides.sort();
        assert_eq!(sides, vec![(false, Some("127.0.0.1:40001".parse().unwrap())), (true, Some(server))]);
        let accepted = existing.iter().find(|e| e.server_side).unwrap().token;
        let connected = existing.iter().find(|e| !e.server_side).unwrap().token;

        let text = |manage: bool| {
            format!(
                r#"
                [policy]
                kind = "deadline"
                manage_server_side = {manage}
                [[peer]]
                sl = [{{ local = "127.0.0.1", remote = "127.0.0.1" }}]
                ll = [{{ local = "127.0.0.2", remote = "127.0.0.3" }}]
                "#
            )
        };
        let now = Instant::ZERO;
        let mut on = Tracker::new(Config::parse(&text(true), "t").unwrap(), now);
        let actions = on.adopt(now, &existing);
        let mut managed = on.managed();
        managed.sort();
        let mut want = vec![accepted, connected];
        want.sort();
        assert_eq!(managed, want, "{actions:?}");
        let adopted = |token| {
            actions.iter().any(|a| {
                matches!(a, Action::Emit(Record::Event(e))
                    if e.token == token && e.event == "adopted" && e.local == Some(server.to_string()))
            })
        };
        assert!(adopted(accepted), "{actions:?}");
        // Only the connecting end opens a subflow.
        let opened: Vec<u32> = actions
            .iter()
            .flat_map(|a| match a {
                Action::Apply { commands, .. } => commands.clone(),
                Action::Emit(_) => Vec::new(),
            })
            .map(|c| match c {
                PmCommand::SubflowCreate { token, .. } | PmCommand::SetFlags { token, .. } => token,
            })
            .collect();
        assert_eq!(opened, vec![connected], "{actions:?}");

        let mut off = Tracker::new(Config::parse(&text(false), "t").unwrap(), now);
        off.adopt(now, &existing);
        assert_eq!(off.managed(), vec![connected]);
    }

    /// A subflow whose nested MPTCP info is malformed is described for a
    /// warning, not taken for a plain TCP socket and passed over in silence;
    /// the other subflow of the captured dump is still adopted.
    #[test]
    fn an_undecodable_subflow_is_reported_not_skipped() {
        const DUMP: &[u8] = include_bytes!("../../sys/testdata/diag_mptcp.bin");
        let seq = tcpaccel_sys::netlink::messages(DUMP).next().unwrap().unwrap().header.seq;
        let mut socks = Vec::new();
        diag::parse_datagram(DUMP, seq, &mut socks).unwrap();
        let (good, bad) = existing_connections(&socks);
        assert_eq!((good.len(), bad.len()), (2, 0), "each end of the connection has its own token");
        let ulp = socks[0].attrs.iter_mut().find(|a| a.kind == diag::attr::ULP_INFO).unwrap();
        ulp.data[..2].copy_from_slice(&200u16.to_ne_bytes()); // the first nested attribute's length
        let (good, bad) = existing_connections(&socks);
        assert_eq!((good.len(), bad.len()), (1, 1));
        assert!(
            bad[0].contains(&socks[0].src.to_string()) && bad[0].contains("claims length 200"),
            "{bad:?}"
        );
    }
}
