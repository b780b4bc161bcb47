//! Root tests of the cgroup pacer against the kernel: attach to a throwaway
//! cgroup, check the cap the program set on a real socket, detach and check
//! it was released, and that nothing (pins, cgroup) is left, also after a
//! panic. They fail loudly when not root.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tcpaccel_core::pacing::bpf_payload_rate;
use tcpaccel_core::units::{QueueLimit, Rate};
use tcpaccel_net::{Cidr, EndSpec, LinkSpec, Network, Topology, TopologyBuilder};
use tcpaccel_pacer::attach::pin_dir;
use tcpaccel_pacer::{attach, PaceConfig, TempCgroup};
use tcpaccel_sys::bpf::{command_into_cgroup, steal_fd};
use tcpaccel_sys::sockopt::{get_max_pacing_rate, PACING_UNLIMITED};
use tcpaccel_sys::tcpinfo::tcp_info;

/// A bash in `cg` holding a TCP connection to `port` on fd 3 until killed.
fn client_in(cg: &TempCgroup, port: u16) -> Child {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected && exec sleep 30"))
        .stdout(Stdio::piped());
    command_into_cgroup(&mut cmd, cg.cgroup.procs().unwrap());
    let mut child = cmd.spawn().expect("spawn bash");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "connected");
    child
}

fn unique(name: &str) -> String {
    format!("test-{name}-{}", std::process::id())
}

#[test]
fn root_static_cap_is_set_in_the_cgroup_and_released_on_detach() {
    tcpaccel_sys::testing::require_root();
    let cg = TempCgroup::create(&unique("static")).unwrap();
    let cfg = PaceConfig::parse("static:30mbit", &[], None).unwrap();
    let a = attach(&cg.cgroup, &cfg).unwrap();
    let pins = a.pins().to_path_buf();
    assert!(pins.join("link").exists());

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut child = client_in(&cg, port);
    let (server, _) = listener.accept().unwrap();
    // exec sleep inherits fd 3: steal it from the process.
    let sock = steal_fd(child.id(), 3).unwrap();
    let mss = tcp_info(&sock).unwrap().snd_mss;
    let cap = get_max_pacing_rate(&sock).unwrap();
    assert_eq!(cap, bpf_payload_rate(Rate::mbps(30), mss, false), "mss {mss}");
    // The accepted end lives outside the cgroup: untouched.
    assert_eq!(get_max_pacing_rate(&server).unwrap(), PACING_UNLIMITED);

    let st = tcpaccel_pacer::status().unwrap();
    let mine = st.iter().find(|s| s.cgroup_id == cg.cgroup.id).expect("status lists the attachment");
    assert_eq!(mine.cgroup.as_deref(), Some(cg.cgroup.path.as_path()));
    assert_eq!(mine.rules[0].dest, "default");
    assert_eq!(mine.rules[0].stats.conns, 1);
    assert_eq!(mine.rules[0].rates, vec![cap as u32]);
    // The socket's own state, read from the pinned map by another handle:
    // the default rule, the cap set, no hold state (no --hold).
    let states = tcpaccel_pacer::socket_states(&pins).unwrap();
    assert_eq!(states.len(), 1, "{states:?}");
    let (cookie, s) = states[0];
    assert_eq!(cookie, tcpaccel_sys::bpf::socket_cookie(&sock).unwrap());
    assert_eq!((s.rule, u64::from(s.rate), s.hold.cap), (0, cap, 0));

    let r = a.detach().unwrap();
    assert_eq!((r.tracked, r.released, r.unreachable), (1, 1, 0));
    assert_eq!(get_max_pacing_rate(&sock).unwrap(), PACING_UNLIMITED);
    assert!(!pins.exists(), "pins left at {}", pins.display());
    child.kill().unwrap();
    child.wait().unwrap();
    let path = cg.cgroup.path.clone();
    drop(cg);
    assert!(!path.exists(), "cgroup {} left behind", path.display());
}

/// Two namespaces joined by a veth shaped to 100 Mbit/s with a 64 KB
/// drop-tail buffer: a path where slow start fills a queue and the probe
/// ends the way it does on a real network. Over loopback it may not: the
/// ACK of each write comes back before the next one, the sender is never
/// cwnd-limited, cwnd stays below the probe's 64 segments and CUBIC never
/// leaves slow start.
fn shaped_path() -> Topology {
    let end = |node: &str, host: u8| EndSpec::new(node).addr(Cidr::new(Ipv4Addr::new(10, 9, 0, host), 24));
    let mut b = TopologyBuilder::default();
    b.host("snd");
    b.host("rcv");
    b.link(
        LinkSpec::veth(end("snd", 1), end("rcv", 2))
            .name("path")
            .offloads(false)
            .rate(Rate::mbps(100))
            .buffer(QueueLimit::Bytes(64_000)),
    );
    b.build().expect("valid topology")
}

/// `--hold` counts the rule's open sockets past its probe (`held`), what
/// it shares its bottleneck estimate among: a socket that sent 4 MB into a
/// shaped path (past the probe: its slow start fills the buffer) is
/// counted while open and no longer once closed; one that sent nothing
/// never is.
#[test]
fn root_held_sockets_are_counted_until_they_close() {
    tcpaccel_sys::testing::require_root();
    let net = Network::up(&shaped_path()).expect("network up");
    let cg = TempCgroup::create(&unique("held")).unwrap();
    let cfg = PaceConfig { hold: true, ..PaceConfig::parse("dynamic", &[], None).unwrap() };
    let a = attach(&cg.cgroup, &cfg).unwrap();
    let listener = net.run_in("rcv", || TcpListener::bind("10.9.0.2:0")).unwrap().unwrap();
    let port = listener.local_addr().unwrap().port();
    // The sender runs in `snd`'s namespace and in the cgroup (the program
    // sees its sockets whatever their namespace).
    let sender = |bytes: u64| {
        let script = format!(
            "exec 3<>/dev/tcp/10.9.0.2/{port} && head -c {bytes} /dev/zero >&3 && echo sent && exec sleep 30"
        );
        let mut cmd = net.exec("snd", &["bash", "-c", &script]).unwrap();
        cmd.stdout(Stdio::piped());
        command_into_cgroup(&mut cmd, cg.cgroup.procs().unwrap());
        cmd.spawn().expect("spawn bash")
    };
    let drain = |mut s: std::net::TcpStream| {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut s, &mut std::io::sink());
        })
    };
    let stats = || {
        let st = tcpaccel_pacer::status().unwrap();
        let mine = st.iter().find(|s| s.cgroup_id == cg.cgroup.id).expect("status lists the attachment");
        mine.rules[0].stats
    };
    let sent = |c: &mut Child| {
        let mut line = String::new();
        BufReader::new(c.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "sent");
    };
    // Waits up to 5 s for `held` to become `want`, and the sum of held caps
    // to follow it (the program moves the two with separate atomic adds).
    let settled =
        |s: &tcpaccel_pacer::abi::RuleStats, want: u64| s.held == want && (s.held_cap > 0) == (want > 0);
    let held_becomes = |want: u64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !settled(&stats(), want) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        stats()
    };
    let mut idle = sender(0);
    let (s0, _) = listener.accept().unwrap();
    let r0 = drain(s0);
    sent(&mut idle);
    let mut big = sender(4_000_000);
    let (s1, _) = listener.accept().unwrap();
    let r1 = drain(s1);
    sent(&mut big);
    let st = held_becomes(1);
    let states = tcpaccel_pacer::socket_states(a.pins()).unwrap();
    assert_eq!((st.conns, st.held), (2, 1), "{st:?} {states:?}");
    // The held socket's cap is in the rule's sum of held caps.
    assert!(st.held_cap > 0, "{st:?} {states:?}");
    // The sender exits, the receiver sees EOF and closes: TCP_CLOSE.
    big.kill().unwrap();
    big.wait().unwrap();
    r1.join().unwrap();
    let st = held_becomes(0);
    assert_eq!(
        (st.conns, st.held, st.held_cap),
        (2, 0, 0),
        "{st:?}: a closed socket leaves its cap in the sum"
    );
    a.detach().unwrap();
    idle.kill().unwrap();
    idle.wait().unwrap();
    r0.join().unwrap();
}

/// Segments the namespace `node` has sent (`Tcp: OutSegs`; per skb, so per
/// segment with the path's offloads off).
fn out_segs(net: &Network, node: &str) -> u64 {
    let snmp = net.run_in(node, || std::fs::read_to_string("/proc/thread-self/net/snmp")).unwrap().unwrap();
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next().expect("Tcp: names"), tcp.next().expect("Tcp: values"));
    let at = names.split_whitespace().position(|n| n == "OutSegs").expect("OutSegs in /proc/net/snmp");
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// A dynamic rule's program runs for every segment its socket sends
/// (`HDR_OPT_LEN_CB`), not only on the ACKs the kernel's slow path takes
/// and once per round trip: header prediction hides a steady transfer's
/// ACKs from the parse callback, and the hold then saw one ACK per round
/// trip. 4 MB over the shaped path: the program runs at least 0.9 times
/// per segment the sender's namespace sent. Without the segment-sent
/// callback it could run at most once per ACK received (delayed ACKs: about
/// one per two segments) plus once per round trip.
#[test]
fn root_a_dynamic_rule_runs_for_every_segment_sent() {
    tcpaccel_sys::testing::require_root();
    let _stats = tcpaccel_sys::bpf::enable_stats().expect("BPF run-time statistics");
    let net = Network::up(&shaped_path()).expect("network up");
    let cg = TempCgroup::create(&unique("per-segment")).unwrap();
    let a = attach(&cg.cgroup, &PaceConfig::parse("dynamic", &[], None).unwrap()).unwrap();
    let listener = net.run_in("rcv", || TcpListener::bind("10.9.0.2:0")).unwrap().unwrap();
    let port = listener.local_addr().unwrap().port();
    let (segs0, runs0) = (out_segs(&net, "snd"), a.prog_stats().unwrap().run_cnt);
    let script = format!("exec 3<>/dev/tcp/10.9.0.2/{port} && head -c 4000000 /dev/zero >&3");
    let mut cmd = net.exec("snd", &["bash", "-c", &script]).unwrap();
    command_into_cgroup(&mut cmd, cg.cgroup.procs().unwrap());
    let mut child = cmd.spawn().expect("spawn bash");
    let (mut s, _) = listener.accept().unwrap();
    let got = std::io::copy(&mut s, &mut std::io::sink()).unwrap();
    assert!(child.wait().unwrap().success(), "the bash sender failed");
    assert_eq!(got, 4_000_000);
    let (segs, runs) = (out_segs(&net, "snd") - segs0, a.prog_stats().unwrap().run_cnt - runs0);
    a.detach().unwrap();
    assert!(segs >= 4_000_000 / 1448, "{segs} segments sent");
    assert!(runs * 10 >= segs * 9, "{runs} runs of the program for {segs} segments sent");
}

/// The verifier's limit (instructions processed) and what the program may
/// use of it: a program near the limit fails to load (E2BIG) on a kernel
/// whose verifier explores a little more, and the next change to the hold
/// has no room. The count is the kernel's own (`verified_insns`).
const VERIFIER_LIMIT: u32 = 1_000_000;
const VERIFIER_BUDGET: u32 = VERIFIER_LIMIT / 100 * 95;

#[test]
fn root_the_pace_program_leaves_room_in_the_verifiers_budget() {
    tcpaccel_sys::testing::require_root();
    let cg = TempCgroup::create(&unique("verifier")).unwrap();
    let a = attach(&cg.cgroup, &PaceConfig::parse("dynamic", &[], None).unwrap()).unwrap();
    let insns = a.prog_stats().unwrap().verified_insns;
    a.detach().unwrap();
    eprintln!("pace.bpf.o: the verifier processed {insns} instructions (limit {VERIFIER_LIMIT})");
    assert!(insns > 0, "verified_insns not read");
    assert!(insns <= VERIFIER_BUDGET, "{insns} instructions verified, over the budget of {VERIFIER_BUDGET}");
}

#[test]
fn root_rules_pick_by_destination_and_port() {
    tcpaccel_sys::testing::require_root();
    let cg = TempCgroup::create(&unique("rules")).unwrap();
    let l1 = TcpListener::bind("127.0.0.1:0").unwrap();
    let l2 = TcpListener::bind("127.0.0.2:0").unwrap();
    let p1 = l1.local_addr().unwrap().port();
    let rules = vec![format!("127.0.0.0/8:{p1}=static:20mbit"), "127.0.0.0/8=static:40mbit".to_string()];
    let cfg = PaceConfig::parse("none", &rules, None).unwrap();
    let a = attach(&cg.cgroup, &cfg).unwrap();
    let mut c1 = client_in(&cg, p1);
    let mut c2 = {
        let mut cmd = Command::new("bash");
        let p2 = l2.local_addr().unwrap().port();
        cmd.arg("-c")
            .arg(format!("exec 3<>/dev/tcp/127.0.0.2/{p2} && echo connected && exec sleep 30"))
            .stdout(Stdio::piped());
        command_into_cgroup(&mut cmd, cg.cgroup.procs().unwrap());
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        child
    };
    let s1 = steal_fd(c1.id(), 3).unwrap();
    let s2 = steal_fd(c2.id(), 3).unwrap();
    let m1 = tcp_info(&s1).unwrap().snd_mss;
    let m2 = tcp_info(&s2).unwrap().snd_mss;
    assert_eq!(get_max_pacing_rate(&s1).unwrap(), bpf_payload_rate(Rate::mbps(20), m1, false));
    assert_eq!(get_max_pacing_rate(&s2).unwrap(), bpf_payload_rate(Rate::mbps(40), m2, false));
    let st = tcpaccel_pacer::status().unwrap();
    let mine = st.iter().find(|s| s.cgroup_id == cg.cgroup.id).unwrap();
    let conns: Vec<(String, u64)> = mine.rules.iter().map(|r| (r.dest.clone(), r.stats.conns)).collect();
    assert_eq!(
        conns,
        vec![("default".into(), 0), (format!("127.0.0.0/8:{p1}"), 1), ("127.0.0.0/8".into(), 1)]
    );
    drop(a); // the guard detaches and releases
    assert_eq!(get_max_pacing_rate(&s1).unwrap(), PACING_UNLIMITED);
    assert_eq!(get_max_pacing_rate(&s2).unwrap(), PACING_UNLIMITED);
    for c in [&mut c1, &mut c2] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

#[test]
fn root_a_panic_leaves_no_pins_and_no_cgroup() {
    tcpaccel_sys::testing::require_root();
    let name = unique("panic");
    let seen = std::sync::Mutex::new(None);
    let r = std::panic::catch_unwind(|| {
        let cg = TempCgroup::create(&name).unwrap();
        let _a = attach(&cg.cgroup, &PaceConfig::parse("dynamic", &[], None).unwrap()).unwrap();
        *seen.lock().unwrap() = Some((cg.cgroup.path.clone(), pin_dir(cg.cgroup.id)));
        panic!("on purpose");
    });
    assert!(r.is_err());
    let (cg, pins) = seen.lock().unwrap().clone().unwrap();
    assert!(!pins.exists(), "pins left at {}", pins.display());
    assert!(!cg.exists(), "cgroup left at {}", cg.display());
    assert!(!Path::new(&pins).exists());
    std::thread::sleep(Duration::from_millis(1));
}

#[test]
fn root_a_second_attachment_to_one_cgroup_is_refused() {
    tcpaccel_sys::testing::require_root();
    let cg = TempCgroup::create(&unique("twice")).unwrap();
    let cfg = PaceConfig::parse("static:10mbit", &[], None).unwrap();
    let _a = attach(&cg.cgroup, &cfg).unwrap();
    let e = attach(&cg.cgroup, &cfg).unwrap_err().to_string();
    assert!(e.contains("already has tcpaccel pacing attached"), "{e}");
}

/// An MPTCP socket refuses SO_MAX_PACING_RATE, so no file descriptor can
/// lift the cap the program put on its subflows: the detach has the program
/// itself release them on their next ACK. A python MPTCP client in the
/// cgroup uploads to a loopback MPTCP listener here, paced at 8 Mbit/s (about
/// 1 MB/s of payload); after the detach the same connection must run far
/// faster (loopback: hundreds of MB/s; the margin asked is 5×).
#[test]
fn root_mptcp_subflows_are_released_by_the_program_on_detach() {
    use std::io::Read;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use tcpaccel_sys::sockopt;

    tcpaccel_sys::testing::require_root();
    let cg = TempCgroup::create(&unique("mptcp")).unwrap();
    let a = attach(&cg.cgroup, &PaceConfig::parse("static:8mbit", &[], None).unwrap()).unwrap();
    let fd = sockopt::mptcp_socket(sockopt::Family::V4).expect("an MPTCP socket (is net.mptcp.enabled 1?)");
    sockopt::bind(&fd, &"127.0.0.1:0".parse().unwrap()).unwrap();
    sockopt::listen(&fd, 8).unwrap();
    let listener = TcpListener::from(fd);
    let port = listener.local_addr().unwrap().port();

    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(format!(
            "import socket\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)\n\
             s.connect(('127.0.0.1', {port}))\n\
             print('connected', flush=True)\n\
             b = b'x' * 65536\n\
             while True:\n    s.sendall(b)\n"
        ))
        .stdout(Stdio::piped());
    command_into_cgroup(&mut cmd, cg.cgroup.procs().unwrap());
    let mut child = cmd.spawn().expect("spawn python3");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "connected");
    let (mut conn, _) = listener.accept().unwrap();
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = conn.read(&mut buf) {
            if n == 0 {
                break;
            }
            g.fetch_add(n as u64, Ordering::Relaxed);
        }
    });
    let rate_over = |d: Duration| {
        let b0 = got.load(Ordering::Relaxed);
        std::thread::sleep(d);
        (got.load(Ordering::Relaxed) - b0) as f64 / d.as_secs_f64()
    };
    std::thread::sleep(Duration::from_millis(300));
    let paced = rate_over(Duration::from_secs(1));
    assert!(paced < 2e6, "the subflow is paced at 8 Mbit/s (~1 MB/s): got {paced:.0} B/s");
    let st = tcpaccel_pacer::status().unwrap();
    let mine = st.iter().find(|s| s.cgroup_id == cg.cgroup.id).unwrap();
    assert!(mine.rules[0].stats.conns >= 1, "the subflow was paced: {:?}", mine.rules[0].stats);

    let r = a.detach_within(Duration::from_secs(2)).unwrap();
    assert_eq!(r.released, 0, "an MPTCP socket's fd cannot take the option: {r:?}");
    assert!(r.by_program >= 1 && r.unreachable == 0, "{r:?}");
    std::thread::sleep(Duration::from_millis(200));
    let free = rate_over(Duration::from_secs(1));
    eprintln!("paced {paced:.0} B/s, after the detach {free:.0} B/s; {r:?}");
    assert!(free > 5.0 * paced, "after the detach: {free:.0} B/s against {paced:.0} B/s paced");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Issue 47: a sender the kernel already paces. `iperf3 -C cubic` on a
/// host whose default is BBR switches to CUBIC after connecting, and BBR
/// turned the kernel's own pacing on for good; an application's earlier
/// `SO_MAX_PACING_RATE` does the same, which is how this sender (python,
/// CUBIC) gets there on any host. Its slow start then leaves spread at
/// twice eq. (1) whatever cap the hold sets, and the hold once took those
/// trains for the bottleneck and crept up from there by about 1/32 per
/// round trip. Over an emulated 200 Mbit/s, 100 ms path with a 400 KB
/// buffer (0.16 BDP, as [PSPacer]'s), 6 s of it under `dynamic --hold` must
/// carry at least half of what `static` at the path's rate carries: with
/// the old rule 37 (an estimate of 1.8 MB/s from an 18.8 KB paced train)
/// against 169 Mbit/s. Measured since: 164–166 where the initial window
/// left as a burst and its train gave an estimate, and 114 and 126 in two
/// runs of six on 2026-11-29 where it did not (estimate 0: the hold then
/// grows the cap by 1/10 per srtt under host noise; issue 47's note
/// 2026-11-29-hold-initial-window-train.md). The 0.8 goal is the lab's
/// (`lab run pacing-apps`), not this test's.
#[test]
fn root_hold_gives_a_kernel_paced_sender_what_static_gives() {
    tcpaccel_sys::testing::require_root();
    let end = |node: &str, host: u8| EndSpec::new(node).addr(Cidr::new(Ipv4Addr::new(10, 9, 0, host), 24));
    let mut b = TopologyBuilder::default();
    b.host("snd");
    b.host("rcv");
    b.link(
        LinkSpec::emulated(end("snd", 1), end("rcv", 2))
            .name("wan")
            .rate(Rate::mbps(200))
            .delay(Duration::from_millis(50))
            .buffer(QueueLimit::Bytes(400_000)),
    );
    let net = Network::up(&b.build().expect("valid topology")).expect("network up");
    for node in ["snd", "rcv"] {
        net.set_sysctl(node, "net.ipv4.tcp_rmem", "4096 131072 10000000").unwrap();
        net.set_sysctl(node, "net.ipv4.tcp_wmem", "4096 16384 10000000").unwrap();
        net.set_sysctl(node, "net.ipv4.tcp_no_metrics_save", "1").unwrap();
    }
    let listener = net.run_in("rcv", || TcpListener::bind("10.9.0.2:0")).unwrap().unwrap();
    let port = listener.local_addr().unwrap().port();
    // Bytes/s the receiver got from one 6 s transfer by a sender in a
    // cgroup paced by `pace`.
    let goodput = |pace: &str, hold: bool| {
        let cg = TempCgroup::create(&unique(&format!("kpaced-{hold}"))).unwrap();
        let cfg = PaceConfig { hold, ..PaceConfig::parse(pace, &[], None).unwrap() };
        let a = attach(&cg.cgroup, &cfg).unwrap();
        let script = format!(
            "import socket, time\n\
             s = socket.socket()\n\
             s.setsockopt(socket.SOL_SOCKET, 47, 125000000)  # SO_MAX_PACING_RATE: the kernel paces from now on\n\
             s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b'cubic')\n\
             s.connect(('10.9.0.2', {port}))\n\
             buf = bytes(65536)\n\
             end = time.time() + 6\n\
             while time.time() < end:\n    s.sendall(buf)\n\
             s.close()\n"
        );
        let mut cmd = net.exec("snd", &["python3", "-c", &script]).unwrap();
        command_into_cgroup(&mut cmd, cg.cgroup.procs().unwrap());
        let mut child = cmd.spawn().expect("spawn python3");
        let (mut s, _) = listener.accept().unwrap();
        let start = std::time::Instant::now();
        let bytes = std::io::copy(&mut s, &mut std::io::sink()).unwrap();
        let secs = start.elapsed().as_secs_f64();
        assert!(child.wait().unwrap().success(), "the python sender failed");
        let states = tcpaccel_pacer::socket_states(a.pins()).unwrap();
        a.detach().unwrap();
        let bps = bytes as f64 / secs;
        let est: Vec<(u64, u64)> = states.iter().map(|(_, s)| (s.hold.btl_rate, s.hold.btl_bytes)).collect();
        eprintln!("{pace} hold={hold}: {:.1} Mbit/s; estimate (bytes/s, train bytes) {est:?}", bps * 8e-6);
        bps
    };
    let stat = goodput("static:200mbit", false);
    let held = goodput("dynamic", true);
    assert!(held >= 0.5 * stat, "hold {:.1} Mbit/s against static {:.1}", held * 8e-6, stat * 8e-6);
}
