//! `tcpaccel send` and `tcpaccel recv`: the traffic tool. Flags become a
//! validated `tcpaccel_traffic` config here (values parsed only with
//! `core::units`); the transfer itself is `tcpaccel_traffic`.
//!
//! Output: text by default; `--json` prints JSON Lines on stdout, each with a
//! `type`: `interval` and `summary` for `send` (`burst` and
//! `burst_summary` with `--burst`); `listening`, `connection`
//! and `summary` for `recv`. Diagnostics go to stderr.
//!
//! Exit codes: 2 for a bad or missing value (`--to`, rates, sizes,
//! durations, `--burst` combined with options it does not take), 3 without the
//! privilege an option needs (`--netns`), 4 when the kernel lacks a feature
//! (an unknown `--cc`, MPTCP off), 5 for a network or peer failure, 1 when a
//! `--checksum` run completed with differing checksums, 130 when SIGINT or
//! SIGTERM ended a `send` early (after its summary). `recv` ends on
//! SIGINT/SIGTERM (or after `--once`) with its summary and exit code 0.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use tcpaccel_core::units::{format_duration, Bytes, Rate};
use tcpaccel_traffic::{
    report::human_bytes, run_send, spawn_recv, ConnReport, ConnStatus, Event, Pace, RecvConfig, RecvSummary,
    Report, SendConfig, SendSummary, Volume,
};

use crate::cmd::values;
use crate::exit::{self, Fail, Verdict};

#[derive(clap::Args)]
pub(crate) struct SendArgs {
    /// Receiver, IP:PORT or HOST:PORT (e.g. 10.0.0.2:5201, [fd00::2]:5201, h2:5201). A HOST
    /// of the tcpaccel network this runs in (`net exec`, `--netns`) is its first address
    /// in the topology file (IPv4 first); other names go to the system's resolver (IPv4 first).
    #[arg(long, required = true, value_parser = values::target)]
    to: Option<values::Target>,
    /// Send for this long, per stream (e.g. 10s, 500ms). Default 10s.
    #[arg(long, conflicts_with = "bytes", allow_hyphen_values = true, value_parser = values::duration)]
    duration: Option<Duration>,
    /// Send this many bytes in total, split evenly over the streams (e.g. 100MB, 1GiB);
    /// the time ends when the receiver has them all.
    #[arg(long, allow_hyphen_values = true, value_parser = values::bytes)]
    bytes: Option<Bytes>,
    /// Parallel TCP connections.
    #[arg(long, short = 'P', default_value_t = 1)]
    parallel: u16,
    /// Congestion control (e.g. cubic, reno, bbr); also used by the server in --reverse.
    #[arg(long)]
    cc: Option<String>,
    /// SO_SNDBUF request, set before connecting (e.g. 12.5MB; Linux doubles it).
    #[arg(long, value_parser = values::bytes)]
    sndbuf: Option<Bytes>,
    /// SO_RCVBUF request, set before connecting so the window scale follows it.
    #[arg(long, value_parser = values::bytes)]
    rcvbuf: Option<Bytes>,
    /// Use MPTCP sockets (IPPROTO_MPTCP).
    #[arg(long)]
    mptcp: bool,
    /// Local address to bind: IP or IP:PORT.
    #[arg(long, value_parser = values::bind_addr)]
    bind: Option<SocketAddr>,
    /// none | static:RATE (RATE on the bottleneck's wire, frames + 24 bytes; split over streams)
    /// | dynamic[:CEILING] (cwnd x mss / RTT, [PSPacer] eq. 1, by our TCP_INFO loop)
    /// | dynamic=loop[:CEILING] | dynamic=kernel[:CEILING] (Linux's own pacing; needs
    /// tcp_pacing_ss_ratio=100 and tcp_pacing_ca_ratio=100 in the namespace).
    #[arg(long, default_value = "none", allow_hyphen_values = true, value_parser = values::pace)]
    pace: Pace,
    #[command(flatten)]
    precise: crate::cmd::pace::PreciseArgs,
    /// Burst mode: send this many bytes every --every until --duration ends, one
    /// connection, and report each burst's completion time (e.g. 10MB).
    #[arg(long, conflicts_with = "bytes", value_parser = values::bytes)]
    burst: Option<Bytes>,
    /// Period between burst starts (with --burst; default 2s).
    #[arg(long, requires = "burst", value_parser = values::duration)]
    every: Option<Duration>,
    /// With --burst: a burst that starts after an idle period longer than the RTO
    /// is paced at the last measured delivery rate for one window ([HPC-TCP]).
    /// Keeping cwnd over idle needs net.ipv4.tcp_slow_start_after_idle=0 in the
    /// namespace (no per-socket equivalent exists).
    #[arg(long, requires = "burst")]
    resume_pacing: bool,
    /// Report interval (e.g. 1s, 100ms; at least 10ms), or "off".
    #[arg(long, default_value = "1s", value_parser = values::interval_or_off)]
    interval: values::Interval,
    /// JSON Lines output (types: interval, summary).
    #[arg(long)]
    json: bool,
    /// The receiver sends and we receive.
    #[arg(long)]
    reverse: bool,
    /// SHA-256 of the data on both ends, compared in the summary (exit 1 on mismatch).
    #[arg(long)]
    checksum: bool,
    /// Seed of the payload pattern (recorded in the summary).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run inside this network namespace (needs root).
    #[arg(long)]
    netns: Option<String>,
}

#[derive(clap::Args)]
pub(crate) struct RecvArgs {
    /// Address to listen on, IP:PORT.
    #[arg(long, default_value = "0.0.0.0:5201", value_parser = values::socket_addr)]
    listen: SocketAddr,
    /// JSON Lines output (types: listening, connection, summary).
    #[arg(long)]
    json: bool,
    /// SHA-256 of every connection's data, even when the sender does not ask.
    #[arg(long)]
    checksum: bool,
    /// Exit after the first complete sender run (all of its parallel streams).
    #[arg(long)]
    once: bool,
    /// Listen with MPTCP (plain TCP clients still connect).
    #[arg(long)]
    mptcp: bool,
    /// SO_SNDBUF request for accepted connections (e.g. 12.5MB; Linux doubles it).
    #[arg(long, value_parser = values::bytes)]
    sndbuf: Option<Bytes>,
    /// SO_RCVBUF request, set on the listener so accepted connections' window scale follows it.
    #[arg(long, value_parser = values::bytes)]
    rcvbuf: Option<Bytes>,
    /// Default congestion control of accepted connections.
    #[arg(long)]
    cc: Option<String>,
    /// Pacing when this receiver sends (`send --reverse`) and the sender set none:
    /// none | static:RATE (on-wire, split over the sender's streams) | dynamic=kernel[:CEILING]
    /// (Linux's own cwnd x mss / RTT pacing). A receiver runs no sampling loop, so a plain
    /// dynamic or dynamic=loop sets only its CEILING here.
    #[arg(long, default_value = "none", allow_hyphen_values = true, value_parser = values::pace)]
    pace: Pace,
    /// Seed of the payload pattern in reverse mode.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run inside this network namespace (needs root).
    #[arg(long)]
    netns: Option<String>,
}

/// A size flag's value, which must be above zero.
fn nonzero(flag: &str, b: Option<Bytes>) -> anyhow::Result<Option<u64>> {
    match b {
        Some(b) if b.get() == 0 => Err(exit::usage(format!("{flag} {b}: must be above zero"))),
        b => Ok(b.map(|b| b.get())),
    }
}

fn enter_netns(ns: &Option<String>, what: &str) -> anyhow::Result<()> {
    if let Some(ns) = ns {
        exit::require_root(what)?;
        tcpaccel_sys::netns::enter(ns).with_context(|| format!("entering network namespace {ns:?}"))?;
    }
    Ok(())
}

/// Library errors to the exit-code table: configuration → 2, the syscall
/// layer's own classification otherwise (privilege 3, feature 4).
fn lib_error(e: tcpaccel_traffic::Error, what: &str) -> anyhow::Error {
    match e {
        tcpaccel_traffic::Error::Config(m) => exit::usage(m),
        // The syscall error's text already carries its OS cause; keep the
        // exit-code class without printing the cause twice.
        tcpaccel_traffic::Error::Sys(s) => {
            let msg = format!("{what}: {s}");
            match s {
                tcpaccel_sys::Error::Privilege { .. } => anyhow::Error::new(Fail::Privilege(msg)),
                tcpaccel_sys::Error::Unsupported { .. } => anyhow::Error::new(Fail::Feature(msg)),
                tcpaccel_sys::Error::NoInterface { .. } | tcpaccel_sys::Error::NoNamespace { .. } => {
                    exit::usage(msg)
                }
                _ => anyhow::anyhow!(msg),
            }
        }
        other => anyhow::Error::new(other).context(what.to_string()),
    }
}

/// `--to`'s address: as given, or a host of the tcpaccel network this runs in
/// (the one `--netns` names, or the namespace we are in), or what the
/// system's resolver says. A name none of them knows is a usage error.
fn resolve_to(to: &values::Target, netns: Option<&str>) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    let (host, port) = match to {
        values::Target::Addr(a) => return Ok(*a),
        values::Target::Name { host, port } => (host, port),
    };
    let here = netns.map(str::to_string).or_else(tcpaccel_sys::netns::identify);
    let run = match here {
        Some(ns) => tcpaccel_net::state::run_of_namespace(&ns)
            .map_err(|e| anyhow::Error::new(e).context("reading the tcpaccel network records"))?,
        None => None,
    };
    if let Some(ip) = run.as_ref().and_then(|r| r.addr_of(host)) {
        return Ok(SocketAddr::new(ip, *port));
    }
    // IPv4 first, as for a topology's hosts (and so `localhost` is one address).
    let resolved = (host.as_str(), *port).to_socket_addrs().map(|a| {
        let all: Vec<SocketAddr> = a.collect();
        all.iter().find(|a| a.is_ipv4()).or(all.first()).copied()
    });
    match (resolved, run) {
        (Ok(Some(a)), _) => Ok(a),
        (r, run) => {
            let why = match r {
                Err(e) => e.to_string(),
                _ => "no address".into(),
            };
            let hosts = match &run {
                Some(r) => {
                    let names: Vec<&str> = r.nodes.iter().map(|n| n.name.as_str()).collect();
                    format!("not a host of run {} ({}), ", r.run_id, names.join(", "))
                }
                None => "not in a tcpaccel network, ".into(),
            };
            Err(exit::usage(format!(
                "--to {to}: {host:?} is {hosts}and the resolver does not know it ({why})"
            )))
        }
    }
}

fn send_config(args: &SendArgs) -> anyhow::Result<SendConfig> {
    let to = args.to.as_ref().ok_or_else(|| exit::usage("--to IP:PORT is required"))?;
    let to = resolve_to(to, args.netns.as_deref())?;
    let mut cfg = SendConfig::new(to);
    cfg.volume = match (args.duration, nonzero("--bytes", args.bytes)?) {
        (_, Some(b)) => Volume::Bytes(b),
        (Some(d), None) => {
            if d.is_zero() {
                return Err(exit::usage("--duration must be above zero"));
            }
            Volume::Duration(d)
        }
        (None, None) => Volume::Duration(Duration::from_secs(10)),
    };
    if args.parallel == 0 {
        return Err(exit::usage("--parallel must be at least 1"));
    }
    cfg.parallel = args.parallel;
    cfg.cc = args.cc.clone();
    cfg.sndbuf = nonzero("--sndbuf", args.sndbuf)?;
    cfg.rcvbuf = nonzero("--rcvbuf", args.rcvbuf)?;
    cfg.mptcp = args.mptcp;
    cfg.bind = args.bind;
    if let Some(b) = cfg.bind {
        if b.is_ipv4() != to.is_ipv4() {
            return Err(exit::usage(format!("--bind {b} and --to {to} are of different address families")));
        }
    }
    cfg.pace = args.pace;
    cfg.interval = args.interval.0;
    cfg.reverse = args.reverse;
    cfg.checksum = args.checksum;
    if cfg.reverse && cfg.checksum && matches!(cfg.volume, Volume::Duration(_)) {
        return Err(exit::usage("--checksum with --reverse needs --bytes"));
    }
    cfg.seed = args.seed;
    Ok(cfg)
}

/// The burst schedule of `--burst`/`--every`/`--resume-pacing`, if any.
fn bursts(args: &SendArgs) -> anyhow::Result<Option<tcpaccel_traffic::Bursts>> {
    let Some(bytes) = nonzero("--burst", args.burst)? else { return Ok(None) };
    let every = args.every.unwrap_or(Duration::from_secs(2));
    if every.is_zero() {
        return Err(exit::usage("--every must be above zero"));
    }
    if args.parallel != 1 || args.reverse || args.checksum || args.mptcp {
        return Err(exit::usage(
            "--burst runs one plain TCP upload: no --parallel, --reverse, --checksum or --mptcp",
        ));
    }
    Ok(Some(tcpaccel_traffic::Bursts { bytes, every, resume_pacing: args.resume_pacing }))
}

/// Reads a sysctl of this namespace (None if unreadable).
fn sysctl(key: &str) -> Option<String> {
    tcpaccel_sys::sysctl::read(key).ok()
}

/// Warnings about namespace sysctls the chosen pacing depends on.
fn sysctl_warnings(cfg: &SendConfig, resume: bool) {
    if let Pace::Dynamic { mode: tcpaccel_traffic::DynamicMode::Kernel, .. } = cfg.pace {
        for k in ["net.ipv4.tcp_pacing_ss_ratio", "net.ipv4.tcp_pacing_ca_ratio"] {
            if let Some(v) = sysctl(k).filter(|v| v != "100") {
                eprintln!(
                    "warning: --pace dynamic=kernel paces at {k}={v}% of cwnd x mss / srtt; these ratios are \
                     per-namespace sysctls (set both to 100 for [PSPacer]'s rule; no socket option can)"
                );
            }
        }
    }
    if resume && sysctl("net.ipv4.tcp_slow_start_after_idle").as_deref() == Some("1") {
        eprintln!(
            "warning: net.ipv4.tcp_slow_start_after_idle=1 in this namespace: the kernel restarts slow start \
             after each idle period, so --resume-pacing has no window to pace (set it to 0; there is no \
             per-socket equivalent)"
        );
    }
}

/// `capped`: `--precise`'s device cap, put back before this returns or exits.
fn send_bursts(
    mut cfg: SendConfig,
    b: tcpaccel_traffic::Bursts,
    json: bool,
    capped: Option<tcpaccel_pacer::Precise>,
) -> anyhow::Result<Verdict> {
    let to = cfg.to;
    if cfg.interval.is_some() && !json {
        eprintln!("note: --burst reports per burst, not per --interval");
    }
    cfg.interval = None;
    let s = tcpaccel_traffic::run_bursts(&cfg, b, |r| {
        if json {
            if let Ok(line) = serde_json::to_string(r) {
                println!("{line}");
            }
        } else {
            let c = r.completion_ms.map_or("incomplete".to_string(), |c| format!("{c:.1} ms"));
            let resume = r.resume.map_or(String::new(), |p| {
                format!(", resumed at {} for {}", p.rate, format_duration(p.hold))
            });
            println!(
                "burst {:>3} at {:>7.3} s: {} in {c} (cwnd {} after {} ms idle, {} retransmits{resume})",
                r.index,
                r.start_s,
                human_bytes(r.bytes),
                r.cwnd_at_start,
                r.idle_ms,
                r.retransmits
            );
        }
    })
    .map_err(|e| lib_error(e, &format!("sending bursts to {to}")))?;
    drop(capped);
    if json {
        println!("{}", serde_json::to_string(&s)?);
    } else {
        let mut c = s.completions_ms();
        c.sort_by(f64::total_cmp);
        let med = c.get(c.len() / 2).map_or("-".into(), |m| format!("{m:.1} ms"));
        println!(
            "summary: {} bursts, {} received, median completion {med}, retransmits {}",
            s.bursts.len(),
            human_bytes(s.bytes),
            s.retransmits
        );
    }
    if s.stopped_early {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        eprintln!("tcpaccel: send interrupted; the summary covers the shortened run");
        std::process::exit(130);
    }
    Ok(Verdict::Ok)
}

pub(crate) fn send(args: SendArgs) -> anyhow::Result<Verdict> {
    let mut cfg = send_config(&args)?;
    let bursts = bursts(&args)?;
    enter_netns(&args.netns, "tcpaccel send --netns")?;
    sysctl_warnings(&cfg, args.resume_pacing);
    // Held until send returns: the device's cap is put back then.
    let capped = args.precise.apply(&[cfg.pace.into()], None, &[cfg.to.ip()], "tcpaccel send")?;
    // The first SIGINT/SIGTERM ends the run early but in order (uploads
    // still collect their receipts), so the summary prints; exit 130.
    let signals = tcpaccel_sys::signals::subscribe().context("installing SIGINT/SIGTERM handling")?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    cfg.stop = Some(std::sync::Arc::clone(&stop));
    let flag = std::sync::Arc::clone(&stop);
    std::thread::Builder::new()
        .name("send-signals".into())
        .spawn(move || {
            if signals.recv().is_ok() {
                flag.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        })
        .context("starting the signal thread")?;
    if let Some(b) = bursts {
        return send_bursts(cfg, b, args.json, capped);
    }
    let to = cfg.to;
    if let (Pace::Static(r), false) = (cfg.pace, args.json) {
        eprintln!(
            "pacing: {r} on the wire in all, split over {} stream(s); goodput limit ~{} with 1500-byte Ethernet framing",
            cfg.parallel,
            tcpaccel_traffic::Framing::ETHERNET_1500_TS.goodput(r)
        );
    }
    let json = args.json;
    let summary =
        run_send(cfg, |r| print_report(r, json)).map_err(|e| lib_error(e, &format!("sending to {to}")))?;
    drop(capped);
    if json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_send_summary(&summary);
    }
    if summary.stopped_early {
        // 130 = interrupted (exit.rs table). exit.rs has no error kind for
        // it, so leave here, after the summary is out.
        use std::io::Write;
        let _ = std::io::stdout().flush();
        eprintln!("tcpaccel: send interrupted; the summary covers the shortened run");
        std::process::exit(130);
    }
    Ok(if summary.checksum_ok == Some(false) { Verdict::Negative } else { Verdict::Ok })
}

fn print_report(r: &Report, json: bool) {
    if json {
        match serde_json::to_string(r) {
            Ok(s) => println!("{s}"),
            Err(e) => tracing::warn!("cannot encode a report: {e}"),
        }
        return;
    }
    let Report::Interval(i) = r;
    for line in i.text_lines() {
        println!("{line}");
    }
}

/// A pacing cap in bytes/s of payload as text.
fn cap_text(cap: Option<u64>) -> String {
    match cap {
        Some(c) if c >= tcpaccel_traffic::pace::PACING_ON_UNCAPPED => "on, uncapped".into(),
        Some(c) => format!("{} payload", Rate(c.saturating_mul(8))),
        None => "none".into(),
    }
}

fn print_send_summary(s: &SendSummary) {
    println!("---");
    for st in &s.streams {
        // What the kernel held on the socket, whoever set it: a cap from
        // outside (the cgroup pacer, a preloaded shim) shows here too.
        let outside = st.applied_pacing_cap_bytes_per_sec.is_some() && st.pacing_cap_bytes_per_sec.is_none();
        println!(
            "[{:>3}] {:>10} in {:.3} s = {:>14}  retr {}  cc {}  pacing cap {}{}{}",
            st.stream,
            human_bytes(st.bytes),
            st.duration_s,
            Rate(st.goodput_bps).to_string(),
            st.retransmits.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
            st.cc.as_deref().unwrap_or("-"),
            cap_text(st.applied_pacing_cap_bytes_per_sec.or(st.pacing_cap_bytes_per_sec)),
            if outside { " (set outside send: cgroup pacer or shim)" } else { "" },
            st.sha256.as_ref().map(|h| format!("  sha256 {}", &h[..16])).unwrap_or_default(),
        );
    }
    let outside =
        s.pace == Pace::None && s.streams.iter().any(|st| st.applied_pacing_cap_bytes_per_sec.is_some());
    println!(
        "summary: {} {} {} in {:.3} s = {} goodput, retransmits {}, pace {}{}",
        match s.mode {
            tcpaccel_traffic::proto::Mode::Upload => "sent to",
            tcpaccel_traffic::proto::Mode::Reverse => "received from",
        },
        s.to,
        human_bytes(s.bytes),
        s.duration_s,
        Rate(s.goodput_bps),
        s.retransmits.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
        if outside {
            "none set by send, applied from outside (see pacing cap)".to_string()
        } else {
            s.pace.to_string()
        },
        match s.checksum_ok {
            Some(true) => ", checksums match",
            Some(false) => ", CHECKSUM MISMATCH",
            None => "",
        }
    );
}

fn recv_config(args: &RecvArgs) -> anyhow::Result<RecvConfig> {
    let mut cfg = RecvConfig::new(args.listen);
    cfg.checksum = args.checksum;
    cfg.once = args.once;
    cfg.mptcp = args.mptcp;
    cfg.sndbuf = nonzero("--sndbuf", args.sndbuf)?;
    cfg.rcvbuf = nonzero("--rcvbuf", args.rcvbuf)?;
    cfg.cc = args.cc.clone();
    cfg.pace = args.pace;
    cfg.seed = args.seed;
    Ok(cfg)
}

pub(crate) fn recv(args: RecvArgs) -> anyhow::Result<Verdict> {
    let cfg = recv_config(&args)?;
    enter_netns(&args.netns, "tcpaccel recv --netns")?;
    let listen = cfg.listen;
    // The first SIGINT/SIGTERM comes to us so the summary still prints.
    let signals = tcpaccel_sys::signals::subscribe().context("installing SIGINT/SIGTERM handling")?;
    let handle = spawn_recv(cfg).map_err(|e| lib_error(e, &format!("listening on {listen}")))?;
    let local = handle.local_addr();
    if args.json {
        println!(r#"{{"type":"listening","listen":{}}}"#, serde_json::to_string(&local.to_string())?);
    } else {
        println!("listening on {local}");
    }
    let mut printed = 0;
    loop {
        match handle.next_event(Duration::from_millis(200)) {
            Event::Conn(c) => {
                print_conn(&c, args.json);
                printed += 1;
            }
            Event::Closed => break,
            Event::Timeout => {
                if let Ok(sig) = signals.try_recv() {
                    tracing::info!(sig, "stopping on signal");
                    break;
                }
            }
        }
    }
    let summary = handle.stop();
    // Connections that ended while stopping (the summary lists all of
    // them in the order the events came).
    for c in summary.conns.iter().skip(printed) {
        print_conn(c, args.json);
    }
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_recv_summary(&summary);
    }
    Ok(Verdict::Ok)
}

fn print_conn(c: &ConnReport, json: bool) {
    if json {
        match serde_json::to_string(c) {
            Ok(s) => println!("{s}"),
            Err(e) => tracing::warn!("cannot encode a connection report: {e}"),
        }
        return;
    }
    let who = match (c.session, c.stream, c.streams) {
        (Some(s), Some(i), Some(n)) => format!("session {s:016x} stream {}/{n}", i + 1),
        _ => "-".into(),
    };
    match &c.status {
        ConnStatus::Ok => println!(
            "{} {who}: {} {} in {} = {}{}",
            c.peer,
            match c.mode {
                Some(tcpaccel_traffic::proto::Mode::Reverse) => "sent",
                _ => "received",
            },
            human_bytes(c.bytes),
            format_duration(Duration::from_secs_f64(c.duration_s.max(0.0))),
            Rate(c.goodput_bps),
            c.sha256.as_ref().map(|h| format!("  sha256 {h}")).unwrap_or_default()
        ),
        ConnStatus::Rejected(why) => println!("{} refused: {why}", c.peer),
        ConnStatus::Error(e) => println!("{} {who}: error after {}: {e}", c.peer, human_bytes(c.bytes)),
        ConnStatus::Empty => println!("{} closed without sending anything (a probe)", c.peer),
    }
}

fn print_recv_summary(s: &RecvSummary) {
    println!(
        "summary: {} connections ({} ok, {} refused, {} errors, {} empty), {} received or sent, {} complete sender run(s)",
        s.connections,
        s.ok,
        s.rejected,
        s.errors,
        s.empty,
        human_bytes(s.bytes),
        s.sessions_complete
    );
}
