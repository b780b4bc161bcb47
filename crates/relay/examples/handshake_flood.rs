//! How long a fresh SOCKS5 client waits while many idle handshakes are held
//! (issue 14 item 7). Not a test: the numbers depend on the machine and its load.
//!
//! Opens `IDLE` loopback connections to the relay at once (half send nothing,
//! half send one byte of a greeting and stop), keeps them open, then times
//! `FRESH` new clients one after another from TCP connect to the SOCKS5
//! CONNECT reply, each followed by an echoed byte to prove the path carries
//! data. The relay runs in a child process with the library's defaults (or
//! the TOML settings in `BENCH_RELAY_TOML`), or is any relay at `--relay ADDR`.
//!
//! With `--sources N` the idle connections come from N loopback source
//! addresses (127.10.0.1 on) and send nothing, and each reconnects as soon
//! as the relay closes it (issue 26 item 11's flood); `--pause-ms MS` makes
//! each fresh client wait that long between its greeting and its request
//! (a WAN round trip), and `--silent-ms MS` makes it wait that long after
//! connecting before its greeting (a client whose greeting is still in
//! flight on a long path, issue 50 item 4). With `--greet` each flood
//! connection sends a SOCKS5 greeting and then nothing (a handshake that
//! started and stalled), instead of nothing at all.
//!
//! cargo run --release -p tcpaccel-relay --example handshake_flood -- [IDLE] [FRESH] [--relay ADDR] [--sources N] [--pause-ms MS] [--silent-ms MS] [--greet]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tcpaccel_relay::{Config, Settings};

// The integration tests' helpers: the child relay's body and the echo server.
#[path = "../tests/common/mod.rs"]
mod common;
use common::echo_server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn child_relay() -> ! {
    let toml_text = std::env::var("BENCH_RELAY_TOML").unwrap_or_default();
    let raw: Settings = toml::from_str(&toml_text).expect("BENCH_RELAY_TOML is relay TOML");
    let raw = Settings { listen: Some("127.0.0.1:0".parse().unwrap()), ..raw };
    let cfg = Config::from_settings(&raw).expect("config");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    common::serve_until_stdin_closes(cfg, rt);
    std::process::exit(0)
}

/// Raises this process's descriptor limit to `want` (or the hard limit) with
/// util-linux `prlimit`, so the relay crate stays free of unsafe code.
fn raise_nofile(want: u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let (soft, hard) = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| {
            let v: Vec<&str> = l.split_whitespace().collect();
            Some((v.get(3)?.parse::<u64>().ok()?, v.get(4)?.parse::<u64>().unwrap_or(u64::MAX)))
        })
        .unwrap_or((0, 0));
    if soft >= want {
        return;
    }
    let new = want.min(hard);
    let st = Command::new("prlimit")
        .arg(format!("--pid={}", std::process::id()))
        .arg(format!("--nofile={new}:{hard}"))
        .status()
        .expect("run prlimit (util-linux) to raise RLIMIT_NOFILE");
    assert!(st.success(), "prlimit --nofile={new} failed");
    eprintln!("RLIMIT_NOFILE raised from {soft} to {new}");
}

/// One fresh client: connect, greeting, CONNECT; returns the time to the
/// CONNECT reply, after checking one byte is echoed through.
async fn fresh(
    relay: SocketAddr,
    target: SocketAddr,
    silent: Duration,
    pause: Duration,
) -> Result<Duration, String> {
    let t0 = Instant::now();
    let mut s = TcpStream::connect(relay).await.map_err(|e| format!("connect: {e}"))?;
    tokio::time::sleep(silent).await;
    s.write_all(&[5, 1, 0]).await.map_err(|e| format!("greeting: {e}"))?;
    let mut m = [0u8; 2];
    s.read_exact(&mut m).await.map_err(|e| format!("method reply: {e}"))?;
    tokio::time::sleep(pause).await;
    let SocketAddr::V4(t) = target else { return Err("v4 target".into()) };
    let mut req = vec![5, 1, 0, 1];
    req.extend_from_slice(&t.ip().octets());
    req.extend_from_slice(&t.port().to_be_bytes());
    s.write_all(&req).await.map_err(|e| format!("request: {e}"))?;
    let mut rep = [0u8; 10];
    s.read_exact(&mut rep).await.map_err(|e| format!("reply: {e}"))?;
    let took = t0.elapsed();
    if rep[1] != 0 {
        return Err(format!("reply code {}", rep[1]));
    }
    s.write_all(b"x").await.map_err(|e| format!("data: {e}"))?;
    let mut b = [0u8; 1];
    s.read_exact(&mut b).await.map_err(|e| format!("echo: {e}"))?;
    Ok(took)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        child_relay();
    }
    let mut pos = Vec::new();
    let mut external: Option<SocketAddr> = None;
    let mut sources = 0u32;
    let mut pause = Duration::ZERO;
    let mut silent = Duration::ZERO;
    let mut greet = false;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--sources" {
            sources = it.next().and_then(|v| v.parse().ok()).expect("--sources N");
        } else if a == "--pause-ms" {
            pause = Duration::from_millis(it.next().and_then(|v| v.parse().ok()).expect("--pause-ms MS"));
        } else if a == "--greet" {
            greet = true;
        } else if a == "--silent-ms" {
            silent = Duration::from_millis(it.next().and_then(|v| v.parse().ok()).expect("--silent-ms MS"));
        } else if a == "--relay" {
            external = Some(it.next().expect("--relay ADDR").parse().expect("--relay IP:PORT"));
        } else {
            pos.push(a.clone());
        }
    }
    let idle: usize = pos.first().and_then(|s| s.parse().ok()).unwrap_or(2000);
    let fresh_n: usize = pos.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    // Our idle sockets, the fresh ones, the echo server's, and (in the child,
    // which inherits the limit) the relay's side of each.
    raise_nofile(2 * idle as u64 + 1024);
    let target = echo_server();
    let mut child = None;
    let relay = match external {
        Some(a) => a,
        None => {
            let exe = std::env::current_exe().expect("exe");
            let mut c = Command::new(exe)
                .arg("child")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn relay");
            let mut lines = BufReader::new(c.stdout.take().expect("stdout")).lines();
            let addr = loop {
                let l = lines.next().expect("relay exited").expect("read");
                if let Some(a) = l.strip_prefix("ADDR ") {
                    break a.trim().parse().expect("address");
                }
            };
            child = Some((c, lines));
            addr
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        // All idle connects at once, as a flood would. Connects still pending
        // after 2 s (SYNs dropped by a full backlog) keep retrying meanwhile.
        let t0 = Instant::now();
        let established = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reconnects = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let tasks: Vec<_> = (0..idle)
            .map(|i| {
                let established = established.clone();
                let (stop, reconnects) = (stop.clone(), reconnects.clone());
                tokio::spawn(async move {
                    if sources > 0 {
                        // Silent, from its own source, reconnecting when closed.
                        let k = i as u32 % sources;
                        let src = std::net::Ipv4Addr::new(127, 10 + (k / 62_500) as u8, ((k / 250) % 250) as u8, 1 + (k % 250) as u8);
                        let mut first = true;
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            let sock = tokio::net::TcpSocket::new_v4().ok()?;
                            sock.bind(SocketAddr::new(src.into(), 0)).ok()?;
                            let Ok(mut s) = sock.connect(relay).await else {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                continue;
                            };
                            if first {
                                established.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                first = false;
                            } else {
                                reconnects.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                            if greet && s.write_all(&[5, 1, 0]).await.is_err() {
                                continue;
                            }
                            // Until the relay closes it (the method reply, if
                            // any, is read and ignored).
                            let mut b = [0u8; 16];
                            while matches!(s.read(&mut b).await, Ok(n) if n > 0) {}
                        }
                        return None;
                    }
                    let mut s = TcpStream::connect(relay).await.ok()?;
                    established.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i % 2 == 1 {
                        // The first byte of a greeting, then nothing.
                        s.write_all(&[5]).await.ok()?;
                    }
                    Some(s)
                })
            })
            .collect();
        let count = || established.load(std::sync::atomic::Ordering::Relaxed);
        while count() < idle && t0.elapsed() < Duration::from_secs(2) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        eprintln!("{} of {idle} idle connections established in {:?}", count(), t0.elapsed());
        let mut times = Vec::new();
        for i in 0..fresh_n {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let r = tokio::time::timeout(Duration::from_secs(60), fresh(relay, target, silent, pause)).await;
            let r = r.unwrap_or_else(|_| Err("no reply in 60 s".into()));
            match &r {
                Ok(d) => {
                    println!(
                        "{{\"type\":\"fresh_connect\",\"i\":{i},\"idle_established\":{},\"connect_ms\":{:.3}}}",
                        count(),
                        d.as_secs_f64() * 1e3
                    );
                    times.push(d.as_secs_f64() * 1e3);
                }
                Err(e) => println!("{{\"type\":\"fresh_connect\",\"i\":{i},\"error\":{e:?}}}"),
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        eprintln!("flood reconnects meanwhile: {}", reconnects.load(std::sync::atomic::Ordering::Relaxed));
        let mut held = Vec::new();
        for t in tasks {
            if t.is_finished() {
                if let Ok(Some(s)) = t.await {
                    held.push(s);
                }
            } else {
                t.abort();
            }
        }
        // Which idle connections the relay has closed by now (our side still holds all).
        let mut closed = 0;
        for s in &held {
            let mut b = [0u8; 16];
            match s.try_read(&mut b) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                _ => closed += 1,
            }
        }
        times.sort_by(f64::total_cmp);
        let med = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
        let max = times.last().copied().unwrap_or(f64::NAN);
        println!(
            "{{\"type\":\"handshake_flood\",\"idle\":{idle},\"idle_established\":{},\"idle_closed_by_relay\":{closed},\"fresh\":{fresh_n},\"fresh_ok\":{},\"median_ms\":{med:.3},\"max_ms\":{max:.3}}}",
            held.len(),
            times.len()
        );
        drop(held);
    });
    if let Some((mut c, lines)) = child {
        drop(c.stdin.take());
        for l in lines.map_while(Result::ok) {
            if let Some(j) = l.strip_prefix("STATS ") {
                println!("{j}");
            }
        }
        let _ = c.wait();
    }
}
