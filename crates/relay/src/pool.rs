//! Warm connections to the first next hop (issue 29): a few sockets already
//! connected and greeted, so a new session skips the TCP handshake and the
//! SOCKS greeting of its first segment.
//!
//! Rules:
//! - **Never shared.** A session *takes* a connection out of the pool and
//!   owns it from then on; nothing ever goes back in. Only the fill tasks
//!   put connections in, each one fresh.
//! - **Capped.** At most `cap` (the `pool_size` setting) connections are
//!   usable or being opened; while one is being replaced (below) it is
//!   held beside its replacement, so never more than `2 × cap` exist.
//! - **Idle expiry.** A connection idle for `idle` (`pool_idle`) is closed (the next hop
//!   would otherwise close it itself when its handshake timeout runs out:
//!   5 s for ours, 2 s before the first byte, which is why fills greet at
//!   once).
//! - **Replaced before it expires.** The caller checks the pool every
//!   [`check_interval`]; a connection that would expire before the next
//!   check is replaced at this one and stays usable until its replacement
//!   is in (`put` then closes the oldest) or it expires. Replacing only
//!   what had already expired left the pool empty from each expiry to the
//!   next check plus a fill: up to a quarter of the time, since all
//!   connections are filled at about the same moment.
//! - **Kept warm only while used.** Connections are (re)opened at start,
//!   after each take, and to replace expired ones only while the pool was
//!   used (or the relay started) less than `KEEP_WARM_IDLES × idle` ago, so
//!   an unused relay stops opening connections to its next hop.
//! - **Not against a failing hop.** After a fill fails, none is opened
//!   until a session gets through the hop on a fresh connection, so a dead
//!   hop or refused credentials are not retried in the background.
//! - **One hop.** The pool holds connections to one hop; when a reload
//!   changes the first hop, the old connections are dropped.
//!
//! Sans-IO like `tcpaccel_core::admit`: no sockets and no clock (the caller passes `now`,
//! time since a fixed start); the server owns one `Pool` behind a mutex,
//! opens the connections and closes what it gets back.

use std::time::Duration;

/// How long after its last use (in multiples of the idle expiry) a pool
/// keeps replacing expired connections.
pub const KEEP_WARM_IDLES: u32 = 20;

/// How often the pool is checked for connections to close and replace: a
/// quarter of the idle expiry, at least 50 ms.
pub fn check_interval(idle: Duration) -> Duration {
    (idle / 4).max(Duration::from_millis(50))
}

/// Idle connections to one hop `K`, newest last.
#[derive(Debug)]
pub struct Pool<T, K> {
    key: Option<K>,
    idle: Vec<(T, Duration)>,
    /// Fills started and not yet put or failed.
    opening: usize,
    /// The last take (or the start).
    last_use: Duration,
    /// A fill failed and no session has got through since.
    broken: bool,
}

impl<T, K: PartialEq + Clone> Default for Pool<T, K> {
    fn default() -> Self {
        Pool::new()
    }
}

impl<T, K: PartialEq + Clone> Pool<T, K> {
    pub fn new() -> Pool<T, K> {
        Pool { key: None, idle: Vec::new(), opening: 0, last_use: Duration::ZERO, broken: false }
    }

    /// Switches to hop `key`, returning the connections to another hop (to
    /// close). Fills still running for the old hop are refused in `put`.
    fn rekey(&mut self, key: &K) -> Vec<T> {
        if self.key.as_ref() == Some(key) {
            return Vec::new();
        }
        self.key = Some(key.clone());
        self.opening = 0;
        self.broken = false;
        self.idle.drain(..).map(|(t, _)| t).collect()
    }

    /// Takes the newest connection to `key` idle for less than `idle`; the
    /// caller owns it alone. Also returns the expired ones (to close).
    pub fn take(&mut self, key: &K, now: Duration, idle: Duration) -> (Option<T>, Vec<T>) {
        let mut closed = self.rekey(key);
        closed.extend(self.expire(now, idle));
        self.last_use = now;
        (self.idle.pop().map(|(t, _)| t), closed)
    }

    /// Removes and returns the connections idle for `idle` or longer.
    pub fn expire(&mut self, now: Duration, idle: Duration) -> Vec<T> {
        let (old, fresh): (Vec<_>, Vec<_>) =
            self.idle.drain(..).partition(|(_, since)| now.saturating_sub(*since) >= idle);
        self.idle = fresh;
        old.into_iter().map(|(t, _)| t).collect()
    }

    /// How many connections to `key` to open now so that `cap` stay usable
    /// until the next check (counted as opening until `put` or `failed`):
    /// one that expires before [`check_interval`] from `now` counts as gone.
    /// None when the pool has not been used for `KEEP_WARM_IDLES × idle` or
    /// a fill failed since the last session that got through. Also returns
    /// connections to close.
    pub fn wanted(&mut self, key: &K, now: Duration, cap: usize, idle: Duration) -> (usize, Vec<T>) {
        let closed = self.rekey(key);
        if self.broken || now.saturating_sub(self.last_use) >= idle * KEEP_WARM_IDLES {
            return (0, closed);
        }
        let next_check = now + check_interval(idle);
        let lasting = self.idle.iter().filter(|(_, since)| next_check.saturating_sub(*since) < idle).count();
        let n = cap.saturating_sub(lasting + self.opening);
        self.opening += n;
        (n, closed)
    }

    /// Marks the start: the pool counts as used now.
    pub fn started(&mut self, now: Duration) {
        self.last_use = now;
    }

    /// A fill for `key` finished: keeps `t`, the newest, and hands back the
    /// oldest to be closed if the pool then holds more than `cap` (the one
    /// `t` replaces); hands `t` back if the hop changed.
    pub fn put(&mut self, key: &K, t: T, now: Duration, cap: usize) -> Option<T> {
        if self.key.as_ref() != Some(key) {
            return Some(t);
        }
        self.opening = self.opening.saturating_sub(1);
        self.idle.push((t, now));
        (self.idle.len() > cap).then(|| self.idle.remove(0).0)
    }

    /// A fill for `key` failed: no more until [`Pool::got_through`].
    pub fn failed(&mut self, key: &K) {
        if self.key.as_ref() == Some(key) {
            self.opening = self.opening.saturating_sub(1);
            self.broken = true;
        }
    }

    /// A session got through `key` on a fresh connection: fills may resume.
    pub fn got_through(&mut self, key: &K) {
        if self.key.as_ref() == Some(key) {
            self.broken = false;
        }
    }

    /// Idle connections held now.
    pub fn len(&self) -> usize {
        self.idle.len()
    }

    pub fn is_empty(&self) -> bool {
        self.idle.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    const IDLE: Duration = Duration::from_secs(3);

    #[test]
    fn fills_up_to_the_cap_counting_fills_in_flight() {
        let mut p: Pool<u32, &str> = Pool::new();
        p.started(Duration::ZERO);
        assert_eq!(p.wanted(&"a", Duration::ZERO, 2, IDLE).0, 2);
        // Both fills still running: nothing more to open.
        assert_eq!(p.wanted(&"a", S, 2, IDLE).0, 0);
        assert_eq!(p.put(&"a", 1, S, 2), None);
        assert_eq!(p.take(&"a", S, IDLE).0, Some(1));
        assert_eq!(p.wanted(&"a", S, 2, IDLE).0, 1);
        assert_eq!(p.put(&"a", 2, S, 2), None);
        assert_eq!(p.put(&"a", 3, S, 2), None);
        // Over the cap, the oldest is handed back (closed).
        assert_eq!(p.put(&"a", 4, S, 2), Some(2));
        assert_eq!(p.len(), 2);
        assert_eq!(p.wanted(&"a", S, 2, IDLE).0, 0);
    }

    #[test]
    fn a_connection_is_taken_once_and_never_handed_out_again() {
        let mut p: Pool<u32, &str> = Pool::new();
        p.started(Duration::ZERO);
        p.wanted(&"a", Duration::ZERO, 2, IDLE);
        p.put(&"a", 1, Duration::ZERO, 2);
        p.put(&"a", 2, Duration::ZERO, 2);
        let (x, _) = p.take(&"a", S, IDLE);
        let (y, _) = p.take(&"a", S, IDLE);
        let (z, _) = p.take(&"a", S, IDLE);
        assert_eq!((x, y, z), (Some(2), Some(1), None));
    }

    #[test]
    fn idle_connections_expire_and_are_returned_for_closing() {
        let mut p: Pool<u32, &str> = Pool::new();
        p.started(Duration::ZERO);
        p.wanted(&"a", Duration::ZERO, 2, IDLE);
        p.put(&"a", 1, Duration::ZERO, 2);
        p.put(&"a", 2, 2 * S, 2);
        assert!(p.expire(IDLE - Duration::from_millis(1), IDLE).is_empty());
        assert_eq!(p.expire(IDLE, IDLE), vec![1]);
        // Taking skips (and returns) an expired connection.
        let (t, closed) = p.take(&"a", 2 * S + IDLE, IDLE);
        assert_eq!((t, closed), (None, vec![2]));
    }

    #[test]
    fn an_unused_pool_stops_refilling() {
        let mut p: Pool<u32, &str> = Pool::new();
        p.started(Duration::ZERO);
        let late = IDLE * KEEP_WARM_IDLES;
        assert_eq!(p.wanted(&"a", late - S, 1, IDLE).0, 1);
        assert_eq!(p.put(&"a", 7, late - S, 1), None);
        assert_eq!(p.take(&"a", late - S, IDLE).0, Some(7));
        assert_eq!(p.wanted(&"a", late * 2, 1, IDLE).0, 0);
        // A take (even of nothing) is a use: filling resumes.
        assert_eq!(p.take(&"a", late * 2, IDLE).0, None);
        assert_eq!(p.wanted(&"a", late * 2, 1, IDLE).0, 1);
    }

    #[test]
    fn a_failed_fill_stops_filling_until_a_session_gets_through() {
        let mut p: Pool<u32, &str> = Pool::new();
        p.started(Duration::ZERO);
        assert_eq!(p.wanted(&"a", Duration::ZERO, 2, IDLE).0, 2);
        p.failed(&"a");
        p.failed(&"a");
        assert_eq!(p.take(&"a", S, IDLE).0, None);
        assert_eq!(p.wanted(&"a", S, 2, IDLE).0, 0);
        p.got_through(&"a");
        assert_eq!(p.wanted(&"a", S, 2, IDLE).0, 2);
    }

    /// Drives a pool as the server does, on a manual clock in 1 ms steps:
    /// a check every `check_interval` (expire, then refill), fills that
    /// take `fill` to connect and greet, no sessions. Returns the longest
    /// time the pool held no usable connection after the first fill.
    fn longest_empty(replace_ahead: bool, idle: Duration, fill: Duration, run: Duration) -> Duration {
        let ms = Duration::from_millis(1);
        let mut p: Pool<u32, &str> = Pool::new();
        p.started(Duration::ZERO);
        let (mut next_check, mut filling, mut id) = (Duration::ZERO, Vec::new(), 0u32);
        let (mut empty_since, mut longest) = (None, Duration::ZERO);
        let mut now = Duration::ZERO;
        while now < run {
            filling.retain(|done: &Duration| {
                if *done <= now {
                    id += 1;
                    let _closed = p.put(&"a", id, now, 2);
                }
                *done > now
            });
            if now >= next_check {
                drop(p.expire(now, idle));
                // The policy before: only what had expired was replaced.
                let n = if replace_ahead {
                    p.wanted(&"a", now, 2, idle).0
                } else {
                    drop(p.rekey(&"a"));
                    let n = 2usize.saturating_sub(p.len() + filling.len());
                    p.opening += n;
                    n
                };
                filling.extend(std::iter::repeat_n(now + fill, n));
                next_check = now + check_interval(idle);
                // Keep the pool "in use" without taking from it.
                p.started(now);
            }
            let usable = p.idle.iter().any(|(_, since)| now.saturating_sub(*since) < idle);
            match (usable, empty_since) {
                (false, None) if now > fill => empty_since = Some(now),
                (true, Some(t)) => {
                    longest = longest.max(now - t);
                    empty_since = None;
                }
                _ => {}
            }
            now += ms;
        }
        longest.max(empty_since.map_or(Duration::ZERO, |t| run - t))
    }

    #[test]
    fn connections_are_replaced_before_they_expire() {
        let (idle, fill) = (Duration::from_secs(3), Duration::from_millis(20));
        let run = Duration::from_secs(30);
        // Replacing only expired connections left gaps of up to a check
        // interval plus a fill; replacing ahead leaves none.
        let before = longest_empty(false, idle, fill, run);
        assert!(before >= check_interval(idle) / 2, "{before:?}");
        assert_eq!(longest_empty(true, idle, fill, run), Duration::ZERO);
        // Also with a short idle expiry, at the 50 ms check floor.
        assert_eq!(
            longest_empty(true, Duration::from_millis(200), fill, Duration::from_secs(5)),
            Duration::ZERO
        );
    }

    #[test]
    fn a_new_hop_drops_the_old_connections() {
        let mut p: Pool<u32, &str> = Pool::new();
        p.started(Duration::ZERO);
        p.wanted(&"a", Duration::ZERO, 2, IDLE);
        p.put(&"a", 1, Duration::ZERO, 2);
        let (t, closed) = p.take(&"b", S, IDLE);
        assert_eq!((t, closed), (None, vec![1]));
        // The fill still running for "a" is refused.
        assert_eq!(p.put(&"a", 2, S, 2), Some(2));
        assert_eq!(p.wanted(&"b", S, 2, IDLE).0, 2);
    }
}
