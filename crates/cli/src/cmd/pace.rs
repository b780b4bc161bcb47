//! `tcpaccel pace`: in-kernel pacing for every program of a cgroup (a BPF
//! sock_ops program, crates/pacer).
//!
//! - `pace attach --cgroup PATH [--pace P] [--rule DEST=P]... [--ceiling R]`
//!   attaches and leaves it attached (pinned) until `pace detach`.
//! - `pace run [--cgroup PATH] [...] -- CMD ARGS` runs a command in a new
//!   cgroup (or PATH) with pacing attached for its lifetime; exits with the
//!   command's code. SIGINT/SIGTERM reach the command; the pacer detaches and
//!   the cgroup is removed when it ends.
//! - `pace status [--json]`: attached cgroups, rules, per-rule counters.
//! - `pace detach --cgroup PATH | --all [--wait D]`: detach, and set the
//!   sockets the program paced back to unlimited (through their file
//!   descriptors, and by the program itself on their next ACK for MPTCP
//!   subflows, waiting up to D).
//!
//! PACE is the one pacing grammar (`tcpaccel_core::pace_spec`) with its
//! on-wire meaning: `none`, `static:RATE`, `dynamic`, `dynamic:CEILING`;
//! clap parses each flag into its type, so a bad one exits 2 naming the flag.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use tcpaccel_core::pace_spec::PaceSpec;
use tcpaccel_core::units::Rate;
use tcpaccel_pacer::rules::DstRule;
use tcpaccel_pacer::{AttachStatus, Attachment, Cgroup, Class, PaceConfig, PacerError, Released, TempCgroup};

use crate::cmd::values;
use crate::exit::{self, Fail, Verdict};

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(clap::Args, Clone)]
pub(crate) struct RuleArgs {
    /// Pacing for connections no rule matches: none, static:RATE (on-wire), dynamic (cwnd·mss/RTT per ACK, [PSPacer] eq. 1), dynamic:CEILING.
    #[arg(long, default_value = "dynamic", value_parser = values::pace_own_dynamic)]
    pace: PaceSpec,
    /// A per-destination rule DEST=PACE, DEST being CIDR or CIDR:PORT ([V6CIDR]:PORT); repeatable. A rule with a port wins over one without.
    #[arg(long = "rule", value_parser = values::pace_rule)]
    rules: Vec<DstRule>,
    /// An on-wire ceiling over every rule (static rates above it are lowered).
    #[arg(long, value_parser = values::rate)]
    ceiling: Option<Rate>,
    /// Dynamic rules also guard small buffers against overshoot: slow start's first windows go unpaced and their ACK trains estimate the bottleneck, the rate then doubles per RTT up to half of it and grows by 1/16 above; while the RTT shows a queue it is held just below the delivery rate.
    #[arg(long)]
    hold: bool,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Attach pacing to an existing cgroup and leave it attached.
    Attach {
        /// The cgroup: a path in the cgroup2 mount, or relative to it.
        #[arg(long)]
        cgroup: PathBuf,
        #[command(flatten)]
        rules: RuleArgs,
        /// Print the attachment as one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run a command in a new cgroup (or --cgroup) with pacing attached while it runs.
    Run {
        /// Use this existing cgroup instead of creating one.
        #[arg(long)]
        cgroup: Option<PathBuf>,
        #[command(flatten)]
        rules: RuleArgs,
        /// The program and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<OsString>,
    },
    /// Show attached cgroups, their rules and per-rule counters.
    Status {
        /// One JSON object per attached cgroup instead of the table.
        #[arg(long)]
        json: bool,
        /// Instead of printing once, serve the same counters as Prometheus metrics on this
        /// address (PORT alone = 127.0.0.1:PORT) until SIGINT/SIGTERM.
        #[arg(long, value_name = "ADDR", value_parser = crate::cmd::values::metrics_addr)]
        metrics: Option<std::net::SocketAddr>,
    },
    /// Detach pacing and set the sockets it paced back to unlimited.
    Detach {
        /// The cgroup to release (as given to attach, or as `pace status` lists it); or --all.
        #[arg(long, required_unless_present = "all")]
        cgroup: Option<PathBuf>,
        /// Every tcpaccel pacing attachment on this host.
        #[arg(long, conflicts_with = "cgroup")]
        all: bool,
        /// How long to wait for the program to release sockets no file descriptor leads to (MPTCP subflows): each is released on its next ACK.
        #[arg(long, default_value = "1s", value_parser = crate::cmd::values::duration)]
        wait: Duration,
        /// One JSON object per released cgroup instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Maps a pacer error to the exit-code table.
pub(crate) fn pacer_err(e: impl Into<PacerError>) -> anyhow::Error {
    let e = e.into();
    let msg = e.to_string();
    match e.class() {
        Class::Usage => exit::usage(msg),
        Class::Privilege => anyhow::Error::new(Fail::Privilege(msg)),
        Class::Feature => anyhow::Error::new(Fail::Feature(msg)),
        Class::Runtime => anyhow::Error::new(e),
    }
}

impl RuleArgs {
    /// One pacing for every connection (`tcpaccel run --pace`).
    pub(crate) fn single(pace: PaceSpec) -> RuleArgs {
        RuleArgs { pace, rules: Vec::new(), ceiling: None, hold: false }
    }

    /// The configuration of the parsed flags; what only the whole can show
    /// (two rules for one destination, too many rules) is a usage error.
    pub(crate) fn config(&self) -> anyhow::Result<PaceConfig> {
        let cfg = PaceConfig::new(self.pace, self.rules.clone(), self.ceiling).map_err(pacer_err)?;
        Ok(PaceConfig { hold: self.hold, ..cfg })
    }
}

/// Root, cgroup2 and bpf(2): the exit code says which is missing.
pub(crate) fn check_available() -> anyhow::Result<()> {
    exit::require_root("tcpaccel pace (BPF programs, cgroups)")?;
    tcpaccel_pacer::available().map_err(pacer_err)
}

pub(crate) fn run(a: Args) -> anyhow::Result<Verdict> {
    match a.cmd {
        Sub::Attach { cgroup, rules, json } => {
            let cfg = rules.config()?;
            check_available()?;
            let cg = Cgroup::open(&cgroup).map_err(pacer_err)?;
            let att = tcpaccel_pacer::attach(&cg, &cfg).map_err(pacer_err)?;
            if json {
                let v = serde_json::json!({"type": "attached", "cgroup": cg.path, "cgroup_id": cg.id,
                    "pins": att.pins(), "config": cfg});
                println!("{v}");
            } else {
                println!("attached to {} (pins {})", cg.path.display(), att.pins().display());
            }
            att.persist();
            Ok(Verdict::Ok)
        }
        Sub::Run { cgroup, rules, command } => {
            let cfg = rules.config()?;
            check_available()?;
            let mut cmd = Command::new(&command[0]);
            cmd.args(&command[1..]);
            let status = run_paced(&cfg, cgroup.as_deref(), cmd, &format!("{:?}", command[0]))?;
            std::process::exit(exit_code(status));
        }
        Sub::Status { json, metrics: Some(at) } => {
            exit::require_root("tcpaccel pace status (reads pinned BPF maps)")?;
            let stop = exit::stop_on_signal()?;
            let mut reg = tcpaccel_metrics::Registry::default();
            tcpaccel_pacer::metrics::register(&mut reg);
            let ep = tcpaccel_metrics::Endpoint::serve(at, std::sync::Arc::new(reg))
                .context("starting the metrics endpoint")?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({"type": "metrics", "url": format!("http://{}/metrics", ep.addr())})
                );
            } else {
                eprintln!("pacer metrics on http://{}/metrics (SIGINT/SIGTERM stops)", ep.addr());
            }
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(Verdict::Ok)
        }
        Sub::Status { json, metrics: None } => {
            exit::require_root("tcpaccel pace status (reads pinned BPF maps)")?;
            let st = tcpaccel_pacer::status().map_err(pacer_err)?;
            print_status(&st, json);
            Ok(Verdict::Ok)
        }
        Sub::Detach { cgroup, all, wait, json } => {
            exit::require_root("tcpaccel pace detach")?;
            let ids = if all {
                tcpaccel_pacer::pinned_ids()
            } else {
                let path = cgroup.unwrap_or_default();
                vec![Cgroup::open(&path).map_err(pacer_err)?.id]
            };
            for id in ids {
                let r = tcpaccel_pacer::detach_pinned(id, wait).map_err(pacer_err)?;
                print_released(id, &r, json);
            }
            Ok(Verdict::Ok)
        }
    }
}

fn print_released(id: u64, r: &Released, json: bool) {
    if json {
        println!("{}", serde_json::json!({"type": "detached", "cgroup_id": id, "released": r}));
    } else {
        println!(
            "detached from cgroup id {id}: {} paced sockets open, {} released through a file descriptor, {} by the program on their next ACK (MPTCP subflows), {} still capped (idle without a file descriptor)",
            r.tracked, r.released, r.by_program, r.unreachable
        );
    }
}

fn print_status(st: &[AttachStatus], json: bool) {
    if json {
        for s in st {
            println!("{}", serde_json::json!({"type": "attachment", "attachment": s}));
        }
        return;
    }
    if st.is_empty() {
        println!("no tcpaccel pacing attached");
    }
    for s in st {
        let cg = s
            .cgroup
            .as_ref()
            .map_or_else(|| format!("(cgroup id {}, gone)", s.cgroup_id), |p| p.display().to_string());
        println!("{cg}  link {} prog {}  pins {}", s.link_id, s.prog_id, s.pins.display());
        println!(
            "  {:<28} {:<22} {:>8} {:>8} {:>7} {:>6}  current caps (Mbit/s of payload)",
            "rule", "pace", "conns", "updates", "errors", "open"
        );
        for r in &s.rules {
            let rates: Vec<String> =
                r.rates.iter().take(8).map(|b| format!("{:.1}", *b as f64 * 8.0 / 1e6)).collect();
            let more = if r.rates.len() > 8 { format!(" +{}", r.rates.len() - 8) } else { String::new() };
            println!(
                "  {:<28} {:<22} {:>8} {:>8} {:>7} {:>6}  {}{more}",
                r.dest,
                r.pace,
                r.stats.conns,
                r.stats.updates,
                r.stats.errors,
                r.open,
                rates.join(" ")
            );
        }
    }
}

/// `status` as an exit code: the code, or 128 + the signal.
pub(crate) fn exit_code(s: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
}

/// Runs `cmd` in `cgroup` (or a new one) with `cfg` attached, and detaches
/// and removes the new cgroup when it ends, also on SIGINT/SIGTERM (which
/// reach the command through the terminal; one sent to us alone is passed
/// on as SIGKILL after 2 s) and on a panic (the guards' Drop).
pub(crate) fn run_paced(
    cfg: &PaceConfig,
    cgroup: Option<&std::path::Path>,
    mut cmd: Command,
    what: &str,
) -> anyhow::Result<ExitStatus> {
    let stop = exit::stop_on_signal()?;
    let (temp, cg) = match cgroup {
        Some(p) => (None, Cgroup::open(p).map_err(pacer_err)?),
        None => {
            let t = TempCgroup::create(&format!("run-{}", std::process::id())).map_err(pacer_err)?;
            let cg = t.cgroup.clone();
            (Some(t), cg)
        }
    };
    let att: Attachment = tcpaccel_pacer::attach(&cg, cfg).map_err(pacer_err)?;
    eprintln!("tcpaccel pace: running in cgroup {} (pins {})", cg.path.display(), att.pins().display());
    tcpaccel_sys::bpf::command_into_cgroup(&mut cmd, cg.procs().map_err(pacer_err)?);
    let mut child = cmd.spawn().with_context(|| format!("cannot run {what}"))?;
    let mut signalled: Option<Instant> = None;
    let status = loop {
        if let Some(s) = child.try_wait().context("waiting for the command")? {
            break s;
        }
        if stop.load(Ordering::Relaxed) && signalled.is_none() {
            signalled = Some(Instant::now());
        }
        if signalled.is_some_and(|t| t.elapsed() > Duration::from_secs(2)) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let r = att.detach().map_err(pacer_err)?;
    tracing::debug!(?r, "pace run: detached");
    drop(temp);
    Ok(status)
}
