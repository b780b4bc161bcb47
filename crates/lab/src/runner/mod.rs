//! Running experiments: the [`scenario::Scenario`] trait (with the [`claims`]
//! a scenario makes) and the runner that
//! interleaves variants × repeats, the [`records`] every run writes, and the
//! [`progress`] line, and the [`fidelity`] monitor that says whether the host
//! kept up while a run ran; [`shard`] slices the runs for `lab run --shard`
//! and [`merge`] joins the slices. Knows nothing of any particular scenario or topology.

pub mod claims;
pub mod fidelity;
pub mod merge;
pub mod progress;
pub mod records;
pub mod scenario;
pub mod shard;
pub mod typed;
