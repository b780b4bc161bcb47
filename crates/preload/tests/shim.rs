//! The shim inside a real process: each test runs this test binary again,
//! only itself, with `LD_PRELOAD`, `TCPACCEL_*` and `SHIM_TEST_PORT` set; the
//! child (the same test, seeing `SHIM_TEST_PORT`: [`child`]) connects to a
//! loopback listener with `std::net::TcpStream` and prints what its socket
//! got. There is no helper test that could pass on its own. This covers the paths the shim reaches through
//! `tcpaccel_sys::sockopt` (socket kind, bound or not, source address, CC,
//! pacing, MPTCP) without `tcpaccel run` in between. Loopback only, no root.
//!
//! The test binary must not link the shim's rlib (its `connect` would then
//! interpose the parent too), so nothing here names `tcpaccel_preload`.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use tcpaccel_sys::sockopt;

/// `libtcpaccel_preload.so`, which cargo builds beside this test binary.
fn shim() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let deps = exe.parent().expect("deps dir");
    let candidates = [deps.join("libtcpaccel_preload.so"), deps.join("../libtcpaccel_preload.so")];
    candidates
        .iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("shim not built at {candidates:?} (cargo test -p tcpaccel-preload builds it)")
        })
        .clone()
}

/// Set in the child process: the port to connect to.
const PORT_ENV: &str = "SHIM_TEST_PORT";

/// True in the child process a test started through [`run_child`].
fn is_child() -> bool {
    std::env::var_os(PORT_ENV).is_some()
}

/// The child's part: connect under the shim and report the socket.
fn child() {
    let port: u16 = std::env::var(PORT_ENV).expect("SHIM_TEST_PORT").parse().expect("port");
    let s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect through the shim");
    println!(
        "shim-child local={} proto={} cc={} pacing={}",
        s.local_addr().expect("local addr").ip(),
        sockopt::protocol(&s).expect("SO_PROTOCOL"),
        sockopt::get_congestion(&s).expect("TCP_CONGESTION"),
        sockopt::get_max_pacing_rate(&s).expect("SO_MAX_PACING_RATE"),
    );
}

/// Runs test `test` (the caller) again as [`child`] under the shim with
/// `env`; returns its report line and the shim's log.
fn run_child(test: &str, env: &[(&str, &str)]) -> (String, String) {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind loopback");
    let port = l.local_addr().expect("addr").port();
    let server = std::thread::spawn(move || l.accept().map(|(s, _)| s));
    let log = std::env::temp_dir().join(format!("tcpaccel-shim-test-{}-{port}.log", std::process::id()));
    let out = Command::new(std::env::current_exe().expect("exe"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env("LD_PRELOAD", shim())
        .env(PORT_ENV, port.to_string())
        .env("TCPACCEL_LOG", &log)
        .envs(env.iter().copied())
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "child failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    server.join().expect("server thread").expect("accept");
    let shim_log = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    // libtest prints "test <test> ... " before the child's own output.
    let at = stdout.find("shim-child ").unwrap_or_else(|| panic!("no report from the child: {stdout}"));
    let line = stdout[at..].lines().next().unwrap_or_default();
    (line.to_string(), shim_log)
}

#[test]
fn connect_gets_source_address_cc_and_pacing() {
    if is_child() {
        return child();
    }
    let (line, log) = run_child(
        "connect_gets_source_address_cc_and_pacing",
        &[
            ("TCPACCEL_BIND", "127.0.0.2"),
            ("TCPACCEL_CC", "reno"),
            // What `tcpaccel run --pace static:20mbit` passes: the grammar's own form.
            ("TCPACCEL_PACE", "static:20Mbit/s"),
        ],
    );
    // 20 Mbit/s on the wire = 2.5 MB/s × 1448/1538 of payload.
    assert_eq!(line, "shim-child local=127.0.0.2 proto=6 cc=reno pacing=2353706", "log: {log}");
    assert!(log.contains("connect bind=127.0.0.2 cc=reno pacing_bytes_per_s=2353706"), "{log}");
    assert!(!log.contains("failed"), "{log}");
}

#[test]
fn a_pacing_the_shim_cannot_use_is_logged_not_applied() {
    if is_child() {
        return child();
    }
    for bad in ["static:fast", "dynamic=kernel"] {
        let (line, log) = run_child(
            "a_pacing_the_shim_cannot_use_is_logged_not_applied",
            &[("TCPACCEL_PACE", bad), ("TCPACCEL_CC", "reno")],
        );
        let unpaced = format!("pacing={}", sockopt::PACING_UNLIMITED);
        assert!(line.ends_with(&unpaced), "{bad}: {line}\nlog: {log}");
        assert!(log.contains("cc=reno pacing=refused(pacing ") && log.contains(&format!("{bad:?}")), "{log}");
    }
}

#[test]
fn mptcp_socket_is_bound_to_the_lane_address() {
    if is_child() {
        return child();
    }
    let (line, log) = run_child(
        "mptcp_socket_is_bound_to_the_lane_address",
        &[("TCPACCEL_MPTCP", "1"), ("TCPACCEL_BIND", "127.0.0.3")],
    );
    assert!(line.starts_with("shim-child local=127.0.0.3 proto=262 "), "{line}\nlog: {log}");
    assert!(log.contains("socket=mptcp") && log.contains("connect bind=127.0.0.3"), "{log}");
}

#[test]
fn root_an_address_of_the_other_family_is_not_bound() {
    if is_child() {
        return child();
    }
    // Root: it asks for cubic (see root_raw_socket_bind_listen_connect in sys).
    tcpaccel_sys::testing::require_root();
    // An IPv6 source for an IPv4 socket: the shim leaves the socket alone
    // rather than failing the program's connect.
    let (line, log) = run_child(
        "root_an_address_of_the_other_family_is_not_bound",
        &[("TCPACCEL_BIND", "::1"), ("TCPACCEL_CC", "cubic")],
    );
    assert!(line.starts_with("shim-child local=127.0.0.1 proto=6 cc=cubic "), "{line}\nlog: {log}");
    assert!(!log.contains("bind="), "{log}");
}
