//! `tcpaccel doctor` and `tcpaccel trace` as a user meets them: exit codes,
//! errors before reports, verdicts, revert safety, the target's route, and
//! trace output (issue 14, items 9-15).
//!
//! Tests that create namespaces or drop privileges need root (CI runs as
//! root); they fail loudly without it. Everything `--apply` changes is
//! inside namespaces these tests create and delete (Drop guards).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use tcpaccel_sys::testing::TestNetns;

mod common;
use common::{bin, Reaper};

fn doctor(args: &[&str]) -> Output {
    Command::new(bin()).arg("doctor").args(args).output().expect("run tcpaccel doctor")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A namespace of this test (deleted on drop, also when the test panics)
/// and its sysctls as `sysctl(8)` shows them.
struct Netns(TestNetns);

impl Netns {
    fn new(tag: &str) -> Netns {
        Netns(TestNetns::one(&format!("doccli-{tag}")))
    }
    fn name(&self) -> &str {
        self.0.name()
    }
    fn sysctl(&self, key: &str) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", self.name(), "sysctl", "-n", key])
            .output()
            .expect("sysctl");
        assert!(out.status.success(), "sysctl {key}: {}", text(&out.stderr));
        text(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ")
    }
    fn set(&self, key: &str, value: &str) {
        let out = Command::new("ip")
            .args(["netns", "exec", self.name(), "sysctl", "-q", "-w", &format!("{key}={value}")])
            .output()
            .expect("sysctl -w");
        assert!(out.status.success(), "sysctl -w {key}: {}", text(&out.stderr));
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip(8)");
    assert!(out.status.success(), "ip {args:?}: {}", text(&out.stderr));
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tcpaccel-doccli-{}-{name}", std::process::id()))
}

fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    text(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Item 9: a user who may not enter the namespace gets exit 3 and no
/// report, instead of 15 unknown findings and "healthy": true.
#[test]
fn root_non_root_doctor_of_a_namespace_exits_3_without_a_report() {
    tcpaccel_sys::testing::require_root();
    let ns = Netns::new("nonroot");
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            bin(),
            "doctor",
            "--netns",
            ns.name(),
            "--json",
        ])
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run setpriv (util-linux)");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "stderr: {err}");
    assert!(out.stdout.is_empty(), "no report: {}", text(&out.stdout));
    assert!(err.contains("needs root") && err.contains(ns.name()), "{err}");
}

/// Item 9: whoever runs it, exit 0 goes with a healthy verdict and nothing
/// unknown; unknown findings never read as healthy.
#[test]
fn the_exit_code_follows_the_verdict() {
    let out = doctor(&["--json"]);
    let lines = json_lines(&out.stdout);
    let sum = lines.iter().find(|l| l["type"] == "summary").expect("summary record");
    let unknown = sum["counts"]["unknown"].as_u64().unwrap();
    let bad = sum["counts"]["warn"].as_u64().unwrap() + sum["counts"]["critical"].as_u64().unwrap();
    let want = if bad > 0 {
        "unhealthy"
    } else if unknown > 0 {
        "unknown"
    } else {
        "healthy"
    };
    assert_eq!(sum["verdict"], want, "{sum}");
    assert_eq!(sum["healthy"], want == "healthy", "{sum}");
    assert_eq!(out.status.code(), Some(if want == "healthy" { 0 } else { 1 }), "{sum}");
}

/// Item 14: bad values exit 2 with a message that names them, before any
/// report.
#[test]
fn bad_values_exit_2_naming_them_and_print_no_report() {
    for (args, needle) in [
        (&["--rate", "-1gbit", "--rtt", "10ms"][..], "-1gbit"),
        (&["--rate", "1gbit", "--rtt", "-5ms"][..], "-5ms"),
        (&["--netns", "tcpaccel-doccli-no-such-ns"][..], "tcpaccel-doccli-no-such-ns"),
    ] {
        let out = doctor(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} printed a report: {}", text(&out.stdout));
    }
}

/// Item 14: a missing or malformed --revert file is a usage error (2) that
/// names the file.
#[test]
fn root_a_bad_revert_file_exits_2_naming_it() {
    tcpaccel_sys::testing::require_root();
    let missing = tmp("missing.json");
    let _ = std::fs::remove_file(&missing);
    let garbage = tmp("garbage.json");
    std::fs::write(&garbage, "{ not json").unwrap();
    for (f, why) in [(&missing, "cannot read"), (&garbage, "not a doctor saved-state file")] {
        let out = doctor(&["--revert", f.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", f.display());
        assert!(err.contains(&f.display().to_string()) && err.contains(why), "{err}");
    }
    let _ = std::fs::remove_file(&garbage);
}

/// Item 14: --revert does not silently undo a change made after --apply;
/// it names it, changes nothing, and restores only with --force.
#[test]
fn root_revert_refuses_values_changed_since_apply_unless_forced() {
    tcpaccel_sys::testing::require_root();
    let ns = Netns::new("revert");
    ns.set("net.ipv4.tcp_rmem", "4096 131072 1000000");
    ns.set("net.ipv4.tcp_slow_start_after_idle", "1");
    let save = tmp("saved.json");
    let _ = std::fs::remove_file(&save);
    let out = doctor(&[
        "--netns",
        ns.name(),
        "--rate",
        "1gbit",
        "--rtt",
        "100ms",
        "--apply",
        "--save",
        save.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.code().is_some_and(|c| c <= 1), "apply: {}", text(&out.stderr));
    assert_eq!(ns.sysctl("net.ipv4.tcp_rmem"), "4096 131072 25165824");
    // Someone changes a value afterwards.
    ns.set("net.ipv4.tcp_rmem", "4096 131072 12345678");
    let out = doctor(&["--revert", save.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("net.ipv4.tcp_rmem") && err.contains("12345678") && err.contains("--force"),
        "{err}"
    );
    // Nothing restored: neither the changed value nor the others.
    assert_eq!(ns.sysctl("net.ipv4.tcp_rmem"), "4096 131072 12345678");
    assert_eq!(ns.sysctl("net.ipv4.tcp_slow_start_after_idle"), "0");
    let out = doctor(&["--revert", save.to_str().unwrap(), "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(ns.sysctl("net.ipv4.tcp_rmem"), "4096 131072 1000000");
    assert_eq!(ns.sysctl("net.ipv4.tcp_slow_start_after_idle"), "1");
    // Issue 28: a second --revert finds everything restored: exit 0, no warnings.
    let out = doctor(&["--revert", save.to_str().unwrap()]);
    let (err, said) = (text(&out.stderr), text(&out.stdout));
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert!(said.contains("already restored"), "{said}");
    let _ = std::fs::remove_file(&save);
}

/// Starts `tcpaccel recv` in `ns` on 127.0.0.1 and returns it with its port.
fn recv_in(ns: &Netns) -> (Reaper, BufReader<std::process::ChildStdout>, u16) {
    let mut child = Reaper(
        Command::new("ip")
            .args(["netns", "exec", ns.name(), bin(), "recv", "--listen", "127.0.0.1:0", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn recv"),
    );
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).expect("recv's first line");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let port = v["listen"].as_str().and_then(|a| a.rsplit(':').next()).and_then(|p| p.parse().ok());
    (child, out, port.unwrap_or_else(|| panic!("no port in {line}")))
}

/// Items 13, 11 and 15: with a loopback target in a namespace that also has
/// a default route, the doctor advises only the loopback route (never the
/// default one), judges no interface but the egress (lo), and its
/// handshake probes show up at the receiver as empty connections, not errors.
#[test]
fn root_loopback_target_advises_only_its_own_route() {
    tcpaccel_sys::testing::require_root();
    let ns = Netns::new("route");
    ip(&["-n", ns.name(), "link", "add", "dva", "type", "veth", "peer", "name", "dvb"]);
    ip(&["-n", ns.name(), "addr", "add", "10.211.0.1/24", "dev", "dva"]);
    ip(&["-n", ns.name(), "link", "set", "dva", "up"]);
    ip(&["-n", ns.name(), "link", "set", "dvb", "up"]);
    ip(&["-n", ns.name(), "route", "add", "default", "via", "10.211.0.2", "dev", "dva"]);
    ns.set("net.ipv4.tcp_rto_min_us", "200000");
    let (recv, mut recv_out, port) = recv_in(&ns);
    let target = format!("127.0.0.1:{port}");
    let out = doctor(&[
        "--netns",
        ns.name(),
        "--target",
        &target,
        "--rate",
        "10gbit",
        "--handshakes",
        "3",
        "--json",
    ]);
    let lines = json_lines(&out.stdout);
    let findings: Vec<_> = lines.iter().filter(|l| l["type"] == "finding").collect();
    let rto = findings.iter().find(|f| f["id"] == "rto_min").expect("rto_min finding");
    assert_eq!(rto["severity"], "warn", "{rto}");
    let cmds: Vec<&str> =
        findings.iter().flat_map(|f| f["commands"].as_array().unwrap()).filter_map(|c| c.as_str()).collect();
    assert!(
        cmds.iter().any(|c| c.starts_with(&format!("ip -n {} route change local 127.", ns.name()))
            && c.contains("dev lo table local")),
        "{cmds:#?}"
    );
    assert!(!cmds.iter().any(|c| c.contains("route change default")), "{cmds:#?}");
    // Only the egress interface (lo) is judged; the veth with the default route is not.
    assert!(!findings.iter().any(|f| f["id"].as_str().unwrap().ends_with(":dva")), "{findings:#?}");
    // The receiver saw 3 probes (and the doctor's live-connection read none):
    // empty connections, no errors.
    let pid = recv.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut summary = None;
    for line in (&mut recv_out).lines() {
        let line = line.expect("recv output");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or(serde_json::Value::Null);
        if v["type"] == "summary" {
            summary = Some(v);
            break;
        }
        assert!(Instant::now() < deadline, "recv did not stop");
    }
    let s = summary.expect("recv summary");
    assert_eq!(s["errors"], 0, "{s}");
    assert_eq!(s["empty"], 3, "{s}");
}

/// Item 15: rows carry wall-clock time beside relative time, and the plot
/// leaves out the receiving side of a transfer unless --plot-all.
#[test]
fn trace_has_wall_clock_time_and_plots_senders_only() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (mut server, _) = l.accept().unwrap();
    let sender = format!("{}→{}", client.local_addr().unwrap(), client.peer_addr().unwrap());
    let receiver = format!("{}→{}", server.local_addr().unwrap(), server.peer_addr().unwrap());
    // Data one way, for the whole trace.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (s1, s2) = (stop.clone(), stop.clone());
    let w = std::thread::spawn(move || {
        let buf = vec![7u8; 65536];
        while !s1.load(std::sync::atomic::Ordering::Relaxed) {
            if client.write_all(&buf).is_err() {
                break;
            }
        }
    });
    let r = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            if std::io::Read::read(&mut server, &mut buf).unwrap_or(0) == 0 {
                break;
            }
        }
    });
    let (csv, svg, svg_all) = (tmp("trace.csv"), tmp("trace.svg"), tmp("trace-all.svg"));
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let port_s = port.to_string();
    let run = |plot: &PathBuf, extra: &[&str]| {
        let mut args = vec!["trace", "--port", port_s.as_str(), "--interval", "20ms"];
        args.extend([
            "--duration",
            "600ms",
            "--out",
            csv.to_str().unwrap(),
            "--plot",
            plot.to_str().unwrap(),
        ]);
        args.extend(extra);
        let out = Command::new(bin()).args(&args).output().expect("run trace");
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stderr)
    };
    let err = run(&svg, &[]);
    let after = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let rows = std::fs::read_to_string(&csv).unwrap();
    let mut lines = rows.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(&header[..3], ["tick", "t_s", "ts"]);
    let first: Vec<&str> = lines.next().expect("a row").split(',').collect();
    let ts: f64 = first[2].parse().unwrap();
    assert!(ts >= before - 1.0 && ts <= after + 1.0, "ts {ts} not within [{before}, {after}]");
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.contains(&sender), "sender {sender} not plotted");
    assert!(!plot.contains(&receiver), "receiver {receiver} plotted");
    assert!(err.contains("--plot-all"), "{err}");
    run(&svg_all, &["--plot-all"]);
    let all = std::fs::read_to_string(&svg_all).unwrap();
    assert!(all.contains(&sender) && all.contains(&receiver));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = w.join();
    let _ = r.join();
    for f in [&csv, &svg, &svg_all] {
        let _ = std::fs::remove_file(f);
    }
}

/// Issue 28: `--plot` writes SVG only, so another extension is refused
/// before tracing (it used to write SVG into a .png file).
#[test]
fn trace_refuses_a_plot_file_that_is_not_svg() {
    let png = tmp("trace-plot.png");
    let _ = std::fs::remove_file(&png);
    let out = Command::new(bin())
        .args(["trace", "--port", "9", "--duration", "10ms", "--plot", png.to_str().unwrap()])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(".svg") && err.contains("trace-plot.png"), "{err}");
    assert!(!png.exists(), "nothing written");
}

/// Issue 28: `--node` names a node of a running network instead of its
/// namespace; it cannot be combined with --netns, and an unknown run is a
/// usage error naming it.
#[test]
fn node_flag_is_taken_by_trace_and_doctor() {
    for cmd in ["trace", "doctor"] {
        let out = Command::new(bin()).args([cmd, "--node", "h1", "--netns", "x"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", text(&out.stderr));
        let extra: &[&str] = if cmd == "trace" { &["--duration", "10ms"] } else { &[] };
        let out = Command::new(bin())
            .args([cmd, "--node", "h1", "--run", "tcpaccel-no-such-run-id"])
            .args(extra)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(err.contains("tcpaccel-no-such-run-id"), "{cmd}: {err}");
    }
}
