//! Warm connections to the first next hop (issue 29): a few sockets already
//! connected and greeted, so a new session skips the TCP handshake and the
//! SOCKS greeting of its first segment.
//!
//! Rules:
//! - **Never shared.** A session *takes* a connection out of the pool and
//!   owns it from then on; nothing ever goes back in. Only the fill tasks
//!   put connections in, each one fresh.
//! - **Capped.** At most `cap` (the `pool_size` setting) connections are
//!   idle or being opened.
//! - **Idle expiry.** A connection idle for `idle` (`pool_idle`) is closed (the next hop
//!   would otherwise close it itself when its handshake timeout runs out:
//!   5 s for ours, 2 s before the first byte, which is why fills greet at
//!   once).
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
//! Sans-IO like `admit`: no sockets and no clock (the caller passes `now`,
//! time since a fixed start); the server owns one `Pool` behind a mutex,
//! opens the connections and closes what it gets back.

use std::time::Duration;

/// How long after its last use (in multiples of the idle expiry) a pool
/// keeps replacing expired connections.
pub const KEEP_WARM_IDLES: u32 = 20;

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

    /// How many connections to `key` to open now to reach `cap` (counted as
    /// opening until `put` or `failed`): none when the pool has not been used
    /// for `KEEP_WARM_IDLES × idle` or a fill failed since the last session
    /// that got through. Also returns connections to close.
    pub fn wanted(&mut self, key: &K, now: Duration, cap: usize, idle: Duration) -> (usize, Vec<T>) {
        let closed = self.rekey(key);
        if self.broken || now.saturating_sub(self.last_use) >= idle * KEEP_WARM_IDLES {
            return (0, closed);
        }
        let n = cap.saturating_sub(self.idle.len() + self.opening);
        self.opening += n;
        (n, closed)
    }

    /// Marks the start: the pool counts as used now.
    pub fn started(&mut self, now: Duration) {
        self.last_use = now;
    }

    /// A fill for `key` finished: keeps `t` unless the hop changed or the
    /// pool is full, in which case `t` is handed back to be closed.
    pub fn put(&mut self, key: &K, t: T, now: Duration, cap: usize) -> Option<T> {
        if self.key.as_ref() != Some(key) {
            return Some(t);
        }
        self.opening = self.opening.saturating_sub(1);
        if self.idle.len() >= cap {
            return Some(t);
        }
        self.idle.push((t, now));
        None
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
        // A surplus connection is handed back.
        assert_eq!(p.put(&"a", 4, S, 2), Some(4));
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
