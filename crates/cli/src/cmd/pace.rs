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
    /// Dynamic rules also keep a small bottleneck buffer from overflowing (docs/pacing-precision.md, "--hold").
    #[arg(long)]
    hold: bool,
}

/// `--precise` and `--precise-dev` of `pace run`, `run` and `send`: every
/// paced frame spaced (a few per GSO packet at high rates) by capping
/// `gso_max_segs` of the devices the traffic leaves by while the command
/// runs (`tcpaccel_pacer::precise`).
#[derive(clap::Args, Clone, Default)]
pub(crate) struct PreciseArgs {
    /// Space paced frames more finely: caps the outgoing device's GSO burst while this runs, for every socket on it (docs/pacing-precision.md, "--precise").
    #[arg(long)]
    pub(crate) precise: bool,
    /// With --precise: cap this device instead of those the routes to the destinations use (repeatable; needed when the destinations are not known, as with `run`).
    #[arg(long = "precise-dev", value_name = "DEV", requires = "precise")]
    pub(crate) precise_dev: Vec<String>,
}

impl PreciseArgs {
    /// Applies the cap for pacings `specs` (under `ceiling`) on the named
    /// devices or those routes to `dests` use; `None` without --precise or
    /// when nothing is paced. Says what it did on stderr as `who`.
    pub(crate) fn apply(
        &self,
        specs: &[PaceSpec],
        ceiling: Option<Rate>,
        dests: &[std::net::IpAddr],
        who: &str,
    ) -> anyhow::Result<Option<tcpaccel_pacer::Precise>> {
        if !self.precise {
            return Ok(None);
        }
        let Some(segs) = tcpaccel_pacer::precise::segs_for_specs(specs.iter().copied(), ceiling) else {
            eprintln!("{who}: --precise has nothing to do: no pacing is set");
            return Ok(None);
        };
        exit::require_root(&format!("{who} --precise (sets a device's gso_max_segs)"))?;
        let p = if self.precise_dev.is_empty() {
            if dests.is_empty() {
                return Err(exit::usage(format!(
                    "{who} --precise: the destinations are not known here; name the device(s) with --precise-dev DEV"
                )));
            }
            tcpaccel_pacer::Precise::for_destinations(dests, segs)
        } else {
            let idx = self
                .precise_dev
                .iter()
                .map(|d| tcpaccel_sys::link::ifindex(d))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| exit::usage(format!("--precise-dev: {e}")))?;
            tcpaccel_pacer::Precise::for_devices(&idx, segs)
        }
        .map_err(pacer_err)?;
        eprintln!("{who}: {}", p.describe());
        Ok(Some(p))
    }
}

/// The pacings of `cfg` and the addresses of its rules that name a network
/// (not `0.0.0.0/0` or `::/0`), for [`PreciseArgs::apply`].
pub(crate) fn precise_inputs(cfg: &PaceConfig) -> (Vec<PaceSpec>, Vec<std::net::IpAddr>) {
    let mut specs = vec![cfg.default.spec()];
    specs.extend(cfg.rules.iter().map(|r| r.pace.spec()));
    let dests = cfg
        .rules
        .iter()
        .filter(|r| r.dest.prefix > 0 && r.pace.spec() != PaceSpec::None)
        .map(|r| r.dest.addr)
        .collect();
    (specs, dests)
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
        /// Print the result as one JSON object (cgroup, its id, pins, configuration) instead of a sentence.
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
        #[command(flatten)]
        precise: PreciseArgs,
        /// Print tcpaccel's own lines (the cgroup used, warnings, what was released) as JSON objects on stderr; stdout stays the command's.
        #[arg(long)]
        json: bool,
        /// The program and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<OsString>,
    },
    /// Show attached cgroups, their rules and per-rule counters.
    Status {
        /// Print one JSON object per attachment instead of the table (rates in payload bits/s, in keys ending in _bps).
        #[arg(long)]
        json: bool,
        /// Instead of printing once, serve the same counters as Prometheus metrics on this
        /// address (PORT alone = 127.0.0.1:PORT) until SIGINT/SIGTERM.
        #[arg(long, value_name = "ADDR", value_parser = crate::cmd::values::metrics_addr)]
        metrics: Option<std::net::SocketAddr>,
    },
    /// Detach pacing and set the sockets it paced back to unlimited.
    Detach {
        /// The cgroup to detach from: its path in the cgroup2 mount, or relative to it, as `pace status` lists it.
        #[arg(long)]
        cgroup: Option<PathBuf>,
        /// Every tcpaccel pacing attachment on this host.
        #[arg(long, conflicts_with = "cgroup")]
        all: bool,
        /// How long to wait for the program to release sockets no file descriptor leads to (MPTCP subflows): each is released on its next ACK.
        #[arg(long, default_value = "1s", value_parser = crate::cmd::values::duration)]
        wait: Duration,
        /// Print one JSON object per detached cgroup (its path, id and the sockets released) instead of a sentence.
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
            if tcpaccel_sys::cgroup::hierarchy_is_private() {
                // Its pins would go into a bpffs of this mount namespace,
                // which vanishes (detaching the program) when it does.
                return Err(exit::usage(
                    "pace attach leaves pacing attached after it exits, which this mount namespace cannot \
                     hold (it hides the host's /sys, as `ip netns exec` and `tcpaccel net exec` do): run \
                     `tcpaccel pace attach` on the host (the pacer paces the cgroup's sockets in every \
                     network namespace), or use `pace run` here",
                ));
            }
            let att = tcpaccel_pacer::attach(&cg, &cfg).map_err(pacer_err)?;
            if json {
                let v = serde_json::json!({"type": "attached", "cgroup": cg.shown(), "cgroup_id": cg.id,
                    "pins": att.pins(), "config": cfg});
                println!("{v}");
            } else {
                println!("attached to {} (pins {})", cg.shown().display(), att.pins().display());
            }
            att.persist();
            Ok(Verdict::Ok)
        }
        Sub::Run { cgroup, rules, precise, json, command } => {
            let cfg = rules.config()?;
            check_available()?;
            let (specs, dests) = precise_inputs(&cfg);
            let ceiling = cfg.ceiling.map(Rate::bps);
            let capped = precise.apply(&specs, ceiling, &dests, "tcpaccel pace")?;
            let mut cmd = Command::new(&command[0]);
            cmd.args(&command[1..]);
            let say = Say { who: "tcpaccel pace", json };
            let status = run_paced(&cfg, cgroup.as_deref(), cmd, &format!("{:?}", command[0]), say)?;
            // exit() runs no destructors: the device's cap goes first.
            drop(capped);
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
            let ids =
                match (cgroup, all) {
                    (_, true) => {
                        exit::require_root("tcpaccel pace detach")?;
                        tcpaccel_pacer::pinned_ids()
                    }
                    (Some(path), false) => {
                        exit::require_root("tcpaccel pace detach")?;
                        vec![Cgroup::open(&path).map_err(pacer_err)?.id]
                    }
                    (None, false) => return Err(exit::usage(
                        "pace detach needs --cgroup PATH (one attachment) or --all (every tcpaccel pacing \
                         attachment on this host); `tcpaccel pace status` lists them",
                    )),
                };
            if ids.is_empty() && !json {
                println!("no tcpaccel pacing attached");
            }
            for id in ids {
                // The path before detaching (a cgroup may go once its program does).
                let path = Cgroup::by_id(id).map(|c| c.shown());
                let r = tcpaccel_pacer::detach_pinned(id, wait).map_err(pacer_err)?;
                print_released(id, path.as_deref(), &r, json);
            }
            Ok(Verdict::Ok)
        }
    }
}

fn print_released(id: u64, path: Option<&std::path::Path>, r: &Released, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::json!({"type": "detached", "cgroup": path, "cgroup_id": id, "released": r})
        );
    } else {
        let cg =
            path.map_or_else(|| format!("cgroup id {id} (no longer exists)"), |p| p.display().to_string());
        println!(
            "detached from {cg}: {} paced sockets open, {} released through a file descriptor, {} by the program on their next ACK (MPTCP subflows), {} still capped (idle without a file descriptor)",
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
            "  {:<28} {:<22} {:>8} {:>8} {:>7} {:>6} {:>16}  current caps (Mbit/s of payload)",
            "rule", "pace", "conns", "updates", "errors", "open", "held (caps sum)"
        );
        for r in &s.rules {
            let more = if r.rates.len() > 8 { format!(" +{}", r.rates.len() - 8) } else { String::new() };
            println!(
                "  {:<28} {:<22} {:>8} {:>8} {:>7} {:>6} {:>16}  {}{more}",
                r.dest,
                r.pace,
                r.stats.conns,
                r.stats.updates,
                r.stats.errors,
                r.open,
                held_column(&r.stats),
                caps_column(r)
            );
        }
    }
}

/// The held column (`--hold`): the rule's sockets past their probe and
/// their caps summed, Mbit/s of payload (`-` for a rule that holds none).
fn held_column(s: &tcpaccel_pacer::abi::RuleStats) -> String {
    if s.held == 0 && s.held_cap == 0 {
        return "-".to_string();
    }
    format!("{} ({:.1})", s.held, s.held_cap as f64 * 8.0 / 1e6)
}

/// The current-caps column: the caps of the sockets open now (Mbit/s of
/// payload), or, with none open, what the rule last set, so it is never blank.
fn caps_column(r: &tcpaccel_pacer::attach::RuleStatus) -> String {
    let mbit = |bytes_per_s: u64| format!("{:.1}", bytes_per_s as f64 * 8.0 / 1e6);
    if !r.rates.is_empty() {
        return r.rates.iter().take(8).map(|b| mbit(u64::from(*b))).collect::<Vec<_>>().join(" ");
    }
    match r.stats.last_rate {
        0 if r.pace == "none" => "- (not paced)".to_string(),
        0 => "- (no socket paced yet)".to_string(),
        // The program's "no cap" (~0U) after a release.
        l if l >= u64::from(u32::MAX) => "- (none open; last released)".to_string(),
        l => format!("- (none open; last set {})", mbit(l)),
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
/// Who speaks on stderr during [`run_paced`], and in which form.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Say {
    pub(crate) who: &'static str,
    pub(crate) json: bool,
}

impl Say {
    fn line(&self, kind: &str, text: &str, fields: serde_json::Value) {
        if self.json {
            let mut v = serde_json::json!({"type": kind, "message": text});
            if let (Some(o), serde_json::Value::Object(f)) = (v.as_object_mut(), fields) {
                o.extend(f);
            }
            eprintln!("{v}");
        } else if kind == "warning" {
            eprintln!("{}: warning: {text}", self.who);
        } else {
            eprintln!("{}: {text}", self.who);
        }
    }
}

/// True when every connection of the cgroup would be paced (and so counted).
fn cfg_paces(cfg: &PaceConfig) -> bool {
    use tcpaccel_pacer::RulePace;
    cfg.default != RulePace::None && cfg.rules.iter().all(|r| r.pace != RulePace::None)
}

/// How often [`run_paced`] samples what the paced sockets carry.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

pub(crate) fn run_paced(
    cfg: &PaceConfig,
    cgroup: Option<&std::path::Path>,
    mut cmd: Command,
    what: &str,
    say: Say,
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
    say.line(
        "running",
        &format!("running in cgroup {} (pins {})", cg.shown().display(), att.pins().display()),
        serde_json::json!({"cgroup": cg.shown(), "cgroup_id": cg.id, "pins": att.pins()}),
    );
    tcpaccel_sys::bpf::command_into_cgroup(&mut cmd, cg.procs().map_err(pacer_err)?);
    let mut child = cmd.spawn().with_context(|| format!("cannot run {what}"))?;
    let mut signalled: Option<Instant> = None;
    let mut traffic = tcpaccel_pacer::Traffic::default();
    let mut sampled = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().context("waiting for the command")? {
            break s;
        }
        if sampled.elapsed() >= SAMPLE_EVERY {
            sampled = Instant::now();
            if let Err(e) = att.sample_traffic(&mut traffic) {
                tracing::debug!("sampling the paced sockets: {e}");
            }
        }
        if stop.load(Ordering::Relaxed) && signalled.is_none() {
            signalled = Some(Instant::now());
        }
        if signalled.is_some_and(|t| t.elapsed() > Duration::from_secs(2)) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Pacing acts on what the program sends: say so when it did nothing.
    let conns = att.paced_conns().unwrap_or(0);
    if conns == 0 && cfg_paces(cfg) {
        say.line(
            "warning",
            "the program established no TCP connection in its cgroup: nothing was paced",
            serde_json::json!({"paced_connections": 0}),
        );
    } else if let Some(w) = traffic.download_warning() {
        let (sent, received) = traffic.totals();
        say.line("warning", &w, serde_json::json!({"sent_bytes": sent, "received_bytes": received}));
    }
    let r = att.detach().map_err(pacer_err)?;
    tracing::debug!(?r, "pace run: detached");
    if say.json {
        say.line("detached", "detached", serde_json::json!({"paced_connections": conns, "released": r}));
    }
    drop(temp);
    Ok(status)
}
