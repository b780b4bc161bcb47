//! Log flood control shared by the services (relay, gather server, lanes
//! daemon): per-connection and per-flow log lines pass through one
//! [`FloodLog`], which lets out what `tcpaccel_core::loglimit` allows and
//! says the count of the rest in one summary line at most every
//! `summary_every`.
//!
//! What it is: the shell around the pure limiter (a mutex, the monotonic
//! clock, a `log_suppressed` counter a service registers) and two macros
//! that do the logging at the caller's place, so the caller's module is the
//! target that `--log` filters: [`flood_event!`] checks the level first
//! (`tracing::enabled!`) and offers the record only when it would be
//! printed, so a record filtered out is neither written nor counted, and
//! no summary is ever written for it; [`flood_tick!`] writes a summary that
//! fell due after the flood stopped (call it every second or so).
//!
//! What it is not: a general rate limit on all logging. Lines about the
//! service as a whole (start, reload, a first failure) go straight to
//! `tracing`.

use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use tcpaccel_core::loglimit::{Budget, Limiter, Pass, Suppressed};

#[doc(hidden)]
pub use tracing as __tracing;

/// One service's flood-limited records.
#[derive(Debug)]
pub struct FloodLog {
    limiter: Mutex<Limiter>,
    epoch: std::time::Instant,
    /// What a record is, in the summary ("connection records").
    what: &'static str,
    /// The metric that counts them, named in the summary.
    metric: &'static str,
    suppressed: Counter,
}

impl FloodLog {
    /// A limiter of [`Budget::DEFAULT`]; `what` names the records and
    /// `metric` the counter they are counted in, for the summary line.
    pub fn new(what: &'static str, metric: &'static str) -> FloodLog {
        FloodLog::with_budget(what, metric, Budget::DEFAULT)
    }

    pub fn with_budget(what: &'static str, metric: &'static str, budget: Budget) -> FloodLog {
        FloodLog {
            limiter: Mutex::new(Limiter::new(budget)),
            epoch: std::time::Instant::now(),
            what,
            metric,
            suppressed: Counter::default(),
        }
    }

    fn now(&self) -> tcpaccel_core::Instant {
        tcpaccel_core::Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    fn limiter(&self) -> std::sync::MutexGuard<'_, Limiter> {
        // Nothing panics while holding it; survive it anyway.
        self.limiter.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A record that would be printed (the caller checked its level): write
    /// it or not, and a summary to write first. Counted when not written.
    pub fn offer(&self) -> Pass {
        let now = self.now();
        let pass = self.limiter().offer(now);
        if !pass.write {
            self.suppressed.inc();
        }
        pass
    }

    /// The summary if one is due now.
    pub fn tick(&self) -> Option<Suppressed> {
        let now = self.now();
        self.limiter().tick(now)
    }

    /// The summary of whatever is held back, due or not (at exit).
    pub fn flush(&self) -> Option<Suppressed> {
        let now = self.now();
        self.limiter().flush(now)
    }

    /// Records not written since the start; register it as the service's
    /// `log_suppressed` counter (a clone shares the count).
    pub fn suppressed(&self) -> &Counter {
        &self.suppressed
    }

    /// The summary's text.
    pub fn describe(&self, s: &Suppressed) -> String {
        let b = self.limiter().budget();
        format!(
            "{} {} suppressed over the last {:.1} s (more than {} at once or {} a minute; counted in {})",
            s.records,
            self.what,
            s.span().as_secs_f64(),
            b.burst,
            b.per_minute,
            self.metric
        )
    }
}

/// `flood_event!(LOG, Level::INFO, fields…, "message")`: a `tracing` event
/// through the [`FloodLog`] `LOG`, at the caller's place. Offered only when
/// the level is enabled there; a summary that is due goes first, at `warn`.
#[macro_export]
macro_rules! flood_event {
    ($log:expr, $lvl:expr, $($arg:tt)+) => {
        if $crate::floodlog::__tracing::enabled!($lvl) {
            let log: &$crate::floodlog::FloodLog = &$log;
            let pass = log.offer();
            if let Some(s) = pass.summary {
                $crate::floodlog::__tracing::warn!(parent: None, suppressed = s.records, "{}", log.describe(&s));
            }
            if pass.write {
                $crate::floodlog::__tracing::event!($lvl, $($arg)+);
            }
        }
    };
}

/// `flood_tick!(LOG)`: the summary of [`FloodLog`] `LOG` if it is due
/// (`flush` as a second argument: whatever is held back, at exit), at
/// `warn` at the caller's place.
#[macro_export]
macro_rules! flood_tick {
    ($log:expr) => {{
        let log: &$crate::floodlog::FloodLog = &$log;
        if let Some(s) = log.tick() {
            $crate::floodlog::__tracing::warn!(parent: None, suppressed = s.records, "{}", log.describe(&s));
        }
    }};
    ($log:expr, flush) => {{
        let log: &$crate::floodlog::FloodLog = &$log;
        if let Some(s) = log.flush() {
            $crate::floodlog::__tracing::warn!(parent: None, suppressed = s.records, "{}", log.describe(&s));
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex as StdMutex};
    use tracing::Level;

    /// Every line a `fmt` subscriber at `filter` writes.
    #[derive(Clone, Default)]
    struct Lines(Arc<StdMutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn with_filter(level: Level, f: impl FnOnce()) -> Vec<String> {
        let out = Lines::default();
        let w = out.clone();
        let sub = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .with_writer(move || w.clone())
            .finish();
        tracing::subscriber::with_default(sub, f);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn records_below_the_level_are_neither_written_nor_counted() {
        let log = FloodLog::new("test records", "test_suppressed");
        let lines = with_filter(Level::WARN, || {
            for i in 0..1000 {
                flood_event!(log, Level::INFO, i, "a record");
            }
            flood_tick!(log, flush);
        });
        assert!(lines.is_empty(), "{lines:?}");
        assert_eq!(log.suppressed().get(), 0);
    }

    #[test]
    fn a_flood_at_an_enabled_level_writes_the_burst_and_one_summary_with_the_count() {
        let log = FloodLog::new("test records", "test_suppressed");
        let lines = with_filter(Level::INFO, || {
            for i in 0..1000 {
                flood_event!(log, Level::INFO, i, "a record");
            }
            flood_tick!(log);
            flood_tick!(log, flush);
        });
        let records = lines.iter().filter(|l| l.contains("a record")).count();
        let summaries: Vec<&String> = lines.iter().filter(|l| l.contains("suppressed")).collect();
        // Within a second: the burst of 20 (perhaps one more from the refill),
        // then the one summary at exit with the rest.
        assert!((20..=21).contains(&records), "{records}");
        assert_eq!(summaries.len(), 1, "{lines:?}");
        let n = 1000 - records as u64;
        assert_eq!(log.suppressed().get(), n);
        assert!(summaries[0].contains(&format!("{n} test records suppressed")), "{}", summaries[0]);
        assert!(
            summaries[0].contains("WARN") && summaries[0].contains("test_suppressed"),
            "{}",
            summaries[0]
        );
    }
}
