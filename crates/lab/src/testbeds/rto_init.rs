//! The initial RTO of a time-dilated run (issue 25). A run at scale D
//! multiplies TCP's minimum RTO by D on every host route, but a
//! connection's first timeout (SYN, SYN-ACK, and data before the first RTT
//! sample) is the kernel's fixed 1 s whatever the route says, so at D = 8 a
//! lost SYN costs 125 ms of experiment time instead of 1 s. The one knob is
//! a BPF sock_ops program answering `BPF_SOCK_OPS_TIMEOUT_INIT`
//! (`bpf/rto_init.bpf.c`): attached to the cgroup2 root, it gives the
//! sockets of the run's host namespaces, and only those, the scaled value.

use std::fs::File;
use std::time::Duration;

use anyhow::{Context, Result};
use tcpaccel_sys::bpf::{Link, Loaded, Object, ATTACH_CGROUP_SOCK_OPS, UPDATE_ANY};

/// The program, built by scripts/build-bpf.sh from `bpf/rto_init.bpf.c`.
pub const OBJECT: &[u8] = include_bytes!("../../bpf/rto_init.bpf.o");
const PROGRAM: &str = "tcpaccel_rto_init";
const MAP: &str = "lab_rto_init";

/// `TCP_TIMEOUT_INIT`: the kernel's initial RTO.
pub const KERNEL_RTO_INIT: Duration = Duration::from_secs(1);
/// `TCP_RTO_MAX`: the kernel caps an initial RTO from BPF there.
pub const KERNEL_RTO_MAX: Duration = Duration::from_secs(120);

/// `rto` in ticks of `jiffy`, rounded up as the kernel's msecs_to_jiffies
/// rounds, and capped at `TCP_RTO_MAX` as tcp_timeout_init caps it.
pub fn to_jiffies(rto: Duration, jiffy: Duration) -> u32 {
    let tick = jiffy.as_nanos().max(1);
    let n = rto.min(KERNEL_RTO_MAX).as_nanos().div_ceil(tick);
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The program attached, answering for the namespaces it was given; it
/// detaches when dropped.
pub struct InitialRto {
    /// The initial RTO the sockets get, a whole number of ticks.
    pub rto: Duration,
    _loaded: Loaded,
    _link: Link,
}

impl InitialRto {
    /// Loads the program, tells it `rto` for each network namespace in
    /// `netns_cookies` (as `bpf_get_netns_cookie` gives them) and attaches
    /// it to the cgroup2 root.
    pub fn attach(netns_cookies: &[u64], rto: Duration) -> Result<InitialRto> {
        let jiffy = tcpaccel_sys::sockopt::jiffy().context("the kernel's tick")?;
        let jiffies = to_jiffies(rto, jiffy);
        let loaded = Object::parse(OBJECT)?.load().context("loading the initial-RTO BPF program")?;
        let map = loaded.map(MAP)?;
        for cookie in netns_cookies {
            map.update(cookie, &jiffies, UPDATE_ANY)?;
        }
        let root =
            tcpaccel_sys::cgroup::cgroup2_mount().context("the initial RTO needs the cgroup2 mount")?;
        let dir = File::open(&root).with_context(|| format!("opening {}", root.display()))?;
        let link = loaded
            .program(PROGRAM)?
            .attach_cgroup(&dir, ATTACH_CGROUP_SOCK_OPS)
            .with_context(|| format!("attaching the initial-RTO program to {}", root.display()))?;
        Ok(InitialRto { rto: jiffy * jiffies, _loaded: loaded, _link: link })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_initial_rto_becomes_whole_ticks_rounded_up_and_capped() {
        let tick = Duration::from_millis(4);
        assert_eq!(to_jiffies(Duration::from_secs(8), tick), 2000);
        assert_eq!(to_jiffies(Duration::from_millis(1001), tick), 251);
        assert_eq!(to_jiffies(Duration::from_micros(1), tick), 1);
        assert_eq!(to_jiffies(Duration::from_secs(128), tick), 30_000);
        assert_eq!(to_jiffies(Duration::from_secs(1), Duration::from_micros(3333)), 301);
    }

    #[test]
    fn the_object_has_the_program_and_its_map() {
        let obj = Object::parse(OBJECT).unwrap();
        assert_eq!(obj.program_names().collect::<Vec<_>>(), vec![PROGRAM]);
        let (name, def) = obj.maps().next().unwrap();
        assert_eq!((name, def.key_size, def.value_size), (MAP, 8, 4));
    }
}
