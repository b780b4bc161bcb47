//! Running experiments: the [`scenario::Scenario`] trait and the runner that
//! interleaves variants × repeats, the [`records`] every run writes, and the
//! [`progress`] line, and the [`fidelity`] monitor that says whether the host
//! kept up while a run ran. Knows nothing of any particular scenario or topology.

pub mod fidelity;
pub mod progress;
pub mod records;
pub mod scenario;
pub mod typed;
