//! `tcpaccel`: one binary, one subcommand per tool. `main` only parses flags,
//! sets up logging, and maps results to exit codes (see [`exit`]).

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::OnceLock;

mod cmd;
mod exit;

#[derive(Parser)]
#[command(
    name = "tcpaccel",
    version,
    about = "Make TCP fast on long fat networks and multipath datacenters, and prove it in a built-in network lab.",
    after_help = "Terms the help texts and reports use (SL, LL, FCT, KS, D, BDP, PSPS…): docs/glossary.md"
)]
pub(crate) struct Cli {
    /// Log filter for diagnostics on stderr (e.g. info, debug, tcpaccel_emu=trace); also RUST_LOG.
    #[arg(long, global = true, default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start-up and matched at once: the size of the largest
// variant's flags costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Userspace link emulator: an L2 wire between two interfaces with rate, delay, buffer and loss.
    Emu(cmd::emu::Args),
    /// Build, use and tear down namespace topologies from a TOML file.
    Net(cmd::net::Args),
    /// Traffic receiver (server) for `tcpaccel send`.
    Recv(cmd::traffic::RecvArgs),
    /// Traffic sender with per-interval TCP_INFO reports.
    Send(cmd::traffic::SendArgs),
    /// The network lab: scenarios, reports, the demo, cleanup.
    Lab(cmd::lab::Args),
    /// Split-TCP relay: SOCKS5 (chainable) or fixed forwarding; `relay plan` places relays.
    Relay(cmd::relay::Args),
    /// Diagnose (and fix) host TCP tuning for a path: buffers vs BDP, idle, RTO, offloads.
    Doctor(cmd::doctor::Args),
    /// Compare pacing, BBR and buffer fixes on your own path to a `tcpaccel recv` or `iperf3 -s`, and recommend one with its command.
    Compare(cmd::compare::Args),
    /// Sample TCP_INFO of matching sockets through sock_diag at 100 Hz or more.
    Trace(cmd::trace::Args),
    /// Run an unmodified program with pacing / congestion control / buffers applied to its TCP sockets.
    Run(cmd::run::Args),
    /// In-kernel pacing for every program of a cgroup (BPF sock_ops): attach, run, status, detach.
    Pace(cmd::pace::Args),
    /// Gathering server with priority QoS, and its client.
    Gather(cmd::gather::Args),
    /// Datacenter lanes daemon on Linux MPTCP (userspace path manager).
    Lanes(cmd::lanes::Args),
    /// Print a shell completion script (e.g. `tcpaccel completions bash > /etc/bash_completion.d/tcpaccel`).
    Completions(cmd::install::CompletionsArgs),
    /// Write man pages (tcpaccel.1 and one per subcommand) into a directory.
    Man(cmd::install::ManArgs),
    /// Print the path of the LD_PRELOAD shim `run` uses, or write the built-in one elsewhere (--out).
    Shim(cmd::shim::ShimArgs),
}

/// Replaces the log filter set up in `main` (a service's `log` file key).
type SetFilter = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;
static SET_LOG_FILTER: OnceLock<SetFilter> = OnceLock::new();

/// Replaces the log filter (`--log` syntax) for the rest of the run.
pub(crate) fn set_log_filter(directives: &str) -> Result<(), String> {
    match SET_LOG_FILTER.get() {
        Some(set) => set(directives),
        None => Err("logging is not set up".into()),
    }
}

/// Diagnostics on stderr: colour only on a terminal (a service's journal
/// or a redirected file gets plain text), the filter replaceable later.
fn setup_logging(filter: &str) {
    use tracing_subscriber::EnvFilter;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_new(filter).unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter_reloading();
    let handle = builder.reload_handle();
    builder.init();
    let _ = SET_LOG_FILTER.set(Box::new(move |d: &str| {
        let f = EnvFilter::try_new(d).map_err(|e| e.to_string())?;
        handle.reload(f).map_err(|e| e.to_string())
    }));
}

/// Services hold a descriptor per connection (the relay several): raise
/// the soft RLIMIT_NOFILE, which a shell leaves at 1024, to the hard limit.
fn raise_nofile() {
    match tcpaccel_sys::rlimit::raise_nofile() {
        Ok((before, after)) if before != after => {
            tracing::info!("open-file limit raised from {before} to {after}")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot raise the open-file limit: {e}"),
    }
}

fn main() -> ExitCode {
    let parsed = Cli::command().try_get_matches().and_then(|m| Cli::from_arg_matches(&m).map(|c| (c, m)));
    let (cli, matches) = match parsed {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| cli.log.clone());
    setup_logging(&filter);
    if matches!(cli.command, Command::Relay(_) | Command::Gather(_) | Command::Lanes(_)) {
        raise_nofile();
    }
    // A reader that stops early (`tcpaccel doctor --json | head -1`) makes
    // println! panic with a broken pipe. That is not a failure: unwind (so
    // every Drop guard still tears its namespaces down) and exit 0 quietly.
    exit::quiet_broken_pipe_panics();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match cli.command {
        Command::Emu(a) => cmd::emu::run(a),
        Command::Net(a) => cmd::net::run(a),
        Command::Recv(a) => cmd::traffic::recv(a),
        Command::Send(a) => cmd::traffic::send(a),
        Command::Lab(a) => cmd::lab::run(a),
        Command::Relay(a) => {
            let none = clap::ArgMatches::default();
            cmd::relay::run(a, matches.subcommand_matches("relay").unwrap_or(&none))
        }
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Pace(a) => cmd::pace::run(a),
        Command::Gather(a) => cmd::gather::run(a),
        Command::Lanes(a) => cmd::lanes::run(a),
        Command::Completions(a) => cmd::install::completions(a, Cli::command()),
        Command::Man(a) => cmd::install::man(a, Cli::command()),
        Command::Shim(a) => cmd::shim::shim(a),
    }));
    let result = match result {
        Ok(r) => r,
        Err(payload) if exit::is_broken_pipe_panic(payload.as_ref()) => return ExitCode::SUCCESS,
        Err(payload) => std::panic::resume_unwind(payload),
    };
    exit::code(result)
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every flag and positional of every subcommand, with the path to it.
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String, String)>) {
        for a in cmd.get_arguments() {
            let name = a.get_long().map(|l| format!("--{l}")).unwrap_or_else(|| a.get_id().to_string());
            if matches!(name.as_str(), "--help" | "--version") {
                continue;
            }
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            out.push((path.to_string(), name, help));
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_flag_of_every_subcommand_has_help() {
        let mut args = Vec::new();
        walk(&Cli::command(), "tcpaccel", &mut args);
        assert!(args.len() > 100, "walked only {} arguments", args.len());
        let empty: Vec<String> =
            args.iter().filter(|(_, _, h)| h.trim().is_empty()).map(|(p, n, _)| format!("{p} {n}")).collect();
        assert!(empty.is_empty(), "arguments without help text:\n{}", empty.join("\n"));
    }

    #[test]
    fn every_subcommand_has_an_about_line() {
        fn check(cmd: &clap::Command, path: &str, bad: &mut Vec<String>) {
            for sub in cmd.get_subcommands() {
                let p = format!("{path} {}", sub.get_name());
                if sub.get_name() != "help" && sub.get_about().is_none_or(|a| a.to_string().trim().is_empty())
                {
                    bad.push(p.clone());
                }
                check(sub, &p, bad);
            }
        }
        let mut bad = Vec::new();
        check(&Cli::command(), "tcpaccel", &mut bad);
        assert!(bad.is_empty(), "subcommands without a description:\n{}", bad.join("\n"));
    }
}
