//! `tcpaccel trace`: sample `tcp_info` of matching sockets through sock_diag
//! (one dump per tick, absolute schedule), write CSV or JSON Lines, and
//! optionally plot cwnd, ssthresh and RTT over time.
//!
//! The sampling, schedule, rows and plot are `tcpaccel_tune::trace`; this
//! file reads flags, opens outputs and prints the run summary on stderr
//! (including the CPU the sampler used). Rows carry the relative time
//! (`t_s`) and the wall-clock time (`ts`, Unix seconds). The plot shows the
//! sockets that send data; `--plot-all` adds receivers, listeners and idle
//! ones. SIGINT/SIGTERM end the trace normally; exit 1 when no socket matched.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use tcpaccel_core::units::format_duration;
use tcpaccel_tune::trace::{self, Format, PlotRows, RowWriter, Selector, TraceError, Tracer};

use crate::cmd::values;
use crate::exit::{self, Verdict};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("select").args(["port", "dst", "pid"])))]
pub(crate) struct Args {
    /// Sockets whose local or remote port is P.
    #[arg(long)]
    port: Option<u16>,
    /// Sockets whose remote end is ADDR or ADDR:PORT ([V6]:PORT for IPv6).
    #[arg(long, value_parser = dst)]
    dst: Option<Selector>,
    /// Sockets owned by process PID.
    #[arg(long)]
    pid: Option<u32>,
    /// Sampling interval (10ms = 100 Hz).
    #[arg(long, default_value = "10ms", value_parser = values::duration)]
    interval: Duration,
    /// Stop after this long (default: until SIGINT/SIGTERM).
    #[arg(long, value_parser = values::duration)]
    duration: Option<Duration>,
    /// Output file: .csv, or .jsonl/.json for JSON Lines (default: CSV on stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write an SVG of cwnd, ssthresh and RTT over time, of the sockets
    /// that send data (a socket joins from its first acknowledged data).
    /// The file name must end in .svg (the only format written).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Plot every matching socket, also receivers (accepted sockets that
    /// only read), listeners and idle connections.
    #[arg(long, requires = "plot")]
    plot_all: bool,
    /// Dump (find sockets) only this often and re-query the known sockets
    /// exactly in between: cheaper on hosts with many sockets, new sockets
    /// appear within this delay. Default: one dump per tick.
    #[arg(long, value_parser = values::duration)]
    discover: Option<Duration>,
    /// Sample sockets of this network namespace.
    #[arg(long, conflicts_with = "node")]
    netns: Option<String>,
    #[command(flatten)]
    node: NodeArgs,
}

/// `--node NAME [--run ID]`: a node of a network `tcpaccel net up` started,
/// resolved to its namespace from the run's state (so no one needs to copy
/// `tcpaccel-<id>-h1` from the `net up` output).
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct NodeArgs {
    /// A host or router of the running network (`tcpaccel net up`), instead of --netns.
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
    /// With --node: the run id, needed when several networks are up (`tcpaccel net list`; default
    /// $TCPACCEL_NET_RUN, as for `net exec`).
    #[arg(long, value_name = "ID", requires = "node")]
    run: Option<String>,
}

impl NodeArgs {
    /// The namespace to act in: `--netns` as given, or `--node`'s.
    pub(crate) fn netns(&self, netns: Option<String>) -> anyhow::Result<Option<String>> {
        let Some(node) = &self.node else { return Ok(netns) };
        let id = crate::cmd::net::run_or_env(self.run.clone());
        let run = tcpaccel_net::state::select(id.as_deref()).map_err(|e| exit::usage(e.to_string()))?;
        match run.ns_of(node) {
            Some(ns) => Ok(Some(ns.to_string())),
            None => {
                let names: Vec<&str> = run.nodes.iter().map(|n| n.name.as_str()).collect();
                Err(exit::usage(format!(
                    "--node {node:?}: run {} has no such node; its hosts and routers: {}",
                    run.run_id,
                    names.join(", ")
                )))
            }
        }
    }
}

/// `--plot` writes SVG only: any other extension is refused before tracing.
fn check_plot_path(p: &std::path::Path) -> anyhow::Result<()> {
    match p.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => Ok(()),
        other => Err(exit::usage(format!(
            "--plot {}: the plot is written as SVG only; name the file with .svg{}",
            p.display(),
            other.map_or(String::new(), |e| format!(" (.{e} would hold SVG, not {})", e.to_uppercase()))
        ))),
    }
}

/// The plot keeps the rows of this many sockets (the first plotted), so a long
/// trace of many sockets does not grow without bound in memory.
const PLOT_SOCKETS: usize = 8;

fn trace_err(e: TraceError) -> anyhow::Error {
    match e {
        TraceError::NoProcess { .. } => exit::usage(e.to_string()),
        TraceError::Diag(tcpaccel_sys::Error::NoNamespace { name }) => {
            exit::usage(format!("network namespace {name:?} not found"))
        }
        e => anyhow::Error::new(e),
    }
}

fn dst(s: &str) -> Result<Selector, String> {
    Selector::parse_dst(s).ok_or_else(|| format!("{s:?}: expected ADDR, ADDR:PORT or [V6]:PORT"))
}

pub(crate) fn run(mut args: Args) -> anyhow::Result<Verdict> {
    if let Some(p) = &args.plot {
        check_plot_path(p)?;
    }
    args.netns = args.node.netns(args.netns.take())?;
    let interval = args.interval;
    if interval < Duration::from_millis(1) {
        return Err(exit::usage("--interval must be at least 1ms"));
    }
    let duration = args.duration;
    let sel = match (&args.port, &args.dst, &args.pid) {
        (Some(p), _, _) => Selector::Port(*p),
        (_, Some(d), _) => d.clone(),
        (_, _, Some(pid)) => Selector::Pid(*pid),
        _ => Selector::All,
    };
    if let Some(ns) = &args.netns {
        if !tcpaccel_sys::netns::exists(ns) {
            return Err(exit::usage(format!("network namespace {ns:?} not found (looked in /run/netns)")));
        }
    }
    let discover = args.discover;
    let mut tracer = Tracer::open(sel.clone(), args.netns.as_deref()).map_err(trace_err)?;
    if let Some(d) = discover {
        tracer = tracer.hybrid(d);
    }

    let (sink, format): (Box<dyn Write>, Format) = match &args.out {
        Some(p) => (
            Box::new(std::io::BufWriter::new(
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
            )),
            Format::from_path(p),
        ),
        None => (Box::new(std::io::BufWriter::new(std::io::stdout().lock())), Format::Csv),
    };
    let mut writer = RowWriter::new(sink, format);
    // A service: SIGINT/SIGTERM end the trace normally (exit.rs).
    let stop = exit::stop_on_signal()?;

    let mut plot = PlotRows::new(PLOT_SOCKETS, args.plot_all);
    let want_plot = args.plot.is_some();
    tracing::info!(
        "tracing {sel} every {} for {}",
        format_duration(interval),
        duration.map(format_duration).unwrap_or_else(|| "ever (Ctrl-C stops)".into())
    );
    let summary = trace::run(&mut tracer, interval, duration, &stop, |rows| {
        writer.write(rows)?;
        // Flush every tick: an interrupted trace keeps what it sampled.
        writer.flush()?;
        if want_plot {
            for r in rows {
                plot.offer(r);
            }
        }
        Ok(())
    })
    .map_err(trace_err)?;
    writer.flush().context("flushing trace output")?;

    if let Some(p) = &args.plot {
        let title = match &sel {
            Selector::Port(p) => format!("port {p}"),
            Selector::Dst(ip, Some(port)) => format!("to {}", SocketAddr::new(*ip, *port)),
            Selector::Dst(ip, None) => format!("to {ip}"),
            Selector::Pid(pid) => format!("pid {pid}"),
            Selector::All => "all TCP sockets".into(),
        };
        std::fs::write(p, trace::plot_svg(&plot.rows, &title))
            .with_context(|| format!("writing {}", p.display()))?;
        if !plot.left_out.is_empty() {
            eprintln!(
                "trace: the plot leaves out {} socket(s) that sent no data (receivers, listeners, idle); --plot-all includes them",
                plot.left_out.len()
            );
        }
    }
    let cpu = match (summary.cpu_s, summary.cpu_share) {
        (Some(c), Some(s)) => format!("CPU {:.1} ms = {:.2}% of one core", c * 1000.0, s * 100.0),
        _ => "CPU unknown".into(),
    };
    eprintln!(
        "trace: {} ticks at {} ({} late, skipped), {} rows, {} sockets (max {} per tick), {:.2} s, {cpu}",
        summary.ticks,
        format_duration(interval),
        summary.missed_ticks,
        summary.rows,
        summary.sockets,
        summary.max_sockets_per_tick,
        summary.wall_s
    );
    if summary.sockets == 0 {
        eprintln!("trace: no socket matched {sel}");
        return Ok(Verdict::Negative);
    }
    Ok(Verdict::Ok)
}
