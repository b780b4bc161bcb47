//! Fair admission to a shared, limited resource held by many sources: which
//! holder a newcomer displaces when the resource is spent, so that no source
//! can lock the others out.
//!
//! One piece of logic for two services (issue 50 items 1 and 4): the relay's
//! SOCKS handshake slots (one unit per connection), and the gather server's
//! handshake slots and its memory for incomplete control messages (one unit
//! per byte). A holder is an *entry*: it has a source (grouped by a prefix,
//! [`Grouping`]), a cost in units, the time it was admitted and how far it
//! has advanced (messages received, reported with [`Gate::progress`]).
//!
//! The gate admits every newcomer that could fit at all — a fresh client is
//! never refused because of others' holding — and keeps two limits by
//! displacing entries:
//!
//! 1. **Per source**, [`Limits::per_source`]: when the newcomer's source
//!    would hold more, the source's own least advanced, oldest entries are
//!    displaced, as long as they are at least [`Limits::burst`] old. Younger
//!    ones are a burst (a browser, a relay carrying many clients, clients
//!    behind one NAT) and are left alone, which makes this limit soft for
//!    `burst`; a zero `burst` makes it hard: the source pays for its
//!    newcomer itself.
//! 2. **Overall**, [`Limits::capacity`], a hard limit: while the newcomer
//!    does not fit, the gate displaces, in this order of preference,
//!    - the least advanced entries, where an entry younger than
//!      [`Limits::grace`] (one round trip) counts as having sent its first
//!      message: it may be in flight (issue 50 item 4). Silent entries
//!      older than that go first;
//!    - among those, the entries of the source holding the most (counting
//!      the newcomer), so a flood's own sources pay before anyone else:
//!      with more entries than sources, some source holds two, and it is
//!      never the one client of a source;
//!    - among those, the least advanced by what they really sent (a
//!      handshake that has sent its greeting outlives silent ones of equal
//!      sources, issue 26 item 11), then the oldest.
//!
//! Sans-IO: no sockets, no clock (every call takes `now`, which must not go
//! back between calls), no locking; a server owns a `Gate` behind a mutex and
//! closes whatever it is told to evict.

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use crate::Instant;

/// One admitted entry; smaller means admitted earlier.
pub type Ticket = u64;

/// How source addresses are grouped: an IPv4 address or network of
/// `v4_bits`, an IPv6 network of `v6_bits` (a host usually owns a whole /64).
/// IPv4-mapped IPv6 addresses count as IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grouping {
    v4_bits: u8,
    v6_bits: u8,
}

/// A prefix length beyond the address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an {family} source prefix is 0..={max} bits (got {got})")]
pub struct GroupingError {
    pub family: &'static str,
    pub max: u8,
    pub got: u8,
}

impl Grouping {
    /// Each IPv4 address alone, IPv6 by /64.
    pub const ADDRESS: Grouping = Grouping { v4_bits: 32, v6_bits: 64 };
    /// IPv4 by /24, IPv6 by /64: a site's neighbouring addresses count as one.
    pub const SUBNET: Grouping = Grouping { v4_bits: 24, v6_bits: 64 };

    pub fn new(v4_bits: u8, v6_bits: u8) -> Result<Grouping, GroupingError> {
        if v4_bits > 32 {
            return Err(GroupingError { family: "IPv4", max: 32, got: v4_bits });
        }
        if v6_bits > 128 {
            return Err(GroupingError { family: "IPv6", max: 128, got: v6_bits });
        }
        Ok(Grouping { v4_bits, v6_bits })
    }

    pub fn v4_bits(&self) -> u8 {
        self.v4_bits
    }

    pub fn v6_bits(&self) -> u8 {
        self.v6_bits
    }

    /// The group `ip` belongs to.
    pub fn key(&self, ip: IpAddr) -> SourceKey {
        let v4 = |a: Ipv4Addr| {
            let mask = u32::MAX.checked_shl(32 - u32::from(self.v4_bits)).unwrap_or(0);
            SourceKey { net: IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask)), bits: self.v4_bits }
        };
        match ip {
            IpAddr::V4(a) => v4(a),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(m) => v4(m),
                None => {
                    let mask = u128::MAX.checked_shl(128 - u32::from(self.v6_bits)).unwrap_or(0);
                    SourceKey { net: IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask)), bits: self.v6_bits }
                }
            },
        }
    }
}

/// A source group: a network address and its prefix length (shown as
/// `10.1.2.0/24`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceKey {
    pub net: IpAddr,
    pub bits: u8,
}

impl std::fmt::Display for SourceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.bits)
    }
}

/// The gate's limits, in units of the resource (connections or bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Units held at once by all sources together (hard).
    pub capacity: u64,
    /// Units one source may hold once its entries are `burst` old.
    pub per_source: u64,
    /// For this long after admission an entry counts as having sent its
    /// first message (one round trip: it may be in flight).
    pub grace: Duration,
    /// A source over its share keeps entries younger than this; zero makes
    /// the share hard.
    pub burst: Duration,
}

/// What admitting a newcomer decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    pub ticket: Ticket,
    /// Entries the newcomer displaced, in the order chosen: close them.
    pub evict: Vec<Ticket>,
}

/// A newcomer that could never fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{cost} units asked, more than the {limit} {what} allows")]
pub struct TooLarge {
    pub cost: u64,
    pub limit: u64,
    /// "capacity" or "per-source share".
    pub what: &'static str,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    source: SourceKey,
    cost: u64,
    admitted: Instant,
    progress: u32,
}

/// What one source holds.
#[derive(Debug, Default)]
struct Holder {
    held: u64,
    /// Its entries by (progress, ticket): the first is the least advanced,
    /// and among equals the oldest.
    order: BTreeSet<(u32, Ticket)>,
}

#[derive(Debug)]
pub struct Gate {
    limits: Limits,
    grouping: Grouping,
    next: Ticket,
    held: u64,
    all: HashMap<Ticket, Entry>,
    sources: HashMap<SourceKey, Holder>,
}

impl Gate {
    /// `capacity` and `per_source` of at least 1 (a zero is taken as 1).
    pub fn new(limits: Limits, grouping: Grouping) -> Gate {
        let limits =
            Limits { capacity: limits.capacity.max(1), per_source: limits.per_source.max(1), ..limits };
        Gate { limits, grouping, next: 0, held: 0, all: HashMap::new(), sources: HashMap::new() }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn grouping(&self) -> Grouping {
        self.grouping
    }

    /// Entries admitted and not yet left.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Units held by all entries.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Units held by `ip`'s group.
    pub fn held_by(&self, ip: IpAddr) -> u64 {
        self.sources.get(&self.grouping.key(ip)).map_or(0, |h| h.held)
    }

    /// Entries of `ip`'s group.
    pub fn from_source(&self, ip: IpAddr) -> usize {
        self.sources.get(&self.grouping.key(ip)).map_or(0, |h| h.order.len())
    }

    /// Admits an entry of `cost` units from `ip` at `now`, displacing what
    /// the limits require (module docs). Refused only when `cost` alone is
    /// above the capacity or the per-source share.
    pub fn admit(&mut self, ip: IpAddr, cost: u64, now: Instant) -> Result<Admission, TooLarge> {
        let Limits { capacity, per_source, .. } = self.limits;
        if cost > capacity {
            return Err(TooLarge { cost, limit: capacity, what: "capacity" });
        }
        if cost > per_source {
            return Err(TooLarge { cost, limit: per_source, what: "per-source share" });
        }
        Ok(self.place(ip, cost, now))
    }

    /// Admits an entry of one unit (a connection), which always fits: the
    /// capacity and the share are at least 1.
    pub fn admit_one(&mut self, ip: IpAddr, now: Instant) -> Admission {
        self.place(ip, 1, now)
    }

    fn place(&mut self, ip: IpAddr, cost: u64, now: Instant) -> Admission {
        let Limits { capacity, per_source, grace, burst } = self.limits;
        let key = self.grouping.key(ip);
        let mut evict = Vec::new();
        // 1. The source's share: it pays for its own newcomer.
        while let Some(h) = self.sources.get(&key) {
            if h.held + cost <= per_source {
                break;
            }
            // Its least advanced, oldest: among equals the oldest is also the
            // first out of grace, so the first in its order.
            let Some(&(_, t)) = h.order.first() else { break };
            if self.age(t, now) < burst {
                break;
            }
            self.leave(t);
            evict.push(t);
        }
        // 2. The capacity: the least advanced (a young entry counted as having
        // sent one message), of the heaviest source (the newcomer counted),
        // least advanced by what it sent, oldest. A source's first entry in
        // its order is its own candidate: among its least advanced the
        // oldest is also the first out of grace.
        while self.held + cost > capacity {
            let victim = self
                .sources
                .iter()
                .filter_map(|(k, h)| {
                    let &(p, t) = h.order.first()?;
                    let weight = h.held + if *k == key { cost } else { 0 };
                    let credited = if self.age(t, now) < grace { p.max(1) } else { p };
                    Some((credited, std::cmp::Reverse(weight), p, t))
                })
                .min();
            let Some((_, _, _, t)) = victim else { break };
            self.leave(t);
            evict.push(t);
        }
        let ticket = self.next;
        self.next += 1;
        self.all.insert(ticket, Entry { source: key, cost, admitted: now, progress: 0 });
        let h = self.sources.entry(key).or_default();
        h.held += cost;
        h.order.insert((0, ticket));
        self.held += cost;
        Admission { ticket, evict }
    }

    fn age(&self, t: Ticket, now: Instant) -> Duration {
        self.all.get(&t).map_or(Duration::ZERO, |e| now.saturating_since(e.admitted))
    }

    /// The entry advanced by one step (a message received); unknown
    /// tickets are ignored.
    pub fn progress(&mut self, ticket: Ticket) {
        let Some(e) = self.all.get_mut(&ticket) else { return };
        let before = e.progress;
        e.progress = e.progress.saturating_add(1);
        if let Some(h) = self.sources.get_mut(&e.source) {
            h.order.remove(&(before, ticket));
            h.order.insert((e.progress, ticket));
        }
    }

    /// The entry ended (finished, failed or displaced); false for an
    /// unknown ticket (already left).
    pub fn leave(&mut self, ticket: Ticket) -> bool {
        let Some(e) = self.all.remove(&ticket) else { return false };
        self.held -= e.cost;
        if let Some(h) = self.sources.get_mut(&e.source) {
            h.held -= e.cost;
            h.order.remove(&(e.progress, ticket));
            if h.order.is_empty() {
                self.sources.remove(&e.source);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    const SEC: Duration = Duration::from_secs(1);

    /// Connections: one unit each, the relay's shape (address grouping,
    /// 1 s burst) with no grace unless asked.
    fn slots(capacity: u64, per_source: u64, grace: Duration) -> Gate {
        Gate::new(Limits { capacity, per_source, grace, burst: SEC }, Grouping::ADDRESS)
    }

    fn admit(g: &mut Gate, a: &str, now: u64) -> Vec<Ticket> {
        g.admit(ip(a), 1, ms(now)).unwrap().evict
    }

    #[test]
    fn under_the_limits_nobody_is_evicted() {
        let mut g = slots(4, 2, Duration::ZERO);
        assert_eq!(
            g.admit(ip("10.0.0.1"), 1, ms(0)),
            Ok(Admission { ticket: 0, evict: Vec::<Ticket>::new() })
        );
        assert_eq!(
            g.admit(ip("10.0.0.2"), 1, ms(0)),
            Ok(Admission { ticket: 1, evict: Vec::<Ticket>::new() })
        );
        assert_eq!(
            g.admit(ip("10.0.0.1"), 1, ms(0)),
            Ok(Admission { ticket: 2, evict: Vec::<Ticket>::new() })
        );
        assert_eq!((g.len(), g.held(), g.from_source(ip("10.0.0.1"))), (3, 3, 2));
    }

    #[test]
    fn a_full_source_displaces_its_own_oldest_once_past_the_burst() {
        let mut g = slots(10, 2, Duration::ZERO);
        admit(&mut g, "10.0.0.9", 0); // 0: another source, oldest overall
        admit(&mut g, "10.0.0.1", 100); // 1
        admit(&mut g, "10.0.0.1", 200); // 2
                                        // A burst: ticket 1 is only 0.9 s old, so the source may exceed its share.
        assert_eq!(admit(&mut g, "10.0.0.1", 1000), Vec::<Ticket>::new());
        assert_eq!(admit(&mut g, "10.0.0.1", 1100), vec![1]);
        assert_eq!(admit(&mut g, "10.0.0.1", 1200), vec![2]);
        assert_eq!(g.from_source(ip("10.0.0.9")), 1, "the other source kept its entry");
        assert_eq!(g.from_source(ip("10.0.0.1")), 3);
    }

    #[test]
    fn a_full_gate_displaces_the_oldest_of_the_heaviest_source() {
        let mut g = slots(4, 4, Duration::ZERO);
        admit(&mut g, "10.0.0.1", 0); // 0: the oldest overall, a source with one
        admit(&mut g, "10.0.0.2", 1); // 1
        admit(&mut g, "10.0.0.2", 2); // 2
        admit(&mut g, "10.0.0.3", 3); // 3
        assert_eq!(admit(&mut g, "10.0.0.4", 4), vec![1]);
        assert_eq!(g.len(), 4);
        // Now every source holds one: the oldest overall goes.
        assert_eq!(admit(&mut g, "10.0.0.5", 5), vec![0]);
        g.leave(2);
        assert_eq!(admit(&mut g, "10.0.0.6", 6), Vec::<Ticket>::new(), "a finished entry freed its place");
    }

    #[test]
    fn a_young_flood_from_one_source_displaces_only_itself() {
        let mut g = slots(8, 4, Duration::ZERO);
        let honest = g.admit(ip("127.0.0.1"), 1, ms(0)).unwrap().ticket;
        let evicted: Vec<Ticket> = (0..20).flat_map(|i| admit(&mut g, "127.0.0.2", 100 + i)).collect();
        assert_eq!(evicted.len(), 13, "20 arrivals, 7 places left beside the honest one");
        assert!(!evicted.contains(&honest));
        assert_eq!(g.from_source(ip("127.0.0.2")), 7);
    }

    /// Issue 26 item 11: silent entries from 2500 sources go before one that
    /// has sent its greeting and waits a round trip, whatever their ages.
    #[test]
    fn silent_entries_go_before_an_advancing_one() {
        let mut g = slots(64, 8, Duration::from_millis(200));
        let flood = |i: u32| IpAddr::from(Ipv4Addr::from(0x0a00_0000 + i % 2500));
        let mut now = 0;
        for i in 0..40 {
            g.admit(flood(i), 1, ms(now)).unwrap();
            now += 1;
        }
        let honest = g.admit(ip("192.0.2.7"), 1, ms(now)).unwrap().ticket;
        g.progress(honest);
        for i in 40..5000 {
            now += 1;
            let a = g.admit(flood(i), 1, ms(now)).unwrap();
            assert!(!a.evict.contains(&honest), "the advancing entry was displaced at arrival {i}");
        }
        assert_eq!(g.from_source(ip("192.0.2.7")), 1);
        // Among equals, age decides; and the least advanced goes even when youngest.
        let mut g = slots(3, 3, Duration::ZERO);
        let a = g.admit(ip("10.0.0.1"), 1, ms(0)).unwrap().ticket;
        let b = g.admit(ip("10.0.0.2"), 1, ms(1)).unwrap().ticket;
        let c = g.admit(ip("10.0.0.3"), 1, ms(2)).unwrap().ticket;
        g.progress(a);
        g.progress(b);
        g.progress(b);
        assert_eq!(admit(&mut g, "10.0.0.4", 3), vec![c]);
        g.progress(3);
        assert_eq!(admit(&mut g, "10.0.0.5", 4), vec![a], "all advanced once: the oldest of them");
    }

    /// Issue 50 item 4: 2500 handshakes from 250 sources that send their
    /// greeting and stall, reconnecting as fast as they are displaced
    /// (2900 a second: each lives ~90 ms, younger than the grace); a
    /// newcomer that stays silent 100 ms (its greeting in flight) is not
    /// displaced, because it counts as greeted for its grace and some flood
    /// source always holds two. Without the grace it is the least advanced
    /// and goes at the next arrival (as with the rule before).
    #[test]
    fn a_silent_newcomer_outlives_a_reconnecting_flood_from_250_sources() {
        let flood = |i: u64| IpAddr::from(Ipv4Addr::from(0x0a00_0000 + (i % 250) as u32));
        let run = |grace: Duration| {
            let mut g = slots(256, 64, grace);
            let at = |i: u64| Instant::from_micros(i * 345);
            for i in 0..2500 {
                let t = g.admit(flood(i), 1, at(i)).unwrap().ticket;
                g.progress(t);
            }
            let honest = g.admit(ip("192.0.2.7"), 1, at(2500)).unwrap().ticket;
            // Silent for 100 ms: 290 more arrivals, each displacing one.
            for i in 2501..2791 {
                let a = g.admit(flood(i), 1, at(i)).unwrap();
                if a.evict.contains(&honest) {
                    return Some(i - 2500);
                }
                g.progress(a.ticket);
            }
            g.progress(honest);
            None
        };
        assert_eq!(run(Duration::from_millis(200)), None, "displaced within its grace");
        assert_eq!(run(Duration::ZERO), Some(1), "without the grace (the test would prove nothing)");
    }

    #[test]
    fn the_grace_credits_a_newcomer_with_one_message() {
        let grace = Duration::from_millis(200);
        let mut g = slots(3, 3, grace);
        admit(&mut g, "10.0.0.1", 0); // 0
        admit(&mut g, "10.0.0.2", 300); // 1: in grace until 500
        admit(&mut g, "10.0.0.3", 310); // 2: until 510
                                        // Silent and out of grace: 0 goes although it is no heavier.
        assert_eq!(admit(&mut g, "10.0.0.4", 320), vec![0]);
        // Everyone in grace: the oldest of equal sources.
        assert_eq!(admit(&mut g, "10.0.0.5", 330), vec![1]);
        // A greeted entry out of grace and a silent one in it are equals:
        // the source decides, then what they really sent.
        let mut g = slots(2, 3, grace);
        let old = g.admit(ip("10.0.0.1"), 1, ms(0)).unwrap().ticket;
        g.progress(old);
        admit(&mut g, "10.0.0.2", 300); // 1, silent, in grace
        assert_eq!(admit(&mut g, "10.0.0.3", 310), vec![1]);
        // A source with two pays first, even for its younger entry's sake.
        let mut g = slots(3, 3, grace);
        admit(&mut g, "10.0.0.1", 0); // 0
        admit(&mut g, "10.0.0.2", 1); // 1
        admit(&mut g, "10.0.0.2", 2); // 2
        assert_eq!(admit(&mut g, "10.0.0.3", 3), vec![1]);
        // The newcomer counts toward its own source: a tie becomes its loss.
        let mut g = slots(2, 3, grace);
        admit(&mut g, "10.0.0.1", 0); // 0
        admit(&mut g, "10.0.0.2", 1); // 1
        assert_eq!(admit(&mut g, "10.0.0.2", 2), vec![1]);
        // Past the grace a silent entry goes before a greeted one of a heavier source.
        let mut g = slots(3, 3, grace);
        admit(&mut g, "10.0.0.1", 0); // 0, silent
        let a = g.admit(ip("10.0.0.2"), 1, ms(1)).unwrap().ticket;
        let b = g.admit(ip("10.0.0.2"), 1, ms(2)).unwrap().ticket;
        g.progress(a);
        g.progress(b);
        assert_eq!(admit(&mut g, "10.0.0.3", 500), vec![0]);
    }

    #[test]
    fn costs_in_bytes_and_a_hard_share() {
        // 16 KiB of messages, 4 KiB per /24, no burst: a source pays itself.
        let limits =
            Limits { capacity: 16 << 10, per_source: 4 << 10, grace: Duration::ZERO, burst: Duration::ZERO };
        let mut g = Gate::new(limits, Grouping::new(24, 64).unwrap());
        let a = g.admit(ip("10.0.1.1"), 3000, ms(0)).unwrap();
        assert_eq!(a.evict, Vec::<Ticket>::new());
        // Same /24, another address: over the 4 KiB share, its own oldest goes.
        assert_eq!(g.admit(ip("10.0.1.2"), 2000, ms(1)).unwrap().evict, vec![0]);
        assert_eq!(g.held_by(ip("10.0.1.77")), 2000);
        for (i, s) in ["10.0.2.1", "10.0.3.1", "10.0.4.1"].iter().enumerate() {
            assert_eq!(g.admit(ip(s), 4000, ms(2 + i as u64)).unwrap().evict, Vec::<Ticket>::new());
        }
        assert_eq!(g.held(), 14_000);
        // 3000 more do not fit 16384: the heaviest sources (4000 B each) pay, oldest first.
        assert_eq!(g.admit(ip("10.0.9.1"), 3000, ms(10)).unwrap().evict, vec![2]);
        assert!(g.held() <= 16 << 10);
        let e = g.admit(ip("10.0.9.1"), 5000, ms(11)).unwrap_err();
        assert_eq!(e, TooLarge { cost: 5000, limit: 4096, what: "per-source share" });
        let e = Gate::new(Limits { per_source: 1 << 20, ..limits }, Grouping::ADDRESS)
            .admit(ip("10.0.9.1"), 20_000, ms(0))
            .unwrap_err();
        assert_eq!(e.what, "capacity");
    }

    #[test]
    fn grouping_by_prefix() {
        let g = Grouping::new(24, 48).unwrap();
        assert_eq!(g.key(ip("10.1.2.3")), g.key(ip("10.1.2.200")));
        assert_ne!(g.key(ip("10.1.2.3")), g.key(ip("10.1.3.3")));
        assert_eq!(g.key(ip("10.1.2.3")).to_string(), "10.1.2.0/24");
        assert_eq!(g.key(ip("::ffff:10.1.2.9")), g.key(ip("10.1.2.3")), "mapped IPv4 is IPv4");
        assert_eq!(g.key(ip("2001:db8:1:2::1")), g.key(ip("2001:db8:1:3::1")));
        assert_eq!(g.key(ip("2001:db8:1:2::1")).to_string(), "2001:db8:1::/48");
        let a = Grouping::ADDRESS;
        assert_ne!(a.key(ip("10.1.2.3")), a.key(ip("10.1.2.4")));
        assert_eq!(a.key(ip("2001:db8::1")), a.key(ip("2001:db8::ffff")));
        assert_eq!(Grouping::new(0, 0).unwrap().key(ip("1.2.3.4")).to_string(), "0.0.0.0/0");
        assert_eq!(Grouping::new(32, 128).unwrap().key(ip("::1")).to_string(), "::1/128");
        assert_eq!(
            Grouping::new(33, 64).unwrap_err().to_string(),
            "an IPv4 source prefix is 0..=32 bits (got 33)"
        );
        assert!(Grouping::new(24, 129).is_err());
    }

    #[test]
    fn leaving_twice_or_unknown_is_harmless() {
        let mut g = slots(2, 2, Duration::ZERO);
        let a = g.admit(ip("10.0.0.1"), 1, ms(0)).unwrap().ticket;
        assert!(g.leave(a));
        assert!(!g.leave(a));
        assert!(!g.leave(99));
        g.progress(99);
        assert!(g.is_empty());
        assert_eq!(g.held(), 0);
    }

    proptest! {
        /// The capacity always holds; a source over its share only while its
        /// entries are younger than the burst; a source's entries leave
        /// least advanced first, then oldest first; the sums agree.
        #[test]
        fn limits_hold_and_each_source_loses_its_least_advanced_oldest_first(
            capacity in 1u64..40,
            per in 1u64..20,
            grace_ms in 0u64..300,
            burst_ms in 0u64..600,
            ops in proptest::collection::vec((0u8..4, 0u8..3, 0usize..64, 0u64..200, 1u64..6), 1..300),
        ) {
            let limits = Limits { capacity, per_source: per, grace: Duration::from_millis(grace_ms), burst: Duration::from_millis(burst_ms) };
            let mut g = Gate::new(limits, Grouping::ADDRESS);
            // (ticket, source, admitted, cost, progress)
            let mut live: Vec<(Ticket, u8, u64, u64, u32)> = Vec::new();
            let mut now = 0;
            for (src, op, pick, step, cost) in ops {
                now += step;
                if op == 1 && !live.is_empty() {
                    let (t, ..) = live.remove(pick % live.len());
                    prop_assert!(g.leave(t));
                    continue;
                }
                if op == 2 && !live.is_empty() {
                    let i = pick % live.len();
                    live[i].4 += 1;
                    g.progress(live[i].0);
                    continue;
                }
                let r = g.admit(IpAddr::from([10, 0, 0, src]), cost, ms(now));
                let Ok(a) = r else {
                    prop_assert!(cost > capacity || cost > per);
                    continue;
                };
                for e in &a.evict {
                    let i = live.iter().position(|x| x.0 == *e).expect("evicted a live ticket");
                    let v = live.remove(i);
                    prop_assert!(live.iter().all(|x| x.1 != v.1 || (x.4, x.0) > (v.4, v.0)),
                        "not its source's least advanced oldest: {v:?} {live:?}");
                }
                live.push((a.ticket, src, now, cost, 0));
                let total: u64 = live.iter().map(|x| x.3).sum();
                prop_assert_eq!(g.held(), total);
                prop_assert!(total <= capacity);
                let own: Vec<_> = live.iter().filter(|x| x.1 == src).collect();
                let own_held: u64 = own.iter().map(|x| x.3).sum();
                if own_held > per {
                    prop_assert!(own.iter().any(|x| now - x.2 < burst_ms), "over its share with nothing young");
                }
            }
        }
    }
}
