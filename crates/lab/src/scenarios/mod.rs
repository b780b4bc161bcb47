//! The registry of lab scenarios: one experiment per file (the lanes
//! experiments in `lanes/`, with the daemons they share), each registered in
//! [`all`]. Topologies they share are in [`crate::testbeds`].

use crate::runner::scenario::Scenario;

pub mod demo;
pub mod gather;
pub mod idle;
pub mod lanes;
pub mod pacing;
pub mod pacing_apps;
pub mod pacing_cpu;
pub mod pacing_mptcp;
pub mod pacing_web;
pub mod rto;
pub mod split;
pub mod tuning;

/// Every scenario, in the order `lab list` shows them.
pub fn all() -> Vec<Box<dyn Scenario>> {
    vec![
        Box::new(demo::Demo),
        Box::new(tuning::Tuning),
        Box::new(rto::Rto),
        Box::new(split::Split),
        Box::new(pacing::Pacing),
        Box::new(pacing_mptcp::PacingMptcp),
        Box::new(pacing_cpu::PacingCpu),
        Box::new(pacing_web::PacingWeb),
        Box::new(pacing_apps::PacingApps),
        Box::new(idle::Idle),
        Box::new(gather::Gather),
        Box::new(lanes::LanesBasic),
        Box::new(lanes::LanesBuildup),
        Box::new(lanes::LanesRealistic(crate::engines::workloads::Mix::WebSearch)),
        Box::new(lanes::LanesRealistic(crate::engines::workloads::Mix::DataMining)),
        Box::new(lanes::LanesParams),
    ]
}

/// Looks a scenario up by name; the error lists the valid names.
/// `data` with today's claims of its scenario (none for a scenario this
/// build does not know), for rendering a run read from its directory.
pub fn with_claims(mut data: crate::runner::records::RunData) -> crate::runner::records::RunData {
    data.claims = all()
        .into_iter()
        .find(|s| s.name() == data.header().scenario)
        .map_or(&[][..], |s| s.claims())
        .to_vec();
    data
}

pub fn find(name: &str) -> anyhow::Result<Box<dyn Scenario>> {
    let all = all();
    let names: Vec<&str> = all.iter().map(|s| s.name()).collect();
    let list = names.join(", ");
    all.into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| anyhow::anyhow!("unknown scenario {name:?}; valid scenarios: {list}"))
}

#[cfg(test)]
mod claims_tests {
    use super::*;
    use crate::runner::records::{Record, RunData};

    /// A run read back from its directory (`lab report`, `lab merge`) is
    /// judged by its scenario's own claims, and every scenario that shows
    /// a paper's figure in its tables states what it claims about it.
    #[test]
    fn claims_are_found_for_every_scenario_that_reports_a_verdict() {
        let mut with_verdict = Vec::new();
        for s in all() {
            let mut h = crate::testdata::header();
            h.scenario = s.name().into();
            let mut d = RunData::default();
            d.push(Record::Run(h));
            let d = with_claims(d);
            assert_eq!(d.claims, s.claims(), "{}: the claims a read-back run is judged by", s.name());
            if !s.published().is_empty() {
                assert!(!s.claims().is_empty(), "{} shows published figures but claims nothing", s.name());
            }
            if !s.claims().is_empty() {
                with_verdict.push(s.name());
            }
        }
        for name in ["demo", "tuning", "rto", "split", "pacing", "idle", "gather", "lanes-websearch"] {
            assert!(with_verdict.contains(&name), "{name} reports a verdict: {with_verdict:?}");
        }
        let mut h = crate::testdata::header();
        h.scenario = "no-such-scenario".into();
        let mut d = RunData::default();
        d.push(Record::Run(h));
        assert!(with_claims(d).claims.is_empty());
    }
}
