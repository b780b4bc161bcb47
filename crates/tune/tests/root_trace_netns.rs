//! Root test: the tracer opened for a namespace sees that namespace's
//! sockets and not the host's. The namespace is removed by a Drop guard
//! (`tcpaccel_sys::testing::TestNetns`).

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use tcpaccel_tune::trace::{Selector, Tracer};

#[test]
fn root_tracer_in_a_namespace_sees_only_its_sockets() {
    tcpaccel_sys::testing::require_root();
    let t = tcpaccel_sys::testing::TestNetns::one("tracetest");
    let ns = t.name();

    // A connection inside the namespace, made on a thread that entered it.
    let (port, conns) = tcpaccel_sys::netns::run_in(ns, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (s, _) = l.accept().unwrap();
        c.write_all(&[1u8; 20_000]).unwrap();
        (port, (l, c, s))
    })
    .expect("enter namespace");
    // The same port on the host, so a wrong namespace would show up.
    let host = TcpListener::bind(("127.0.0.1", port));

    let mut inside = Tracer::open(Selector::Port(port), Some(ns)).expect("tracer in namespace");
    let mut rows = Vec::new();
    inside.sample(0, Duration::ZERO, &mut rows).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.cwnd > 0));
    assert!(rows.iter().any(|r| r.bytes_acked.unwrap_or(0) >= 20_000));

    let mut outside = Tracer::open(Selector::Port(port), None).unwrap();
    outside.sample(0, Duration::ZERO, &mut rows).unwrap();
    assert!(
        rows.iter().all(|r| r.bytes_acked.unwrap_or(0) < 20_000),
        "host view must not show the namespace's connection"
    );
    drop((conns, host));
    assert!(Tracer::open(Selector::All, Some("tcpaccel-no-such-namespace")).is_err());
}
