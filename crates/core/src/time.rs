//! The one time type of the pure core: nanoseconds since an arbitrary epoch.
//!
//! Nothing in the core reads a clock; shells convert their monotonic clock to
//! [`Instant`] and pass it in (the style of quinn-proto and smoltcp), so every
//! algorithm can be driven exactly by a manual clock in tests.

use serde::{Deserialize, Serialize};
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Instant(pub u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    pub fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }
    pub fn from_micros(us: u64) -> Self {
        Instant(us * 1_000)
    }
    pub fn from_millis(ms: u64) -> Self {
        Instant(ms * 1_000_000)
    }
    pub fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.as_nanos() as u64))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

/// `t - d`, saturating at zero (an instant never goes below the epoch).
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.as_nanos() as u64))
    }
}

impl Sub for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

/// A clock the shells implement; tests use [`ManualClock`].
pub trait Clock {
    fn now(&self) -> Instant;
}

/// A clock that only moves when told to.
#[derive(Debug, Default, Clone)]
pub struct ManualClock(std::cell::Cell<u64>);

impl ManualClock {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn advance(&self, d: Duration) {
        self.0.set(self.0.get() + d.as_nanos() as u64);
    }
    pub fn set(&self, t: Instant) {
        self.0.set(t.0);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        Instant(self.0.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn arithmetic() {
        let c = ManualClock::new();
        let t0 = c.now();
        c.advance(Duration::from_micros(123));
        assert_eq!(c.now() - t0, Duration::from_micros(123));
        assert_eq!(t0 - c.now(), Duration::ZERO);
        assert_eq!(Instant::from_millis(1) + Duration::from_millis(2), Instant::from_millis(3));
        assert_eq!(Instant::from_millis(3) - Duration::from_millis(2), Instant::from_millis(1));
        assert_eq!(Instant::from_millis(1) - Duration::from_millis(2), Instant::ZERO);
    }
}
