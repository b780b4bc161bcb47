//! Topologies several scenarios share, each built with
//! `tcpaccel_net::TopologyBuilder`: the two-host [`dumbbell`] with one
//! emulated bottleneck, and the dual-fabric datacenter of the lanes
//! experiments ([`fabric`]) with its leaf–spine or k = 4 FatTree fabrics
//! ([`fattree`]), with the BPF program that scales the hosts' initial RTO
//! in a dilated run ([`rto_init`]); the emulator's meter read back
//! ([`meter`]). A new shared topology is a file here; a
//! topology only one scenario uses stays in that scenario's file.

pub mod dumbbell;
pub mod fabric;
pub mod fattree;
pub mod meter;
pub mod nginx;
pub mod rto_init;

/// The p99 send lateness of the emulators in `emulators` (a
/// [`tcpaccel_net::Teardown`]'s summaries): the worst direction's, of the
/// directions that sent a frame; `None` without one. Each direction's p99 is
/// over the emulator's whole life, so it is one run's only where the
/// emulator was built for that run (every testbed here builds its network
/// per run). The merged p99 of two directions lies between theirs: the
/// worse one is the stricter figure to judge.
pub fn emulator_p99(emulators: &[(String, tcpaccel_net::EmuSummary)]) -> Option<std::time::Duration> {
    worst_p99(emulators.iter().flat_map(|(_, s)| [s.a_to_b.lateness, s.b_to_a.lateness]))
}

/// The largest p99 of the histograms that counted a value.
fn worst_p99(h: impl IntoIterator<Item = tcpaccel_core::meter::HistSummary>) -> Option<std::time::Duration> {
    h.into_iter().filter(|h| h.count > 0).filter_map(|h| h.p99_ns).max().map(std::time::Duration::from_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpaccel_core::meter::Histogram;

    #[test]
    fn the_worse_direction_that_sent_decides() {
        let of = |ns: &[u64]| {
            let mut h = Histogram::new();
            ns.iter().for_each(|&v| h.record(v));
            h.summary()
        };
        // 100 frames at 10 µs with one at 5 ms: p99 is 10 µs; the other direction's 300 µs wins.
        let mut data: Vec<u64> = vec![10_000; 99];
        data.push(5_000_000);
        let p = worst_p99([of(&data), of(&[300_000; 10]), of(&[])]);
        assert_eq!(p, Some(std::time::Duration::from_micros(300)));
        // An emulator that sent nothing has no lateness to judge.
        assert_eq!(worst_p99([of(&[]), of(&[])]), None);
    }
}
