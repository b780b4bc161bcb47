//! `tcpaccel relay`: the split-TCP relay daemon (SOCKS5, chainable, or fixed
//! forwarding), and `tcpaccel relay plan`, which places relays on a path
//! ([SplitTCP]). Flags and the TOML file become one validated config here; the
//! relay itself lives in `tcpaccel-relay`, the planner in `tcpaccel_core::split`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use tcpaccel_core::split::{self, PathModel, PlanParams};
use tcpaccel_core::units::{format_duration, parse_duration, Bytes, Rate};
use tcpaccel_relay::acl::{Action, Rule};
use tcpaccel_relay::config::{Credentials, Forward, Hop};
use tcpaccel_relay::{Config, Settings};

use crate::cmd::values;
use crate::exit::{self, Verdict};

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Choose relays and their order to equalise segment RTTs, and predict throughput ([SplitTCP] eq. 2-6).
    Plan(PlanArgs),
}

/// Serve SOCKS5 (RFC 1928/1929) and/or fixed forwards. Counters are printed as
/// JSON on stdout on SIGUSR1 and at exit (SIGINT/SIGTERM); SIGHUP re-reads the
/// file and flags (access rules, users, next hops, tuning, timeouts) for new
/// connections, leaving established ones alone. Every flag but --config is
/// also a key of the --config file (the flag's name with `_` for `-`).
#[derive(clap::Args)]
struct ServeArgs {
    /// SOCKS5 listen address [default: 127.0.0.1:1080, unless only --forward is given].
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<SocketAddr>,
    /// Next SOCKS5 hop, repeatable for a chain negotiated from here: socks5://[user:pass@]HOST:PORT.
    #[arg(long, value_name = "URL")]
    next: Vec<Hop>,
    /// Fixed forward without SOCKS, repeatable (goes through --next hops if any).
    #[arg(long, value_name = "LISTEN=TARGET")]
    forward: Vec<Forward>,
    /// Require RFC 1929 username/password; repeatable.
    #[arg(long, value_name = "USER:PASS")]
    auth: Vec<Credentials>,
    /// File of USER:PASS lines.
    #[arg(long, value_name = "FILE")]
    auth_file: Option<PathBuf>,
    /// Allow destinations CIDR[:PORT[-PORT]]; --allow and --deny apply in command-line order, first
    /// match wins; any allow makes the default deny.
    #[arg(long, value_name = "CIDR[:PORTS]", value_parser = allow_rule)]
    allow: Vec<Rule>,
    /// Deny destinations CIDR[:PORT[-PORT]].
    #[arg(long, value_name = "CIDR[:PORTS]", value_parser = deny_rule)]
    deny: Vec<Rule>,
    /// Congestion control for upstream sockets (e.g. cubic, bbr).
    #[arg(long)]
    cc: Option<String>,
    /// Pacing of upstream sockets: none | static:RATE (RATE on the wire, as every --pace;
    /// a fixed SO_MAX_PACING_RATE per socket, so no dynamic), e.g. static:500mbit.
    #[arg(long, value_name = "PACE", value_parser = values::fixed_pace)]
    pace: Option<values::FixedPace>,
    /// SO_SNDBUF for upstream sockets (disables send autotuning).
    #[arg(long, value_name = "BYTES", value_parser = values::bytes)]
    sndbuf: Option<Bytes>,
    /// SO_RCVBUF for upstream sockets, set before connect (disables receive autotuning).
    #[arg(long, value_name = "BYTES", value_parser = values::bytes)]
    rcvbuf: Option<Bytes>,
    /// TCP_NOTSENT_LOWAT for upstream sockets.
    #[arg(long, value_name = "BYTES", value_parser = values::bytes)]
    notsent_lowat: Option<Bytes>,
    /// Close a connection after this long without traffic in either direction [default: 5m].
    #[arg(long, value_name = "DURATION", value_parser = values::duration)]
    idle_timeout: Option<Duration>,
    /// Limit for the client's whole SOCKS negotiation [default: 5s].
    #[arg(long, value_name = "DURATION", value_parser = values::duration)]
    handshake_timeout: Option<Duration>,
    /// Close a SOCKS client that sends nothing for this long after it connects
    /// (capped at --handshake-timeout) [default: 2s].
    #[arg(long, value_name = "DURATION", value_parser = values::duration)]
    first_byte_timeout: Option<Duration>,
    /// Limit for connecting upstream, through the whole chain [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = values::duration)]
    connect_timeout: Option<Duration>,
    /// Connections held at once, in the SOCKS handshake or relaying; more wait
    /// in the listen backlog (see --backlog) [default: 1024].
    #[arg(long, value_name = "N")]
    max_conns: Option<usize>,
    /// Of --max-conns, at most N in the SOCKS handshake. A new client is always
    /// let in: when N are handshaking, a handshake that has made the least
    /// progress is closed (of the source with the most, then the oldest; one
    /// younger than --handshake-grace counts as greeted), so idle or slow
    /// handshakes cannot starve others [default: max-conns/4, at most 256].
    #[arg(long, value_name = "N")]
    max_handshakes: Option<usize>,
    /// At most N handshakes from one source (IPv4 address or IPv6 /64): over N,
    /// a new one from that source closes its least advanced once that is 1 s old
    /// (younger ones are a burst) [default: max-handshakes/4, at least 8 or all of max-handshakes].
    #[arg(long, value_name = "N")]
    per_source_handshakes: Option<usize>,
    /// For this long after it connects, a silent SOCKS client counts as having
    /// sent its greeting (it may be in flight) when a newcomer displaces a
    /// handshake; set it to the clients' round trip [default: 200ms].
    #[arg(long, value_name = "DURATION", value_parser = values::duration)]
    handshake_grace: Option<Duration>,
    /// listen(2) backlog, where clients wait while --max-conns are held; the
    /// kernel caps it at net.core.somaxconn [default: the system's maximum].
    #[arg(long, value_name = "N")]
    backlog: Option<u32>,
    /// Copy through user space instead of splice(2).
    #[arg(long)]
    copy: bool,
    /// Pipe capacity per direction for splice [default: 256KiB].
    #[arg(long, value_name = "BYTES", value_parser = values::bytes)]
    pipe_size: Option<Bytes>,
    /// Buffer per direction for the user-space copy (--copy, or when no pipe can be made) [default: 256KiB].
    #[arg(long, value_name = "BYTES", value_parser = values::bytes)]
    buffer_size: Option<Bytes>,
    /// Warm connections kept open (connected and greeted) to the first --next hop, each used by
    /// one client only; 0 disables [default: 2, at most 32].
    #[arg(long, value_name = "N")]
    pool_size: Option<usize>,
    /// Close a warm connection unused for this long (and open a fresh one while clients keep
    /// coming); keep it below the next hop's handshake timeout (5s for tcpaccel relays)
    /// [default: 3s].
    #[arg(long, value_name = "DURATION", value_parser = values::duration)]
    pool_idle: Option<Duration>,
    /// Answer CONNECT with success before the chain is up, when every --next hop is
    /// tcpaccel+socks5:// and a warm connection is at hand; saves the client a round trip of
    /// the whole path, but a chain that then fails resets the client's connection instead of
    /// answering its SOCKS error code (logged and counted). Off by default.
    #[arg(long)]
    early_reply: bool,
    /// TOML file with the same settings under the flags' names (flags given here override it).
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Per-connection records as one JSON object per line on stderr, instead of log lines
    /// (under a flood 20 at once, then 30 a minute; the count of the rest in one
    /// relay_records_suppressed line at most every 10 s).
    #[arg(long)]
    json_logs: bool,
    /// Serve Prometheus metrics on this address (PORT alone = 127.0.0.1:PORT): connections,
    /// bytes per direction, splice vs copy, errors by kind. Off by default.
    #[arg(long, value_name = "ADDR", value_parser = crate::cmd::values::metrics_addr)]
    metrics: Option<SocketAddr>,
}

fn allow_rule(s: &str) -> Result<Rule, String> {
    Rule::parse(Action::Allow, s).map_err(|e| e.to_string())
}

fn deny_rule(s: &str) -> Result<Rule, String> {
    Rule::parse(Action::Deny, s).map_err(|e| e.to_string())
}

#[derive(clap::Args)]
struct PlanArgs {
    /// RTT of the direct client-server path.
    #[arg(long, value_name = "DURATION", value_parser = values::duration)]
    rtt_total: Duration,
    /// Candidate relays on the path with their RTT from the client: "p1=12ms,p2=25ms".
    #[arg(long, value_name = "NAME=RTT,...", value_parser = parse_candidates)]
    candidates: Option<Candidates>,
    /// Measure a candidate's RTT by TCP handshake time (median): [NAME=]HOST:PORT, repeatable.
    #[arg(long, value_name = "[NAME=]HOST:PORT", value_parser = parse_probe)]
    probe: Vec<Probe>,
    /// A measured RTT between two points, overriding the on-path estimate |a - b|;
    /// repeatable: A-B=RTT with candidate names, `client` or `server` (e.g. p1-p2=14ms).
    #[arg(long, value_name = "A-B=RTT", value_parser = parse_pair)]
    pair: Vec<Pair>,
    /// Handshakes per probe.
    #[arg(long, default_value_t = 5)]
    samples: usize,
    /// At most this many relays.
    #[arg(long, default_value_t = 4)]
    max_relays: usize,
    /// Per-relay cost as a fraction of the direct throughput ([SplitTCP] fitted 0.3 for Dante).
    #[arg(long, default_value_t = 0.3)]
    overhead: f64,
    /// Direct-path throughput, to print absolute predictions (e.g. 83mbit).
    #[arg(long, value_name = "RATE", value_parser = values::rate)]
    direct_rate: Option<Rate>,
    /// SOCKS port assumed for candidates named without one.
    #[arg(long, default_value_t = 1080)]
    port: u16,
    /// Machine-readable output (one JSON object).
    #[arg(long)]
    json: bool,
}

/// `matches` are the relay subcommand's (for the order of --allow and
/// --deny, and whether --log was given).
pub(crate) fn run(args: Args, matches: &clap::ArgMatches) -> anyhow::Result<Verdict> {
    match args.command {
        Some(Sub::Plan(p)) => plan(p),
        None => serve(args.serve, matches),
    }
}

/// `--allow` and `--deny` in command-line order, from where clap found
/// each value (typed already; nothing is parsed again).
fn ordered_rules(allow: &[Rule], deny: &[Rule], m: &clap::ArgMatches) -> Vec<Rule> {
    let at = |id: &str| m.indices_of(id).map(|i| i.collect::<Vec<usize>>()).unwrap_or_default();
    let mut rules: Vec<(usize, Rule)> = at("allow").into_iter().zip(allow.iter().cloned()).collect();
    rules.extend(at("deny").into_iter().zip(deny.iter().cloned()));
    rules.sort_by_key(|(i, _)| *i);
    rules.into_iter().map(|(_, r)| r).collect()
}

/// The flags as settings, to lay over the file's.
fn settings_from_flags(a: &ServeArgs, m: &clap::ArgMatches) -> Settings {
    let given_rules = !a.allow.is_empty() || !a.deny.is_empty();
    Settings {
        listen: a.listen,
        next: a.next.clone(),
        forward: a.forward.clone(),
        auth: a.auth.clone(),
        auth_file: a.auth_file.clone(),
        allow: a.allow.clone(),
        deny: a.deny.clone(),
        rules_in_order: given_rules.then(|| ordered_rules(&a.allow, &a.deny, m)),
        cc: a.cc.clone(),
        pace: a.pace.map(|p| p.0),
        sndbuf: a.sndbuf,
        rcvbuf: a.rcvbuf,
        notsent_lowat: a.notsent_lowat,
        idle_timeout: a.idle_timeout,
        handshake_timeout: a.handshake_timeout,
        first_byte_timeout: a.first_byte_timeout,
        connect_timeout: a.connect_timeout,
        max_conns: a.max_conns,
        max_handshakes: a.max_handshakes,
        per_source_handshakes: a.per_source_handshakes,
        handshake_grace: a.handshake_grace,
        backlog: a.backlog,
        copy: a.copy.then_some(true),
        pipe_size: a.pipe_size,
        buffer_size: a.buffer_size,
        json_logs: a.json_logs.then_some(true),
        pool_size: a.pool_size,
        pool_idle: a.pool_idle,
        early_reply: a.early_reply.then_some(true),
        metrics: a.metrics,
        // The global --log: given on the command line it wins over the file
        // (main set it up already); otherwise the file's applies.
        log: None,
    }
}

/// The settings from the file (if any) with the flags over them; run
/// again on SIGHUP.
fn load(config: Option<&Path>, flags: &Settings) -> Result<(Config, Settings), String> {
    let set = match config {
        Some(path) => Settings::from_toml_file(path).map_err(|e| e.to_string())?.overlay(flags.clone()),
        None => flags.clone(),
    };
    let cfg = Config::from_settings(&set).map_err(|e| e.to_string())?;
    Ok((cfg, set))
}

fn serve(a: ServeArgs, m: &clap::ArgMatches) -> anyhow::Result<Verdict> {
    let flags = settings_from_flags(&a, m);
    let (cfg, set) = load(a.config.as_deref(), &flags).map_err(exit::usage)?;
    let log_given = m.value_source("log") == Some(clap::parser::ValueSource::CommandLine)
        || std::env::var_os("RUST_LOG").is_some();
    if let (Some(filter), false) = (&set.log, log_given) {
        crate::set_log_filter(filter)
            .map_err(|e| exit::usage(format!("log = {filter:?} in the config file: {e}")))?;
    }
    let json = cfg.json_logs;
    let file = a.config.clone();
    let hooks = tcpaccel_relay::Hooks {
        report: Box::new(|snap| match serde_json::to_string(snap) {
            Ok(line) => println!("{line}"),
            Err(e) => tracing::warn!("counters: {e}"),
        }),
        reload: Some(Box::new(move || load(file.as_deref(), &flags).map(|(c, _)| c))),
        started: Box::new(move |s| eprint!("{}", start_lines(s, json))),
    };
    tcpaccel_relay::serve_blocking(cfg, hooks).context("relay")?;
    Ok(Verdict::Ok)
}

/// The service's start line(s) on stderr: what it listens on.
fn start_lines(s: &tcpaccel_relay::Started, json: bool) -> String {
    let mut out = String::new();
    for (addr, mode) in &s.listeners {
        if json {
            let j = serde_json::json!({"type": "relay_listening", "addr": addr.to_string(), "mode": mode.to_string()});
            out.push_str(&format!("{j}\n"));
        } else {
            out.push_str(&format!("tcpaccel relay: listening on {addr} ({mode})\n"));
        }
    }
    if let Some(m) = s.metrics {
        if json {
            let j = serde_json::json!({"type": "relay_metrics", "url": format!("http://{m}/metrics")});
            out.push_str(&format!("{j}\n"));
        } else {
            out.push_str(&format!("tcpaccel relay: metrics on http://{m}/metrics\n"));
        }
    }
    out
}

/// `--candidates`: names and RTTs from the client.
type Candidates = Vec<(String, Duration)>;

/// Parses `"p1=12ms,p2=25ms"`.
fn parse_candidates(s: &str) -> Result<Candidates, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, rtt) =
            item.rsplit_once('=').ok_or_else(|| format!("{item:?} is not NAME=RTT (e.g. p1=12ms)"))?;
        let rtt = parse_duration(rtt).map_err(|e| format!("RTT of {}: {e}", name.trim()))?;
        out.push((name.trim().to_string(), rtt));
    }
    Ok(out)
}

/// `--pair A-B=RTT`: a measured RTT between two named points.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pair {
    a: String,
    b: String,
    rtt: Duration,
}

fn parse_pair(p: &str) -> Result<Pair, String> {
    let bad = || format!("{p:?} is not A-B=RTT (e.g. p1-p2=14ms)");
    let (ends, rtt) = p.rsplit_once('=').ok_or_else(bad)?;
    let (a, b) = ends.split_once('-').ok_or_else(bad)?;
    let rtt = parse_duration(rtt).map_err(|e| format!("{p:?}: {e}"))?;
    Ok(Pair { a: a.trim().to_string(), b: b.trim().to_string(), rtt })
}

/// `--probe [NAME=]IP:PORT`: a candidate whose RTT is measured.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Probe {
    name: String,
    addr: SocketAddr,
}

fn parse_probe(spec: &str) -> Result<Probe, String> {
    let (name, addr) = match spec.split_once('=') {
        Some((n, a)) => (n.to_string(), a),
        None => (spec.to_string(), spec),
    };
    let addr = addr.parse().map_err(|_| format!("{addr:?} must be IP:PORT (loopback or lab)"))?;
    Ok(Probe { name, addr })
}

/// RTT matrix over client, candidates, server: on-path estimates `|a - b|`
/// (client at 0, server at `total`), overridden symmetrically by `--pair`.
fn pair_matrix(
    total: Duration,
    cands: &[(String, Duration)],
    pairs: &[Pair],
) -> anyhow::Result<Vec<Vec<Duration>>> {
    let mut pos = vec![Duration::ZERO];
    pos.extend(cands.iter().map(|c| c.1));
    pos.push(total);
    let mut m: Vec<Vec<Duration>> =
        pos.iter().map(|a| pos.iter().map(|b| if a > b { *a - *b } else { *b - *a }).collect()).collect();
    let index = |name: &str| -> anyhow::Result<usize> {
        match name {
            "client" => Ok(0),
            "server" => Ok(cands.len() + 1),
            n => cands.iter().position(|c| c.0 == n).map(|i| i + 1).ok_or_else(|| {
                exit::usage(format!("--pair: unknown point {n:?} (a candidate, client or server)"))
            }),
        }
    };
    for p in pairs {
        let (i, j) = (index(&p.a)?, index(&p.b)?);
        m[i][j] = p.rtt;
        m[j][i] = p.rtt;
    }
    Ok(m)
}

fn probe_candidate(p: &Probe, samples: usize) -> anyhow::Result<(String, Duration)> {
    let (name, addr) = (p.name.clone(), p.addr);
    let rtts = tcpaccel_sys::probe::handshake_rtts(addr, samples.max(1), Duration::from_secs(3))?;
    let secs: Vec<f64> = rtts.iter().map(|d| d.as_secs_f64()).collect();
    let med = tcpaccel_core::stats::median(&secs).unwrap_or(0.0);
    tracing::info!(%addr, samples = rtts.len(), median_ms = med * 1e3, "probed");
    Ok((name, Duration::from_secs_f64(med).max(Duration::from_nanos(1))))
}

fn socks_url(name: &str, port: u16) -> String {
    if name.parse::<SocketAddr>().is_ok()
        || name.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        format!("socks5://{name}")
    } else {
        format!("socks5://{name}:{port}")
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn plan(a: PlanArgs) -> anyhow::Result<Verdict> {
    let total = a.rtt_total;
    let mut cands = a.candidates.clone().unwrap_or_default();
    for p in &a.probe {
        cands.push(probe_candidate(p, a.samples)?);
    }
    let direct_rate = a.direct_rate;
    let model = if a.pair.is_empty() {
        PathModel::on_path(total, &cands)
    } else {
        PathModel::from_matrix(
            cands.iter().map(|c| c.0.clone()).collect(),
            &pair_matrix(total, &cands, &a.pair)?,
        )
    }
    .map_err(|e| exit::usage(e.to_string()))?;
    let p = split::plan(&model, PlanParams { max_relays: a.max_relays, overhead: a.overhead })
        .map_err(|e| exit::usage(e.to_string()))?;
    let urls: Vec<String> = p.best.names.iter().map(|n| socks_url(n, a.port)).collect();
    // Each relay points at the next one (Dante `route` style); the last connects to the server.
    let commands: Vec<String> = (0..urls.len())
        .map(|i| match urls.get(i + 1) {
            Some(n) => {
                format!("on {}: tcpaccel relay --listen 0.0.0.0:PORT --allow ... --next {n}", p.best.names[i])
            }
            None => format!("on {}: tcpaccel relay --listen 0.0.0.0:PORT --allow ...", p.best.names[i]),
        })
        .collect();
    let client =
        urls.first().map(|u| format!("client: curl --socks5-hostname {}", u.trim_start_matches("socks5://")));
    let chain_json = |c: &split::Chain| {
        serde_json::json!({
            "relays": c.names,
            "segments_ms": c.segments.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
            "ratio": c.ratio,
            "ideal_ratio": c.ideal_ratio,
            "predicted_rate_bps": direct_rate.map(|r| (r.bits_per_sec() as f64 * c.ratio.max(0.0)) as u64),
        })
    };
    if a.json {
        let j = serde_json::json!({
            "type": "relay_plan",
            "direct_rtt_ms": ms(p.direct_rtt),
            "overhead": p.overhead,
            "candidates": cands.iter().map(|(n, r)| serde_json::json!({"name": n, "rtt_ms": ms(*r)})).collect::<Vec<_>>(),
            "best": chain_json(&p.best),
            "by_count": p.by_count.iter().map(chain_json).collect::<Vec<_>>(),
            "next_flags": urls.iter().map(|u| format!("--next {u}")).collect::<Vec<_>>(),
            "commands": commands,
        });
        println!("{j}");
        return Ok(Verdict::Ok);
    }
    let fmt_chain = |c: &split::Chain| {
        let segs: Vec<String> = c.segments.iter().map(|d| format_duration(*d)).collect();
        let abs =
            direct_rate.map(|r| format!(" = {}", Rate((r.bits_per_sec() as f64 * c.ratio.max(0.0)) as u64)));
        format!(
            "{} [{}] {:.2}x{} (ideal {} equal segments: {:.2}x)",
            if c.names.is_empty() { "direct".to_string() } else { c.names.join(" -> ") },
            segs.join(" / "),
            c.ratio,
            abs.unwrap_or_default(),
            c.segments.len(),
            c.ideal_ratio
        )
    };
    println!(
        "direct path {}, per-relay overhead {:.2} x T ([SplitTCP] eq. 2-6)",
        format_duration(total),
        a.overhead
    );
    println!("best:  {}", fmt_chain(&p.best));
    for c in &p.by_count {
        println!("  {} relay(s): {}", c.relays.len(), fmt_chain(c));
    }
    if !urls.is_empty() {
        println!(
            "chain as --next flags of one relay: {}",
            urls.iter().map(|u| format!("--next {u}")).collect::<Vec<_>>().join(" ")
        );
        for c in &commands {
            println!("{c}");
        }
        if let Some(c) = client {
            println!("{c}");
        }
    } else {
        println!("no relay is worth its overhead here: connect directly");
    }
    Ok(Verdict::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> (ServeArgs, clap::ArgMatches) {
        use clap::{CommandFactory, FromArgMatches};
        let m = Cli::command().try_get_matches_from(argv).unwrap();
        (Cli::from_arg_matches(&m).unwrap().args.serve, m)
    }

    #[test]
    fn rules_keep_command_line_order() {
        let (a, m) = parse(&[
            "relay",
            "--allow",
            "10.0.0.0/8",
            "--deny=10.1.0.0/16",
            "--allow",
            "any:443",
            "--listen",
            "127.0.0.1:1",
        ]);
        let r: Vec<String> = ordered_rules(&a.allow, &a.deny, &m)
            .iter()
            .map(|r| format!("{:?} {}", r.action, r.text))
            .collect();
        assert_eq!(r, v(&["Allow 10.0.0.0/8", "Deny 10.1.0.0/16", "Allow any:443"]));
        let set = settings_from_flags(&a, &m);
        let cfg = Config::from_settings(&set).unwrap();
        // First match: 10.1.2.3 is allowed by the first rule.
        assert!(cfg.acl.permits("10.1.2.3".parse().unwrap(), 80));
        let (a, m) = parse(&["relay", "--deny=10.1.0.0/16", "--allow", "10.0.0.0/8"]);
        let cfg = Config::from_settings(&settings_from_flags(&a, &m)).unwrap();
        assert!(!cfg.acl.permits("10.1.2.3".parse().unwrap(), 80));
    }

    /// Issue 26 item 8: every flag of `relay` is a key of its file, under
    /// the same name, and every key is a flag (`--log` is the global one;
    /// `--config` names the file itself).
    #[test]
    fn every_flag_is_a_file_key_and_every_file_key_a_flag() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let mut flags: Vec<String> = cmd
            .get_arguments()
            .filter_map(|a| a.get_long())
            .filter(|l| !["help", "config"].contains(l))
            .map(|l| l.replace('-', "_"))
            .collect();
        flags.push("log".into());
        let crate_cli = crate::Cli::command();
        let relay = crate_cli.find_subcommand("relay").expect("relay subcommand");
        assert!(
            relay.get_arguments().chain(crate_cli.get_arguments()).any(|a| a.get_long() == Some("log")),
            "--log is a global flag"
        );
        let mut keys: Vec<String> =
            tcpaccel_relay::config::file_keys().iter().map(|k| k.to_string()).collect();
        flags.sort();
        keys.sort();
        let only_flags: Vec<&String> = flags.iter().filter(|f| !keys.contains(f)).collect();
        let only_keys: Vec<&String> = keys.iter().filter(|k| !flags.contains(k)).collect();
        assert!(
            only_flags.is_empty() && only_keys.is_empty(),
            "flags without a file key: {only_flags:?}; file keys without a flag: {only_keys:?}"
        );
    }

    /// `--pace none` is an explicit setting: it overrides a file's
    /// `pace = "static:…"`, where no flag leaves the file's pacing alone.
    #[test]
    fn pace_none_on_the_command_line_overrides_the_files_pacing() {
        let dir = std::env::temp_dir().join(format!("tcpaccel-relay-pace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("relay.toml");
        std::fs::write(&file, "listen = \"127.0.0.1:0\"\npace = \"static:500mbit\"\n").unwrap();
        let (a, m) = parse(&["relay", "--pace", "none"]);
        let (cfg, _) = load(Some(&file), &settings_from_flags(&a, &m)).unwrap();
        assert_eq!(cfg.tuning.pace, None, "--pace none overrides the file");
        let (a, m) = parse(&["relay"]);
        let (cfg, _) = load(Some(&file), &settings_from_flags(&a, &m)).unwrap();
        assert_eq!(cfg.tuning.pace, Some(Rate(500_000_000)), "no flag keeps the file's pacing");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Typed flags reach the relay's config with exactly the values given
    /// (no text form in between), and a bad one is clap's exit 2.
    #[test]
    fn typed_flags_reach_the_config_exactly() {
        use clap::Parser;
        let argv = [
            "relay",
            "--pace",
            "static:123456789bit",
            "--sndbuf",
            "12.5MB",
            "--notsent-lowat",
            "16KiB",
            "--idle-timeout",
            "1.2345678s",
            "--pipe-size",
            "64KiB",
            "--buffer-size",
            "32KiB",
            "--metrics",
            "9464",
            "--pool-size",
            "5",
            "--pool-idle",
            "1.5s",
            "--early-reply",
        ];
        let (a, m) = parse(&argv);
        let (cfg, _) = load(None, &settings_from_flags(&a, &m)).unwrap();
        assert_eq!((cfg.pool_size, cfg.pool_idle, cfg.early_reply), (5, Duration::from_millis(1500), true));
        assert_eq!(cfg.tuning.pace, Some(Rate(123_456_789)));
        assert_eq!(cfg.tuning.sndbuf, Some(12_500_000));
        assert_eq!(cfg.tuning.notsent_lowat, Some(16_384));
        assert_eq!(cfg.idle_timeout, Duration::from_nanos(1_234_567_800));
        assert_eq!((cfg.pipe_size, cfg.buffer_size), (65_536, 32_768));
        assert_eq!(cfg.metrics, Some("127.0.0.1:9464".parse().unwrap()));
        for (flag, bad) in [
            ("--pace", "fast"),
            ("--sndbuf", "lots"),
            ("--connect-timeout", "10"),
            ("--allow", "10.0.0.0/33"),
            ("--next", "http://x:1"),
            ("--pool-size", "two"),
            ("--pool-idle", "10"),
        ] {
            let e = Cli::try_parse_from(["relay", flag, bad]).err().expect(flag);
            assert_eq!(e.exit_code(), 2, "{flag}");
            let msg = e.to_string();
            assert!(msg.contains(flag) && msg.contains(bad), "{msg}");
        }
        // Parsed but out of range: refused when the config is built, naming the key.
        for (argv, needle) in [
            (["relay", "--pool-size", "33"], "pool_size: 33"),
            (["relay", "--pool-idle", "10ms"], "pool_idle: 10ms"),
        ] {
            let (a, m) = parse(&argv);
            let e = load(None, &settings_from_flags(&a, &m)).expect_err(needle);
            assert!(e.contains(needle), "{e}");
        }
        let e = Cli::try_parse_from(["relay", "plan", "--rtt-total", "50ms", "--candidates", "p1"]).err();
        assert!(e.expect("bad candidates").to_string().contains("\"p1\" is not NAME=RTT"));
    }

    #[test]
    fn flags_override_the_file() {
        let dir = std::env::temp_dir().join(format!("tcpaccel-relaycfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("relay.toml");
        std::fs::write(
            &file,
            "max_conns = 40\nidle_timeout = \"1m\"\nallow = [\"10.0.0.0/8\"]\nlog = \"debug\"\n",
        )
        .unwrap();
        let (a, m) = parse(&["relay", "--max-conns", "20", "--deny", "10.9.0.0/16"]);
        let (cfg, set) = load(Some(&file), &settings_from_flags(&a, &m)).unwrap();
        assert_eq!(cfg.max_conns, 20);
        assert_eq!(cfg.idle_timeout, Duration::from_secs(60));
        assert_eq!(cfg.acl.rules.len(), 1, "the command line's rules replace the file's");
        assert_eq!(set.log.as_deref(), Some("debug"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_start_line_says_where_it_listens_in_words() {
        let s = tcpaccel_relay::Started {
            listeners: vec![
                ("127.0.0.1:1080".parse().unwrap(), tcpaccel_relay::config::Mode::Socks),
                (
                    "127.0.0.1:9000".parse().unwrap(),
                    tcpaccel_relay::config::Mode::Forward(
                        tcpaccel_relay::config::parse_target("localhost:80").unwrap(),
                    ),
                ),
            ],
            metrics: Some("127.0.0.1:9464".parse().unwrap()),
        };
        let text = start_lines(&s, false);
        assert_eq!(
            text,
            "tcpaccel relay: listening on 127.0.0.1:1080 (SOCKS5)\n\
             tcpaccel relay: listening on 127.0.0.1:9000 (forward to localhost:80)\n\
             tcpaccel relay: metrics on http://127.0.0.1:9464/metrics\n"
        );
        for line in start_lines(&s, true).lines() {
            let j: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(j["type"].as_str().unwrap().starts_with("relay_"), "{line}");
        }
    }

    #[test]
    fn pairs_override_the_on_path_estimate() {
        let c = parse_candidates("p1=10ms,p2=30ms").unwrap();
        let pairs = |ps: &[&str]| ps.iter().map(|p| parse_pair(p).unwrap()).collect::<Vec<_>>();
        let m = pair_matrix(Duration::from_millis(50), &c, &pairs(&["p1-p2=25ms", "server-client=60ms"]))
            .unwrap();
        assert_eq!(m[1][2], Duration::from_millis(25));
        assert_eq!(m[2][1], Duration::from_millis(25));
        assert_eq!(m[0][3], Duration::from_millis(60));
        assert_eq!(m[2][3], Duration::from_millis(20));
        assert!(pair_matrix(Duration::from_millis(50), &c, &pairs(&["p1-p9=1ms"])).is_err());
        assert!(parse_pair("p1p2=1ms").unwrap_err().contains("\"p1p2=1ms\" is not A-B=RTT"));
        assert!(parse_pair("p1-p2=soon").is_err());
        assert_eq!(parse_probe("p1=127.0.0.1:1081").unwrap().name, "p1");
        assert_eq!(parse_probe("127.0.0.1:1081").unwrap().name, "127.0.0.1:1081");
        assert!(parse_probe("p1=somewhere:1081").unwrap_err().contains("must be IP:PORT"));
    }

    #[test]
    fn candidates_parse() {
        let c = parse_candidates("p1=12ms, 127.0.0.1:1081=25ms,").unwrap();
        assert_eq!(c[0], ("p1".to_string(), Duration::from_millis(12)));
        assert_eq!(c[1].0, "127.0.0.1:1081");
        assert!(parse_candidates("p1").is_err());
        assert!(parse_candidates("p1=fast").is_err());
        assert_eq!(socks_url("p1", 1080), "socks5://p1:1080");
        assert_eq!(socks_url("127.0.0.1:1081", 1080), "socks5://127.0.0.1:1081");
    }
}
