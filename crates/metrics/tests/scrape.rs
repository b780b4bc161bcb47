//! Scrapes a live endpoint over loopback and parses the answer with an
//! independent Prometheus text-format parser.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use tcpaccel_metrics::{Counter, EncodeLabelSet, Endpoint, Family, Gauge, Registry};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Hop {
    hop: String,
}

fn get(addr: std::net::SocketAddr, request: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").expect("an HTTP response");
    (head.to_string(), body.to_string())
}

#[test]
fn a_scrape_returns_every_registered_metric_with_its_value() {
    let mut reg = Registry::default();
    let conns: Counter = Counter::default();
    let rate: Gauge = Gauge::default();
    let bytes: Family<Hop, Counter> = Family::default();
    reg.register("tcpaccel_test_connections", "Connections accepted", conns.clone());
    reg.register("tcpaccel_test_rate_bps", "Current rate", rate.clone());
    reg.register("tcpaccel_test_bytes", "Bytes per hop", bytes.clone());
    let ep = Endpoint::serve("127.0.0.1:0".parse().unwrap(), Arc::new(reg)).unwrap();

    conns.inc_by(3);
    rate.set(500_000_000);
    bytes.get_or_create(&Hop { hop: "0".into() }).inc_by(1000);
    bytes.get_or_create(&Hop { hop: "1".into() }).inc_by(7);

    let (head, body) = get(ep.addr(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("openmetrics-text"), "{head}");
    let lines = body.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("parsable exposition");
    let value = |name: &str, label: Option<(&str, &str)>| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            })
            .unwrap_or_else(|| panic!("{name} {label:?} missing from:\n{body}"))
    };
    assert_eq!(value("tcpaccel_test_connections_total", None), 3.0);
    assert_eq!(value("tcpaccel_test_rate_bps", None), 5e8);
    assert_eq!(value("tcpaccel_test_bytes_total", Some(("hop", "0"))), 1000.0);
    assert_eq!(value("tcpaccel_test_bytes_total", Some(("hop", "1"))), 7.0);

    // Later scrapes see later values.
    conns.inc();
    let (_, body) = get(ep.addr(), "GET /metrics HTTP/1.0\r\n\r\n");
    assert!(body.contains("tcpaccel_test_connections_total 4"), "{body}");
}

#[test]
fn other_paths_and_methods_are_refused() {
    let ep = Endpoint::serve("127.0.0.1:0".parse().unwrap(), Arc::new(Registry::default())).unwrap();
    let (head, _) = get(ep.addr(), "GET / HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    let (head, _) = get(ep.addr(), "POST /metrics HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 405"), "{head}");
    // A client that says nothing does not block the next scrape for long.
    let _idle = TcpStream::connect(ep.addr()).unwrap();
    let t = std::time::Instant::now();
    let (head, _) = get(ep.addr(), "GET /metrics HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(t.elapsed() < tcpaccel_metrics::REQUEST_TIMEOUT * 2, "{:?}", t.elapsed());
}
