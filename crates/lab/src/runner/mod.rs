//! Running experiments: the [`scenario::Scenario`] trait and the runner that
//! interleaves variants × repeats, the [`records`] every run writes, and the
//! [`progress`] line. Knows nothing of any particular scenario or topology.

pub mod progress;
pub mod records;
pub mod scenario;
