//! `tcpaccel lanes`: the datacenter lanes daemon ([Lanes]) for a namespace
//! with `net.mptcp.path_manager=userspace`. Flags become a validated config
//! here; the daemon itself is `tcpaccel_lanes`.
//!
//! Exit codes: 2 for a bad configuration (file, values, overlapping lanes,
//! addresses missing from the namespace, unknown namespace), 3 without root,
//! 4 when the namespace lacks MPTCP or the userspace path manager, 5 for a
//! runtime failure. SIGINT/SIGTERM are the daemon's normal stop (exit 0,
//! exit.rs); stopping it leaves every connection as it is. SIGHUP re-reads
//! the configuration file without touching connections.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use std::net::IpAddr;

use anyhow::Context;
use tcpaccel_lanes::env::EnvError;

use crate::exit::{self, Fail, Verdict};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Lane configuration (TOML): peers with the address pairs of their short-flow lane (SL) and
    /// long-flow lanes (LL), policy, probes; also
    /// `netns`, `json`, `duration` and `metrics`, the flags below of the same names.
    #[arg(long, short = 'c')]
    config: PathBuf,
    /// Run inside this network namespace (a name from `ip netns`): its MPTCP connections and
    /// lanes. The --metrics endpoint stays where tcpaccel was started (see --metrics).
    #[arg(long)]
    netns: Option<String>,
    /// JSON Lines on stdout, one object per line with a `type` (ready, event, decision, warning,
    /// reload, and summary last, at the stop).
    #[arg(long)]
    json: bool,
    /// Stop by itself after this long (e.g. 30s); by default run until SIGINT/SIGTERM.
    #[arg(long, value_parser = crate::cmd::values::duration)]
    duration: Option<std::time::Duration>,
    /// Only check the configuration and the namespace, then exit.
    #[arg(long)]
    check: bool,
    /// Serve Prometheus metrics on this address (PORT alone = 127.0.0.1:PORT): connections,
    /// switches, refused commands, reloads, bytes acknowledged per lane. Off by default. With
    /// --netns the endpoint listens in the namespace tcpaccel was started in (where a systemd
    /// unit runs and Prometheus scrapes), not in the --netns one; for an endpoint inside a
    /// namespace, start the whole daemon there (`ip netns exec NS tcpaccel lanes ...`).
    #[arg(long, value_name = "ADDR", value_parser = crate::cmd::values::metrics_addr)]
    metrics: Option<std::net::SocketAddr>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<Verdict> {
    let cfg = tcpaccel_lanes::Config::load(&args.config).map_err(|e| exit::usage(e.to_string()))?;
    // The file's keys of the same names as the flags; a flag given wins.
    let args = Args {
        netns: args.netns.or_else(|| cfg.run.netns.clone()),
        json: args.json || cfg.run.json,
        duration: args.duration.or(cfg.run.duration),
        metrics: args.metrics.or(cfg.run.metrics),
        ..args
    };
    let duration = args.duration;
    exit::require_root("tcpaccel lanes (MPTCP path-manager netlink)")?;
    // Bound before entering --netns, so the endpoint is reachable where the
    // daemon was started (a socket keeps the namespace it was made in):
    // the host a unit runs on, whose Prometheus scrapes it; a --netns
    // namespace is often reachable from nowhere else (issue 50).
    let (metrics, _endpoint) = match args.metrics {
        Some(addr) => {
            let mut reg = tcpaccel_metrics::Registry::default();
            let m = Arc::new(tcpaccel_lanes::metrics::LanesMetrics::register(&mut reg));
            let ep = tcpaccel_metrics::Endpoint::serve(addr, Arc::new(reg)).with_context(|| {
                match &args.netns {
                    Some(ns) => format!(
                        "starting the metrics endpoint on {addr} in the namespace tcpaccel was started in \
                         (not in --netns {ns}; for an endpoint there, run `ip netns exec {ns} tcpaccel lanes ...` \
                         without --netns)"
                    ),
                    None => format!("starting the metrics endpoint on {addr}"),
                }
            })?;
            eprintln!("metrics on http://{}/metrics", ep.addr());
            (Some(m), Some(ep))
        }
        None => (None, None),
    };
    if let Some(ns) = &args.netns {
        // A single-threaded daemon: move this thread; the probe thread it
        // spawns inherits the namespace.
        tcpaccel_sys::netns::enter(ns).with_context(|| format!("entering network namespace {ns:?}"))?;
    }
    let label = args.netns.as_ref().map(|n| format!("namespace {n:?}")).unwrap_or("this namespace".into());
    if args.check {
        tcpaccel_lanes::env::check_in(&cfg, args.netns.as_deref())
            .map_err(|e| classify_env(with_hint(e, &args)))?;
        tcpaccel_sys::mptcp::EventListener::open()
            .map_err(|e| anyhow::Error::new(Fail::Feature(format!("mptcp_pm events: {e}"))))?;
        println!("lanes configuration {} is usable in {label}", args.config.display());
        return Ok(Verdict::Ok);
    }
    let stop = exit::stop_on_signal()?;
    // SIGHUP reads the file again (policy, switch_to, probe timing; see
    // Tracker::reload); connections are kept either way.
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())
        .context("installing SIGHUP handling")?;
    let opts = tcpaccel_lanes::Options {
        netns: args.netns.clone(),
        format: if args.json { tcpaccel_lanes::Format::Json } else { tcpaccel_lanes::Format::Text },
        duration,
        reload: Some(tcpaccel_lanes::Reload { requested: hup, path: args.config.clone() }),
        metrics,
    };
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    match tcpaccel_lanes::run(cfg, &opts, &mut lock, &stop) {
        Err(tcpaccel_lanes::DaemonError::Env(e)) => Err(classify_env(with_hint(e, &args))),
        Ok(summary) => {
            tracing::info!(
                "lanes: {} connections, {} switches, {} failed commands",
                summary.connections,
                summary.switches,
                summary.failed_commands
            );
            Ok(Verdict::Ok)
        }
        Err(e) if e.is_missing_feature() => Err(anyhow::Error::new(Fail::Feature(e.to_string()))),
        Err(e) if e.is_missing_privilege() => Err(anyhow::Error::new(Fail::Privilege(e.to_string()))),
        Err(e) if e.is_config() => Err(exit::usage(e.to_string())),
        Err(e) => Err(anyhow::Error::new(e).context("lanes daemon")),
    }
}

/// A [`EnvError::NotHere`] with where the lanes' addresses are: a node of
/// a network `net up` made (`net exec NODE --`), else a namespace under
/// /run/netns (`--netns`). Other errors as they are.
fn with_hint(e: EnvError, args: &Args) -> EnvError {
    let EnvError::NotHere { addrs, ns, .. } = e else { return e };
    let command = format!(
        "tcpaccel lanes --config {}{}",
        args.config.display(),
        if args.check { " --check" } else { "" }
    );
    let hint = where_lanes_are(&addrs, &command);
    EnvError::NotHere { addrs, ns, hint }
}

/// "; they are on node h1 ...": the place holding most of `addrs`.
fn where_lanes_are(addrs: &[IpAddr], command: &str) -> String {
    let runs: Vec<_> =
        tcpaccel_net::state::list().unwrap_or_default().into_iter().filter(|r| r.is_live()).collect();
    let held = |n: &tcpaccel_net::state::NodeState| {
        let on: Vec<IpAddr> = n
            .interfaces
            .iter()
            .flat_map(|i| [&i.addr, &i.addr6])
            .filter_map(|a| a.as_deref()?.split('/').next()?.parse().ok())
            .collect();
        addrs.iter().filter(|a| on.contains(a)).count()
    };
    let node = runs
        .iter()
        .flat_map(|r| r.nodes.iter().map(move |n| (r, n)))
        .map(|(r, n)| (held(n), r, n))
        .filter(|(k, _, _)| *k > 0)
        .max_by_key(|(k, _, _)| *k);
    if let Some((_, run, node)) = node {
        let pick = if runs.len() > 1 { format!(" --run {}", run.run_id) } else { String::new() };
        return format!(
            "; they are on node {} of network {} (namespace {}): `tcpaccel net exec{pick} {} -- {command}`, \
             or add `--netns {}`",
            node.name, run.run_id, node.ns, node.name, node.ns
        );
    }
    let wanted = addrs.to_vec();
    let best = tcpaccel_sys::netns::list()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|ns| {
            let w = wanted.clone();
            let k = tcpaccel_sys::netns::run_in(&ns, move || {
                w.iter().filter(|a| tcpaccel_lanes::env::address_exists(**a)).count()
            })
            .ok()?;
            (k > 0).then_some((k, ns))
        })
        .max_by_key(|(k, _)| *k);
    match best {
        Some((_, ns)) => format!("; they are in namespace {ns}: add `--netns {ns}` (or run `ip netns exec {ns} {command}`)"),
        None => "; no namespace under /run/netns has them either: compare the [[peer]] addresses with `ip address`"
            .into(),
    }
}

fn classify_env(e: EnvError) -> anyhow::Error {
    if e.is_missing_feature() {
        anyhow::Error::new(Fail::Feature(e.to_string()))
    } else {
        exit::usage(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flags that are not settings: the file itself, and an action.
    const INVOCATION_ONLY: [&str; 2] = ["config", "check"];

    /// Every flag but the invocation-only ones is a top-level key of the
    /// configuration file with the same name, and every top-level key that
    /// is not a section is a flag: one set of names (issue 26).
    #[test]
    fn flags_and_file_keys_are_one_set() {
        let cmd = <Args as clap::Args>::augment_args(clap::Command::new("lanes"));
        let flags: std::collections::BTreeSet<String> = cmd
            .get_arguments()
            .map(|a| a.get_id().as_str().to_string())
            .filter(|id| !INVOCATION_ONLY.contains(&id.as_str()) && id != "help")
            .collect();
        // The file schema, every optional key filled so that it shows.
        let mut file = tcpaccel_lanes::config::ConfigFile {
            run: tcpaccel_lanes::config::RunSettings {
                netns: Some("ns".into()),
                json: true,
                duration: Some(std::time::Duration::from_secs(1)),
                metrics: Some("127.0.0.1:9100".parse().unwrap()),
            },
            ..Default::default()
        };
        let ip = std::net::IpAddr::from([10, 0, 0, 1]);
        file.peer("p", (ip, ip), [(ip, ip)]);
        let serde_json::Value::Object(top) = serde_json::to_value(&file).unwrap() else {
            panic!("not an object")
        };
        let sections = ["policy", "signals", "probe", "peer"];
        let keys: std::collections::BTreeSet<String> =
            top.keys().filter(|k| !sections.contains(&k.as_str())).map(|k| k.replace('_', "-")).collect();
        assert_eq!(flags, keys, "flags (left) and the file's top-level keys (right) differ");
        assert!(sections.iter().all(|s| top.contains_key(*s)), "{top:?}");
    }
}
