//! The handshake budget: which connections may sit in the SOCKS5 negotiation,
//! and whom a newcomer displaces when the budget is spent.
//!
//! Connections that have not finished their handshake are cheap to open and
//! cost the relay a slot each; held idle, they used to fill every slot so a
//! real client waited for their timeouts (issue 14 item 7). The gate admits
//! every newcomer — a fresh client is never refused because of others'
//! idling — and keeps two limits by displacing an older handshake:
//!
//! 1. **Per source** (an IPv4 address or an IPv6 /64), `per_source`: when the
//!    newcomer's source already has that many, the source's oldest one is
//!    displaced *if it has been waiting at least `stall`*. A handshake takes a
//!    few round trips, so one that old is stalled; younger ones are a burst
//!    (a browser, or a chain's previous relay carrying many clients) and are
//!    left alone, which makes this limit soft for up to `stall`.
//! 2. **Overall**, `max`, a hard limit: when it is reached, the oldest
//!    handshake of the source holding the most is displaced, whatever its
//!    age. One source flooding thus displaces its own handshakes before
//!    anyone else's, and handshakes can never take every connection slot.
//!
//! Both limits look first at the handshakes that have made the least
//! progress (SOCKS messages received, reported through [`Gate::progress`]):
//! under a reconnecting flood of silent handshakes from many sources, a
//! client that has sent its greeting and waits a round trip before its
//! request is older than most of the flood, and would otherwise be the one
//! displaced (issue 26 item 11). Among equals, the rules above apply.
//!
//! Sans-IO: no sockets, no clock (the caller passes `now`), no locking; the
//! server owns one `Gate` behind a mutex and closes whatever it is told to
//! evict.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::time::Duration;

/// One admitted handshake; smaller means admitted earlier.
pub type Ticket = u64;

/// Sources grouped for the per-source limit: an IPv6 host usually owns a
/// whole /64, so addresses inside one count together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceKey {
    V4(u32),
    V6Prefix64(u64),
}

impl SourceKey {
    pub fn of(ip: IpAddr) -> SourceKey {
        match ip {
            IpAddr::V4(a) => SourceKey::V4(u32::from(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => SourceKey::V4(u32::from(v4)),
                None => SourceKey::V6Prefix64((u128::from(a) >> 64) as u64),
            },
        }
    }
}

/// What admitting a newcomer decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    pub ticket: Ticket,
    /// A handshake the newcomer displaced: close it.
    pub evict: Option<Ticket>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    source: SourceKey,
    admitted: Duration,
    /// SOCKS messages received so far.
    progress: u32,
}

#[derive(Debug)]
pub struct Gate {
    max: usize,
    per_source: usize,
    stall: Duration,
    next: Ticket,
    /// Every handshake in progress, oldest first, with its source, when it
    /// was admitted (the caller's clock) and its progress.
    all: BTreeMap<Ticket, Entry>,
    by_source: HashMap<SourceKey, BTreeSet<Ticket>>,
}

impl Gate {
    /// `max` and `per_source` are at least 1 (a zero is taken as 1).
    pub fn new(max: usize, per_source: usize, stall: Duration) -> Gate {
        Gate {
            max: max.max(1),
            per_source: per_source.max(1),
            stall,
            next: 0,
            all: BTreeMap::new(),
            by_source: HashMap::new(),
        }
    }

    /// Handshakes in progress.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Admits a handshake from `source` at time `now` (any monotonic clock,
    /// the same for every call), displacing at most one older handshake.
    pub fn admit(&mut self, source: IpAddr, now: Duration) -> Admission {
        let key = SourceKey::of(source);
        let own = self.by_source.get(&key).map_or(0, BTreeSet::len);
        let evict = match self.least_advanced_of(key) {
            Some(t) if own >= self.per_source && self.stalled(t, now) => Some(t),
            _ if self.all.len() >= self.max => self.least_advanced_overall(),
            _ => None,
        };
        if let Some(t) = evict {
            self.leave(t);
        }
        let ticket = self.next;
        self.next += 1;
        self.all.insert(ticket, Entry { source: key, admitted: now, progress: 0 });
        self.by_source.entry(key).or_default().insert(ticket);
        Admission { ticket, evict }
    }

    /// The handshake `ticket` received another message (greeting,
    /// authentication, request); unknown tickets are ignored.
    pub fn progress(&mut self, ticket: Ticket) {
        if let Some(e) = self.all.get_mut(&ticket) {
            e.progress = e.progress.saturating_add(1);
        }
    }

    fn stalled(&self, t: Ticket, now: Duration) -> bool {
        self.all.get(&t).is_some_and(|e| now.saturating_sub(e.admitted) >= self.stall)
    }

    /// The oldest of `key`'s handshakes among those with the least progress.
    fn least_advanced_of(&self, key: SourceKey) -> Option<Ticket> {
        let set = self.by_source.get(&key)?;
        // Tickets ascend, so the first at the minimum is the oldest.
        set.iter().copied().min_by_key(|t| (self.all.get(t).map_or(0, |e| e.progress), *t))
    }

    /// Among the handshakes with the least progress, the oldest of the
    /// source holding the most of them (ties: the source whose oldest is
    /// oldest).
    fn least_advanced_overall(&self) -> Option<Ticket> {
        let least = self.all.values().map(|e| e.progress).min()?;
        let mut count: HashMap<SourceKey, (usize, Ticket)> = HashMap::new();
        for (t, e) in self.all.iter().filter(|(_, e)| e.progress == least) {
            // Iterated oldest first: the first ticket seen is the source's oldest.
            count.entry(e.source).or_insert((0, *t)).0 += 1;
        }
        count.values().max_by_key(|(n, oldest)| (*n, std::cmp::Reverse(*oldest))).map(|(_, t)| *t)
    }

    /// The handshake ended (finished, failed or evicted); unknown tickets are ignored.
    pub fn leave(&mut self, ticket: Ticket) {
        let Some(Entry { source: key, .. }) = self.all.remove(&ticket) else { return };
        if let Some(set) = self.by_source.get_mut(&key) {
            set.remove(&ticket);
            if set.is_empty() {
                self.by_source.remove(&key);
            }
        }
    }

    /// Handshakes in progress from `source`'s group.
    pub fn from_source(&self, source: IpAddr) -> usize {
        self.by_source.get(&SourceKey::of(source)).map_or(0, BTreeSet::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    const STALL: Duration = Duration::from_secs(1);

    #[test]
    fn under_the_limits_nobody_is_evicted() {
        let mut g = Gate::new(4, 2, STALL);
        assert_eq!(g.admit(ip("10.0.0.1"), ms(0)), Admission { ticket: 0, evict: None });
        assert_eq!(g.admit(ip("10.0.0.2"), ms(0)), Admission { ticket: 1, evict: None });
        assert_eq!(g.admit(ip("10.0.0.1"), ms(0)), Admission { ticket: 2, evict: None });
        assert_eq!(g.len(), 3);
    }

    #[test]
    fn a_full_source_displaces_its_own_oldest_once_it_is_stalled() {
        let mut g = Gate::new(10, 2, STALL);
        g.admit(ip("10.0.0.9"), ms(0)); // 0: another source, oldest overall
        g.admit(ip("10.0.0.1"), ms(100)); // 1
        g.admit(ip("10.0.0.1"), ms(200)); // 2
                                          // A burst: ticket 1 is only 0.9 s old, so the source may exceed its share.
        assert_eq!(g.admit(ip("10.0.0.1"), ms(1000)), Admission { ticket: 3, evict: None });
        // Now 1 s old: stalled, displaced; then 2.
        assert_eq!(g.admit(ip("10.0.0.1"), ms(1100)), Admission { ticket: 4, evict: Some(1) });
        assert_eq!(g.admit(ip("10.0.0.1"), ms(1200)), Admission { ticket: 5, evict: Some(2) });
        assert_eq!(g.from_source(ip("10.0.0.9")), 1, "the other source kept its handshake");
        assert_eq!(g.from_source(ip("10.0.0.1")), 3);
    }

    #[test]
    fn a_full_budget_displaces_the_oldest_of_the_heaviest_source() {
        let mut g = Gate::new(4, 4, STALL);
        g.admit(ip("10.0.0.1"), ms(0)); // 0: the oldest overall, a source with one
        g.admit(ip("10.0.0.2"), ms(1)); // 1
        g.admit(ip("10.0.0.2"), ms(2)); // 2
        g.admit(ip("10.0.0.3"), ms(3)); // 3
        assert_eq!(g.admit(ip("10.0.0.4"), ms(4)), Admission { ticket: 4, evict: Some(1) });
        assert_eq!(g.len(), 4);
        // Now every source holds one: the oldest overall goes.
        assert_eq!(g.admit(ip("10.0.0.5"), ms(5)), Admission { ticket: 5, evict: Some(0) });
        g.leave(2);
        assert_eq!(g.admit(ip("10.0.0.6"), ms(6)).evict, None, "a finished handshake freed its place");
    }

    #[test]
    fn a_young_flood_from_one_source_displaces_only_itself() {
        let mut g = Gate::new(8, 4, STALL);
        let honest = g.admit(ip("127.0.0.1"), ms(0)).ticket;
        let evicted: Vec<Ticket> =
            (0..20).filter_map(|i| g.admit(ip("127.0.0.2"), ms(100 + i)).evict).collect();
        assert_eq!(evicted.len(), 13, "20 arrivals, 7 places left beside the honest one");
        assert!(!evicted.contains(&honest));
        assert_eq!(g.from_source(ip("127.0.0.2")), 7);
    }

    /// Issue 26 item 11: 2500 sources reconnecting silent handshakes, and
    /// one client that has sent its greeting and waits a round trip. With
    /// the budget full, every newcomer displaces a handshake that has sent
    /// nothing, never the one that is advancing.
    #[test]
    fn a_flood_of_silent_handshakes_displaces_them_before_an_advancing_one() {
        let mut g = Gate::new(64, 8, STALL);
        let flood = |i: u32| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i % 2500));
        let mut now = 0;
        for i in 0..40 {
            g.admit(flood(i), ms(now));
            now += 1;
        }
        let honest = g.admit(ip("192.0.2.7"), ms(now)).ticket;
        g.progress(honest); // its greeting
        for i in 40..5000 {
            now += 1;
            let a = g.admit(flood(i), ms(now));
            assert_ne!(a.evict, Some(honest), "the advancing handshake was displaced at arrival {i}");
        }
        g.progress(honest); // its request, a round trip later
        assert_eq!(g.from_source(ip("192.0.2.7")), 1);
        // Among equals, age decides: with everyone advanced once, the oldest goes.
        let mut g = Gate::new(2, 2, STALL);
        let a = g.admit(ip("10.0.0.1"), ms(0)).ticket;
        let b = g.admit(ip("10.0.0.2"), ms(1)).ticket;
        g.progress(a);
        g.progress(b);
        assert_eq!(g.admit(ip("10.0.0.3"), ms(2)).evict, Some(a));
        // And the least advanced goes even when it is the youngest.
        let mut g = Gate::new(3, 3, STALL);
        let a = g.admit(ip("10.0.0.1"), ms(0)).ticket;
        let b = g.admit(ip("10.0.0.2"), ms(1)).ticket;
        let c = g.admit(ip("10.0.0.3"), ms(2)).ticket;
        g.progress(a);
        g.progress(b);
        g.progress(b);
        assert_eq!(g.admit(ip("10.0.0.4"), ms(3)).evict, Some(c));
    }

    #[test]
    fn a_full_source_displaces_its_least_advanced_first() {
        let mut g = Gate::new(10, 2, STALL);
        let a = g.admit(ip("10.0.0.1"), ms(0)).ticket;
        let b = g.admit(ip("10.0.0.1"), ms(10)).ticket;
        g.progress(a);
        assert_eq!(g.admit(ip("10.0.0.1"), ms(2000)).evict, Some(b));
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_v4_as_v4() {
        let mut g = Gate::new(10, 1, Duration::ZERO);
        g.admit(ip("2001:db8:1:2::1"), ms(0));
        assert_eq!(g.admit(ip("2001:db8:1:2::ffff"), ms(0)).evict, Some(0), "same /64");
        assert_eq!(g.admit(ip("2001:db8:1:3::1"), ms(0)).evict, None, "another /64");
        g.admit(ip("192.0.2.1"), ms(0));
        assert_eq!(g.admit(ip("::ffff:192.0.2.1"), ms(0)).evict, Some(3));
    }

    #[test]
    fn leaving_twice_or_unknown_is_harmless() {
        let mut g = Gate::new(2, 2, STALL);
        let a = g.admit(ip("10.0.0.1"), ms(0)).ticket;
        g.leave(a);
        g.leave(a);
        g.leave(99);
        assert!(g.is_empty());
    }

    proptest! {
        /// The overall limit always holds; a source over its share only
        /// while its handshakes are younger than `stall`; an evicted ticket
        /// is always the oldest of its source.
        #[test]
        fn limits_hold_and_each_source_loses_its_oldest_first(
            max in 1usize..12,
            per in 1usize..6,
            ops in proptest::collection::vec((0u8..4, any::<bool>(), 0usize..64, 0u64..400), 1..300),
        ) {
            let mut g = Gate::new(max, per, ms(500));
            let mut live: Vec<(Ticket, u8, Duration)> = Vec::new();
            let mut now = Duration::ZERO;
            for (src, leave, pick, step) in ops {
                now += ms(step);
                if leave && !live.is_empty() {
                    let (t, _, _) = live.remove(pick % live.len());
                    g.leave(t);
                    continue;
                }
                let a = g.admit(IpAddr::from([10, 0, 0, src]), now);
                if let Some(e) = a.evict {
                    let i = live.iter().position(|x| x.0 == e).expect("evicted a live ticket");
                    let victim = live.remove(i);
                    prop_assert!(live.iter().all(|x| x.1 != victim.1 || x.0 > e), "not its source's oldest");
                } else {
                    prop_assert!(live.len() < max, "over the overall limit without evicting");
                }
                live.push((a.ticket, src, now));
                prop_assert_eq!(g.len(), live.len());
                prop_assert!(g.len() <= max);
                let own: Vec<&(Ticket, u8, Duration)> = live.iter().filter(|x| x.1 == src).collect();
                if own.len() > per {
                    // Over its share only while the oldest of them is young.
                    prop_assert!(now - own[0].2 < ms(500) || a.evict.is_some());
                }
            }
        }
    }
}
