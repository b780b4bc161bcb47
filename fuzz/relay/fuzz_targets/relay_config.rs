//! Fuzz target: the relay's configuration file (`tcpaccel relay --config
//! FILE`: TOML into the typed `Settings`, as `Settings::from_toml_file`
//! reads it, then `Config::from_settings`) over arbitrary text.
//! `auth_file` is dropped before validation: the fuzzer must not make it
//! read files.
//!
//! Checked beyond never panicking:
//! - overlaying the flags on the file: no flags leave the file's settings,
//!   flags on an empty file are the flags (so no field is forgotten by
//!   `overlay`);
//! - an accepted configuration keeps its promises: 1 <= max_handshakes <=
//!   max_conns, per-source handshakes >= 1, first-byte timeout within the
//!   handshake timeout, no non-loopback listener without an allow rule;
//!   reloading it over itself changes nothing that needs a restart.
//!
//! Run it with `fuzz/run.sh` (see there), or alone from the repository root:
//! cargo +nightly fuzz run --fuzz-dir fuzz/relay relay_config
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpaccel_relay::config::{Config, Settings};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(mut set) = toml::from_str::<Settings>(text) else { return };
    assert_eq!(set.clone().overlay(Settings::default()), set, "empty flags changed the file's settings");
    assert_eq!(Settings::default().overlay(set.clone()), set, "flags over an empty file are not the flags");

    set.auth_file = None;
    let Ok(cfg) = Config::from_settings(&set) else { return };
    assert!(1 <= cfg.max_handshakes && cfg.max_handshakes <= cfg.max_conns, "{cfg:?}");
    assert!(cfg.per_source_handshakes >= 1, "{cfg:?}");
    assert!(cfg.first_byte_timeout <= cfg.handshake_timeout, "{cfg:?}");
    for l in &cfg.listeners {
        assert!(l.addr.ip().is_loopback() || cfg.acl.has_allow(), "open relay on {}", l.addr);
    }
    let (_, restart) = cfg.reloaded(cfg.clone());
    assert!(restart.is_empty(), "reloading the same configuration needs a restart for {restart:?}");
});
