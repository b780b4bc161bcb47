//! The stop rule of long-running services (exit.rs): SIGINT or SIGTERM is
//! their normal stop, so they clean up, print their summary and exit with
//! their usual code, 0 here, rather than 130 or death by the signal.
//! `recv` is covered in traffic_cli.rs, `send` and `lab run` (130) elsewhere.
//! The `lanes` case needs root and a namespace (CI runs as root); it fails
//! loudly without them.

use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tcpaccel_sys::testing::TestNetns;

mod common;
use common::{bin, Reaper};

impl Reaper {
    /// Sends `sig` (INT or TERM) and waits at most 20 s for the exit.
    fn stop_with(&mut self, sig: &str) -> ExitStatus {
        let pid = self.0.id().to_string();
        assert!(Command::new("kill").args([&format!("-{sig}"), &pid]).status().expect("kill(1)").success());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = self.0.try_wait().expect("wait for the service") {
                return st;
            }
            assert!(Instant::now() < deadline, "still running 20 s after SIG{sig}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn spawn(args: &[&str]) -> Reaper {
    Reaper(
        Command::new(bin())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn tcpaccel {args:?}: {e}")),
    )
}

/// Reads lines from `r` until one contains `needle`; panics at EOF.
fn wait_for_line(r: &mut impl BufRead, needle: &str) -> String {
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).expect("read the service's output") == 0 {
            panic!("output ended before a line with {needle:?}; got:\n{seen}");
        }
        if line.contains(needle) {
            return line;
        }
        seen.push_str(&line);
    }
}

/// The rest of a pipe after the service exited.
fn rest(mut r: impl Read) -> String {
    let mut s = String::new();
    let _ = r.read_to_string(&mut s);
    s
}

/// The services below register their handlers right after they start to
/// listen or print; a short pause makes sure the signal finds them.
fn settle() {
    std::thread::sleep(Duration::from_millis(300));
}

#[test]
fn relay_stops_with_0_and_its_counters_on_sigint() {
    let port = common::free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut relay = spawn(&["relay", "--listen", &listen]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(&listen).is_err() {
        assert!(Instant::now() < deadline, "relay never listened on {listen}");
        std::thread::sleep(Duration::from_millis(50));
    }
    settle();
    let st = relay.stop_with("INT");
    let out = rest(relay.0.stdout.take().unwrap());
    let err = rest(relay.0.stderr.take().unwrap());
    assert_eq!(st.code(), Some(0), "{st:?}; stderr:\n{err}");
    let last = out.lines().last().unwrap_or_else(|| panic!("no counters on stdout; stderr:\n{err}"));
    let v: serde_json::Value = serde_json::from_str(last).expect("the counters are JSON");
    assert!(v.is_object(), "{last}");
}

#[test]
fn gather_server_stops_with_0_on_sigterm() {
    let mut srv =
        spawn(&["gather", "serve", "--listen", "127.0.0.1:0", "--buffer-pool", "1MB", "--class", "a=1mbit"]);
    let mut err = BufReader::new(srv.0.stderr.take().unwrap());
    wait_for_line(&mut err, "listening on");
    settle();
    let st = srv.stop_with("TERM");
    assert_eq!(st.code(), Some(0), "{st:?}; stderr:\n{}", rest(err));
}

#[test]
fn trace_stops_with_0_on_sigterm_and_keeps_its_rows() {
    // A connection of our own for the trace to find.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let _server = l.accept().unwrap();
    let mut tr = spawn(&["trace", "--port", &port.to_string(), "--interval", "20ms"]);
    let mut out = BufReader::new(tr.0.stdout.take().unwrap());
    // A data row names the port; the header does not.
    wait_for_line(&mut out, &format!(":{port}"));
    let st = tr.stop_with("TERM");
    let err = rest(tr.0.stderr.take().unwrap());
    assert_eq!(st.code(), Some(0), "{st:?}; stderr:\n{err}");
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip(8)");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Issue 51: the daemon ends with its summary (a `summary` record, last)
/// and calls its lanes after the interfaces their addresses are on (`sl`
/// and `ll1` here, as a topology file names them), not `sl0`, `ll0`.
#[test]
fn root_lanes_daemon_stops_with_0_on_sigint() {
    tcpaccel_sys::testing::require_root();
    let t = TestNetns::one("clisig");
    let ns = t.name();
    for (dev, addr) in [("sl", "10.77.0.1/32"), ("ll1", "10.77.1.1/32")] {
        ip(&["-n", ns, "link", "add", dev, "type", "veth", "peer", "name", &format!("{dev}-peer")]);
        ip(&["-n", ns, "addr", "add", addr, "dev", dev]);
    }
    ip(&["netns", "exec", ns, "sysctl", "-q", "-w", "net.mptcp.path_manager=userspace"]);
    let dir = std::env::temp_dir().join(format!("tcpaccel-clisig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("lanes.toml");
    std::fs::write(
        &cfg,
        r#"
[policy]
kind = "deadline"
t_deadline = "300ms"

[[peer]]
name = "p"
sl = [{ local = "10.77.0.1", remote = "10.77.0.2" }]
ll = [{ local = "10.77.1.1", remote = "10.77.1.2" }]
"#,
    )
    .unwrap();
    let mut d = spawn(&["lanes", "--config", cfg.to_str().unwrap(), "--netns", ns, "--json"]);
    let mut out = BufReader::new(d.0.stdout.take().unwrap());
    let ready: serde_json::Value = serde_json::from_str(&wait_for_line(&mut out, "\"ready\"")).unwrap();
    assert_eq!((ready["sl_names"][0].as_str(), ready["ll_names"][0].as_str()), (Some("sl"), Some("ll1")));
    let st = d.stop_with("INT");
    let err = rest(d.0.stderr.take().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(st.code(), Some(0), "{st:?}; stderr:\n{err}");
    let rest = rest(out);
    let last = rest.lines().last().unwrap_or_else(|| panic!("nothing after ready; stderr:\n{err}"));
    let v: serde_json::Value = serde_json::from_str(last).expect("the summary is JSON");
    assert_eq!(v["type"], "summary", "{last}");
    assert_eq!((v["connections"].as_u64(), v["switches"].as_u64()), (Some(0), Some(0)), "{last}");
    let lanes: Vec<(&str, &str, u64)> = v["lanes"]
        .as_array()
        .expect("lanes")
        .iter()
        .map(|l| {
            (l["lane"].as_str().unwrap(), l["local"].as_str().unwrap(), l["bytes_acked"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(lanes, [("sl", "10.77.0.1", 0), ("ll1", "10.77.1.1", 0)], "{last}");
}

/// Issue 51: `lanes --check` where none of the configured addresses is
/// (the host, when they are in a namespace) says where they are and
/// suggests no sysctl for the wrong namespace; in that namespace it passes.
#[test]
fn root_lanes_check_away_from_its_addresses_says_where_they_are() {
    tcpaccel_sys::testing::require_root();
    let t = TestNetns::one("cliwhere");
    let ns = t.name();
    ip(&["-n", ns, "addr", "add", "10.79.0.1/32", "dev", "lo"]);
    ip(&["-n", ns, "addr", "add", "10.79.1.1/32", "dev", "lo"]);
    ip(&["netns", "exec", ns, "sysctl", "-q", "-w", "net.mptcp.path_manager=userspace"]);
    let dir = std::env::temp_dir().join(format!("tcpaccel-cliwhere-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("lanes.toml");
    std::fs::write(
        &cfg,
        "[[peer]]\nsl = [{ local = \"10.79.0.1\", remote = \"10.79.0.2\" }]\n\
         ll = [{ local = \"10.79.1.1\", remote = \"10.79.1.2\" }]\n",
    )
    .unwrap();
    let check = |extra: &[&str]| {
        Command::new(bin())
            .args(["lanes", "--config", cfg.to_str().unwrap(), "--check"])
            .args(extra)
            .output()
            .expect("run tcpaccel lanes --check")
    };
    let here = check(&[]);
    let err = String::from_utf8_lossy(&here.stderr);
    assert_eq!(here.status.code(), Some(2), "{err}");
    assert!(err.contains("none of the configured local addresses (10.79.0.1, 10.79.1.1)"), "{err}");
    assert!(err.contains(&format!("--netns {}", ns)) && !err.contains("sysctl"), "{err}");
    let there = check(&["--netns", ns]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(there.status.code(), Some(0), "{}", String::from_utf8_lossy(&there.stderr));
}

/// GET /metrics on loopback; the body of the answer.
fn scrape(addr: &str) -> String {
    use std::io::Write;
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to metrics at {addr}: {e}"));
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let body = rest(s);
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    body
}

#[test]
fn root_lanes_daemon_reloads_on_sighup_and_serves_metrics() {
    tcpaccel_sys::testing::require_root();
    let t = TestNetns::one("clihup");
    let ns = t.name();
    ip(&["-n", ns, "addr", "add", "10.78.0.1/32", "dev", "lo"]);
    ip(&["-n", ns, "addr", "add", "10.78.1.1/32", "dev", "lo"]);
    ip(&["netns", "exec", ns, "sysctl", "-q", "-w", "net.mptcp.path_manager=userspace"]);
    let dir = std::env::temp_dir().join(format!("tcpaccel-clihup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("lanes.toml");
    let text = |deadline: &str, ll: &str| {
        format!(
            "[policy]\nkind = \"deadline\"\nt_deadline = \"{deadline}\"\n\n[[peer]]\nname = \"p\"\n\
             sl = [{{ local = \"10.78.0.1\", remote = \"10.78.0.2\" }}]\n\
             ll = [{{ local = \"{ll}\", remote = \"10.78.1.2\" }}]\n"
        )
    };
    std::fs::write(&cfg, text("300ms", "10.78.1.1")).unwrap();
    let port = common::free_port().to_string();
    let mut d =
        spawn(&["lanes", "--config", cfg.to_str().unwrap(), "--netns", ns, "--json", "--metrics", &port]);
    let mut out = BufReader::new(d.0.stdout.take().unwrap());
    wait_for_line(&mut out, "\"ready\"");
    let pid = d.0.id().to_string();
    let hup = || assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());

    // A new deadline is applied ...
    std::fs::write(&cfg, text("150ms", "10.78.1.1")).unwrap();
    hup();
    let line = wait_for_line(&mut out, "\"reload\"");
    let r: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!((r["ok"].as_bool(), r["t_deadline_ms"].as_f64()), (Some(true), Some(150.0)), "{line}");
    // ... a file that does not parse, or moves a lane, is refused and the
    // 150 ms policy stays; the daemon keeps running through all three.
    std::fs::write(&cfg, "[policy\n").unwrap();
    hup();
    let line = wait_for_line(&mut out, "\"reload\"");
    let r: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!((r["ok"].as_bool(), r["t_deadline_ms"].as_f64()), (Some(false), Some(150.0)), "{line}");
    std::fs::write(&cfg, text("100ms", "10.78.1.9")).unwrap();
    hup();
    let line = wait_for_line(&mut out, "\"reload\"");
    let r: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(r["ok"].as_bool(), Some(false), "{line}");
    assert!(r["error"].as_str().unwrap_or("").contains("need a restart"), "{line}");

    // Issue 50: the endpoint was bound where the daemon was started (the
    // host's loopback, where a unit's Prometheus scrapes), and nothing
    // listens on that port in the --netns namespace.
    let in_ns = format!("127.0.0.1:{port}").parse::<std::net::SocketAddr>().unwrap();
    let refused = tcpaccel_sys::netns::run_in(ns, move || {
        TcpStream::connect_timeout(&in_ns, Duration::from_secs(2)).err().map(|e| e.kind())
    })
    .expect("enter the namespace");
    assert_eq!(refused, Some(std::io::ErrorKind::ConnectionRefused), "an endpoint inside {}", ns);
    let body = scrape(&format!("127.0.0.1:{port}"));
    assert!(body.contains("tcpaccel_lanes_reloads_total{outcome=\"applied\"} 1"), "{body}");
    assert!(body.contains("tcpaccel_lanes_reloads_total{outcome=\"refused\"} 2"), "{body}");
    assert!(body.contains("tcpaccel_lanes_switches_total 0"), "{body}");

    let st = d.stop_with("INT");
    let err = rest(d.0.stderr.take().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(st.code(), Some(0), "{st:?}; stderr:\n{err}");
}

/// SOCKS5 CONNECT to `target` through the relay at `relay`, no auth; the
/// reply code (0 = succeeded, 2 = not allowed by rules) and the stream.
fn socks_connect(relay: &str, target: std::net::SocketAddr) -> (u8, TcpStream) {
    use std::io::Write;
    let mut s = TcpStream::connect(relay).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).unwrap();
    assert_eq!(m, [5, 0], "method reply");
    let std::net::SocketAddr::V4(t) = target else { panic!("IPv4 only here") };
    let mut req = vec![5, 1, 0, 1];
    req.extend_from_slice(&t.ip().octets());
    req.extend_from_slice(&t.port().to_be_bytes());
    s.write_all(&req).unwrap();
    let mut rep = [0u8; 10];
    s.read_exact(&mut rep).unwrap();
    (rep[1], s)
}

#[test]
fn relay_reloads_its_rules_on_sighup_keeps_connections_and_serves_metrics() {
    use std::io::Write;
    let target = common::echo_server();
    let dir = std::env::temp_dir().join(format!("tcpaccel-relayhup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("relay.toml");
    let port = common::free_port();
    let listen = format!("127.0.0.1:{port}");
    let rules = |r: &str| format!("listen = \"{listen}\"\n{r} = [\"127.0.0.1/32\"]\n");
    std::fs::write(&file, rules("allow")).unwrap();
    let mport = common::free_port().to_string();
    let mut relay = spawn(&["relay", "--config", file.to_str().unwrap(), "--metrics", &mport]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(&listen).is_err() {
        assert!(Instant::now() < deadline, "relay never listened on {listen}");
        std::thread::sleep(Duration::from_millis(50));
    }
    settle();
    let (code, mut kept) = socks_connect(&listen, target);
    assert_eq!(code, 0, "allowed before the reload");

    std::fs::write(&file, rules("deny")).unwrap();
    let pid = relay.0.id().to_string();
    assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    let t = Instant::now();
    loop {
        let (code, _) = socks_connect(&listen, target);
        if code == 2 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "the deny rule never took effect (reply {code})");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The connection made under the old rules still relays.
    kept.write_all(b"still here").unwrap();
    let mut back = [0u8; 10];
    kept.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"still here");

    let body = scrape(&format!("127.0.0.1:{mport}"));
    assert!(body.contains("tcpaccel_relay_errors_total{kind=\"not_allowed\"}"), "{body}");
    assert!(!body.contains("tcpaccel_relay_errors_total{kind=\"not_allowed\"} 0\n"), "{body}");
    assert!(body.contains("tcpaccel_relay_bytes_total{direction=\"up\"} 10"), "{body}");
    drop(kept);
    let st = relay.stop_with("TERM");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(st.code(), Some(0), "{st:?}");
}

#[test]
fn gather_server_metrics_follow_a_client() {
    let mport = common::free_port().to_string();
    let mut srv = spawn(&[
        "gather",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--buffer-pool",
        "1MB",
        "--class",
        "hi=20mbit,2",
        "--status-interval",
        "100ms",
        "--metrics",
        &mport,
    ]);
    let mut err = BufReader::new(srv.0.stderr.take().unwrap());
    let line = wait_for_line(&mut err, "listening on");
    let at =
        line.split("listening on ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap().to_string();
    // While sending: the client's series are there with its target.
    let mut client = spawn(&[
        "gather",
        "send",
        "--server",
        &at,
        "--class",
        "hi",
        "--id",
        "m1",
        "--rate",
        "8mbit",
        "--duration",
        "2s",
    ]);
    let t = Instant::now();
    loop {
        let body = scrape(&format!("127.0.0.1:{mport}"));
        if body.contains("tcpaccel_gather_target_bps{id=\"m1\",class=\"hi\"} 20000000") {
            assert!(body.contains("tcpaccel_gather_clients 1"), "{body}");
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "no series for m1:\n{body}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let st = client.0.wait().unwrap();
    assert!(st.success(), "gather send: {st:?}");
    // After it: counted as a complete end, its series gone.
    let t = Instant::now();
    loop {
        let body = scrape(&format!("127.0.0.1:{mport}"));
        if body.contains("tcpaccel_gather_clients_ended_total{complete=\"true\"} 1") {
            assert!(!body.contains("id=\"m1\""), "{body}");
            assert!(body.contains("tcpaccel_gather_clients_joined_total 1"), "{body}");
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "no complete end counted:\n{body}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let st = srv.stop_with("TERM");
    assert_eq!(st.code(), Some(0), "{st:?}");
}
