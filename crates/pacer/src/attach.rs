//! Attach, inspect and detach: the shell around the BPF program.
//!
//! An attachment is the program linked to one cgroup with its maps filled
//! from a [`PaceConfig`]. Every attachment is pinned under
//! `/sys/fs/bpf/tcpaccel/pace-<cgroup id>/` (the link and the four maps), so
//! that `status` and `detach` in another process find it, and one cgroup
//! cannot get two. [`Attachment`] is a guard: dropped without
//! [`Attachment::persist`] (the end of `pace run`, a panic, a signal that
//! the caller turns into an orderly return) it detaches, releases and
//! removes its pins. Only SIGKILL leaves pins behind; `pace detach --all`
//! removes them.
//!
//! ## Releasing on detach
//! A socket keeps the SO_MAX_PACING_RATE the program set after the program
//! is gone, and an idle socket gets no callback that could undo it. So a
//! detach, before it stops the program:
//! 1. flags every rule `RULE_RELEASE`: the program paces no new connection
//!    and lifts the cap of every socket it paced on that socket's next RTT
//!    sample (every paced socket has RTT callbacks on, static ones too);
//! 2. looks for every socket the program paced (the `pace_socks` map, keyed
//!    by socket cookie) among the open file descriptors of every process
//!    (pidfd_getfd, SO_COOKIE) and sets its cap back to unlimited;
//! 3. waits up to [`RELEASE_WAIT`] (or what the caller gives) for the
//!    program to release the rest: sockets no file descriptor leads to,
//!    which are MPTCP subflows (their MPTCP socket refuses the option) and
//!    sockets being closed. A subflow that carries data is released within
//!    a round trip; an idle one is not, and is counted as unreachable;
//! 4. stops the program (BPF_LINK_DETACH) and removes the pins.
//!
//! The kernel's own pacing stays switched on for a released socket (its
//! rate is the kernel's `2·cwnd·mss/srtt` or `1.2·…`, not a cap); a socket
//! option cannot switch it off again.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use tcpaccel_sys::bpf::{self, Link, Map, Object, ATTACH_CGROUP_SOCK_OPS, UPDATE_ANY};

use crate::abi::{DstKey, RuleAbi, RuleStats, SockState, MAX_RULES, RULE_NONE, RULE_RELEASE};
use crate::cgroup::Cgroup;
use crate::error::PacerError;
use crate::rules::{Dest, PaceConfig, RulePace};
use crate::PACE_OBJECT;

const PROGRAM: &str = "tcpaccel_pace";
/// How long a detach waits by default for the program to release the
/// sockets no file descriptor reaches (step 3 of the module docs).
pub const RELEASE_WAIT: Duration = Duration::from_secs(1);
const MAPS: [&str; 4] = ["pace_rules", "pace_stats", "pace_dst", "pace_socks"];

/// Where all tcpaccel pins live.
pub fn pin_root() -> PathBuf {
    Path::new(bpf::BPFFS).join("tcpaccel")
}

/// Pin directory of the attachment to cgroup `id`.
pub fn pin_dir(cgroup_id: u64) -> PathBuf {
    pin_root().join(format!("pace-{cgroup_id}"))
}

/// The program, attached and configured.
#[derive(Debug)]
pub struct Attachment {
    pub cgroup: Cgroup,
    pins: PathBuf,
    link: Option<Link>,
    maps: BTreeMap<String, Map>,
    persist: bool,
}

/// Loads the program, fills its maps and attaches it to `cgroup`.
pub fn attach(cgroup: &Cgroup, cfg: &PaceConfig) -> Result<Attachment, PacerError> {
    let pins = pin_dir(cgroup.id);
    if pins.join("link").exists() {
        return Err(PacerError::AlreadyAttached { path: cgroup.shown(), pins });
    }
    bpf::ensure_bpffs(Path::new(bpf::BPFFS))?;
    let obj = Object::parse(PACE_OBJECT)?;
    let mut loaded = obj.load()?;
    let (rules, dst) = cfg.tables();
    let rule_map = loaded.map("pace_rules")?;
    for (i, r) in rules.iter().enumerate() {
        rule_map.update(&(i as u32), r, UPDATE_ANY)?;
    }
    let dst_map = loaded.map("pace_dst")?;
    for (k, v) in &dst {
        dst_map.update(k, v, UPDATE_ANY)?;
    }
    fs::create_dir_all(&pins)
        .map_err(|e| PacerError::Io { op: format!("create {}", pins.display()), source: e })?;
    let maps = std::mem::take(&mut loaded.maps);
    // From here on the guard owns the cleanup.
    let mut a = Attachment { cgroup: cgroup.clone(), pins, link: None, maps, persist: false };
    for name in MAPS {
        a.maps.get(name).ok_or_else(|| missing(name))?.pin(&a.pins.join(name))?;
    }
    let link = loaded.program(PROGRAM)?.attach_cgroup(&cgroup.dir()?, ATTACH_CGROUP_SOCK_OPS)?;
    link.pin(&a.pins.join("link"))?;
    a.link = Some(link);
    tracing::debug!(cgroup = %cgroup.shown().display(), "pacing attached");
    Ok(a)
}

fn missing(name: &str) -> PacerError {
    PacerError::Sys(tcpaccel_sys::Error::Other { op: "BPF object".into(), msg: format!("no map {name}") })
}

/// Bytes the paced sockets sent (acknowledged) and received, as sampled
/// while they were open ([`Attachment::sample_traffic`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Per socket cookie: (bytes acknowledged, bytes received), the largest seen.
    pub by_socket: BTreeMap<u64, (u64, u64)>,
}

impl Traffic {
    /// (sent, received) over every socket seen.
    pub fn totals(&self) -> (u64, u64) {
        self.by_socket.values().fold((0, 0), |(s, r), (a, b)| (s + a, r + b))
    }

    /// A warning when pacing could not have mattered: the program mostly
    /// received (pacing caps only what a socket sends). `None` when nothing
    /// was seen or the program sent a fair amount.
    pub fn download_warning(&self) -> Option<String> {
        let (sent, received) = self.totals();
        (!self.by_socket.is_empty() && sent < 1 << 20 && received >= (1 << 20).max(4 * sent)).then(|| {
            format!(
                "the program sent {sent} B and received {received} B over its paced connections: pacing caps \
                 what a program sends, so a download is not slowed; pace the sending side instead"
            )
        })
    }
}

/// What a detach did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Released {
    /// Sockets the program had paced and that were still open.
    pub tracked: usize,
    /// Of those, reset to unlimited through a process's file descriptor.
    pub released: usize,
    /// Of those, reset to unlimited by the program on their next RTT
    /// sample (MPTCP subflows, sockets being closed).
    pub by_program: usize,
    /// Of those, still capped: no file descriptor reached them and no ACK
    /// came within the wait (idle subflows).
    pub unreachable: usize,
}

impl Attachment {
    /// Leaves the program attached when this guard goes (`pace attach`).
    pub fn persist(mut self) {
        self.persist = true;
    }

    pub fn pins(&self) -> &Path {
        &self.pins
    }

    /// Connections paced so far, over every rule.
    pub fn paced_conns(&self) -> Result<u64, PacerError> {
        let stats = self.maps.get("pace_stats").ok_or_else(|| missing("pace_stats"))?;
        let mut n = 0;
        for i in 0..MAX_RULES {
            n += stats.lookup::<u32, RuleStats>(&i)?.map_or(0, |s| s.conns);
        }
        Ok(n)
    }

    /// Adds what the paced sockets open now have sent and received (their
    /// `tcp_info` through sock_diag, in the calling thread's namespace) to
    /// `seen`, by socket cookie; sockets of other namespaces are not seen.
    pub fn sample_traffic(&self, seen: &mut Traffic) -> Result<(), PacerError> {
        let socks = self.maps.get("pace_socks").ok_or_else(|| missing("pace_socks"))?;
        let cookies: BTreeSet<u64> = socks.keys::<u64>()?.into_iter().collect();
        if cookies.is_empty() {
            return Ok(());
        }
        let mut diag = tcpaccel_sys::diag::DiagSocketConn::open()?;
        for s in diag.dump(&tcpaccel_sys::diag::DumpRequest::default())? {
            if !cookies.contains(&s.cookie) {
                continue;
            }
            if let Some(t) = s.tcp_info() {
                let e = seen.by_socket.entry(s.cookie).or_default();
                e.0 = e.0.max(t.bytes_acked.unwrap_or(0));
                e.1 = e.1.max(t.bytes_received.unwrap_or(0));
            }
        }
        Ok(())
    }

    /// The kernel's run-time statistics of the attached program (counted
    /// only while [`bpf::enable_stats`] is held by someone).
    pub fn prog_stats(&self) -> Result<bpf::ProgStats, PacerError> {
        let link = self.link.as_ref().ok_or_else(|| missing("link"))?;
        Ok(bpf::prog_stats(link.info()?.prog_id)?)
    }

    /// Detaches now, waiting up to [`RELEASE_WAIT`]; see the module docs
    /// for what is released.
    pub fn detach(self) -> Result<Released, PacerError> {
        self.detach_within(RELEASE_WAIT)
    }

    /// Detaches now, waiting up to `wait` for the program to release what
    /// no file descriptor reaches.
    pub fn detach_within(mut self, wait: Duration) -> Result<Released, PacerError> {
        self.persist = true; // the work is done here, not again in Drop
        let link = self.link.take();
        let maps = std::mem::take(&mut self.maps);
        detach_parts(&self.pins, link, &maps, wait)
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        if self.persist {
            return;
        }
        let link = self.link.take();
        let maps = std::mem::take(&mut self.maps);
        match detach_parts(&self.pins, link, &maps, RELEASE_WAIT) {
            Ok(r) => tracing::debug!(?r, "pacing detached on drop"),
            Err(e) => tracing::warn!("detaching pacing from {}: {e}", self.cgroup.shown().display()),
        }
    }
}

fn detach_parts(
    pins: &Path,
    link: Option<Link>,
    maps: &BTreeMap<String, Map>,
    wait: Duration,
) -> Result<Released, PacerError> {
    let mut first_err = None;
    let released = match (maps.get("pace_socks"), maps.get("pace_rules"), maps.get("pace_stats")) {
        (Some(socks), Some(rules), Some(stats)) => {
            // Without the link the program no longer runs: nothing to wait for.
            let wait = if link.is_some() { wait } else { Duration::ZERO };
            release(socks, rules, stats, wait)
        }
        _ => Ok(Released::default()),
    };
    if let Some(link) = link {
        if let Err(e) = link.detach() {
            first_err.get_or_insert(PacerError::from(e));
        }
    }
    let _ = bpf::unpin(&pins.join("link"));
    for name in MAPS {
        let _ = bpf::unpin(&pins.join(name));
    }
    let _ = fs::remove_dir(pins);
    let _ = fs::remove_dir(pin_root());
    match (first_err, released) {
        (Some(e), _) => Err(e),
        (None, r) => r,
    }
}

/// Sum of the program's own releases over every rule.
fn program_releases(stats: &Map) -> Result<u64, PacerError> {
    let mut n = 0;
    for i in 0..MAX_RULES {
        n += stats.lookup::<u32, RuleStats>(&i)?.map_or(0, |s| s.released);
    }
    Ok(n)
}

/// Steps 1–3 of the module docs: flag the rules, release every socket a
/// process holds, wait for the program to release the rest.
fn release(socks: &Map, rules: &Map, stats: &Map, wait: Duration) -> Result<Released, PacerError> {
    let before = program_releases(stats)?;
    for i in 0..MAX_RULES {
        if let Some(mut r) = rules.lookup::<u32, RuleAbi>(&i)? {
            if r.kind != RULE_NONE {
                r.flags |= RULE_RELEASE;
                rules.update(&i, &r, UPDATE_ANY)?;
            }
        }
    }
    let cookies: BTreeSet<u64> = socks.keys::<u64>()?.into_iter().collect();
    let mut done = BTreeSet::new();
    if !cookies.is_empty() {
        for_each_socket(|fd| {
            let Ok(c) = bpf::socket_cookie(&fd) else { return };
            if cookies.contains(&c) && !done.contains(&c) {
                match tcpaccel_sys::sockopt::set_max_pacing_rate(&fd, tcpaccel_sys::sockopt::PACING_UNLIMITED)
                {
                    Ok(()) => {
                        // Released here: the program must not count it again.
                        let _ = socks.delete(&c);
                        done.insert(c);
                    }
                    Err(e) => tracing::debug!("releasing socket {c}: {e}"),
                }
            }
        });
    }
    let deadline = Instant::now() + wait;
    let mut left = socks.keys::<u64>()?.len();
    while left > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        left = socks.keys::<u64>()?.len();
    }
    let by_program = (program_releases(stats)? - before) as usize;
    Ok(Released { tracked: cookies.len(), released: done.len(), by_program, unreachable: left })
}

/// Calls `f` with a duplicate of every socket fd of every process.
fn for_each_socket(mut f: impl FnMut(std::os::fd::OwnedFd)) {
    let Ok(procs) = fs::read_dir("/proc") else { return };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(fds) = fs::read_dir(p.path().join("fd")) else { continue };
        for e in fds.flatten() {
            let is_socket =
                fs::read_link(e.path()).is_ok_and(|t| t.to_str().is_some_and(|t| t.starts_with("socket:")));
            let Some(n) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            if is_socket {
                // Processes come and go; one that left is simply skipped.
                if let Ok(fd) = bpf::steal_fd(pid, n) {
                    f(fd);
                }
            }
        }
    }
}

/// One rule as `status` shows it. In JSON every rate carries its unit in
/// its key: `stats.last_rate_bps` and `caps_bps` are payload bits/s.
#[derive(Debug, Clone, Serialize)]
pub struct RuleStatus {
    pub index: u32,
    /// `default`, or the destination.
    pub dest: String,
    pub pace: String,
    #[serde(serialize_with = "stats_with_units")]
    pub stats: RuleStats,
    /// Sockets open now under this rule, and the caps they have (payload bytes/s).
    pub open: usize,
    #[serde(rename = "caps_bps", serialize_with = "bytes_to_bits")]
    pub rates: Vec<u32>,
}

/// [`RuleStats`] with the rate in payload bits/s under a key that says so.
fn stats_with_units<S: serde::Serializer>(s: &RuleStats, ser: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct WithUnits {
        conns: u64,
        updates: u64,
        errors: u64,
        last_rate_bps: u64,
        released: u64,
        held: u64,
        held_cap_bps: u64,
    }
    WithUnits {
        conns: s.conns,
        updates: s.updates,
        errors: s.errors,
        last_rate_bps: s.last_rate.saturating_mul(8),
        released: s.released,
        held: s.held,
        held_cap_bps: s.held_cap.saturating_mul(8),
    }
    .serialize(ser)
}

/// Payload bytes/s as bits/s.
fn bytes_to_bits<S: serde::Serializer>(rates: &[u32], ser: S) -> Result<S::Ok, S::Error> {
    ser.collect_seq(rates.iter().map(|r| u64::from(*r) * 8))
}

/// One attachment as `status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct AttachStatus {
    pub cgroup: Option<PathBuf>,
    pub cgroup_id: u64,
    pub pins: PathBuf,
    pub link_id: u32,
    pub prog_id: u32,
    pub rules: Vec<RuleStatus>,
}

/// Every attachment pinned on this host.
pub fn status() -> Result<Vec<AttachStatus>, PacerError> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(pin_root()) else { return Ok(out) };
    let mut dirs: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        if !dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("pace-")) {
            continue;
        }
        out.push(status_of(&dir)?);
    }
    Ok(out)
}

/// Every socket the attachment pinned at `pins` paces now, by socket
/// cookie, with its state (for `--hold`, the hold's cap, bottleneck
/// estimate and delivery rate: [`SockState::hold`]). Opens its own handle
/// on the pinned map, so another thread or process can watch a running
/// attachment.
pub fn socket_states(pins: &Path) -> Result<Vec<(u64, SockState)>, PacerError> {
    states_in(&Map::from_pin(&pins.join("pace_socks"))?)
}

/// The entries of a `pace_socks` map, by socket cookie.
fn states_in(socks: &Map) -> Result<Vec<(u64, SockState)>, PacerError> {
    let mut out = Vec::new();
    for c in socks.keys::<u64>()? {
        // A socket that closed between the two reads is gone, not an error.
        if let Some(s) = socks.lookup::<u64, SockState>(&c)? {
            out.push((c, s));
        }
    }
    Ok(out)
}

fn open_maps(dir: &Path) -> Result<BTreeMap<String, Map>, PacerError> {
    let mut maps = BTreeMap::new();
    for name in MAPS {
        maps.insert(name.to_string(), Map::from_pin(&dir.join(name))?);
    }
    Ok(maps)
}

fn status_of(dir: &Path) -> Result<AttachStatus, PacerError> {
    let link = Link::from_pin(&dir.join("link"))?;
    let info = link.info()?;
    let maps = open_maps(dir)?;
    let m = |n: &str| maps.get(n).ok_or_else(|| missing(n));
    let mut dests: BTreeMap<u32, String> = BTreeMap::new();
    for k in m("pace_dst")?.keys::<DstKey>()? {
        if let Some(i) = m("pace_dst")?.lookup::<DstKey, u32>(&k)? {
            dests.insert(i, Dest::from_key(&k).to_string());
        }
    }
    let mut socks: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (_, s) in states_in(m("pace_socks")?)? {
        socks.entry(s.rule).or_default().push(s.rate);
    }
    let mut rules = Vec::new();
    for i in 0..MAX_RULES {
        let dest = match (i, dests.get(&i)) {
            (0, _) => "default".to_string(),
            (_, Some(d)) => d.clone(),
            _ => continue,
        };
        let r: RuleAbi = m("pace_rules")?.lookup(&i)?.unwrap_or_default();
        let stats: RuleStats = m("pace_stats")?.lookup(&i)?.unwrap_or_default();
        let rates = socks.remove(&i).unwrap_or_default();
        rules.push(RuleStatus {
            index: i,
            dest,
            pace: RulePace::from_abi(r).to_string(),
            stats,
            open: rates.len(),
            rates,
        });
    }
    Ok(AttachStatus {
        cgroup: Cgroup::by_id(info.cgroup_id).map(|c| c.shown()),
        cgroup_id: info.cgroup_id,
        pins: dir.to_path_buf(),
        link_id: info.id,
        prog_id: info.prog_id,
        rules,
    })
}

/// Detaches the attachment pinned for `cgroup_id` (made by any process),
/// waiting up to `wait` for the program's own releases.
pub fn detach_pinned(cgroup_id: u64, wait: Duration) -> Result<Released, PacerError> {
    let dir = pin_dir(cgroup_id);
    if !dir.exists() {
        let path =
            Cgroup::by_id(cgroup_id).map_or_else(|| PathBuf::from(format!("id {cgroup_id}")), |c| c.shown());
        return Err(PacerError::NotAttached(path));
    }
    let link = Link::from_pin(&dir.join("link")).ok();
    let maps = open_maps(&dir).unwrap_or_default();
    detach_parts(&dir, link, &maps, wait)
}

/// Every cgroup id with an attachment pinned.
pub fn pinned_ids() -> Vec<u64> {
    let Ok(rd) = fs::read_dir(pin_root()) else { return Vec::new() };
    let mut ids: Vec<u64> = rd
        .flatten()
        .filter_map(|e| {
            e.file_name().to_str().and_then(|n| n.strip_prefix("pace-")).and_then(|n| n.parse().ok())
        })
        .collect();
    ids.sort_unstable();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_json_names_its_units() {
        let r = RuleStatus {
            index: 0,
            dest: "default".into(),
            pace: "static:10Mbit/s".into(),
            stats: RuleStats {
                conns: 1,
                updates: 1,
                errors: 0,
                last_rate: 1_250_000,
                released: 0,
                held: 0,
                held_cap: 0,
            },
            open: 1,
            rates: vec![1_250_000],
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["stats"]["last_rate_bps"], 10_000_000);
        assert!(v["stats"].get("last_rate").is_none(), "{v}");
        assert_eq!(v["caps_bps"], serde_json::json!([10_000_000]));
        assert!(v.get("rates").is_none(), "{v}");
    }

    #[test]
    fn a_download_is_told_from_an_upload() {
        let mut t = Traffic::default();
        assert_eq!(t.download_warning(), None, "nothing seen: no claim");
        t.by_socket.insert(1, (2_000, 50_000_000));
        let w = t.download_warning().unwrap();
        assert!(w.contains("sent 2000 B and received 50000000 B"), "{w}");
        t.by_socket.insert(2, (40_000_000, 0));
        assert_eq!(t.download_warning(), None);
    }
}
