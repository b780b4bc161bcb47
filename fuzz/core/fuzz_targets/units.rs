//! Fuzz target: the unit grammars of `tcpaccel_core::units` (rates, sizes,
//! durations, queue limits) over arbitrary text. Beyond never panicking:
//! every value they accept prints to text they accept again, exactly for the
//! exact forms ([`Rate::exact`], whole bytes and nanoseconds) and within the
//! three decimals of the forms written for people.
//!
//! Run it with `fuzz/run.sh` (see there), or alone from the repository root:
//! cargo +nightly fuzz run --fuzz-dir fuzz/core units
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpaccel_core::units::{format_duration, parse_duration, Bytes, QueueLimit, Rate};

/// Largest rate `Rate::exact` promises to write back exactly (its docs).
const EXACT_RATE_MAX: u64 = 1 << 50;
/// Integers an f64 holds exactly: the grammars read numbers through one.
const F64_EXACT: u64 = 1 << 53;

/// `b` is `a` within the rounding of a 3-decimal form (and one unit of
/// the integer the parse rounds to).
fn close(a: u64, b: u64) -> bool {
    (a as f64 - b as f64).abs() <= a as f64 * 5e-4 + 1.0
}

fn check_rate(s: &str) {
    let Ok(r) = Rate::parse(s) else { return };
    assert!(r.0 >= 1, "{s:?}: a zero rate is refused, got {r:?}");
    let exact = r.exact().to_string();
    if r.0 <= EXACT_RATE_MAX {
        assert_eq!(Rate::parse(&exact).ok(), Some(r), "{s:?} -> {r:?} -> {exact:?}");
    }
    let shown = r.to_string();
    match Rate::parse(&shown) {
        Ok(back) => assert!(close(r.0, back.0), "{s:?} -> {r:?} -> {shown:?} -> {back:?}"),
        Err(e) => panic!("{s:?} -> {r:?} prints {shown:?}, which does not parse: {e}"),
    }
}

fn check_bytes(s: &str) {
    let Ok(b) = Bytes::parse(s) else { return };
    if b.0 <= F64_EXACT {
        let plain = b.0.to_string();
        assert_eq!(Bytes::parse(&plain).ok(), Some(b), "{s:?} -> {b:?} -> {plain:?}");
    }
    let shown = b.to_string();
    match Bytes::parse(&shown) {
        Ok(back) => assert!(close(b.0, back.0), "{s:?} -> {b:?} -> {shown:?} -> {back:?}"),
        Err(e) => panic!("{s:?} -> {b:?} prints {shown:?}, which does not parse: {e}"),
    }
}

fn check_duration(s: &str) {
    let Ok(d) = parse_duration(s) else { return };
    let ns = d.as_nanos();
    if ns <= u128::from(F64_EXACT) {
        let plain = format!("{ns}ns");
        assert_eq!(parse_duration(&plain).ok(), Some(d), "{s:?} -> {d:?} -> {plain:?}");
    }
    let shown = format_duration(d);
    match parse_duration(&shown) {
        Ok(back) => {
            let (a, b) = (ns as f64, back.as_nanos() as f64);
            assert!((a - b).abs() <= a * 5e-4 + 1.0, "{s:?} -> {d:?} -> {shown:?} -> {back:?}");
        }
        Err(e) => panic!("{s:?} -> {d:?} prints {shown:?}, which does not parse: {e}"),
    }
}

fn check_limit(s: &str) {
    let Ok(q) = QueueLimit::parse(s) else { return };
    let shown = q.to_string();
    match (q, QueueLimit::parse(&shown)) {
        (QueueLimit::Packets(a), Ok(QueueLimit::Packets(b))) => assert_eq!(a, b, "{s:?} -> {shown:?}"),
        (QueueLimit::Bytes(a), Ok(QueueLimit::Bytes(b))) => {
            assert!(close(a, b), "{s:?} -> {q:?} -> {shown:?} -> {b}")
        }
        (_, other) => panic!("{s:?} -> {q:?} prints {shown:?}, which reads back as {other:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    check_rate(s);
    check_bytes(s);
    check_duration(s);
    check_limit(s);
});
