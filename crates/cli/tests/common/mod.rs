//! Helpers shared by the CLI's integration tests (each test file is its own
//! crate and uses a part of them).
#![allow(dead_code)]

use std::process::Child;

/// The `tcpaccel` binary cargo built for these tests.
pub(crate) fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tcpaccel")
}

/// Kills a spawned service if a test fails before it exits by itself.
pub(crate) struct Reaper(pub Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
