//! Fuzz target: the lanes daemon's configuration file (`Config::parse`,
//! what `tcpaccel lanes run --config FILE` reads) over arbitrary text, and
//! the BPF program's parameters and slots derived from an accepted one
//! (`bpf::check`, pure arithmetic on the file's values).
//!
//! Checked beyond never panicking: an accepted configuration holds what its
//! module docs promise the daemon: no local address in both an SL and an LL
//! lane; every lane pair's local address is its lane's, of the family of its
//! remote; at most 254 LL lanes, whose path-manager address ids are distinct
//! and non-zero; no lane pair twice in a peer.
//!
//! Run it with `fuzz/run.sh` (see there), or alone from the repository root:
//! cargo +nightly fuzz run --fuzz-dir fuzz/lanes lanes_config
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use tcpaccel_lanes::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(cfg) = Config::parse(text, "fuzz") else { return };
    for a in &cfg.sl_lanes {
        assert!(!cfg.ll_lanes.contains(a), "{a} in both an SL and an LL lane");
    }
    assert!(cfg.ll_lanes.len() <= 254, "{} LL lanes", cfg.ll_lanes.len());
    for p in &cfg.peers {
        let mut seen = HashSet::new();
        for (pair, lanes) in
            p.sl.iter().map(|s| (s, &cfg.sl_lanes)).chain(p.ll.iter().map(|l| (l, &cfg.ll_lanes)))
        {
            assert_eq!(lanes.get(usize::from(pair.lane.index)), Some(&pair.local), "{pair:?}");
            assert_eq!(pair.local.is_ipv4(), pair.remote.is_ipv4(), "{pair:?} mixes families");
            assert!(seen.insert((pair.local, pair.remote)), "{pair:?} twice in peer {:?}", p.name);
        }
    }
    let mut ids = HashSet::new();
    for p in &cfg.peers {
        for l in &p.ll {
            let id = cfg.address_id(l.lane);
            assert!(id != 0, "{l:?} got address id 0");
            ids.insert((id, l.local));
        }
    }
    let distinct: HashSet<u8> = ids.iter().map(|(id, _)| *id).collect();
    assert_eq!(distinct.len(), ids.len(), "two LL addresses share an address id: {ids:?}");
    let _ = tcpaccel_lanes::bpf::check(&cfg);
});
