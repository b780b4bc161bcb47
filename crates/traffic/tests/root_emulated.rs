//! Root tests through the userspace emulator (issue 4's pacing tests): two
//! hosts joined by an emulated bottleneck built by `tcpaccel_net::Network`
//! (namespaces named `tcpaccel-*`, removed on drop, also when a test
//! panics). CI runs as root; without root these fail loudly.
//!
//! Claims are qualitative with wide margins: the machine is shared.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tcpaccel_core::units::Rate;
use tcpaccel_net::{MeterOptions, Network, Topology};
use tcpaccel_traffic::{run_send, spawn_recv, Pace, RecvConfig, SendConfig, SendSummary, Volume};

fn topology(rate: &str, one_way: &str, buffer: &str) -> Topology {
    let text = format!(
        "name = \"traffic-test\"\n[[host]]\nname = \"h1\"\n[[host]]\nname = \"h2\"\n\
         [[link]]\nname = \"wan\"\nkind = \"emulated\"\n\
         a = {{ node = \"h1\", addr = \"10.9.7.1/24\" }}\n\
         b = {{ node = \"h2\", addr = \"10.9.7.2/24\" }}\n\
         rate = \"{rate}\"\ndelay = \"{one_way}\"\nbuffer = \"{buffer}\"\n"
    );
    Topology::from_toml_str(&text).expect("test topology")
}

/// One upload of `volume` from h1 to h2; returns the summary and the
/// emulator's queue drops in the h1→h2 direction.
fn transfer(net: &Network, pace: Pace, volume: Volume) -> (SendSummary, u64) {
    let listen = SocketAddr::new(net.addr("h2").expect("h2 address"), 5201);
    let recv =
        net.run_in("h2", move || spawn_recv(RecvConfig::new(listen))).expect("enter h2").expect("receiver");
    let summary = net
        .run_in("h1", move || {
            let mut cfg = SendConfig::new(listen);
            cfg.volume = volume;
            cfg.pace = pace;
            cfg.interval = None;
            run_send(cfg, |_| {})
        })
        .expect("enter h1")
        .expect("transfer through the emulator");
    let _ = recv.stop();
    let emu = net.emulator("wan").expect("emulated link").snapshot();
    (summary, emu.a_to_b.drops.queue + emu.a_to_b.drops.loss)
}

/// Wire bit rates of the h1→h2 direction in consecutive `window` windows
/// from the meter CSV, from `skip` seconds on.
fn wire_rates(csv: &Path, window: f64, skip: f64) -> Vec<f64> {
    let text = std::fs::read_to_string(csv).expect("meter csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("meter header").split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).expect("meter column");
    let (c_dir, c_t, c_f, c_b) = (col("dir"), col("start_s"), col("arrived_frames"), col("arrived_bytes"));
    let mut acc: std::collections::BTreeMap<u64, f64> = std::collections::BTreeMap::new();
    let mut t0 = None;
    let mut last = 0.0f64;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f[c_dir] != "a_to_b" {
            continue;
        }
        let t: f64 = f[c_t].parse().expect("start_s");
        let t0 = *t0.get_or_insert(t);
        let (frames, bytes): (f64, f64) = (f[c_f].parse().expect("frames"), f[c_b].parse().expect("bytes"));
        last = last.max(t - t0);
        *acc.entry(((t - t0) / window) as u64).or_default() += (bytes + 24.0 * frames) * 8.0;
    }
    // Whole windows only, after the start and before the last one.
    let first = (skip / window) as u64;
    let end = (last / window) as u64;
    (first..end).map(|w| acc.get(&w).copied().unwrap_or(0.0) / window).collect()
}

/// Issue 4: static pacing at 20 Mbit/s through a 50 Mbit/s emulated link
/// gives 20 Mbit/s (on the wire; 18.83 Mbit/s of goodput) ± 5%, and the
/// frames reach the bottleneck evenly: in 25 ms windows (~40 frames) the
/// arrival rate stays near 20 Mbit/s.
#[test]
fn root_static_pacing_through_an_emulated_link_is_exact_and_even() {
    tcpaccel_sys::testing::require_root();
    let dir = std::env::temp_dir().join(format!("tcpaccel-traffic-meter-{}", std::process::id()));
    let net = Network::up_with(
        &topology("50mbit", "5ms", "100KB"),
        &MeterOptions { dir: Some(dir.clone()), jsonl: false, bin: None },
    )
    .expect("build the emulated path");
    let wire = Rate::mbps(20);
    let (s, drops) = transfer(&net, Pace::Static(wire), Volume::Duration(Duration::from_secs(3)));
    drop(net.teardown());
    let st = &s.streams[0];
    let target = st.framing.goodput(wire).bits_per_sec() as f64;
    let got = s.goodput_bps as f64;
    // Whole-run goodput includes connection set-up and the final receipt, which
    // a busy two-core machine stretches: a sanity bound only.
    assert!((0.80..=1.05).contains(&(got / target)), "goodput {got} vs {target} (framing {:?})", st.framing);
    assert_eq!(drops, 0, "paced below the bottleneck rate, nothing may be dropped");
    let rates = wire_rates(&dir.join("wan.csv"), 0.025, 0.5);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(rates.len() >= 40, "{} windows", rates.len());
    // The rate at the bottleneck in steady state. The ±5% figure of issue 4 is a
    // benchmark (BENCHMARKS.md); a test on a busy two-core machine keeps ±10%.
    let mut sorted = rates.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    assert!((median / 20e6 - 1.0).abs() <= 0.10, "steady wire rate {median:.0} bit/s vs 20 Mbit/s");
    let mut dev: Vec<f64> = rates.iter().map(|r| (r / 20e6 - 1.0).abs()).collect();
    dev.sort_by(f64::total_cmp);
    let p50 = dev[dev.len() / 2];
    let p90 = dev[dev.len() * 9 / 10];
    eprintln!(
        "static 20mbit: goodput {got:.0} of {target:.0} bit/s, rate deviation p50 {p50:.3} p90 {p90:.3}"
    );
    assert!(p50 < 0.10 && p90 < 0.30, "arrival rate deviation p50 {p50:.3} p90 {p90:.3}: {rates:?}");
}

/// Issue 4: a short bursty run (slow start into a 20-packet buffer) drops
/// far fewer frames paced just below the bottleneck than unpaced.
#[test]
fn root_pacing_drops_fewer_frames_than_bursting() {
    tcpaccel_sys::testing::require_root();
    let run = |pace: Pace| {
        let net = Network::up(&topology("50mbit", "10ms", "30KB")).expect("build the emulated path");
        let (s, drops) = transfer(&net, pace, Volume::Bytes(4_000_000));
        drop(net.teardown());
        assert_eq!(s.bytes, 4_000_000);
        drops
    };
    let unpaced = run(Pace::None);
    let paced = run(Pace::Static(Rate::mbps(45)));
    eprintln!("drops: unpaced {unpaced}, paced {paced}");
    assert!(unpaced >= 10, "slow start into a 30 KB buffer should overflow it (drops {unpaced})");
    assert!(paced * 4 <= unpaced, "paced {paced} vs unpaced {unpaced} drops");
}
