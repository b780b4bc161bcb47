//! What a run says while it goes on, on stderr (stdout holds the summary
//! or the JSON, which a pipe or a file may be collecting; progress is a
//! diagnostic and must not mix into them).
//!
//! - On a terminal (stdout and stderr both): a one-line progress bar
//!   redrawn at each run's start: variant, repeat, runs done, time left.
//! - Otherwise (a pipe, a file, a CI log, `--json`): a [`Heartbeat`] line
//!   every [`HEARTBEAT_EVERY`], so a long run never stays silent for
//!   minutes: runs done, the run under way and for how long, time left.
//!
//! The heartbeat's timing and text are sans-IO ([`Heartbeat::poll`] takes
//! `now`); [`Progress`] is the shell: a thread that reads the clock and
//! prints what `poll` returns.

use std::io::{IsTerminal, Write};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::Duration;
use tcpaccel_core::time::Instant;

/// How often a run not on a terminal says where it is: often enough that a
/// log never looks stalled, seldom enough that a 50-minute run writes about
/// 300 lines.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(10);

/// Where a run stands, as the heartbeat and the bar print it.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub total: usize,
    pub done: usize,
    /// The run under way: variant, repeat (0-based), when it started.
    pub current: Option<(String, u32, Instant)>,
}

/// Time left: the runs not started, at the measured pace once a run has
/// finished (the scenario's estimate `per_run` before), plus what the run
/// under way still needs at that pace (nothing once it has taken longer).
pub fn eta(status: &Status, began: Instant, per_run: Duration, now: Instant) -> Duration {
    let pace = if status.done == 0 {
        per_run
    } else {
        // The finished runs' time: up to the current run's start.
        let finished_by = status.current.as_ref().map_or(now, |c| c.2);
        finished_by.saturating_since(began) / status.done as u32
    };
    let left = status.total.saturating_sub(status.done);
    match &status.current {
        Some((_, _, started)) if left > 0 => {
            pace * (left - 1) as u32 + pace.saturating_sub(now.saturating_since(*started))
        }
        _ => pace * left as u32,
    }
}

/// `1h02m`, `2m05s`, `45s`.
pub fn clock_text(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// The heartbeat's clock: one line at every multiple of `every` after the
/// start, none in between; a poll that comes late (a long stall) prints one
/// line, not the ones it missed.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    began: Instant,
    every: Duration,
    per_run: Duration,
    next: Instant,
}

impl Heartbeat {
    pub fn new(began: Instant, every: Duration, per_run: Duration) -> Self {
        Heartbeat { began, every, per_run, next: began + every }
    }

    /// When the next line is due (the shell sleeps until then).
    pub fn next_due(&self) -> Instant {
        self.next
    }

    /// The line to print at `now`, if one is due.
    pub fn poll(&mut self, now: Instant, status: &Status) -> Option<String> {
        if now < self.next {
            return None;
        }
        while self.next <= now {
            self.next += self.every;
        }
        let elapsed = now.saturating_since(self.began);
        let under_way = match &status.current {
            Some((v, repeat, started)) => {
                format!(", {v} #{} under way for {}", repeat + 1, clock_text(now.saturating_since(*started)))
            }
            None => String::new(),
        };
        Some(format!(
            "progress: {}/{} runs done{under_way}, {} elapsed, about {} left",
            status.done,
            status.total,
            clock_text(elapsed),
            clock_text(eta(status, self.began, self.per_run, now))
        ))
    }
}

enum Event {
    Start(String, u32),
    Done,
    Stop,
}

/// The shell: the bar on a terminal, else a heartbeat thread.
pub struct Progress {
    bar: bool,
    clock: std::time::Instant,
    status: Status,
    per_run: Duration,
    beat: Option<(Sender<Event>, std::thread::JoinHandle<()>)>,
}

impl Progress {
    /// `interactive`: false for machine output (`--json`), which never gets
    /// the bar (the heartbeat, on stderr, stays).
    pub fn new(total: usize, per_run: Duration, interactive: bool) -> Self {
        let bar = interactive && std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        let heartbeat =
            (!bar).then(|| (HEARTBEAT_EVERY, Box::new(std::io::stderr()) as Box<dyn Write + Send>));
        Self::with(total, per_run, bar, heartbeat)
    }

    fn with(
        total: usize,
        per_run: Duration,
        bar: bool,
        heartbeat: Option<(Duration, Box<dyn Write + Send>)>,
    ) -> Self {
        let clock = std::time::Instant::now();
        let status = Status { total, done: 0, current: None };
        let beat = heartbeat.map(|(every, mut out)| {
            let (tx, rx) = mpsc::channel();
            let mut status = status.clone();
            let handle = std::thread::spawn(move || {
                let now = || Instant::from_nanos(clock.elapsed().as_nanos() as u64);
                let mut hb = Heartbeat::new(Instant::ZERO, every, per_run);
                loop {
                    let wait = hb.next_due().saturating_since(now());
                    match rx.recv_timeout(wait) {
                        Ok(Event::Start(v, r)) => status.current = Some((v, r, now())),
                        Ok(Event::Done) => {
                            status.done += 1;
                            status.current = None;
                        }
                        Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                        Err(RecvTimeoutError::Timeout) => {
                            if let Some(line) = hb.poll(now(), &status) {
                                let _ = writeln!(out, "{line}");
                            }
                        }
                    }
                }
            });
            (tx, handle)
        });
        Progress { bar, clock, status, per_run, beat }
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.clock.elapsed().as_nanos() as u64)
    }

    fn send(&self, e: Event) {
        if let Some((tx, _)) = &self.beat {
            let _ = tx.send(e);
        }
    }

    /// Time left (see [`eta`]).
    pub fn eta(&self) -> Duration {
        eta(&self.status, Instant::ZERO, self.per_run, self.now())
    }

    pub fn start(&mut self, variant: &str, repeat: u32) {
        self.status.current = Some((variant.to_string(), repeat, self.now()));
        self.send(Event::Start(variant.to_string(), repeat));
        if !self.bar {
            return;
        }
        let width = 24;
        let filled = (self.status.done * width).checked_div(self.status.total).unwrap_or(width);
        eprint!(
            "\r\x1b[2K[{}{}] {}/{}  {variant} #{}  ~{} left",
            "#".repeat(filled),
            "-".repeat(width - filled),
            self.status.done,
            self.status.total,
            repeat + 1,
            clock_text(self.eta())
        );
        let _ = std::io::stderr().flush();
    }

    /// A line of its own: above the bar on a terminal; elsewhere the caller
    /// logs what it needs to say.
    pub fn message(&self, msg: &str) {
        if self.bar {
            eprintln!("\r\x1b[2K{msg}");
        }
    }

    pub fn done(&mut self) {
        self.status.done += 1;
        self.status.current = None;
        self.send(Event::Done);
    }

    pub fn finish(&mut self) {
        if let Some((tx, handle)) = self.beat.take() {
            let _ = tx.send(Event::Stop);
            let _ = handle.join();
        }
        if self.bar {
            eprintln!("\r\x1b[2K{} run(s) in {:.0?}", self.status.done, self.clock.elapsed());
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some((tx, _)) = self.beat.take() {
            let _ = tx.send(Event::Stop);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    fn at(s: u64) -> Instant {
        Instant::from_millis(s * 1000)
    }
    fn status(done: usize, current: Option<(&str, u32, u64)>) -> Status {
        Status { total: 4, done, current: current.map(|(v, r, t)| (v.to_string(), r, at(t))) }
    }

    #[test]
    fn a_line_every_interval_and_none_between() {
        let mut hb = Heartbeat::new(at(0), 10 * S, 30 * S);
        let st = status(0, Some(("defaults", 0, 0)));
        assert_eq!(hb.poll(at(0), &st), None);
        assert_eq!(hb.poll(at(9), &st), None);
        assert_eq!(
            hb.poll(at(10), &st).as_deref(),
            Some("progress: 0/4 runs done, defaults #1 under way for 10s, 10s elapsed, about 1m50s left")
        );
        assert_eq!(hb.poll(at(10), &st), None);
        assert_eq!(hb.poll(at(19), &st), None);
        assert!(hb.poll(at(20), &st).is_some());
        assert_eq!(hb.next_due(), at(30));
    }

    #[test]
    fn a_late_poll_prints_one_line_and_keeps_the_grid() {
        let mut hb = Heartbeat::new(at(0), 10 * S, 30 * S);
        let st = status(0, None);
        assert!(hb.poll(at(47), &st).is_some());
        assert_eq!(hb.next_due(), at(50));
        assert_eq!(hb.poll(at(49), &st), None);
    }

    #[test]
    fn time_left_uses_the_estimate_then_the_measured_pace() {
        // Before any run finished: 4 runs of the estimated 30 s, the one
        // under way 12 s along.
        assert_eq!(eta(&status(0, Some(("a", 0, 0))), at(0), 30 * S, at(12)), 108 * S);
        // Two runs took 100 s in all (50 s each): the third started at
        // 100 s and ran 20 s; one more after it.
        assert_eq!(eta(&status(2, Some(("c", 0, 100))), at(0), 30 * S, at(120)), 80 * S);
        // A run over its pace counts as about to end, not as negative.
        assert_eq!(eta(&status(2, Some(("c", 0, 100))), at(0), 30 * S, at(190)), 50 * S);
        // Between runs, and at the end.
        assert_eq!(eta(&status(2, None), at(0), 30 * S, at(100)), 100 * S);
        assert_eq!(eta(&status(4, None), at(0), 30 * S, at(200)), Duration::ZERO);
    }

    #[test]
    fn durations_read_as_clock_text() {
        assert_eq!(clock_text(45 * S), "45s");
        assert_eq!(clock_text(125 * S), "2m05s");
        assert_eq!(clock_text(3720 * S), "1h02m");
    }

    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The shell: lines come from the thread while a run is under way, and
    /// none after finish.
    #[test]
    fn the_thread_beats_until_finished() {
        let out = Shared::default();
        let every = Duration::from_millis(20);
        let mut p = Progress::with(2, S, false, Some((every, Box::new(out.clone()))));
        p.start("bbr", 0);
        std::thread::sleep(every * 5);
        p.done();
        p.finish();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() >= 2, "{text}");
        assert!(lines[0].starts_with("progress: 0/2 runs done, bbr #1 under way for "), "{text}");
        std::thread::sleep(every * 3);
        assert_eq!(out.0.lock().unwrap().len(), text.len(), "a line after finish");
    }
}
