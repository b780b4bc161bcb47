//! What a scenario claims: the seed papers' published figures and the
//! goals tcpaccel set itself, as data each scenario owns
//! ([`Scenario::claims`](crate::runner::scenario::Scenario::claims)) and
//! the report judges against a run's records (`crate::report::judge`).
//!
//! Published figures are made scale-free where the lab scales a run down
//! (`--quick`, or a machine that cannot carry the paper's rate): a goodput
//! becomes a share of the path's goodput limit, a drop count a ratio to the
//! unpaced variant's. The published value of such a claim is the same ratio
//! computed from the paper's own figures, so it stays comparable at any scale.
//! A claim's measured value and its reference measure the same thing, and
//! its verdict line names the variants it judges ([`Measure::variants`]).

/// A quantity measured from a run's summaries: medians over repeats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Measure {
    /// The median of `metric` in `variant`.
    Median { variant: &'static str, metric: &'static str },
    /// The median of one (variant, metric) divided by the median of another.
    Ratio { num: (&'static str, &'static str), den: (&'static str, &'static str) },
    /// A goodput median (Mbit/s) divided by the path's goodput limit
    /// (the run's `rate` parameter × 1448/1538).
    ShareOfLimit { variant: &'static str, metric: &'static str },
    /// A burst completion median (ms) divided by the ideal completion of
    /// one burst as the scenario measures it: `burst` bytes at `rate`
    /// plus one `rtt` (the time runs from the scheduled start to the
    /// ACK of the last byte).
    OverIdealBurst { variant: &'static str, metric: &'static str },
    /// A median in ms divided by a duration parameter (e.g. `t_deadline`).
    OverParamMs { variant: &'static str, metric: &'static str, param: &'static str },
    /// Per-point metrics `BASE@LABEL=X` of `variant`: the median at the
    /// largest X divided by the median at the smallest X.
    PointSpan { variant: &'static str, base: &'static str, label: &'static str },
}

impl Measure {
    /// The variants whose medians the measure reads, in the order named.
    pub fn variants(&self) -> Vec<&'static str> {
        match *self {
            Measure::Median { variant, .. }
            | Measure::ShareOfLimit { variant, .. }
            | Measure::OverIdealBurst { variant, .. }
            | Measure::OverParamMs { variant, .. }
            | Measure::PointSpan { variant, .. } => vec![variant],
            Measure::Ratio { num, den } => vec![num.0, den.0],
        }
    }
}

/// What the measured quantity must satisfy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    AtLeast(f64),
    AtMost(f64),
    /// Strictly greater (a ratio that must show a gain, not a tie).
    Above(f64),
    /// Strictly less.
    Below(f64),
    Between(f64, f64),
}

impl Goal {
    pub fn holds(&self, x: f64) -> bool {
        match *self {
            Goal::AtLeast(g) => x >= g,
            Goal::AtMost(g) => x <= g,
            Goal::Above(g) => x > g,
            Goal::Below(g) => x < g,
            Goal::Between(lo, hi) => (lo..=hi).contains(&x),
        }
    }

    /// "≥ 0.9", "≤ 0.2", "> 1", "< 1", "1–1.25".
    pub fn text(&self) -> String {
        match *self {
            Goal::AtLeast(g) => format!("≥ {}", fmt(g)),
            Goal::AtMost(g) => format!("≤ {}", fmt(g)),
            Goal::Above(g) => format!("> {}", fmt(g)),
            Goal::Below(g) => format!("< {}", fmt(g)),
            Goal::Between(lo, hi) => format!("{}–{}", fmt(lo), fmt(hi)),
        }
    }
}

/// A published figure in the claim's own quantity, and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    pub value: f64,
    pub source: &'static str,
}

/// One line of a verdict block.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Claim {
    /// The claim in words, as the report prints it.
    pub text: &'static str,
    pub measure: Measure,
    pub goal: Goal,
    /// Where the goal comes from (BENCHMARKS.md target, the seed's direction).
    pub goal_source: &'static str,
    pub published: Option<Figure>,
    /// Run parameters the claim needs (`key`, `value`), e.g. gather's
    /// `model=2`; a run with other values does not show the claim.
    pub when: &'static [(&'static str, &'static str)],
}

pub const SEED000: &str = "[PSPacer] table (GtrcNET-1, 500 Mbit/s, 100 ms, 1 MB buffer)";
pub const GOAL_BENCH: &str = "BENCHMARKS.md target";
pub const GOAL_DIRECTION: &str = "the seed's direction";
/// Goal of this project's own variants: beat the baselines the seed beats.
pub const GOAL_OWN: &str = "this project's policy against the seed's baselines";

/// [Lanes] §6's ordering of one statistic at one load (lanes < RepFlow <
/// pure MPTCP, Fig. 6.9–6.13): `better`'s median no worse than `worse`'s.
pub const fn thesis_order(
    text: &'static str,
    better: &'static str,
    worse: &'static str,
    metric: &'static str,
) -> Claim {
    Claim {
        text,
        measure: Measure::Ratio { num: (better, metric), den: (worse, metric) },
        goal: Goal::AtMost(1.0),
        goal_source: GOAL_DIRECTION,
        published: None,
        when: &[],
    }
}

/// Short numbers for verdict lines: 3 significant digits, no trailing zeros.
pub fn fmt(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == 0.0 {
        return "0".into();
    }
    let digits = (2 - x.abs().log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{x:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}
