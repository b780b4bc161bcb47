//! Per-core CPU times from `/proc/stat`, and CPU pressure (PSI) from
//! `/proc/pressure/cpu`: the fidelity monitor's inputs; and one task's
//! state, parent and CPU time from `/proc/PID/stat`.
//!
//! What it is: parsers of those texts and their readers. What it is
//! not: no judgement (that is `tcpaccel_core::fidelity`). `/proc/stat` is
//! not namespaced: it is the whole host's, whatever namespace reads it.
//! Times are in USER_HZ ticks (`man 5 proc`).

use crate::{Error, Result};

/// One core's cumulative times, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuStat {
    pub core: u32,
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuStat {
    /// Every column counted once (guest time is already inside user and nice).
    pub fn total(&self) -> u64 {
        self.user + self.nice + self.system + self.idle + self.iowait + self.irq + self.softirq + self.steal
    }
}

/// The `cpuN` lines of a `/proc/stat` text, in core order (the `cpu`
/// total line is left out). A malformed `cpuN` line is an error naming it.
pub fn parse(text: &str) -> std::result::Result<Vec<CpuStat>, String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let Some(name) = w.next() else { continue };
        let Some(n) = name.strip_prefix("cpu") else { continue };
        if n.is_empty() {
            continue;
        }
        let core: u32 = n.parse().map_err(|_| format!("/proc/stat: bad cpu line {line:?}"))?;
        let v: Vec<u64> = w
            .map(|x| x.parse::<u64>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| format!("/proc/stat: a column of {name} is not a number: {line:?}"))?;
        if v.len() < 7 {
            return Err(format!("/proc/stat: {name} has {} columns, need at least 7", v.len()));
        }
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        out.push(CpuStat {
            core,
            user: at(0),
            nice: at(1),
            system: at(2),
            idle: at(3),
            iowait: at(4),
            irq: at(5),
            softirq: at(6),
            steal: at(7),
        });
    }
    if out.is_empty() {
        return Err("/proc/stat: no cpuN line".into());
    }
    Ok(out)
}

/// Reads every core's times now.
pub fn read() -> Result<Vec<CpuStat>> {
    let op = "reading /proc/stat";
    let text = std::fs::read_to_string("/proc/stat").map_err(|e| Error::os(op, e))?;
    parse(&text).map_err(|msg| Error::Other { op: op.into(), msg })
}

/// Clock ticks per second of /proc's times (`USER_HZ`: 100 on every Linux ABI).
pub const USER_HZ: u64 = 100;

/// The fields of one task's `/proc/PID/stat` that tcpaccel reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskStat {
    /// `R`, `S`, `D`, `Z` (zombie: exited, not yet reaped), ... (proc(5) field 3).
    pub state: char,
    pub ppid: u32,
    /// User and system time, USER_HZ ticks (fields 14 and 15).
    pub utime: u64,
    pub stime: u64,
}

impl TaskStat {
    /// User + system time, in ticks.
    pub fn ticks(&self) -> u64 {
        self.utime + self.stime
    }
    /// User + system time, in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        self.ticks() as f64 / USER_HZ as f64
    }
    /// Exited: a zombie (`Z`) or dead (`X`) task runs no more.
    pub fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// Parses a `/proc/PID/stat` text. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted after the last `)`.
pub fn parse_task(text: &str) -> std::result::Result<TaskStat, String> {
    let rest = text.rsplit_once(')').map(|(_, r)| r).ok_or("no ')' after the command name")?;
    // rest starts at field 3 (state).
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field =
        |i: usize| f.get(i - 3).copied().ok_or_else(|| format!("no field {i} ({} after the name)", f.len()));
    let num = |i: usize| -> std::result::Result<u64, String> {
        let v = field(i)?;
        v.parse().map_err(|_| format!("field {i} {v:?} is not a number"))
    };
    let state = field(3)?;
    let mut chars = state.chars();
    let (Some(state), None) = (chars.next(), chars.next()) else {
        return Err(format!("field 3 {state:?} is not one state letter"));
    };
    let ppid = u32::try_from(num(4)?).map_err(|_| "field 4 (ppid) out of range".to_string())?;
    Ok(TaskStat { state, ppid, utime: num(14)?, stime: num(15)? })
}

/// Reads `/proc/{task}/stat`, `task` being a pid, `self` or `thread-self`.
pub fn read_task(task: &str) -> Result<TaskStat> {
    let path = format!("/proc/{task}/stat");
    let op = format!("reading {path}");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::os(op.clone(), e))?;
    parse_task(&text).map_err(|msg| Error::Other { op, msg })
}

/// True while process `pid` exists and has not exited (a zombie waiting for
/// its parent to reap it has).
pub fn running(pid: u32) -> bool {
    read_task(&pid.to_string()).is_ok_and(|t| !t.exited())
}

/// The cumulative time (µs) in which at least one runnable task waited
/// for a CPU: the `some ... total=` of `/proc/pressure/cpu` (PSI). `None`
/// on a kernel without PSI.
pub fn cpu_stall_us() -> Result<Option<u64>> {
    let op = "reading /proc/pressure/cpu";
    match std::fs::read_to_string("/proc/pressure/cpu") {
        Ok(text) => parse_pressure(&text).map(Some).map_err(|msg| Error::Other { op: op.into(), msg }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        // CONFIG_PSI with psi=0 on the command line: the file is there but refuses reads.
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(None),
        Err(e) => Err(Error::os(op, e)),
    }
}

/// The `total=` of the `some` line of a PSI text.
pub fn parse_pressure(text: &str) -> std::result::Result<u64, String> {
    let line =
        text.lines().find(|l| l.starts_with("some ")).ok_or("no \"some\" line in the pressure text")?;
    let total = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("total="))
        .ok_or_else(|| format!("no total= in {line:?}"))?;
    total.parse().map_err(|_| format!("total={total:?} is not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_stat_counts_fields_after_the_name() {
        // pid (comm with spaces and parentheses) state ppid pgrp session tty
        // tpgid flags minflt cminflt majflt cmajflt utime stime ...
        let line = "4242 (my (odd) name) Z 17 4242 4242 0 -1 4194560 300 0 0 0 250 50 0 0 20 0 3 0 100 0 0";
        let t = parse_task(line).unwrap();
        assert_eq!(t, TaskStat { state: 'Z', ppid: 17, utime: 250, stime: 50 });
        assert_eq!(t.ticks(), 300);
        assert!(t.exited());
        assert!(parse_task("garbage").unwrap_err().contains("')'"));
        assert!(parse_task("42 (x) S 1").unwrap_err().contains("field 14"));
        assert!(parse_task("42 (x) S 1 2 3 4 5 6 7 8 9 10 x 12").unwrap_err().contains("field 14 \"x\""));
        let own = read_task("self").unwrap();
        assert_eq!(own.ppid, std::os::unix::process::parent_id());
        assert!(!own.exited());
        assert!(running(std::process::id()));
    }

    #[test]
    fn a_zombie_is_not_running() {
        let mut child = std::process::Command::new("true").spawn().expect("spawn true");
        let pid = child.id();
        // Not reaped yet: /proc/PID stays, in state Z.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while running(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(read_task(&pid.to_string()).unwrap().state, 'Z');
        assert!(!running(pid));
        child.wait().unwrap();
        assert!(!running(pid));
    }

    #[test]
    fn cores_are_read_and_the_total_line_left_out() {
        let text = "cpu  10 0 5 100 1 0 2 0 0 0\n\
                    cpu0 6 0 3 50 1 0 2 0 0 0\n\
                    cpu1 4 0 2 50 0 0 0 3 0 0\n\
                    intr 12345 0\nctxt 99\n";
        let v = parse(text).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(
            v[0],
            CpuStat {
                core: 0,
                user: 6,
                nice: 0,
                system: 3,
                idle: 50,
                iowait: 1,
                irq: 0,
                softirq: 2,
                steal: 0
            }
        );
        assert_eq!(v[1].steal, 3);
        assert_eq!(v[1].total(), 59);
    }

    #[test]
    fn pressure_total_comes_from_the_some_line() {
        let text = "some avg10=48.06 avg60=33.68 avg300=42.62 total=7954641757\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_pressure(text), Ok(7_954_641_757));
        assert!(parse_pressure("full total=1\n").unwrap_err().contains("some"));
        assert!(parse_pressure("some avg10=1 total=x\n").unwrap_err().contains("\"x\""));
    }

    #[test]
    fn malformed_lines_are_named() {
        assert!(parse("cpu0 1 2 x 4 5 6 7\n").unwrap_err().contains("cpu0"));
        assert!(parse("cpu0 1 2 3\n").unwrap_err().contains("3 columns"));
        assert!(parse("intr 1\n").unwrap_err().contains("no cpuN"));
    }

    #[test]
    fn this_host_has_cores_whose_times_grow() {
        let a = read().unwrap();
        assert!(!a.is_empty());
        let t0: u64 = a.iter().map(CpuStat::total).sum();
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(50) {
            std::hint::black_box(0u64);
        }
        let t1: u64 = read().unwrap().iter().map(CpuStat::total).sum();
        assert!(t1 > t0, "{t0} -> {t1}");
    }
}
