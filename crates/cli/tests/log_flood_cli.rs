//! Log floods (issue 50 item 2): a bounded connection flood against the
//! relay (at `--log info`, at the default level and with `--json-logs`) and
//! refused clients against the gathering server; every line the process
//! writes to stderr is counted. The promise is at most 60 lines a minute
//! (20 at once, then 30 a minute, a summary at most every 10 s); these
//! floods last a few seconds, so well under 60 is asked, with room, and
//! every record is written or counted in the summary. Loopback only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{bin, free_port, Reaper};

/// Starts `tcpaccel ARGS` with stdout and stderr piped; waits for the line
/// that says it listens (read from stderr) and returns the process and that line.
fn start(args: &[&str], ready: &str) -> (Reaper, BufReader<std::process::ChildStderr>, String) {
    let mut c = Command::new(bin());
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = Reaper(c.spawn().expect("tcpaccel runs"));
    let mut err = BufReader::new(child.0.stderr.take().unwrap());
    let mut line = String::new();
    let t0 = Instant::now();
    loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "stderr ended before a start line");
        if line.contains(ready) {
            return (child, err, line);
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no start line");
    }
}

/// The rest of stderr read on a thread (a writer must never block on a
/// full pipe during the flood).
fn drain(err: BufReader<std::process::ChildStderr>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut err = err;
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    })
}

/// SIGTERM, then the rest of stderr and all of stdout.
fn stop(mut r: Reaper, rest: std::thread::JoinHandle<String>) -> (String, String) {
    let pid = r.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut out = String::new();
    r.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let err = rest.join().unwrap();
    assert_eq!(r.0.wait().unwrap().code(), Some(0), "{err}");
    (err, out)
}

/// `n` connections to `addr` from 4 threads, each closed at once.
fn flood(addr: &str, n: usize) {
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let addr = addr.to_string();
            std::thread::spawn(move || {
                for _ in 0..n / 4 {
                    drop(TcpStream::connect(&addr).expect("connect"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// The relay's exit counters (one JSON object on stdout): `log_suppressed`.
fn log_suppressed(stdout: &str) -> u64 {
    let snap: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("exit counters")).unwrap();
    snap["log_suppressed"].as_u64().expect("log_suppressed")
}

/// The number in "N connection records suppressed" of a summary line.
fn summarized(lines: &[&str]) -> u64 {
    lines
        .iter()
        .filter(|l| l.contains("records suppressed"))
        .map(|l| {
            let at = l.find(" connection records suppressed").unwrap();
            let num = l[..at].rsplit(' ').next().unwrap();
            num.parse::<u64>().unwrap_or_else(|_| panic!("a count in {l}"))
        })
        .sum()
}

const FLOOD: usize = 2000;

#[test]
fn relay_flood_at_info_writes_the_burst_and_one_summary_that_counts_the_rest() {
    let listen = format!("127.0.0.1:{}", free_port());
    let (relay, err, _) = start(&["--log", "info", "relay", "--listen", &listen], "listening on");
    let rest = drain(err);
    flood(&listen, FLOOD);
    std::thread::sleep(Duration::from_millis(500));
    let (err, out) = stop(relay, rest);
    let lines: Vec<&str> = err.lines().collect();
    // 20 records at once (perhaps one more refilled), one summary, the
    // metrics-less start line's info twin and the SIGTERM line. Before: 200
    // records, then one "suppressed" line before each of 50 a second.
    assert!(lines.len() <= 30, "{} lines on stderr:\n{err}", lines.len());
    let records = lines.iter().filter(|l| l.contains("connection done")).count() as u64;
    let summaries = lines.iter().filter(|l| l.contains("records suppressed")).count();
    assert!((20..=22).contains(&records), "{records} records:\n{err}");
    assert_eq!(summaries, 1, "one summary, at exit:\n{err}");
    let suppressed = log_suppressed(&out);
    assert_eq!(summarized(&lines), suppressed, "the summary says what the counter counts:\n{err}");
    assert_eq!(records + suppressed, FLOOD as u64, "every record written or counted:\n{err}");
}

#[test]
fn relay_flood_at_the_default_level_writes_nothing_and_counts_nothing() {
    let listen = format!("127.0.0.1:{}", free_port());
    let (relay, err, _) = start(&["relay", "--listen", &listen], "listening on");
    let rest = drain(err);
    flood(&listen, FLOOD);
    std::thread::sleep(Duration::from_millis(500));
    let (err, out) = stop(relay, rest);
    // Records are `info`: not printed at `warn`, so neither are summaries
    // of them (before: ~50 "suppressed" lines a second).
    assert!(err.trim().is_empty(), "stderr after the start line:\n{err}");
    assert_eq!(log_suppressed(&out), 0);
}

#[test]
fn relay_flood_with_json_logs_writes_the_burst_and_one_json_summary() {
    let listen = format!("127.0.0.1:{}", free_port());
    let (relay, err, _) = start(&["relay", "--listen", &listen, "--json-logs"], "relay_listening");
    let rest = drain(err);
    flood(&listen, FLOOD);
    std::thread::sleep(Duration::from_millis(500));
    let (err, out) = stop(relay, rest);
    let mut records = 0u64;
    let mut summarized = 0u64;
    for l in err.lines() {
        let j: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|_| panic!("JSON only: {l}\n{err}"));
        match j["type"].as_str() {
            Some("relay_connection") => records += 1,
            Some("relay_records_suppressed") => summarized += j["records"].as_u64().unwrap(),
            other => panic!("unexpected {other:?}: {l}"),
        }
    }
    assert!(err.lines().count() <= 25, "{} lines:\n{err}", err.lines().count());
    assert!((20..=22).contains(&records), "{records} records");
    assert_eq!(summarized, log_suppressed(&out));
    assert_eq!(records + summarized, FLOOD as u64);
}

#[test]
fn gather_refusing_hundreds_of_clients_writes_the_burst_and_one_summary() {
    use tcpaccel_gather::proto::{encode_control, encode_preface, Control, Kind, VERSION};
    let listen = format!("127.0.0.1:{}", free_port());
    let (gather, err, _) = start(
        &["gather", "serve", "--listen", &listen, "--buffer-pool", "64MB", "--class", "a=20mbit", "--json"],
        "listening on",
    );
    let rest = drain(err);
    let n = 300u64;
    for i in 0..n {
        let mut s = TcpStream::connect(&listen).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let hello = Control::Hello { client_id: format!("c{i}"), class: "nosuch".into(), target_bps: None };
        s.write_all(&encode_preface(VERSION, Kind::Control)).unwrap();
        s.write_all(&encode_control(&hello)).unwrap();
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        assert!(String::from_utf8_lossy(&answer).contains("unknown_class"), "refused as unknown class");
    }
    let (err, out) = stop(gather, rest);
    // The event stream on stdout (what the unit's journal gets with --json):
    // before, one connection_error per refused client (300); now the burst
    // and one line counting the rest.
    let events: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str(l).expect("JSON Lines on stdout")).collect();
    let shown = events.iter().filter(|e| e["type"] == "connection_error").count() as u64;
    let held: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "connection_errors_suppressed")
        .map(|e| e["records"].as_u64().expect("records"))
        .collect();
    assert!((20..=22).contains(&shown), "{shown} connection_error events:\n{out}");
    assert_eq!(held, vec![n - shown], "one line counts the rest:\n{out}");
    let lines: Vec<&str> = err.lines().collect();
    // Before: one WARN line per refused client (300).
    let closing = lines.iter().filter(|l| l.contains("gather: closing connection")).count() as u64;
    let summaries: Vec<&&str> =
        lines.iter().filter(|l| l.contains("per-connection log lines suppressed")).collect();
    assert!(lines.len() <= 25, "{} lines on stderr:\n{err}", lines.len());
    assert!((20..=22).contains(&closing), "{closing} lines:\n{err}");
    assert_eq!(summaries.len(), 1, "{err}");
    assert!(summaries[0].contains(&format!("{} per-connection log lines suppressed", n - closing)), "{err}");
}
