//! tcpaccel-lab: scenarios, runner, JSON Lines records, plots and reports.
#![forbid(unsafe_code)]
