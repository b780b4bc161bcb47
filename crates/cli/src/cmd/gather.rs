//! `tcpaccel gather serve|send|status`: the gathering server with priority
//! QoS ([GatherQoS]), its client and its status view. Parses and validates the
//! flags into `tcpaccel_gather` types; the work is in that crate.
use crate::cmd::values;
use crate::exit::{self, Verdict};
use anyhow::Context;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tcpaccel_core::units::{format_duration, Bytes, Rate};
use tcpaccel_gather::Class;
use tcpaccel_gather::{
    client::ClientError, parse_class, Event, Limit, Policy, SendOptions, ServerConfig, Sharing, SinkSpec,
    Source,
};

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Run the gathering server.
    Serve(ServeArgs),
    /// Send a file, stdin or a synthetic stream to a gathering server.
    Send(SendArgs),
    /// Show a running server's per-client view.
    Status(StatusArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on (control, data and status share it).
    #[arg(long, default_value = "127.0.0.1:7070", value_parser = values::socket_addr)]
    listen: SocketAddr,
    /// Receive-buffer bytes shared by all data streams ([GatherQoS] §3.1), e.g. 100KB.
    #[arg(long, value_parser = values::bytes)]
    buffer_pool: Bytes,
    /// A class of clients: NAME=TARGET[,PRIORITY]. TARGET is a rate in bit/s with a unit
    /// (500kbit, 1mbit, 2gbit, 10Mbit/s; bytes per second as 60MB/s); PRIORITY a whole
    /// number, larger is more important (default 1). Repeat for each class, e.g.
    /// --class high=1mbit,2 --class low=500kbit.
    #[arg(long = "class", required = true, value_name = "NAME=TARGET[,PRIORITY]", value_parser = class)]
    classes: Vec<Class>,
    /// Write each client's data to DIR/<stem>.data, where the stem is the client id with
    /// every byte outside [A-Za-z0-9._-] written as %XX (docs/gather-protocol.md §6);
    /// .partial while arriving, .incomplete when it failed. Without it the data is discarded.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Measurement, stream tuning and status interval.
    #[arg(long, default_value = "1s", value_parser = values::duration)]
    status_interval: Duration,
    /// JSON Lines on stdout (type = status, allocation, client_join, client_end, connection_error).
    #[arg(long)]
    json: bool,
    /// Serve Prometheus metrics on this address (PORT alone = 127.0.0.1:PORT): per client its
    /// target, goodput, streams and pool share; joins, ends, errors. Off by default.
    #[arg(long, value_name = "ADDR", value_parser = crate::cmd::values::metrics_addr)]
    metrics: Option<SocketAddr>,
    /// The most data streams the server lets one client open in parallel (it adds
    /// streams to a client that misses its target, up to this).
    #[arg(long, default_value_t = 8, value_name = "N")]
    max_streams_per_client: u32,
    /// Total data streams over all clients sending data (default: as many as the pool gives
    /// a minimum window of 4 KiB; clients are also refused beyond two segments per stream).
    #[arg(long, value_name = "N")]
    max_streams: Option<u32>,
    /// Fail a transfer (error "stalled") when no data arrives from it for this long, and
    /// give its pool share back, even while its control connection stays alive.
    #[arg(long, default_value = "60s", value_parser = values::duration, value_name = "DURATION")]
    stall_timeout: Duration,
    /// Fail a session that has sent no data this long after its welcome (error "stalled").
    #[arg(long, default_value = "30s", value_parser = values::duration, value_name = "DURATION")]
    no_data_timeout: Duration,
    /// Sessions that have sent no data yet, in all: they hold no stream budget; when the
    /// room is full a new client evicts the one that has waited longest.
    #[arg(long, default_value_t = tcpaccel_gather::config::DEFAULT_MAX_WAITING, value_name = "N")]
    max_waiting: u32,
    /// Sessions without data from one source (see --source-prefix-v4); more are refused ("capacity").
    #[arg(long, default_value_t = tcpaccel_gather::config::DEFAULT_MAX_WAITING_PER_SOURCE, value_name = "N")]
    max_waiting_per_source: u32,
    /// Memory for control messages still arriving, over all connections; a message that
    /// does not fit closes its connection with a "capacity" error.
    #[arg(long, default_value = "16MiB", value_parser = values::bytes, value_name = "BYTES")]
    control_memory: Bytes,
    /// Of --control-memory, the most one source may hold; a message beyond it displaces
    /// that source's own oldest. When the memory is full, a new message displaces the
    /// oldest of the source holding the most [default: a sixteenth, at least 64KiB].
    #[arg(long, value_parser = values::bytes, value_name = "BYTES")]
    control_memory_per_source: Option<Bytes>,
    /// Connections before their hello (or data-stream attach) at once; a new one beyond
    /// it displaces the least advanced connection of the source holding the most.
    #[arg(long, default_value_t = tcpaccel_gather::config::DEFAULT_MAX_HANDSHAKES, value_name = "N")]
    max_handshakes: u32,
    /// Of those, from one source once they are 1 s old (younger ones are a burst).
    #[arg(long, default_value_t = tcpaccel_gather::config::DEFAULT_MAX_HANDSHAKES_PER_SOURCE, value_name = "N")]
    max_handshakes_per_source: u32,
    /// For this long after it connects a client counts as having sent its first message
    /// (it may be in flight) when a newcomer displaces one; set it to the clients' round trip.
    #[arg(long, default_value = "200ms", value_parser = values::duration, value_name = "DURATION")]
    handshake_grace: Duration,
    /// Sources for every per-source limit are IPv4 networks of this prefix length (32: each address).
    #[arg(long, default_value_t = tcpaccel_gather::config::DEFAULT_SOURCE_PREFIX_V4, value_name = "BITS")]
    source_prefix_v4: u8,
    /// Sources for every per-source limit are IPv6 networks of this prefix length.
    #[arg(long, default_value_t = tcpaccel_gather::config::DEFAULT_SOURCE_PREFIX_V6, value_name = "BITS")]
    source_prefix_v6: u8,
    /// Data chunk size asked of clients.
    #[arg(long, default_value = "64KiB", value_parser = values::bytes)]
    chunk: Bytes,
    /// Ask clients to CRC-32 every chunk.
    #[arg(long)]
    checksum: bool,
    /// Keep every client at one stream (buffer allocation only).
    #[arg(long)]
    no_stream_tuning: bool,
    /// How to divide the pool: seed003 is the method of the [GatherQoS] paper (seed 003 in
    /// docs/references.md): each client's window is its target rate times its RTT, and when
    /// the pool is short the higher priorities keep theirs first; equal gives every client
    /// the same share.
    #[arg(long, default_value = "seed003", value_enum)]
    allocation: Allocation,
    /// Who holds a demand on the pool: client (one window per client, split over its
    /// streams) or connection (one window per data stream, so streams enlarge a client's share).
    #[arg(long, default_value = "client", value_parser = sharing)]
    share: Sharing,
}

/// `--allocation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Allocation {
    /// By target and priority ([GatherQoS]).
    Seed003,
    /// The same share per client.
    Equal,
}

fn class(s: &str) -> Result<Class, String> {
    parse_class(s).map_err(|e| error_chain(&e))
}

fn sharing(s: &str) -> Result<Sharing, String> {
    Sharing::parse(s).ok_or_else(|| format!("{s:?}: expected client or connection"))
}

#[derive(clap::Args)]
struct SendArgs {
    /// Address of the gathering server (its --listen), e.g. 127.0.0.1:7070.
    #[arg(long, value_parser = values::socket_addr, value_name = "ADDR")]
    server: SocketAddr,
    /// The class to join, one of the server's --class names; it sets the target rate and priority.
    #[arg(long, value_name = "NAME")]
    class: String,
    /// Client id (names its file on the server); default client-<pid>.
    #[arg(long)]
    id: Option<String>,
    /// A lower target than the class's.
    #[arg(long, value_parser = values::rate)]
    target: Option<Rate>,
    /// Send this file ("-" for stdin).
    #[arg(long, conflicts_with_all = ["rate", "bytes", "duration"])]
    file: Option<String>,
    /// Synthetic source at this rate.
    #[arg(long, value_parser = values::rate)]
    rate: Option<Rate>,
    /// Synthetic source: stop after this many bytes.
    #[arg(long, conflicts_with = "duration", value_parser = values::bytes)]
    bytes: Option<Bytes>,
    /// Synthetic source: stop after this long.
    #[arg(long, value_parser = values::duration)]
    duration: Option<Duration>,
    /// Seed of the synthetic bytes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Congestion control of the client's connections (e.g. reno, cubic, bbr); default: the system's.
    #[arg(long)]
    cc: Option<String>,
    /// Fail (exit 5) when the server sends nothing for this long, or confirms no more
    /// bytes for this long after the end of data (at least 3 status intervals).
    #[arg(long, default_value = "30s", value_parser = values::duration)]
    timeout: Duration,
    /// Print the result as one JSON object ({"type":"send","report":{...}}) instead of a sentence.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct StatusArgs {
    /// Address of the gathering server (its --listen), e.g. 127.0.0.1:7070.
    #[arg(long, value_parser = values::socket_addr, value_name = "ADDR")]
    server: SocketAddr,
    /// Print one JSON object {"type":"status_reply","clients":[...]} (an empty list when no
    /// client is connected) instead of one line per client.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<Verdict> {
    match args.cmd {
        Cmd::Serve(a) => serve(a),
        Cmd::Send(a) => send(a),
        Cmd::Status(a) => status(a),
    }
}

fn serve_config(a: &ServeArgs) -> anyhow::Result<ServerConfig> {
    let pool = a.buffer_pool.get();
    let interval = a.status_interval;
    if interval.as_millis() < 10 {
        return Err(exit::usage(format!("--status-interval {} is below 10ms", format_duration(interval))));
    }
    let classes = a.classes.clone();
    let chunk = a.chunk.get();
    let mut cfg = ServerConfig::new(classes, pool, a.max_streams, a.max_streams_per_client, interval)
        .and_then(|c| c.with_chunk_size(chunk))
        .map_err(|e| exit::usage(error_chain(&e)))?;
    cfg.checksum = a.checksum;
    cfg.tune_streams = !a.no_stream_tuning;
    cfg.policy = match a.allocation {
        Allocation::Seed003 => Policy::Seed003,
        Allocation::Equal => Policy::Equal,
    };
    cfg.sharing = a.share;
    cfg.stall_timeout = positive("--stall-timeout", a.stall_timeout)?;
    cfg.no_data_timeout = positive("--no-data-timeout", a.no_data_timeout)?;
    cfg.max_waiting = at_least_one("--max-waiting", a.max_waiting)?;
    cfg.max_waiting_per_source = at_least_one("--max-waiting-per-source", a.max_waiting_per_source)?;
    cfg.control_memory = a.control_memory.get();
    cfg.control_memory_per_source = a.control_memory_per_source.map(Bytes::get);
    if let Some(n) = cfg.control_memory_per_source {
        if n < u64::from(tcpaccel_gather::proto::MAX_CLIENT_MSG_LEN) {
            return Err(exit::usage(format!(
                "--control-memory-per-source {n} B is below one client message ({} B)",
                tcpaccel_gather::proto::MAX_CLIENT_MSG_LEN
            )));
        }
    }
    cfg.max_handshakes = at_least_one("--max-handshakes", a.max_handshakes)?;
    cfg.max_handshakes_per_source = at_least_one("--max-handshakes-per-source", a.max_handshakes_per_source)?;
    cfg.handshake_grace = a.handshake_grace;
    cfg.sources = tcpaccel_core::admit::Grouping::new(a.source_prefix_v4, a.source_prefix_v6)
        .map_err(|e| exit::usage(format!("--source-prefix-v4/-v6: {e}")))?;
    if cfg.control_memory < u64::from(tcpaccel_gather::proto::MAX_CLIENT_MSG_LEN) {
        return Err(exit::usage(format!(
            "--control-memory {} B is below one client message ({} B)",
            cfg.control_memory,
            tcpaccel_gather::proto::MAX_CLIENT_MSG_LEN
        )));
    }
    Ok(cfg)
}

fn positive(flag: &str, d: Duration) -> anyhow::Result<Duration> {
    if d.is_zero() {
        return Err(exit::usage(format!("{flag} 0: give a duration above zero, e.g. 30s")));
    }
    Ok(d)
}

fn at_least_one(flag: &str, n: u32) -> anyhow::Result<u32> {
    if n == 0 {
        return Err(exit::usage(format!("{flag} 0: give at least 1")));
    }
    Ok(n)
}

/// On loopback a segment is about 64 KiB (MTU 65536): a pool that cannot give
/// every stream of the budget two of them starves the streams (issue 26 item 4),
/// so the start says how many fit; the server refuses clients beyond that.
fn loopback_warning(cfg: &ServerConfig, listen: SocketAddr) -> Option<String> {
    if !listen.ip().is_loopback() {
        return None;
    }
    let floor = tcpaccel_gather::qos::two_segments(tcpaccel_gather::config::LOOPBACK_SEGMENT);
    let fits = cfg.pool / floor;
    (fits < u64::from(cfg.max_streams)).then(|| {
        format!(
            "gather: warning: on loopback a segment is {} B; the pool of {} B holds two per stream for {fits} stream(s), not the {} of --max-streams: clients beyond {fits} are refused (raise --buffer-pool to {} B for all)",
            tcpaccel_gather::config::LOOPBACK_SEGMENT,
            cfg.pool,
            cfg.max_streams,
            floor * u64::from(cfg.max_streams)
        )
    })
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn serve(a: ServeArgs) -> anyhow::Result<Verdict> {
    let cfg = serve_config(&a)?;
    let listen = a.listen;
    let sink = match &a.out {
        Some(d) => SinkSpec::Dir(d.clone()),
        None => SinkSpec::Discard,
    };
    let json = a.json;
    let pool = cfg.pool;
    if let Some(w) = loopback_warning(&cfg, listen) {
        eprintln!("{w}");
    }
    let (metrics, _endpoint) = match a.metrics {
        Some(at) => {
            let mut reg = tcpaccel_metrics::Registry::default();
            let m = tcpaccel_gather::metrics::GatherMetrics::register(&mut reg, pool);
            let ep = tcpaccel_metrics::Endpoint::serve(at, std::sync::Arc::new(reg))
                .context("starting the metrics endpoint")?;
            eprintln!("gather: metrics on http://{}/metrics", ep.addr());
            (Some(m), Some(ep))
        }
        None => (None, None),
    };
    let mut printer = EventPrinter::new(json);
    tcpaccel_gather::blocking::serve(
        cfg,
        listen,
        sink,
        |bound| eprintln!("gather: listening on {bound} (pool {pool} B)"),
        |e| {
            if let Some(m) = &metrics {
                m.observe(&e);
            }
            printer.print(&e);
        },
    )
    .with_context(|| format!("gather server on {listen}"))?;
    printer.finish();
    Ok(Verdict::Ok)
}

/// The server's event stream on stdout. `connection_error` events are one
/// per refused or broken connection, so a flood of them passes the
/// services' one flood budget (`tcpaccel_core::loglimit`, as the log lines
/// on stderr do: the shipped unit runs `--json` into the journal); the ones
/// left out are said in one `connection_errors_suppressed` line with their
/// count, and every one is counted in `tcpaccel_gather_connection_errors`
/// (the metrics observe each event before it is printed).
struct EventPrinter {
    json: bool,
    errors: tcpaccel_core::loglimit::Limiter,
    epoch: std::time::Instant,
}

impl EventPrinter {
    fn new(json: bool) -> EventPrinter {
        EventPrinter {
            json,
            errors: tcpaccel_core::loglimit::Limiter::new(tcpaccel_core::loglimit::Budget::DEFAULT),
            epoch: std::time::Instant::now(),
        }
    }

    fn now(&self) -> tcpaccel_core::Instant {
        tcpaccel_core::Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    fn print(&mut self, e: &Event) {
        let now = self.now();
        let write = if let Event::ConnectionError { .. } = e {
            let pass = self.errors.offer(now);
            if let Some(s) = pass.summary {
                self.summary(&s);
            }
            pass.write
        } else {
            if let Some(s) = self.errors.tick(now) {
                self.summary(&s);
            }
            true
        };
        if !write {
            return;
        }
        let mut out = std::io::stdout().lock();
        if self.json {
            if let Ok(s) = serde_json::to_string(e) {
                let _ = writeln!(out, "{s}");
            }
        } else {
            let _ = writeln!(out, "{}", human(e));
        }
    }

    /// At the stop: the count of what is still held back.
    fn finish(&mut self) {
        let now = self.now();
        if let Some(s) = self.errors.flush(now) {
            self.summary(&s);
        }
    }

    fn summary(&self, s: &tcpaccel_core::loglimit::Suppressed) {
        let t = self.epoch.elapsed().as_secs_f64();
        let over_s = s.span().as_secs_f64();
        let mut out = std::io::stdout().lock();
        let _ = if self.json {
            writeln!(
                out,
                "{}",
                serde_json::json!({"type": "connection_errors_suppressed", "t": t, "records": s.records, "over_s": over_s})
            )
        } else {
            writeln!(
                out,
                "{t:8.1}s {} connection_error events not shown over the last {over_s:.1} s (a flood; all counted in tcpaccel_gather_connection_errors)",
                s.records
            )
        };
    }
}

fn human(e: &Event) -> String {
    match e {
        Event::Status(s) => format!(
            "{:8.1}s {:<16} {:<8} target {:>9.3} Mbit/s  goodput {:>9.3} Mbit/s  streams {}/{}  alloc {} B  clamp {} B  rtt {} us",
            s.t,
            s.id,
            s.class,
            s.target_bps as f64 / 1e6,
            s.goodput_bps as f64 / 1e6,
            s.streams,
            s.streams_wanted,
            s.allocation,
            s.window_clamp,
            s.rtt_us
        ),
        Event::Allocation { t, rule, pool, needed, needed_lowered, clients } => format!(
            "{t:8.1}s allocation: {clients} clients, pool {pool} B, needed {needed} B (lowered {needed_lowered} B): {rule}"
        ),
        Event::ClientJoin { t, id, class, target_bps, peer, .. } => {
            format!("{t:8.1}s join {id} class {class} target {} bit/s from {peer}", target_bps)
        }
        Event::ClientEnd { t, id, bytes, complete, sha256, path, reason, .. } => format!(
            "{t:8.1}s end {id}: {bytes} B {} sha256 {sha256}{} ({reason})",
            if *complete { "complete" } else { "INCOMPLETE" },
            path.as_deref().map(|p| format!(" -> {p}")).unwrap_or_default()
        ),
        Event::ConnectionError { t, peer, stage, error } => format!("{t:8.1}s closed {peer} at {stage}: {error}"),
    }
}

fn send(a: SendArgs) -> anyhow::Result<Verdict> {
    let server = a.server;
    let target = a.target;
    let source = match (&a.file, a.rate, a.bytes, a.duration) {
        (Some(f), ..) if f == "-" => Source::Stdin,
        (Some(f), ..) => Source::File(PathBuf::from(f)),
        (None, rate, bytes, duration) => {
            let limit = match (bytes, duration) {
                (Some(b), _) => Limit::Bytes(b.get()),
                (None, Some(d)) => Limit::Duration(d),
                (None, None) => {
                    return Err(exit::usage("give --file PATH, --file -, or a synthetic source with --bytes N or --duration D (and optionally --rate R)"))
                }
            };
            Source::Synthetic { rate, limit, seed: a.seed }
        }
    };
    let timeout = a.timeout;
    if timeout.is_zero() {
        return Err(exit::usage("--timeout 0: give a duration above zero, e.g. 30s"));
    }
    let id = a.id.clone().unwrap_or_else(|| format!("client-{}", std::process::id()));
    let opts = SendOptions { server, id, class: a.class.clone(), target, source, cc: a.cc.clone(), timeout };
    let report = match tcpaccel_gather::blocking::send(opts) {
        Ok(r) => r,
        Err(e @ ClientError::Refused { code, .. }) => {
            use tcpaccel_gather::proto::ErrorCode;
            // What the user asked for does not fit the server: a usage error.
            return Err(match code {
                ErrorCode::UnknownClass | ErrorCode::Duplicate | ErrorCode::Version => {
                    exit::usage(e.to_string())
                }
                _ => anyhow::Error::new(e).context(format!("gather send to {server}")),
            });
        }
        // A congestion control the kernel does not have: the flag is wrong.
        Err(e @ ClientError::Congestion { .. }) => return Err(exit::usage(error_chain(&e))),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("gather send to {server}"))),
    };
    if a.json {
        println!("{}", serde_json::json!({"type": "send", "report": report}));
    } else {
        println!(
            "sent {} B in {:.2} s ({:.3} Mbit/s, up to {} parallel streams, {} stream-count changes); sha256 {}; server {}",
            report.bytes,
            report.seconds,
            report.goodput_bps as f64 / 1e6,
            report.max_streams,
            report.stream_changes,
            report.sha256,
            if report.complete { "confirmed every byte" } else { "did NOT confirm the data" }
        );
    }
    Ok(if report.complete { Verdict::Ok } else { Verdict::Negative })
}

fn status(a: StatusArgs) -> anyhow::Result<Verdict> {
    let server = a.server;
    let clients =
        tcpaccel_gather::blocking::status(server).with_context(|| format!("gather status of {server}"))?;
    let mut out = std::io::stdout().lock();
    if a.json {
        // One JSON document whatever the number of clients (none is `[]`).
        let reply = tcpaccel_gather::proto::Control::StatusReply { clients };
        let s = serde_json::to_string(&reply).context("encode status")?;
        writeln!(out, "{s}").context("write status")?;
        return Ok(Verdict::Ok);
    }
    if clients.is_empty() {
        writeln!(out, "no clients").context("write status")?;
    }
    for c in clients {
        writeln!(out, "{}", human(&Event::Status(c))).context("write status")?;
    }
    Ok(Verdict::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    /// The exit code of `tcpaccel gather ARGV`: clap's for a flag it
    /// refuses (2), else the command's.
    fn code(argv: &[&str]) -> std::process::ExitCode {
        match Cli::try_parse_from(std::iter::once("gather").chain(argv.iter().copied())) {
            Ok(cli) => exit::code(run(cli.args)),
            Err(e) => std::process::ExitCode::from(e.exit_code() as u8),
        }
    }

    fn serve_flags() -> std::collections::BTreeSet<String> {
        let cmd = <Cli as clap::CommandFactory>::command();
        let serve = cmd.find_subcommand("serve").expect("a serve subcommand");
        serve
            .get_arguments()
            .filter_map(|a| a.get_long())
            .filter(|l| *l != "help")
            .map(|l| format!("--{l}"))
            .collect()
    }

    /// Issue 26 item 8: the service's configuration (the env file of the
    /// unit, whose GATHER_ARGS are the flags) and the flags are one set of
    /// names. The file lists every `serve` flag and no other, its
    /// GATHER_ARGS parse, and the unit's ExecStart uses only real flags.
    #[test]
    fn the_service_files_and_the_serve_flags_are_one_set_of_names() {
        let env = include_str!("../../../../examples/gather/gather.env");
        let unit = include_str!("../../../../examples/gather/tcpaccel-gather.service");
        let flags = serve_flags();
        let listed: std::collections::BTreeSet<String> = env
            .lines()
            .filter_map(|l| l.strip_prefix("#   --"))
            .filter_map(|l| l.split_whitespace().next())
            .map(|f| format!("--{f}"))
            .collect();
        assert_eq!(listed, flags, "the list in gather.env and `gather serve`'s flags differ");
        let args =
            env.lines().find_map(|l| l.strip_prefix("GATHER_ARGS=")).expect("GATHER_ARGS in gather.env");
        let argv = ["gather", "serve"].into_iter().chain(args.split_whitespace());
        let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("GATHER_ARGS does not parse: {e}"));
        match cli.args.cmd {
            Cmd::Serve(a) => {
                serve_config(&a).unwrap();
            }
            _ => unreachable!("parsed a serve command"),
        }
        let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("ExecStart in the unit");
        for w in exec.split_whitespace().filter(|w| w.starts_with("--")) {
            // --log is the program's own flag, before or after the subcommand.
            assert!(
                flags.contains(w) || w == "--log",
                "the unit passes {w}, which `gather serve` does not take"
            );
        }
    }

    /// Issue 28: every flag of every gather command says what it is for.
    #[test]
    fn every_gather_flag_has_help() {
        let cmd = <Cli as clap::CommandFactory>::command();
        for sub in cmd.get_subcommands() {
            for a in sub.get_arguments() {
                let Some(long) = a.get_long() else { continue };
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                assert!(!help.trim().is_empty(), "gather {} --{long} has no help text", sub.get_name());
            }
        }
    }

    #[test]
    fn share_flag_sets_the_sharing() {
        let cfg = |extra: &[&str]| {
            let argv = ["gather", "serve", "--buffer-pool", "100KB", "--class", "a=1mbit"];
            let cli = Cli::try_parse_from(argv.iter().chain(extra)).unwrap();
            match cli.args.cmd {
                Cmd::Serve(a) => serve_config(&a).unwrap().sharing,
                _ => unreachable!("parsed a serve command"),
            }
        };
        assert_eq!(cfg(&[]), Sharing::PerClient);
        assert_eq!(cfg(&["--share", "connection"]), Sharing::PerConnection);
        assert_eq!(cfg(&["--share", "client"]), Sharing::PerClient);
    }

    /// A server that welcomes the client, reads everything and never
    /// confirms: `gather send` must give up after `--timeout` and exit 5
    /// (before `--timeout` existed it waited for `done` forever).
    #[test]
    fn send_times_out_on_a_server_that_never_confirms() {
        let addr = tcpaccel_gather::testing::silent_server(false).to_string();
        let t0 = std::time::Instant::now();
        let got = code(&["send", "--server", &addr, "--class", "a", "--bytes", "10KB", "--timeout", "1s"]);
        assert_eq!(got, std::process::ExitCode::from(5));
        assert!(t0.elapsed() < std::time::Duration::from_secs(20), "{:?}", t0.elapsed());
        assert_eq!(
            code(&["send", "--server", &addr, "--class", "a", "--bytes", "1KB", "--timeout", "soon"]),
            std::process::ExitCode::from(2)
        );
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        let two = std::process::ExitCode::from(2);
        // Target that does not parse.
        assert_eq!(code(&["serve", "--buffer-pool", "100KB", "--class", "high=fast,2"]), two);
        // Pool too small for one stream's minimum window.
        assert_eq!(code(&["serve", "--buffer-pool", "1KB", "--class", "high=1mbit"]), two);
        // Pool too small for the stream budget.
        assert_eq!(
            code(&["serve", "--buffer-pool", "60KB", "--max-streams", "100", "--class", "a=1mbit"]),
            two
        );
        // Unparseable pool.
        assert_eq!(code(&["serve", "--buffer-pool", "lots", "--class", "a=1mbit"]), two);
        // Unknown allocation policy.
        assert_eq!(
            code(&["serve", "--buffer-pool", "1MB", "--class", "a=1mbit", "--allocation", "fair"]),
            two
        );
        // Unknown sharing.
        assert_eq!(code(&["serve", "--buffer-pool", "1MB", "--class", "a=1mbit", "--share", "stream"]), two);
        // A send with no source.
        assert_eq!(code(&["send", "--server", "127.0.0.1:1", "--class", "a"]), two);
        // A congestion control that does not exist (refused before connecting).
        assert_eq!(
            code(&[
                "send",
                "--server",
                "127.0.0.1:1",
                "--class",
                "a",
                "--bytes",
                "1KB",
                "--cc",
                "no-such-cc"
            ]),
            two
        );
    }
}
