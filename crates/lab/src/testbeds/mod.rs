//! Topologies several scenarios share, each built with
//! `tcpaccel_net::TopologyBuilder`: the two-host [`dumbbell`] with one
//! emulated bottleneck, and the dual-fabric datacenter of the lanes
//! experiments ([`fabric`]) with its leaf–spine or k = 4 FatTree fabrics
//! ([`fattree`]), with the BPF program that scales the hosts' initial RTO
//! in a dilated run ([`rto_init`]); the emulator's meter read back
//! ([`meter`]); the HTTP server and client pieces of the scenarios that
//! fetch a file ([`nginx`], [`find_bin`], [`parse_curl`]); a run's scratch
//! directory ([`ScratchDir`]). A new shared
//! topology is a file here; a
//! topology only one scenario uses stays in that scenario's file.

pub mod dumbbell;
pub mod fabric;
pub mod fattree;
pub mod meter;
pub mod nginx;
pub mod rto_init;

/// A fresh directory `PARENT/PREFIX-PID-N` for a run's files, removed with
/// everything in it when dropped (split's chain files, pacing-apps'
/// document root).
pub struct ScratchDir(std::path::PathBuf);

impl ScratchDir {
    pub fn new(parent: &std::path::Path, prefix: &str) -> anyhow::Result<ScratchDir> {
        use anyhow::Context;
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = parent.join(format!("{prefix}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(ScratchDir(dir))
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where runs make their [`ScratchDir`]s: tmpfs (pacing-apps' document
/// root) and the temporary directory (split's chain files).
pub fn scratch_parents() -> Vec<std::path::PathBuf> {
    vec!["/dev/shm".into(), std::env::temp_dir()]
}

/// Removes the [`ScratchDir`]s in `parents` whose process is gone (a run
/// killed before its drop, e.g. by SIGKILL: a pacing-apps document root
/// is a 64 GiB sparse file on tmpfs) and returns them. A scratch directory
/// is `tcpaccel-WORD-PID-N` (WORD without a dash); anything else, and the
/// directories of a live process, are left alone.
pub fn clean_scratch(parents: &[std::path::PathBuf]) -> anyhow::Result<Vec<std::path::PathBuf>> {
    use anyhow::Context;
    let mut removed = Vec::new();
    for parent in parents {
        let entries = match std::fs::read_dir(parent) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("listing {}", parent.display())),
        };
        for e in entries.filter_map(|e| e.ok()) {
            let Some(pid) = e.file_name().to_str().and_then(scratch_pid) else { continue };
            if !e.path().is_dir() || std::path::Path::new("/proc").join(pid.to_string()).exists() {
                continue;
            }
            std::fs::remove_dir_all(e.path()).with_context(|| format!("removing {}", e.path().display()))?;
            removed.push(e.path());
        }
    }
    Ok(removed)
}

/// The PID in a [`ScratchDir`]'s name `tcpaccel-WORD-PID-N`.
fn scratch_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("tcpaccel-")?;
    let mut parts = rest.split('-');
    let (word, pid, n) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || word.is_empty() || n.parse::<u32>().is_err() {
        return None;
    }
    pid.parse().ok()
}

/// A program on PATH or in the system directories (`/usr/sbin` holds
/// Debian's daemons: nginx, danted, squid).
pub fn find_bin(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/usr/bin", "/sbin", "/bin"])
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}

/// What the emulators in `emulators` (a [`tcpaccel_net::Teardown`]'s
/// summaries) measured of their own timing, for the run's fidelity verdict:
/// the p99 send lateness of the worst direction that sent a frame (`None`
/// without one), and the longest any direction's thread was away. Each
/// direction's figures are over the emulator's whole life, so they are one
/// run's only where the emulator was built for that run (every testbed here
/// builds its network per run). The merged p99 of two directions lies
/// between theirs: the worse one is the stricter figure to judge.
pub fn emulator_timing(emulators: &[(String, tcpaccel_net::EmuSummary)]) -> EmuTiming {
    let dirs = || emulators.iter().flat_map(|(_, s)| [&s.a_to_b, &s.b_to_a]);
    EmuTiming {
        p99: worst_p99(dirs().map(|d| d.lateness)),
        away: dirs().map(|d| std::time::Duration::from_nanos(d.away_max_ns)).max(),
    }
}

/// See [`emulator_timing`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmuTiming {
    pub p99: Option<std::time::Duration>,
    pub away: Option<std::time::Duration>,
}

/// The largest p99 of the histograms that counted a value.
fn worst_p99(h: impl IntoIterator<Item = tcpaccel_core::meter::HistSummary>) -> Option<std::time::Duration> {
    h.into_iter().filter(|h| h.count > 0).filter_map(|h| h.p99_ns).max().map(std::time::Duration::from_nanos)
}

/// curl's `-w` output: bytes downloaded, seconds total, seconds to the first
/// byte (connection setup through the whole chain and the request).
pub fn parse_curl(out: &str) -> anyhow::Result<(u64, f64, f64)> {
    use anyhow::{bail, Context};
    let mut it = out.split_whitespace();
    let size = it.next().and_then(|v| v.parse::<f64>().ok()).context("curl printed no size")?;
    let secs = it.next().and_then(|v| v.parse::<f64>().ok()).context("curl printed no time")?;
    let first = it.next().and_then(|v| v.parse::<f64>().ok()).context("curl printed no first-byte time")?;
    if secs <= 0.0 || size < 0.0 || !(0.0..=secs).contains(&first) {
        bail!("curl printed size {size} in {secs} s, first byte at {first} s");
    }
    Ok((size as u64, secs, first))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpaccel_core::meter::Histogram;

    #[test]
    fn the_worse_direction_that_sent_decides() {
        let of = |ns: &[u64]| {
            let mut h = Histogram::new();
            ns.iter().for_each(|&v| h.record(v));
            h.summary()
        };
        // 100 frames at 10 µs with one at 5 ms: p99 is 10 µs; the other direction's 300 µs wins.
        let mut data: Vec<u64> = vec![10_000; 99];
        data.push(5_000_000);
        let p = worst_p99([of(&data), of(&[300_000; 10]), of(&[])]);
        assert_eq!(p, Some(std::time::Duration::from_micros(300)));
        // An emulator that sent nothing has no lateness to judge.
        assert_eq!(worst_p99([of(&[]), of(&[])]), None);
    }

    #[test]
    fn a_scratch_dir_is_fresh_per_call_and_gone_when_dropped() {
        let parent = std::env::temp_dir();
        let (a, b) = (
            ScratchDir::new(&parent, "tcpaccel-scratch-test").unwrap(),
            ScratchDir::new(&parent, "tcpaccel-scratch-test").unwrap(),
        );
        assert_ne!(a.path(), b.path());
        std::fs::write(a.path().join("f"), b"x").unwrap();
        let kept = a.path().to_path_buf();
        drop(a);
        assert!(!kept.exists() && b.path().is_dir());
    }

    #[test]
    fn clean_scratch_removes_the_dirs_of_gone_processes_only() {
        let parent = std::env::temp_dir().join(format!("tcpaccel-clean-test-{}", std::process::id()));
        std::fs::create_dir_all(&parent).unwrap();
        // A process that has exited: its PID is free (reuse within the
        // test is not expected).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let dead = parent.join(format!("tcpaccel-apps-{gone}-0"));
        let live = ScratchDir::new(&parent, "tcpaccel-apps").unwrap();
        let other = parent.join(format!("tcpaccel-apps-x-{gone}-0"));
        let file = parent.join(format!("tcpaccel-split-{gone}-1"));
        for d in [&dead, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(dead.join("big"), b"x").unwrap();
        std::fs::write(&file, b"not a directory").unwrap();
        let removed = clean_scratch(std::slice::from_ref(&parent)).unwrap();
        assert_eq!(removed, vec![dead.clone()]);
        assert!(!dead.exists() && live.path().is_dir() && other.is_dir() && file.is_file());
        // A parent that does not exist is nothing to clean.
        assert!(clean_scratch(&[parent.join("none")]).unwrap().is_empty());
        drop(live);
        std::fs::remove_dir_all(&parent).unwrap();
    }

    #[test]
    fn scratch_names_parse_strictly() {
        assert_eq!(scratch_pid("tcpaccel-apps-123-0"), Some(123));
        assert_eq!(scratch_pid("tcpaccel-split-9-17"), Some(9));
        for bad in
            ["tcpaccel-apps-123", "tcpaccel--1-0", "tcpaccel-a-b-1-0", "other-apps-1-0", "tcpaccel-apps-x-0"]
        {
            assert_eq!(scratch_pid(bad), None, "{bad}");
        }
    }

    #[test]
    fn curl_output_parses_and_rejects_garbage() {
        assert_eq!(parse_curl("100000000 9.5 0.25").unwrap(), (100_000_000, 9.5, 0.25));
        assert!(parse_curl("").is_err());
        assert!(parse_curl("100 9.5").is_err(), "no first-byte time");
        assert!(parse_curl("100 1.0 2.0").is_err(), "first byte after the end");
        assert!(parse_curl("12 0 0").is_err());
        assert!(parse_curl("abc def").is_err());
    }
}
