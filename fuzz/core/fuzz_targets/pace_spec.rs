//! Fuzz target: the `--pace` grammar (`tcpaccel_core::pace_spec`) over
//! arbitrary text. Beyond never panicking: a parsed pacing prints back
//! (`Display`, which `run` hands to the shim as text) to the same pacing.
//!
//! Run it with `fuzz/run.sh` (see there), or alone from the repository root:
//! cargo +nightly fuzz run --fuzz-dir fuzz/core pace_spec
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpaccel_core::pace_spec::PaceSpec;

/// Largest rate `Rate::exact` promises to write back exactly (its docs).
const EXACT_RATE_MAX: u64 = 1 << 50;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let Ok(p) = PaceSpec::parse(s) else { return };
    if let Some(c) = p.ceiling() {
        assert!(c.0 >= 1, "{s:?}: a zero rate is refused, got {p:?}");
        if c.0 > EXACT_RATE_MAX {
            return;
        }
    }
    let text = p.to_string();
    assert_eq!(PaceSpec::parse(&text).ok(), Some(p), "{s:?} -> {p:?} -> {text:?}");
    // What the text names survives too (`dynamic=loop` vs plain `dynamic`).
    assert_eq!(PaceSpec::parse(&text).ok().and_then(PaceSpec::mode), p.mode());
});
