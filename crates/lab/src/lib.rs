//! tcpaccel-lab: scenarios, the runner, JSON Lines records, plots and reports.
//!
//! A scenario builds a topology, runs its variants interleaved (A B C A B C …)
//! for a number of repeats, and writes every parameter, sample, flow and
//! summary to `records.jsonl`. Reports are rendered from those records alone.
#![forbid(unsafe_code)]

pub mod emu_bench;
pub mod flows;
pub mod progress;
pub mod published;
pub mod records;
pub mod report;
pub mod scenario;
pub mod scenarios;
pub mod workloads;

#[cfg(test)]
mod testdata;
