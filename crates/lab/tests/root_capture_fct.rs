//! The capture-based flow completion time on a real transfer whose moments
//! are known: the SYN goes out at connect(), the data (1 MB over an unshaped
//! veth) is acked while the sender waits 300 ms, and the FIN goes out when
//! it then shuts its side down.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tcpaccel_core::Instant;
use tcpaccel_lab::engines::capture::Capture;
use tcpaccel_sys::netns;
use tcpaccel_sys::testing::{require_root, TestNetns};

const BYTES: usize = 1_000_000;
const HOLD: Duration = Duration::from_millis(300);

fn now() -> Instant {
    Instant::from_nanos(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64)
}

#[test]
fn root_capture_times_the_syn_the_last_data_ack_and_the_fin_ack() {
    require_root();
    let t = TestNetns::new("capfct", &["a", "b"]);
    t.veth((t.ns("a"), "ca"), (t.ns("b"), "cb"));
    t.addr(t.ns("a"), "ca", "10.77.0.1/24");
    t.addr(t.ns("b"), "cb", "10.77.0.2/24");
    let server: SocketAddr = "10.77.0.2:5555".parse().unwrap();

    let (ready_tx, ready_rx) = mpsc::channel();
    let b = t.ns("b").to_string();
    let receiver = std::thread::spawn(move || {
        netns::run_in(&b, move || {
            let l = TcpListener::bind(server).expect("bind in b");
            ready_tx.send(()).unwrap();
            let (mut s, _) = l.accept().expect("accept");
            let mut n = 0;
            let mut buf = vec![0u8; 64 << 10];
            loop {
                match s.read(&mut buf).expect("read") {
                    0 => break,
                    k => n += k,
                }
            }
            n // dropping `s` closes: the receiver's FIN follows the sender's
        })
        .expect("enter b")
    });
    ready_rx.recv_timeout(Duration::from_secs(5)).expect("receiver ready");

    let mut cap = netns::run_in(t.ns("a"), || Capture::open("ca")).expect("enter a").expect("capture on ca");
    let (local, connect_at, shutdown_at) = netns::run_in(t.ns("a"), move || {
        let connect_at = now();
        let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(5)).expect("connect");
        s.write_all(&vec![7u8; BYTES]).expect("write");
        std::thread::sleep(HOLD);
        let shutdown_at = now();
        s.shutdown(Shutdown::Write).expect("shutdown");
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).expect("read to the receiver's close");
        (s.local_addr().unwrap(), connect_at, shutdown_at)
    })
    .expect("enter a");
    assert_eq!(receiver.join().unwrap(), BYTES);
    while cap.drain(Duration::from_millis(100)).expect("drain") > 0 {}

    assert_eq!((cap.unreadable, cap.untimed), (0, 0), "first error: {:?}", cap.first_error);
    let f =
        *cap.connections().get(local, server).expect("the connection, the sender being the side of the SYN");
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    assert_eq!(f.data_bytes, BYTES as u64);
    // Ordering with wide margins, not tight timing (CI is a busy 2-core
    // machine): the SYN between connect() and the hold's end, the last data
    // byte acked before the sender shuts down, the FIN's ACK after that.
    assert!(
        f.syn >= connect_at && f.syn < connect_at + HOLD,
        "SYN {:.1} ms after connect()",
        ms(f.syn.saturating_since(connect_at))
    );
    let acked = f.last_data_acked.expect("the last data byte was acked");
    assert!(
        acked < shutdown_at,
        "last data ACK {:.1} ms after shutdown()",
        ms(acked.saturating_since(shutdown_at))
    );
    let fin = f.fin_acked.expect("the FIN was acked");
    assert!(
        fin >= shutdown_at && fin - shutdown_at < Duration::from_secs(2),
        "FIN acked {:.1} ms after shutdown()",
        ms(fin.saturating_since(shutdown_at))
    );
    assert!(f.fct_to_fin_ack().unwrap() >= HOLD, "to the FIN's ACK includes the 300 ms hold");
    assert!(!f.reset);
}
