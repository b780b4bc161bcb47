//! `tcpaccel compare`: on the user's own path to a `tcpaccel recv` (running, or started over
//! ssh with `--remote`) or an `iperf3 -s`, measure
//! the bottleneck, try the variants in short interleaved transfers and
//! recommend one, with the command that applies it.
//!
//! The runner is `tcpaccel_tune::compare`, the rule `tcpaccel_core::compare`;
//! this file reads flags, prints, and turns the recommended variant into
//! commands. Exit 0 with a recommendation, 1 when none could be made, 130
//! when Ctrl-C cut it short (after printing what it had).

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use tcpaccel_core::compare::{Reason, Row, Variant};
use tcpaccel_core::units::{Bytes, Rate};
use tcpaccel_tune::compare::{self as runner, Event, Outcome, Plan};
use tcpaccel_tune::facts::PathSpec;
use tcpaccel_tune::remote::{RemoteRecv, SshTarget};

use crate::cmd::values;
use crate::exit::{self, Fail, Verdict};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("receiver").required(true).multiple(false).args(["target", "iperf3", "remote"])))]
pub(crate) struct Args {
    /// HOST:PORT of a `tcpaccel recv` on the far end of the path.
    #[arg(long)]
    target: Option<String>,
    /// HOST[:PORT] of an `iperf3 -s` (port 5201 if omitted) on the far end:
    /// spoken to through iperf3's control protocol, with our socket options on its data connection.
    #[arg(long)]
    iperf3: Option<String>,
    /// ssh://[USER@]HOST[:PORT]: start `tcpaccel recv` on HOST over the system's ssh client
    /// (non-interactive: keys or an agent, never a password prompt) and stop it afterwards.
    #[arg(long)]
    remote: Option<String>,
    /// With --remote: the path of tcpaccel on the remote host.
    #[arg(long, default_value = "tcpaccel", requires = "remote")]
    remote_tcpaccel: String,
    /// With --remote: the port the remote receiver listens on (0: any free port).
    #[arg(long, default_value_t = 5201, requires = "remote")]
    remote_port: u16,
    /// With --remote: an ssh option passed as `-o OPTION` (repeatable), e.g. IdentityFile=~/.ssh/lab.
    #[arg(long = "ssh-option", requires = "remote")]
    ssh_options: Vec<String>,
    /// Variants to try, comma-separated: unpaced, buffer-fix, bbr, static-pacing, dynamic-hold (the cgroup pacer's
    /// hold: needs root; left out with the reason otherwise).
    #[arg(long, value_delimiter = ',', value_parser = variant, default_value = "unpaced,buffer-fix,bbr,static-pacing,dynamic-hold")]
    variants: Vec<Variant>,
    /// Transfers of each variant (interleaved).
    #[arg(long, default_value_t = 2)]
    repeats: u32,
    /// Length of the measuring transfer.
    #[arg(long, default_value = "2s", value_parser = values::duration)]
    probe: Duration,
    /// Length of each variant's transfer (default: the time limit shared out).
    #[arg(long, value_parser = values::duration)]
    trial: Option<Duration>,
    /// Total time limit: no transfer starts that would end after it.
    #[arg(long, default_value = "30s", value_parser = values::duration)]
    max_time: Duration,
    /// Total byte limit: no transfer starts that would send past it (at the estimated rate).
    #[arg(long, default_value = "2GB", value_parser = values::bytes)]
    max_bytes: Bytes,
    /// Congestion control of every variant but bbr, set on the test socket (default: the host's), e.g. cubic on a
    /// host whose default is bbr; the probe runs BBR where the host has it, else this.
    #[arg(long)]
    cc: Option<String>,
    /// Static pacing's on-wire rate as a fraction of the estimated bottleneck.
    #[arg(long, default_value_t = 0.95)]
    pace_fraction: f64,
    /// JSON Lines on stdout (path / trial / skipped / row / recommendation / summary).
    #[arg(long)]
    json: bool,
    /// Also write an HTML page with the table and plots to this file.
    #[arg(long)]
    html: Option<std::path::PathBuf>,
}

fn variant(s: &str) -> Result<Variant, String> {
    Variant::parse(s).ok_or_else(|| {
        format!("unknown variant {s:?}: expected one of {}", Variant::ALL.map(Variant::name).join(", "))
    })
}

fn resolve(flag: &str, t: &str) -> anyhow::Result<SocketAddr> {
    match t.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(a)) => Ok(a),
        Ok(None) => Err(exit::usage(format!("{flag} {t:?}: resolves to no address"))),
        Err(e) => Err(exit::usage(format!("{flag} {t:?}: expected HOST:PORT ({e})"))),
    }
}

/// `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address, iperf3's port by default.
fn with_default_port(t: &str, port: u16) -> String {
    let bare_v6 = t.parse::<std::net::Ipv6Addr>().is_ok();
    if bare_v6 {
        format!("[{t}]:{port}")
    } else if t.contains(':') {
        t.to_string()
    } else {
        format!("{t}:{port}")
    }
}

fn mbit(bps: f64) -> String {
    format!("{:.1}", bps / 1e6)
}

/// The commands that apply `v` for the path to `to`: host-wide and for one program.
fn commands(v: Variant, out: &Outcome) -> Vec<String> {
    let wire = Rate(out.path.bottleneck_wire_bps);
    let rtt = Duration::from_micros(out.path.min_rtt_us);
    let dst = match out.to {
        SocketAddr::V4(a) => format!("{}/32", a.ip()),
        SocketAddr::V6(a) => format!("[{}/128]", a.ip()),
    };
    let settings = out.settings.iter().find(|(s, _)| *s == v).map(|(_, s)| s);
    match v {
        Variant::Unpaced => vec!["# nothing to change: the host's defaults did as well as any variant".into()],
        Variant::Bbr => vec![
            "sysctl -w net.ipv4.tcp_congestion_control=bbr   # host-wide".into(),
            "tcpaccel run --cc bbr -- PROGRAM   # one program".into(),
        ],
        Variant::StaticPacing => {
            let w = settings.and_then(|s| s.pace_wire_bps).unwrap_or(wire.bits_per_sec());
            let rate = format!("static:{}mbit", w / 1_000_000);
            vec![
                format!("tcpaccel pace attach --cgroup /sys/fs/cgroup --pace none --rule {dst}={rate}   # every program, to this destination"),
                format!("tcpaccel run --pace {rate} -- PROGRAM   # one program"),
            ]
        }
        Variant::DynamicHold => vec![
            format!("tcpaccel pace attach --cgroup /sys/fs/cgroup --pace none --rule {dst}=dynamic --hold   # every program, to this destination"),
            "tcpaccel pace run --pace dynamic --hold -- PROGRAM   # one program".into(),
        ],
        Variant::BufferFix => {
            let path = PathSpec {
                rate: Some(wire),
                rtt: Some(rtt),
                rtt_source: Some("compare".into()),
                egress_dev: None,
            };
            let probe = tcpaccel_tune::collect::Probe {
                target: None,
                handshakes: 1,
                timeout: Duration::from_secs(1),
                bandwidth: None,
            };
            let mut cmds: Vec<String> = match tcpaccel_tune::examine(None, path, &probe) {
                Ok((_, findings)) => findings
                    .iter()
                    .filter(|f| f.id.contains("mem"))
                    .flat_map(|f| f.fixes.iter().map(|x| x.command(None)))
                    .collect(),
                Err(e) => vec![format!("# the doctor could not read this host's settings: {e}")],
            };
            if cmds.is_empty() {
                cmds.push("# this host's buffer maxima already cover 2× BDP; the receiver's tcp_rmem may not".into());
            }
            cmds.push("# (tcp_rmem on the receiving host too: its receive buffer bounds the window)".into());
            if let Some(b) = settings.and_then(|s| s.sndbuf) {
                cmds.push(format!("tcpaccel run --sndbuf {b} -- PROGRAM   # one program"));
            }
            cmds
        }
    }
}

fn reason_text(r: &Reason) -> String {
    match r {
        Reason::Fastest { over: Some(v), by } => {
            format!("the fastest, {:.1}% above the next ({}) by more than noise", by * 100.0, v.name())
        }
        Reason::Fastest { over: None, .. } => "the only variant measured".into(),
        Reason::SimplestWithinNoise { tied } => format!(
            "the simplest of those within noise of the fastest ({})",
            tied.iter().map(|v| v.name()).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn row_text(r: &Row) -> String {
    format!(
        "{:<14} {:>9} {:>15} {:>9} {:>8} {:>9} {:>8}",
        r.variant.name(),
        mbit(r.goodput_bps.median),
        format!("{}–{}", mbit(r.goodput_bps.min), mbit(r.goodput_bps.max)),
        r.steady_bps.map_or("-".into(), mbit),
        format!("{:.0}", r.retransmits),
        r.rtt_inflation.map_or("-".into(), |x| format!("{x:.2}")),
        r.t95_s.map_or("never".into(), |x| format!("{x:.2}s")),
    )
}

pub(crate) fn run(a: Args) -> anyhow::Result<Verdict> {
    if !(a.pace_fraction > 0.0 && a.pace_fraction <= 1.5) {
        return Err(exit::usage(format!(
            "--pace-fraction {}: expected a number in (0, 1.5]",
            a.pace_fraction
        )));
    }
    if a.repeats == 0 {
        return Err(exit::usage("--repeats must be at least 1"));
    }
    if a.variants.is_empty() {
        return Err(exit::usage("--variants: name at least one"));
    }
    // Kept alive for the whole comparison; dropping it stops the remote receiver.
    let mut remote = None;
    let (to, receiver) = match (&a.target, &a.iperf3, &a.remote) {
        (Some(t), _, _) => (resolve("--target", t)?, runner::Receiver::Tcpaccel),
        (None, Some(t), _) => (resolve("--iperf3", &with_default_port(t, 5201))?, runner::Receiver::Iperf3),
        (None, None, Some(url)) => {
            let ssh = SshTarget::parse(url).map_err(|e| exit::usage(e.to_string()))?;
            let args = ssh
                .command(&a.remote_tcpaccel, a.remote_port, &a.ssh_options)
                .map_err(|e| exit::usage(e.to_string()))?;
            let host = if ssh.host.contains(':') { format!("[{}]", ssh.host) } else { ssh.host.clone() };
            let r = RemoteRecv::start(&args, Duration::from_secs(20))?;
            let to = resolve("--remote", &format!("{host}:{}", r.port))?;
            eprintln!(
                "tcpaccel: started `{} recv` on {} over ssh, listening on port {}",
                a.remote_tcpaccel, ssh.host, r.port
            );
            remote = Some(r);
            (to, runner::Receiver::Tcpaccel)
        }
        (None, None, None) => {
            return Err(exit::usage(
                "give --target HOST:PORT, --iperf3 HOST[:PORT] or --remote ssh://[USER@]HOST",
            ))
        }
    };
    let stop = exit::stop_on_signal()?;
    let plan = Plan {
        receiver,
        variants: a.variants.clone(),
        repeats: a.repeats,
        probe: a.probe,
        trial: a.trial,
        max_time: a.max_time,
        max_bytes: a.max_bytes.get(),
        pace_fraction: a.pace_fraction,
        stop: stop.clone(),
        cc: a.cc.clone(),
        ..Plan::new(to)
    };
    let json = a.json;
    let on_event = |e: Event| match e {
        Event::Path(p) => {
            if json {
                println!("{}", serde_json::json!({ "type": "path", "to": to, "path": p }));
            } else {
                println!(
                    "path to {to}: min RTT {:.2} ms (handshakes {}); bottleneck {} Mbit/s on the wire ({} Mbit/s of payload; {} rounds of a {:?} unpaced transfer with {}, {} Mbit/s, {} retransmissions)",
                    p.min_rtt_us as f64 / 1e3,
                    p.handshake_rtt_us.map_or("not tried".into(), |h| format!("{:.2} ms", h as f64 / 1e3)),
                    mbit(p.bottleneck_wire_bps as f64),
                    mbit(p.bottleneck_payload_bps as f64),
                    p.rounds,
                    a.probe,
                    p.probe_cc.as_deref().unwrap_or("the host's congestion control"),
                    mbit(p.probe_goodput_bps as f64),
                    p.probe_retransmits.map_or("?".into(), |r| r.to_string()),
                );
                if let Some(s) = p.probe_receiver_limited_s.filter(|&s| s > 0.1 * a.probe.as_secs_f64()) {
                    eprintln!("tcpaccel: warning: the receiver's window limited the probe for {s:.2} s of {:?}: the estimate is what this receiver takes (raise its tcp_rmem, or start `tcpaccel recv --rcvbuf`), not necessarily the bottleneck", a.probe);
                }
                if p.probe_sndbuf.is_none() {
                    eprintln!("tcpaccel: warning: the probe ran with this host's send buffers (forcing a larger one needs CAP_NET_ADMIN); on a long path the estimate may be their window, not the bottleneck");
                }
            }
        }
        Event::Trial(t) => {
            if json {
                println!("{}", serde_json::json!({ "type": "trial", "record": t }));
            } else {
                eprintln!(
                    "  {} #{}: {} Mbit/s, {} retransmissions{}",
                    t.trial.variant.name(),
                    t.repeat + 1,
                    mbit(t.trial.goodput.bits_per_sec() as f64),
                    t.trial.retransmits,
                    if t.stopped_early { " (cut short)" } else { "" }
                );
            }
        }
        Event::Skipped(s) => {
            if json {
                println!("{}", serde_json::json!({ "type": "skipped", "variant": s.variant, "why": s.why }));
            } else {
                eprintln!("tcpaccel: {} left out: {}", s.variant.name(), s.why);
            }
        }
    };
    let out = runner::run(&plan, on_event).map_err(|e| match e {
        runner::CompareError::Budget(m) => exit::usage(m),
        e => anyhow::Error::new(e),
    });
    if let Some(r) = remote.take() {
        r.stop();
    }
    let out = out?;
    if let Some(why) = &out.metrics_not_cleared {
        eprintln!("tcpaccel: warning: the kernel's cached TCP metrics for {to} were not cleared between transfers ({why}): a transfer may start from the ssthresh and cwnd the previous one left, unless net.ipv4.tcp_no_metrics_save=1");
    }
    let cmds = out.recommendation.as_ref().map(|r| commands(r.variant, &out)).unwrap_or_default();
    if let Some(path) = &a.html {
        let reason = out.recommendation.as_ref().map(|r| reason_text(&r.reason)).unwrap_or_default();
        std::fs::write(path, runner::html(&out, &reason, &cmds))
            .map_err(|e| anyhow::Error::new(e).context(format!("writing {}", path.display())))?;
    }
    if json {
        for r in &out.rows {
            println!("{}", serde_json::json!({ "type": "row", "row": r }));
        }
        if let Some(r) = &out.recommendation {
            println!(
                "{}",
                serde_json::json!({ "type": "recommendation", "recommendation": r, "reason_text": reason_text(&r.reason), "commands": cmds })
            );
        }
        println!(
            "{}",
            serde_json::json!({ "type": "summary", "to": to, "elapsed_s": out.elapsed_s, "bytes_sent": out.bytes_sent, "cut_short": out.cut_short, "transfers": out.trials.len(), "metrics_cleared": out.metrics_cleared, "metrics_not_cleared": out.metrics_not_cleared })
        );
    } else {
        println!();
        println!(
            "{:<14} {:>9} {:>15} {:>9} {:>8} {:>9} {:>8}",
            "variant", "Mbit/s", "min–max", "steady", "retrans", "RTT×", "t95"
        );
        let order: Vec<&Row> = match &out.recommendation {
            Some(r) => r.ranking.iter().filter_map(|v| out.rows.iter().find(|x| x.variant == *v)).collect(),
            None => out.rows.iter().collect(),
        };
        for r in order {
            println!("{}", row_text(r));
        }
        println!(
            "(medians of {} repeat(s) of {:.1} s; steady = goodput over each transfer's second half; RTT× = median srtt ÷ min RTT; t95 = first 100 ms window at 95% of the bottleneck, or of the pacing rate)",
            a.repeats,
            out.trials.first().map_or(0.0, |t| t.duration_s)
        );
        if let Some(r) = &out.recommendation {
            println!();
            println!(
                "recommended: {} — {}{}{}",
                r.variant.name(),
                reason_text(&r.reason),
                r.gain_vs_unpaced
                    .map_or(String::new(), |g| format!("; {:+.1}% goodput vs unpaced", g * 100.0)),
                r.steady_gain_vs_unpaced.map_or(String::new(), |g| format!(" ({:+.1}% steady)", g * 100.0))
            );
            for c in &cmds {
                println!("  {c}");
            }
        }
        if let Some(c) = &out.cut_short {
            println!("cut short: {c}");
        }
        println!("{} transfers, {} sent, {:.1} s", out.trials.len(), Bytes(out.bytes_sent), out.elapsed_s);
    }
    if stop.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(anyhow::Error::new(Fail::Interrupted));
    }
    Ok(if out.recommendation.is_some() { Verdict::Ok } else { Verdict::Negative })
}
