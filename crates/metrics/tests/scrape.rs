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

    let (head, body) = get(
        ep.addr(),
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
    );
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
    assert!(head.contains("Allow: GET, HEAD"), "{head}");
    // A client that says nothing does not block the next scrape for long.
    let _idle = TcpStream::connect(ep.addr()).unwrap();
    let t = std::time::Instant::now();
    let (head, _) = get(ep.addr(), "GET /metrics HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(t.elapsed() < tcpaccel_metrics::REQUEST_TIMEOUT * 2, "{:?}", t.elapsed());
}

fn counter_registry() -> (Registry, Counter) {
    let mut reg = Registry::default();
    let conns: Counter = Counter::default();
    let rate: Gauge = Gauge::default();
    let bytes: Family<Hop, Counter> = Family::default();
    reg.register("tcpaccel_test_connections", "Connections accepted", conns.clone());
    reg.register("tcpaccel_test_rate_bps", "Current rate", rate.clone());
    reg.register("tcpaccel_test_bytes", "Bytes per hop", bytes.clone());
    conns.inc_by(2);
    rate.set(7);
    bytes.get_or_create(&Hop { hop: "0".into() }).inc_by(9);
    (reg, conns)
}

/// The 0.0.4 text as a parser of that format reads it (the rule of Python's
/// prometheus_client `text_string_to_metric_families`): after `# TYPE NAME
/// counter|gauge`, only samples named NAME belong to the family; any other
/// name starts a new, untyped metric. Returns each sample name's type.
fn types_as_a_004_parser_sees_them(text: &str) -> std::collections::HashMap<String, String> {
    let mut out = std::collections::HashMap::new();
    let mut family: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, typ) = rest.split_once(' ').unwrap();
            family = Some((name.to_string(), typ.to_string()));
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let name = line.split(['{', ' ']).next().unwrap().to_string();
        let typ = match &family {
            Some((f, t)) if *f == name => t.clone(),
            _ => {
                family = None;
                "untyped".to_string()
            }
        };
        out.insert(name, typ);
    }
    out
}

#[test]
fn the_content_type_follows_accept_and_004_keeps_every_counter_typed() {
    let (reg, _) = counter_registry();
    let ep = Endpoint::serve("127.0.0.1:0".parse().unwrap(), Arc::new(reg)).unwrap();
    // No Accept (curl's */* alike): the 0.0.4 text.
    let (head, body) = get(ep.addr(), "GET /metrics HTTP/1.1\r\nAccept: */*\r\n\r\n");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "{head}");
    assert!(!body.contains("# EOF"), "{body}");
    let types = types_as_a_004_parser_sees_them(&body);
    assert_eq!(types["tcpaccel_test_connections_total"], "counter", "{body}");
    assert_eq!(types["tcpaccel_test_bytes_total"], "counter", "{body}");
    assert_eq!(types["tcpaccel_test_rate_bps"], "gauge", "{body}");
    // What Prometheus sends: OpenMetrics first.
    let (head, body) = get(
        ep.addr(),
        "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n\r\n",
    );
    assert!(head.contains("Content-Type: application/openmetrics-text"), "{head}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(body.contains("# TYPE tcpaccel_test_connections counter"), "{body}");
}

#[test]
fn head_answers_the_headers_of_get_without_a_body() {
    let (reg, _) = counter_registry();
    let ep = Endpoint::serve("127.0.0.1:0".parse().unwrap(), Arc::new(reg)).unwrap();
    let (get_head, get_body) = get(ep.addr(), "GET /metrics HTTP/1.1\r\n\r\n");
    let (head, body) = get(ep.addr(), "HEAD /metrics HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.is_empty(), "{body}");
    assert!(head.contains(&format!("Content-Length: {}", get_body.len())), "{head} vs {get_head}");
}

#[test]
fn idle_connections_do_not_delay_a_scrape() {
    let (reg, _) = counter_registry();
    let ep = Endpoint::serve("127.0.0.1:0".parse().unwrap(), Arc::new(reg)).unwrap();
    let idle: Vec<TcpStream> = (0..100).map(|_| TcpStream::connect(ep.addr()).unwrap()).collect();
    let t = std::time::Instant::now();
    let (head, _) = get(ep.addr(), "GET /metrics HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // One at a time, this took 100 request timeouts; concurrently it is
    // milliseconds. A wide margin for a loaded machine.
    assert!(t.elapsed() < tcpaccel_metrics::REQUEST_TIMEOUT / 2, "{:?}", t.elapsed());
    drop(idle);
}

#[test]
fn the_connection_cap_closes_the_oldest_and_idle_ones_time_out() {
    let (reg, _) = counter_registry();
    let ep =
        tcpaccel_metrics::Endpoint::serve_with("127.0.0.1:0".parse().unwrap(), Arc::new(reg), 4).unwrap();
    let mut idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(ep.addr()).unwrap()).collect();
    let t = std::time::Instant::now();
    while ep.connections() < 4 {
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "never held 4");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // A fifth connection (the scrape) closes the oldest idle one.
    let (head, _) = get(ep.addr(), "GET /metrics HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    idle[0].set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
    let mut b = [0u8; 1];
    assert_eq!(idle[0].read(&mut b).unwrap(), 0, "the oldest was closed");
    // The rest are closed by the request timeout.
    idle[1].set_read_timeout(Some(tcpaccel_metrics::REQUEST_TIMEOUT * 3)).unwrap();
    let t = std::time::Instant::now();
    assert_eq!(idle[1].read(&mut b).unwrap_or(0), 0);
    assert!(t.elapsed() < tcpaccel_metrics::REQUEST_TIMEOUT * 2, "{:?}", t.elapsed());
}
