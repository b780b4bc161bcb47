//! tcpaccel-sys: the only crate of tcpaccel with `unsafe` code and raw syscalls.
//!
//! Each module wraps one kernel interface behind a safe API with errors that
//! name the interface, namespace or socket involved. Every `unsafe` block has
//! a `// SAFETY:` comment. Nothing here decides policy; it only acts.

pub mod error;
pub use error::{Error, Result};

/// Privilege checks (root / CAP_NET_ADMIN).
pub mod privilege;

/// BPF: a minimal object loader, maps, cgroup links, pins (tcpaccel pace).
pub mod bpf;
/// cgroup v2: the mount, cgroups by path or id, throwaway cgroups.
pub mod cgroup;
/// Running `ip` and `tc` (iproute2): one runner, failures name the command line and stderr.
pub mod command;
/// sock_diag / inet_diag netlink dumps of TCP sockets with their tcp_info.
pub mod diag;
/// ethtool ioctl: switch TSO/GSO/GRO/tx-checksum offloads off.
pub mod ethtool;
/// The one EINTR policy and the one poll(2) wrapper of the crate.
pub mod io;
/// rtnetlink for per-frame pacing: a destination's output device, a device's GSO limits, a GSO cap guard.
pub mod link;
/// MPTCP generic netlink (`mptcp_pm`): path-manager commands and events.
pub mod mptcp;
/// The netlink layer under diag and mptcp: message codec, attributes, one socket type.
pub mod netlink;
/// Network namespaces: enter by name (setns), run a closure inside one.
pub mod netns;
/// AF_PACKET raw sockets bound to an interface (batched receive, send).
pub mod packet;
/// The handshake-RTT probe: one TCP handshake timed, from a chosen local address.
pub mod probe;
/// Signals to other processes: kill(2), and pidfds that a reused pid cannot fool.
pub mod process;
/// Per-core CPU times from /proc/stat (idle, softirq, ...), for the fidelity monitor.
pub mod procstat;
/// rtnetlink qdisc dumps: every qdisc of a namespace with its counters (sent, backlog, drops, overlimits).
pub mod qdisc;
/// RLIMIT_NOFILE: read it, raise the soft limit to the hard one.
pub mod rlimit;
/// rtnetlink IPv4 routes: create or replace, with ECMP gateways and a locked rto_min.
pub mod route;
/// SIGINT/SIGTERM: one handler thread, foreground subscribers, clean-up hooks on the exit path.
pub mod signals;
/// setsockopt/getsockopt helpers: SO_MAX_PACING_RATE, TCP_CONGESTION, buffers, TCP_WINDOW_CLAMP, ...
pub mod sockopt;
/// splice(2) and pipes for zero-copy relaying; SO_LINGER helpers live in sockopt.
pub mod splice;
/// Sysctls: the one reader and writer of /proc/sys, here or in a named network namespace.
pub mod sysctl;
/// The TCP metrics cache (`tcp_metrics` generic netlink): forget one destination's entries.
pub mod tcp_metrics;
/// `struct tcp_info`, parsed by length so older and newer kernels work.
pub mod tcpinfo;
/// `require_root` and the naming convention of root-only tests.
pub mod testing;
