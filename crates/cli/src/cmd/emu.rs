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
use tcpaccel_core::units::{parse_duration, QueueLimit};
use tcpaccel_emu::config::parse_rate_setting;
use tcpaccel_emu::{EmuConfig, EmuError, Emulator, LinkConfig, Scheduling};

use crate::exit::{self, Verdict};

#[derive(clap::Args)]
#[command(after_help = "Loss SPEC forms: none | 0.1% | bernoulli:0.001 | ge:p=0.01,r=0.3[,h=0.5][,k=0]\n  \
    (Gilbert-Elliott: p = P(Good->Bad), r = P(Bad->Good), h = loss probability in Bad (default 1),\n  \
    k = loss probability in Good (default 0)).\n\
Per-direction flags (--rate-ab, --delay-ba, ...) override the flag for both directions.\n\
a->b is what arrives on --a and leaves on --b.")]
pub struct Args {
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
    #[arg(long, value_name = "RATE")]
    rate: Option<String>,
    #[arg(long, value_name = "RATE", help = "Rate a->b (overrides --rate)")]
    rate_ab: Option<String>,
    #[arg(long, value_name = "RATE", help = "Rate b->a (overrides --rate)")]
    rate_ba: Option<String>,
    /// One-way propagation delay, both directions (e.g. 50ms).
    #[arg(long, value_name = "DURATION")]
    delay: Option<String>,
    #[arg(long, value_name = "DURATION", help = "Delay a->b (overrides --delay)")]
    delay_ab: Option<String>,
    #[arg(long, value_name = "DURATION", help = "Delay b->a (overrides --delay)")]
    delay_ba: Option<String>,
    /// Extra delay, uniform in [0, jitter], never reordering.
    #[arg(long, value_name = "DURATION")]
    jitter: Option<String>,
    #[arg(long, value_name = "DURATION", help = "Jitter a->b (overrides --jitter)")]
    jitter_ab: Option<String>,
    #[arg(long, value_name = "DURATION", help = "Jitter b->a (overrides --jitter)")]
    jitter_ba: Option<String>,
    /// Drop-tail buffer: bytes (1MB, 64KiB) or packets (100p). Default 1MB.
    #[arg(long, value_name = "SIZE")]
    buffer: Option<String>,
    #[arg(long, value_name = "SIZE", help = "Buffer a->b (overrides --buffer)")]
    buffer_ab: Option<String>,
    #[arg(long, value_name = "SIZE", help = "Buffer b->a (overrides --buffer)")]
    buffer_ba: Option<String>,
    /// Random loss (forms below).
    #[arg(long, value_name = "SPEC")]
    loss: Option<String>,
    #[arg(long, value_name = "SPEC", help = "Loss a->b (overrides --loss)")]
    loss_ab: Option<String>,
    #[arg(long, value_name = "SPEC", help = "Loss b->a (overrides --loss)")]
    loss_ba: Option<String>,
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
    #[arg(long, value_name = "DURATION", default_value = "500us")]
    meter_bin: String,
    /// Stop after this long instead of waiting for SIGINT/SIGTERM.
    #[arg(long, value_name = "DURATION")]
    duration: Option<String>,
    /// CPU scheduling of the emulator threads: realtime (SCHED_FIFO, falls back), nice, normal.
    #[arg(long, value_name = "POLICY", default_value = "realtime")]
    scheduling: String,
    /// Print the summary as one JSON object ("type": "emu_summary").
    #[arg(long)]
    json: bool,
}

fn pick<'a>(specific: &'a Option<String>, both: &'a Option<String>) -> Option<&'a str> {
    specific.as_deref().or(both.as_deref())
}

/// One direction's flags, parsed ("parse, don't validate").
fn direction(
    a: &Args,
    rate: Option<&str>,
    delay: Option<&str>,
    jitter: Option<&str>,
    buffer: Option<&str>,
    loss: Option<&str>,
    seed: u64,
) -> anyhow::Result<LinkConfig> {
    let u = |e: tcpaccel_core::units::ParseError| exit::usage(e.to_string());
    let mut l = LinkConfig { seed, overhead: a.overhead, max_frame: a.max_frame, ..LinkConfig::default() };
    if let Some(r) = rate {
        l.rate = parse_rate_setting(r).map_err(u)?;
    }
    if let Some(d) = delay {
        l.delay = parse_duration(d).map_err(u)?;
    }
    if let Some(j) = jitter {
        l.jitter = parse_duration(j).map_err(u)?;
    }
    if let Some(b) = buffer {
        l.buffer = QueueLimit::parse(b).map_err(u)?;
    }
    if let Some(s) = loss {
        l.loss = LossSpec::parse(s).map_err(u)?;
    }
    Ok(l)
}

fn config(a: &Args) -> anyhow::Result<EmuConfig> {
    let ab = direction(
        a,
        pick(&a.rate_ab, &a.rate),
        pick(&a.delay_ab, &a.delay),
        pick(&a.jitter_ab, &a.jitter),
        pick(&a.buffer_ab, &a.buffer),
        pick(&a.loss_ab, &a.loss),
        a.seed,
    )?;
    let ba = direction(
        a,
        pick(&a.rate_ba, &a.rate),
        pick(&a.delay_ba, &a.delay),
        pick(&a.jitter_ba, &a.jitter),
        pick(&a.buffer_ba, &a.buffer),
        pick(&a.loss_ba, &a.loss),
        a.seed.wrapping_add(1),
    )?;
    let scheduling = match a.scheduling.as_str() {
        "realtime" => Scheduling::Realtime,
        "nice" => Scheduling::Nice,
        "normal" => Scheduling::Normal,
        other => {
            return Err(exit::usage(format!(
                "unknown scheduling {other:?}; accepted forms: realtime, nice, normal"
            )))
        }
    };
    let mut cfg = EmuConfig::symmetric(&a.a, &a.b, ab);
    cfg.b_to_a = ba;
    cfg.meter_bin = parse_duration(&a.meter_bin).map_err(|e| exit::usage(e.to_string()))?;
    cfg.meter_out = a.meter.clone();
    cfg.scheduling = scheduling;
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

pub fn run(args: Args) -> anyhow::Result<Verdict> {
    let cfg = config(&args)?;
    let duration =
        args.duration.as_deref().map(parse_duration).transpose().map_err(|e| exit::usage(e.to_string()))?;
    // Subscribe before starting so a signal during start-up is not lost.
    let signals = tcpaccel_net::signals::subscribe().context("installing SIGINT/SIGTERM handling")?;
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
    fn bad_values_are_usage_errors_naming_value_and_forms() {
        for (flag, bad, form) in [
            ("--rate", "fast", "bit/s"),
            ("--delay", "20", "ms"),
            ("--buffer", "lots", "100p"),
            ("--loss", "0.1", "bernoulli:"),
            ("--loss-ab", "ge:p=2,r=0.1", "ge:p="),
            ("--scheduling", "turbo", "realtime"),
        ] {
            let e = parse(&[flag, bad]).unwrap_err();
            let msg = format!("{e:#}");
            assert!(msg.contains(bad) && msg.contains(form), "{flag} {bad}: {msg}");
            assert!(matches!(e.downcast_ref::<exit::Fail>(), Some(exit::Fail::Usage(_))), "{msg}");
        }
    }
}
