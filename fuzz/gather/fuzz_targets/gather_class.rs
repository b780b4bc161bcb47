//! Fuzz target: the gather server's configuration as `serve` takes it:
//! `--class NAME=TARGET[,PRIORITY]` (one per line of the text) and the
//! numbers `ServerConfig::new` validates.
//!
//! The input is 18 bytes of numbers (pool u64 BE, a max-streams flag byte
//! and u32 BE, max streams per client u32 BE, a chunk-size selector byte),
//! then the classes' text.
//!
//! Checked beyond never panicking: a class that parses is written back
//! (rate exactly, with `Rate::exact`) to text that parses to the same class;
//! a configuration accepted has distinct class names, each found by name,
//! at least one stream, streams that each get the minimum window from the
//! pool, and a chunk size accepted only within 1 KiB..=`MAX_CHUNK`.
//!
//! Run it with `fuzz/run.sh` (see there), or alone from the repository root:
//! cargo +nightly fuzz run --fuzz-dir fuzz/gather gather_class
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::Duration;
use tcpaccel_gather::config::{parse_class, ServerConfig, MIN_STREAM_WINDOW};
use tcpaccel_gather::proto::MAX_CHUNK;

/// Largest rate `Rate::exact` promises to write back exactly (its docs).
const EXACT_RATE_MAX: u64 = 1 << 50;

fuzz_target!(|data: &[u8]| {
    let Some((nums, text)) = data.split_first_chunk::<18>() else { return };
    let Ok(text) = std::str::from_utf8(text) else { return };
    let u32_at = |i: usize| u32::from_be_bytes([nums[i], nums[i + 1], nums[i + 2], nums[i + 3]]);
    let pool = u64::from_be_bytes(nums[..8].try_into().expect("8 bytes"));
    let max_streams = (nums[8] & 1 == 1).then(|| u32_at(9));
    let per_client = u32_at(13);
    // Around the bounds: 1 KiB below, at and above each end, or any u32.
    let chunk = match nums[17] % 8 {
        0 => 1023,
        1 => 1024,
        2 => u64::from(MAX_CHUNK),
        3 => u64::from(MAX_CHUNK) + 1,
        4 => 0,
        _ => u64::from(u32_at(13)),
    };

    let mut classes = Vec::new();
    for line in text.lines() {
        let Ok(c) = parse_class(line) else { continue };
        assert!(!c.name.is_empty() && !c.name.contains(['=', ',']), "{line:?} -> {c:?}");
        if c.target.0 <= EXACT_RATE_MAX {
            let again = format!("{}={},{}", c.name, c.target.exact(), c.priority);
            match parse_class(&again) {
                Ok(back) => assert_eq!(back, c, "{line:?} -> {again:?}"),
                Err(e) => panic!("{line:?} -> {c:?} writes as {again:?}, which does not parse: {e}"),
            }
        }
        classes.push(c);
    }
    let names: Vec<String> = classes.iter().map(|c| c.name.clone()).collect();
    let Ok(cfg) = ServerConfig::new(classes, pool, max_streams, per_client, Duration::from_secs(1)) else {
        return;
    };
    for (i, n) in names.iter().enumerate() {
        assert!(!names[..i].contains(n), "class {n:?} accepted twice");
        assert_eq!(&cfg.class(n).expect("a defined class is found").name, n);
    }
    assert!(cfg.max_streams >= 1 && cfg.max_streams_per_client >= 1);
    assert!(
        u64::from(cfg.max_streams) * MIN_STREAM_WINDOW <= cfg.pool,
        "{} streams of at least {MIN_STREAM_WINDOW} B in a pool of {} B",
        cfg.max_streams,
        cfg.pool
    );
    let ok = (1024..=u64::from(MAX_CHUNK)).contains(&chunk);
    match cfg.with_chunk_size(chunk) {
        Ok(c) => assert!(ok && u64::from(c.chunk_size) == chunk),
        Err(_) => assert!(!ok, "chunk size {chunk} refused"),
    }
});
