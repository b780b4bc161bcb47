//! `tcpaccel pace` end to end, as root: a loopback transfer run inside a
//! paced cgroup goes at the set rate while one outside does not; attach,
//! status and detach through the CLI leave nothing behind; bad rules and a
//! missing privilege get their exit codes. Rates are modest and margins
//! generous (the machine may be loaded): these check that pacing happens,
//! BENCHMARKS.md measures how precisely.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use tcpaccel_sys::testing::TestNetns;

mod common;
use common::{bin, free_port, Reaper};

fn receiver(port: u16) -> Reaper {
    let child = Command::new(bin())
        .args(["recv", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .spawn()
        .expect("start tcpaccel recv");
    // Wait until it listens.
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Reaper(child)
}

/// Goodput (bit/s) from `send --json`'s summary line.
fn goodput(out: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(out);
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("\"summary\""))
        .unwrap_or_else(|| panic!("no summary in {text}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    v["goodput_bps"].as_f64().unwrap()
}

fn send_args(port: u16, secs: &str) -> Vec<String> {
    ["send", "--to", &format!("127.0.0.1:{port}"), "--duration", secs, "--interval", "off", "--json"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn root_transfer_in_the_cgroup_is_paced_and_one_outside_is_not() {
    tcpaccel_sys::testing::require_root();
    let port = free_port();
    let _recv = receiver(port);
    let out = Command::new(bin())
        .args(["pace", "run", "--pace", "static:30mbit", "--"])
        .arg(bin())
        .args(send_args(port, "3s"))
        .output()
        .unwrap();
    assert!(out.status.success(), "pace run failed: {}", String::from_utf8_lossy(&out.stderr));
    let inside = goodput(&out.stdout);
    assert_no_leftovers(&out.stderr);
    // 30 Mbit/s on the wire is 29.9 Mbit/s of payload at loopback's MSS.
    assert!((24e6..33e6).contains(&inside), "paced transfer at {:.1} Mbit/s", inside / 1e6);

    let out = Command::new(bin()).args(send_args(port, "2s")).output().unwrap();
    assert!(out.status.success());
    let outside = goodput(&out.stdout);
    assert!(outside > 10.0 * inside, "unpaced {:.1} vs paced {:.1} Mbit/s", outside / 1e6, inside / 1e6);
}

/// `pace run` names its cgroup and pins on stderr: both must be gone.
fn assert_no_leftovers(stderr: &[u8]) {
    let err = String::from_utf8_lossy(stderr);
    let line = err.lines().find(|l| l.contains("running in cgroup")).unwrap_or_else(|| panic!("{err}"));
    // "tcpaccel pace: running in cgroup PATH (pins DIR)"
    let rest = line.split("running in cgroup ").nth(1).unwrap();
    let (cg, pins) = rest.split_once(" (pins ").unwrap();
    let pins = pins.trim_end_matches(')');
    assert!(!PathBuf::from(cg).exists(), "cgroup {cg} left behind");
    assert!(!PathBuf::from(pins).exists(), "pins {pins} left behind");
}

#[test]
fn root_attach_status_detach_through_the_cli() {
    tcpaccel_sys::testing::require_root();
    let mount = tcpaccel_pacer::cgroup2_mount().unwrap();
    let cg = mount.join("tcpaccel-test").join(format!("cli-{}", std::process::id()));
    std::fs::create_dir_all(&cg).unwrap();
    let cleanup = scopeguard(cg.clone());
    let out = Command::new(bin())
        .args(["pace", "attach", "--cgroup"])
        .arg(&cg)
        .args([
            "--pace",
            "none",
            "--rule",
            "10.9.0.0/16:80=static:50mbit",
            "--rule",
            "fd00::/8=dynamic:1gbit",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["type"], "attached");
    let id = v["cgroup_id"].as_u64().unwrap();

    // A second attach to the same cgroup: usage error naming the way out.
    let again = Command::new(bin()).args(["pace", "attach", "--cgroup"]).arg(&cg).output().unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("pace detach --cgroup"));

    let st = Command::new(bin()).args(["pace", "status", "--json"]).output().unwrap();
    assert!(st.status.success());
    let text = String::from_utf8_lossy(&st.stdout);
    let mine: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["attachment"]["cgroup_id"].as_u64() == Some(id))
        .unwrap_or_else(|| panic!("status does not list cgroup {id}: {text}"));
    let rules: Vec<(String, String)> = mine["attachment"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["dest"].as_str().unwrap().to_string(), r["pace"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        rules,
        vec![
            ("default".to_string(), "none".to_string()),
            ("10.9.0.0/16:80".to_string(), "static:50Mbit/s".to_string()),
            ("fd00::/8".to_string(), "dynamic:1Gbit/s".to_string()),
        ]
    );
    assert_eq!(mine["attachment"]["cgroup"].as_str(), Some(cg.to_str().unwrap()));
    // Issue 28: rates carry their unit in the key.
    let stats = &mine["attachment"]["rules"][1]["stats"];
    assert!(stats["last_rate_bps"].is_u64() && stats.get("last_rate").is_none(), "{stats}");
    assert!(mine["attachment"]["rules"][1]["caps_bps"].is_array(), "{mine}");
    // The table's current-caps column is never blank.
    let st = Command::new(bin()).args(["pace", "status"]).output().unwrap();
    let table = String::from_utf8_lossy(&st.stdout);
    let rows: Vec<&str> =
        table.lines().skip_while(|l| !l.starts_with(cg.to_str().unwrap())).skip(2).take(3).collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert!(rows[0].trim_end().ends_with("- (not paced)"), "{table}");
    assert!(rows[1].trim_end().ends_with("- (no socket paced yet)"), "{table}");

    // The same counters as Prometheus metrics, read from the pins on each scrape.
    let port = free_port().to_string();
    let mut m = Reaper(
        Command::new(bin())
            .args(["pace", "status", "--json", "--metrics", &port])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(m.0.stdout.take().unwrap()), &mut line).unwrap();
    assert!(line.contains("/metrics"), "{line}");
    let body = {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut b = String::new();
        s.read_to_string(&mut b).unwrap();
        b
    };
    let cgl = format!("cgroup=\"{}\"", cg.display());
    assert!(
        body.lines().any(|l| l.starts_with("tcpaccel_pacer_attachments ") && !l.ends_with(" 0")),
        "{body}"
    );
    assert!(
        body.lines().any(|l| l.starts_with("tcpaccel_pacer_connections_total{")
            && l.contains(&cgl)
            && l.contains("rule=\"10.9.0.0/16:80\"")),
        "{body}"
    );
    assert!(
        body.lines()
            .any(|l| l.starts_with("tcpaccel_pacer_held_sockets{") && l.contains(&cgl) && l.ends_with(" 0")),
        "{body}"
    );
    assert!(Command::new("kill").args(["-INT", &m.0.id().to_string()]).status().unwrap().success());
    assert_eq!(m.0.wait().unwrap().code(), Some(0));

    let d = Command::new(bin()).args(["pace", "detach", "--cgroup"]).arg(&cg).arg("--json").output().unwrap();
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    let v: serde_json::Value = serde_json::from_slice(&d.stdout).unwrap();
    assert_eq!(v["cgroup"].as_str(), Some(cg.to_str().unwrap()), "the detach names the cgroup by path");
    assert!(!PathBuf::from(format!("/sys/fs/bpf/tcpaccel/pace-{id}")).exists());
    let d = Command::new(bin()).args(["pace", "detach", "--cgroup"]).arg(&cg).output().unwrap();
    assert_eq!(d.status.code(), Some(2), "detaching twice");
    assert!(String::from_utf8_lossy(&d.stderr).contains("no tcpaccel pacing attached"));
    drop(cleanup);
}

/// Removes the test's cgroup (and its parent if empty) at the end, also on failure.
struct CgroupDir(PathBuf);
fn scopeguard(p: PathBuf) -> CgroupDir {
    CgroupDir(p)
}
impl Drop for CgroupDir {
    fn drop(&mut self) {
        let _ = Command::new(bin()).args(["pace", "detach", "--cgroup"]).arg(&self.0).output();
        let _ = std::fs::remove_dir(&self.0);
        if let Some(p) = self.0.parent() {
            let _ = std::fs::remove_dir(p);
        }
    }
}

#[test]
fn bad_rules_are_refused_with_the_offending_text() {
    for (args, want) in [
        (
            vec!["--rule", "10.0.0.0/33=static:1mbit"],
            "rule \"10.0.0.0/33=static:1mbit\": prefix length \"33\"",
        ),
        (vec!["--rule", "10.0.0.0/8"], "rule \"10.0.0.0/8\": expected DEST=PACE"),
        (vec!["--rule", "10.0.0.0/8=static:fast"], "\"10.0.0.0/8=static:fast\""),
        (vec!["--pace", "warp"], "\"warp\""),
        (vec!["--ceiling", "lots"], "'lots' for '--ceiling <CEILING>': cannot parse rate \"lots\""),
    ] {
        let out =
            Command::new(bin()).args(["pace", "run"]).args(&args).args(["--", "true"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn root_not_root_is_exit_3() {
    tcpaccel_sys::testing::require_root();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(bin())
        .args(["pace", "run", "--pace", "static:10mbit", "--", "true"])
        .output()
        .expect("setpriv (util-linux)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("needs root"), "{err}");
}

/// MPTcpExt MPCapableSYNACKRX of this namespace: MPTCP handshakes a client completed.
fn mp_capable_synacks() -> u64 {
    let t = std::fs::read_to_string("/proc/net/netstat").unwrap();
    let lines: Vec<&str> = t.lines().filter(|l| l.starts_with("MPTcpExt:")).collect();
    assert_eq!(lines.len(), 2, "no MPTcpExt counters: is MPTCP on?");
    let (names, values) = (lines[0].split_whitespace(), lines[1].split_whitespace());
    let (_, v) = names.zip(values).find(|(n, _)| *n == "MPCapableSYNACKRX").expect("MPCapableSYNACKRX");
    v.parse().unwrap()
}

#[test]
fn root_run_pace_takes_the_cgroup_path_and_paces_mptcp_subflows() {
    tcpaccel_sys::testing::require_root();
    let port = free_port();
    let child = Command::new(bin())
        .args(["recv", "--mptcp", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let _recv = Reaper(child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = mp_capable_synacks();
    // The shim makes the sender's socket MPTCP; the cgroup paces its subflow.
    let out = Command::new(bin())
        .args(["run", "--mptcp", "--pace", "static:30mbit", "--"])
        .arg(bin())
        .args(send_args(port, "3s"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("through the cgroup pacer"), "{err}");
    assert!(mp_capable_synacks() > before, "the transfer was not MPTCP");
    let paced = goodput(&out.stdout);
    assert!((24e6..33e6).contains(&paced), "MPTCP paced at {:.1} Mbit/s", paced / 1e6);
    assert_no_leftovers(&out.stderr);

    // The shim alone cannot pace MPTCP, and says so.
    let out = Command::new(bin())
        .args(["run", "--mptcp", "--pace-via", "preload", "--pace", "static:30mbit", "--"])
        .arg(bin())
        .args(send_args(port, "2s"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("through the LD_PRELOAD shim") && err.contains("refuses SO_MAX_PACING_RATE on MPTCP"),
        "{err}"
    );
    assert!(goodput(&out.stdout) > 5.0 * paced, "{err}");
}

#[test]
fn root_sigint_during_pace_run_leaves_no_cgroup_and_no_pins() {
    tcpaccel_sys::testing::require_root();
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(bin())
        .args(["pace", "run", "--pace", "static:10mbit", "--", "sleep", "30"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("running in cgroup"), "{line}");
    let started = std::time::Instant::now();
    // SIGINT to tcpaccel alone (not the command): it passes it on as SIGKILL
    // after 2 s, then detaches and removes its cgroup.
    let st = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let status = child.wait().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "took {:?}", started.elapsed());
    assert_eq!(status.code(), Some(128 + 9), "the command was killed: exit 137");
    assert_no_leftovers(line.as_bytes());
}

/// A network namespace made for one test (deleted on drop, also on panic),
/// with commands run inside it.
struct TestNs(TestNetns);
impl TestNs {
    fn new(tag: &str) -> TestNs {
        TestNs(TestNetns::one(tag))
    }
    fn exec(&self) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.0.name()]);
        c
    }
    /// `recv` on loopback `port` inside the namespace, given time to listen.
    fn receiver(&self, port: u16) -> Reaper {
        let r = Reaper(
            self.exec()
                .arg(bin())
                .args(["recv", "--listen", &format!("127.0.0.1:{port}")])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
        r
    }
}

/// The caps (max pacing rate, bit/s) `ss` shows for connections to `port` in `ns`.
fn caps_in(ns: &TestNs, port: u16) -> Vec<f64> {
    let out = ns
        .exec()
        .args(["ss", "-tinH", "state", "established", &format!("( dport = :{port} )")])
        .output()
        .expect("ss (iproute2)");
    let text = String::from_utf8_lossy(&out.stdout);
    // "pacing_rate 19945168bps/19945168bps": the rate, then the cap.
    text.split_whitespace()
        .skip_while(|w| *w != "pacing_rate")
        .nth(1)
        .and_then(|w| w.split('/').nth(1))
        .and_then(|cap| cap.trim_end_matches("bps").parse().ok())
        .into_iter()
        .collect()
}

/// Issue 26 item 12: `ip netns exec` gives its command a fresh /sys with no
/// cgroup2 mount; `pace run` and `run --pace` inside it still pace, and the
/// kernel shows the cap on the socket.
#[test]
fn root_pace_run_inside_ip_netns_exec_paces_the_socket() {
    tcpaccel_sys::testing::require_root();
    let ns = TestNs::new("pacens");
    let port = free_port();
    let _recv = ns.receiver(port);
    let mut send = ns
        .exec()
        .arg(bin())
        .args(["pace", "run", "--pace", "static:20mbit", "--"])
        .arg(bin())
        .args(send_args(port, "3s"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Poll while the sender runs: on a loaded machine `pace run` (loading
    // the program) and the sender's start can take more than a second.
    let mut caps = Vec::new();
    while caps.is_empty() && send.try_wait().unwrap().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(100));
        caps = caps_in(&ns, port);
    }
    let out = send.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pace run inside ip netns exec: {err}");
    assert_eq!(caps.len(), 1, "no paced connection seen by ss: {caps:?} ({err})");
    assert!((15e6..25e6).contains(&caps[0]), "cap {:.1} Mbit/s", caps[0] / 1e6);
    let paced = goodput(&out.stdout);
    assert!((14e6..24e6).contains(&paced), "paced at {:.1} Mbit/s", paced / 1e6);
    // The cgroup is named by its path in the hierarchy, and is gone.
    let line = err.lines().find(|l| l.contains("running in cgroup")).unwrap_or_else(|| panic!("{err}"));
    let cg = line.split("running in cgroup ").nth(1).unwrap().split(" (pins").next().unwrap();
    assert!(cg.starts_with("/tcpaccel/run-"), "{line}");
    let host = tcpaccel_pacer::cgroup2_mount().unwrap().join(cg.trim_start_matches('/'));
    assert!(!host.exists(), "cgroup {} left behind", host.display());

    // `pace attach` there would not outlast the mount namespace: refused.
    let mount = tcpaccel_pacer::cgroup2_mount().unwrap();
    let cg = mount.join("tcpaccel-test").join(format!("netns-{}", std::process::id()));
    std::fs::create_dir_all(&cg).unwrap();
    let _cleanup = scopeguard(cg.clone());
    let rel = format!("tcpaccel-test/netns-{}", std::process::id());
    let out = ns.exec().arg(bin()).args(["pace", "attach", "--cgroup", &rel]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("on the host"), "{err}");
    assert!(tcpaccel_pacer::pinned_ids().iter().all(|id| *id != cgroup_id(&cg)), "nothing attached");

    // `run --pace` takes the cgroup path there too.
    let out = ns.exec().arg(bin()).args(["run", "--pace", "static:20mbit", "--", "true"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("through the cgroup pacer"), "{err}");
}

/// Issue 28: `pace detach` with neither --cgroup nor --all names both.
#[test]
fn detach_without_a_target_names_cgroup_and_all() {
    let out = Command::new(bin()).args(["pace", "detach"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--cgroup") && err.contains("--all"), "{err}");
}

/// Issue 28: `run --pace` says when pacing could not have mattered: a
/// program that connects nowhere, and one that only downloads; `pace run
/// --json` says the same as JSON lines on stderr, and `pace status` never
/// leaves the current-caps column blank.
#[test]
fn root_run_pace_warns_when_the_program_sends_little() {
    tcpaccel_sys::testing::require_root();
    let out = Command::new(bin()).args(["run", "--pace", "static:10mbit", "--", "true"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("warning") && err.contains("no TCP connection"), "{err}");

    let port = free_port();
    let _recv = receiver(port);
    let mut args = send_args(port, "2s");
    args.push("--reverse".into());
    let out = Command::new(bin())
        .args(["pace", "run", "--json", "--pace", "static:50mbit", "--"])
        .arg(bin())
        .args(&args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines: Vec<serde_json::Value> =
        err.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).collect();
    assert!(lines.iter().any(|v| v["type"] == "running" && v["cgroup"].is_string()), "{err}");
    let warn = lines.iter().find(|v| v["type"] == "warning").unwrap_or_else(|| panic!("no warning: {err}"));
    assert!(warn["received_bytes"].as_u64().unwrap() > 1 << 20, "{warn}");
    assert!(warn["message"].as_str().unwrap().contains("download"), "{warn}");
    assert!(lines.iter().any(|v| v["type"] == "detached"), "{err}");
}

/// The cgroup id (inode) of a cgroup directory.
fn cgroup_id(p: &std::path::Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap())
}

/// Issue 27: `--precise` caps gso_max_segs of the device while the command
/// runs and puts it back after, as the kernel shows it (`ip -d link`): `run` on the device named, `send` on the device its route to
/// the receiver uses; `run` without a device is a usage error.
#[test]
fn root_precise_caps_the_device_while_the_command_runs() {
    tcpaccel_sys::testing::require_root();
    let ns = TestNs::new("precise");
    let show = ["ip", "-d", "link", "show", "lo"];
    let segs = |out: &[u8]| {
        let text = String::from_utf8_lossy(out).to_string();
        let mut w = text.split_whitespace();
        w.find(|x| *x == "gso_max_segs").and(w.next()).unwrap_or_else(|| panic!("{text}")).to_string()
    };
    let read = || segs(&ns.exec().args(show).output().unwrap().stdout);
    let before = read();
    assert!(before.parse::<u32>().unwrap() > 5, "lo starts at {before}");
    // 100 Mbit/s: one segment per packet; the program sees the cap.
    let out = ns
        .exec()
        .arg(bin())
        .args(["run", "--precise", "--precise-dev", "lo", "--pace", "static:100mbit", "--"])
        .args(show)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(segs(&out.stdout), "1", "{err}");
    assert!(err.contains(&format!("lo gso_max_segs 1 (was {before})")), "{err}");
    assert_eq!(read(), before, "the cap outlived run");
    // send --precise at 500 Mbit/s: three segments on lo, its route's device.
    let port = free_port();
    let _recv = ns.receiver(port);
    let send = ns
        .exec()
        .arg(bin())
        .args(send_args(port, "2s"))
        .args(["--precise", "--pace", "static:500mbit"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let during = read();
    let out = send.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(during, "3", "{err}");
    assert!(err.contains(&format!("lo gso_max_segs 3 (was {before})")), "{err}");
    assert_eq!(read(), before, "the cap outlived send");
    // run cannot know its program's destinations.
    let out = ns
        .exec()
        .arg(bin())
        .args(["run", "--precise", "--pace", "static:100mbit", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--precise-dev"), "{err}");
}
