//! Root integration test: two host namespaces joined through an emulator
//! namespace, `h1 [h1e]--[e1] emu [e2]--[h2e] h2`, offloads off everywhere,
//! the emulator at 50 Mbit/s and 20 ms each way. Checks the handshake RTT,
//! the goodput of a short TCP transfer, and that malformed and oversize
//! frames are counted without harm. Fails loudly without root.
//!
//! Namespaces are named `tcpaccel-emutest-<random>-*` and deleted by a Drop
//! guard, also when an assertion fails.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use tcpaccel_core::units::{QueueLimit, Rate};
use tcpaccel_emu::{EmuConfig, Emulator, LinkConfig};
use tcpaccel_sys::testing::TestNetns;
use tcpaccel_sys::{ethtool, netns, packet, tcpinfo};

/// The receiver's read buffer: a read that returns less emptied the socket.
const READ_BUF: usize = 1 << 16;

/// One read at the receiver: the clock before and after its syscall, what
/// it returned and the bytes read so far.
struct Mark {
    before: Instant,
    after: Instant,
    read: usize,
    total: u64,
}

/// The three namespaces (deleted on drop, by `ns`) and their names.
struct Topo {
    h1: String,
    h2: String,
    emu: String,
    ns: TestNetns,
}

fn build(mtu: u32) -> Topo {
    let t = TestNetns::new("emutest", &["h1", "h2", "emu"]);
    let (h1, h2, emu) = (t.ns("h1"), t.ns("h2"), t.ns("emu"));
    t.veth((h1, "h1e"), (emu, "e1"));
    t.veth((h2, "h2e"), (emu, "e2"));
    let mtu = mtu.to_string();
    for (ns, dev) in [(h1, "h1e"), (h2, "h2e"), (emu, "e1"), (emu, "e2")] {
        t.ip(ns, &["link", "set", dev, "mtu", &mtu]);
        let d = dev.to_string();
        netns::run_in(ns, move || ethtool::disable_offloads(&d)).expect("netns").expect("disable offloads");
    }
    t.addr(h1, "h1e", "10.77.0.1/24");
    t.addr(h2, "h2e", "10.77.0.2/24");
    Topo { h1: h1.to_string(), h2: h2.to_string(), emu: emu.to_string(), ns: t }
}

fn link(rate_mbps: u64, delay_ms: u64) -> LinkConfig {
    LinkConfig {
        rate: Some(Rate::mbps(rate_mbps)),
        delay: Duration::from_millis(delay_ms),
        buffer: QueueLimit::Bytes(500_000),
        ..LinkConfig::default()
    }
}

/// Sends hand-made bad frames out of `h1e` in namespace `h1`.
fn inject_bad_frames(h1: &str) {
    netns::run_in(h1, || {
        let s = packet::PacketSocket::open("h1e", &packet::Options::default()).expect("packet socket");
        let mut f = vec![0u8; 64];
        f[0..6].copy_from_slice(&[0xff; 6]);
        f[6..12].copy_from_slice(&[0x03, 0, 0, 0, 0, 1]); // group bit in the source: malformed
        f[12..14].copy_from_slice(&[0x88, 0xb5]);
        assert!(s.send(&f).expect("send"));
        f[6] = 0x02;
        f[12..14].copy_from_slice(&1000u16.to_be_bytes()); // 802.3 length beyond the frame
        assert!(s.send(&f).expect("send"));
        let mut big = vec![0u8; 3000]; // larger than max_frame (1518): oversize
        big[0..6].copy_from_slice(&[0xff; 6]);
        big[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        big[12..14].copy_from_slice(&[0x88, 0xb5]);
        assert!(s.send(&big).expect("send big"));
    })
    .expect("netns h1");
}

#[test]
fn root_emulated_wire_rtt_goodput_and_bad_frames() {
    tcpaccel_sys::testing::require_root();
    // MTU 9000 on the veths so a 3000-byte frame can reach the emulator; TCP
    // still uses 1500-byte frames because the routes get an MTU of 1500.
    let topo = build(9000);
    for (ns, dev) in [(&topo.h1, "h1e"), (&topo.h2, "h2e")] {
        topo.ns.ip(ns, &["route", "replace", "10.77.0.0/24", "dev", dev, "mtu", "1500"]);
    }
    let emu_ns = topo.emu.clone();
    let cfg = EmuConfig::symmetric("e1", "e2", link(50, 20));
    let emu =
        netns::run_in(&emu_ns, move || Emulator::start(cfg)).expect("netns emu").expect("start emulator");

    inject_bad_frames(&topo.h1);

    // A listener in h2 that drains every connection.
    let listener =
        netns::run_in(&topo.h2, || TcpListener::bind("10.77.0.2:5001")).expect("netns h2").expect("bind");
    let server = std::thread::spawn(move || {
        let mut total = Vec::new();
        for _ in 0..7 {
            let Ok((mut c, _)) = listener.accept() else { break };
            // Never hang the test if the wire dies.
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = vec![0u8; READ_BUF];
            let mut marks = Vec::new();
            let mut n = 0u64;
            loop {
                let before = Instant::now();
                match c.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => {
                        n += k as u64;
                        marks.push(Mark { before, after: Instant::now(), read: k, total: n });
                    }
                }
            }
            total.push(marks);
        }
        total
    });

    let to: SocketAddr = "10.77.0.2:5001".parse().unwrap();
    let connect = move || -> (Duration, TcpStream) {
        let t = Instant::now();
        let s =
            TcpStream::connect_timeout(&to, Duration::from_secs(5)).expect("connect through the emulator");
        (t.elapsed(), s)
    };
    // The first connect also resolves ARP through the wire.
    let (_, first) = netns::run_in(&topo.h1, connect).expect("netns h1");
    drop(first);
    let mut rtts = Vec::new();
    for _ in 0..5 {
        let (rtt, s) = netns::run_in(&topo.h1, connect).expect("netns h1");
        rtts.push(rtt);
        drop(s);
    }
    rtts.sort();
    assert!(emu.is_running(), "emulator thread stopped:\n{}", emu.snapshot().to_text());
    let rtt = rtts[rtts.len() / 2];
    eprintln!("handshake RTTs: {rtts:?}");
    assert!(
        rtt >= Duration::from_millis(40) && rtt <= Duration::from_millis(43),
        "median handshake RTT {rtt:?}, expected 40 ms + a little"
    );

    // A 3 s bulk transfer h1 -> h2.
    let (_, mut s) = netns::run_in(&topo.h1, connect).expect("netns h1");
    s.set_write_timeout(Some(Duration::from_secs(2))).expect("write timeout");
    let chunk = vec![0x5au8; 1 << 16];
    let t0 = Instant::now();
    // The sender's state after every write: (when, no loss being repaired,
    // retransmissions so far).
    let mut states = Vec::new();
    while t0.elapsed() < Duration::from_secs(3) {
        if let Err(e) = s.write_all(&chunk) {
            panic!("write through the emulator failed: {e}\n{}", emu.snapshot().to_text());
        }
        let i = tcpinfo::tcp_info(&s).expect("TCP_INFO of the sender");
        let clean = i.ca_state == 0 && i.sacked == 0 && i.lost == 0 && i.retrans == 0;
        states.push((Instant::now(), clean, i.total_retrans));
    }
    drop(s);
    assert!(emu.is_running(), "emulator thread stopped:\n{}", emu.snapshot().to_text());
    // Let the data in flight and the FIN cross before stopping the wire.
    let per_conn = server.join().expect("server thread");
    let summary = emu.stop();
    let marks = per_conn.last().expect("bulk connection");
    // Goodput between two reads, counted so that nothing but the wire can
    // make it larger than what the wire delivered:
    // - it starts once the sender is past slow start (1 s) and repairs no
    //   loss from then on: after a loss the receiver holds the data behind
    //   the hole, and it all becomes readable when the hole fills, as if
    //   delivered at that moment;
    // - the first read must empty the socket (return less than the buffer),
    //   and its clock is read before the syscall; the last read's after it.
    //   A reader scheduled late (the VM's steal) only widens the interval.
    let final_retrans = states.last().expect("sender states").2;
    let last_repair = states.iter().rposition(|&(_, clean, retrans)| !clean || retrans != final_retrans);
    let quiet_from = last_repair.map_or(t0, |i| states.get(i + 1).map_or(states[i].0, |s| s.0));
    let start_after = quiet_from.max(t0 + Duration::from_secs(1));
    let last = marks.last().expect("bytes received");
    assert!(
        last.after.saturating_duration_since(start_after) >= Duration::from_secs(1),
        "the sender repaired losses until {:?} after the start: no loss-free second to measure",
        quiet_from - t0
    );
    let from = marks
        .iter()
        .find(|m| m.before >= start_after && m.read < READ_BUF)
        .expect("a read that emptied the socket after the sender's losses");
    let span = last.after - from.before;
    let goodput = (last.total - from.total) as f64 * 8.0 / span.as_secs_f64();
    let limit = 50e6 * 1448.0 / 1538.0;
    eprintln!("goodput {:.2} Mbit/s = {:.1}% of {:.2}", goodput / 1e6, 100.0 * goodput / limit, limit / 1e6);
    eprintln!("{}", summary.to_text());
    // The wire may deliver late (its thread away, then catching up on the
    // model's schedule): frames due before the start that came after it add
    // up to its longest lateness at the link's rate. Beyond that, 0.5%.
    let late = Duration::from_nanos(summary.a_to_b.lateness.max_ns.unwrap_or(0));
    let ceiling = limit * (1.005 + late.as_secs_f64() / span.as_secs_f64());
    eprintln!(
        "measured over {span:?} from {:?} after the first write; ceiling {:.2} Mbit/s",
        from.before.saturating_duration_since(t0),
        ceiling / 1e6
    );
    assert!(
        goodput >= 0.8 * limit && goodput <= ceiling,
        "goodput {goodput} vs limit {limit} (ceiling {ceiling} with the wire's longest lateness {late:?})"
    );

    let ab = &summary.a_to_b;
    assert_eq!(ab.drops.malformed, 2, "{:?}", ab.drops);
    assert_eq!(ab.drops.oversize, 1, "{:?}", ab.drops);
    assert!(ab.error.is_none() && summary.b_to_a.error.is_none());
    assert_eq!(ab.drops.kernel, 0);
    assert!(ab.max_queue_bytes <= 500_000);
    // The model's identity, end to end.
    assert_eq!(
        ab.arrived_frames,
        ab.delivered_frames + ab.in_flight_frames + ab.drops.total() - ab.drops.tx_error
    );
    // Every frame that passed the frame checks ended a gap, but the first;
    // the final summary judges a bounded sample of them against 50 Mbit/s.
    let checked = ab.arrived_frames - ab.drops.malformed - ab.drops.oversize - ab.drops.runt;
    assert_eq!(ab.arrival_gaps + 1, checked, "gaps vs frames that passed the checks");
    let dev = ab.arrival_gap_deviation.expect("final summary of a rate-limited direction has gap deviations");
    assert_eq!(dev.samples as u64, ab.arrival_gaps.min(tcpaccel_emu::GAP_SAMPLE as u64));
    assert!(dev.abs_p50_ns <= dev.abs_p99_ns);
    assert!(summary.b_to_a.arrival_gap_deviation.is_some(), "the ACK direction too");
    // Frames are timed by the kernel's receive stamps (the delays above rely
    // on it), not by when the thread read them.
    assert!(ab.stamped_arrivals > 0 && ab.stamped_arrivals <= ab.arrived_frames, "{ab:?}");
    drop(topo);
}

/// Root only, long (about 15 s): the dumbbell shape at 500 Mbit/s,
/// 100 ms RTT and a 1 MB buffer carries a CUBIC transfer; the drops the
/// emulator counts should be what TCP retransmitted. Run with
/// `cargo test -p tcpaccel-emu --release --test root_wire -- --ignored --nocapture`.
#[test]
#[ignore]
fn root_cubic_drops_match_retransmits() {
    tcpaccel_sys::testing::require_root();
    let topo = build(1500);
    // Room for 2 x BDP (6.25 MB) of window on both hosts.
    for ns in [&topo.h1, &topo.h2] {
        netns::run_in(ns, || {
            std::fs::write("/proc/sys/net/ipv4/tcp_rmem", "4096 131072 33554432")?;
            std::fs::write("/proc/sys/net/ipv4/tcp_wmem", "4096 131072 33554432")
        })
        .expect("netns")
        .expect("sysctl");
    }
    let emu_ns = topo.emu.clone();
    let mut l = link(500, 50);
    l.buffer = QueueLimit::Bytes(1_000_000);
    let cfg = EmuConfig::symmetric("e1", "e2", l);
    let emu =
        netns::run_in(&emu_ns, move || Emulator::start(cfg)).expect("netns emu").expect("start emulator");
    let listener =
        netns::run_in(&topo.h2, || TcpListener::bind("10.77.0.2:5002")).expect("netns h2").expect("bind");
    let server = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().expect("accept");
        let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0u64;
        while let Ok(k) = c.read(&mut buf) {
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        n
    });
    let to: SocketAddr = "10.77.0.2:5002".parse().unwrap();
    let mut s = netns::run_in(&topo.h1, move || TcpStream::connect_timeout(&to, Duration::from_secs(5)))
        .expect("netns h1")
        .expect("connect");
    tcpaccel_sys::sockopt::set_congestion(&s, "cubic").expect("cubic");
    let chunk = vec![0u8; 1 << 20];
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(12) {
        s.write_all(&chunk).expect("write");
    }
    let info = tcpaccel_sys::tcpinfo::tcp_info(&s).expect("tcp_info");
    drop(s);
    let received = server.join().expect("server");
    let summary = emu.stop();
    eprintln!("{}", summary.to_text());
    let drops = summary.a_to_b.drops.total();
    eprintln!(
        "received {} MB, goodput {:.1} Mbit/s; emulator drops {drops}, TCP total_retrans {}",
        received / 1_000_000,
        received as f64 * 8.0 / 12e6,
        info.total_retrans
    );
    let diff = (drops as i64 - info.total_retrans as i64).unsigned_abs();
    assert!(diff <= 2.max(drops / 20), "drops {drops} vs retransmits {}", info.total_retrans);
    drop(topo);
}
