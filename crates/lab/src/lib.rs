//! tcpaccel-lab: scenarios, the runner, JSON Lines records, plots and reports.
//!
//! A scenario builds a topology, runs its variants interleaved (A B C A B C …)
//! for a number of repeats, and writes every parameter, sample, flow and
//! summary to `records.jsonl`. Reports are rendered from those records alone.
//!
//! The parts, each a folder:
//! - [`runner`]: the [`Scenario`](runner::scenario::Scenario) trait, the
//!   runner, the records and the progress line;
//! - [`report`]: tables, SVG plots, the HTML page, and the published figures
//!   each run is judged against;
//! - [`engines`]: what drives traffic through a testbed for many scenarios
//!   (the flow engine, the lanes workloads, the cgroup pacer around a
//!   sender);
//! - [`testbeds`]: topologies several scenarios share (the dumbbell with its
//!   bulk transfer and meter, the dual-fabric datacenter);
//! - [`scenarios`]: one experiment per file (the lanes experiments in
//!   `scenarios/lanes/`, beside the daemons they share);
//! - [`emu_bench`]: `tcpaccel lab emu-bench`, the emulator's own cost and
//!   accuracy.
//!
//! The runner and report depend on nothing below them; scenarios depend on
//! runner, engines and testbeds, never on each other's files (a test in
//! [`scenarios`] fails if one does).
#![forbid(unsafe_code)]

pub mod emu_bench;
pub mod engines;
pub mod report;
pub mod runner;
pub mod scenarios;
pub mod testbeds;

#[cfg(test)]
mod testdata;
