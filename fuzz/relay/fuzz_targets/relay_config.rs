//! Fuzz target: the relay's configuration file (`tcpaccel relay --config
//! FILE`: TOML into `RawConfig`, as `RawConfig::from_toml_file` reads it,
//! then `Config::from_raw`) over arbitrary text. `auth_file` is dropped
//! before validation: the fuzzer must not make it read files.
//!
//! Checked beyond never panicking:
//! - overlaying the flags on the file: no flags leave the file's settings,
//!   flags on an empty file are the flags (so no field is forgotten by
//!   `overlay`);
//! - the raw settings write back to TOML that reads back the same;
//! - an accepted configuration keeps its promises: 1 <= max_handshakes <=
//!   max_conns, per-source handshakes >= 1, first-byte timeout within the
//!   handshake timeout, no non-loopback listener without an allow rule;
//!   reloading it over itself changes nothing that needs a restart.
//!
//! Run it with `fuzz/run.sh` (see there), or alone from the repository root:
//! cargo +nightly fuzz run --fuzz-dir fuzz/relay relay_config
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpaccel_relay::config::{Config, RawConfig};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(mut raw) = toml::from_str::<RawConfig>(text) else { return };
    assert_eq!(raw.clone().overlay(RawConfig::default()), raw, "empty flags changed the file's settings");
    assert_eq!(RawConfig::default().overlay(raw.clone()), raw, "flags over an empty file are not the flags");
    let written = toml::to_string(&raw).expect("raw settings write as TOML");
    match toml::from_str::<RawConfig>(&written) {
        Ok(back) => assert_eq!(back, raw, "{written}"),
        Err(e) => panic!("{raw:?} writes as TOML that does not read back: {e}\n{written}"),
    }

    raw.auth_file = None;
    let Ok(cfg) = Config::from_raw(&raw) else { return };
    assert!(1 <= cfg.max_handshakes && cfg.max_handshakes <= cfg.max_conns, "{cfg:?}");
    assert!(cfg.per_source_handshakes >= 1, "{cfg:?}");
    assert!(cfg.first_byte_timeout <= cfg.handshake_timeout, "{cfg:?}");
    for l in &cfg.listeners {
        assert!(l.addr.ip().is_loopback() || cfg.acl.has_allow(), "open relay on {}", l.addr);
    }
    let (_, restart) = cfg.reloaded(cfg.clone());
    assert!(restart.is_empty(), "reloading the same configuration needs a restart for {restart:?}");
});
