//! `lab pacing-apps` (issue 47): ordinary programs under the cgroup pacer,
//! on [PSPacer]'s path (500 Mbit/s, 100 ms, 1 MB drop-tail; 25 MB socket
//! buffer maxima as seed 000's hosts). Each variant is PROGRAM/PACE:
//!
//! - programs: `send` (this binary's `send --cc cubic` to its `recv`, as
//!   a user runs them), `iperf3` (`iperf3 -c … -C cubic`, as the issue ran
//!   it), `nc` (`cat /dev/zero | nc`, netcat-openbsd), `http`
//!   (`python3 -m http.server` in h1 serving a large file, `curl` in h2
//!   fetching it) and `nginx` (the same download from nginx with
//!   `sendfile`, which copies nothing in user space;
//!   `scripts/install-split-peers.sh` installs it). Both serve a sparse
//!   file from tmpfs ([`doc_root`]: served from disk, every download found
//!   the emulator late). The outside programs run with the namespace's default
//!   congestion control (the host's; a namespace may only pick an allowed
//!   one), which the run's notes name.
//! - paces: `none`, `static-bpf` (`pace run --pace static:RATE`, the path's
//!   rate on the wire) and `hold` (`pace run --pace dynamic --hold`). The
//!   outside programs start inside a fresh cgroup with the pacer attached
//!   (joined before they execute, so every socket they open is paced, as
//!   with `tcpaccel pace run`).
//!
//! Records per run: goodput (what the receiving side got over the
//! transfer's time), the bottleneck's drops, the time from the transfer's
//! first full-size segment until a 100 ms window of the bottleneck's
//! arrivals reaches 95% of the run's final rate (the mean of its last two
//! seconds), and with `hold` the hold's state of every
//! paced socket every 100 ms ([`HoldTrace`], recorded as `hold_*` series,
//! one per socket: `hold_cap_mbps/s1`, …).

use crate::engines::cgroup_pacer::{record_hold, HoldTrace};
use crate::runner::claims::{Claim, Goal, Measure, GOAL_BENCH};
use crate::runner::records::MetricSpec;
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use crate::runner::typed::{choices, scenario_params, ScenarioParams};
use crate::testbeds::dumbbell::{baseline_sysctls, sockbuf_sysctls, sysctls, Path2};
use crate::testbeds::meter::{parse_bins, MeterBin};
use crate::testbeds::ScratchDir;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::units::{Bytes, Rate};
use tcpaccel_net::{MeterOptions, Network};

pub struct PacingApps;

const PROGRAMS: [&str; 5] = ["send", "iperf3", "nc", "http", "nginx"];
const PACES: [&str; 3] = ["none", "static-bpf", "hold"];
const VARIANTS: [&str; 15] = [
    "send/none",
    "send/static-bpf",
    "send/hold",
    "iperf3/none",
    "iperf3/static-bpf",
    "iperf3/hold",
    "nc/none",
    "nc/static-bpf",
    "nc/hold",
    "http/none",
    "http/static-bpf",
    "http/hold",
    "nginx/none",
    "nginx/static-bpf",
    "nginx/hold",
];
scenario_params! {
    /// The pacing-apps scenario's parameters, read from the resolved map ([`Params::typed`]).
    pub struct AppsParams {
        rate: Rate = "500mbit" => "bottleneck rate (on the wire)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        rtt: Duration = "100ms" => "round-trip propagation delay",
        buffer: Bytes = "1MB" => "drop-tail buffer at the bottleneck",
        sockbuf: Bytes = "25MB" => "socket buffer maximum (tcp_rmem/tcp_wmem) on both hosts",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        duration: Duration = "20s" => "length of each transfer",
        variants: Vec<String> = VARIANTS.join(",") => "which PROGRAM/PACE variants to run",
    }
}

impl AppsParams {
    /// The parameters with their variants checked.
    fn read(p: &Params) -> Result<AppsParams> {
        let q: AppsParams = p.typed()?;
        choices("variants", &q.variants, &VARIANTS)?;
        Ok(q)
    }
}

/// The names of this scenario's metrics, for its records and tests to
/// name them by.
pub mod metric {
    pub use crate::testbeds::dumbbell::metric::{DROPS, GOODPUT_MBPS};
    pub const RAMP_95_S: &str = "ramp_95_s";

    /// The human names of the keys this scenario records (metrics and
    /// series), as its tables and plots title them.
    pub const NAMES: &[(&str, &str)] = &[(RAMP_95_S, "Time to 95% of the set rate")];
}

/// The port every program's data connection goes to.
const APP_PORT: u16 = 5301;
/// Width of the windows the ramp and the final rate are read over.
const WINDOW_S: f64 = 0.1;
/// The final rate: the mean of the last this many seconds of arrivals.
const FINAL_S: f64 = 2.0;

impl Scenario for PacingApps {
    fn name(&self) -> &'static str {
        "pacing-apps"
    }
    fn title(&self) -> &'static str {
        "Programs we did not write under the cgroup pacer: iperf3, nc, HTTP downloads"
    }
    fn description(&self) -> &'static str {
        "iperf3, an nc sender and curl downloads from python's http.server and from nginx, beside the traffic tool, \
         each unpaced, under `pace run --pace static:RATE` and under `pace run --pace dynamic --hold`, \
         over a 500 Mbit/s, 100 ms path with a 1 MB drop-tail buffer."
    }
    fn params(&self) -> Vec<ParamSpec> {
        AppsParams::specs()
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        AppsParams::read(p).map(drop)
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("duration", "8s"), ("rate", "100mbit"), ("buffer", "200KB"), ("sockbuf", "5MB")]
    }
    fn default_repeats(&self) -> u32 {
        3
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        Ok(AppsParams::read(p)?.variants)
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        [crate::testbeds::dumbbell::metric::NAMES, metric::NAMES].concat()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        let spec = MetricSpec::lower_is_better;
        vec![
            MetricSpec::new(
                metric::GOODPUT_MBPS,
                "Mbit/s",
                true,
                "payload the receiving side got per second",
            ),
            spec(metric::DROPS, "packets", "frames dropped at the bottleneck (h1 → h2)"),
            spec(
                metric::RAMP_95_S,
                "s",
                "from the transfer's first full-size segment until a 100 ms window reaches 95% of the run's \
                 final rate (last 2 s)",
            ),
        ]
    }
    fn claims(&self) -> &'static [Claim] {
        CLAIMS
    }
    fn notes(&self, _p: &Params) -> Result<Vec<String>> {
        Ok(vec![
            "iperf3, nc, http and nginx run with the namespace's default congestion control unless they choose \
             (iperf3 -C cubic); send uses CUBIC."
                .into(),
            "Targets (issue 47): under hold, goodput >= 0.95 of the same program's static-bpf, drops <= 1/10 \
             of unpaced CUBIC's (send/none), ramp_95_s <= 2.5 s."
                .into(),
        ])
    }
    fn estimate(&self, p: &Params, _d: Dilation) -> Result<Duration> {
        Ok(AppsParams::read(p)?.duration + Duration::from_secs(6))
    }
    fn prepare(&self, p: &Params, _config: &RunConfig, dir: &Path) -> Result<Box<dyn Testbed>> {
        let q = AppsParams::read(p)?;
        Ok(Box::new(AppsBed {
            path: Path2 { rate: q.rate, rtt: q.rtt, buffer: q.buffer },
            sockbuf: q.sockbuf,
            duration: q.duration,
            dir: std::path::absolute(dir).with_context(|| format!("the run directory {}", dir.display()))?,
        }))
    }
}

struct AppsBed {
    path: Path2,
    sockbuf: Bytes,
    duration: Duration,
    /// The run's directory, absolute (nginx's files go under it).
    dir: PathBuf,
}

/// A variant's program and pace.
fn split_variant(v: &str) -> Result<(&str, &str)> {
    let (prog, pace) = v.split_once('/').with_context(|| format!("variant {v:?}: expected PROGRAM/PACE"))?;
    if !PROGRAMS.contains(&prog) || !PACES.contains(&pace) {
        bail!("variant {v:?}: programs are {PROGRAMS:?}, paces {PACES:?}");
    }
    Ok((prog, pace))
}

/// The pacer's default rule for a pace, and `--hold`; `None` for unpaced.
fn pace_rule(pace: &str, rate: Rate) -> Option<(String, bool)> {
    match pace {
        "static-bpf" => Some((format!("static:{rate}"), false)),
        "hold" => Some(("dynamic".into(), true)),
        _ => None,
    }
}

/// A fresh cgroup with the pacer attached by default rule (every TCP
/// connection of the cgroup): what `tcpaccel pace run` makes.
struct PacedCgroup {
    att: Option<tcpaccel_pacer::Attachment>,
    cg: Option<tcpaccel_pacer::TempCgroup>,
}

impl PacedCgroup {
    fn new(rule: &str, hold: bool) -> Result<PacedCgroup> {
        tcpaccel_pacer::probe().context("the cgroup pacer (BPF) is not usable here")?;
        let cfg = tcpaccel_pacer::PaceConfig { hold, ..tcpaccel_pacer::PaceConfig::parse(rule, &[], None)? };
        let cg = tcpaccel_pacer::TempCgroup::create(&format!("lab-apps-{}", std::process::id()))?;
        let att = tcpaccel_pacer::attach(&cg.cgroup, &cfg)?;
        Ok(PacedCgroup { att: Some(att), cg: Some(cg) })
    }
    fn procs(&self) -> Result<std::fs::File> {
        let cg = self.cg.as_ref().context("the cgroup is gone")?;
        Ok(cg.cgroup.procs()?)
    }
    fn pins(&self) -> Result<PathBuf> {
        Ok(self.att.as_ref().context("the pacer is detached")?.pins().to_path_buf())
    }
}

impl Drop for PacedCgroup {
    fn drop(&mut self) {
        if let Some(a) = self.att.take() {
            let _ = a.detach();
        }
        drop(self.cg.take());
    }
}

/// `argv` in `node`, inside `cg` if given (joined before it executes, so
/// nothing it opens escapes the pacer).
fn spawn_in(net: &Network, node: &str, cg: Option<&PacedCgroup>, argv: &[&str]) -> Result<Child> {
    let mut cmd: Command = net.exec(node, argv)?;
    if let Some(cg) = cg {
        tcpaccel_sys::bpf::command_into_cgroup(&mut cmd, cg.procs()?);
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.spawn().with_context(|| format!("starting {argv:?} in {node}"))
}

/// Waits for `child` and returns its stdout; fails with its stderr when it failed.
fn output(child: Child, what: &str) -> Result<String> {
    let out = child.wait_with_output().with_context(|| format!("waiting for {what}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            stdout.trim()
        );
    }
    Ok(stdout)
}

/// A server that must be up before the client starts: a short pause (the
/// programs print nothing we could wait for without parsing each).
fn settle() {
    std::thread::sleep(Duration::from_millis(500));
}

/// Runs one outside program's transfer; its goodput in bit/s.
fn run_program(
    net: &Network,
    prog: &str,
    cg: Option<&PacedCgroup>,
    dur: Duration,
    dir: &Path,
) -> Result<f64> {
    let dst = net.addr("h2")?.to_string();
    let src = net.addr("h1")?.to_string();
    let port = APP_PORT.to_string();
    let secs = dur.as_secs().max(1).to_string();
    match prog {
        "send" => {
            // This binary's own `send` and `recv`, as a user runs them.
            let exe = std::env::current_exe().context("finding this program")?;
            if exe.file_name().and_then(|n| n.to_str()) != Some("tcpaccel") {
                bail!("the send variants run the tcpaccel binary's send and recv; this is {}", exe.display());
            }
            let exe = exe.display().to_string();
            let listen = format!("{dst}:{port}");
            let mut recv = spawn_in(net, "h2", None, &[&exe, "recv", "--listen", &listen])?;
            settle();
            let d = format!("{secs}s");
            let sender = spawn_in(
                net,
                "h1",
                cg,
                &[
                    &exe,
                    "send",
                    "--to",
                    &listen,
                    "--duration",
                    &d,
                    "--cc",
                    "cubic",
                    "--json",
                    "--interval",
                    "off",
                ],
            )?;
            let text = output(sender, "tcpaccel send");
            let _ = recv.kill();
            let _ = recv.wait();
            let text = text?;
            text.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .find(|v| v["type"] == "summary")
                .and_then(|v| v["goodput_bps"].as_f64())
                .with_context(|| format!("tcpaccel send printed no summary with goodput_bps: {text:?}"))
        }
        "iperf3" => {
            let server = spawn_in(net, "h2", None, &["iperf3", "-s", "-1", "-p", &port])?;
            settle();
            let client = spawn_in(
                net,
                "h1",
                cg,
                &["iperf3", "-c", &dst, "-p", &port, "-t", &secs, "-C", "cubic", "-J"],
            )?;
            let text = output(client, "iperf3 -c")?;
            let _ = output(server, "iperf3 -s");
            let v: serde_json::Value = serde_json::from_str(&text).context("iperf3's JSON report")?;
            v["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .context("iperf3's report has no end.sum_received.bits_per_second")
        }
        "nc" => {
            let sink = spawn_in(net, "h2", None, &["sh", "-c", "nc -l \"$0\" | wc -c", &port])?;
            settle();
            let start = Instant::now();
            let send = format!("cat /dev/zero | timeout {secs} nc -N {dst} {port}; true");
            let sender = spawn_in(net, "h1", cg, &["sh", "-c", &send])?;
            output(sender, "the nc sender")?;
            let elapsed = start.elapsed().as_secs_f64();
            let got = output(sink, "the nc receiver")?;
            let bytes: f64 =
                got.trim().parse().with_context(|| format!("nc receiver's byte count {got:?}"))?;
            Ok(bytes * 8.0 / elapsed)
        }
        "http" => {
            let root = doc_root()?;
            let docs = root.path().display().to_string();
            let server = spawn_in(
                net,
                "h1",
                cg,
                &["python3", "-m", "http.server", &port, "--bind", &src, "--directory", &docs],
            )?;
            settle();
            curl_download(net, server, "python3 -m http.server", &format!("http://{src}:{port}/big"), &secs)
        }
        "nginx" => {
            let root = doc_root()?;
            let bin = crate::testbeds::find_bin("nginx")
                .context("the nginx variants need nginx: scripts/install-split-peers.sh installs it")?;
            let dir = dir.join("nginx");
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let conf = dir.join("nginx.conf");
            let text = crate::testbeds::nginx::conf(net.addr("h1")?, APP_PORT, root.path(), &dir)?;
            std::fs::write(&conf, text).with_context(|| format!("writing {}", conf.display()))?;
            let (bin, conf, prefix) =
                (bin.display().to_string(), conf.display().to_string(), dir.display().to_string());
            let server = spawn_in(net, "h1", cg, &[&bin, "-c", &conf, "-p", &prefix])?;
            settle();
            curl_download(net, server, "nginx", &format!("http://{src}:{port}/big"), &secs)
        }
        p => bail!("unknown program {p}"),
    }
}

/// The HTTP variants' document root: one sparse file `big` (more than
/// the path carries in a run) in a fresh directory on tmpfs (`/dev/shm`),
/// removed when dropped. A hole in a tmpfs file reads as the kernel's
/// shared zero page; in the run directory (ext4 here) the kernel
/// allocates and zeroes a page-cache page for every byte served, about
/// 1 GB a run, and every download served from there (13 runs) found the
/// emulator 17–27 ms late at p99, against 18 of 18 faithful from tmpfs
/// (issue 47's note, 2026-11-29).
fn doc_root() -> Result<ScratchDir> {
    let root = ScratchDir::new(Path::new("/dev/shm"), "tcpaccel-apps")
        .context("the HTTP document root goes on tmpfs (/dev/shm)")?;
    let file = root.path().join("big");
    let f = std::fs::File::create(&file).with_context(|| format!("creating {}", file.display()))?;
    f.set_len(64 << 30).with_context(|| format!("sizing {}", file.display()))?;
    Ok(root)
}

/// curl in h2 fetching `url` for `secs` seconds; stops `server` (`what`)
/// after it; the goodput in bit/s. A server that exited before the fetch
/// is the error, with what it printed.
fn curl_download(net: &Network, server: Child, what: &str, url: &str, secs: &str) -> Result<f64> {
    let mut server = server;
    if server.try_wait().context("checking the server")?.is_some() {
        output(server, what)?;
        bail!("{what} exited before the download");
    }
    let client = spawn_in(
        net,
        "h2",
        None,
        &[
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "--max-time",
            secs,
            "-w",
            "%{size_download} %{time_total} %{time_starttransfer}",
            url,
        ],
    )?;
    // curl exits 28 at --max-time: that is the end of the transfer here.
    let out = client.wait_with_output().context("waiting for curl")?;
    let _ = server.kill();
    let _ = server.wait();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let why =
        || format!("curl gave no transfer ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    let (size, secs, _) = crate::testbeds::parse_curl(&text).with_context(why)?;
    if size == 0 {
        bail!("{}: {text:?}", why());
    }
    Ok(size as f64 * 8.0 / secs)
}

/// Bytes of arrivals in one meter bin that only the transfer's data makes:
/// a full-size segment's frame (1514 bytes at MTU 1500) and more. What
/// arrives before it is not the transfer: neighbour discovery, handshakes,
/// iperf3's control messages, an HTTP response's header.
const FIRST_DATA_BYTES: u64 = 1200;

/// From the transfer's first byte (the first bin with a full-size segment,
/// [`FIRST_DATA_BYTES`]) until a [`WINDOW_S`] window of arrivals reaches
/// 95% of the final rate (the mean of the last [`FINAL_S`] before the
/// data ends); `None` without enough data.
///
/// Issue 47 item 3: it once counted from the first frame of any kind,
/// which came up to 5 s before the data (the meter runs from the
/// topology's start; the servers' start and the programs' own set-up came
/// in between), so static pacing's own ramp read 3.3–5.8 s.
pub fn ramp_to_final(bins: &[MeterBin]) -> Option<f64> {
    let t0 = bins.iter().find(|b| b.arrived_bytes >= FIRST_DATA_BYTES)?.start_s;
    let mut windows: Vec<f64> = Vec::new();
    for b in bins.iter().filter(|b| b.start_s >= t0) {
        let w = ((b.start_s - t0) / WINDOW_S + 1e-9).floor() as usize;
        if windows.len() <= w {
            windows.resize(w + 1, 0.0);
        }
        windows[w] += b.arrived_bytes as f64;
    }
    // The last window with data is partial: leave it and the silence after.
    while windows.last().is_some_and(|w| *w == 0.0) {
        windows.pop();
    }
    windows.pop();
    let n = (FINAL_S / WINDOW_S).round() as usize;
    if windows.len() < n + 1 {
        return None;
    }
    let last = windows[windows.len() - n..].iter().sum::<f64>() / n as f64;
    let w = windows.iter().position(|x| *x >= 0.95 * last)?;
    Some((w + 1) as f64 * WINDOW_S)
}

impl Testbed for AppsBed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let variant = ctx.variant.clone();
        let (prog, pace) = split_variant(&variant)?;
        let meter_rel = format!("meter/{}-r{}", variant.replace('/', "-"), ctx.repeat);
        let meter_dir = ctx.dir.join(&meter_rel);
        std::fs::create_dir_all(&meter_dir).with_context(|| format!("creating {}", meter_dir.display()))?;
        let net = Network::up_with(
            &self.path.topology()?,
            &MeterOptions { dir: Some(meter_dir.clone()), jsonl: false, bin: None },
        )
        .context("building the dumbbell")?;
        let mut ctl = baseline_sysctls();
        ctl.extend(sockbuf_sysctls(self.sockbuf));
        sysctls(&net, "h1", &ctl)?;
        sysctls(&net, "h2", &ctl)?;
        let cc = net.sysctl("h1", "net.ipv4.tcp_congestion_control").unwrap_or_default();
        let cg = match pace_rule(pace, self.path.rate) {
            Some((rule, hold)) => Some(PacedCgroup::new(&rule, hold)?),
            None => None,
        };
        let trace = match (&cg, pace) {
            (Some(c), "hold") => Some(HoldTrace::start(c.pins()?)),
            _ => None,
        };
        let goodput = run_program(&net, prog, cg.as_ref(), self.duration, &self.dir);
        if let Some(t) = trace {
            record_hold(ctx, &t.finish()?)?;
        }
        drop(cg);
        let td = net.teardown();
        ctx.emulator_timing(crate::testbeds::emulator_timing(&td.emulators));
        let goodput = goodput?;
        let drops = td
            .emulators
            .iter()
            .find(|(n, _)| n == "wan")
            .map(|(_, s)| s.a_to_b.drops.queue + s.a_to_b.drops.loss)
            .context("the dumbbell has no emulator on wan")?;
        ctx.metric(metric::GOODPUT_MBPS, goodput / 1e6);
        ctx.metric(metric::DROPS, drops as f64);
        ctx.attach("meter_csv", &format!("{meter_rel}/wan.csv"))?;
        let bins = parse_bins(&std::fs::read_to_string(meter_dir.join("wan.csv"))?)?;
        if let Some(s) = ramp_to_final(&bins) {
            ctx.metric(metric::RAMP_95_S, s);
        }
        if prog == "nc" || prog == "http" || prog == "nginx" {
            ctx.note(format!("{prog}: h1's default congestion control is {}", cc.trim()))?;
        }
        Ok(())
    }
}

/// The hold's three goals (issue 47) for one program: 95% of static
/// pacing's goodput, a tenth of unpaced CUBIC's drops (`send/none`, the
/// traffic tool with CUBIC, as the issue states the goal) and 95% of the
/// final rate within 2.5 s.
macro_rules! hold_goals {
    ($p:literal) => {
        [
            Claim {
                text: concat!(
                    $p,
                    " under the hold keeps 95% of static pacing's goodput (",
                    $p,
                    "/hold ÷ ",
                    $p,
                    "/static-bpf)"
                ),
                measure: Measure::Ratio {
                    num: (concat!($p, "/hold"), metric::GOODPUT_MBPS),
                    den: (concat!($p, "/static-bpf"), metric::GOODPUT_MBPS),
                },
                goal: Goal::AtLeast(0.95),
                goal_source: GOAL_BENCH,
                published: None,
                when: &[],
            },
            Claim {
                text: concat!(
                    $p,
                    " under the hold drops a tenth of unpaced CUBIC's (",
                    $p,
                    "/hold ÷ send/none)"
                ),
                measure: Measure::Ratio {
                    num: (concat!($p, "/hold"), metric::DROPS),
                    den: ("send/none", metric::DROPS),
                },
                goal: Goal::AtMost(0.1),
                goal_source: GOAL_BENCH,
                published: None,
                when: &[],
            },
            Claim {
                text: concat!($p, " under the hold reaches 95% of its final rate within 2.5 s"),
                measure: Measure::Median { variant: concat!($p, "/hold"), metric: metric::RAMP_95_S },
                goal: Goal::AtMost(2.5),
                goal_source: GOAL_BENCH,
                published: None,
                when: &[],
            },
        ]
    };
}

/// What this scenario claims: the hold's goals for every program.
const CLAIMS: &[Claim] = &{
    let [a, b, c] = hold_goals!("send");
    let [d, e, f] = hold_goals!("iperf3");
    let [g, h, i] = hold_goals!("nc");
    let [j, k, l] = hold_goals!("http");
    let [m, n, o] = hold_goals!("nginx");
    [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o]
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Every program has the hold's three goals, each judging variants the
    /// scenario runs.
    #[test]
    fn each_program_has_the_holds_goals_over_its_own_variants() {
        assert_eq!(CLAIMS.len(), 3 * PROGRAMS.len());
        for (p, goals) in PROGRAMS.iter().zip(CLAIMS.chunks(3)) {
            for c in goals {
                assert!(c.text.starts_with(p), "{p}: {}", c.text);
                for v in c.measure.variants() {
                    assert!(VARIANTS.contains(&v), "{}: {v} is no variant", c.text);
                }
                assert!(c.measure.variants()[0] == format!("{p}/hold"), "{}", c.text);
            }
        }
    }

    #[test]
    fn variants_name_a_program_and_a_pace() {
        assert_eq!(split_variant("iperf3/hold").unwrap(), ("iperf3", "hold"));
        assert!(split_variant("iperf3").is_err());
        assert!(split_variant("ftp/hold").is_err());
        assert!(split_variant("nc/dynamic").is_err());
        for v in VARIANTS {
            split_variant(v).unwrap();
        }
        assert_eq!(
            pace_rule("static-bpf", Rate::mbps(500)).unwrap().0,
            format!("static:{}", Rate::mbps(500))
        );
        assert_eq!(pace_rule("hold", Rate::mbps(500)), Some(("dynamic".into(), true)));
        assert_eq!(pace_rule("none", Rate::mbps(500)), None);
    }

    #[test]
    fn the_ramp_is_read_against_the_final_rate() {
        // 500 µs bins: 0.5 s at 2 frames a bin, then 3 s at 20, then a
        // partial last window.
        let bin = |i: usize, frames: u64| MeterBin {
            start_s: 1.0 + i as f64 * 0.0005,
            width_s: 0.0005,
            arrived_frames: frames,
            arrived_bytes: frames * 1514,
            dropped_frames: 0,
        };
        // Before the data: a neighbour solicitation and a handshake's
        // small frames, seconds earlier, which the ramp does not count.
        let small = |start_s: f64| MeterBin { start_s, arrived_frames: 1, arrived_bytes: 90, ..bin(0, 0) };
        let mut bins = vec![small(0.0055), small(0.5), small(0.9995)];
        bins.extend((0..1000).map(|i| bin(i, 2)));
        bins.extend((1000..7000).map(|i| bin(i, 20)));
        bins.extend((7000..7050).map(|i| bin(i, 20)));
        // The first window at the final rate is the sixth (0.5–0.6 s).
        let ramp = ramp_to_final(&bins).unwrap();
        assert!((ramp - 0.6).abs() < 1e-9, "{ramp}");
        // Too short for a final rate.
        assert_eq!(ramp_to_final(&bins[..2003]), None);
        assert_eq!(ramp_to_final(&[]), None);
    }
}
