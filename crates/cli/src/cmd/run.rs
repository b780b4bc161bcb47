//! `tcpaccel run [OPTIONS] -- COMMAND ARGS`: runs an unmodified program with
//! pacing, congestion control, buffer sizes or MPTCP applied to its TCP
//! sockets, through the `libtcpaccel_preload.so` shim (crates/preload).
//!
//! Pacing goes through the cgroup pacer when it can (`--pace-via auto`:
//! root, a cgroup2 mount and a kernel that loads the BPF program): the
//! program runs in a new cgroup with `tcpaccel pace`'s sock_ops program
//! attached, which reaches static binaries and MPTCP subflows too (the
//! kernel refuses SO_MAX_PACING_RATE on an MPTCP socket, so the shim cannot
//! pace `--mptcp`). Otherwise the shim paces. Which path was taken, and
//! why, is said on stderr. The shim is still preloaded for `--cc`,
//! buffers, `--mptcp` and `--bind`.
//!
//! Rates are on-wire rates, as everywhere in tcpaccel: `static:500mbit` fills
//! 500 Mbit/s of Ethernet wire, i.e. paces TCP payload at 500 × 1448/1538
//! (`Framing::ETHERNET_1500_TS`, applied by the shim; the MSS of a program's
//! socket is not known before it connects). `--pace` takes the one pacing
//! grammar (`tcpaccel_core::pace_spec`), and the shim is handed the parsed
//! value in that grammar's form.

use crate::cmd::install::SHIM_FILE;
use crate::cmd::values;
use crate::exit::{self, Verdict};
use anyhow::Context;
use std::ffi::OsString;
use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use tcpaccel_core::pace_spec::PaceSpec;
use tcpaccel_core::units::Bytes;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Pacing: none, static:RATE (on-wire, e.g. static:500mbit), dynamic (cwnd·mss/RTT, [PSPacer] eq. 1), dynamic:RATE (with a ceiling).
    #[arg(long, default_value = "none", value_parser = values::pace_own_dynamic)]
    pace: PaceSpec,
    /// Congestion control for the program's TCP sockets (see net.ipv4.tcp_available_congestion_control).
    #[arg(long)]
    cc: Option<String>,
    /// SO_SNDBUF before connect (e.g. 12.5MB). Disables the kernel's autotuning for that socket.
    #[arg(long)]
    sndbuf: Option<Bytes>,
    /// SO_RCVBUF before connect (sets the window scale the handshake negotiates).
    #[arg(long)]
    rcvbuf: Option<Bytes>,
    /// Make the program's TCP sockets MPTCP (like mptcpize); falls back to TCP if MPTCP is unavailable.
    #[arg(long)]
    mptcp: bool,
    /// Bind outgoing TCP/MPTCP sockets to this source address (e.g. the address of a lanes short-flow lane, SL).
    #[arg(long)]
    bind: Option<IpAddr>,
    /// How to pace: auto (the cgroup pacer when root, cgroup2 and BPF allow, else the shim), cgroup, or preload.
    #[arg(long, value_enum, default_value = "auto")]
    pace_via: PaceVia,
    #[command(flatten)]
    precise: crate::cmd::pace::PreciseArgs,
    /// Append a line per socket touched (what was applied, what failed) to this file.
    #[arg(long)]
    shim_log: Option<PathBuf>,
    /// The shim to preload (default: $TCPACCEL_PRELOAD_LIB, libtcpaccel_preload.so beside this executable or in ../lib/tcpaccel, else the copy built into tcpaccel).
    #[arg(long)]
    preload: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

/// Which mechanism paces the program's sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PaceVia {
    Auto,
    Cgroup,
    Preload,
}

/// Picks the pacing path for `--pace-via`: `Ok(true)` for the cgroup
/// pacer, `Ok(false)` with the reason for the shim; `cgroup` insists.
fn choose_cgroup(via: PaceVia) -> anyhow::Result<Result<(), String>> {
    match via {
        PaceVia::Preload => Ok(Err("--pace-via preload".into())),
        PaceVia::Auto => Ok(if !tcpaccel_sys::privilege::is_root() {
            Err("not root".into())
        } else {
            tcpaccel_pacer::probe().map_err(|e| e.to_string())
        }),
        PaceVia::Cgroup => {
            crate::cmd::pace::check_available()?;
            tcpaccel_pacer::probe().map_err(crate::cmd::pace::pacer_err)?;
            Ok(Ok(()))
        }
    }
}

/// The value of TCPACCEL_PACE for the shim: the pacing in the grammar's own
/// form (the shim parses it with the same grammar and converts the on-wire
/// rate to payload bytes/s itself), or nothing for `none`.
pub(crate) fn pace_env(pace: PaceSpec) -> Option<String> {
    (pace != PaceSpec::None).then(|| pace.to_string())
}

fn available_cc() -> Vec<String> {
    tcpaccel_sys::sysctl::read_words("net.ipv4.tcp_available_congestion_control").unwrap_or_default()
}

/// The shim to preload: --preload, $TCPACCEL_PRELOAD_LIB, a file beside the
/// binary (cargo build) or in deps/ (cargo test), `../lib/tcpaccel/` (the
/// .deb's /usr/lib/tcpaccel), and last the copy embedded in this binary,
/// written to a private cache file (`cargo install` installs no libraries).
pub(crate) fn find_shim(explicit: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let named: Vec<PathBuf> =
        explicit.into_iter().chain(std::env::var_os("TCPACCEL_PRELOAD_LIB").map(PathBuf::from)).collect();
    // A path the user named must exist: falling back to another shim would hide the mistake.
    if let Some(p) = named.first() {
        return if p.is_file() {
            check_preloadable(p.clone())
        } else {
            Err(exit::usage(format!(
                "the preload shim {} does not exist (from --preload or TCPACCEL_PRELOAD_LIB)",
                p.display()
            )))
        };
    }
    let exe_dir = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.to_path_buf()));
    let candidates: Vec<PathBuf> = exe_dir
        .into_iter()
        .flat_map(|dir| {
            [
                dir.join(SHIM_FILE),
                dir.join("deps").join(SHIM_FILE),
                dir.join("../lib/tcpaccel").join(SHIM_FILE),
            ]
        })
        .collect();
    // The newest: `cargo test` refreshes deps/ but not the copy beside the
    // binary, and a stale shim would not read what this binary passes it.
    let newest = candidates
        .iter()
        .filter(|p| p.is_file())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    match newest {
        // Canonical: /usr/lib/tcpaccel/…, not /usr/bin/../lib/tcpaccel/….
        Some(p) => check_preloadable(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())),
        None => check_preloadable(crate::cmd::install::embedded_shim()?),
    }
}

/// LD_PRELOAD splits its list at spaces and colons: a path with either cannot be preloaded.
fn check_preloadable(p: PathBuf) -> anyhow::Result<PathBuf> {
    let s = p.to_string_lossy();
    if s.contains([' ', ':']) {
        return Err(exit::usage(format!(
            "the preload shim path {s:?} contains a space or colon, which LD_PRELOAD cannot carry; \
             copy it elsewhere (`tcpaccel shim --out PATH`) and pass --preload PATH"
        )));
    }
    Ok(p)
}

pub(crate) fn run(a: Args) -> anyhow::Result<Verdict> {
    let shim_pace = pace_env(a.pace);
    if let Some(cc) = &a.cc {
        let avail = available_cc();
        if !avail.is_empty() && !avail.contains(cc) {
            return Err(exit::usage(format!(
                "--cc {cc:?} is not available in this kernel; available: {}",
                avail.join(", ")
            )));
        }
    }
    // The cgroup path, when pacing is asked for and the host allows it.
    let cgroup_cfg = match shim_pace {
        None => None,
        Some(_) => {
            let cfg = crate::cmd::pace::RuleArgs::single(a.pace).config()?;
            match choose_cgroup(a.pace_via)? {
                Ok(()) => {
                    eprintln!("tcpaccel run: pacing {} through the cgroup pacer (BPF sock_ops)", a.pace);
                    Some(cfg)
                }
                Err(why) => {
                    eprintln!(
                        "tcpaccel run: pacing {} through the LD_PRELOAD shim (cgroup pacer not used: {why})",
                        a.pace
                    );
                    if a.mptcp {
                        eprintln!("tcpaccel run: warning: the kernel refuses SO_MAX_PACING_RATE on MPTCP sockets; only the cgroup pacer paces --mptcp (its subflows)");
                    }
                    None
                }
            }
        }
    };
    let shim_needed = cgroup_cfg.is_none() && shim_pace.is_some()
        || a.cc.is_some()
        || a.sndbuf.is_some()
        || a.rcvbuf.is_some()
        || a.mptcp
        || a.bind.is_some();
    let mut cmd = std::process::Command::new(&a.command[0]);
    cmd.args(&a.command[1..]);
    if shim_needed {
        let shim = find_shim(a.preload)?;
        let preload = match std::env::var_os("LD_PRELOAD") {
            Some(old) if !old.is_empty() => {
                let mut s = shim.clone().into_os_string();
                s.push(":");
                s.push(old);
                s
            }
            _ => shim.clone().into_os_string(),
        };
        cmd.env("LD_PRELOAD", preload);
    }
    let set = |cmd: &mut std::process::Command, k: &str, v: Option<String>| match v {
        Some(v) => {
            cmd.env(k, v);
        }
        None => {
            cmd.env_remove(k);
        }
    };
    set(&mut cmd, "TCPACCEL_PACE", if cgroup_cfg.is_some() { None } else { shim_pace });
    set(&mut cmd, "TCPACCEL_CC", a.cc);
    set(&mut cmd, "TCPACCEL_SNDBUF", a.sndbuf.map(|b| b.0.to_string()));
    set(&mut cmd, "TCPACCEL_RCVBUF", a.rcvbuf.map(|b| b.0.to_string()));
    set(&mut cmd, "TCPACCEL_MPTCP", a.mptcp.then(|| "1".to_string()));
    set(&mut cmd, "TCPACCEL_BIND", a.bind.map(|b| b.to_string()));
    set(&mut cmd, "TCPACCEL_LOG", a.shim_log.map(|p| p.display().to_string()));
    // The program's destinations are its own: --precise needs --precise-dev.
    let capped = a.precise.apply(&[a.pace], None, &[], "tcpaccel run")?;
    if let Some(cfg) = cgroup_cfg {
        // We must outlive the program to detach and remove its cgroup.
        let say = crate::cmd::pace::Say { who: "tcpaccel run", json: false };
        let status = crate::cmd::pace::run_paced(&cfg, None, cmd, &format!("{:?}", a.command[0]), say)?;
        drop(capped);
        std::process::exit(crate::cmd::pace::exit_code(status));
    }
    if let Some(capped) = capped {
        // The cap must be put back when the program ends: wait for it
        // instead of exec (SIGINT/SIGTERM reach it through the terminal).
        let _stop = exit::stop_on_signal()?;
        let status = cmd.status().with_context(|| format!("cannot run {:?}", a.command[0]))?;
        drop(capped);
        std::process::exit(crate::cmd::pace::exit_code(status));
    }
    // exec replaces this process: the program keeps our pid, signals and exit code.
    let err = cmd.exec();
    Err(err).with_context(|| format!("cannot run {:?}", a.command[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pace_forms() {
        let env = |s: &str| values::pace_own_dynamic(s).map(pace_env);
        assert_eq!(env("none").unwrap(), None);
        assert_eq!(env("dynamic").unwrap().as_deref(), Some("dynamic"));
        assert_eq!(env("static:20mbit").unwrap().as_deref(), Some("static:20Mbit/s"));
        assert_eq!(env("dynamic:2.5MB/s").unwrap().as_deref(), Some("dynamic:20Mbit/s"));
        for bad in ["static:0", "static:fast", "static:-1mbit", "turbo", "static:", "dynamic=loop"] {
            let e = env(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }
}
