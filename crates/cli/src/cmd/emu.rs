//! `tcpaccel emu`: the userspace link emulator between two interfaces, in the
//! foreground until SIGINT/SIGTERM or `--duration`; prints a summary (text,
//! or one JSON object with `--json`) when it stops. The emulator itself is
//! `tcpaccel_emu`; this module turns flags into an [`EmuConfig`] in one step
//! and prints.
//!
//! Loss forms (`--loss`): `none`, `0.1%` (Bernoulli), `bernoulli:0.001`,
//! `ge:p=0.01,r=0.3[,h=0.5][,k=0]` (Gilbert–Elliott: p = P(Good→Bad),
//! r = P(Bad→Good), h = loss probability in Bad, default 1, k = loss
//! probability in Good, default 0).

use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use anyhow::Context;
use tcpaccel_core::loss::LossSpec;
use tcpaccel_core::units::QueueLimit;
use tcpaccel_emu::{EmuConfig, EmuError, Emulator, LinkConfig, Scheduling};

use crate::cmd::values::{self, RateSetting};
use crate::exit::{self, Verdict};

#[derive(clap::Args)]
#[command(after_help = "Loss SPEC forms: none | 0.1% | bernoulli:0.001 | ge:p=0.01,r=0.3[,h=0.5][,k=0]\n  \
    (Gilbert-Elliott: p = P(Good->Bad), r = P(Bad->Good), h = loss probability in Bad (default 1),\n  \
    k = loss probability in Good (default 0)).\n\
Per-direction flags (--rate-ab, --delay-ba, ...) override the flag for both directions.\n\
a->b is what arrives on --a and leaves on --b.")]
pub(crate) struct Args {
    /// Interface of side A.
    #[arg(long, value_name = "IFACE")]
    a: String,
    /// Interface of side B.
    #[arg(long, value_name = "IFACE")]
    b: String,
    /// Open the interfaces inside this network namespace (from `ip netns`).
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
    /// Bottleneck rate on the wire, both directions (e.g. 500mbit, 1gbit, unlimited).
    #[arg(long, value_name = "RATE", allow_hyphen_values = true, value_parser = values::rate_setting)]
    rate: Option<RateSetting>,
    #[arg(long, value_name = "RATE", allow_hyphen_values = true, value_parser = values::rate_setting, help = "Rate a->b (overrides --rate)")]
    rate_ab: Option<RateSetting>,
    #[arg(long, value_name = "RATE", allow_hyphen_values = true, value_parser = values::rate_setting, help = "Rate b->a (overrides --rate)")]
    rate_ba: Option<RateSetting>,
    /// One-way propagation delay, both directions (e.g. 50ms).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = values::duration)]
    delay: Option<Duration>,
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = values::duration, help = "Delay a->b (overrides --delay)")]
    delay_ab: Option<Duration>,
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = values::duration, help = "Delay b->a (overrides --delay)")]
    delay_ba: Option<Duration>,
    /// Extra delay, uniform in [0, jitter], never reordering.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = values::duration)]
    jitter: Option<Duration>,
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = values::duration, help = "Jitter a->b (overrides --jitter)")]
    jitter_ab: Option<Duration>,
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = values::duration, help = "Jitter b->a (overrides --jitter)")]
    jitter_ba: Option<Duration>,
    /// Drop-tail buffer: bytes (1MB, 64KiB) or packets (100p). Default 1MB.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = values::queue_limit)]
    buffer: Option<QueueLimit>,
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = values::queue_limit, help = "Buffer a->b (overrides --buffer)")]
    buffer_ab: Option<QueueLimit>,
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = values::queue_limit, help = "Buffer b->a (overrides --buffer)")]
    buffer_ba: Option<QueueLimit>,
    /// Random loss (forms below).
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true, value_parser = values::loss)]
    loss: Option<LossSpec>,
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true, value_parser = values::loss, help = "Loss a->b (overrides --loss)")]
    loss_ab: Option<LossSpec>,
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true, value_parser = values::loss, help = "Loss b->a (overrides --loss)")]
    loss_ba: Option<LossSpec>,
    /// Seed of loss and jitter: a->b uses N, b->a uses N+1.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Bytes added per frame on the wire (preamble+SFD 8, IFG 12, FCS 4).
    #[arg(long, value_name = "BYTES", default_value_t = tcpaccel_core::link::DEFAULT_OVERHEAD)]
    overhead: u32,
    /// Largest frame accepted (bytes, without FCS); longer ones are dropped as oversize.
    #[arg(long, value_name = "BYTES", default_value_t = tcpaccel_emu::config::DEFAULT_MAX_FRAME)]
    max_frame: usize,
    /// Write the meter's bins to FILE (.csv or .jsonl).
    #[arg(long, value_name = "FILE")]
    meter: Option<PathBuf>,
    /// Meter bin width.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "500us", value_parser = values::duration)]
    meter_bin: Duration,
    /// Stop after this long instead of waiting for SIGINT/SIGTERM.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = values::duration)]
    duration: Option<Duration>,
    /// CPU scheduling of the emulator threads: realtime (SCHED_FIFO, falls back), nice, normal.
    #[arg(long, value_name = "POLICY", default_value = "realtime", value_parser = scheduling)]
    scheduling: Scheduling,
    /// Print the summary as one JSON object ("type": "emu_summary").
    #[arg(long)]
    json: bool,
}

fn scheduling(s: &str) -> Result<Scheduling, String> {
    match s {
        "realtime" => Ok(Scheduling::Realtime),
        "nice" => Ok(Scheduling::Nice),
        "normal" => Ok(Scheduling::Normal),
        other => Err(format!("unknown scheduling {other:?}; accepted forms: realtime, nice, normal")),
    }
}

/// The a->b (or b->a) value when given, else the one for both directions.
fn pick<T>(ab: bool, a_to_b: Option<T>, b_to_a: Option<T>, both: Option<T>) -> Option<T> {
    if ab {
        a_to_b.or(both)
    } else {
        b_to_a.or(both)
    }
}

/// One direction's link settings.
fn direction(a: &Args, ab: bool, seed: u64) -> LinkConfig {
    let mut l = LinkConfig { seed, overhead: a.overhead, max_frame: a.max_frame, ..LinkConfig::default() };
    if let Some(RateSetting(r)) = pick(ab, a.rate_ab, a.rate_ba, a.rate) {
        l.rate = r;
    }
    if let Some(d) = pick(ab, a.delay_ab, a.delay_ba, a.delay) {
        l.delay = d;
    }
    if let Some(j) = pick(ab, a.jitter_ab, a.jitter_ba, a.jitter) {
        l.jitter = j;
    }
    if let Some(b) = pick(ab, a.buffer_ab, a.buffer_ba, a.buffer) {
        l.buffer = b;
    }
    if let Some(s) = pick(ab, a.loss_ab, a.loss_ba, a.loss) {
        l.loss = s;
    }
    l
}

fn config(a: &Args) -> anyhow::Result<EmuConfig> {
    let mut cfg = EmuConfig::symmetric(&a.a, &a.b, direction(a, true, a.seed));
    cfg.b_to_a = direction(a, false, a.seed.wrapping_add(1));
    cfg.meter_bin = a.meter_bin;
    cfg.meter_out = a.meter.clone();
    cfg.scheduling = a.scheduling;
    cfg.validate().map_err(exit::usage)?;
    Ok(cfg)
}

/// Keeps the syscall error in the chain so privilege (3) and a missing
/// interface (2) get their exit codes.
fn start_error(e: EmuError) -> anyhow::Error {
    match e {
        EmuError::Open { iface, source } => {
            anyhow::Error::new(source).context(format!("emulator: cannot open a packet socket on {iface:?}"))
        }
        EmuError::Config(m) => exit::usage(m),
        other => anyhow::Error::new(other),
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<Verdict> {
    let cfg = config(&args)?;
    let duration = args.duration;
    // Subscribe before starting so a signal during start-up is not lost.
    let signals = tcpaccel_sys::signals::subscribe().context("installing SIGINT/SIGTERM handling")?;
    let emu = match &args.netns {
        Some(ns) => {
            let c = cfg.clone();
            tcpaccel_sys::netns::run_in(ns, move || Emulator::start(c))
                .with_context(|| format!("entering namespace {ns:?}"))?
        }
        None => Emulator::start(cfg.clone()),
    }
    .map_err(start_error)?;
    if !args.json {
        eprintln!(
            "tcpaccel emu: {} <-> {} running; Ctrl-C or SIGTERM stops it{}",
            cfg.a,
            cfg.b,
            duration.map_or(String::new(), |d| format!(
                " (or after {})",
                tcpaccel_core::units::format_duration(d)
            ))
        );
    }
    let start = Instant::now();
    let mut failed = false;
    loop {
        let left = match duration {
            Some(d) => match d.checked_sub(start.elapsed()) {
                Some(l) if !l.is_zero() => l,
                _ => break,
            },
            None => Duration::from_secs(3600),
        };
        match signals.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok(_) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if !emu.is_running() {
            failed = true;
            break;
        }
    }
    let summary = emu.stop();
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print!("{}", summary.to_text());
    }
    if failed {
        let why = [&summary.a_to_b.error, &summary.b_to_a.error]
            .into_iter()
            .flatten()
            .next()
            .cloned()
            .unwrap_or_else(|| "a thread ended".into());
        anyhow::bail!("emulator stopped: {why}");
    }
    Ok(Verdict::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: Args,
    }

    fn parse(extra: &[&str]) -> anyhow::Result<EmuConfig> {
        let mut v = vec!["t", "--a", "x0", "--b", "x1"];
        v.extend_from_slice(extra);
        config(&T::try_parse_from(v).expect("clap").a)
    }

    #[test]
    fn per_direction_overrides() {
        let c = parse(&[
            "--rate",
            "100mbit",
            "--rate-ba",
            "10mbit",
            "--delay",
            "20ms",
            "--loss",
            "0.1%",
            "--seed",
            "7",
        ])
        .unwrap();
        assert_eq!(c.a_to_b.rate, Some(tcpaccel_core::Rate::mbps(100)));
        assert_eq!(c.b_to_a.rate, Some(tcpaccel_core::Rate::mbps(10)));
        assert_eq!(c.b_to_a.delay, Duration::from_millis(20));
        assert_eq!(c.a_to_b.loss, LossSpec::Bernoulli { p: 0.001 });
        assert_eq!((c.a_to_b.seed, c.b_to_a.seed), (7, 8));
        let c = parse(&["--rate", "unlimited"]).unwrap();
        assert_eq!(c.a_to_b.rate, None);
    }

    #[test]
    fn bad_values_are_refused_by_clap_naming_flag_value_and_forms() {
        for (flag, bad, form) in [
            ("--rate", "fast", "bit/s"),
            ("--rate", "-5mbit", "negative"),
            ("--delay", "20", "ms"),
            ("--buffer", "lots", "100p"),
            ("--loss", "0.1", "bernoulli:"),
            ("--loss-ab", "ge:p=2,r=0.1", "ge:p="),
            ("--scheduling", "turbo", "realtime"),
        ] {
            let v = vec!["t", "--a", "x0", "--b", "x1", flag, bad];
            let e = T::try_parse_from(v).err().unwrap_or_else(|| panic!("{flag} {bad} accepted"));
            // clap's usage errors exit with 2, like exit::usage.
            assert_eq!(e.exit_code(), 2, "{flag} {bad}");
            let msg = e.to_string();
            assert!(msg.contains(flag) && msg.contains(bad) && msg.contains(form), "{flag} {bad}: {msg}");
        }
    }
}
