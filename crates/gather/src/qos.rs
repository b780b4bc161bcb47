//! The decisions of the server's QoS tick, without its I/O: per client, how
//! many streams it may have, what goodput it had over the last interval,
//! whether the [GatherQoS] §3.2 stream search runs and what it asks for, and
//! what the client demands of the pool; then the pool's division by the
//! configured policy and each stream's window clamp. The tick in `server.rs`
//! reads the counters and locks, calls this with `now`, and acts: sends
//! `set_streams`, sets the clamps and reports.
//!
//! Like `lanes/src/tracker.rs`: no sockets, no clock, no tasks; every call
//! takes `now`, so it is tested exactly on a manual clock.

use std::time::Duration;

use tcpaccel_core::aimd::{divide_streams, AimdConfig, StreamTuner};
use tcpaccel_core::units::Rate;
use tcpaccel_core::Instant;

use crate::config::{Policy, Sharing, MIN_STREAM_WINDOW};
use crate::share::{equal_split, share_pool, ClientNeed, ClientShare};
use tcpaccel_core::alloc::AllocError;

/// Intervals after a client's join before its stream search starts: the
/// first tick after the join measures a partial interval, the second a full
/// one that may still hold slow start; the third is the first the search
/// trusts. (Before this warm-up every client added a stream at its join,
/// and with `--share connection` those streams kept their windows and took
/// pool from the other clients.)
pub const JOIN_WARMUP_INTERVALS: u32 = 2;

/// The server settings the tick decides with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QosSettings {
    pub interval: Duration,
    pub sharing: Sharing,
    /// Run the stream search at all (`--no-stream-tuning` turns it off).
    pub tune_streams: bool,
    pub max_streams_per_client: u32,
    /// Data streams over all clients.
    pub max_streams: u32,
}

/// What the tick observes of one client at `now` (read from its counters
/// and its lock by the shell).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// Chunk bytes read from its data streams so far.
    pub arrived: u64,
    /// Data streams attached now.
    pub attached: u32,
    /// Streams the server last asked for.
    pub wanted: u32,
    /// Its bytes of the pool at the last allocation.
    pub allocation: u64,
    /// The largest RTT of its streams.
    pub rtt: Duration,
    /// The client said it had nothing to send (its source is slower than its share).
    pub app_limited: bool,
    /// All its data has arrived.
    pub finished: bool,
    /// The largest segment (MSS) seen on its streams, bytes; 0 while unknown.
    pub segment: u64,
}

/// What one tick decided for one client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Ask the client for this many streams (a change from `wanted`).
    pub set_streams: Option<u32>,
    /// Streams that count as demands on the pool: no more than asked for,
    /// so streams kept open past a decrease bring no share of their own.
    pub demand_streams: u32,
    /// The stream limit this tick applied.
    pub limit: u32,
}

/// One client's QoS state: what only the tick reads and writes.
#[derive(Debug, Clone)]
pub struct ClientQos {
    tuner: StreamTuner,
    last_arrived: u64,
    last_t: Instant,
    tune_from: Instant,
    goodput: Rate,
}

impl ClientQos {
    /// A client joining at `now` with its class's `target`.
    pub fn new(s: &QosSettings, target: Rate, now: Instant) -> ClientQos {
        let aimd = AimdConfig {
            max_streams: s.max_streams_per_client,
            settle: s.interval / 2,
            ..AimdConfig::default()
        };
        ClientQos {
            tuner: StreamTuner::new(aimd, target),
            last_arrived: 0,
            last_t: now,
            tune_from: now + JOIN_WARMUP_INTERVALS * s.interval,
            goodput: Rate(0),
        }
    }

    /// The stream count to start with (the welcome's).
    pub fn initial_streams(&self) -> u32 {
        self.tuner.streams()
    }

    /// Goodput over the last measured interval.
    pub fn goodput(&self) -> Rate {
        self.goodput
    }

    /// One tick at `now`: `limit` is the client's part of the global stream
    /// budget ([`stream_limits`]); `measure` is true on the interval's tick
    /// and false on a recomputation after a join, a leave or a stream change
    /// (which decides the limit and the demand but measures nothing).
    pub fn on_tick(
        &mut self,
        s: &QosSettings,
        now: Instant,
        measure: bool,
        limit: u32,
        o: &Observed,
    ) -> Step {
        let limit = limit.min(useful_streams(s.sharing, o.allocation, o.attached, o.segment));
        self.tuner.set_limit(limit);
        let mut wanted = o.wanted;
        if measure {
            let dt = now.saturating_since(self.last_t);
            self.goodput = Rate::from_bytes_over(o.arrived.saturating_sub(self.last_arrived), dt);
            self.last_arrived = o.arrived;
            self.last_t = now;
            let settled = o.attached == o.wanted;
            let warm = now >= self.tune_from;
            if s.tune_streams && settled && warm && !o.app_limited && !o.finished {
                wanted = self.tuner.on_interval(now, self.goodput, o.rtt).streams;
            }
        }
        if wanted > limit {
            wanted = limit.max(1);
        }
        Step {
            set_streams: (wanted != o.wanted).then_some(wanted),
            demand_streams: demand_streams(o.attached, wanted),
            limit,
        }
    }
}

/// Streams that count as demands on the pool: no more than the server asked
/// for, so streams kept open past a decrease bring no share of their own.
pub fn demand_streams(attached: u32, wanted: u32) -> u32 {
    attached.min(wanted)
}

/// The smallest useful window of one stream: two segments (one segment in
/// flight while the other is being acknowledged; below that the sender
/// waits out delayed ACKs), and never below two [`MIN_STREAM_WINDOW`].
/// `segment` is the MSS seen on the streams (0 while unknown). On loopback
/// a segment is about 64 KiB, so this floor is about 128 KiB there.
pub fn stream_floor(segment: u64) -> u64 {
    2 * segment.max(MIN_STREAM_WINDOW)
}

/// Two segments, and at least one [`MIN_STREAM_WINDOW`]: what admission
/// keeps for every stream of a client sending data (the server refuses a
/// client that would leave less). Equal to the old per-stream minimum of
/// 4 KiB on Ethernet (1448 B segments); about 128 KiB on loopback.
pub fn two_segments(segment: u64) -> u64 {
    (2 * segment).max(MIN_STREAM_WINDOW)
}

/// A stream needs a useful window: never ask for more streams than leave
/// each [`stream_floor`] (two segments). Per client, the client's share is
/// split over its streams, so that bounds the count; otherwise the per-stream
/// floor would let a client grow past its share by adding streams
/// ([GatherQoS] §3.2 would read that as success). Per connection each new
/// stream brings its own demand, so only a stream share that has already
/// fallen below the floor stops further streams.
pub fn useful_streams(sharing: Sharing, allocation: u64, attached: u32, segment: u64) -> u32 {
    let floor = stream_floor(segment);
    let n = match sharing {
        Sharing::PerClient => (allocation / floor).max(1),
        Sharing::PerConnection => {
            let n = u64::from(attached).max(1);
            if allocation / n >= floor {
                u64::from(u32::MAX)
            } else {
                n
            }
        }
    };
    n.min(u64::from(u32::MAX)) as u32
}

/// The pool divided at one tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Division {
    /// The rule that applied: the core's serde name (e.g. `lowered_targets`),
    /// or `equal` under [`Policy::Equal`].
    pub rule: String,
    /// Bytes eq. (1) asks for at the targets, and at the lowered targets
    /// (0 under [`Policy::Equal`]).
    pub needed: u64,
    pub needed_lowered: u64,
    /// One per client, in the order of the needs.
    pub shares: Vec<ClientShare>,
}

/// Divides `pool` bytes over the clients' needs by `policy`
/// ([GatherQoS] §3.1 through [`share_pool`], or an equal split).
pub fn divide_pool(
    policy: Policy,
    needs: &[ClientNeed],
    pool: u64,
    sharing: Sharing,
) -> Result<Division, AllocError> {
    Ok(match policy {
        Policy::Seed003 => {
            let (plan, shares) = share_pool(needs, pool, sharing)?;
            let rule = serde_json::to_value(plan.rule).ok().and_then(|v| v.as_str().map(String::from));
            Division {
                rule: rule.unwrap_or_default(),
                needed: plan.needed,
                needed_lowered: plan.needed_lowered,
                shares,
            }
        }
        Policy::Equal => Division {
            rule: "equal".into(),
            needed: 0,
            needed_lowered: 0,
            shares: equal_split(needs, pool, sharing),
        },
    })
}

/// The window clamp of each of a client's streams: its share's per-stream
/// value, or, while it keeps more streams open than asked for, its bytes
/// split over all of them (so the extra streams take nothing from others).
pub fn stream_clamp(share: &ClientShare, attached: u32, wanted: u32) -> u32 {
    if attached > wanted {
        (share.bytes / u64::from(attached)).max(MIN_STREAM_WINDOW).min(i32::MAX as u64) as u32
    } else {
        share.per_stream
    }
}

/// The global stream budget divided over the clients, highest priorities
/// first (`tcpaccel_core::aimd::divide_streams`): `(seq, priority)` in, each
/// client's limit out, in the same order.
pub fn stream_limits(clients: &[(u64, u32)], s: &QosSettings) -> Vec<u32> {
    let requests: Vec<(u64, u32, u32)> =
        clients.iter().map(|&(seq, prio)| (seq, prio, s.max_streams_per_client)).collect();
    divide_streams(&requests, 1, s.max_streams).into_iter().map(|(_, l)| l).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const IV: Duration = Duration::from_millis(100);

    fn settings(sharing: Sharing) -> QosSettings {
        QosSettings { interval: IV, sharing, tune_streams: true, max_streams_per_client: 8, max_streams: 64 }
    }

    fn at(intervals: u32) -> Instant {
        Instant::ZERO + IV * intervals
    }

    /// A client with a large share and one settled stream.
    fn obs(arrived: u64, wanted: u32) -> Observed {
        Observed {
            arrived,
            attached: wanted,
            wanted,
            allocation: 64 * MIN_STREAM_WINDOW,
            rtt: Duration::from_millis(20),
            app_limited: false,
            finished: false,
            segment: 0,
        }
    }

    #[test]
    fn goodput_is_the_bytes_of_the_interval() {
        let s = settings(Sharing::PerClient);
        let mut q = ClientQos::new(&s, Rate::mbps(100), at(0));
        q.on_tick(&s, at(1), true, 8, &obs(125_000, 1));
        // 125 000 bytes in 100 ms.
        assert_eq!(q.goodput(), Rate::mbps(10));
        q.on_tick(&s, at(2), true, 8, &obs(375_000, 1));
        assert_eq!(q.goodput(), Rate::mbps(20));
        // A recomputation between ticks measures nothing.
        q.on_tick(&s, at(2) + Duration::from_millis(50), false, 8, &obs(999_999, 1));
        assert_eq!(q.goodput(), Rate::mbps(20));
    }

    #[test]
    fn the_search_waits_for_the_warm_up_and_a_settled_client() {
        let s = settings(Sharing::PerClient);
        let target = Rate::mbps(100);
        let mut q = ClientQos::new(&s, target, at(0));
        let w = q.initial_streams();
        // Far below the target, but the first ticks after the join are warm-up.
        for i in 1..JOIN_WARMUP_INTERVALS {
            let step = q.on_tick(&s, at(i), true, 8, &obs(u64::from(i) * 1_000, w));
            assert_eq!(step.set_streams, None, "tick {i}");
        }
        // Not settled (a stream still missing), app-limited or finished: no search either.
        let n = u64::from(JOIN_WARMUP_INTERVALS);
        let t = at(JOIN_WARMUP_INTERVALS);
        let mut unsettled = obs(n * 1_000, w);
        unsettled.attached = w.saturating_sub(1);
        for o in [
            unsettled,
            Observed { app_limited: true, ..obs(n * 1_000, w) },
            Observed { finished: true, ..obs(n * 1_000, w) },
        ] {
            assert_eq!(q.clone().on_tick(&s, t, true, 8, &o).set_streams, None, "{o:?}");
        }
        // Warm, settled, far below the target: more streams.
        let step = q.on_tick(&s, t, true, 8, &obs(n * 1_000, w));
        assert!(step.set_streams.is_some_and(|n| n > w), "{step:?}");
        // Without --no-stream-tuning only.
        let off = QosSettings { tune_streams: false, ..s };
        let mut q2 = ClientQos::new(&off, target, at(0));
        assert_eq!(q2.on_tick(&off, t, true, 8, &obs(n * 1_000, w)).set_streams, None);
    }

    #[test]
    fn the_limit_cuts_what_is_asked_and_what_is_demanded() {
        let s = settings(Sharing::PerClient);
        let mut q = ClientQos::new(&s, Rate::mbps(100), at(0));
        // Asked for 4, limit now 2: ask for 2; the 4 still open demand 2.
        let step = q.on_tick(&s, at(0), false, 2, &obs(0, 4));
        assert_eq!(step, Step { set_streams: Some(2), demand_streams: 2, limit: 2 });
        // A zero limit still leaves the client one stream.
        assert_eq!(q.on_tick(&s, at(0), false, 0, &obs(0, 3)).set_streams, Some(1));
        // A share of three minimum windows holds one useful stream per client.
        let small = Observed { allocation: 3 * MIN_STREAM_WINDOW, ..obs(0, 3) };
        assert_eq!(q.on_tick(&s, at(0), false, 8, &small).set_streams, Some(1));
    }

    #[test]
    fn useful_streams_per_client_and_per_connection() {
        let m = MIN_STREAM_WINDOW;
        assert_eq!(useful_streams(Sharing::PerClient, 10 * m, 1, 0), 5);
        assert_eq!(useful_streams(Sharing::PerClient, 0, 1, 0), 1);
        // Per connection: unbounded while each stream's share holds two windows.
        assert_eq!(useful_streams(Sharing::PerConnection, 8 * m, 4, 0), u32::MAX);
        assert_eq!(useful_streams(Sharing::PerConnection, 7 * m, 4, 0), 4);
        assert_eq!(useful_streams(Sharing::PerConnection, 0, 0, 0), 1);
    }

    /// On loopback a segment is 65483 B: a 256 KB share holds two segments
    /// for one stream only, not the 31 that two 4 KiB minimum windows allow
    /// (issue 26 item 4: four streams of 64000 B each ran at 6-12 Mbit/s).
    #[test]
    fn streams_keep_two_segments_each() {
        let lo = 65_483;
        assert_eq!(stream_floor(lo), 130_966);
        assert_eq!(stream_floor(1_448), 2 * MIN_STREAM_WINDOW);
        assert_eq!(two_segments(lo), 130_966);
        assert_eq!(two_segments(1_448), MIN_STREAM_WINDOW);
        assert_eq!(useful_streams(Sharing::PerClient, 256_000, 1, lo), 1);
        assert_eq!(useful_streams(Sharing::PerClient, 256_000, 1, 0), 31);
        assert_eq!(useful_streams(Sharing::PerConnection, 256_000, 2, lo), 2);
        assert_eq!(useful_streams(Sharing::PerConnection, 262_000, 2, lo), u32::MAX);
        let s = settings(Sharing::PerClient);
        let mut q = ClientQos::new(&s, Rate::mbps(100), at(0));
        let big = Observed { allocation: 256_000, segment: lo, ..obs(0, 4) };
        assert_eq!(q.on_tick(&s, at(0), false, 8, &big).set_streams, Some(1));
    }

    /// A client told to go from 3 streams to 2 that keeps all 3 open holds
    /// the pool of 2 (per connection: two demands), split over the 3.
    #[test]
    fn streams_kept_past_a_decrease_take_no_share() {
        let need = |session, streams| ClientNeed {
            session,
            priority: 1,
            target: Rate::mbps(1),
            rtt: Duration::from_millis(100),
            streams,
        };
        let honest = [need(1, demand_streams(2, 2)), need(2, 1)];
        let keeps = [need(1, demand_streams(3, 2)), need(2, 1)];
        let a = divide_pool(Policy::Seed003, &honest, 1_000_000, Sharing::PerConnection).unwrap();
        let b = divide_pool(Policy::Seed003, &keeps, 1_000_000, Sharing::PerConnection).unwrap();
        assert_eq!(a, b, "the extra stream changes nobody's share");
        let b = &b.shares;
        assert_eq!(stream_clamp(&b[0], 3, 2) as u64, b[0].bytes / 3);
        assert_eq!(stream_clamp(&b[0], 2, 2), b[0].per_stream);
        assert!(3 * u64::from(stream_clamp(&b[0], 3, 2)) <= b[0].bytes);
    }

    #[test]
    fn equal_policy_splits_evenly_and_names_its_rule() {
        let need = |session, priority| ClientNeed {
            session,
            priority,
            target: Rate::mbps(priority.into()),
            rtt: Duration::from_millis(50),
            streams: 1,
        };
        let d = divide_pool(Policy::Equal, &[need(1, 4), need(2, 1)], 100_000, Sharing::PerClient).unwrap();
        assert_eq!((d.rule.as_str(), d.needed, d.needed_lowered), ("equal", 0, 0));
        assert_eq!(d.shares.iter().map(|s| s.bytes).collect::<Vec<_>>(), [50_000, 50_000]);
        let d = divide_pool(Policy::Seed003, &[need(1, 4), need(2, 1)], 100_000, Sharing::PerClient).unwrap();
        assert!(d.shares[0].bytes > d.shares[1].bytes, "{d:?}");
    }

    #[test]
    fn the_budget_goes_to_the_higher_priority_first() {
        let s = QosSettings { max_streams: 10, ..settings(Sharing::PerClient) };
        let l = stream_limits(&[(1, 1), (2, 5), (3, 1)], &s);
        assert_eq!(l.len(), 3);
        assert_eq!(l[1], 8, "{l:?}");
        assert!(l.iter().sum::<u32>() <= 10 && l.iter().all(|&x| x >= 1), "{l:?}");
    }
}
