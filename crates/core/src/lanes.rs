//! When to move a connection from the Short-flow Lane to a Long-flow Lane
//! ([Lanes] ch. 5): the deadline rule and the link-cost rule of eq. (5.7).
//!
//! Every connection starts on SL. The deadline policy switches once the
//! connection's age reaches `t_deadline` while it still transfers. The
//! link-cost policy keeps, per lane the connection has a subflow on, a cost
//! smoothed on every RTT sample (`cost ← 3/4·cost + 1/4·measured`, Algorithm 1
//! line 9) and switches when the cheapest lane is a Long-flow Lane:
//!
//! ```text
//! cost_SL = t0·(1 + α·ν^β) + sgn(t − t_deadline)·γ·|t − t_deadline|^δ   (5.7)
//! cost_LL = t0·(1 + α·ν^β)
//! ν = RTT − RTT_min                                                      (5.4)
//! ```
//!
//! Units: `t − t_deadline` is in **milliseconds**, and so is ν by default
//! (`SwitchConfig::nu_unit`, 1 ms), as plain numbers.
//! The thesis states t_deadline = 300 [ms], plots switching times in ms, and
//! its kernel code computed both terms from millisecond-granular kernel
//! timestamps; t0 = 1 then weighs as one millisecond of queueing. With the
//! default α = β = γ = δ = t0 = 1 the comparison is unit-free (ν_LL < ν_SL +
//! t − t_deadline), but other exponents are not, so the unit is fixed here.
//!
//! The original prints the deadline term as `sgn(t − t_d)·γ(t − t_d)^δ`; the
//! absolute value (as in the seed digest) is what makes it real-valued for any
//! δ and matches Table 5.1 (concave before the deadline, convex after it).
//! `nu_unit` makes ν's unit explicit because the thesis does not state it and
//! the balance of the two terms hangs on it: with ν in ms a 128 KB queue at
//! 1 Gbit/s (~1 ms) can never outweigh a deadline term of up to −300, so
//! link-cost would act as a slightly later deadline; with ν in µs the same
//! queue weighs 1000 and a congested SL is left at once — the behaviour of the
//! thesis's Fig. 7.1 (switch times from near 0 to 1600 ms as SL or LL load
//! grows). On a link slower than 1 Gbit/s a queue of the same bytes lasts
//! longer, so the same weighting needs a proportionally longer unit (10 µs
//! at 100 Mbit/s).
//!
//! `RTT_min` is by default the smallest RTT seen on any subflow of the
//! connection (Algorithm 1 line 10 keeps one `base_RTT`); [`BaseRtt::PerLane`]
//! keeps one per lane instead. A lane's first sample sets its cost (the
//! algorithm leaves the initial value open).
//!
//! This module decides only; the lanes daemon reads RTTs (sock_diag), passes
//! `now`, and applies a switch with MPTCP path-manager commands.

use crate::time::Instant;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The two kinds of lane ([Lanes] §5.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneKind {
    /// Short-flow Lane, kept uncongested; every connection starts here.
    Short,
    /// Long-flow Lane.
    Long,
}

/// One lane: its kind and its index among the lanes of that kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LaneId {
    pub kind: LaneKind,
    pub index: u16,
}

impl LaneId {
    pub const fn short(index: u16) -> Self {
        LaneId { kind: LaneKind::Short, index }
    }
    pub const fn long(index: u16) -> Self {
        LaneId { kind: LaneKind::Long, index }
    }
}

/// Switching policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Switch when the connection's age reaches `t_deadline`.
    Deadline,
    /// Switch when a Long-flow Lane has the lowest smoothed cost (eq. (5.7)).
    LinkCost,
    /// Switch only on `size_threshold` bytes (see [`LaneSwitcher::on_bytes`]).
    Size,
}

impl Policy {
    /// The name the configuration and the records use.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Deadline => "deadline",
            Policy::LinkCost => "link-cost",
            Policy::Size => "size",
        }
    }
}

/// Which minimum RTT ν is measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BaseRtt {
    /// The smallest RTT on any lane of the connection (the thesis).
    Connection,
    /// Each lane's own smallest RTT.
    PerLane,
}

/// Parameters of eq. (5.7) and the policy (thesis defaults: 1, 1, 1, 1, t0 = 1, 300 ms).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SwitchConfig {
    pub policy: Policy,
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
    pub delta: f64,
    pub t0: f64,
    pub t_deadline: Duration,
    pub base: BaseRtt,
    /// The unit ν is counted in (eq. 5.4 into eq. 5.7); see the module docs.
    #[serde(default = "default_nu_unit")]
    pub nu_unit: Duration,
    /// Beyond the thesis: switch once the connection has moved this many
    /// bytes, whatever the policy (with `Policy::Size`, only then). See
    /// [`LaneSwitcher::on_bytes`].
    #[serde(default)]
    pub size_threshold: Option<u64>,
}

fn default_nu_unit() -> Duration {
    Duration::from_millis(1)
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            policy: Policy::LinkCost,
            alpha: 1.0,
            beta: 1.0,
            gamma: 1.0,
            delta: 1.0,
            t0: 1.0,
            t_deadline: Duration::from_millis(300),
            base: BaseRtt::Connection,
            nu_unit: default_nu_unit(),
            size_threshold: None,
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

/// [Lanes] eq. (5.4): relative queueing delay ν = RTT − RTT_min, in ms (not below 0).
pub fn relative_delay_ms(rtt: Duration, base: Duration) -> f64 {
    ms(rtt.saturating_sub(base))
}

/// [Lanes] eq. (5.4) in the configured unit: ν = (RTT − RTT_min) / `unit`
/// (not below 0; a zero unit counts as 1 ms).
pub fn relative_delay(rtt: Duration, base: Duration, unit: Duration) -> f64 {
    let unit = if unit.is_zero() { default_nu_unit() } else { unit };
    rtt.saturating_sub(base).as_nanos() as f64 / unit.as_nanos() as f64
}

/// [Lanes] eq. (5.7), Long-flow Lane: `t0·(1 + α·ν^β)`, ν in ms.
pub fn cost_ll(cfg: &SwitchConfig, nu_ms: f64) -> f64 {
    cfg.t0 * (1.0 + cfg.alpha * nu_ms.max(0.0).powf(cfg.beta))
}

/// [Lanes] eq. (5.7), deadline term: `sgn(t − t_d)·γ·|t − t_d|^δ`, in ms,
/// where t is the connection's age.
pub fn deadline_term(cfg: &SwitchConfig, age: Duration) -> f64 {
    let x = ms(age) - ms(cfg.t_deadline);
    if x == 0.0 {
        return 0.0;
    }
    x.signum() * cfg.gamma * x.abs().powf(cfg.delta)
}

/// [Lanes] eq. (5.7), Short-flow Lane: link term plus deadline term.
pub fn cost_sl(cfg: &SwitchConfig, nu_ms: f64, age: Duration) -> f64 {
    cost_ll(cfg, nu_ms) + deadline_term(cfg, age)
}

/// [Lanes] Algorithm 1 line 9: `cost ← 3/4·cost + 1/4·measured`.
pub fn smooth(old: f64, measured: f64) -> f64 {
    0.75 * old + 0.25 * measured
}

/// Why a connection moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    Deadline,
    LinkCost,
    /// The connection moved `size_threshold` bytes.
    Size,
}

/// The smoothed costs at a decision.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Costs {
    /// Cheapest Short-flow Lane cost.
    pub sl: f64,
    /// Cheapest Long-flow Lane cost.
    pub ll: f64,
}

/// What to do with the connection.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Decision {
    Stay,
    /// Move the traffic to `lane` (the cheapest LL if known). Reported once.
    SwitchToLong {
        reason: Reason,
        lane: Option<LaneId>,
        age_ms: f64,
        costs: Option<Costs>,
    },
}

#[derive(Debug, Clone, Copy)]
struct LaneState {
    id: LaneId,
    min_rtt: Option<Duration>,
    cost: Option<f64>,
}

/// Per-connection switching state machine ([Lanes] Algorithm 1).
#[derive(Debug, Clone)]
pub struct LaneSwitcher {
    cfg: SwitchConfig,
    start: Instant,
    lanes: Vec<LaneState>,
    conn_min_rtt: Option<Duration>,
    switched: Option<(Instant, Option<LaneId>)>,
}

impl LaneSwitcher {
    /// A connection that started (on SL) at `start`.
    pub fn new(cfg: SwitchConfig, start: Instant) -> Self {
        LaneSwitcher { cfg, start, lanes: Vec::new(), conn_min_rtt: None, switched: None }
    }

    pub fn config(&self) -> &SwitchConfig {
        &self.cfg
    }

    /// Takes new policy parameters (a configuration reload). A connection
    /// that has switched keeps its decision; one that has not is judged by
    /// the new parameters from now on, keeping its smoothed costs and
    /// minimum RTTs (they describe the lanes, not the policy).
    pub fn reconfigure(&mut self, cfg: SwitchConfig) {
        self.cfg = cfg;
    }

    pub fn age(&self, now: Instant) -> Duration {
        now.saturating_since(self.start)
    }

    /// When the connection switched, and to which lane.
    pub fn switched(&self) -> Option<(Instant, Option<LaneId>)> {
        self.switched
    }

    /// The connection has moved `bytes` in all (both directions, every
    /// subflow). Beyond the thesis, which judges flows by age or queueing
    /// delay only: a size threshold classifies flows without knowing their
    /// size in advance, the way PIAS demotes flows between switch priority
    /// queues after fixed byte counts (see docs/references.md). It applies
    /// with every policy, so `link-cost` plus a threshold switches on
    /// whichever comes first; the lane is the cheapest one when costs are
    /// known, else the first LL.
    pub fn on_bytes(&mut self, now: Instant, bytes: u64) -> Decision {
        let Some(threshold) = self.cfg.size_threshold else { return Decision::Stay };
        if self.switched.is_some() || bytes < threshold {
            return Decision::Stay;
        }
        self.switch_now(now, Reason::Size)
    }

    /// The next time a tick can change the decision (the deadline), if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        match (self.switched, self.cfg.policy) {
            (None, Policy::Deadline) => Some(self.start + self.cfg.t_deadline),
            _ => None,
        }
    }

    /// Smoothed cost of a lane, if it has had a sample.
    pub fn cost(&self, lane: LaneId) -> Option<f64> {
        self.lanes.iter().find(|l| l.id == lane).and_then(|l| l.cost)
    }

    /// The cheapest smoothed SL and LL costs now, once both have a sample
    /// (for the daemon's decision lines while the connection stays).
    pub fn current_costs(&self) -> Option<Costs> {
        self.cheapest().and_then(|(_, c)| c)
    }

    fn lane_mut(&mut self, id: LaneId) -> &mut LaneState {
        let pos = match self.lanes.iter().position(|l| l.id == id) {
            Some(p) => p,
            None => {
                self.lanes.push(LaneState { id, min_rtt: None, cost: None });
                self.lanes.len() - 1
            }
        };
        &mut self.lanes[pos]
    }

    /// Lowers the minimum RTT known for a lane (and the connection) without
    /// a cost sample, e.g. from an idle probe or other connections' history.
    pub fn observe_base_rtt(&mut self, lane: LaneId, rtt: Duration) {
        if rtt.is_zero() {
            return;
        }
        let l = self.lane_mut(lane);
        l.min_rtt = Some(l.min_rtt.map_or(rtt, |m| m.min(rtt)));
        self.conn_min_rtt = Some(self.conn_min_rtt.map_or(rtt, |m| m.min(rtt)));
    }

    /// An RTT sample of this connection's subflow on `lane`, taken at `now`
    /// while the connection transfers (Algorithm 1, "Receiving ACK packet").
    pub fn on_sample(&mut self, now: Instant, lane: LaneId, rtt: Duration) -> Decision {
        if self.switched.is_some() {
            return Decision::Stay;
        }
        if rtt.is_zero() {
            return self.on_tick(now, true);
        }
        self.observe_base_rtt(lane, rtt);
        let cfg = self.cfg;
        let conn_min = self.conn_min_rtt.unwrap_or(rtt);
        let age = self.age(now);
        let l = self.lane_mut(lane);
        let base = match cfg.base {
            BaseRtt::Connection => conn_min,
            BaseRtt::PerLane => l.min_rtt.unwrap_or(rtt),
        };
        let nu = relative_delay(rtt, base, cfg.nu_unit);
        let measured = match lane.kind {
            LaneKind::Short => cost_sl(&cfg, nu, age),
            LaneKind::Long => cost_ll(&cfg, nu),
        };
        l.cost = Some(match l.cost {
            None => measured,
            Some(old) => smooth(old, measured),
        });
        match cfg.policy {
            Policy::Deadline => self.on_tick(now, true),
            Policy::LinkCost => self.judge(now),
            // Costs are still kept: they pick the lane when the bytes decide.
            Policy::Size => Decision::Stay,
        }
    }

    /// A time check without an RTT sample. Under the deadline policy, switches
    /// once the age reaches `t_deadline` while `transferring`.
    pub fn on_tick(&mut self, now: Instant, transferring: bool) -> Decision {
        if self.switched.is_some() || self.cfg.policy != Policy::Deadline || !transferring {
            return Decision::Stay;
        }
        if self.age(now) < self.cfg.t_deadline {
            return Decision::Stay;
        }
        self.switch_now(now, Reason::Deadline)
    }

    /// Switches to the cheapest LL when costs are known, else the first LL.
    fn switch_now(&mut self, now: Instant, reason: Reason) -> Decision {
        let (lane, costs) = match self.cheapest() {
            Some((ll, costs)) => (Some(ll), costs),
            None => (self.first_long(), None),
        };
        self.switched = Some((now, lane));
        Decision::SwitchToLong { reason, lane, age_ms: ms(self.age(now)), costs }
    }

    fn first_long(&self) -> Option<LaneId> {
        self.lanes.iter().filter(|l| l.id.kind == LaneKind::Long).map(|l| l.id).min_by_key(|id| id.index)
    }

    /// The cheapest LL lane and both costs, when both kinds have a cost.
    fn cheapest(&self) -> Option<(LaneId, Option<Costs>)> {
        let best = |kind: LaneKind| {
            self.lanes
                .iter()
                .filter(|l| l.id.kind == kind)
                .filter_map(|l| l.cost.map(|c| (l.id, c)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
        };
        let (ll_id, ll) = best(LaneKind::Long)?;
        let costs = best(LaneKind::Short).map(|(_, sl)| Costs { sl, ll });
        Some((ll_id, costs))
    }

    /// Judging phase: switch when the minimum-cost lane is a Long-flow Lane.
    fn judge(&mut self, now: Instant) -> Decision {
        let Some((ll_id, Some(costs))) = self.cheapest() else { return Decision::Stay };
        if costs.ll < costs.sl {
            self.switched = Some((now, Some(ll_id)));
            return Decision::SwitchToLong {
                reason: Reason::LinkCost,
                lane: Some(ll_id),
                age_ms: ms(self.age(now)),
                costs: Some(costs),
            };
        }
        Decision::Stay
    }
}

/// The integer twin of the lanes BPF program (`crates/lanes/bpf/lanes.bpf.c`):
/// every line of its arithmetic and its per-ACK decision, so that the
/// kernel side is tested here, exactly, against the float eq. (5.7) above.
///
/// What the BPF path supports: β, δ ∈ {1, 2}; α, γ, t0 multiples of 1/1024
/// in [0, 1024] (t0 above 0); `nu_unit` a whole number of microseconds;
/// at most [`MAX_SLOTS`] lanes. [`BpfParams::new`] refuses anything else by
/// name, and the daemon then reads sock_diag instead (saying so).
/// Costs are fixed point with [`FP_SHIFT`] fractional bits; ν^β and
/// |t − t_deadline|^δ saturate at 2^30 (in fixed point), i.e. at 2^20
/// units for β = 1 and 1024 units for β = 2 — beyond that every lane is
/// "very congested" alike.
pub mod bpf {
    use super::{LaneKind, Policy, SwitchConfig};
    use crate::lanes::BaseRtt;

    pub const FP_SHIFT: u32 = 10;
    pub const FP_ONE: u64 = 1 << FP_SHIFT;
    pub const POW_MAX: u64 = 1 << 30;
    pub const SQ_BASE_MAX: u64 = 1 << 20;
    pub const MAX_SLOTS: usize = 8;
    /// Largest α, γ, t0 the BPF path takes (keeps the products in 64 bits).
    pub const COEFF_MAX: f64 = 1024.0;

    /// The program's policy numbers.
    pub const POLICY_DEADLINE: u32 = 0;
    pub const POLICY_LINK_COST: u32 = 1;
    pub const POLICY_SIZE: u32 = 2;

    /// The parameters as the program holds them (`struct lanes_cfg`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct BpfParams {
        pub policy: u32,
        pub size_threshold: u64,
        pub t_deadline_us: u64,
        pub nu_unit_us: u64,
        pub t0_fp: u64,
        pub alpha_fp: u64,
        pub gamma_fp: u64,
        pub beta: u32,
        pub delta: u32,
        pub per_lane_base: bool,
    }

    /// Why a configuration cannot run on the BPF path.
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    #[error("{field}: {msg} (the BPF signal path cannot express it; use signals = \"diag\")")]
    pub struct Unsupported {
        pub field: &'static str,
        pub msg: String,
    }

    fn fixed(field: &'static str, v: f64, zero_ok: bool) -> Result<u64, Unsupported> {
        let scaled = v * FP_ONE as f64;
        if !(0.0..=COEFF_MAX).contains(&v) || (!zero_ok && v == 0.0) || scaled.fract() != 0.0 {
            return Err(Unsupported {
                field,
                msg: format!(
                    "{v} is not a multiple of 1/{FP_ONE} in {}..={COEFF_MAX}",
                    if zero_ok { "0" } else { "(0" }
                ),
            });
        }
        Ok(scaled as u64)
    }

    fn exponent(field: &'static str, v: f64) -> Result<u32, Unsupported> {
        if v == 1.0 || v == 2.0 {
            Ok(v as u32)
        } else {
            Err(Unsupported { field, msg: format!("{v}: only 1 and 2 are supported") })
        }
    }

    impl BpfParams {
        /// The fixed-point form of `cfg`, or why there is none.
        pub fn new(cfg: &SwitchConfig) -> Result<BpfParams, Unsupported> {
            let nu_ns = cfg.nu_unit.as_nanos();
            if nu_ns == 0 || (nu_ns / 1000) * 1000 != nu_ns {
                return Err(Unsupported {
                    field: "policy.nu_unit",
                    msg: format!("{:?} is not a whole number of microseconds", cfg.nu_unit),
                });
            }
            Ok(BpfParams {
                policy: match cfg.policy {
                    Policy::Deadline => POLICY_DEADLINE,
                    Policy::LinkCost => POLICY_LINK_COST,
                    Policy::Size => POLICY_SIZE,
                },
                size_threshold: cfg.size_threshold.unwrap_or(0),
                t_deadline_us: cfg.t_deadline.as_micros().min(u64::MAX as u128) as u64,
                nu_unit_us: (nu_ns / 1000) as u64,
                t0_fp: fixed("policy.t0", cfg.t0, false)?,
                alpha_fp: fixed("policy.alpha", cfg.alpha, true)?,
                gamma_fp: fixed("policy.gamma", cfg.gamma, true)?,
                beta: exponent("policy.beta", cfg.beta)?,
                delta: exponent("policy.delta", cfg.delta)?,
                per_lane_base: cfg.base == BaseRtt::PerLane,
            })
        }
    }

    /// A fixed-point value as a float (for records and comparisons).
    pub fn to_f64(v: i64) -> f64 {
        v as f64 / FP_ONE as f64
    }

    /// eq. (5.4): ν = (RTT − RTT_min) / unit, fixed point, saturated.
    pub fn nu_fp(rtt_us: u32, base_us: u32, unit_us: u64) -> u64 {
        let d = rtt_us.saturating_sub(base_us) as u64;
        let unit = if unit_us == 0 { 1000 } else { unit_us };
        ((d << FP_SHIFT) / unit).min(POW_MAX)
    }

    /// v^e for e ∈ {1, 2} (any other e counts as 1), saturated at [`POW_MAX`].
    pub fn pow_fp(v: u64, e: u32) -> u64 {
        let v = v.min(POW_MAX);
        if e != 2 {
            return v;
        }
        if v > SQ_BASE_MAX {
            return POW_MAX;
        }
        (v * v) >> FP_SHIFT
    }

    /// eq. (5.7), LL: t0·(1 + α·ν^β).
    pub fn cost_ll_fp(p: &BpfParams, nu: u64) -> i64 {
        let inner = (p.alpha_fp * pow_fp(nu, p.beta)) >> FP_SHIFT;
        ((p.t0_fp * (FP_ONE + inner)) >> FP_SHIFT) as i64
    }

    /// eq. (5.7), deadline term sgn(t − t_d)·γ·|t − t_d|^δ, t − t_d in ms.
    pub fn deadline_term_fp(p: &BpfParams, age_us: u64) -> i64 {
        let td = p.t_deadline_us;
        let x_us = age_us.abs_diff(td);
        let x = ((x_us << FP_SHIFT) / 1000).min(POW_MAX);
        let term = ((p.gamma_fp * pow_fp(x, p.delta)) >> FP_SHIFT) as i64;
        if age_us < td {
            -term
        } else {
            term
        }
    }

    /// Algorithm 1 line 9 in integers: (3·old + measured) / 4, floored.
    pub fn smooth_fp(old: i64, measured: i64) -> i64 {
        (3 * old + measured) >> 2
    }

    /// What the program reports (`struct lanes_event`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SignalKind {
        Size,
        Deadline,
        LinkCost,
    }

    impl SignalKind {
        pub fn raw(self) -> u32 {
            match self {
                SignalKind::Size => 1,
                SignalKind::Deadline => 2,
                SignalKind::LinkCost => 3,
            }
        }
        pub fn from_raw(v: u32) -> Option<SignalKind> {
            match v {
                1 => Some(SignalKind::Size),
                2 => Some(SignalKind::Deadline),
                3 => Some(SignalKind::LinkCost),
                _ => None,
            }
        }
    }

    /// A connection's decision changed.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Signal {
        pub kind: SignalKind,
        /// The cheapest LL slot when an LL cost is known.
        pub slot: Option<u8>,
        pub age_us: u64,
        pub bytes: u64,
        /// Cheapest SL and LL costs (fixed point) when both are known.
        pub costs: Option<(i64, i64)>,
    }

    /// The latest RTT sample of one lane from any socket on its pair.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct LaneSample {
        pub seq: u64,
        pub rtt_us: u32,
    }

    /// One segment received by a subflow, as the program sees it: the
    /// socket's state before the segment is processed, i.e. after the
    /// previous one (the program runs at `BPF_SOCK_OPS_PARSE_HDR_OPT_CB`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Ack {
        pub slot: u8,
        pub kind: LaneKind,
        /// `srtt_us >> 3`.
        pub rtt_us: u32,
        /// The subflow's bytes_acked + bytes_received.
        pub bytes: u64,
        pub age_us: u64,
        /// `rtt_us` holds a new RTT sample: see [`Ack::fresh_rtt`]. Only
        /// such segments give the SL lane a cost sample, so the smoothing
        /// steps once per ACK of the sender, as Algorithm 1 line 9 does,
        /// and a download's data segments do not re-read a stale srtt.
        pub fresh: bool,
    }

    impl Ack {
        /// The program's test for a new RTT sample: the subflow's
        /// bytes_acked moved since its previous callback, so the segment
        /// before this one acknowledged new data and the kernel measured
        /// its RTT (`tcp_ack` → `tcp_rtt_estimator`, net/ipv4/tcp_input.c).
        pub fn fresh_rtt(last_acked: u64, bytes_acked: u64) -> bool {
            bytes_acked != last_acked
        }
    }

    /// Per-connection state of the program (`struct conn_state`), keyed
    /// there by the connection; the subflows' last byte counts are kept by
    /// the caller (`struct sf_state`) and passed as deltas.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct BpfConn {
        pub bytes: u64,
        pub cost: [i64; MAX_SLOTS],
        pub lane_seq: [u64; MAX_SLOTS],
        pub min_rtt: [u32; MAX_SLOTS],
        pub conn_min_rtt: u32,
        pub have: u32,
        pub done: bool,
    }

    impl BpfConn {
        /// One RTT sample on lane `slot` (the program's `sample`).
        pub fn sample(&mut self, p: &BpfParams, ll_mask: u32, s: usize, rtt_us: u32, age_us: u64) {
            if s >= MAX_SLOTS || rtt_us == 0 {
                return;
            }
            if self.min_rtt[s] == 0 || rtt_us < self.min_rtt[s] {
                self.min_rtt[s] = rtt_us;
            }
            if self.conn_min_rtt == 0 || rtt_us < self.conn_min_rtt {
                self.conn_min_rtt = rtt_us;
            }
            let base = if p.per_lane_base { self.min_rtt[s] } else { self.conn_min_rtt };
            let mut m = cost_ll_fp(p, nu_fp(rtt_us, base, p.nu_unit_us));
            if ll_mask & (1 << s) == 0 {
                m += deadline_term_fp(p, age_us);
            }
            if self.have & (1 << s) != 0 {
                self.cost[s] = smooth_fp(self.cost[s], m);
            } else {
                self.cost[s] = m;
                self.have |= 1 << s;
            }
        }

        /// A segment received by one of the connection's subflows, whose
        /// previous segment moved `bytes_delta` bytes; `lanes` are the lane
        /// samples now. Returns the signal the program would put in the
        /// ring buffer (once).
        pub fn on_ack(
            &mut self,
            p: &BpfParams,
            ll_mask: u32,
            ack: Ack,
            bytes_delta: u64,
            lanes: &[LaneSample; MAX_SLOTS],
        ) -> Option<Signal> {
            self.bytes = self.bytes.wrapping_add(bytes_delta);
            if self.done {
                return None;
            }
            if p.policy != POLICY_DEADLINE {
                if ack.kind == LaneKind::Short && ack.fresh {
                    self.sample(p, ll_mask, ack.slot as usize, ack.rtt_us, ack.age_us);
                }
                for (s, l) in lanes.iter().enumerate() {
                    if ll_mask & (1 << s) == 0 || l.seq == self.lane_seq[s] {
                        continue;
                    }
                    self.lane_seq[s] = l.seq;
                    self.sample(p, ll_mask, s, l.rtt_us, ack.age_us);
                }
            }
            let (mut best_sl, mut best_ll, mut slot) = (None::<i64>, None::<i64>, None);
            for s in 0..MAX_SLOTS {
                if self.have & (1 << s) == 0 {
                    continue;
                }
                let c = self.cost[s];
                if ll_mask & (1 << s) != 0 {
                    if best_ll.is_none_or(|b| c < b) {
                        best_ll = Some(c);
                        slot = Some(s as u8);
                    }
                } else if best_sl.is_none_or(|b| c < b) {
                    best_sl = Some(c);
                }
            }
            let kind = if p.size_threshold != 0 && self.bytes >= p.size_threshold {
                SignalKind::Size
            } else if p.policy == POLICY_DEADLINE && ack.age_us >= p.t_deadline_us {
                SignalKind::Deadline
            } else if p.policy == POLICY_LINK_COST
                && matches!((best_sl, best_ll), (Some(sl), Some(ll)) if ll < sl)
            {
                SignalKind::LinkCost
            } else {
                return None;
            };
            self.done = true;
            let costs = best_sl.zip(best_ll);
            Some(Signal { kind, slot, age_us: ack.age_us, bytes: self.bytes, costs })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SL: LaneId = LaneId::short(0);
    const LL: LaneId = LaneId::long(0);

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }
    fn d_ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }
    fn d_us(us: u64) -> Duration {
        Duration::from_micros(us)
    }

    #[test]
    fn nu_unit_scales_the_queueing_term_against_the_deadline_term() {
        assert_eq!(relative_delay(d_us(1500), d_us(500), Duration::from_millis(1)), 1.0);
        assert_eq!(relative_delay(d_us(1500), d_us(500), Duration::from_micros(10)), 100.0);
        assert_eq!(relative_delay(d_us(400), d_us(500), Duration::from_micros(1)), 0.0);
        assert_eq!(relative_delay(d_us(1500), d_us(500), Duration::ZERO), 1.0);
        // SL 2 ms above its base 50 ms into the connection, LL clean: in ms
        // the deadline term (−250) keeps the flow on SL; in µs (2000) SL is
        // left at once.
        let run = |unit: Duration| {
            let cfg = SwitchConfig { nu_unit: unit, ..SwitchConfig::default() };
            let mut s = LaneSwitcher::new(cfg, at(0));
            s.observe_base_rtt(SL, d_ms(1));
            s.observe_base_rtt(LL, d_ms(1));
            assert_eq!(s.on_sample(at(50), LL, d_ms(1)), Decision::Stay);
            s.on_sample(at(50), SL, d_ms(3))
        };
        assert_eq!(run(Duration::from_millis(1)), Decision::Stay);
        match run(Duration::from_micros(1)) {
            Decision::SwitchToLong { reason: Reason::LinkCost, lane: Some(l), .. } => assert_eq!(l, LL),
            d => panic!("expected a link-cost switch, got {d:?}"),
        }
    }

    #[test]
    fn sign_term_around_the_deadline() {
        let cfg = SwitchConfig::default();
        assert_eq!(deadline_term(&cfg, d_ms(299)), -1.0);
        assert_eq!(deadline_term(&cfg, d_ms(300)), 0.0);
        assert_eq!(deadline_term(&cfg, d_ms(301)), 1.0);
        assert_eq!(deadline_term(&cfg, d_ms(0)), -300.0);
        let cfg = SwitchConfig { gamma: 0.5, delta: 2.0, ..SwitchConfig::default() };
        assert_eq!(deadline_term(&cfg, d_ms(290)), -50.0);
        assert_eq!(deadline_term(&cfg, d_ms(310)), 50.0);
        // Concave before, convex after (Table 5.1) for δ > 1.
        let f = |t| deadline_term(&cfg, d_ms(t));
        assert!(f(280) - 2.0 * f(290) + f(300) < 0.0);
        assert!(f(300) - 2.0 * f(310) + f(320) > 0.0);
    }

    #[test]
    fn eq_5_7_costs() {
        let cfg = SwitchConfig::default();
        assert_eq!(relative_delay_ms(d_us(1500), d_us(500)), 1.0);
        assert_eq!(relative_delay_ms(d_us(400), d_us(500)), 0.0);
        assert_eq!(cost_ll(&cfg, 2.5), 3.5);
        assert_eq!(cost_sl(&cfg, 2.5, d_ms(100)), 3.5 - 200.0);
        let cfg = SwitchConfig { alpha: 2.0, beta: 2.0, t0: 0.5, ..SwitchConfig::default() };
        assert_eq!(cost_ll(&cfg, 3.0), 0.5 * (1.0 + 2.0 * 9.0));
    }

    #[test]
    fn smoothing_is_three_quarters_old() {
        assert_eq!(smooth(8.0, 4.0), 7.0);
        let mut s = LaneSwitcher::new(SwitchConfig::default(), at(0));
        s.observe_base_rtt(LL, d_ms(1));
        s.on_sample(at(1), LL, d_ms(9)); // ν 8 -> measured 9 (first sets)
        assert_eq!(s.cost(LL), Some(9.0));
        s.on_sample(at(2), LL, d_ms(1)); // measured 1 -> 0.75*9 + 0.25*1
        assert_eq!(s.cost(LL), Some(7.0));
        s.on_sample(at(3), LL, d_ms(5)); // measured 5 -> 0.75*7 + 0.25*5
        assert_eq!(s.cost(LL), Some(6.5));
    }

    #[test]
    fn short_flow_never_switches() {
        // 50 ms of samples every ms; SL has a little queueing, LL none.
        let mut s = LaneSwitcher::new(SwitchConfig::default(), at(0));
        for t in 0..50 {
            assert_eq!(s.on_sample(at(t), SL, d_us(600)), Decision::Stay);
            assert_eq!(s.on_sample(at(t), LL, d_us(100)), Decision::Stay);
        }
        assert!(s.switched().is_none());
    }

    #[test]
    fn switches_when_ll_delay_falls_below_sl() {
        let mut s = LaneSwitcher::new(SwitchConfig::default(), at(0));
        s.observe_base_rtt(SL, d_ms(1));
        // Past the deadline, LL is badly congested (ν 200 ms) and SL mildly (5 ms).
        for t in 300..400 {
            assert_eq!(s.on_sample(at(t), SL, d_ms(6)), Decision::Stay, "t={t}");
            assert_eq!(s.on_sample(at(t), LL, d_ms(201)), Decision::Stay, "t={t}");
        }
        // SL cost about 1 + 5 + 100 = 106 < LL 201: stays. LL's queue drains.
        let mut switched = None;
        for t in 400..420 {
            s.on_sample(at(t), SL, d_ms(6));
            if let d @ Decision::SwitchToLong { .. } = s.on_sample(at(t), LL, d_ms(2)) {
                switched = Some((t, d));
                break;
            }
        }
        let (t, d) = switched.expect("no switch");
        let Decision::SwitchToLong { reason, lane, costs: Some(costs), .. } = d else { panic!("{d:?}") };
        assert_eq!((reason, lane), (Reason::LinkCost, Some(LL)));
        assert!(costs.ll < costs.sl);
        // 201 decays by 3/4 per sample towards 2: below ~108 after 3 samples.
        assert_eq!(t, 402);
        let now = s.current_costs().unwrap();
        assert!(now.ll < 90.0 && now.sl > 100.0, "{now:?}");
        // Reported once.
        assert_eq!(s.on_sample(at(t + 1), LL, d_ms(2)), Decision::Stay);
    }

    #[test]
    fn heavy_sl_congestion_switches_before_the_deadline() {
        // Fig. 7.1: the more SL queues, the earlier the switch.
        let mut s = LaneSwitcher::new(SwitchConfig::default(), at(0));
        s.observe_base_rtt(SL, d_ms(1));
        s.on_sample(at(10), LL, d_ms(1));
        let d = s.on_sample(at(50), SL, d_ms(401)); // 1 + 400 - 250 = 151 > 1
        assert!(matches!(d, Decision::SwitchToLong { reason: Reason::LinkCost, .. }), "{d:?}");
    }

    #[test]
    fn no_ll_sample_means_no_link_cost_switch() {
        let mut s = LaneSwitcher::new(SwitchConfig::default(), at(0));
        for t in 0..1000 {
            assert_eq!(s.on_sample(at(t), SL, d_ms(50)), Decision::Stay);
        }
        assert_eq!(s.current_costs(), None);
    }

    #[test]
    fn size_threshold_switches_on_bytes_alone_or_before_the_cost_says_so() {
        let cfg =
            SwitchConfig { policy: Policy::Size, size_threshold: Some(1_000_000), ..SwitchConfig::default() };
        let mut s = LaneSwitcher::new(cfg, at(0));
        assert_eq!(s.on_bytes(at(10), 64_000), Decision::Stay);
        assert_eq!(s.on_bytes(at(20), 999_999), Decision::Stay);
        assert_eq!(s.on_tick(at(5000), true), Decision::Stay, "no deadline under the size policy");
        assert_eq!(
            s.on_bytes(at(30), 1_000_000),
            Decision::SwitchToLong { reason: Reason::Size, lane: None, age_ms: 30.0, costs: None }
        );
        assert_eq!(s.on_bytes(at(40), 2_000_000), Decision::Stay, "once");

        // link-cost + threshold: the bytes decide before the costs do, and
        // the cheapest LL is chosen when costs are known.
        let cfg = SwitchConfig { size_threshold: Some(500_000), ..SwitchConfig::default() };
        let mut s = LaneSwitcher::new(cfg, at(0));
        s.observe_base_rtt(SL, d_ms(1));
        assert_eq!(s.on_sample(at(5), SL, d_ms(2)), Decision::Stay);
        assert_eq!(s.on_sample(at(5), LL, d_ms(4)), Decision::Stay, "LL dearer, no cost switch");
        match s.on_bytes(at(6), 600_000) {
            Decision::SwitchToLong { reason: Reason::Size, lane: Some(l), costs: Some(_), .. } => {
                assert_eq!(l, LL)
            }
            d => panic!("{d:?}"),
        }
        // Without a threshold bytes never decide.
        let mut s = LaneSwitcher::new(SwitchConfig::default(), at(0));
        assert_eq!(s.on_bytes(at(1), u64::MAX), Decision::Stay);
    }

    #[test]
    fn reconfigure_moves_the_deadline_of_an_unswitched_connection_only() {
        let cfg = SwitchConfig { policy: Policy::Deadline, ..SwitchConfig::default() };
        let mut s = LaneSwitcher::new(cfg, at(0));
        assert_eq!(s.on_tick(at(150), true), Decision::Stay);
        s.reconfigure(SwitchConfig { t_deadline: d_ms(100), ..cfg });
        assert_eq!(s.next_deadline(), Some(at(100)));
        assert!(matches!(s.on_tick(at(150), true), Decision::SwitchToLong { reason: Reason::Deadline, .. }));
        // Switched: a later reload does not undo or repeat the decision.
        s.reconfigure(cfg);
        assert_eq!(s.next_deadline(), None);
        assert_eq!(s.on_tick(at(400), true), Decision::Stay);
        assert_eq!(s.switched().map(|(t, _)| t), Some(at(150)));
    }

    #[test]
    fn deadline_policy() {
        let cfg = SwitchConfig { policy: Policy::Deadline, ..SwitchConfig::default() };
        let mut s = LaneSwitcher::new(cfg, at(1000));
        assert_eq!(s.next_deadline(), Some(at(1300)));
        assert_eq!(s.on_tick(at(1299), true), Decision::Stay);
        // A connection that stopped transferring is left alone.
        assert_eq!(s.on_tick(at(1300), false), Decision::Stay);
        s.on_sample(at(1100), LaneId::long(1), d_ms(1));
        let d = s.on_tick(at(1300), true);
        assert_eq!(
            d,
            Decision::SwitchToLong {
                reason: Reason::Deadline,
                lane: Some(LaneId::long(1)),
                age_ms: 300.0,
                costs: None
            }
        );
        assert_eq!(s.next_deadline(), None);
        assert_eq!(s.on_tick(at(1400), true), Decision::Stay);
    }

    #[test]
    fn base_rtt_modes() {
        // LL's path is 2 ms longer than SL's. Connection-wide base counts that
        // as queueing; per-lane does not.
        let conn = SwitchConfig::default();
        let mut s = LaneSwitcher::new(conn, at(0));
        s.on_sample(at(0), SL, d_ms(1));
        s.on_sample(at(0), LL, d_ms(3));
        assert_eq!(s.cost(LL), Some(3.0));
        let per = SwitchConfig { base: BaseRtt::PerLane, ..conn };
        let mut s = LaneSwitcher::new(per, at(0));
        s.on_sample(at(0), SL, d_ms(1));
        s.on_sample(at(0), LL, d_ms(3));
        assert_eq!(s.cost(LL), Some(1.0));
    }

    #[test]
    fn decisions_serialize_as_json_lines() {
        let d = Decision::SwitchToLong {
            reason: Reason::LinkCost,
            lane: Some(LL),
            age_ms: 301.5,
            costs: Some(Costs { sl: 3.0, ll: 2.0 }),
        };
        let j = serde_json::to_string(&d).unwrap();
        assert_eq!(
            j,
            r#"{"action":"switch_to_long","reason":"link_cost","lane":{"kind":"long","index":0},"age_ms":301.5,"costs":{"sl":3.0,"ll":2.0}}"#
        );
        assert_eq!(serde_json::to_string(&Decision::Stay).unwrap(), r#"{"action":"stay"}"#);
        let cfg: SwitchConfig =
            serde_json::from_str(&serde_json::to_string(&SwitchConfig::default()).unwrap()).unwrap();
        assert_eq!(cfg, SwitchConfig::default());
    }

    mod bpf_twin {
        use super::super::bpf::*;
        use super::super::*;
        use super::{at, d_us, LL, SL};
        use proptest::prelude::*;

        fn params(cfg: &SwitchConfig) -> BpfParams {
            BpfParams::new(cfg).unwrap()
        }

        #[test]
        fn fixed_point_costs_equal_the_float_formula_on_exact_inputs() {
            // Inputs chosen so that every fixed-point step is exact: ν in
            // whole units, t − t_d in multiples of 125 µs (1024/1000 = 128/125).
            for (alpha, beta, gamma, delta, t0) in
                [(1.0, 1.0, 1.0, 1.0, 1.0), (2.0, 2.0, 0.5, 2.0, 0.5), (0.25, 1.0, 3.0, 2.0, 4.0)]
            {
                let cfg = SwitchConfig { alpha, beta, gamma, delta, t0, ..SwitchConfig::default() };
                let p = params(&cfg);
                for nu_units in [0u32, 1, 3, 17, 250, 1000] {
                    let (rtt, base) = (1000 + nu_units * 1000, 1000); // unit 1 ms
                    let nu = nu_fp(rtt, base, p.nu_unit_us);
                    assert_eq!(nu, (nu_units as u64) << FP_SHIFT);
                    let float =
                        cost_ll(&cfg, relative_delay(d_us(rtt as u64), d_us(base as u64), cfg.nu_unit));
                    assert_eq!(to_f64(cost_ll_fp(&p, nu)), float, "cost_ll ν={nu_units} {cfg:?}");
                    for age_us in [0u64, 125, 100_000, 299_875, 300_000, 300_125, 450_000, 1_000_000] {
                        let age = d_us(age_us);
                        let want = cost_sl(
                            &cfg,
                            relative_delay(d_us(rtt as u64), d_us(base as u64), cfg.nu_unit),
                            age,
                        );
                        let got = cost_ll_fp(&p, nu) + deadline_term_fp(&p, age_us);
                        assert_eq!(to_f64(got), want, "cost_sl ν={nu_units} age={age_us}µs {cfg:?}");
                    }
                }
            }
            // The µs unit of the thesis's Fig. 7.1 reading: 37 µs of queue is ν = 37.
            let cfg = SwitchConfig { nu_unit: d_us(1), ..SwitchConfig::default() };
            let p = params(&cfg);
            assert_eq!(to_f64(cost_ll_fp(&p, nu_fp(537, 500, p.nu_unit_us))), 38.0);
            // Smoothing of exact values is exact: 3/4·9 + 1/4·1 = 7.
            assert_eq!(smooth_fp(9 << FP_SHIFT, 1 << FP_SHIFT), 7 << FP_SHIFT);
            assert_eq!(to_f64(smooth_fp(-(300 << FP_SHIFT), 1 << FP_SHIFT)), smooth(-300.0, 1.0));
        }

        #[test]
        fn large_terms_saturate_instead_of_overflowing() {
            let cfg = SwitchConfig {
                beta: 2.0,
                delta: 2.0,
                alpha: 1024.0,
                gamma: 1024.0,
                t0: 1024.0,
                ..SwitchConfig::default()
            };
            let p = params(&cfg);
            assert_eq!(pow_fp(SQ_BASE_MAX, 2), POW_MAX);
            assert_eq!(pow_fp(SQ_BASE_MAX + 1, 2), POW_MAX);
            assert_eq!(pow_fp(u64::MAX, 1), POW_MAX);
            let top = cost_ll_fp(&p, nu_fp(u32::MAX, 0, 1));
            assert!(top > 0 && top < 1 << 62, "{top}");
            assert_eq!(top, cost_ll_fp(&p, POW_MAX));
            let t = deadline_term_fp(&p, u64::MAX / 2048);
            assert!(t > 0 && t < 1 << 62);
            assert_eq!(deadline_term_fp(&p, 0), -deadline_term_fp(&p, 600_000), "symmetric around t_d");
            // Even the largest costs smooth without overflow.
            assert!(smooth_fp(top + t, top + t) > 0);
        }

        #[test]
        fn configs_the_bpf_path_cannot_express_are_refused_by_name() {
            let refuse = |cfg: SwitchConfig| BpfParams::new(&cfg).unwrap_err();
            let d = SwitchConfig::default();
            assert_eq!(refuse(SwitchConfig { beta: 1.5, ..d }).field, "policy.beta");
            assert_eq!(refuse(SwitchConfig { delta: 3.0, ..d }).field, "policy.delta");
            assert_eq!(refuse(SwitchConfig { alpha: 0.3, ..d }).field, "policy.alpha");
            assert_eq!(refuse(SwitchConfig { gamma: 2000.0, ..d }).field, "policy.gamma");
            assert_eq!(refuse(SwitchConfig { t0: 0.0, ..d }).field, "policy.t0");
            let e = refuse(SwitchConfig { nu_unit: Duration::from_nanos(1500), ..d });
            assert_eq!(e.field, "policy.nu_unit");
            assert!(e.to_string().contains("signals = \"diag\""), "{e}");
            let p = params(&SwitchConfig { alpha: 0.5, gamma: 0.0, size_threshold: Some(1 << 20), ..d });
            assert_eq!((p.alpha_fp, p.gamma_fp, p.t0_fp, p.size_threshold), (512, 0, 1024, 1 << 20));
            assert_eq!((p.t_deadline_us, p.nu_unit_us, p.policy), (300_000, 1000, POLICY_LINK_COST));
        }

        const LL_MASK: u32 = 0b10; // slot 0 SL, slot 1 LL

        fn ack(kind: LaneKind, rtt_us: u32, age_ms: u64) -> Ack {
            let slot = if kind == LaneKind::Short { 0 } else { 1 };
            Ack { slot, kind, rtt_us, bytes: 0, age_us: age_ms * 1000, fresh: true }
        }

        #[test]
        fn only_segments_after_new_acknowledgements_sample_sl() {
            // A download: the connection's SL subflow receives data and
            // acknowledges nothing new, so srtt_us keeps its handshake value.
            // Those segments count bytes and age (size and deadline still
            // decide) but give SL no cost sample; the ACK of the sender's
            // next data does.
            assert!(!Ack::fresh_rtt(1000, 1000));
            assert!(Ack::fresh_rtt(1000, 2448));
            let p = params(&SwitchConfig::default());
            let mut c = BpfConn::default();
            let lanes = [LaneSample::default(); MAX_SLOTS];
            let stale = Ack { fresh: false, ..ack(LaneKind::Short, 3000, 10) };
            for _ in 0..100 {
                assert_eq!(c.on_ack(&p, LL_MASK, stale, 1448, &lanes), None);
            }
            assert_eq!((c.have, c.bytes), (0, 144_800), "bytes counted, no SL cost");
            c.on_ack(&p, LL_MASK, ack(LaneKind::Short, 3000, 11), 1448, &lanes);
            assert_eq!(to_f64(c.cost[0]), 1.0 + (11.0 - 300.0), "the first sample sets the cost");
            c.on_ack(&p, LL_MASK, Ack { fresh: false, ..ack(LaneKind::Short, 3000, 12) }, 1448, &lanes);
            assert_eq!(to_f64(c.cost[0]), -288.0, "a stale segment does not smooth it again");
            c.on_ack(&p, LL_MASK, ack(LaneKind::Short, 3000, 15), 1448, &lanes);
            assert_eq!(to_f64(c.cost[0]), (3.0 * -288.0 + (1.0 + 15.0 - 300.0)) / 4.0);
            // Under the deadline policy a download still switches on time.
            let d = params(&SwitchConfig { policy: Policy::Deadline, ..SwitchConfig::default() });
            let mut c = BpfConn::default();
            let late = Ack { fresh: false, ..ack(LaneKind::Short, 3000, 300) };
            let s = c.on_ack(&d, LL_MASK, late, 1448, &lanes).expect("deadline on a data segment");
            assert_eq!((s.kind, s.age_us), (SignalKind::Deadline, 300_000));
        }

        #[test]
        fn size_signal_once_after_the_threshold_with_the_cheapest_lane() {
            let cfg = SwitchConfig {
                policy: Policy::Size,
                size_threshold: Some(1_000_000),
                ..SwitchConfig::default()
            };
            let p = params(&cfg);
            let mut c = BpfConn::default();
            let mut lanes = [LaneSample::default(); MAX_SLOTS];
            assert_eq!(c.on_ack(&p, LL_MASK, ack(LaneKind::Short, 1000, 1), 64_000, &lanes), None);
            lanes[1] = LaneSample { seq: 1, rtt_us: 1000 };
            assert_eq!(c.on_ack(&p, LL_MASK, ack(LaneKind::Short, 1000, 2), 935_999, &lanes), None);
            let s = c.on_ack(&p, LL_MASK, ack(LaneKind::Short, 1000, 3), 1, &lanes).unwrap();
            assert_eq!((s.kind, s.slot, s.bytes, s.age_us), (SignalKind::Size, Some(1), 1_000_000, 3000));
            // SL: 1 + (3 − 300) = −296; the LL sample counted once: 1.
            assert_eq!(s.costs.map(|(sl, ll)| (to_f64(sl), to_f64(ll))), Some((-297.3125, 1.0)));
            assert_eq!(c.on_ack(&p, LL_MASK, ack(LaneKind::Short, 1000, 4), 1_000_000, &lanes), None, "once");
            assert_eq!(c.bytes, 2_000_000, "bytes still counted");
        }

        #[test]
        fn deadline_signal_on_the_first_ack_at_or_past_t_deadline() {
            let p = params(&SwitchConfig { policy: Policy::Deadline, ..SwitchConfig::default() });
            let mut c = BpfConn::default();
            let lanes = [LaneSample::default(); MAX_SLOTS];
            assert_eq!(c.on_ack(&p, LL_MASK, ack(LaneKind::Short, 500, 299), 1, &lanes), None);
            let s = c.on_ack(&p, LL_MASK, ack(LaneKind::Short, 500, 300), 1, &lanes).unwrap();
            assert_eq!((s.kind, s.slot, s.costs), (SignalKind::Deadline, None, None));
            assert_eq!(c.have, 0, "no costs kept under the deadline policy");
        }

        #[test]
        fn link_cost_signal_matches_the_float_switcher_on_equal_lanes() {
            // The float LaneSwitcher and the twin, fed the same samples every
            // ms (LL's path 0.5 ms longer), switch on the same ACK just after
            // the deadline. Not on equal lanes: there the float cost of SL
            // crosses LL's by a transient of 3·0.75^303 that the twin's
            // floored smoothing drops, one ACK later (a knife edge, not a
            // difference in the formula).
            let cfg = SwitchConfig::default();
            let p = params(&cfg);
            let mut c = BpfConn::default();
            let mut f = LaneSwitcher::new(cfg, at(0));
            let mut lanes = [LaneSample::default(); MAX_SLOTS];
            let mut twin_at = None;
            let mut float_at = None;
            for t in 0..400u64 {
                lanes[1] = LaneSample { seq: t + 1, rtt_us: 2500 };
                if twin_at.is_none()
                    && c.on_ack(&p, LL_MASK, ack(LaneKind::Short, 2000, t), 1448, &lanes).is_some()
                {
                    twin_at = Some(t);
                }
                f.on_sample(at(t), LL, d_us(2500));
                if float_at.is_none()
                    && matches!(f.on_sample(at(t), SL, d_us(2000)), Decision::SwitchToLong { .. })
                {
                    float_at = Some(t);
                }
            }
            assert_eq!(twin_at, float_at);
            assert!(twin_at.is_some_and(|t| t > 300 && t < 310), "{twin_at:?}");
        }

        #[test]
        fn a_lane_sample_is_applied_once_per_connection() {
            let p = params(&SwitchConfig::default());
            let mut c = BpfConn::default();
            let mut lanes = [LaneSample::default(); MAX_SLOTS];
            lanes[1] = LaneSample { seq: 7, rtt_us: 9000 };
            c.on_ack(&p, LL_MASK, ack(LaneKind::Short, 1000, 1), 1, &lanes);
            assert_eq!(to_f64(c.cost[1]), 9.0); // ν 8 ms over the connection's base of 1 ms
            c.on_ack(&p, LL_MASK, ack(LaneKind::Short, 1000, 2), 1, &lanes);
            assert_eq!(to_f64(c.cost[1]), 9.0, "same sequence number: not applied again");
            lanes[1] = LaneSample { seq: 8, rtt_us: 1000 };
            c.on_ack(&p, LL_MASK, ack(LaneKind::Short, 1000, 3), 1, &lanes);
            assert_eq!(to_f64(c.cost[1]), 7.0);
        }

        proptest! {
            #[test]
            fn twin_costs_stay_within_a_unit_of_the_float_formula(
                nu_us in 0u32..200_000, base in 1u32..10_000, age_us in 0u64..2_000_000,
                alpha in 0u64..4096, gamma in 0u64..4096, beta in 1u32..3, delta in 1u32..3,
                unit in prop::sample::select(vec![1u64, 10, 100, 1000]),
            ) {
                let cfg = SwitchConfig {
                    alpha: alpha as f64 / 1024.0, gamma: gamma as f64 / 1024.0,
                    beta: beta as f64, delta: delta as f64, nu_unit: d_us(unit),
                    ..SwitchConfig::default()
                };
                let p = params(&cfg);
                let nu_units = nu_us as f64 / unit as f64;
                let x_ms = (age_us as f64 - 300_000.0).abs() / 1000.0;
                // Stay below the saturation points.
                prop_assume!(nu_units.powf(cfg.beta) < (1u64 << 20) as f64 && x_ms.powf(cfg.delta) < (1u64 << 20) as f64);
                let rtt = base + nu_us;
                let nu = nu_fp(rtt, base, p.nu_unit_us);
                let got = to_f64(cost_ll_fp(&p, nu) + deadline_term_fp(&p, age_us));
                let want = cost_sl(&cfg, relative_delay(d_us(rtt as u64), d_us(base as u64), cfg.nu_unit), d_us(age_us));
                // Truncation of ν and |x| to 1/1024 of a unit, squared at
                // most, times coefficients of at most 4: a few units at most.
                let tol = 4.0 * (1.0 + 2.0 * nu_units.max(x_ms)) / 1024.0 * 4.0 + 0.01;
                prop_assert!((got - want).abs() <= tol, "got {got} want {want} tol {tol}");
            }
        }
    }

    proptest! {
        #[test]
        fn equal_lanes_switch_shortly_after_the_deadline(rtt_us in 100u64..5_000, step_ms in 1u64..20) {
            // Identical lanes with default parameters: SL is cheaper before the
            // deadline, never switches before it, and switches soon after.
            let mut s = LaneSwitcher::new(SwitchConfig::default(), at(0));
            let mut t = 0;
            let when = loop {
                s.on_sample(at(t), LL, d_us(rtt_us));
                if let Decision::SwitchToLong { .. } = s.on_sample(at(t), SL, d_us(rtt_us)) {
                    break t;
                }
                t += step_ms;
                prop_assert!(t < 2_000);
            };
            prop_assert!(when > 300);
            prop_assert!(when <= 300 + 8 * step_ms);
        }
    }
}
