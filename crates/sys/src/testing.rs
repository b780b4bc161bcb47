//! Helpers for the root-only tests of every crate (public because each
//! crate's integration tests call them; nothing else should).
//!
//! The convention: a test that needs root (network namespaces, AF_PACKET,
//! BPF, cgroups, sysctls) is named `root_*` and calls [`require_root`]
//! first; an integration test file holding only such tests is named
//! `tests/root_*.rs`. Root tests never skip: run as another user they fail,
//! saying so. `cargo test --workspace -- --skip root_` runs the others alone.

/// Fails the calling test at once unless this process is root, naming the
/// test's location and how to leave the root tests out.
#[track_caller]
pub fn require_root() {
    if !crate::privilege::is_root() {
        let at = std::panic::Location::caller();
        panic!(
            "root-only test ({}:{}) run without root: it needs root (CI runs as root) and does not \
             skip; to run only the tests that do not need root: cargo test --workspace -- --skip root_",
            at.file(),
            at.line()
        );
    }
}
