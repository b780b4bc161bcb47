//! Root tests: nothing is left behind when a test panics with a network up
//! (unwinding runs the Drop guard), or when the process gets SIGTERM/SIGINT
//! (the signal thread tears down and exits 143/130). The signal cases run
//! this same test binary as a child that builds a network and waits.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use std::net::Ipv4Addr;

use tcpaccel_core::units::Rate;
use tcpaccel_net::{clean, state, Cidr, EndSpec, LinkSpec, Network, Topology, TopologyBuilder};

/// An emulated link without delay: quick to build, and it starts emulator threads.
fn pair() -> Topology {
    let end = |node: &str, host: u8| EndSpec::new(node).addr(Cidr::new(Ipv4Addr::new(10, 77, 0, host), 24));
    let mut b = TopologyBuilder::default();
    b.host("p1");
    b.host("p2");
    b.link(LinkSpec::emulated(end("p1", 1), end("p2", 2)).name("pw").rate(Rate::mbps(10)));
    b.build().expect("valid topology")
}

const CHILD_ENV: &str = "TCPACCEL_NET_TEARDOWN_CHILD";

fn emulator_threads() -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for t in dir.flatten() {
            if let Ok(c) = std::fs::read_to_string(t.path().join("comm")) {
                let c = c.trim();
                if c.starts_with("emu-") || c.starts_with("netns-") {
                    out.push(c.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn root_panic_with_network_up_leaves_nothing() {
    tcpaccel_sys::testing::require_root();
    let topo = pair();
    let run_id = Mutex::new(String::new());
    let result = std::panic::catch_unwind(|| {
        let mut net = Network::up(&topo).expect("network up");
        net.persist(Some("teardown-test")).expect("state file");
        *run_id.lock().unwrap() = net.run_id().to_string();
        assert!(!emulator_threads().is_empty(), "the emulator should be running");
        panic!("deliberate panic with the network up");
    });
    assert!(result.is_err(), "the closure should have panicked");
    let id = run_id.into_inner().unwrap();
    assert_eq!(id.len(), 6);
    assert!(clean::namespaces_with_prefix(&format!("tcpaccel-{id}-")).unwrap().is_empty());
    assert!(!state::path_of(&id).exists(), "state file left behind");
    let left = emulator_threads();
    assert!(left.is_empty(), "threads left: {left:?}");
}

/// Runs this binary as a child that builds PAIR and waits (`mode` "exit":
/// the default handler; "subscribe": it asks for the signal and tears down
/// itself); returns the child and its run id once the network is up.
fn spawn_child(mode: &str) -> (std::process::Child, String) {
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .args(["--exact", "child_holds_a_network", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child test process");
    let stdout = child.stdout.take().expect("child stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest prints "test NAME ... " without a newline before the body runs.
            if let Some((_, id)) = line.split_once("RUN ") {
                let _ = tx.send(id.trim().to_string());
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(id) => (child, id),
        Err(_) => {
            // SIGTERM, not kill(): the child must get the chance to clean up.
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
            let _ = child.wait();
            panic!("the child did not bring its network up within 60 s");
        }
    }
}

fn signal_child_and_check(mode: &str, sig: &str, expect_code: i32) {
    tcpaccel_sys::testing::require_root();
    let (mut child, id) = spawn_child(mode);
    let prefix = format!("tcpaccel-{id}-");
    assert_eq!(clean::namespaces_with_prefix(&prefix).unwrap().len(), 3, "p1, p2, pw while up");
    assert!(state::path_of(&id).exists(), "the child records its run");
    let st = Command::new("kill").args([&format!("-{sig}"), &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for child") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = clean::clean_prefix(&prefix);
            panic!("child did not exit within 30 s of SIG{sig}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(expect_code), "exit status after SIG{sig}: {status}");
    assert!(clean::namespaces_with_prefix(&prefix).unwrap().is_empty(), "namespaces left after SIG{sig}");
    assert!(!state::path_of(&id).exists(), "state file left after SIG{sig}");
}

#[test]
fn root_sigterm_tears_down_and_exits_143() {
    signal_child_and_check("exit", "TERM", 143);
}

#[test]
fn root_sigint_tears_down_and_exits_130() {
    signal_child_and_check("exit", "INT", 130);
}

#[test]
fn root_subscriber_gets_the_signal_and_tears_down_itself() {
    // The child returns normally from its test after a graceful teardown.
    signal_child_and_check("subscribe", "TERM", 0);
}

/// Not a test on its own: the body of the child process above.
#[test]
fn child_holds_a_network() {
    let Some(mode) = std::env::var_os(CHILD_ENV) else { return };
    let topo = pair();
    if mode == "subscribe" {
        let rx = tcpaccel_sys::signals::subscribe().expect("child: subscribe");
        let mut net = Network::up(&topo).expect("child: network up");
        net.persist(Some("teardown-test child")).expect("child: state file");
        println!("RUN {}", net.run_id());
        let sig = rx.recv_timeout(Duration::from_secs(120)).expect("child: no signal within 120 s");
        assert_eq!(sig, 15, "SIGTERM expected");
        let report = net.teardown();
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(report.emulators.len(), 1, "the emulator's summary");
        return;
    }
    let mut net = Network::up(&topo).expect("child: network up");
    net.persist(Some("teardown-test child")).expect("child: state file");
    println!("RUN {}", net.run_id());
    std::thread::sleep(Duration::from_secs(120));
    panic!("child: no signal arrived within 120 s");
}

#[test]
fn root_clean_prefix_removes_leftovers_and_refuses_foreign_names() {
    tcpaccel_sys::testing::require_root();
    assert!(clean::clean_prefix("netns-of-someone-else").is_err());
    // A leftover as a crashed run would leave it: a namespace with a veth, no owner.
    let prefix = format!("tcpaccel-cleantest{}-", std::process::id());
    let ns = format!("{prefix}x");
    tcpaccel_sys::netns::add(&ns).expect("make the leftover namespace");
    let removed = clean::clean_prefix(&prefix).expect("clean");
    assert_eq!(removed, vec![format!("namespace {ns}")]);
    assert!(!tcpaccel_sys::netns::exists(&ns));
}
