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
pub fn find(name: &str) -> anyhow::Result<Box<dyn Scenario>> {
    let all = all();
    let names: Vec<&str> = all.iter().map(|s| s.name()).collect();
    let list = names.join(", ");
    all.into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| anyhow::anyhow!("unknown scenario {name:?}; valid scenarios: {list}"))
}
