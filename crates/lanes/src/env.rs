//! Checks of the network namespace the daemon runs in, before it starts:
//! MPTCP present and enabled, the userspace path manager selected, and every
//! configured local address present.
//!
//! What it is: reads of per-namespace sysctls under `/proc/sys/net/mptcp`
//! and a bind test per address, all from the calling thread (which must
//! already be inside the namespace). What it is not: it changes nothing; the
//! operator (or the lab) sets `net.mptcp.path_manager=userspace`.

use std::net::{IpAddr, SocketAddr, UdpSocket};

use crate::config::Config;

/// Why the namespace cannot run the daemon.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("MPTCP is not available in this kernel or namespace (no /proc/sys/net/mptcp)")]
    NoMptcp,
    /// `prefix` is what the suggested command needs to act in that
    /// namespace (`ip netns exec NS `), empty for the caller's own.
    #[error(
        "MPTCP is disabled in {ns} (net.mptcp.enabled = 0); enable it with `{prefix}sysctl -w net.mptcp.enabled=1`"
    )]
    MptcpDisabled { ns: String, prefix: String },
    #[error(
        "{ns} uses the {found:?} MPTCP path manager; the lanes daemon needs the userspace one: \
         `{prefix}sysctl -w net.mptcp.path_manager=userspace` (or net.mptcp.pm_type=1 on kernels before 6.15)"
    )]
    NotUserspace { ns: String, found: String, prefix: String },
    #[error("configured local address {addr} ({lane}) does not exist in {ns}")]
    NoAddress { addr: IpAddr, lane: String, ns: String },
    /// No configured address at all: the daemon is in the wrong place (the
    /// host rather than a lab node, say), so nothing about this namespace's
    /// MPTCP settings is worth suggesting. `hint` says where they are, when
    /// the caller found out (see `tcpaccel lanes`), else is empty.
    #[error(
        "none of the configured local addresses ({}) is in {ns}: the daemon runs where its lanes are{hint}",
        list(.addrs)
    )]
    NotHere { addrs: Vec<IpAddr>, ns: String, hint: String },
    #[error(transparent)]
    Read(#[from] tcpaccel_sys::sysctl::SysctlError),
}

impl EnvError {
    /// True for a missing kernel feature (exit code 4), false for a
    /// configuration that does not match the namespace (exit code 2).
    pub fn is_missing_feature(&self) -> bool {
        matches!(self, EnvError::NoMptcp | EnvError::MptcpDisabled { .. } | EnvError::NotUserspace { .. })
    }
}

/// `net.mptcp.NAME` of the calling thread's namespace, `None` if absent.
fn read_sysctl(name: &str) -> Result<Option<String>, EnvError> {
    Ok(tcpaccel_sys::sysctl::read_opt(&format!("net.mptcp.{name}"))?)
}

/// The path manager this namespace selects: "kernel", "userspace", or what
/// the kernel reports.
pub fn path_manager() -> Result<String, EnvError> {
    // Linux 6.15 added the string sysctl; before it, pm_type 0 / 1.
    if let Some(pm) = read_sysctl("path_manager")? {
        return Ok(pm);
    }
    match read_sysctl("pm_type")?.as_deref() {
        Some("0") => Ok("kernel".into()),
        Some("1") => Ok("userspace".into()),
        Some(other) => Ok(format!("pm_type {other}")),
        None => Err(EnvError::NoMptcp),
    }
}

fn list(addrs: &[IpAddr]) -> String {
    addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")
}

/// True when `addr` is assigned to an interface of the calling thread's
/// namespace (binding to a foreign address fails with EADDRNOTAVAIL).
pub fn address_exists(addr: IpAddr) -> bool {
    UdpSocket::bind(SocketAddr::new(addr, 0)).is_ok()
}

/// [`check`] for network namespace `netns` (`None`: the caller's own),
/// which the calling thread must already be in: messages name it and the
/// commands they suggest carry the `ip netns exec NS` they need.
pub fn check_in(cfg: &Config, netns: Option<&str>) -> Result<(), EnvError> {
    let label = netns.map_or_else(|| "this namespace".to_string(), |n| format!("namespace {n:?}"));
    let prefix = netns.map_or_else(String::new, |n| format!("ip netns exec {n} "));
    check_with(cfg, &label, &prefix)
}

/// Runs every check; `ns` names the namespace in messages.
pub fn check(cfg: &Config, ns: &str) -> Result<(), EnvError> {
    check_with(cfg, ns, "")
}

fn check_with(cfg: &Config, ns: &str, prefix: &str) -> Result<(), EnvError> {
    // First whether this is the place at all: advice on its MPTCP settings
    // would change a namespace the daemon is not meant for (issue 51: the
    // host's path manager, when the lanes are in a lab node).
    let addrs: Vec<IpAddr> = cfg.local_addresses().collect();
    if !addrs.iter().any(|a| address_exists(*a)) {
        return Err(EnvError::NotHere { addrs, ns: ns.into(), hint: String::new() });
    }
    if !tcpaccel_sys::sysctl::exists("net.mptcp.enabled") {
        return Err(EnvError::NoMptcp);
    }
    if read_sysctl("enabled")?.as_deref() == Some("0") {
        return Err(EnvError::MptcpDisabled { ns: ns.into(), prefix: prefix.into() });
    }
    let pm = path_manager()?;
    if pm != "userspace" {
        return Err(EnvError::NotUserspace { ns: ns.into(), found: pm, prefix: prefix.into() });
    }
    for (i, a) in cfg.sl_lanes.iter().enumerate() {
        if !address_exists(*a) {
            return Err(EnvError::NoAddress { addr: *a, lane: format!("SL lane sl{i}"), ns: ns.into() });
        }
    }
    for (i, a) in cfg.ll_lanes.iter().enumerate() {
        if !address_exists(*a) {
            return Err(EnvError::NoAddress { addr: *a, lane: format!("LL lane ll{i}"), ns: ns.into() });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_exists_and_a_documentation_address_does_not() {
        assert!(address_exists("127.0.0.1".parse().unwrap()));
        // 192.0.2.0/24 (TEST-NET-1) is never assigned on a test host.
        assert!(!address_exists("192.0.2.77".parse().unwrap()));
    }

    #[test]
    fn feature_errors_are_told_apart_from_config_errors() {
        assert!(EnvError::NotUserspace { ns: "x".into(), found: "kernel".into(), prefix: String::new() }
            .is_missing_feature());
        assert!(!EnvError::NoAddress {
            addr: "10.0.0.1".parse().unwrap(),
            lane: "SL".into(),
            ns: "x".into()
        }
        .is_missing_feature());
        let msg = EnvError::NotUserspace { ns: "ns a".into(), found: "kernel".into(), prefix: String::new() }
            .to_string();
        assert!(msg.contains("`sysctl -w net.mptcp.path_manager=userspace`"), "{msg}");
    }

    /// Issue 51: where none of the lanes' addresses is (the host, when the
    /// lanes are a lab node's), the check says so first and suggests no
    /// sysctl for this namespace, whatever its path manager.
    #[test]
    fn a_namespace_without_any_lane_address_is_the_wrong_place_not_a_wrong_setting() {
        let cfg = Config::parse(
            r#"
            [[peer]]
            sl = [{ local = "192.0.2.1", remote = "192.0.2.2" }]
            ll = [{ local = "198.51.100.1", remote = "198.51.100.2" }]
            "#,
            "t",
        )
        .unwrap();
        let e = check(&cfg, "this namespace").unwrap_err();
        assert!(matches!(e, EnvError::NotHere { .. }) && !e.is_missing_feature(), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("192.0.2.1, 198.51.100.1") && !msg.contains("sysctl"), "{msg}");
    }

    /// Issue 28: the command a check suggests for a namespace acts in that
    /// namespace, not on the host.
    #[test]
    fn suggested_commands_carry_the_namespace() {
        let prefix = "ip netns exec tcpaccel-1-h1 ".to_string();
        let msg = EnvError::NotUserspace {
            ns: "namespace \"tcpaccel-1-h1\"".into(),
            found: "kernel".into(),
            prefix,
        }
        .to_string();
        assert!(
            msg.contains("`ip netns exec tcpaccel-1-h1 sysctl -w net.mptcp.path_manager=userspace`"),
            "{msg}"
        );
        let msg = EnvError::MptcpDisabled { ns: "x".into(), prefix: "ip netns exec x ".into() }.to_string();
        assert!(msg.contains("`ip netns exec x sysctl -w net.mptcp.enabled=1`"), "{msg}");
    }
}
