//! The daemon's output: one JSON object per line, each with a `type` field
//! (`ready`, `event`, `decision`, `warning`, `reload`, `summary`), or the
//! same as plain text.
//!
//! What it is: the record types (serde) and the run's [`Summary`], so the CLI tests and the lab decode
//! exactly what the daemon writes. What it is not: logging (diagnostics go
//! to `tracing` on stderr; results are never parsed back from logs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tcpaccel_core::Bytes;

/// Counts of what happened during a run: what the daemon returns at the
/// end, and what its metrics follow while it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    pub connections: u64,
    pub switches: u64,
    pub failed_commands: u64,
    /// Commands refused because the connection had already ended (a short
    /// flow that closed between its event and the command): counted apart
    /// from `failed_commands`, not warned about.
    pub connection_gone: u64,
    /// LL backups the kernel refused because the connection was not fully
    /// established (yet, or any more): asked for again only if the
    /// connection's switch comes to wait on them.
    pub open_retries: u64,
    /// Switches whose SET_FLAGS found no subflow yet (a join not yet in the
    /// connection's list) and that were applied again a moment later.
    pub switch_retries: u64,
    /// Where the signals came from: "bpf" or "diag".
    pub signals: &'static str,
    /// BPF signals read from the ring buffer, and those that named no
    /// managed, unswitched connection (e.g. one not on an SL pair).
    pub bpf_signals: u64,
    pub bpf_unmatched: u64,
    /// The program's counters at the end (ACKs seen, events, ring full).
    pub bpf_stats: Option<crate::bpf::Stats>,
    /// CPU time (user + system, s) of the probe thread over the run.
    pub probe_cpu_s: f64,
    /// CPU time (s) of the calling thread from the start to `ready`
    /// (loading the program, creating its maps, adopting connections).
    pub start_cpu_s: f64,
}

/// One output line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// Written once, when the daemon listens for events.
    Ready(Ready),
    /// A path-manager event of a connection the daemon saw.
    Event(EventRecord),
    /// Something the daemon decided and did (or tried to do).
    Decision(DecisionRecord),
    /// Something odd that did not stop the daemon (lost events, ...).
    Warning(Warning),
    /// The configuration was read again (SIGHUP): applied, or refused with
    /// the reason (the old one stays in force).
    Reload(ReloadRecord),
    /// Written once, last, when the daemon stops (SIGINT/SIGTERM,
    /// `--duration`): what the run did.
    Summary(SummaryRecord),
}

/// The run in numbers, at the stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRecord {
    /// Seconds since the daemon started.
    pub t: f64,
    /// Connections managed (started on an SL pair).
    pub connections: u64,
    /// Connections switched to LL, and how many for each reason
    /// (`deadline`, `link_cost`, `size`).
    pub switches: u64,
    pub switch_reasons: BTreeMap<String, u64>,
    /// Decisions carried out, per policy in force when made (a reload can
    /// change it), per action (`open_backup`, `switch`, ...).
    pub decisions: BTreeMap<String, BTreeMap<String, u64>>,
    /// Path-manager commands the kernel refused (connections already gone
    /// are counted apart, in `connection_gone`).
    pub failed_commands: u64,
    pub connection_gone: u64,
    /// Bytes acknowledged on each lane's subflows, in configuration order
    /// (SL lanes, then LL).
    pub lanes: Vec<LaneTotal>,
    /// How often those bytes were read (see [`LaneTotal`]).
    pub lanes_read_every_ms: f64,
    /// Where the signals came from: "bpf" or "diag".
    pub signals: String,
}

/// One lane's bytes in the [`SummaryRecord`]. Counted from sock_diag
/// readings (every `probe.sample_interval` with sock_diag signals, every
/// second with BPF ones, whose program replaces the readings, and once at
/// the stop): what a subflow sent after its last reading before it closed
/// is not in it (at most that interval's worth per connection).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaneTotal {
    /// `sl`, `ll1`, ... as in the decision records.
    pub lane: String,
    /// The lane's local address.
    pub local: String,
    pub bytes_acked: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReloadRecord {
    pub t: f64,
    pub ok: bool,
    /// The policy in force after the reload.
    pub policy: String,
    pub t_deadline_ms: f64,
    /// Managed connections that had not switched and now follow the new
    /// parameters (switched ones keep their decision).
    pub reconfigured: usize,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ready {
    pub netns: Option<String>,
    /// "deadline" or "link-cost".
    pub policy: String,
    pub t_deadline_ms: f64,
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
    pub delta: f64,
    pub t0: f64,
    pub sl_lanes: Vec<String>,
    pub ll_lanes: Vec<String>,
    /// What decisions, metrics and the summary call each lane, in the order
    /// of `sl_lanes` / `ll_lanes`: the interface of its address (absent in
    /// records of daemons from before issue 51).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sl_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ll_names: Vec<String>,
    pub peers: usize,
    /// Where the signals come from: "bpf" or "diag" (absent in records of
    /// daemons from before issue 13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signals: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Seconds since the daemon started.
    pub t: f64,
    /// created, established, closed, sub_established, sub_closed, sub_priority, ...
    pub event: String,
    pub token: u32,
    /// Whether the connection starts on a configured SL pair (the daemon
    /// manages it) or not (only reported).
    pub managed: bool,
    pub age_ms: Option<f64>,
    pub local: Option<String>,
    pub remote: Option<String>,
    /// The kernel's BACKUP attribute of a subflow event: set when the
    /// *peer* asked for backup (MP_JOIN or MP_PRIO from it). A backup this
    /// host requested (SUBFLOW_CREATE with BACKUP, SET_FLAGS) shows as false.
    pub backup: Option<bool>,
    /// The subflow's socket error on sub_closed.
    pub error: Option<u8>,
}

/// What a decision did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionAction {
    /// Opened one LL subflow of a lane pair as backup (SUBFLOW_CREATE).
    OpenBackup,
    /// Opened one LL subflow without the backup flag (SUBFLOW_CREATE): the
    /// connection had decided to switch before it had LL subflows, so this
    /// one is active from its handshake and the switch only makes SL a
    /// backup.
    OpenActive,
    /// Switched: LL subflows active, SL backup (SET_FLAGS).
    Switch,
    /// The policy chose to switch but no LL subflow is established yet; the
    /// switch is applied when one is.
    SwitchPending,
    /// An LL subflow established after its connection switched, made
    /// active like those the switch found (SET_FLAGS).
    Activate,
}

impl DecisionAction {
    /// The name in JSON (`open_backup`, `switch`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DecisionAction::OpenBackup => "open_backup",
            DecisionAction::OpenActive => "open_active",
            DecisionAction::Switch => "switch",
            DecisionAction::SwitchPending => "switch_pending",
            DecisionAction::Activate => "activate",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub t: f64,
    pub token: u32,
    /// Connection age when decided.
    pub age_ms: f64,
    /// "deadline" or "link-cost".
    pub policy: String,
    pub action: DecisionAction,
    /// Why a switch happened: "deadline" or "link_cost".
    pub reason: Option<String>,
    /// The LL lane concerned ("ll0", ...).
    pub lane: Option<String>,
    /// Smoothed costs (eq. 5.7) when the policy had them.
    pub cost_sl: Option<f64>,
    pub cost_ll: Option<f64>,
    /// The subflows the commands addressed (local -> remote).
    pub subflows: Vec<String>,
    /// Whether every path-manager command succeeded.
    pub ok: bool,
    /// The failed command and the kernel's reason.
    pub error: Option<String>,
    /// A switch on a BPF signal: ms from the program's decision (in the
    /// kernel, at the ACK) to the path-manager commands' completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_ms: Option<f64>,
    /// The program's decision time itself (CLOCK_MONOTONIC, ns: the
    /// kernel's `bpf_ktime_get_ns`), to line up with other clocks, e.g.
    /// the lab's interface counters (`lanes-basic`'s switch latency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_ktime_ns: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    pub t: f64,
    pub message: String,
}

impl Record {
    /// One line of plain text for people.
    pub fn to_text(&self) -> String {
        match self {
            Record::Ready(r) => format!(
                "ready: policy {} (t_deadline {} ms), SL {}, LL {}, {} peer(s){}",
                r.policy,
                r.t_deadline_ms,
                named(&r.sl_names, &r.sl_lanes),
                named(&r.ll_names, &r.ll_lanes),
                r.peers,
                r.netns.as_deref().map(|n| format!(", netns {n}")).unwrap_or_default()
            ),
            Record::Event(e) => {
                let mut s = format!("{:9.3}s event {} token {:#010x}", e.t, e.event, e.token);
                if let (Some(l), Some(r)) = (&e.local, &e.remote) {
                    s.push_str(&format!(" {l} -> {r}"));
                }
                if e.backup == Some(true) {
                    s.push_str(" peer-backup");
                }
                if let Some(a) = e.age_ms {
                    s.push_str(&format!(" age {a:.0} ms"));
                }
                if !e.managed {
                    s.push_str(" (not on a configured SL pair)");
                }
                s
            }
            Record::Decision(d) => {
                let action = d.action.name().replace('_', "-");
                let mut s =
                    format!("{:9.3}s decision {action} token {:#010x} age {:.0} ms", d.t, d.token, d.age_ms);
                if let Some(r) = &d.reason {
                    s.push_str(&format!(" reason {r}"));
                }
                if let Some(l) = &d.lane {
                    s.push_str(&format!(" lane {l}"));
                }
                if let (Some(a), Some(b)) = (d.cost_sl, d.cost_ll) {
                    s.push_str(&format!(" cost SL {a:.2} LL {b:.2}"));
                }
                if !d.subflows.is_empty() {
                    s.push_str(&format!(" [{}]", d.subflows.join(", ")));
                }
                match &d.error {
                    None => s.push_str(" ok"),
                    Some(e) => s.push_str(&format!(" FAILED: {e}")),
                }
                s
            }
            Record::Warning(w) => format!("{:9.3}s warning: {}", w.t, w.message),
            Record::Reload(r) => match &r.error {
                None => format!(
                    "{:9.3}s reload: policy {} (t_deadline {} ms), {} unswitched connection(s) follow it",
                    r.t, r.policy, r.t_deadline_ms, r.reconfigured
                ),
                Some(e) => format!("{:9.3}s reload refused, policy {} stays: {e}", r.t, r.policy),
            },
            Record::Summary(s) => s.to_text(),
        }
    }
}

impl SummaryRecord {
    /// Three lines: counts, decisions per policy, bytes per lane.
    fn to_text(&self) -> String {
        let list = |m: &BTreeMap<String, u64>| {
            m.iter().map(|(k, n)| format!("{} {n}", k.replace('_', "-"))).collect::<Vec<_>>().join(", ")
        };
        let mut s = format!(
            "{:9.3}s summary: {} connection(s) managed, {} switch(es)",
            self.t, self.connections, self.switches
        );
        if !self.switch_reasons.is_empty() {
            let reasons: Vec<String> = self.switch_reasons.iter().map(|(r, n)| format!("{r} {n}")).collect();
            s.push_str(&format!(" (reason {})", reasons.join(", ")));
        }
        s.push_str(&format!(
            ", {} failed command(s), {} for connections already gone, signals {}",
            self.failed_commands, self.connection_gone, self.signals
        ));
        if self.decisions.is_empty() {
            s.push_str("\n  decisions: none");
        }
        for (policy, actions) in &self.decisions {
            s.push_str(&format!("\n  decisions under {policy}: {}", list(actions)));
        }
        let lanes: Vec<String> =
            self.lanes.iter().map(|l| format!("{} {} {}", l.lane, l.local, Bytes(l.bytes_acked))).collect();
        s.push_str(&format!(
            "\n  bytes acknowledged per lane (read every {} ms; a flow's last {} ms may be missing): {}",
            self.lanes_read_every_ms,
            self.lanes_read_every_ms,
            lanes.join(", ")
        ));
        s
    }
}

/// `ll1 10.20.0.1, ll2 10.30.0.1`: each lane's name beside its address
/// (the addresses alone when the names are missing).
fn named(names: &[String], addrs: &[String]) -> String {
    let one = |(i, a): (usize, &String)| match names.get(i) {
        Some(n) => format!("{n} {a}"),
        None => a.clone(),
    };
    addrs.iter().enumerate().map(one).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_round_trips_with_its_type_and_reads_as_three_lines() {
        let s = Record::Summary(SummaryRecord {
            t: 12.5,
            connections: 3,
            switches: 1,
            switch_reasons: [("link_cost".to_string(), 1)].into(),
            decisions: [(
                "link-cost".to_string(),
                [("open_backup".to_string(), 6), ("switch".to_string(), 1)].into(),
            )]
            .into(),
            failed_commands: 0,
            connection_gone: 2,
            lanes: vec![
                LaneTotal { lane: "sl".into(), local: "10.10.0.1".into(), bytes_acked: 1_200_000 },
                LaneTotal { lane: "ll1".into(), local: "10.20.0.1".into(), bytes_acked: 43_100_000 },
            ],
            lanes_read_every_ms: 1000.0,
            signals: "bpf".into(),
        });
        let line = serde_json::to_string(&s).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "summary");
        assert_eq!(v["lanes"][1]["lane"], "ll1");
        assert_eq!(v["decisions"]["link-cost"]["open_backup"], 6);
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), s);
        let text = s.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].ends_with("summary: 3 connection(s) managed, 1 switch(es) (reason link_cost 1), 0 failed command(s), 2 for connections already gone, signals bpf"), "{text}");
        assert_eq!(lines[1], "  decisions under link-cost: open-backup 6, switch 1");
        assert_eq!(
            lines[2],
            "  bytes acknowledged per lane (read every 1000 ms; a flow's last 1000 ms may be missing): \
             sl 10.10.0.1 1.2MB, ll1 10.20.0.1 43.1MB"
        );
    }

    #[test]
    fn decision_lines_round_trip_with_a_type_field() {
        let d = Record::Decision(DecisionRecord {
            t: 1.5,
            token: 0xabcd,
            age_ms: 301.0,
            policy: "deadline".into(),
            action: DecisionAction::Switch,
            reason: Some("deadline".into()),
            lane: Some("ll0".into()),
            cost_sl: None,
            cost_ll: None,
            subflows: vec!["10.2.0.1:4000 -> 10.2.0.2:5201".into()],
            ok: true,
            error: None,
            signal_ms: None,
            signal_ktime_ns: None,
        });
        let line = serde_json::to_string(&d).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "decision");
        assert_eq!(v["action"], "switch");
        assert_eq!(v["token"], 0xabcd);
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), d);
        assert!(d.to_text().contains("switch token 0x0000abcd age 301 ms"), "{}", d.to_text());
    }
}
