//! The daemon's bookkeeping and decisions, without I/O: path-manager events,
//! sock_diag readings and probe results go in with `now`; path-manager
//! commands to run and records to print come out.
//!
//! What it is: per connection, the SL pair it started on, its LL subflows
//! (one per LL lane pair of its peer, opened as backup once the connection
//! is established), and a [`LaneSwitcher`] from `tcpaccel_core::lanes` that
//! holds the [Lanes] policy (deadline, or eq. 5.7 link costs smoothed 3/4–1/4).
//! A switch is two kinds of SET_FLAGS: LL subflows non-backup first, then the
//! SL subflow backup (with its source port), the order checked on this
//! project's kernel (anchors.md, MPTCP).
//!
//! Measurements ([Lanes] §5.2, eq. 5.4: ν = RTT − RTT_min, computed by the
//! core from raw RTTs): a subflow's smoothed RTT from sock_diag counts as a
//! sample only when its `bytes_acked` grew since the last reading, i.e. ACKs
//! arrived and the kernel's RTT estimate moved. An idle backup LL subflow
//! has no such samples, so the shell times TCP handshakes from the LL local
//! address to the peer (see [`Tracker::probes_due`]).
//!
//! What upstream MPTCP cannot do that the thesis did, and what is done
//! instead:
//! - The thesis set the SL subflow's cwnd to exactly 0 after a switch. The
//!   upstream kernel has no per-subflow cwnd control from user space; the SL
//!   subflow is marked backup (MP_PRIO), so the default scheduler gives it no
//!   new data while an LL subflow is active. Data already queued on SL still
//!   drains there, and SL would carry data again if every LL subflow failed
//!   (which the thesis's cwnd 0 would not allow).
//! - The thesis held a new LL subflow at cwnd 1 so that its ACKs kept
//!   measuring LL's RTT. Here the LL subflow is opened as backup and carries
//!   no data; LL's RTT comes from other traffic on that lane pair (sock_diag)
//!   or from TCP handshake probes at `probe.interval`. A handshake is one
//!   small packet each way, like the thesis's cwnd-1 probe, but it crosses
//!   the path outside the connection and so only samples the queue.
//! - The thesis recomputed costs on every ACK in the kernel. With BPF
//!   signals (`crate::bpf`) so does this daemon: the program runs on every
//!   segment a subflow receives, smooths the costs once per ACK of new data
//!   and [`Tracker::on_signal`] gets only the decision. On
//!   the sock_diag fallback costs are updated at each reading
//!   (`probe.sample_interval`, 20 ms by default) from the kernel's smoothed
//!   RTT, so the 3/4–1/4 smoothing runs over readings rather than ACKs.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tcpaccel_core::lanes::{Decision, LaneId, LaneSwitcher, Policy, Reason};
use tcpaccel_core::Instant;
use tcpaccel_sys::mptcp::{flags, Event, EventKind, PmAddr};

use crate::config::{Config, LanePair, SwitchTo};
use crate::record::{DecisionAction, DecisionRecord, EventRecord, Record, ReloadRecord};

/// One TCP socket (subflow or plain) as sock_diag saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Kernel socket cookie: identity across readings.
    pub cookie: u64,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// The kernel's smoothed RTT (`tcpi_rtt`).
    pub rtt: Duration,
    /// `tcpi_bytes_acked`.
    pub bytes_acked: u64,
    /// `tcpi_bytes_received`.
    pub bytes_received: u64,
    /// `tcpi_unacked` (segments in flight).
    pub unacked: u32,
}

/// An MPTCP connection open before the daemon started (or before it was
/// restarted), as sock_diag shows it: see [`Tracker::adopt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    /// The connection's local token (`MPTCP_SUBFLOW_ATTR_TOKEN_LOC`).
    pub token: u32,
    /// Accepted by this host: its initial subflow's MP_CAPABLE was received,
    /// not sent (`MptcpSubflow::accepted`); adopted only with
    /// `manage_server_side`, and then, as for a created one, this host
    /// opens no subflow and only switches among its peer's.
    pub server_side: bool,
    pub subflows: Vec<ExistingSubflow>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExistingSubflow {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// The MP_CAPABLE subflow the connection started on (at either end).
    pub initial: bool,
    /// Marked backup by this host.
    pub backup: bool,
}

/// A path-manager command to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmCommand {
    SubflowCreate { token: u32, local: PmAddr, remote: PmAddr },
    SetFlags { token: u32, local: PmAddr, remote: PmAddr },
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Run `commands` in order, stopping at the first failure, then print
    /// `record` with `ok`/`error` filled in.
    Apply { commands: Vec<PmCommand>, record: DecisionRecord },
    /// Print a record.
    Emit(Record),
}

#[derive(Debug, Clone)]
struct LlSubflow {
    pair: LanePair,
    /// The subflow's endpoints once SUB_ESTABLISHED reported it.
    established: Option<(SocketAddr, SocketAddr)>,
    /// Opened without the backup flag, because its connection had already
    /// decided to switch to it: active from its handshake, no SET_FLAGS.
    opened_active: bool,
}

#[derive(Debug, Clone)]
enum SwitchState {
    No,
    /// Decided while no LL subflow was up: (reason, lane, costs, age).
    Pending(Decision),
    Done,
}

#[derive(Debug, Clone)]
struct Conn {
    peer: usize,
    local: SocketAddr,
    remote: SocketAddr,
    sl_lane: LaneId,
    created: Instant,
    established: bool,
    ll: Vec<LlSubflow>,
    /// Accepted here: its peer opens the LL subflows (a client has no
    /// listener for joins), this host only switches among them.
    server_side: bool,
    switcher: LaneSwitcher,
    switch: SwitchState,
    /// Last reading that showed one of its subflows.
    last_seen: Instant,
    /// The kernel refused an LL backup (not fully established yet); asked
    /// for again once a switch is pending, `open_retries` times so far, not
    /// before `open_retry_at`.
    backup_refused: bool,
    open_retries: u32,
    open_retry_at: Option<Instant>,
    /// The switch last applied, and its retries when the kernel did not
    /// find a subflow yet (see [`Tracker::switch_not_ready`]).
    applied: Option<Decision>,
    switch_retries: u32,
    switch_retry_at: Option<Instant>,
    /// Taken over by [`Tracker::adopt`]: with BPF signals, judged by
    /// sock_diag readings still (see [`Tracker::use_bpf_signals`]).
    adopted: bool,
    /// Its backup LL subflows were asked for: at ESTABLISHED, or with BPF
    /// signals only once the program says the decision may come (see
    /// [`Tracker::on_signal`]).
    backups: bool,
    /// The kernel time of the BPF signal its switch answers.
    signal_ktime_ns: Option<u64>,
}

/// Retries of what the kernel refused too early: an LL backup (asked for
/// again once the connection's switch waits on it) or a switch whose
/// subflow was not listed yet — at most this often and this many times
/// (half a second in all: the refusals were seen to last 45–90 ms under
/// load). Each retry is one command; a short delay matters since with BPF
/// signals a switch decided early (link cost) opens its backups only then
/// and waits on them.
pub const RETRY_DELAY: Duration = Duration::from_millis(5);
pub const RETRIES: u32 = 100;

/// A connection none of whose subflows sock_diag has shown for this long
/// is forgotten (its CLOSED event was lost, e.g. in a buffer overrun).
pub const FORGET_AFTER: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, Default)]
struct ProbeState {
    last_sent: Option<Instant>,
    in_flight: bool,
    /// Last time traffic on the pair gave a sock_diag sample.
    last_fresh: Option<Instant>,
}

/// The tracker. `start` is the daemon's time zero (records print `t`
/// relative to it).
pub struct Tracker {
    cfg: Config,
    start: Instant,
    conns: BTreeMap<u32, Conn>,
    /// Each socket's (`bytes_acked`, `bytes_received`) at the last reading.
    counters: HashMap<u64, (u64, u64)>,
    probes: BTreeMap<(IpAddr, IpAddr), ProbeState>,
    /// With BPF signals: probes per LL lane (the program keeps one sample
    /// per lane, whichever pair it came from).
    lane_probes: HashMap<LaneId, ProbeState>,
    /// The BPF program decides for connections opened while it runs.
    bpf: bool,
    /// Peer LL addresses whose refused joins were already warned about.
    refused_warned: std::collections::BTreeSet<IpAddr>,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn sock_text(a: SocketAddr) -> String {
    a.to_string()
}

impl Tracker {
    pub fn new(cfg: Config, start: Instant) -> Tracker {
        Tracker {
            cfg,
            start,
            conns: BTreeMap::new(),
            counters: HashMap::new(),
            probes: BTreeMap::new(),
            lane_probes: HashMap::new(),
            bpf: false,
            refused_warned: Default::default(),
        }
    }

    /// The BPF program (`crate::bpf`) sends the signals from now on: the
    /// connections it sees open are decided by [`Tracker::on_signal`] only,
    /// and [`Tracker::on_readings`] judges only adopted connections — open
    /// before the daemon started, whose sockets the program gets no
    /// callback for unless an earlier daemon's program switched them on.
    pub fn use_bpf_signals(&mut self) {
        self.bpf = true;
    }

    /// Whether sock_diag readings are needed now: always without BPF
    /// signals; with them, while an adopted connection has not switched.
    pub fn wants_readings(&self) -> bool {
        !self.bpf || self.conns.values().any(|c| c.adopted && matches!(c.switch, SwitchState::No))
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Takes over connections that were open before the daemon started,
    /// e.g. across a restart: each one whose initial subflow is on an SL
    /// pair is managed from now on, its age counted from now (the kernel
    /// does not say when it started). LL subflows it already has are used,
    /// missing backups are opened, and one whose SL subflow is backup while
    /// an LL subflow is active counts as switched, so a restarted daemon
    /// neither switches it again nor opens duplicate subflows.
    pub fn adopt(&mut self, now: Instant, existing: &[Existing]) -> Vec<Action> {
        let mut out = Vec::new();
        for e in existing {
            if self.conns.contains_key(&e.token) || (e.server_side && !self.cfg.server_side) {
                continue;
            }
            let Some(init) = e.subflows.iter().find(|s| s.initial) else { continue };
            let Some(mut c) = self.new_conn(now, init.local, init.remote, e.server_side) else { continue };
            c.established = true;
            c.adopted = true;
            let mut ll_active = false;
            for s in e.subflows.iter().filter(|s| !s.initial) {
                if let Some(l) = c.ll.iter_mut().find(|l| {
                    l.pair.local == s.local.ip() && l.pair.remote == s.remote.ip() && l.established.is_none()
                }) {
                    l.established = Some((s.local, s.remote));
                    ll_active |= !s.backup;
                }
            }
            let switched = init.backup && ll_active;
            if switched {
                c.switch = SwitchState::Done;
            }
            self.conns.insert(e.token, c);
            out.push(Action::Emit(Record::Event(EventRecord {
                t: self.t(now),
                event: if switched { "adopted_switched".into() } else { "adopted".into() },
                token: e.token,
                managed: true,
                age_ms: Some(0.0),
                local: Some(sock_text(init.local)),
                remote: Some(sock_text(init.remote)),
                backup: Some(init.backup),
                error: None,
            })));
            if !switched {
                if let Some(c) = self.conns.get_mut(&e.token) {
                    c.backups = true;
                }
                out.extend(self.backup_actions(now, e.token, None));
            }
        }
        out
    }

    /// Takes a configuration read again (SIGHUP). What can change while
    /// connections live: the policy and its parameters, `switch_to`, and the
    /// probe timing. Unswitched connections follow the new policy at once;
    /// switched ones keep their decision. Lanes, peers and the probe port
    /// name the subflows already opened, so changing them is refused (a
    /// restart re-reads them) and the old configuration stays in force.
    pub fn reload(&mut self, now: Instant, new: Config) -> Record {
        let old = &self.cfg;
        let fixed = [
            ("peers", old.peers != new.peers),
            ("SL lanes", old.sl_lanes != new.sl_lanes),
            ("LL lanes", old.ll_lanes != new.ll_lanes),
            ("probe.port", old.probe.port != new.probe.port),
            ("probe.timeout", old.probe.timeout != new.probe.timeout),
        ];
        let changed: Vec<&str> = fixed.iter().filter(|(_, c)| *c).map(|(n, _)| *n).collect();
        let mut reconfigured = 0;
        if !changed.is_empty() {
            return self.reload_refused(now, format!("{} changed; they need a restart", changed.join(", ")));
        }
        // Lanes cannot change on a reload, so neither do their names (the
        // file read again has only the index names).
        self.cfg = Config { names: self.cfg.names.clone(), ..new };
        for c in self.conns.values_mut() {
            if c.switcher.switched().is_none() {
                c.switcher.reconfigure(self.cfg.switch);
                reconfigured += 1;
            }
        }
        Record::Reload(ReloadRecord {
            t: self.t(now),
            ok: true,
            policy: self.policy_name(),
            t_deadline_ms: ms(self.cfg.switch.t_deadline),
            reconfigured,
            error: None,
        })
    }

    /// The record of a reload that could not be applied (the file did not
    /// parse, or [`Tracker::reload`] refused it): the old policy stays.
    pub fn reload_refused(&self, now: Instant, why: String) -> Record {
        Record::Reload(ReloadRecord {
            t: self.t(now),
            ok: false,
            policy: self.policy_name(),
            t_deadline_ms: ms(self.cfg.switch.t_deadline),
            reconfigured: 0,
            error: Some(why),
        })
    }

    /// Whether the connection with this token is managed.
    pub fn is_managed(&self, token: u32) -> bool {
        self.conns.contains_key(&token)
    }

    /// How many connections are managed now.
    pub fn managed_count(&self) -> usize {
        self.conns.len()
    }

    /// Tokens of the connections being managed.
    pub fn managed(&self) -> Vec<u32> {
        self.conns.keys().copied().collect()
    }

    fn t(&self, now: Instant) -> f64 {
        secs(now.saturating_since(self.start))
    }

    fn policy_name(&self) -> String {
        self.cfg.switch.policy.name().into()
    }

    fn event_record(&self, now: Instant, ev: &Event, token: u32, managed: Option<&Conn>) -> Record {
        Record::Event(EventRecord {
            t: self.t(now),
            event: ev.kind.name().into(),
            token,
            managed: managed.is_some(),
            age_ms: managed.map(|c| ms(now.saturating_since(c.created))),
            local: ev.local().map(sock_text).or_else(|| ev.saddr.map(|a| a.to_string())),
            remote: ev.remote().map(sock_text).or_else(|| ev.daddr.map(|a| a.to_string())),
            backup: ev.backup,
            error: ev.error,
        })
    }

    /// Handles one path-manager event.
    pub fn on_event(&mut self, now: Instant, ev: &Event) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(token) = ev.token else {
            return out; // listener events carry no token
        };
        match ev.kind {
            EventKind::Created | EventKind::Established => {
                let new = !self.conns.contains_key(&token);
                if new {
                    // ESTABLISHED without CREATED: a connection from before
                    // the daemon started; it carries the same addresses.
                    if let Some(c) = self.admit(now, ev) {
                        self.conns.insert(token, c);
                    }
                }
                let rec = self.event_record(now, ev, token, self.conns.get(&token));
                if new || ev.kind == EventKind::Established {
                    out.push(Action::Emit(rec));
                }
                if ev.kind == EventKind::Established {
                    out.extend(self.open_backups(now, token));
                }
            }
            EventKind::SubEstablished => {
                let rec = self.event_record(now, ev, token, self.conns.get(&token));
                out.push(Action::Emit(rec));
                if let (Some(c), Some(l), Some(r)) = (self.conns.get_mut(&token), ev.local(), ev.remote()) {
                    let mut joined = None;
                    if let Some(s) = c.ll.iter_mut().find(|s| {
                        s.pair.local == l.ip() && s.pair.remote == r.ip() && s.established.is_none()
                    }) {
                        s.established = Some((l, r));
                        joined = Some(s.pair.lane);
                    }
                    match c.switch.clone() {
                        SwitchState::Pending(d) => out.extend(self.apply_switch(now, token, d)),
                        SwitchState::Done => {
                            out.extend(joined.and_then(|lane| self.activate(now, token, lane, l, r)))
                        }
                        SwitchState::No => {}
                    }
                }
            }
            EventKind::SubClosed => {
                let rec = self.event_record(now, ev, token, self.conns.get(&token));
                out.push(Action::Emit(rec));
                out.extend(self.join_refused(now, token, ev).map(Action::Emit));
                if let (Some(c), Some(l)) = (self.conns.get_mut(&token), ev.local()) {
                    for s in c.ll.iter_mut() {
                        if s.established.map(|(sl, _)| sl) == Some(l) {
                            s.established = None;
                        }
                    }
                }
            }
            EventKind::SubPriority => {
                let rec = self.event_record(now, ev, token, self.conns.get(&token));
                out.push(Action::Emit(rec));
            }
            EventKind::Closed => {
                let rec = self.event_record(now, ev, token, self.conns.get(&token));
                out.push(Action::Emit(rec));
                self.conns.remove(&token);
            }
            _ => {}
        }
        out
    }

    /// A warning, once per peer LL address, when the peer refuses an LL
    /// subflow's join (SUB_CLOSED with ECONNREFUSED): the usual cause is a
    /// listener bound to the peer's SL address only, so joins to its LL
    /// addresses find no listener, and a connection that decided to switch
    /// waits at `switch_pending` for ever.
    fn join_refused(&mut self, now: Instant, token: u32, ev: &Event) -> Option<Record> {
        if ev.error != Some(libc::ECONNREFUSED as u8) {
            return None;
        }
        let (l, r) = (ev.local()?, ev.remote()?);
        let c = self.conns.get(&token)?;
        c.ll.iter().find(|s| s.pair.local == l.ip() && s.pair.remote == r.ip())?;
        if !self.refused_warned.insert(r.ip()) {
            return None;
        }
        let waiting = if matches!(c.switch, SwitchState::Pending(_)) {
            format!("; connection {token:#x} waits to switch until a join succeeds")
        } else {
            String::new()
        };
        Some(Record::Warning(crate::record::Warning {
            t: self.t(now),
            message: format!(
                "the peer refused the LL subflow join {l} -> {r} (error {}, connection refused): its listener \
                 is probably bound to one address (the SL address {}); listen on the wildcard (0.0.0.0 or ::) \
                 so that joins to the LL addresses are accepted{waiting}",
                libc::ECONNREFUSED,
                c.remote.ip()
            ),
        }))
    }

    /// A connection is managed when it starts on a configured SL pair and is
    /// ours, or accepted here with `manage_server_side` on.
    fn admit(&self, now: Instant, ev: &Event) -> Option<Conn> {
        let server_side = ev.server_side == Some(true);
        if server_side && !self.cfg.server_side {
            return None;
        }
        let (local, remote) = (ev.local()?, ev.remote()?);
        self.new_conn(now, local, remote, server_side)
    }

    fn new_conn(
        &self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        server_side: bool,
    ) -> Option<Conn> {
        let (peer, pair) = self.cfg.sl_pair(local.ip(), remote.ip())?;
        let ll = self.cfg.peers[peer]
            .ll
            .iter()
            .map(|p| LlSubflow { pair: *p, established: None, opened_active: false })
            .collect();
        Some(Conn {
            peer,
            local,
            remote,
            sl_lane: pair.lane,
            created: now,
            established: false,
            ll,
            server_side,
            switcher: LaneSwitcher::new(self.cfg.switch, now),
            switch: SwitchState::No,
            last_seen: now,
            backup_refused: false,
            open_retries: 0,
            open_retry_at: None,
            applied: None,
            switch_retries: 0,
            switch_retry_at: None,
            adopted: false,
            backups: false,
            signal_ktime_ns: None,
        })
    }

    /// One SUBFLOW_CREATE with the BACKUP flag per LL lane pair, at
    /// ESTABLISHED. With BPF signals not yet: most connections end before
    /// the program's [`crate::bpf::Kind::Prepare`], and each backup is a
    /// subflow handshake (the kernel connects it inside the command, and
    /// the veth delivery of its packets runs on the daemon's thread).
    fn open_backups(&mut self, now: Instant, token: u32) -> Vec<Action> {
        let bpf = self.bpf;
        let Some(c) = self.conns.get_mut(&token) else { return Vec::new() };
        if c.established {
            return Vec::new(); // already done
        }
        c.established = true;
        if bpf && !c.adopted && self.cfg.signals.backups == crate::config::BackupsAt::Prepare {
            return Vec::new();
        }
        c.backups = true;
        self.backup_actions(now, token, None)
    }

    /// The SUBFLOW_CREATE commands for the LL pairs without a subflow yet:
    /// as backups, or, when the connection has already decided to switch
    /// (`decided`), active on the lanes the switch takes (every LL lane, or
    /// under `switch_to = "cheapest"` the chosen one), which spares their
    /// SET_FLAGS and lets data onto them from the handshake on.
    fn backup_actions(&mut self, now: Instant, token: u32, decided: Option<Option<LaneId>>) -> Vec<Action> {
        let t = self.t(now);
        let policy = self.policy_name();
        let cheapest = self.cfg.switch_to == SwitchTo::Cheapest;
        let Some(c) = self.conns.get_mut(&token) else { return Vec::new() };
        if c.server_side {
            return Vec::new();
        }
        for s in c.ll.iter_mut().filter(|s| s.established.is_none()) {
            s.opened_active =
                decided.is_some_and(|chosen| !cheapest || chosen.is_none_or(|ch| ch == s.pair.lane));
        }
        let c = &self.conns[&token];
        let age_ms = ms(now.saturating_since(c.created));
        let mut out = Vec::new();
        for s in c.ll.iter().filter(|s| s.established.is_none()) {
            let active = s.opened_active;
            let flags = if active { 0 } else { flags::BACKUP };
            let local = PmAddr::ip(s.pair.local).with_id(self.cfg.address_id(s.pair.lane)).with_flags(flags);
            let remote = PmAddr::ip(s.pair.remote).with_port(c.remote.port());
            out.push(Action::Apply {
                commands: vec![PmCommand::SubflowCreate { token, local, remote }],
                record: DecisionRecord {
                    t,
                    token,
                    age_ms,
                    policy: policy.clone(),
                    action: if active { DecisionAction::OpenActive } else { DecisionAction::OpenBackup },
                    reason: None,
                    lane: Some(self.cfg.lane_name(s.pair.lane).to_string()),
                    cost_sl: None,
                    cost_ll: None,
                    subflows: vec![format!(
                        "{} -> {}",
                        s.pair.local,
                        SocketAddr::new(s.pair.remote, c.remote.port())
                    )],
                    ok: true,
                    error: None,
                    signal_ms: None,
                    signal_ktime_ns: None,
                },
            });
        }
        out
    }

    /// The kernel refused an LL backup because the connection is not fully
    /// established (SUBFLOW_CREATE → ENOTCONN): the MPTCP handshake's last
    /// step or the socket's state change is still pending — seen under load
    /// 45–90 ms after ESTABLISHED — or the connection is already closing (a
    /// short flow that finished). Most such connections never need LL, so
    /// nothing is retried now: [`Tracker::retries_due`] asks again only once
    /// the connection's switch is pending. False when the connection is
    /// unknown or out of retries.
    pub fn backup_not_ready(&mut self, token: u32) -> bool {
        let Some(c) = self.conns.get_mut(&token) else { return false };
        c.backup_refused = true;
        c.open_retries < RETRIES
    }

    /// The kernel answered a switch's SET_FLAGS with "subflow not found": a
    /// join reported by SUB_ESTABLISHED can reach the connection's subflow
    /// list a moment later (the kernel defers it while the application holds
    /// the socket). The switch is applied again after [`RETRY_DELAY`],
    /// at most [`RETRIES`] times; false when that is not possible.
    pub fn switch_not_ready(&mut self, now: Instant, token: u32) -> bool {
        let Some(c) = self.conns.get_mut(&token) else { return false };
        let (SwitchState::Done, Some(d)) = (&c.switch, c.applied) else { return false };
        if c.switch_retries >= RETRIES {
            return false;
        }
        c.switch_retries += 1;
        c.switch_retry_at = Some(now + RETRY_DELAY);
        c.switch = SwitchState::Pending(d);
        true
    }

    /// SUBFLOW_CREATEs again for connections whose switch waits on an LL
    /// backup the kernel refused earlier (see [`Tracker::backup_not_ready`]).
    pub fn retries_due(&mut self, now: Instant) -> Vec<Action> {
        let due: Vec<u32> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.backup_refused
                    && matches!(c.switch, SwitchState::Pending(_))
                    && c.open_retries < RETRIES
                    && c.open_retry_at.is_none_or(|at| at <= now)
            })
            .map(|(t, _)| *t)
            .collect();
        let mut out = Vec::new();
        let switches: Vec<(u32, Decision)> = self
            .conns
            .iter()
            .filter(|(_, c)| c.switch_retry_at.is_some_and(|at| at <= now))
            .filter_map(|(t, c)| match c.switch {
                SwitchState::Pending(d) => Some((*t, d)),
                _ => None,
            })
            .collect();
        for (token, d) in switches {
            if let Some(c) = self.conns.get_mut(&token) {
                c.switch_retry_at = None;
            }
            out.extend(self.apply_switch(now, token, d));
        }
        for token in due {
            if let Some(c) = self.conns.get_mut(&token) {
                c.backup_refused = false;
                c.open_retries += 1;
                c.open_retry_at = Some(now + RETRY_DELAY);
            }
            let decided = self.conns.get(&token).and_then(|c| match c.switch {
                SwitchState::Pending(Decision::SwitchToLong { lane, .. }) => Some(lane),
                _ => None,
            });
            out.extend(self.backup_actions(now, token, decided));
        }
        out
    }

    fn switch_record(
        &self,
        now: Instant,
        token: u32,
        d: &Decision,
        action: DecisionAction,
    ) -> DecisionRecord {
        let (reason, lane, age_ms, costs) = match d {
            Decision::SwitchToLong { reason, lane, age_ms, costs } => (Some(*reason), *lane, *age_ms, *costs),
            Decision::Stay => (None, None, 0.0, None),
        };
        DecisionRecord {
            t: self.t(now),
            token,
            age_ms,
            policy: self.policy_name(),
            action,
            reason: reason.map(|r| match r {
                Reason::Deadline => "deadline".to_string(),
                Reason::LinkCost => "link_cost".to_string(),
                Reason::Size => "size".to_string(),
            }),
            lane: lane.map(|l| self.cfg.lane_name(l).to_string()),
            cost_sl: costs.map(|c| c.sl),
            cost_ll: costs.map(|c| c.ll),
            subflows: Vec::new(),
            ok: true,
            error: None,
            signal_ms: None,
            signal_ktime_ns: self.conns.get(&token).and_then(|c| c.signal_ktime_ns),
        }
    }

    /// An LL subflow that came up after its connection switched (with BPF
    /// signals the backups open late, so a switch may find only the first
    /// one up): made active too when the switch would have taken it —
    /// every LL lane, or under `switch_to = "cheapest"` the chosen one.
    fn activate(
        &self,
        now: Instant,
        token: u32,
        lane: LaneId,
        l: SocketAddr,
        r: SocketAddr,
    ) -> Option<Action> {
        let c = self.conns.get(&token)?;
        let chosen = match c.applied {
            Some(Decision::SwitchToLong { lane, .. }) => lane,
            _ => None,
        };
        if self.cfg.switch_to == SwitchTo::Cheapest && chosen.is_some_and(|ch| ch != lane) {
            return None;
        }
        // Opened active (decided before it was opened): already so.
        if c.ll.iter().any(|s| s.established == Some((l, r)) && s.opened_active) {
            return None;
        }
        let d = c.applied?;
        let mut record = self.switch_record(now, token, &d, DecisionAction::Activate);
        record.lane = Some(self.cfg.lane_name(lane).to_string());
        record.subflows = vec![format!("{l} -> {r} active")];
        record.signal_ktime_ns = None;
        let commands = vec![PmCommand::SetFlags {
            token,
            local: PmAddr::sock(l).with_flags(0),
            remote: PmAddr::sock(r),
        }];
        Some(Action::Apply { commands, record })
    }

    /// Applies a switch decision, or records it as pending while no LL
    /// subflow is up.
    fn apply_switch(&mut self, now: Instant, token: u32, d: Decision) -> Vec<Action> {
        let Some(c) = self.conns.get(&token) else { return Vec::new() };
        let chosen = match d {
            Decision::SwitchToLong { lane, .. } => lane,
            Decision::Stay => return Vec::new(),
        };
        let up: Vec<&LlSubflow> = c.ll.iter().filter(|s| s.established.is_some()).collect();
        let active: Vec<&LlSubflow> = match (self.cfg.switch_to, chosen) {
            (SwitchTo::Cheapest, Some(l)) if up.iter().any(|s| s.pair.lane == l) => {
                up.into_iter().filter(|s| s.pair.lane == l).collect()
            }
            _ => up,
        };
        if active.is_empty() {
            let first = !matches!(c.switch, SwitchState::Pending(_));
            let rec = self.switch_record(now, token, &d, DecisionAction::SwitchPending);
            if let Some(c) = self.conns.get_mut(&token) {
                c.switch = SwitchState::Pending(d);
            }
            return if first { vec![Action::Emit(Record::Decision(rec))] } else { Vec::new() };
        }
        let mut commands = Vec::new();
        let mut subflows = Vec::new();
        for s in &active {
            if let Some((l, r)) = s.established {
                // One opened active is already so: nothing to send.
                if !s.opened_active {
                    commands.push(PmCommand::SetFlags {
                        token,
                        local: PmAddr::sock(l).with_flags(0),
                        remote: PmAddr::sock(r),
                    });
                }
                subflows.push(format!("{l} -> {r} active"));
            }
        }
        commands.push(PmCommand::SetFlags {
            token,
            local: PmAddr::sock(c.local).with_flags(flags::BACKUP),
            remote: PmAddr::sock(c.remote),
        });
        subflows.push(format!("{} -> {} backup", c.local, c.remote));
        let mut record = self.switch_record(now, token, &d, DecisionAction::Switch);
        record.subflows = subflows;
        if let Some(c) = self.conns.get_mut(&token) {
            c.switch = SwitchState::Done;
            c.applied = Some(d);
        }
        vec![Action::Apply { commands, record }]
    }

    /// Handles one sock_diag reading of every TCP socket on the configured
    /// local addresses: updates costs and runs the policy.
    pub fn on_readings(&mut self, now: Instant, readings: &[Reading]) -> Vec<Action> {
        // Which sockets had data acknowledged since the last reading (a
        // fresh RTT sample), and which received data (a connection only
        // receiving, e.g. accepted here for an upload, is transferring too,
        // as the BPF program counts every segment either way).
        let mut counters = HashMap::with_capacity(readings.len());
        let mut fresh: Vec<(Reading, bool)> = Vec::with_capacity(readings.len());
        let mut receiving = Vec::new();
        for r in readings {
            let (acked, received) = self.counters.get(&r.cookie).copied().unwrap_or((0, 0));
            if r.bytes_received > received {
                receiving.push(r.cookie);
            }
            counters.insert(r.cookie, (r.bytes_acked, r.bytes_received));
            fresh.push((*r, r.bytes_acked > acked));
        }
        self.counters = counters;
        // Lane-pair samples from any fresh socket on an LL pair.
        let mut pair_rtt: BTreeMap<(IpAddr, IpAddr), Duration> = BTreeMap::new();
        for (r, moved) in &fresh {
            if *moved && !r.rtt.is_zero() {
                pair_rtt.insert((r.local.ip(), r.remote.ip()), r.rtt);
            }
        }
        for k in pair_rtt.keys() {
            self.probes.entry(*k).or_default().last_fresh = Some(now);
        }
        let mut out = Vec::new();
        let mut gone = Vec::new();
        for (token, c) in self.conns.iter_mut() {
            let seen = fresh.iter().any(|(r, _)| {
                (r.local == c.local && r.remote == c.remote)
                    || c.ll.iter().any(|s| s.established == Some((r.local, r.remote)))
            });
            if seen {
                c.last_seen = now;
            } else if now.saturating_since(c.last_seen) >= FORGET_AFTER {
                gone.push(*token);
            }
        }
        for token in gone {
            self.conns.remove(&token);
            out.push(Action::Emit(Record::Warning(crate::record::Warning {
                t: self.t(now),
                message: format!(
                    "forgot connection {token:#010x}: no subflow seen for {} s (CLOSED event lost?)",
                    FORGET_AFTER.as_secs()
                ),
            })));
        }
        let tokens: Vec<u32> = self.conns.keys().copied().collect();
        for token in tokens {
            let decision = {
                let Some(c) = self.conns.get_mut(&token) else { continue };
                if !c.established || !matches!(c.switch, SwitchState::No) || (self.bpf && !c.adopted) {
                    continue;
                }
                let sl = fresh.iter().find(|(r, _)| r.local == c.local && r.remote == c.remote);
                let transferring =
                    sl.is_some_and(|(r, moved)| *moved || r.unacked > 0 || receiving.contains(&r.cookie));
                // Bytes in both directions over the connection's subflows
                // seen now (SL and any LL backup that carried data).
                let bytes: u64 = fresh
                    .iter()
                    .filter(|(r, _)| {
                        (r.local == c.local && r.remote == c.remote)
                            || c.ll.iter().any(|s| s.established == Some((r.local, r.remote)))
                    })
                    .map(|(r, _)| r.bytes_acked.saturating_add(r.bytes_received))
                    .fold(0u64, u64::saturating_add);
                let by_size = c.switcher.on_bytes(now, bytes);
                if !matches!(by_size, Decision::Stay) {
                    by_size
                } else {
                    match self.cfg.switch.policy {
                        Policy::Deadline => c.switcher.on_tick(now, transferring),
                        // Under `size` the samples only keep the costs that
                        // pick the lane (on_sample never switches there).
                        Policy::LinkCost | Policy::Size => {
                            let mut d = Decision::Stay;
                            if let Some((r, true)) = sl {
                                if !r.rtt.is_zero() {
                                    d = c.switcher.on_sample(now, c.sl_lane, r.rtt);
                                }
                            }
                            if matches!(d, Decision::Stay) {
                                for s in &c.ll {
                                    if let Some(rtt) = pair_rtt.get(&(s.pair.local, s.pair.remote)) {
                                        d = c.switcher.on_sample(now, s.pair.lane, *rtt);
                                        if !matches!(d, Decision::Stay) {
                                            break;
                                        }
                                    }
                                }
                            }
                            d
                        }
                    }
                }
            };
            if !matches!(decision, Decision::Stay) {
                out.extend(self.apply_switch(now, token, decision));
            }
        }
        out
    }

    /// A signal of the BPF program (`crate::bpf`): the connection the
    /// subflow `sig.local → sig.remote` belongs to reached its size
    /// threshold or deadline, or its cheapest lane became a Long-flow Lane.
    /// The program computed the costs; the switch is applied at once (or
    /// waits for an LL subflow) exactly like one decided here. A signal
    /// for a connection not managed or already switched changes nothing.
    ///
    /// The backup LL subflows are opened at the program's
    /// [`crate::bpf::Kind::Prepare`] (half the threshold or deadline), or
    /// with the decision when it comes first (a link-cost switch early in a
    /// connection's life): the switch then waits for them as pending.
    pub fn on_signal(&mut self, now: Instant, sig: &crate::bpf::Signal) -> Vec<Action> {
        use crate::bpf::Kind;
        use tcpaccel_core::lanes::bpf::SignalKind;
        let found = self.conns.iter_mut().find(|(_, c)| {
            (c.local == sig.local && c.remote == sig.remote)
                || c.ll.iter().any(|s| s.established == Some((sig.local, sig.remote)))
        });
        let Some((&token, c)) = found else { return Vec::new() };
        if !matches!(c.switch, SwitchState::No) {
            return Vec::new();
        }
        let mut out = Vec::new();
        if !matches!(sig.kind, Kind::Prepare) {
            c.signal_ktime_ns = Some(sig.ktime_ns);
        }
        let reason = match sig.kind {
            Kind::Prepare => None,
            Kind::Decision(SignalKind::Size) => Some(Reason::Size),
            Kind::Decision(SignalKind::Deadline) => Some(Reason::Deadline),
            Kind::Decision(SignalKind::LinkCost) => Some(Reason::LinkCost),
        };
        // The program names a lane by slot; one this peer has no pair on
        // (another peer's LL) falls back to the first of this peer's.
        let lane = sig
            .lane
            .filter(|l| c.ll.iter().any(|s| s.pair.lane == *l))
            .or_else(|| c.ll.first().map(|s| s.pair.lane));
        if !c.backups {
            c.backups = true;
            // Decided before any backup: the LL subflows the switch takes
            // open active (the switch then only makes SL a backup).
            out = self.backup_actions(now, token, reason.map(|_| lane));
        }
        let Some(reason) = reason else { return out };
        let d = Decision::SwitchToLong { reason, lane, age_ms: sig.age_ms, costs: sig.costs };
        out.extend(self.apply_switch(now, token, d));
        out
    }

    /// LL lane pairs that need an active probe now (link-cost policy only):
    /// pairs of unswitched connections with no traffic sample and no probe
    /// within `probe.interval`. Marks them in flight.
    pub fn probes_due(&mut self, now: Instant) -> Vec<(IpAddr, IpAddr)> {
        if self.cfg.switch.policy != Policy::LinkCost || !self.cfg.probe.enabled {
            return Vec::new();
        }
        let every = self.cfg.probe.interval;
        let mut due = Vec::new();
        for c in self.conns.values() {
            if !c.established || !matches!(c.switch, SwitchState::No) {
                continue;
            }
            for s in &c.ll {
                let key = (s.pair.local, s.pair.remote);
                // With BPF signals one probe per lane: the program keeps one
                // sample per LL lane, applied to every connection on it.
                let st = match self.bpf && !c.adopted {
                    true => self.lane_probes.entry(s.pair.lane).or_default(),
                    false => self.probes.entry(key).or_default(),
                };
                let recent = |t: Option<Instant>| t.is_some_and(|t| now.saturating_since(t) < every);
                if st.in_flight || recent(st.last_sent) || recent(st.last_fresh) {
                    continue;
                }
                st.in_flight = true;
                st.last_sent = Some(now);
                due.push(key);
            }
        }
        due
    }

    /// A probe's result: the handshake time, or `None` when it failed or
    /// timed out.
    pub fn on_probe(&mut self, now: Instant, pair: (IpAddr, IpAddr), rtt: Option<Duration>) -> Vec<Action> {
        if let Some(st) = self.probes.get_mut(&pair) {
            st.in_flight = false;
        }
        let Some(rtt) = rtt.filter(|r| !r.is_zero()) else { return Vec::new() };
        let mut out = Vec::new();
        let tokens: Vec<u32> = self.conns.keys().copied().collect();
        for token in tokens {
            let decision = {
                let Some(c) = self.conns.get_mut(&token) else { continue };
                if !c.established || !matches!(c.switch, SwitchState::No) {
                    continue;
                }
                let Some(s) = c.ll.iter().find(|s| (s.pair.local, s.pair.remote) == pair) else { continue };
                let lane = s.pair.lane;
                c.switcher.on_sample(now, lane, rtt)
            };
            if !matches!(decision, Decision::Stay) {
                out.extend(self.apply_switch(now, token, decision));
            }
        }
        out
    }

    /// A probe's result when the BPF program keeps the costs: the probe is
    /// no longer in flight; returns the LL lane of the pair, whose sample
    /// the shell hands to the program.
    pub fn probe_done(&mut self, pair: (IpAddr, IpAddr)) -> Option<LaneId> {
        if let Some(st) = self.probes.get_mut(&pair) {
            st.in_flight = false;
        }
        let lane = self
            .cfg
            .peers
            .iter()
            .flat_map(|p| p.ll.iter())
            .find(|s| (s.local, s.remote) == pair)
            .map(|s| s.lane);
        if let Some(st) = lane.and_then(|l| self.lane_probes.get_mut(&l)) {
            st.in_flight = false;
        }
        lane
    }

    /// Whether [`Tracker::probes_due`] may have work: link-cost with probes
    /// on and an established, unswitched connection (the shell's loop need
    /// not wake for probes otherwise).
    pub fn may_probe(&self) -> bool {
        self.cfg.switch.policy == Policy::LinkCost
            && self.cfg.probe.enabled
            && self.conns.values().any(|c| c.established && matches!(c.switch, SwitchState::No))
    }

    /// Whether a switch waits for an LL subflow (its SUB_ESTABLISHED event
    /// applies it).
    pub fn switch_pending(&self) -> bool {
        self.conns.values().any(|c| matches!(c.switch, SwitchState::Pending(_)))
    }

    /// Whether a refused backup or switch waits for [`Tracker::retries_due`].
    pub fn retry_pending(&self) -> bool {
        self.conns.values().any(|c| {
            c.switch_retry_at.is_some() || (c.backup_refused && matches!(c.switch, SwitchState::Pending(_)))
        })
    }

    /// The peer index a managed connection belongs to (for tests and logs).
    pub fn peer_of(&self, token: u32) -> Option<usize> {
        self.conns.get(&token).map(|c| c.peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    const CFG: &str = r#"
        [policy]
        kind = "deadline"
        [[peer]]
        sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]
        ll = [{ local = "10.2.0.1", remote = "10.2.0.2" }, { local = "10.3.0.1", remote = "10.3.0.2" }]
    "#;

    fn cfg(kind: &str) -> Config {
        Config::parse(&CFG.replace("deadline", kind), "t").unwrap()
    }

    fn ev(kind: EventKind, token: u32, l: &str, r: &str) -> Event {
        let l: SocketAddr = l.parse().unwrap();
        let r: SocketAddr = r.parse().unwrap();
        Event {
            token: Some(token),
            family: Some(2),
            saddr: Some(l.ip()),
            daddr: Some(r.ip()),
            sport: Some(l.port()),
            dport: Some(r.port()),
            backup: Some(false),
            ..Event::new(kind)
        }
    }

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    fn commands(actions: &[Action]) -> Vec<PmCommand> {
        actions
            .iter()
            .flat_map(|a| match a {
                Action::Apply { commands, .. } => commands.clone(),
                Action::Emit(_) => Vec::new(),
            })
            .collect()
    }

    fn decisions(actions: &[Action]) -> Vec<DecisionRecord> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Apply { record, .. } => Some(record.clone()),
                Action::Emit(Record::Decision(d)) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }

    fn reading(cookie: u64, l: &str, r: &str, rtt_ms: u64, acked: u64) -> Reading {
        Reading {
            cookie,
            local: l.parse().unwrap(),
            remote: r.parse().unwrap(),
            rtt: Duration::from_millis(rtt_ms),
            bytes_acked: acked,
            bytes_received: 0,
            unacked: 0,
        }
    }

    /// A connection on SL, established, with both LL subflows up.
    fn established(tr: &mut Tracker, token: u32) -> Vec<Action> {
        let sl = ("10.1.0.1:40000", "10.1.0.2:5201");
        assert!(tr.on_event(at(0), &ev(EventKind::Created, token, sl.0, sl.1)).len() == 1);
        let a = tr.on_event(at(5), &ev(EventKind::Established, token, sl.0, sl.1));
        tr.on_event(at(8), &ev(EventKind::SubEstablished, token, "10.2.0.1:40001", "10.2.0.2:5201"));
        tr.on_event(at(8), &ev(EventKind::SubEstablished, token, "10.3.0.1:40002", "10.3.0.2:5201"));
        a
    }

    #[test]
    fn refused_joins_are_warned_about_once_per_peer_address_with_the_cause() {
        let mut tr = Tracker::new(cfg("deadline"), at(0));
        let sl = ("10.1.0.1:40000", "10.1.0.2:5201");
        tr.on_event(at(0), &ev(EventKind::Created, 7, sl.0, sl.1));
        tr.on_event(at(5), &ev(EventKind::Established, 7, sl.0, sl.1));
        let refused = |port: u16| Event {
            error: Some(111),
            ..ev(EventKind::SubClosed, 7, &format!("10.2.0.1:{port}"), "10.2.0.2:5201")
        };
        let warnings = |a: &[Action]| -> Vec<String> {
            a.iter()
                .filter_map(|a| match a {
                    Action::Emit(Record::Warning(w)) => Some(w.message.clone()),
                    _ => None,
                })
                .collect()
        };
        let first = warnings(&tr.on_event(at(10), &refused(40001)));
        assert_eq!(first.len(), 1, "{first:?}");
        assert!(first[0].contains("10.2.0.2:5201") && first[0].contains("0.0.0.0"), "{}", first[0]);
        assert!(first[0].contains("10.1.0.2"), "names the SL address the listener is bound to: {}", first[0]);
        assert!(warnings(&tr.on_event(at(20), &refused(40002))).is_empty(), "once per peer address");
        // A subflow closed without an error, or on an address not of this
        // connection's LL pairs, is no refused join.
        let closed = ev(EventKind::SubClosed, 7, "10.3.0.1:40003", "10.3.0.2:5201");
        assert!(warnings(&tr.on_event(at(30), &closed)).is_empty());
    }

    #[test]
    fn opens_one_backup_subflow_per_ll_pair_with_fixed_ids() {
        let mut tr = Tracker::new(cfg("deadline"), at(0));
        let a = established(&mut tr, 7);
        let cmds = commands(&a);
        assert_eq!(cmds.len(), 2, "one per LL pair, no mesh: {cmds:?}");
        for (i, c) in cmds.iter().enumerate() {
            let PmCommand::SubflowCreate { token, local, remote } = c else { panic!("{c:?}") };
            assert_eq!(*token, 7);
            assert_eq!(local.id, Some(i as u8 + 1));
            assert_eq!(local.flags, Some(flags::BACKUP));
            assert_eq!(local.port, None);
            assert_eq!(remote.port, Some(5201), "joins the connection's server port");
        }
        assert_eq!(decisions(&a)[0].action, DecisionAction::OpenBackup);
        // A second ESTABLISHED does not open more.
        let again = tr.on_event(at(9), &ev(EventKind::Established, 7, "10.1.0.1:40000", "10.1.0.2:5201"));
        assert!(commands(&again).is_empty());
    }

    fn signal(kind: tcpaccel_core::lanes::bpf::SignalKind, l: &str, r: &str) -> crate::bpf::Signal {
        crate::bpf::Signal {
            kind: crate::bpf::Kind::Decision(kind),
            lane: Some(LaneId::long(1)),
            age_ms: 12.5,
            bytes: 1_000_000,
            costs: Some(tcpaccel_core::lanes::Costs { sl: 4.0, ll: 2.0 }),
            local: l.parse().unwrap(),
            remote: r.parse().unwrap(),
            ktime_ns: 0,
        }
    }

    #[test]
    fn a_bpf_signal_switches_its_connection_at_once_and_only_once() {
        use tcpaccel_core::lanes::bpf::SignalKind;
        let mut tr = Tracker::new(cfg("link-cost"), at(0));
        tr.use_bpf_signals();
        established(&mut tr, 7);
        assert!(!tr.wants_readings(), "no sock_diag while BPF decides every connection");
        // A signal from a subflow of no managed connection changes nothing.
        let stray = signal(SignalKind::Size, "10.1.0.1:49999", "10.1.0.2:5201");
        assert!(tr.on_signal(at(9), &stray).is_empty());
        // The program's lane and costs go into the switch: the chosen LL
        // active, SL backup, in that order.
        let a = tr.on_signal(at(10), &signal(SignalKind::LinkCost, "10.1.0.1:40000", "10.1.0.2:5201"));
        let d = decisions(&a);
        assert_eq!(d.len(), 1, "{a:?}");
        assert_eq!((d[0].action, d[0].reason.as_deref()), (DecisionAction::Switch, Some("link_cost")));
        assert_eq!((d[0].lane.as_deref(), d[0].cost_sl, d[0].cost_ll), (Some("ll1"), Some(4.0), Some(2.0)));
        assert_eq!(d[0].age_ms, 12.5);
        let cmds = commands(&a);
        let PmCommand::SetFlags { local, .. } = cmds.last().unwrap() else { panic!("{cmds:?}") };
        assert_eq!(local.flags, Some(flags::BACKUP), "SL made backup last");
        // A later signal (e.g. from an LL subflow's ACK) does nothing more.
        let again = signal(SignalKind::Size, "10.2.0.1:40001", "10.2.0.2:5201");
        assert!(tr.on_signal(at(20), &again).is_empty());
        // Readings judge only adopted connections now: 7 is not.
        let r = reading(1, "10.1.0.1:40000", "10.1.0.2:5201", 5, 10_000_000);
        assert!(decisions(&tr.on_readings(at(30), &[r])).is_empty());
    }

    #[test]
    fn with_bpf_signals_backups_open_at_the_programs_prepare_or_with_an_early_decision() {
        use crate::bpf::Kind;
        use tcpaccel_core::lanes::bpf::SignalKind;
        let mut tr = Tracker::new(cfg("link-cost"), at(0));
        tr.use_bpf_signals();
        let sl = ("10.1.0.1:40000", "10.1.0.2:5201");
        tr.on_event(at(0), &ev(EventKind::Created, 7, sl.0, sl.1));
        let a = tr.on_event(at(5), &ev(EventKind::Established, 7, sl.0, sl.1));
        assert!(commands(&a).is_empty(), "no backup before the program asks: {a:?}");
        let mut prep = signal(SignalKind::Size, sl.0, sl.1);
        prep.kind = Kind::Prepare;
        let a = tr.on_signal(at(10), &prep);
        assert_eq!(commands(&a).len(), 2, "one backup per LL pair: {a:?}");
        assert!(decisions(&a).iter().all(|d| d.action == DecisionAction::OpenBackup));
        assert!(tr.on_signal(at(11), &prep).is_empty(), "opened once");

        // A decision before any prepare: backups and a pending switch, which
        // the LL subflow's event applies, timed from the signal.
        tr.on_event(at(0), &ev(EventKind::Created, 8, "10.1.0.1:40010", sl.1));
        tr.on_event(at(5), &ev(EventKind::Established, 8, "10.1.0.1:40010", sl.1));
        let mut early = signal(SignalKind::LinkCost, "10.1.0.1:40010", sl.1);
        early.ktime_ns = 42;
        let a = tr.on_signal(at(12), &early);
        assert_eq!(commands(&a).len(), 2, "{a:?}");
        let d = decisions(&a);
        assert_eq!(d.last().map(|d| d.action), Some(DecisionAction::SwitchPending), "{a:?}");
        // Decided first: the LL subflows open active (no backup flag).
        assert_eq!(d.iter().filter(|d| d.action == DecisionAction::OpenActive).count(), 2, "{a:?}");
        assert!(commands(&a)
            .iter()
            .all(|c| matches!(c, PmCommand::SubflowCreate { local, .. } if local.flags == Some(0))));
        assert!(tr.switch_pending());
        let a = tr.on_event(at(15), &ev(EventKind::SubEstablished, 8, "10.3.0.1:40011", "10.3.0.2:5201"));
        let d = decisions(&a);
        assert_eq!((d[0].action, d[0].signal_ktime_ns), (DecisionAction::Switch, Some(42)));
        assert!(!tr.switch_pending());
        // Only SL is set: the LL subflow is active already.
        let cmds = commands(&a);
        let [PmCommand::SetFlags { local, .. }] = cmds.as_slice() else { panic!("{cmds:?}") };
        assert_eq!((local.port, local.flags), (Some(40010), Some(flags::BACKUP)));
        // The other LL subflow comes up after the switch, active from its
        // handshake: nothing to do.
        let a = tr.on_event(at(16), &ev(EventKind::SubEstablished, 8, "10.2.0.1:40012", "10.2.0.2:5201"));
        assert!(commands(&a).is_empty() && decisions(&a).is_empty(), "{a:?}");
    }

    #[test]
    fn with_bpf_signals_one_probe_per_ll_lane_serves_every_peer() {
        let text = CFG.replace("deadline", "link-cost")
            + r#"
        [[peer]]
        sl = [{ local = "10.1.0.1", remote = "10.1.0.3" }]
        ll = [{ local = "10.2.0.1", remote = "10.2.0.3" }, { local = "10.3.0.1", remote = "10.3.0.3" }]
        "#;
        let run = |bpf: bool| {
            let mut tr = Tracker::new(Config::parse(&text, "t").unwrap(), at(0));
            if bpf {
                tr.use_bpf_signals();
            }
            for (tok, peer) in [(1, "10.1.0.2:5201"), (2, "10.1.0.3:5201")] {
                tr.on_event(at(0), &ev(EventKind::Created, tok, "10.1.0.1:40000", peer));
                tr.on_event(at(1), &ev(EventKind::Established, tok, "10.1.0.1:40000", peer));
            }
            let first = tr.probes_due(at(10));
            for p in &first {
                tr.probe_done(*p);
            }
            (first.len(), tr.probes_due(at(11)).len(), tr.probes_due(at(70)).len())
        };
        assert_eq!(run(false), (4, 0, 4), "sock_diag path: every pair of every peer");
        assert_eq!(run(true), (2, 0, 2), "BPF path: one pair per LL lane, again after probe.interval");
    }

    #[test]
    fn with_bpf_signals_adopted_connections_are_still_judged_by_readings() {
        let mut tr = Tracker::new(cfg("deadline"), at(0));
        tr.use_bpf_signals();
        let existing = [Existing {
            token: 3,
            server_side: false,
            subflows: vec![ExistingSubflow {
                local: "10.1.0.1:40000".parse().unwrap(),
                remote: "10.1.0.2:5201".parse().unwrap(),
                initial: true,
                backup: false,
            }],
        }];
        tr.adopt(at(0), &existing);
        assert!(tr.wants_readings(), "an adopted, unswitched connection needs readings");
        tr.on_event(at(5), &ev(EventKind::SubEstablished, 3, "10.2.0.1:40001", "10.2.0.2:5201"));
        let r = |acked| reading(1, "10.1.0.1:40000", "10.1.0.2:5201", 5, acked);
        assert!(decisions(&tr.on_readings(at(100), &[r(1000)])).is_empty());
        let d = decisions(&tr.on_readings(at(320), &[r(2000)]));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].reason.as_deref(), Some("deadline"));
        assert!(!tr.wants_readings(), "switched: readings no longer needed");
    }

    #[test]
    fn size_policy_switches_a_connection_once_it_moved_the_threshold() {
        let text = CFG.replace("kind = \"deadline\"", "kind = \"size\"\nsize_threshold = \"1MB\"");
        let mut tr = Tracker::new(Config::parse(&text, "t").unwrap(), at(0));
        established(&mut tr, 7);
        let sl = ("10.1.0.1:40000", "10.1.0.2:5201");
        let sl8 = ("10.1.0.1:40010", "10.1.0.2:5201");
        tr.on_event(at(0), &ev(EventKind::Created, 8, sl8.0, sl8.1));
        tr.on_event(at(5), &ev(EventKind::Established, 8, sl8.0, sl8.1));
        tr.on_event(at(8), &ev(EventKind::SubEstablished, 8, "10.2.0.1:40011", "10.2.0.2:5201"));
        let mut r8 = reading(2, sl8.0, sl8.1, 5, 0);
        r8.bytes_received = 64_000; // a 64 KB download: stays on SL forever
        for (t, acked) in [(20, 300_000), (40, 999_999)] {
            let a = tr.on_readings(at(t), &[reading(1, sl.0, sl.1, 5, acked), r8]);
            assert!(decisions(&a).is_empty(), "t={t}: {a:?}");
        }
        // Data on an LL backup counts too: 999 999 + 1 on SL+LL crosses 1 MB.
        let ll = reading(3, "10.2.0.1:40001", "10.2.0.2:5201", 5, 1);
        let a = tr.on_readings(at(60), &[reading(1, sl.0, sl.1, 5, 999_999), ll, r8]);
        let d = decisions(&a);
        assert_eq!(d.len(), 1, "{a:?}");
        assert_eq!(
            (d[0].token, d[0].action, d[0].reason.as_deref()),
            (7, DecisionAction::Switch, Some("size"))
        );
        assert!(
            decisions(&tr.on_readings(at(5000), &[r8])).is_empty(),
            "64 KB never switches, whatever its age"
        );
    }

    #[test]
    fn reload_applies_a_new_deadline_to_live_connections_and_refuses_new_lanes() {
        let mut named = cfg("deadline");
        named.name_lanes(|a| Some(format!("if-{a}")));
        let mut tr = Tracker::new(named, at(0));
        established(&mut tr, 7);
        let sl = ("10.1.0.1:40000", "10.1.0.2:5201");
        let r = |a| [reading(1, sl.0, sl.1, 5, a)];
        tr.on_readings(at(100), &r(10));
        assert!(decisions(&tr.on_readings(at(200), &r(20))).is_empty(), "300 ms deadline not reached");
        let shorter = Config::parse(
            &CFG.replace("kind = \"deadline\"", "kind = \"deadline\"\nt_deadline = \"150ms\""),
            "t",
        )
        .unwrap();
        match tr.reload(at(210), shorter) {
            Record::Reload(r) => {
                assert!(r.ok, "{r:?}");
                assert_eq!((r.reconfigured, r.t_deadline_ms), (1, 150.0));
            }
            other => panic!("{other:?}"),
        }
        let a = tr.on_readings(at(220), &r(30));
        assert_eq!(decisions(&a)[0].action, DecisionAction::Switch, "the live connection follows 150 ms");
        // The file read again names no interfaces: the lanes keep theirs.
        assert_eq!(tr.config().lane_name(LaneId::long(0)), "if-10.2.0.1");
        // Lanes name the subflows already open: refused, old config stays.
        let moved = Config::parse(&CFG.replace("10.3.0.1", "10.4.0.1"), "t").unwrap();
        match tr.reload(at(230), moved) {
            Record::Reload(r) => {
                assert!(!r.ok);
                assert!(r.error.as_deref().unwrap().contains("peers"), "{r:?}");
                assert_eq!(r.t_deadline_ms, 150.0);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(tr.config().switch.t_deadline, Duration::from_millis(150));
    }

    #[test]
    fn refused_backups_are_asked_for_again_only_when_a_switch_waits_on_them() {
        let mut tr = Tracker::new(cfg("deadline"), at(0));
        let sl = ("10.1.0.1:40000", "10.1.0.2:5201");
        tr.on_event(at(0), &ev(EventKind::Created, 7, sl.0, sl.1));
        let a = tr.on_event(at(5), &ev(EventKind::Established, 7, sl.0, sl.1));
        assert_eq!(commands(&a).len(), 2);
        // Both refused (not fully established yet): nothing until a switch waits.
        assert!(tr.backup_not_ready(7));
        assert!(commands(&tr.retries_due(at(100))).is_empty(), "no switch pending yet");
        let r = |a| [reading(1, sl.0, sl.1, 5, a)];
        tr.on_readings(at(100), &r(10));
        let a = tr.on_readings(at(320), &r(20));
        assert_eq!(decisions(&a)[0].action, DecisionAction::SwitchPending);
        let again = tr.retries_due(at(321));
        assert_eq!(commands(&again).len(), 2, "both LL pairs again");
        // The switch waits on them: they open active, not as backups.
        assert!(decisions(&again).iter().all(|d| d.action == DecisionAction::OpenActive), "{again:?}");
        assert!(
            commands(&again)
                .iter()
                .all(|c| matches!(c, PmCommand::SubflowCreate { local, .. } if local.flags == Some(0))),
            "{again:?}"
        );
        let delay = RETRY_DELAY.as_millis() as u64;
        assert!(commands(&tr.retries_due(at(321 + delay))).is_empty(), "only after a new refusal");
        // Refused again: asked again after the delay, at most RETRIES times.
        assert!(tr.backup_not_ready(7));
        assert!(commands(&tr.retries_due(at(321 + delay - 1))).is_empty(), "not before the delay");
        assert_eq!(commands(&tr.retries_due(at(321 + delay))).len(), 2);
        for i in 3..=RETRIES {
            assert!(tr.backup_not_ready(7), "retry {i}");
            assert_eq!(commands(&tr.retries_due(at(400 + u64::from(i) * 20))).len(), 2, "retry {i}");
        }
        assert!(!tr.backup_not_ready(7), "out of retries");
        assert!(commands(&tr.retries_due(at(3000))).is_empty());
        // A pair that comes up at last carries the pending switch.
        let a = tr.on_event(at(3001), &ev(EventKind::SubEstablished, 7, "10.2.0.1:40001", "10.2.0.2:5201"));
        assert_eq!(decisions(&a)[0].action, DecisionAction::Switch);
        let cmds = commands(&a);
        let [PmCommand::SetFlags { local, .. }] = cmds.as_slice() else {
            panic!("only SL made a backup: {cmds:?}")
        };
        assert_eq!((local.port, local.flags), (Some(40000), Some(flags::BACKUP)));
        // Unknown or closed connections are not retried.
        assert!(!tr.backup_not_ready(99));
        tr.on_event(at(2001), &ev(EventKind::Closed, 7, sl.0, sl.1));
        assert!(!tr.backup_not_ready(7));
    }

    #[test]
    fn a_switch_the_kernel_cannot_apply_yet_is_applied_again() {
        let mut tr = Tracker::new(cfg("deadline"), at(0));
        let sl = ("10.1.0.1:40000", "10.1.0.2:5201");
        established(&mut tr, 4);
        let r = |a| [reading(1, sl.0, sl.1, 5, a)];
        tr.on_readings(at(100), &r(10));
        let a = tr.on_readings(at(320), &r(20));
        assert_eq!(decisions(&a)[0].action, DecisionAction::Switch);
        let first = commands(&a);
        // "subflow not found": the same commands again after the delay, bounded.
        assert!(tr.switch_not_ready(at(321), 4));
        let delay = RETRY_DELAY.as_millis() as u64;
        assert!(commands(&tr.retries_due(at(321 + delay - 1))).is_empty(), "not before the delay");
        let again = tr.retries_due(at(321 + delay));
        assert_eq!(decisions(&again)[0].action, DecisionAction::Switch);
        assert_eq!(commands(&again), first);
        assert!(commands(&tr.retries_due(at(400))).is_empty(), "once per refusal");
        for i in 2..=RETRIES {
            assert!(tr.switch_not_ready(at(400), 4), "retry {i}");
            assert_eq!(commands(&tr.retries_due(at(400 + u64::from(i) * 20))), first);
        }
        assert!(!tr.switch_not_ready(at(2000), 4), "out of retries");
        assert!(!tr.switch_not_ready(at(2000), 99), "unknown connection");
    }

    #[test]
    fn adopted_connections_keep_their_subflows_and_switch_state() {
        let mut tr = Tracker::new(cfg("deadline"), at(1000));
        let sf = |l: &str, r: &str, initial, backup| ExistingSubflow {
            local: l.parse().unwrap(),
            remote: r.parse().unwrap(),
            initial,
            backup,
        };
        let existing = [
            // Unswitched, one of its two LL backups open: the other is opened.
            Existing {
                token: 1,
                server_side: false,
                subflows: vec![
                    sf("10.1.0.1:40000", "10.1.0.2:5201", true, false),
                    sf("10.2.0.1:40001", "10.2.0.2:5201", false, true),
                ],
            },
            // Switched before a restart: nothing to open, never switched again.
            Existing {
                token: 2,
                server_side: false,
                subflows: vec![
                    sf("10.1.0.1:40100", "10.1.0.2:5201", true, true),
                    sf("10.2.0.1:40101", "10.2.0.2:5201", false, false),
                    sf("10.3.0.1:40102", "10.3.0.2:5201", false, false),
                ],
            },
            // Not on an SL pair, and a server-side one (not asked for): left alone.
            Existing {
                token: 3,
                server_side: false,
                subflows: vec![sf("10.2.0.1:1", "10.2.0.2:80", true, false)],
            },
            Existing {
                token: 4,
                server_side: true,
                subflows: vec![sf("10.1.0.1:5201", "10.1.0.2:9", true, false)],
            },
        ];
        let a = tr.adopt(at(1000), &existing);
        assert_eq!(tr.managed(), vec![1, 2]);
        let cmds = commands(&a);
        assert_eq!(cmds.len(), 1, "{a:?}");
        assert!(
            matches!(cmds[0], PmCommand::SubflowCreate { token: 1, local, .. } if local.ip.to_string() == "10.3.0.1")
        );
        let events: Vec<(u32, String)> = a
            .iter()
            .filter_map(|x| match x {
                Action::Emit(Record::Event(e)) => Some((e.token, e.event.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(events, vec![(1, "adopted".to_string()), (2, "adopted_switched".to_string())]);
        // Adopting again (a second dump) changes nothing.
        assert!(tr.adopt(at(1001), &existing).is_empty());
        // The deadline counts from adoption; the switched one stays put.
        let r = |c, l: &str, acked| reading(c, l, "10.1.0.2:5201", 5, acked);
        tr.on_readings(at(1100), &[r(1, "10.1.0.1:40000", 10), r(2, "10.1.0.1:40100", 10)]);
        let a = tr.on_readings(at(1310), &[r(1, "10.1.0.1:40000", 20), r(2, "10.1.0.1:40100", 20)]);
        let d = decisions(&a);
        assert_eq!(d.len(), 1, "{a:?}");
        assert_eq!((d[0].token, d[0].action), (1, DecisionAction::Switch));
    }

    #[test]
    fn server_side_connections_are_switched_over_the_peers_subflows_when_asked() {
        let text = CFG.replace("kind = \"deadline\"", "kind = \"deadline\"\nmanage_server_side = true");
        let mut tr = Tracker::new(Config::parse(&text, "t").unwrap(), at(0));
        // Seen from the server: local is our SL address, remote the client's.
        let (l, r) = ("10.1.0.1:5201", "10.1.0.2:40000");
        let mut e = ev(EventKind::Created, 9, l, r);
        e.server_side = Some(true);
        tr.on_event(at(0), &e);
        e.kind = EventKind::Established;
        let a = tr.on_event(at(1), &e);
        assert!(tr.is_managed(9));
        assert!(commands(&a).is_empty(), "a client has no listener for joins: no SUBFLOW_CREATE: {a:?}");
        // The client's LL join arrives; past the deadline the server switches with SET_FLAGS.
        tr.on_event(at(5), &ev(EventKind::SubEstablished, 9, "10.2.0.1:5201", "10.2.0.2:40001"));
        let rd = |acked| [reading(1, l, r, 5, acked)];
        tr.on_readings(at(100), &rd(10));
        let a = tr.on_readings(at(320), &rd(20));
        let cmds = commands(&a);
        assert!(
            !cmds.is_empty() && cmds.iter().all(|c| matches!(c, PmCommand::SetFlags { token: 9, .. })),
            "{a:?}"
        );
        assert_eq!(decisions(&a)[0].action, DecisionAction::Switch);
    }

    /// An accepted connection open before the start, receiving an upload:
    /// adopted server side (nothing opened), and past the deadline switched
    /// over the client's LL join although this end's `bytes_acked` never
    /// moves (it sends nothing): received bytes make it a transferring
    /// connection, as every segment does for the BPF program. Before, only
    /// `bytes_acked` or `unacked` did, and such a connection never switched.
    #[test]
    fn an_adopted_server_side_connection_only_receiving_is_switched_at_the_deadline() {
        let text = CFG.replace("kind = \"deadline\"", "kind = \"deadline\"\nmanage_server_side = true");
        let mut tr = Tracker::new(Config::parse(&text, "t").unwrap(), at(0));
        let (l, r) = ("10.1.0.1:5201", "10.1.0.2:40000");
        let existing = [Existing {
            token: 9,
            server_side: true,
            subflows: vec![ExistingSubflow {
                local: l.parse().unwrap(),
                remote: r.parse().unwrap(),
                initial: true,
                backup: false,
            }],
        }];
        let a = tr.adopt(at(0), &existing);
        assert!(tr.is_managed(9) && commands(&a).is_empty(), "{a:?}");
        tr.on_event(at(5), &ev(EventKind::SubEstablished, 9, "10.2.0.1:5201", "10.2.0.2:40001"));
        let rd = |received| {
            let mut x = reading(1, l, r, 5, 1);
            x.bytes_received = received;
            [x]
        };
        // Past the deadline (200 ms) with nothing received: stays.
        assert!(tr.on_readings(at(100), &rd(1_000)).is_empty());
        assert!(decisions(&tr.on_readings(at(300), &rd(1_000))).is_empty());
        let a = tr.on_readings(at(320), &rd(2_000_000));
        let d = decisions(&a);
        assert_eq!(d.len(), 1, "{a:?}");
        assert_eq!((d[0].action, d[0].reason.as_deref()), (DecisionAction::Switch, Some("deadline")));
        assert!(commands(&a).iter().all(|c| matches!(c, PmCommand::SetFlags { token: 9, .. })), "{a:?}");
    }

    #[test]
    fn connections_off_the_sl_pairs_or_server_side_are_not_managed() {
        let mut tr = Tracker::new(cfg("deadline"), at(0));
        let a = tr.on_event(at(0), &ev(EventKind::Established, 1, "10.2.0.1:1000", "10.2.0.2:80"));
        assert!(commands(&a).is_empty());
        let mut e = ev(EventKind::Established, 2, "10.1.0.1:1000", "10.1.0.2:80");
        e.server_side = Some(true);
        assert!(commands(&tr.on_event(at(0), &e)).is_empty());
        assert!(tr.managed().is_empty());
        let mut no_token = e.clone();
        no_token.token = None;
        assert!(tr.on_event(at(0), &no_token).is_empty());
    }

    #[test]
    fn deadline_switches_a_transferring_flow_ll_active_then_sl_backup() {
        let mut tr = Tracker::new(cfg("deadline"), at(0));
        established(&mut tr, 9);
        let mut acked = 0;
        let mut switched = None;
        for step in 1..=40u64 {
            acked += 100_000;
            let r = [reading(1, "10.1.0.1:40000", "10.1.0.2:5201", 5, acked)];
            let a = tr.on_readings(at(step * 20), &r);
            if !a.is_empty() {
                switched = Some((step * 20, a));
                break;
            }
        }
        let (t, a) = switched.expect("switches");
        assert_eq!(t, 300, "at t_deadline");
        let cmds = commands(&a);
        assert_eq!(cmds.len(), 3);
        let PmCommand::SetFlags { local, .. } = cmds[0] else { panic!() };
        assert_eq!((local.ip, local.port, local.flags), ("10.2.0.1".parse().unwrap(), Some(40001), Some(0)));
        let PmCommand::SetFlags { local, remote, .. } = cmds[2] else { panic!() };
        assert_eq!(local, PmAddr::sock("10.1.0.1:40000".parse().unwrap()).with_flags(flags::BACKUP));
        assert_eq!(remote.port, Some(5201));
        let d = &decisions(&a)[0];
        assert_eq!((d.action, d.reason.as_deref()), (DecisionAction::Switch, Some("deadline")));
        assert!((d.age_ms - 300.0).abs() < 1e-6);
        // Once switched, nothing more.
        acked += 1;
        assert!(tr
            .on_readings(at(900), &[reading(1, "10.1.0.1:40000", "10.1.0.2:5201", 5, acked)])
            .is_empty());
    }

    #[test]
    fn an_idle_or_finished_flow_is_never_switched() {
        let mut tr = Tracker::new(cfg("deadline"), at(0));
        established(&mut tr, 3);
        // 64 KB acked at once, then nothing moves.
        let r = [reading(1, "10.1.0.1:40000", "10.1.0.2:5201", 5, 65536)];
        for step in 1..=50u64 {
            assert!(tr.on_readings(at(step * 20), &r).is_empty(), "step {step}");
        }
        // Still there while its socket shows in the readings.
        assert!(tr.is_managed(3));
        let closed = tr.on_event(at(1000), &ev(EventKind::Closed, 3, "10.1.0.1:40000", "10.1.0.2:5201"));
        assert!(commands(&closed).is_empty());
        assert!(tr.managed().is_empty());
    }

    #[test]
    fn a_connection_whose_sockets_vanished_is_forgotten() {
        let mut tr = Tracker::new(cfg("deadline"), at(0));
        established(&mut tr, 8);
        // Idle (nothing acked, nothing in flight): seen, not switched.
        let r = [reading(1, "10.1.0.1:40000", "10.1.0.2:5201", 5, 0)];
        assert!(tr.on_readings(at(5_000), &r).is_empty());
        assert!(tr.on_readings(at(14_000), &[]).is_empty(), "seen 9 s ago: kept");
        let a = tr.on_readings(at(15_000), &[]);
        assert!(matches!(&a[..], [Action::Emit(Record::Warning(_))]), "{a:?}");
        assert!(!tr.is_managed(8));
    }

    #[test]
    fn switch_waits_for_an_ll_subflow() {
        let mut tr = Tracker::new(cfg("deadline"), at(0));
        let sl = ("10.1.0.1:40000", "10.1.0.2:5201");
        tr.on_event(at(0), &ev(EventKind::Created, 4, sl.0, sl.1));
        tr.on_event(at(1), &ev(EventKind::Established, 4, sl.0, sl.1));
        let r = |a| [reading(1, sl.0, sl.1, 5, a)];
        tr.on_readings(at(100), &r(10));
        let a = tr.on_readings(at(320), &r(20));
        let d = decisions(&a);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].action, DecisionAction::SwitchPending);
        assert!(commands(&a).is_empty());
        assert!(tr.on_readings(at(340), &r(30)).is_empty(), "pending is reported once");
        let a = tr.on_event(at(350), &ev(EventKind::SubEstablished, 4, "10.3.0.1:40002", "10.3.0.2:5201"));
        let cmds = commands(&a);
        assert_eq!(cmds.len(), 2, "{cmds:?}");
        assert_eq!(decisions(&a)[0].action, DecisionAction::Switch);
    }

    #[test]
    fn link_cost_switches_early_when_sl_queues_and_uses_probes_for_ll() {
        let mut tr = Tracker::new(cfg("link-cost"), at(0));
        established(&mut tr, 5);
        // LL idle: probes are due for both pairs, then not again at once.
        let due = tr.probes_due(at(10));
        assert_eq!(due.len(), 2);
        assert!(tr.probes_due(at(20)).is_empty());
        tr.on_probe(at(21), due[0], Some(Duration::from_millis(2)));
        tr.on_probe(at(21), due[1], None);
        // SL queue grows: RTT climbs far above the base, so eq. 5.7 prefers
        // LL well before the 300 ms deadline.
        let mut acked = 0;
        let mut when = None;
        for step in 1..=14u64 {
            acked += 50_000;
            let rtt = 2 + step * 40;
            let a = tr.on_readings(
                at(20 + step * 20),
                &[reading(1, "10.1.0.1:40000", "10.1.0.2:5201", rtt, acked)],
            );
            if !a.is_empty() {
                when = Some((20 + step * 20, a));
                break;
            }
            for p in tr.probes_due(at(20 + step * 20)) {
                tr.on_probe(at(21 + step * 20), p, Some(Duration::from_millis(2)));
            }
        }
        let (t, a) = when.expect("link cost switches");
        assert!(t < 300, "switched at {t} ms");
        let d = &decisions(&a)[0];
        assert_eq!(d.reason.as_deref(), Some("link_cost"));
        assert!(d.cost_ll.unwrap() < d.cost_sl.unwrap(), "{d:?}");
        assert!(tr.probes_due(at(1000)).is_empty(), "no probes after the switch");
    }

    #[test]
    fn link_cost_keeps_a_flow_on_sl_while_queues_are_equal() {
        let mut tr = Tracker::new(cfg("link-cost"), at(0));
        established(&mut tr, 6);
        let mut acked = 0;
        for step in 1..=12u64 {
            acked += 10_000;
            let now = at(step * 20);
            for p in tr.probes_due(now) {
                assert!(tr.on_probe(now, p, Some(Duration::from_millis(3))).is_empty());
            }
            let a = tr.on_readings(now, &[reading(1, "10.1.0.1:40000", "10.1.0.2:5201", 3, acked)]);
            assert!(a.is_empty(), "switched at {} ms before the deadline with equal delays", step * 20);
        }
    }
}
