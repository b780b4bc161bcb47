//! `tcpaccel net`: build a topology from a TOML file and keep it up in the
//! foreground until Ctrl-C or SIGTERM (`up`, like Mininet's CLI lifetime), run
//! commands inside its hosts from another terminal (`exec`), list the runs on
//! this machine (`list`) and tear them down (`down`). The building itself is
//! `tcpaccel_net`; this module only parses flags and prints.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use anyhow::Context;
use tcpaccel_core::units::format_duration;
use tcpaccel_net::{clean, state, LinkKind, MeterOptions, Network, Topology};

use crate::exit::{self, Fail, Verdict};

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Build the network in FILE and keep it up until Ctrl-C or SIGTERM; then
    /// stop what runs inside it (SIGTERM, SIGKILL 3 s later), tear it down and
    /// print the emulators' summaries.
    Up(UpArgs),
    /// Tear a running network down: signal its owner (which stops what runs
    /// inside with SIGTERM, SIGKILL 3 s later), then delete what is left.
    Down(DownArgs),
    /// Run a command inside a host or router of a running network.
    Exec(ExecArgs),
    /// List the networks recorded on this machine.
    List(ListArgs),
}

#[derive(clap::Args)]
struct UpArgs {
    /// Topology file (see examples/topologies/).
    file: PathBuf,
    /// JSON Lines on stdout, each with a "type" field (net_up, emu_summary, net_down).
    #[arg(long)]
    json: bool,
    /// Write each emulated link's meter bins to DIR/LINK.csv.
    #[arg(long, value_name = "DIR")]
    meter_dir: Option<PathBuf>,
    /// Tear down after this long instead of waiting for a signal (e.g. 30s).
    #[arg(long = "for", value_name = "DURATION", value_parser = crate::cmd::values::duration)]
    hold: Option<std::time::Duration>,
    /// Build FILE even when a network from it is already up (a second copy,
    /// same names and addresses: `net exec` and `net down` then need `--run ID`).
    #[arg(long)]
    again: bool,
}

#[derive(clap::Args)]
struct DownArgs {
    /// Run id (as `net up` and `net list` show; default $TCPACCEL_NET_RUN); may be left
    /// out when only one network is up.
    #[arg(long, value_name = "ID")]
    run: Option<String>,
    /// Every recorded run.
    #[arg(long, conflicts_with = "run")]
    all: bool,
    /// One JSON object per run taken down ({"type":"down","run":ID,"removed":[...]};
    /// run null when none was recorded) instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ExecArgs {
    /// Host or router name from the topology file (or an emulated link's
    /// name, for a shell in its emulator's namespace).
    host: String,
    /// Run id (as `net up` and `net list` show; default $TCPACCEL_NET_RUN), needed when
    /// several networks are up.
    #[arg(long, value_name = "ID")]
    run: Option<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

#[derive(clap::Args)]
struct ListArgs {
    /// One JSON object per run ("type": "net_run").
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<Verdict> {
    match args.cmd {
        Cmd::Up(a) => up(a),
        Cmd::Down(a) => down(a),
        Cmd::Exec(a) => exec(a),
        Cmd::List(a) => list(a),
    }
}

/// Library errors with their exit code: bad spec 2, missing privilege 3.
fn net_error(e: tcpaccel_net::Error, what: &str) -> anyhow::Error {
    match e {
        tcpaccel_net::Error::Spec(s) => exit::usage(s.to_string()),
        tcpaccel_net::Error::State(m) => exit::usage(m),
        e if e.is_privilege() => anyhow::Error::new(Fail::Privilege(format!("{what}: {e}"))),
        e => anyhow::Error::new(e).context(what.to_string()),
    }
}

fn up(a: UpArgs) -> anyhow::Result<Verdict> {
    let file = a.file.display().to_string();
    let topo = Topology::load(&a.file).map_err(|e| {
        // Name the file once: a read error already carries its path.
        let msg = e.to_string();
        exit::usage(if msg.contains(&file) { msg } else { format!("{file}: {msg}") })
    })?;
    let hold = a.hold;
    if !a.again {
        refuse_second_copy(&a.file, &file)?;
    }
    exit::require_root("tcpaccel net up")?;
    // Before building: a signal during the build still tears down and exits.
    let signals = tcpaccel_sys::signals::subscribe().context("installing the SIGINT/SIGTERM handler")?;
    let meter = MeterOptions { dir: a.meter_dir.clone(), ..MeterOptions::default() };
    let mut net = Network::up_with(&topo, &meter).map_err(|e| net_error(e, &format!("building {file}")))?;
    let state_file = net.persist_file(&a.file).map_err(|e| net_error(e, "writing the run state file"))?;
    print_up(&net, &state_file, a.json)?;

    let started = Instant::now();
    let signal = loop {
        match signals.recv_timeout(Duration::from_millis(500)) {
            Ok(sig) => break Some(sig),
            Err(RecvTimeoutError::Disconnected) => break None,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if hold.is_some_and(|h| started.elapsed() >= h) {
            break None;
        }
        if let Some(ns) = net.namespaces().into_iter().find(|n| !tcpaccel_sys::netns::exists(n)) {
            eprintln!("tcpaccel net: namespace {ns} was deleted from outside; tearing the rest down");
            break None;
        }
    };
    let run_id = net.run_id().to_string();
    let report = net.teardown();
    if !a.json {
        for st in &report.stopped {
            println!("{}", st.describe());
        }
    }
    for (link, summary) in &report.emulators {
        if a.json {
            let mut v = serde_json::to_value(summary).context("encoding the emulator summary")?;
            if let Some(o) = v.as_object_mut() {
                o.insert("link".into(), link.clone().into());
            }
            println!("{v}");
        } else {
            println!("link {link}: {}", summary.to_text().trim_end());
        }
    }
    if a.json {
        let v = serde_json::json!({
            "type": "net_down", "run_id": run_id, "signal": signal, "stopped": report.stopped,
            "errors": report.errors,
        });
        println!("{v}");
    } else {
        println!("run {run_id} torn down");
    }
    if !report.errors.is_empty() {
        anyhow::bail!("teardown of run {run_id} left: {}", report.errors.join("; "));
    }
    Ok(Verdict::Ok)
}

/// Refuses to build `file` a second time while a network from it is up
/// (exit 2, naming the run): two copies would answer to the same names and
/// addresses, and every later `net exec` would have to be told which one.
fn refuse_second_copy(path: &std::path::Path, file: &str) -> anyhow::Result<()> {
    let up = state::live_from_file(path).map_err(|e| net_error(e, "looking for runs of this file"))?;
    let Some(r) = up.first() else { return Ok(()) };
    Err(exit::usage(format!(
        "{file} is already up as run {} (process {}); use it (`tcpaccel net exec --run {} HOST -- CMD`), \
         take it down first (`tcpaccel net down --run {}`), or add --again for a second copy",
        r.run_id, r.pid, r.run_id, r.run_id
    )))
}

fn print_up(net: &Network, state_file: &std::path::Path, json: bool) -> anyhow::Result<()> {
    let st = net.state();
    if json {
        let v = serde_json::json!({
            "type": "net_up",
            "run_id": st.run_id,
            "pid": st.pid,
            "source": st.source,
            "state_file": state_file,
            "nodes": st.nodes,
            "emulators": st.emulators,
            "topology": net.topology(),
        });
        println!("{v}");
        return Ok(());
    }
    println!("run {} up from {}", st.run_id, st.source.as_deref().unwrap_or("-"));
    for n in &st.nodes {
        println!("  {:<8} {:<6} {}", n.name, n.role, n.ns);
        for i in &n.interfaces {
            let addrs: Vec<&str> = i.addr.iter().chain(i.addr6.iter()).map(String::as_str).collect();
            println!("      {:<15} {:<36} link {}", i.ifname, addrs.join(" "), i.link);
        }
    }
    for l in &net.topology().links {
        let LinkKind::Emulated { a_to_b, b_to_a } = &l.kind else { continue };
        let ns = net.emulator_ns(&l.name).unwrap_or("-");
        let dir = |d: &tcpaccel_net::Direction| {
            format!(
                "rate {}, delay {}, buffer {}, loss {}",
                d.rate.map_or("unlimited".to_string(), |r| r.to_string()),
                format_duration(d.delay),
                d.buffer.map_or("default".to_string(), |b| b.to_string()),
                d.loss
            )
        };
        println!("  emulator {} in {ns}", l.name);
        println!("      {} -> {}: {}", l.a.node, l.b.node, dir(a_to_b));
        println!("      {} -> {}: {}", l.b.node, l.a.node, dir(b_to_a));
    }
    eprintln!(
        "state in {}; run commands with `tcpaccel net exec HOST -- CMD` (add `--run {}` or \
         export TCPACCEL_NET_RUN={} while other networks are up); Ctrl-C or `tcpaccel net down --run {}` tears it down",
        state_file.display(),
        st.run_id,
        st.run_id,
        st.run_id
    );
    Ok(())
}

fn down(a: DownArgs) -> anyhow::Result<Verdict> {
    exit::require_root("tcpaccel net down")?;
    let runs = if a.all {
        state::list().map_err(|e| net_error(e, "listing runs"))?
    } else {
        vec![state::select(run_or_env(a.run).as_deref()).map_err(|e| net_error(e, "choosing the run"))?]
    };
    if runs.is_empty() {
        if a.json {
            println!("{}", serde_json::json!({"type": "down", "run": null, "removed": []}));
        } else {
            println!("no networks recorded");
        }
    }
    for r in &runs {
        let done = clean::stop_run(r, Duration::from_secs(10))
            .map_err(|e| net_error(e, &format!("tearing down run {}", r.run_id)))?;
        if a.json {
            println!("{}", serde_json::json!({"type": "down", "run": r.run_id, "removed": done}));
            continue;
        }
        println!("run {} down", r.run_id);
        for d in done {
            println!("  {d}");
        }
    }
    Ok(Verdict::Ok)
}

/// `--run`, else `$TCPACCEL_NET_RUN` (one shell works on one network while
/// others are up), else none.
pub(crate) fn run_or_env(run: Option<String>) -> Option<String> {
    run.or_else(|| std::env::var("TCPACCEL_NET_RUN").ok().filter(|v| !v.trim().is_empty()))
}

fn exec(a: ExecArgs) -> anyhow::Result<Verdict> {
    exit::require_root("tcpaccel net exec")?;
    let run = state::select(run_or_env(a.run).as_deref()).map_err(|e| net_error(e, "choosing the run"))?;
    // A node, or else an emulated link's name for its emulator namespace.
    let emu_ns = run.emulators.iter().find(|e| e.link == a.host).map(|e| e.ns.as_str());
    let Some(ns) = run.ns_of(&a.host).or(emu_ns) else {
        let names: Vec<&str> = run.nodes.iter().map(|n| n.name.as_str()).collect();
        let links: Vec<&str> = run.emulators.iter().map(|e| e.link.as_str()).collect();
        return Err(exit::usage(format!(
            "run {} has no host {:?}; its hosts and routers: {}; its emulated links: {}",
            run.run_id,
            a.host,
            names.join(", "),
            if links.is_empty() { "none".to_string() } else { links.join(", ") }
        )));
    };
    if !tcpaccel_sys::netns::exists(ns) {
        return Err(exit::usage(format!(
            "namespace {ns} of run {} is gone (stale run; `tcpaccel net down --run {}` removes the record)",
            run.run_id, run.run_id
        )));
    }
    // Replaces this process: the command's exit status is ours.
    let err = std::process::Command::new("ip").args(["netns", "exec", ns]).args(&a.cmd).exec();
    Err(anyhow::Error::new(err).context(format!("running `ip netns exec {ns} {}`", a.cmd.join(" "))))
}

fn list(a: ListArgs) -> anyhow::Result<Verdict> {
    let runs = state::list().map_err(|e| net_error(e, "listing runs"))?;
    if a.json {
        for r in &runs {
            let mut v = serde_json::to_value(r).context("encoding a run")?;
            if let Some(o) = v.as_object_mut() {
                o.insert("type".into(), "net_run".into());
                o.insert("live".into(), r.is_live().into());
            }
            println!("{v}");
        }
        return Ok(Verdict::Ok);
    }
    if runs.is_empty() {
        println!("no networks recorded");
        return Ok(Verdict::Ok);
    }
    let w = runs.iter().map(|r| r.source.as_deref().unwrap_or("-").len()).max().unwrap_or(0).max(6);
    println!("{:<8} {:>8} {:<6} {:<w$} nodes", "run", "pid", "state", "source");
    for r in &runs {
        let nodes: Vec<&str> = r.nodes.iter().map(|n| n.name.as_str()).collect();
        println!(
            "{:<8} {:>8} {:<6} {:<w$} {}",
            r.run_id,
            r.pid,
            if r.is_live() { "up" } else { "stale" },
            r.source.as_deref().unwrap_or("-"),
            nodes.join(",")
        );
    }
    Ok(Verdict::Ok)
}
