//! [`Network`]: a [`Topology`] built out of namespaces, veth pairs, qdiscs,
//! routes, sysctls and emulators, and torn down again by its `Drop`.
//!
//! Names: every namespace is `tcpaccel-RUNID-NAME` (RUNID: 6 random hex
//! digits per network), so runs never collide and leftovers are easy to find.
//! Interface names are short because every veth end is created directly
//! inside its namespace (`ip link add X netns A type veth peer name Y netns
//! B`); they only need to be unique per namespace.
//!
//! An emulated link A—B is A.ifname ⇄ `emu-a` | emulator ns | `emu-b` ⇄
//! B.ifname, with offloads off on all four interfaces so the emulator sees
//! wire-sized frames, and IPv6 off in the emulator namespace so it never sends
//! frames of its own.
//!
//! This module runs `ip`/`tc` and writes `/proc/sys`; it does not decide
//! anything about the topology (that is [`crate::spec`]).

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tcpaccel_core::units::QueueLimit;
use tcpaccel_sys::netns;

use crate::clean::{self, NS_PREFIX};
use crate::emulator::{self, EmuHandle, EmuSummary, MeterOptions};
use crate::error::{Error, Result};
use crate::live::{self, lock, Live, LiveRef};
use crate::spec::{End, Link, LinkKind, Role, Shaping, Topology};
use crate::state::{self, EmuState, IfaceState, NodeState, RunState};
use tcpaccel_sys::command::{ip, tc};

/// Interface names inside an emulator namespace: the side towards end `a`, and towards `b`.
pub const EMU_IF_A: &str = "emu-a";
pub const EMU_IF_B: &str = "emu-b";

/// Default drop-tail queue behind a tbf when the file gives a rate but no
/// buffer: the 1000 packets of a default txqueuelen.
const DEFAULT_SHAPED_QUEUE: QueueLimit = QueueLimit::Packets(1000);

/// Namespace name of node or emulated link `name` in run `run_id`.
pub fn ns_name(run_id: &str, name: &str) -> String {
    format!("{NS_PREFIX}{run_id}-{name}")
}

/// A fresh run id: 6 hex digits no namespace or state file uses yet.
fn fresh_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        // RandomState is seeded from the OS per process; the counter and clock
        // separate calls within one process.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        h.write_u128(nanos.as_nanos());
        let id = format!("{:06x}", h.finish() & 0xff_ffff);
        let taken = clean::namespaces_with_prefix(&format!("{NS_PREFIX}{id}-")).map(|v| !v.is_empty());
        if !matches!(taken, Ok(true)) && !state::path_of(&id).exists() {
            return id;
        }
    }
}

/// One running emulator.
struct EmuLink {
    link: String,
    ns: String,
    handle: Option<EmuHandle>,
}

/// What teardown reports: the processes it stopped inside the network, each
/// emulator's final summary, and anything that could not be removed.
#[derive(Debug, Default)]
pub struct Teardown {
    /// Processes found in the namespaces: SIGTERM, SIGKILL after [`clean::STOP_GRACE`].
    pub stopped: Vec<clean::Stopped>,
    pub emulators: Vec<(String, EmuSummary)>,
    pub errors: Vec<String>,
}

/// A built topology. Dropping it (also while unwinding from a panic) stops the
/// emulators and deletes every namespace it created.
pub struct Network {
    run_id: String,
    topo: Topology,
    live: LiveRef,
    key: u64,
    emus: Vec<EmuLink>,
    started_unix: u64,
    source: Option<String>,
    source_file: Option<PathBuf>,
    meter: MeterOptions,
    done: bool,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network")
            .field("run_id", &self.run_id)
            .field("namespaces", &self.namespaces())
            .finish()
    }
}

impl Network {
    /// Builds `topo` under a fresh run id. On any failure everything built so
    /// far is removed before the error is returned. Installs the SIGINT/SIGTERM
    /// handler of `tcpaccel_sys::signals` with [`crate::live::teardown_all`]
    /// on its exit path.
    pub fn up(topo: &Topology) -> Result<Network> {
        Network::up_with(topo, &MeterOptions::default())
    }

    /// [`Network::up`] with the emulators metering as `meter` says (e.g. one
    /// CSV file per emulated link).
    pub fn up_with(topo: &Topology, meter: &MeterOptions) -> Result<Network> {
        tcpaccel_sys::signals::on_exit(live::teardown_all);
        tcpaccel_sys::signals::install().map_err(|e| Error::sys("install signal handling", e))?;
        if let Some(dir) = &meter.dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("create meter directory {}", dir.display()), e))?;
        }
        let live: LiveRef = Arc::new(Mutex::new(Live::default()));
        let key = live::register(live.clone());
        let mut net = Network {
            run_id: fresh_run_id(),
            topo: topo.clone(),
            live,
            key,
            emus: Vec::new(),
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            source: None,
            source_file: None,
            meter: meter.clone(),
            done: false,
        };
        tracing::info!(run_id = %net.run_id, "building network");
        net.build()?;
        Ok(net)
    }

    fn build(&mut self) -> Result<()> {
        let topo = self.topo.clone();
        for node in &topo.nodes {
            let ns = self.ns_of(&node.name);
            self.add_namespace(&ns)?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        for link in &topo.links {
            self.build_link(link)?;
        }
        for node in &topo.nodes {
            let ns = self.ns_of(&node.name);
            if node.role == Role::Router {
                write_sysctl(&ns, "net.ipv4.ip_forward", "1")?;
                let has_v6 = topo.ends_of(&node.name).any(|(_, e)| e.addr6.is_some());
                if has_v6 {
                    write_sysctl(&ns, "net.ipv6.conf.all.forwarding", "1")?;
                }
            }
            for (k, v) in &node.sysctls {
                write_sysctl(&ns, k, v)?;
            }
        }
        for node in &topo.nodes {
            let ns = self.ns_of(&node.name);
            for r in &node.routes {
                let dest = r.dest();
                let mut args = vec!["-n", &ns];
                if !r.to.is_v4() {
                    args.push("-6");
                }
                args.extend(["route", "replace", &dest]);
                let via = r.via.map(|v| v.to_string());
                if let Some(v) = &via {
                    args.extend(["via", v]);
                }
                if let Some(d) = &r.dev {
                    args.extend(["dev", d]);
                }
                ip(&args)?;
            }
        }
        Ok(())
    }

    fn add_namespace(&mut self, ns: &str) -> Result<()> {
        // Recorded only once created: a failure because the name exists must
        // never make teardown delete a namespace that is not ours.
        tcpaccel_sys::netns::add(ns)?;
        lock(&self.live).namespaces.push(ns.to_string());
        Ok(())
    }

    fn build_link(&mut self, link: &Link) -> Result<()> {
        let ns_a = self.ns_of(&link.a.node);
        let ns_b = self.ns_of(&link.b.node);
        match &link.kind {
            LinkKind::Veth { a_to_b, b_to_a } => {
                veth(&link.a.ifname, &ns_a, &link.b.ifname, &ns_b)?;
                for (ns, end, shaping) in [(&ns_a, &link.a, a_to_b), (&ns_b, &link.b, b_to_a)] {
                    if !link.offloads {
                        disable_offloads(ns, &end.ifname)?;
                    }
                    configure_end(ns, end, link)?;
                    shape(ns, &end.ifname, shaping, link.mtu.unwrap_or(1500))?;
                }
            }
            LinkKind::Emulated { a_to_b, b_to_a } => {
                let ns_e = self.emu_ns_of(&link.name);
                self.add_namespace(&ns_e)?;
                // Before the veths exist, so that `default` covers them. A
                // kernel without IPv6 has neither knob and needs neither.
                if tcpaccel_sys::sysctl::exists("net.ipv6.conf.all.disable_ipv6") {
                    write_sysctl(&ns_e, "net.ipv6.conf.all.disable_ipv6", "1")?;
                    write_sysctl(&ns_e, "net.ipv6.conf.default.disable_ipv6", "1")?;
                }
                veth(&link.a.ifname, &ns_a, EMU_IF_A, &ns_e)?;
                veth(EMU_IF_B, &ns_e, &link.b.ifname, &ns_b)?;
                for (ns, end) in [(&ns_a, &link.a), (&ns_b, &link.b)] {
                    disable_offloads(ns, &end.ifname)?;
                    configure_end(ns, end, link)?;
                }
                for ifname in [EMU_IF_A, EMU_IF_B] {
                    disable_offloads(&ns_e, ifname)?;
                    set_link_opts(&ns_e, ifname, link)?;
                    ip(&["-n", &ns_e, "link", "set", ifname, "up"])?;
                }
                let cfg = emulator::config(link, EMU_IF_A, EMU_IF_B, a_to_b, b_to_a, &self.meter);
                let handle = emulator::start(&ns_e, &link.name, cfg)?;
                self.emus.push(EmuLink { link: link.name.clone(), ns: ns_e, handle: Some(handle) });
            }
        }
        Ok(())
    }

    fn ns_of(&self, node: &str) -> String {
        ns_name(&self.run_id, node)
    }

    fn emu_ns_of(&self, link: &str) -> String {
        ns_name(&self.run_id, link)
    }

    /// The 6-hex-digit id of this run (part of every namespace name).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The topology this network was built from.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Every namespace this network created (nodes, then emulators, in creation order).
    pub fn namespaces(&self) -> Vec<String> {
        lock(&self.live).namespaces.clone()
    }

    /// The namespace of host or router `node`.
    pub fn ns(&self, node: &str) -> Result<String> {
        match self.topo.node(node) {
            Some(_) => Ok(self.ns_of(node)),
            None => Err(Error::UnknownNode(node.to_string())),
        }
    }

    /// The end of `link` inside `node`: its interface name and addresses.
    pub fn end(&self, node: &str, link: &str) -> Result<&End> {
        self.ns(node)?;
        let l = self.topo.link(link).ok_or_else(|| Error::UnknownLink(link.to_string()))?;
        l.end_in(node).ok_or_else(|| Error::UnknownLink(format!("{link} (it does not touch {node})")))
    }

    /// The first IPv4 address of `node`, in link order: the usual way to reach a host.
    pub fn addr(&self, node: &str) -> Result<IpAddr> {
        self.ns(node)?;
        self.topo
            .ends_of(node)
            .find_map(|(_, e)| e.addr.map(|c| c.addr))
            .ok_or_else(|| Error::UnknownNode(format!("{node} (it has no IPv4 address)")))
    }

    /// Sets sysctl `key` (dotted, e.g. `net.ipv4.tcp_ecn`) to `value` inside
    /// `node`'s namespace, as the file's `sysctl` table does at build time.
    pub fn set_sysctl(&self, node: &str, key: &str, value: &str) -> Result<()> {
        write_sysctl(&self.ns(node)?, key, value)
    }

    /// Sets `gso_max_segs` on `node`'s end of `link`: the most segments the
    /// stack puts in one GSO packet on that interface. Linux TCP always builds
    /// GSO packets (segmented in software when offloads are off) and paces per
    /// packet, so 1 makes a paced sender space single frames.
    pub fn set_gso_max_segs(&self, node: &str, link: &str, segs: u32) -> Result<()> {
        let ns = self.ns(node)?;
        let ifname = self.end(node, link)?.ifname.clone();
        let name = ifname.clone();
        // rtnetlink from a thread inside the namespace (docs/architecture.md:
        // link settings do not start `ip`).
        netns::run_in(&ns, move || {
            tcpaccel_sys::link::ifindex(&name).and_then(|i| tcpaccel_sys::link::set_gso_max_segs(i, segs))
        })
        .and_then(|r| r)
        .map_err(|e| Error::sys(format!("set gso_max_segs {segs} on {ifname} in {ns}"), e))
    }

    /// Reads sysctl `key` inside `node`'s namespace (trimmed).
    pub fn sysctl(&self, node: &str, key: &str) -> Result<String> {
        let ns = self.ns(node)?;
        Ok(tcpaccel_sys::sysctl::read_in(&ns, key)?)
    }

    /// The first IPv6 address of `node`, in link order.
    pub fn addr6(&self, node: &str) -> Result<IpAddr> {
        self.ns(node)?;
        self.topo
            .ends_of(node)
            .find_map(|(_, e)| e.addr6.map(|c| c.addr))
            .ok_or_else(|| Error::UnknownNode(format!("{node} (it has no IPv6 address)")))
    }

    /// A command that runs `argv` inside `node` (`ip netns exec NS argv..`);
    /// the caller adds stdio and spawns it.
    pub fn exec<S: AsRef<str>>(&self, node: &str, argv: &[S]) -> Result<Command> {
        let ns = self.ns(node)?;
        if argv.is_empty() {
            return Err(Error::State(format!("nothing to run in {node}: empty command")));
        }
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &ns]).args(argv.iter().map(|s| s.as_ref()));
        Ok(cmd)
    }

    /// Runs `f` on a thread inside `node`'s namespace (sockets it opens stay
    /// there) and returns its result.
    pub fn run_in<R: Send + 'static>(&self, node: &str, f: impl FnOnce() -> R + Send + 'static) -> Result<R> {
        let ns = self.ns(node)?;
        netns::run_in(&ns, f).map_err(|e| Error::sys(format!("run in {node} ({ns})"), e))
    }

    /// The emulator of emulated link `link`.
    pub fn emulator(&self, link: &str) -> Option<&EmuHandle> {
        self.emus.iter().find(|e| e.link == link).and_then(|e| e.handle.as_ref())
    }

    /// Every running emulator with its link name.
    pub fn emulators(&self) -> impl Iterator<Item = (&str, &EmuHandle)> {
        self.emus.iter().filter_map(|e| e.handle.as_ref().map(|h| (e.link.as_str(), h)))
    }

    /// The meter file of emulated link `link`, if the network meters to files.
    pub fn meter_file(&self, link: &str) -> Option<PathBuf> {
        self.emulator_ns(link).and(self.meter.path_for(link))
    }

    /// The namespace of the emulator of `link`.
    pub fn emulator_ns(&self, link: &str) -> Option<&str> {
        self.emus.iter().find(|e| e.link == link).map(|e| e.ns.as_str())
    }

    /// What a state file records about this network.
    pub fn state(&self) -> RunState {
        let nodes = self
            .topo
            .nodes
            .iter()
            .map(|n| NodeState {
                name: n.name.clone(),
                role: match n.role {
                    Role::Host => "host".into(),
                    Role::Router => "router".into(),
                },
                ns: self.ns_of(&n.name),
                interfaces: self
                    .topo
                    .ends_of(&n.name)
                    .map(|(l, e)| IfaceState {
                        link: l.name.clone(),
                        ifname: e.ifname.clone(),
                        addr: e.addr.map(|c| c.to_string()),
                        addr6: e.addr6.map(|c| c.to_string()),
                    })
                    .collect(),
            })
            .collect();
        let emulators =
            self.emus.iter().map(|e| EmuState { link: e.link.clone(), ns: e.ns.clone() }).collect();
        RunState {
            run_id: self.run_id.clone(),
            pid: std::process::id(),
            started_unix: self.started_unix,
            source: self.source.clone(),
            source_file: self.source_file.clone(),
            nodes,
            emulators,
        }
    }

    /// Writes the state file (`/run/tcpaccel/RUNID.json`) so other commands
    /// can find this network; it is removed at teardown. `source` names the
    /// topology file.
    pub fn persist(&mut self, source: Option<&str>) -> Result<PathBuf> {
        self.source = source.map(str::to_string);
        let path = state::save(&self.state())?;
        lock(&self.live).state_file = Some(path.clone());
        Ok(path)
    }

    /// [`Network::persist`] for a network built from topology file `file`:
    /// records it as written and by absolute path, so that
    /// [`state::live_from_file`] finds this run.
    pub fn persist_file(&mut self, file: &std::path::Path) -> Result<PathBuf> {
        self.source_file = std::fs::canonicalize(file).ok();
        self.persist(Some(&file.display().to_string()))
    }

    /// Stops the processes inside the network (SIGTERM, then SIGKILL after
    /// [`clean::STOP_GRACE`]), stops the emulators (collecting their
    /// summaries) and deletes every namespace and the state file. Dropping
    /// does the same, without the report.
    pub fn teardown(mut self) -> Teardown {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Teardown {
        let mut report = Teardown::default();
        if self.done {
            return report;
        }
        self.done = true;
        // First, while the links still carry traffic: a sender stopped by
        // SIGTERM still collects its receipt and prints its summary.
        report.stopped = clean::stop_processes(&self.namespaces(), clean::STOP_GRACE);
        for e in &mut self.emus {
            if let Some(h) = e.handle.take() {
                match emulator::stop(h) {
                    Ok(s) => report.emulators.push((e.link.clone(), s)),
                    Err(err) => report.errors.push(format!("emulator of link {}: {err}", e.link)),
                }
            }
        }
        // Each namespace stays in the registry until it is gone, so a second
        // signal during this teardown still finds (and deletes) the rest.
        // Reverse order: emulator namespaces before the nodes they connect.
        let namespaces = lock(&self.live).namespaces.clone();
        for ns in namespaces.iter().rev() {
            if let Err(e) = clean::delete_namespace(ns) {
                report.errors.push(format!("namespace {ns}: {e}"));
            }
            lock(&self.live).namespaces.retain(|n| n != ns);
        }
        let state_file = lock(&self.live).state_file.take();
        if let Some(p) = state_file {
            if let Err(e) = std::fs::remove_file(&p) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    report.errors.push(format!("state file {}: {e}", p.display()));
                }
            }
        }
        live::unregister(self.key);
        for e in &report.errors {
            tracing::warn!(run_id = %self.run_id, "teardown: {e}");
        }
        report
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A veth pair whose ends are created directly in their namespaces.
fn veth(if_a: &str, ns_a: &str, if_b: &str, ns_b: &str) -> Result<()> {
    ip(&["link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_b, "netns", ns_b])?;
    Ok(())
}

/// MTU and txqueuelen of one interface, when the file sets them.
fn set_link_opts(ns: &str, ifname: &str, link: &Link) -> Result<()> {
    if let Some(mtu) = link.mtu {
        ip(&["-n", ns, "link", "set", ifname, "mtu", &mtu.to_string()])?;
    }
    if let Some(q) = link.txqueuelen {
        ip(&["-n", ns, "link", "set", ifname, "txqueuelen", &q.to_string()])?;
    }
    Ok(())
}

/// Options, addresses and up for a node's end of a link.
fn configure_end(ns: &str, end: &End, link: &Link) -> Result<()> {
    set_link_opts(ns, &end.ifname, link)?;
    if let Some(a) = end.addr {
        ip(&["-n", ns, "addr", "add", &a.to_string(), "dev", &end.ifname])?;
    }
    if let Some(a) = end.addr6 {
        // nodad: the address is usable at once instead of after duplicate detection.
        ip(&["-n", ns, "-6", "addr", "add", &a.to_string(), "dev", &end.ifname, "nodad"])?;
    }
    ip(&["-n", ns, "link", "set", &end.ifname, "up"])?;
    Ok(())
}

fn disable_offloads(ns: &str, ifname: &str) -> Result<()> {
    let name = ifname.to_string();
    netns::run_in(ns, move || tcpaccel_sys::ethtool::disable_offloads(&name))
        .and_then(|r| r)
        .map_err(|e| Error::sys(format!("switch offloads off on {ifname} in {ns}"), e))
}

/// Writes one sysctl inside `ns` (`tcpaccel_sys::sysctl`).
pub(crate) fn write_sysctl(ns: &str, key: &str, value: &str) -> Result<()> {
    use tcpaccel_sys::sysctl;
    match sysctl::write_in(ns, key, value) {
        Err(e @ sysctl::SysctlError::Privilege { .. }) if key == "net.ipv4.tcp_congestion_control" => {
            // net/ipv4/tcp_cong.c: outside the initial namespace only
            // "non-restricted" algorithms may become the default.
            let allowed = sysctl::read("net.ipv4.tcp_allowed_congestion_control").unwrap_or_default();
            let why = std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{e}: outside the initial namespace the default can only be one of \
                     net.ipv4.tcp_allowed_congestion_control ({allowed}); add it there, or set it per \
                     socket (TCP_CONGESTION, allowed for root)"
                ),
            );
            Err(Error::io(format!("set sysctl {key}={value} in {ns}"), why))
        }
        r => Ok(r?),
    }
}

/// The qdiscs of one direction of a veth link: a tbf for the rate with a
/// drop-tail child for the buffer, or only the drop-tail queue.
fn shape(ns: &str, ifname: &str, s: &Shaping, mtu: u32) -> Result<()> {
    let fifo = |limit: QueueLimit| -> (String, String) {
        match limit {
            QueueLimit::Bytes(b) => ("bfifo".into(), b.to_string()),
            QueueLimit::Packets(p) => ("pfifo".into(), p.to_string()),
        }
    };
    match (s.rate, s.buffer) {
        (None, None) => {}
        (None, Some(limit)) => {
            let (kind, n) = fifo(limit);
            tc(&["-n", ns, "qdisc", "replace", "dev", ifname, "root", &kind, "limit", &n])?;
        }
        (Some(rate), limit) => {
            // Bucket: as given, or 1 ms of the rate, at least two full
            // frames, so the tbf neither stalls on one frame nor lets long
            // bursts through.
            let frame = u64::from(mtu) + 14;
            let burst = s.burst.unwrap_or((rate.bytes_per_sec() / 1000).max(2 * frame));
            let limit = limit.unwrap_or(DEFAULT_SHAPED_QUEUE);
            // tbf insists on a limit of its own even with a child queue.
            let tbf_limit = match limit {
                QueueLimit::Bytes(b) => b.max(frame),
                QueueLimit::Packets(p) => p.max(1) * frame,
            };
            tc(&[
                "-n",
                ns,
                "qdisc",
                "replace",
                "dev",
                ifname,
                "root",
                "handle",
                "1:",
                "tbf",
                "rate",
                &format!("{}bit", rate.bits_per_sec()),
                "burst",
                &burst.to_string(),
                "limit",
                &tbf_limit.to_string(),
            ])?;
            let (kind, n) = fifo(limit);
            tc(&[
                "-n", ns, "qdisc", "replace", "dev", ifname, "parent", "1:1", "handle", "10:", &kind,
                "limit", &n,
            ])?;
        }
    }
    Ok(())
}
