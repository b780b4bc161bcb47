//! What a run means for the reader: per variant, the tcpaccel commands that
//! give its effect on the reader's own path, with what it measured against
//! the baseline; and the short terms the page uses (PSPS, BDP, D, …),
//! defined once where the page first needs them.
//!
//! Like the claims ([`super::published`]) this is keyed by scenario name and
//! rendered from the records alone, so an old run directory gets today's
//! advice. Only scenarios whose variants map onto commands have advice (the
//! demo); every page gets the terms it uses.

use super::judge::fmt;
use super::tables::tables;
use crate::runner::records::RunData;
use std::fmt::Write;
use tcpaccel_core::units::{parse_duration, Rate};
use tcpaccel_plot::escape;

/// One variant's commands, from the run's own path parameters.
struct Advice {
    variant: &'static str,
    /// What the variant did, in words.
    what: &'static str,
    /// The commands, each on its own line.
    commands: Vec<String>,
}

/// The demo's variants as commands for the reader's path (the run's `rate`
/// and `rtt`): the same settings the scenario made in its namespaces.
fn demo_advice(rate: &str, rtt: &str) -> Vec<Advice> {
    let doctor = format!("tcpaccel doctor --rate {rate} --rtt {rtt} --apply");
    vec![
        Advice {
            variant: "bdp-buffers",
            what: "tcp_rmem/tcp_wmem maxima raised to 2×BDP on both hosts",
            commands: vec![format!("{doctor}   # on both hosts; --revert FILE undoes it")],
        },
        Advice {
            variant: "static-pacing",
            what: "the same buffers, and every segment paced at the bottleneck rate",
            commands: vec![
                doctor.clone(),
                format!("tcpaccel pace run --pace static:{rate} -- PROGRAM   # any program, in-kernel (BPF)"),
                format!("tcpaccel send --to HOST:PORT --pace static:{rate}   # or tcpaccel's own sender"),
            ],
        },
        Advice {
            variant: "bbr",
            what: "the same buffers, and BBR instead of CUBIC",
            commands: vec![doctor, "tcpaccel run --cc bbr -- PROGRAM".to_string()],
        },
    ]
}

/// The medians of the counted runs' goodput per variant (Mbit/s).
fn goodputs(data: &RunData) -> Vec<(String, f64)> {
    tables(data)
        .into_iter()
        .filter(|t| t.metric == "goodput_mbps")
        .flat_map(|t| t.rows.into_iter().filter_map(|r| r.spread.map(|s| (r.variant, s.median))))
        .collect()
}

/// What a demo run means, from its records.
struct Meaning {
    rate: String,
    rtt: String,
    advice: Vec<Advice>,
    /// Goodput of the defaults (Mbit/s), where a counted run has it.
    base: Option<f64>,
    /// Each advised variant's goodput ÷ the defaults'.
    gains: Vec<Option<f64>>,
    goodput: Vec<Option<f64>>,
}

impl Meaning {
    fn of(data: &RunData) -> Option<Meaning> {
        let h = data.header();
        if h.scenario != "demo" {
            return None;
        }
        let (rate, rtt) = (h.params.get("rate")?.clone(), h.params.get("rtt")?.clone());
        let good = goodputs(data);
        let of = |v: &str| good.iter().find(|(n, _)| n == v).map(|(_, g)| *g);
        let base = of("defaults").filter(|b| *b > 0.0);
        let advice = demo_advice(&rate, &rtt);
        let goodput: Vec<Option<f64>> = advice.iter().map(|a| of(a.variant)).collect();
        let gains = goodput.iter().map(|g| base.zip(*g).map(|(b, g)| g / b)).collect();
        Some(Meaning { rate, rtt, advice, base, gains, goodput })
    }

    /// The advised variant with the largest gain, when it beat the defaults.
    fn best(&self) -> Option<usize> {
        (0..self.advice.len())
            .filter_map(|i| self.gains[i].map(|g| (i, g)))
            .filter(|(_, g)| *g > 1.0)
            .max_by(|x, y| x.1.total_cmp(&y.1))
            .map(|(i, _)| i)
    }

    /// The headline: the best gain, and what to run for it (plain text; the
    /// commands apart).
    fn headline(&self) -> (String, Option<String>) {
        match (self.best(), self.base) {
            (Some(i), Some(b)) => (
                format!(
                    "On this path ({} × {} round trip), {} gave {}× the goodput of the kernel's defaults ({} against \
                     {} Mbit/s): {}. To get the same on your own path, with its rate and RTT:",
                    self.rate,
                    self.rtt,
                    self.advice[i].variant,
                    fmt(self.gains[i].unwrap_or(0.0)),
                    fmt(self.goodput[i].unwrap_or(0.0)),
                    fmt(b),
                    self.advice[i].what
                ),
                Some(self.advice[i].commands.join("\n")),
            ),
            (None, Some(_)) => ("No variant beat the kernel's defaults' goodput in this run.".into(), None),
            (_, None) => {
                ("The defaults' goodput is not known from this run (see Fidelity), so no gain is stated.".into(), None)
            }
        }
    }

    /// Why bdp-buffers did not help, when it measured within 5% of the defaults.
    fn bdp_note(&self) -> Option<String> {
        let i = self.advice.iter().position(|a| a.variant == "bdp-buffers")?;
        let g = self.gains[i].filter(|g| (0.95..=1.05).contains(g))?;
        Some(format!(
            "bdp-buffers measured {}× the defaults: raising the buffers gains little where the host's maxima \
             already hold the path's bandwidth-delay product ({}; the note under Parameters gives this host's \
             maxima against it). On a host whose maxima are below it, that is the first fix.",
            fmt(g),
            bdp_text(&self.rate, &self.rtt)
        ))
    }
}

/// The "What this means for you" section: the best variant's gain over the
/// defaults and the commands behind every variant. Empty for scenarios
/// without advice.
pub fn meaning_html(data: &RunData) -> String {
    let Some(m) = Meaning::of(data) else { return String::new() };
    let mut o = String::from("<section class=\"meaning\" id=\"meaning\"><h2>What this means for you</h2>");
    let (head, cmds) = m.headline();
    let _ = write!(o, "<p>{}</p>", escape(&head));
    if let Some(c) = cmds {
        let _ = write!(o, "<pre>{}</pre>", escape(&c));
    }
    let _ = write!(
        o,
        "<table><tr><th>variant</th><th>what it set</th><th>÷ defaults</th><th>the commands</th></tr>"
    );
    for (i, a) in m.advice.iter().enumerate() {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>",
            escape(a.variant),
            escape(a.what),
            m.gains[i].map(|g| format!("{}×", fmt(g))).unwrap_or_else(|| "—".into()),
            escape(&a.commands.join("\n"))
        );
    }
    o.push_str("</table>");
    if let Some(n) = m.bdp_note() {
        let _ = write!(o, "<p>{}</p>", escape(&n));
    }
    o.push_str("</section>");
    o
}

/// The same for the terminal summary: the headline, its commands, the
/// bdp-buffers note. Empty for scenarios without advice.
pub fn meaning_markdown(data: &RunData) -> String {
    let Some(m) = Meaning::of(data) else { return String::new() };
    let (head, cmds) = m.headline();
    let mut o = format!("**What this means for you.** {head}\n\n");
    if let Some(c) = cmds {
        let _ = writeln!(o, "```sh\n{c}\n```\n");
    }
    if let Some(n) = m.bdp_note() {
        let _ = writeln!(o, "{n}\n");
    }
    o
}

/// "BDP 3.75MB (300Mbit/s × 100ms)", from the run's parameters.
fn bdp_text(rate: &str, rtt: &str) -> String {
    match (rate.parse::<Rate>(), parse_duration(rtt)) {
        (Ok(r), Ok(t)) => format!(
            "BDP {} = {} × {}",
            tcpaccel_core::units::Bytes(tcpaccel_core::units::bdp_bytes(r, t)),
            escape(rate),
            escape(rtt)
        ),
        _ => "the BDP".to_string(),
    }
}

/// The short terms a report may use, and what each means. docs/glossary.md
/// holds the same terms for the CLI (a test checks each is there).
pub const TERMS: &[(&str, &str)] = &[
    ("BDP", "bandwidth-delay product: rate × round-trip time, the bytes a path holds in flight; a window or buffer below it caps the goodput."),
    ("noPSP", "[PSPacer]'s unpaced baseline (\"no PSPacer\"): the kernel's TCP with no pacing."),
    ("PSPS", "[PSPacer] Static: every segment paced at a fixed rate, the bottleneck's (this lab's static pacing)."),
    ("PSPD", "[PSPacer] Dynamic: paced at cwnd·mss/RTT, recomputed as the window moves (eq. 1; this lab's dynamic pacing)."),
    ("D", "the time dilation of a scaled run: rates divided by D, times multiplied by D; figures are in experiment units (wall time ÷ D)."),
    ("FCT", "flow completion time: from a flow's first byte sent to its last byte received."),
    ("SL", "Short-flow Lane: the path [Lanes] keeps for short flows."),
    ("LL", "Long-flow Lane: a path long flows are moved to."),
    ("KS", "Kolmogorov–Smirnov distance: the largest gap between two CDFs (0 = the same distribution, 1 = disjoint)."),
];

/// Whether `term` occurs in `text` as a word of its own.
fn has_word(text: &str, term: &str) -> bool {
    text.match_indices(term).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + term.len()..].chars().next();
        let edge = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric() && c != '_' && c != '-');
        edge(before) && edge(after)
    })
}

/// The terms a Markdown summary uses, one line each; empty when none.
pub fn terms_markdown(text: &str) -> String {
    let used: Vec<_> = TERMS.iter().filter(|(t, _)| has_word(text, t)).collect();
    let mut o = String::new();
    if !used.is_empty() {
        o.push_str("\nTerms:\n");
        for (t, d) in used {
            let _ = writeln!(o, "- {t}: {d}");
        }
    }
    o
}

/// The definitions of the terms `page` (HTML text) uses, as a list; empty
/// when it uses none. The terms are looked for in the text outside tags.
pub fn terms_html(page: &str) -> String {
    let mut text = String::with_capacity(page.len());
    let mut in_tag = false;
    for c in page.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    let used: Vec<_> = TERMS.iter().filter(|(t, _)| has_word(&text, t)).collect();
    if used.is_empty() {
        return String::new();
    }
    let mut o = String::from("<section id=\"terms\"><h2>Terms</h2><dl class=\"key\">");
    for (t, d) in used {
        let _ = write!(o, "<dt>{}</dt><dd>{}</dd>", escape(t), escape(d));
    }
    o.push_str("</dl></section>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::records::{Record, Summary};
    use crate::testdata;
    use std::collections::BTreeMap;

    fn demo(goodput: &[(&str, f64)]) -> RunData {
        let mut h = testdata::header();
        h.scenario = "demo".into();
        h.params = [("rate", "300mbit"), ("rtt", "100ms"), ("buffer", "1MB")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        h.variants = goodput.iter().map(|(v, _)| v.to_string()).collect();
        h.metrics = crate::testbeds::dumbbell::standard_metrics();
        let mut d = RunData::default();
        d.push(Record::Run(h));
        for (v, g) in goodput {
            d.push(Record::Summary(Summary {
                variant: v.to_string(),
                repeat: 0,
                metrics: BTreeMap::from([("goodput_mbps".to_string(), *g)]),
                started: 0.0,
                ended: 1.0,
            }));
        }
        d
    }

    #[test]
    fn the_demo_names_the_command_behind_its_best_gain() {
        let d =
            demo(&[("defaults", 150.0), ("bdp-buffers", 151.0), ("static-pacing", 213.0), ("bbr", 180.0)]);
        let md = meaning_markdown(&d);
        assert!(md.contains("static-pacing gave 1.42×") && md.contains("```sh\ntcpaccel doctor"), "{md}");
        let m = meaning_html(&d);
        assert!(m.contains("static-pacing gave 1.42× the goodput"), "{m}");
        assert!(m.contains("tcpaccel pace run --pace static:300mbit -- PROGRAM"), "{m}");
        assert!(m.contains("tcpaccel doctor --rate 300mbit --rtt 100ms --apply"), "{m}");
        assert!(m.contains("<td>bbr</td>") && m.contains("<td>1.2×</td>"), "{m}");
        // bdp-buffers within 5% of the defaults: the page says why, with
        // the BDP computed from the run's parameters.
        assert!(
            m.contains("bdp-buffers measured 1.01×") && m.contains("BDP 3.75MB = 300mbit × 100ms"),
            "{m}"
        );
        // A bdp-buffers that helped needs no excuse.
        let d = demo(&[("defaults", 100.0), ("bdp-buffers", 150.0)]);
        assert!(!meaning_html(&d).contains("gains little"));
        // Nothing beat the defaults; no defaults at all.
        assert!(meaning_html(&demo(&[("defaults", 100.0), ("bbr", 90.0)])).contains("No variant beat"));
        assert!(meaning_html(&demo(&[("bbr", 90.0)])).contains("is not known"));
        // Other scenarios: nothing.
        assert_eq!(meaning_html(&testdata::run()), "");
        assert_eq!(meaning_markdown(&testdata::run()), "");
    }

    #[test]
    fn terms_are_defined_only_where_the_page_uses_them() {
        let t = terms_html("<p>PSPS 433 / noPSP 200</p><code class=\"FCT\">x</code> BDPs");
        assert!(t.contains("<dt>PSPS</dt>") && t.contains("<dt>noPSP</dt>"), "{t}");
        assert!(!t.contains("<dt>FCT</dt>"), "a term inside a tag: {t}");
        assert!(!t.contains("<dt>BDP</dt>"), "part of a word: {t}");
        assert!(!t.contains("<dt>D</dt>"), "{t}");
        assert_eq!(terms_html("<p>nothing here</p>"), "");
        assert!(terms_html("scale D = 4").contains("<dt>D</dt>"));
    }

    #[test]
    fn every_term_is_in_the_glossary() {
        let doc = include_str!("../../../../docs/glossary.md");
        for (t, _) in TERMS {
            assert!(doc.contains(&format!("**{t}**")), "docs/glossary.md lacks {t}");
        }
    }
}
