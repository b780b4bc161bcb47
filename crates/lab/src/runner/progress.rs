//! A one-line progress bar on stderr: variant, repeat, runs done, time left.
//! Off when stdout is not a terminal or when machine output (`--json`) is asked for.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    enabled: bool,
    total: usize,
    done: usize,
    per_run: Duration,
    began: Instant,
}

impl Progress {
    pub fn new(total: usize, per_run: Duration, want: bool) -> Self {
        let enabled = want && std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        Progress { enabled, total, done: 0, per_run, began: Instant::now() }
    }

    /// Time left: measured pace once a run has finished, the scenario's estimate before.
    pub fn eta(&self) -> Duration {
        let left = (self.total - self.done.min(self.total)) as u32;
        if self.done == 0 {
            self.per_run * left
        } else {
            self.began.elapsed() / self.done as u32 * left
        }
    }

    pub fn start(&mut self, variant: &str, repeat: u32) {
        if !self.enabled {
            return;
        }
        let width = 24;
        let filled = (self.done * width).checked_div(self.total).unwrap_or(width);
        let eta = self.eta().as_secs();
        eprint!(
            "\r\x1b[2K[{}{}] {}/{}  {variant} #{}  ~{}m{:02}s left",
            "#".repeat(filled),
            "-".repeat(width - filled),
            self.done,
            self.total,
            repeat + 1,
            eta / 60,
            eta % 60
        );
        let _ = std::io::stderr().flush();
    }

    pub fn message(&self, msg: &str) {
        if self.enabled {
            eprintln!("\r\x1b[2K{msg}");
        }
    }

    pub fn done(&mut self) {
        self.done += 1;
    }

    pub fn finish(&self) {
        if self.enabled {
            eprintln!("\r\x1b[2K{} run(s) in {:.0?}", self.done, self.began.elapsed());
        }
    }
}
