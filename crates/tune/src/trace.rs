//! The connection tracer: `tcp_info` of matching sockets, sampled through
//! sock_diag on an absolute tick schedule, written as CSV or JSON Lines and
//! plotted like the tutorial's tcp_probe cwnd/ssthresh traces ([HPC-TCP]).
//!
//! What it is: a [`Selector`] (port, destination, process), a [`Tracer`]
//! that does one netlink dump per tick for all sockets (not one query per
//! socket), a pure [`Schedule`] whose deadlines are `k × interval` from the
//! start so sampling never drifts (late ticks are skipped and counted), row
//! writers, and an SVG plot. What it is not: no parsing of `ss` output, no
//! per-packet events (that would be the `tcp:tcp_probe` tracepoint).

use std::collections::HashSet;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Serialize;
use tcpaccel_sys::diag::{self, DiagSocket, DiagSocketConn, DumpRequest, PortSide};

/// Which sockets to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Local or remote port equals this one.
    Port(u16),
    /// Remote address (and port, if given) equals this one.
    Dst(IpAddr, Option<u16>),
    /// Sockets owned by this process (by inode, from `/proc/PID/fd`).
    Pid(u32),
    /// Every connected TCP socket.
    All,
}

/// For messages: `port 5201`, `destination 10.0.0.2:5201`, `process 42`.
impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selector::Port(p) => write!(f, "port {p}"),
            Selector::Dst(ip, Some(p)) => write!(f, "destination {}", SocketAddr::new(*ip, *p)),
            Selector::Dst(ip, None) => write!(f, "destination {ip}"),
            Selector::Pid(pid) => write!(f, "the sockets of process {pid}"),
            Selector::All => write!(f, "every connected TCP socket"),
        }
    }
}

impl Selector {
    /// Parses a `--dst` value: `ADDR`, `ADDR:PORT` or `[V6]:PORT`.
    pub fn parse_dst(s: &str) -> Option<Selector> {
        if let Ok(sa) = s.parse::<SocketAddr>() {
            return Some(Selector::Dst(sa.ip(), Some(sa.port())));
        }
        s.trim_matches(|c| c == '[' || c == ']').parse::<IpAddr>().ok().map(|ip| Selector::Dst(ip, None))
    }
    /// The in-kernel port filter that trims each dump for this selector.
    fn kernel_port(&self) -> (Option<u16>, PortSide) {
        match self {
            Selector::Port(p) => (Some(*p), PortSide::Either),
            Selector::Dst(_, p) => (*p, PortSide::Remote),
            _ => (None, PortSide::Either),
        }
    }
    fn matches(&self, s: &DiagSocket, inodes: &HashSet<u32>) -> bool {
        match self {
            Selector::Port(p) => s.src.port() == *p || s.dst.port() == *p,
            Selector::Dst(ip, port) => {
                same_ip(s.dst.ip(), *ip) && port.map(|p| s.dst.port() == p).unwrap_or(true)
            }
            Selector::Pid(_) => inodes.contains(&s.inode),
            Selector::All => true,
        }
    }
}

/// IPv4 addresses also match their IPv4-mapped IPv6 form (dual-stack sockets).
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    let canon = |x: IpAddr| match x {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(x),
        v4 => v4,
    };
    canon(a) == canon(b)
}

/// `TCP_INFINITE_SSTHRESH` (include/net/tcp.h): "no ssthresh yet".
const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// One sample of one socket. Times in µs, rates in bit/s, windows in segments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Index of the tick on the absolute schedule (due at `tick × interval`).
    pub tick: u64,
    /// Seconds since the trace started, when the dump was taken.
    pub t_s: f64,
    /// The same moment as wall-clock time, Unix seconds (the trace's start
    /// read from the system clock once, plus `t_s` from the monotonic one),
    /// so traces can be lined up with other logs and captures.
    pub ts: f64,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub state: &'static str,
    pub cc: Option<String>,
    pub cwnd: u32,
    /// `None` while the kernel's ssthresh is still "infinite".
    pub ssthresh: Option<u32>,
    pub srtt_us: u32,
    pub rttvar_us: u32,
    pub min_rtt_us: Option<u32>,
    pub mss: u32,
    pub unacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub total_retrans: u32,
    pub delivery_rate_bps: Option<u64>,
    pub pacing_rate_bps: Option<u64>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub busy_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub inode: u32,
}

/// CSV column names, in [`Row`] order.
pub const CSV_HEADER: &str = "tick,t_s,ts,src,dst,state,cc,cwnd,ssthresh,srtt_us,rttvar_us,min_rtt_us,mss,unacked,lost,retrans,total_retrans,delivery_rate_bps,pacing_rate_bps,bytes_acked,bytes_received,busy_us,rwnd_limited_us,sndbuf_limited_us,inode";

/// Displays an optional value as itself or as an empty CSV field, without
/// allocating.
struct Opt<'a, T>(&'a Option<T>);

impl<T: std::fmt::Display> std::fmt::Display for Opt<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(v) => v.fmt(f),
            None => Ok(()),
        }
    }
}

fn opt<T>(v: &Option<T>) -> Opt<'_, T> {
    Opt(v)
}

impl Row {
    /// Builds a row from a dumped socket; `None` without a usable tcp_info.
    /// `epoch_s` is the trace's start in Unix seconds.
    pub fn from_socket(tick: u64, t: Duration, epoch_s: f64, s: &DiagSocket) -> Option<Row> {
        let i = s.tcp_info()?;
        Some(Row {
            tick,
            t_s: t.as_secs_f64(),
            ts: epoch_s + t.as_secs_f64(),
            src: s.src,
            dst: s.dst,
            state: diag::state::name(s.state),
            cc: s.congestion(),
            cwnd: i.snd_cwnd,
            ssthresh: (i.snd_ssthresh < INFINITE_SSTHRESH).then_some(i.snd_ssthresh),
            srtt_us: i.rtt,
            rttvar_us: i.rttvar,
            min_rtt_us: i.min_rtt,
            mss: i.snd_mss,
            unacked: i.unacked,
            lost: i.lost,
            retrans: i.retrans,
            total_retrans: i.total_retrans,
            delivery_rate_bps: i.delivery_rate.map(|r| r.saturating_mul(8)),
            pacing_rate_bps: i.pacing_rate.filter(|&r| r != u64::MAX).map(|r| r.saturating_mul(8)),
            bytes_acked: i.bytes_acked,
            bytes_received: i.bytes_received,
            busy_us: i.busy_time,
            rwnd_limited_us: i.rwnd_limited,
            sndbuf_limited_us: i.sndbuf_limited,
            inode: s.inode,
        })
    }

    /// One CSV line (no newline), columns as [`CSV_HEADER`].
    pub fn csv(&self) -> String {
        let mut v = Vec::new();
        // Writing into a Vec cannot fail.
        let _ = self.write_csv(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    }

    /// Writes one CSV line (no newline) straight to `out`.
    pub fn write_csv(&self, out: &mut impl Write) -> std::io::Result<()> {
        write!(
            out,
            "{},{:.6},{:.6},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            self.tick,
            self.t_s,
            self.ts,
            self.src,
            self.dst,
            self.state,
            self.cc.as_deref().unwrap_or(""),
            self.cwnd,
            opt(&self.ssthresh),
            self.srtt_us,
            self.rttvar_us,
            opt(&self.min_rtt_us),
            self.mss,
            self.unacked,
            self.lost,
            self.retrans,
            self.total_retrans,
            opt(&self.delivery_rate_bps),
            opt(&self.pacing_rate_bps),
            opt(&self.bytes_acked),
            opt(&self.bytes_received),
            opt(&self.busy_us),
            opt(&self.rwnd_limited_us),
            opt(&self.sndbuf_limited_us),
            self.inode
        )
    }
}

/// Absolute tick schedule: tick `k` is due at `k × interval` after the
/// start, up to an optional end. Pure: callers pass the elapsed time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    interval: Duration,
    next: u64,
    /// Last tick to run (its deadline is at or before the end).
    last: Option<u64>,
    /// Ticks skipped because the sampler was late.
    pub missed: u64,
}

impl Schedule {
    /// A schedule whose first tick is due at once and that never ends.
    pub fn new(interval: Duration) -> Self {
        Schedule { interval: interval.max(Duration::from_micros(1)), next: 0, last: None, missed: 0 }
    }
    /// Ends the schedule: no tick is due after `end`.
    pub fn until(mut self, end: Duration) -> Self {
        self.last = Some((end.as_nanos() / self.interval.as_nanos()) as u64);
        self
    }
    /// Deadline of tick `k`.
    pub fn deadline(&self, k: u64) -> Duration {
        Duration::from_nanos((self.interval.as_nanos() as u64).saturating_mul(k))
    }
    /// The next tick to run and its deadline, given the elapsed time `now`;
    /// `None` once the schedule has ended. Ticks whose whole slot has
    /// already passed are skipped (counted in [`Schedule::missed`]), so a
    /// late sampler catches up instead of bursting.
    pub fn next_tick(&mut self, now: Duration) -> Option<(u64, Duration)> {
        let mut current = (now.as_nanos() / self.interval.as_nanos()) as u64;
        if let Some(last) = self.last {
            current = current.min(last.saturating_add(1));
        }
        if current > self.next {
            self.missed += current - self.next;
            self.next = current;
        }
        if self.last.map(|l| self.next > l).unwrap_or(false) {
            return None;
        }
        let k = self.next;
        self.next += 1;
        Some((k, self.deadline(k)))
    }
}

/// Errors of the tracer.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("sock_diag: {0}")]
    Diag(#[from] tcpaccel_sys::Error),
    #[error("process {pid} not found (no /proc/{pid}/fd)")]
    NoProcess { pid: u32 },
    #[error("writing trace output: {0}")]
    Write(#[from] std::io::Error),
}

/// Socket inodes of process `pid`, from its `/proc/PID/fd` links.
pub fn pid_socket_inodes(pid: u32) -> Result<HashSet<u32>, TraceError> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).map_err(|_| TraceError::NoProcess { pid })?;
    let mut out = HashSet::new();
    for e in dir.flatten() {
        if let Ok(target) = std::fs::read_link(e.path()) {
            let t = target.to_string_lossy();
            if let Some(n) = t.strip_prefix("socket:[").and_then(|x| x.strip_suffix(']')) {
                if let Ok(i) = n.parse() {
                    out.insert(i);
                }
            }
        }
    }
    Ok(out)
}

/// How often a `--pid` selection re-reads the process's sockets.
const PID_REFRESH: Duration = Duration::from_millis(250);

/// Samples matching sockets, one dump per call.
pub struct Tracer {
    conn: DiagSocketConn,
    req: DumpRequest,
    sel: Selector,
    socks: Vec<DiagSocket>,
    /// Matching sockets found by the last dump (hybrid mode re-queries them).
    known: Vec<DiagSocket>,
    inodes: HashSet<u32>,
    inodes_at: Option<Duration>,
    /// `None`: one dump per tick. `Some(d)`: a dump every `d` to find
    /// sockets, exact queries of the known ones in between.
    discover: Option<Duration>,
    discovered_at: Option<Duration>,
    /// Wall-clock time (Unix seconds) of sample time zero.
    epoch_s: f64,
}

/// The system clock now, in Unix seconds.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

impl Tracer {
    /// Opens the diag socket here, or in `netns` (the socket keeps that
    /// namespace and may then be used from this thread). Samples with one
    /// dump per tick; see [`Tracer::hybrid`] for the cheaper mode.
    pub fn open(sel: Selector, netns: Option<&str>) -> Result<Tracer, TraceError> {
        let conn = match netns {
            None => DiagSocketConn::open()?,
            Some(ns) => tcpaccel_sys::netns::run_in(ns, DiagSocketConn::open)??,
        };
        if let Selector::Pid(pid) = sel {
            pid_socket_inodes(pid)?;
        }
        let (port, port_side) = sel.kernel_port();
        let req = DumpRequest { port, port_side, ..Default::default() };
        Ok(Tracer {
            conn,
            req,
            sel,
            socks: Vec::new(),
            known: Vec::new(),
            inodes: HashSet::new(),
            inodes_at: None,
            discover: None,
            discovered_at: None,
            epoch_s: unix_now(),
        })
    }

    /// Hybrid mode: a full dump only every `discover` (new sockets appear
    /// within that delay), and between dumps one batched exact query per
    /// tick for the sockets already found. A dump's cost is dominated by
    /// the kernel walking its whole established hash whatever matches;
    /// exact queries cost per matching socket only.
    pub fn hybrid(mut self, discover: Duration) -> Tracer {
        self.discover = Some(discover);
        self
    }

    /// Sets the wall-clock time (Unix seconds) of sample time zero; [`run`]
    /// sets it when its clock starts.
    pub fn set_epoch(&mut self, epoch_s: f64) {
        self.epoch_s = epoch_s;
    }

    /// One sample: rows of the matching sockets stamped with tick `tick` and
    /// time `t`.
    pub fn sample(&mut self, tick: u64, t: Duration, rows: &mut Vec<Row>) -> Result<(), TraceError> {
        if let Selector::Pid(pid) = self.sel {
            if self.inodes_at.map(|at| t >= at + PID_REFRESH || t < at).unwrap_or(true) {
                self.inodes = pid_socket_inodes(pid)?;
                self.inodes_at = Some(t);
            }
        }
        let dump_now = match (self.discover, self.discovered_at) {
            (None, _) | (Some(_), None) => true,
            (Some(d), Some(at)) => t >= at + d || t < at,
        };
        rows.clear();
        if dump_now {
            self.conn.dump_into(&self.req, &mut self.socks)?;
            self.discovered_at = Some(t);
        } else {
            self.conn.query_into(&self.known, self.req.ext, &mut self.socks)?;
        }
        // The fresh answers become the known set (no copies): closed
        // sockets drop out, a dump brings any new ones.
        std::mem::swap(&mut self.known, &mut self.socks);
        let (sel, inodes) = (&self.sel, &self.inodes);
        self.known.retain(|s| s.tcp_info_raw().is_some() && sel.matches(s, inodes));
        let epoch = self.epoch_s;
        rows.extend(self.known.iter().filter_map(|s| Row::from_socket(tick, t, epoch, s)));
        Ok(())
    }
}

/// Output format, chosen by the file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Jsonl,
}

impl Format {
    /// `.jsonl`/`.json`/`.ndjson` → JSON Lines; anything else → CSV.
    pub fn from_path(p: &std::path::Path) -> Format {
        match p.extension().and_then(|e| e.to_str()) {
            Some("jsonl") | Some("json") | Some("ndjson") => Format::Jsonl,
            _ => Format::Csv,
        }
    }
}

/// Writes rows in one format.
pub struct RowWriter<W: Write> {
    out: W,
    format: Format,
    header_done: bool,
}

impl<W: Write> RowWriter<W> {
    pub fn new(out: W, format: Format) -> Self {
        RowWriter { out, format, header_done: false }
    }
    pub fn write(&mut self, rows: &[Row]) -> std::io::Result<()> {
        if self.format == Format::Csv && !self.header_done {
            writeln!(self.out, "{CSV_HEADER}")?;
            self.header_done = true;
        }
        for r in rows {
            match self.format {
                Format::Csv => {
                    r.write_csv(&mut self.out)?;
                    self.out.write_all(b"\n")?;
                }
                Format::Jsonl => {
                    // The row's own object with the record type put first,
                    // without building an intermediate JSON value.
                    let body = serde_json::to_string(r).map_err(std::io::Error::other)?;
                    let fields = body.strip_prefix('{').unwrap_or(&body);
                    writeln!(self.out, "{{\"type\":\"sample\",{fields}")?;
                }
            }
        }
        Ok(())
    }
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// CPU time the calling thread has used (`/proc/thread-self/schedstat`,
/// nanoseconds on CPU), including time in the kernel serving its dumps.
pub fn thread_cpu_time() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok().map(Duration::from_nanos)
}

/// What a trace run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub ticks: u64,
    pub missed_ticks: u64,
    pub rows: u64,
    /// Distinct sockets (by 4-tuple) seen.
    pub sockets: usize,
    pub wall_s: f64,
    /// CPU time of the sampling thread.
    pub cpu_s: Option<f64>,
    /// `cpu_s / wall_s`: share of one core.
    pub cpu_share: Option<f64>,
    /// Largest number of sockets in one tick.
    pub max_sockets_per_tick: usize,
}

/// Runs `tracer` every `interval` until `duration` passes or `stop` is set,
/// handing each tick's rows to `sink`. Sleeps to absolute deadlines.
pub fn run(
    tracer: &mut Tracer,
    interval: Duration,
    duration: Option<Duration>,
    stop: &std::sync::atomic::AtomicBool,
    mut sink: impl FnMut(&[Row]) -> Result<(), TraceError>,
) -> Result<Summary, TraceError> {
    let start = std::time::Instant::now();
    tracer.set_epoch(unix_now());
    let cpu0 = thread_cpu_time();
    let mut sched = Schedule::new(interval);
    if let Some(d) = duration {
        sched = sched.until(d);
    }
    let mut rows = Vec::new();
    let mut seen = HashSet::new();
    let mut sum = Summary::default();
    while let Some((tick, deadline)) = sched.next_tick(start.elapsed()) {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let now = start.elapsed();
        if deadline > now {
            std::thread::sleep(deadline - now);
        }
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        tracer.sample(tick, start.elapsed(), &mut rows)?;
        sum.ticks += 1;
        sum.rows += rows.len() as u64;
        sum.max_sockets_per_tick = sum.max_sockets_per_tick.max(rows.len());
        for r in &rows {
            seen.insert((r.src, r.dst));
        }
        sink(&rows)?;
    }
    sum.missed_ticks = sched.missed;
    sum.sockets = seen.len();
    sum.wall_s = start.elapsed().as_secs_f64();
    if let (Some(a), Some(b)) = (cpu0, thread_cpu_time()) {
        let cpu = b.saturating_sub(a).as_secs_f64();
        sum.cpu_s = Some(cpu);
        sum.cpu_share = (sum.wall_s > 0.0).then(|| cpu / sum.wall_s);
    }
    Ok(sum)
}

/// Most sockets a plot shows (the ones with the most samples).
const PLOT_MAX_SOCKETS: usize = 8;

/// True when the row's socket has sent data that was acknowledged (more
/// than the SYN's one byte): the sockets whose cwnd, ssthresh and RTT mean
/// something. Receivers (an accepted socket that only reads), listeners and
/// idle connections sit at their initial window and only clutter a plot.
/// Kernels without `tcpi_bytes_acked` count every established socket.
pub fn has_sent(r: &Row) -> bool {
    match r.bytes_acked {
        Some(b) => b > 1,
        None => r.state != "LISTEN",
    }
}

/// The rows a plot keeps, bounded: up to `max_sockets` sockets, first come
/// first kept, and unless `all` only sockets that sent data, from their
/// first sample with acknowledged data on.
#[derive(Debug, Clone)]
pub struct PlotRows {
    max_sockets: usize,
    all: bool,
    keys: HashSet<(SocketAddr, SocketAddr)>,
    /// Sockets seen but left out (receivers, listeners, idle).
    pub left_out: HashSet<(SocketAddr, SocketAddr)>,
    pub rows: Vec<Row>,
}

impl PlotRows {
    pub fn new(max_sockets: usize, all: bool) -> PlotRows {
        PlotRows { max_sockets, all, keys: HashSet::new(), left_out: HashSet::new(), rows: Vec::new() }
    }
    /// Offers one sampled row.
    pub fn offer(&mut self, r: &Row) {
        let key = (r.src, r.dst);
        if !self.keys.contains(&key) {
            if !(self.all || has_sent(r)) {
                self.left_out.insert(key);
                return;
            }
            if self.keys.len() >= self.max_sockets {
                return;
            }
            self.left_out.remove(&key);
            self.keys.insert(key);
        }
        self.rows.push(r.clone());
    }
}

/// Two stacked charts, like the tutorial's tcp_probe plots: cwnd and
/// ssthresh (segments) over time, and smoothed RTT (ms) over time.
pub fn plot_svg(rows: &[Row], title: &str) -> String {
    use std::collections::BTreeMap;
    let mut by: BTreeMap<(SocketAddr, SocketAddr), Vec<&Row>> = BTreeMap::new();
    for r in rows {
        by.entry((r.src, r.dst)).or_default().push(r);
    }
    let mut socks: Vec<_> = by.into_iter().collect();
    socks.sort_by_key(|(k, v)| (std::cmp::Reverse(v.len()), *k));
    socks.truncate(PLOT_MAX_SOCKETS);
    let mut win = tcpaccel_plot::Chart::new(format!("{title}: cwnd and ssthresh"), "time (s)", "segments");
    let mut rtt = tcpaccel_plot::Chart::new(format!("{title}: smoothed RTT"), "time (s)", "ms");
    for ((src, dst), v) in &socks {
        let name = format!("{src}→{dst}");
        win = win.line(format!("cwnd {name}"), v.iter().map(|r| (r.t_s, r.cwnd as f64)).collect());
        let ss: Vec<_> = v.iter().filter_map(|r| r.ssthresh.map(|s| (r.t_s, s as f64))).collect();
        if !ss.is_empty() {
            win = win.line(format!("ssthresh {name}"), ss);
        }
        rtt = rtt.line(name, v.iter().map(|r| (r.t_s, r.srtt_us as f64 / 1000.0)).collect());
    }
    let (w, h) = (win.width, win.height);
    let a = tcpaccel_plot::line_chart(&win);
    let b = tcpaccel_plot::line_chart(&rtt).replacen("<svg ", &format!("<svg y=\"{h}\" "), 1);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" viewBox=\"0 0 {w} {}\">{a}{b}</svg>\n",
        2.0 * h,
        2.0 * h
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn schedule_is_absolute_and_skips_missed_ticks() {
        let mut s = Schedule::new(ms(10));
        assert_eq!(s.next_tick(ms(0)), Some((0, ms(0))));
        // Sampling took 3 ms: the next deadline stays at 10 ms, not 13 ms.
        assert_eq!(s.next_tick(ms(3)), Some((1, ms(10))));
        assert_eq!(s.next_tick(ms(12)), Some((2, ms(20))));
        // A stall until 55 ms: ticks 3 and 4, whose slots passed, are skipped.
        assert_eq!(s.next_tick(ms(55)), Some((5, ms(50))));
        assert_eq!(s.missed, 2);
        assert_eq!(s.next_tick(ms(56)), Some((6, ms(60))));
        // Deadlines never drift over many ticks.
        let mut s = Schedule::new(Duration::from_micros(10_000));
        let mut last = Duration::ZERO;
        for k in 0..100_000u64 {
            let (i, d) = s.next_tick(last).unwrap();
            assert_eq!((i, d), (k, ms(10 * k)));
            last = d + Duration::from_micros(1234);
        }
        assert_eq!(s.missed, 0);
    }

    #[test]
    fn schedule_ends_and_counts_only_ticks_before_the_end() {
        let mut s = Schedule::new(ms(10)).until(ms(100));
        assert_eq!(s.next_tick(ms(0)), Some((0, ms(0))));
        // Stalled past the end: ticks 1..=10 were all missed, none after.
        assert_eq!(s.next_tick(ms(500)), None);
        assert_eq!(s.missed, 10);
        let mut s = Schedule::new(ms(10)).until(ms(100));
        let mut n = 0;
        while let Some((_, d)) = s.next_tick(ms(0).max(Duration::ZERO)) {
            assert!(d <= ms(100));
            n += 1;
            if n > 100 {
                break;
            }
        }
        assert_eq!(n, 11, "ticks 0..=10");
    }

    #[test]
    fn selectors() {
        assert_eq!(
            Selector::parse_dst("10.0.0.1:5201"),
            Some(Selector::Dst("10.0.0.1".parse().unwrap(), Some(5201)))
        );
        assert_eq!(Selector::parse_dst("10.0.0.1"), Some(Selector::Dst("10.0.0.1".parse().unwrap(), None)));
        assert_eq!(Selector::parse_dst("[::1]:80"), Some(Selector::Dst("::1".parse().unwrap(), Some(80))));
        assert_eq!(Selector::parse_dst("fe80::1"), Some(Selector::Dst("fe80::1".parse().unwrap(), None)));
        assert_eq!(Selector::parse_dst("nonsense"), None);
        assert!(same_ip("::ffff:10.0.0.1".parse().unwrap(), "10.0.0.1".parse().unwrap()));
    }

    fn row(t: f64, cwnd: u32) -> Row {
        Row {
            tick: (t * 100.0).round() as u64,
            t_s: t,
            ts: 1_700_000_000.0 + t,
            src: "127.0.0.1:1000".parse().unwrap(),
            dst: "127.0.0.1:2000".parse().unwrap(),
            state: "ESTAB",
            cc: Some("cubic".into()),
            cwnd,
            ssthresh: None,
            srtt_us: 50,
            rttvar_us: 25,
            min_rtt_us: Some(20),
            mss: 32768,
            unacked: 0,
            lost: 0,
            retrans: 0,
            total_retrans: 0,
            delivery_rate_bps: Some(8_000),
            pacing_rate_bps: None,
            bytes_acked: Some(1),
            bytes_received: Some(0),
            busy_us: Some(10),
            rwnd_limited_us: Some(0),
            sndbuf_limited_us: Some(0),
            inode: 42,
        }
    }

    /// Issue 14 item 15: receivers, listeners and idle sockets stay out of the
    /// plot unless asked for.
    #[test]
    fn plot_keeps_senders_unless_all_are_asked_for() {
        let sender = row(0.1, 40); // bytes_acked 1 in row(): make it a sender
        let sender = Row { bytes_acked: Some(5_000_000), ..sender };
        let receiver = Row {
            src: "127.0.0.1:2000".parse().unwrap(),
            dst: "127.0.0.1:1000".parse().unwrap(),
            bytes_acked: Some(1),
            bytes_received: Some(5_000_000),
            ..row(0.1, 10)
        };
        let listener = Row {
            src: "127.0.0.1:2000".parse().unwrap(),
            dst: "0.0.0.0:0".parse().unwrap(),
            state: "LISTEN",
            bytes_acked: None,
            ..row(0.1, 10)
        };
        let mut p = PlotRows::new(8, false);
        for r in [&listener, &receiver, &sender, &receiver] {
            p.offer(r);
        }
        assert_eq!(p.rows.len(), 1);
        assert_eq!((p.rows[0].src, p.rows[0].dst), (sender.src, sender.dst));
        assert_eq!(p.left_out.len(), 2);
        let svg = plot_svg(&p.rows, "t");
        assert!(svg.contains("127.0.0.1:1000→127.0.0.1:2000"));
        assert!(!svg.contains("127.0.0.1:2000→127.0.0.1:1000"));
        // A socket joins once it has sent data.
        p.offer(&Row { bytes_acked: Some(10), ..receiver.clone() });
        assert_eq!(p.rows.len(), 2);
        let mut all = PlotRows::new(8, true);
        for r in [&listener, &receiver, &sender] {
            all.offer(r);
        }
        assert_eq!(all.rows.len(), 3);
        // The bound holds.
        let mut one = PlotRows::new(1, true);
        for r in [&listener, &receiver, &sender] {
            one.offer(r);
        }
        assert_eq!(one.rows.len(), 1);
    }

    #[test]
    fn writers_and_plot() {
        let rows = vec![row(0.0, 10), row(0.01, 20)];
        let mut buf = Vec::new();
        let mut w = RowWriter::new(&mut buf, Format::Csv);
        w.write(&rows).unwrap();
        w.write(&rows[..1]).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(lines[1].split(',').count(), CSV_HEADER.split(',').count());
        assert!(lines[2]
            .starts_with("1,0.010000,1700000000.010000,127.0.0.1:1000,127.0.0.1:2000,ESTAB,cubic,20,,50,"));
        let mut buf = Vec::new();
        RowWriter::new(&mut buf, Format::Jsonl).write(&rows).unwrap();
        let first: serde_json::Value =
            serde_json::from_str(String::from_utf8(buf).unwrap().lines().next().unwrap()).unwrap();
        assert_eq!(first["type"], "sample");
        assert_eq!(first["cwnd"], 10);
        assert_eq!(first["ts"], 1_700_000_000.0);
        assert_eq!(Format::from_path(std::path::Path::new("x.jsonl")), Format::Jsonl);
        assert_eq!(Format::from_path(std::path::Path::new("x.csv")), Format::Csv);
        let svg = plot_svg(&rows, "trace");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<svg").count(), 3);
        assert!(svg.contains("cwnd"));
    }
}
