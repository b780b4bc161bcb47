//! Loopback throughput of one relay, splice against the copy fallback, side by
//! side in one run. Not a test: numbers depend on the machine and its load.
//!
//! The relay runs in a child process on a single-threaded runtime (one core),
//! so its CPU time is read alone from /proc/PID/task/*/schedstat.
//!
//! cargo run --release -p tcpaccel-relay --example loopback_bench -- [GB per run] [streams] [repeats]
//! Relay alone on one core: BENCH_RELAY_CPU=1 taskset -c 0 target/release/examples/loopback_bench

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tcpaccel_relay::{Config, Relay, Settings};

fn child_relay(mode: &str) -> ! {
    let raw = Settings {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        copy: Some(mode == "copy"),
        ..Default::default()
    };
    let cfg = Config::from_settings(&raw).expect("config");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let relay = Relay::bind(cfg).await.expect("bind");
        println!("{}", relay.local_addrs()[0]);
        relay.run(std::future::pending()).await;
    });
    std::process::exit(0)
}

/// CPU time of all threads of `pid`, from schedstat (ns on CPU).
fn cpu_of(pid: u32) -> Duration {
    let mut ns = 0u64;
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in dir.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
                ns += s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            }
        }
    }
    Duration::from_nanos(ns)
}

fn sink() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("sink");
    let a = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 20];
                let mut total = 0u64;
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    total += n as u64;
                }
                let _ = s.write_all(&total.to_be_bytes());
            });
        }
    });
    a
}

fn socks(relay: SocketAddr, target: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(relay).expect("relay");
    s.write_all(&[5, 1, 0]).expect("greeting");
    let mut m = [0u8; 2];
    s.read_exact(&mut m).expect("method");
    let SocketAddr::V4(t) = target else { panic!("v4") };
    let mut req = vec![5, 1, 0, 1];
    req.extend_from_slice(&t.ip().octets());
    req.extend_from_slice(&t.port().to_be_bytes());
    s.write_all(&req).expect("request");
    let mut rep = [0u8; 10];
    s.read_exact(&mut rep).expect("reply");
    assert_eq!(rep[1], 0, "relay refused");
    s
}

fn run(child: &Child, relay: SocketAddr, target: SocketAddr, bytes: u64, streams: usize) -> (f64, f64) {
    let cpu0 = cpu_of(child.id());
    let t0 = Instant::now();
    let handles: Vec<_> = (0..streams)
        .map(|_| {
            let per = bytes / streams as u64;
            std::thread::spawn(move || {
                let mut s = socks(relay, target);
                let buf = vec![0x5au8; 1 << 20];
                let mut left = per;
                while left > 0 {
                    let n = left.min(buf.len() as u64) as usize;
                    s.write_all(&buf[..n]).expect("send");
                    left -= n as u64;
                }
                s.shutdown(std::net::Shutdown::Write).expect("shutdown");
                let mut got = [0u8; 8];
                s.read_exact(&mut got).expect("sink count");
                assert_eq!(u64::from_be_bytes(got), per, "byte count through the relay");
            })
        })
        .collect();
    for h in handles {
        h.join().expect("stream");
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = (cpu_of(child.id()) - cpu0).as_secs_f64();
    let gb = bytes as f64 / 1e9;
    (gb / wall, cpu / gb)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        child_relay(args.get(2).map(String::as_str).unwrap_or("splice"));
    }
    let gb: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(4.0);
    let streams: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let repeats: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let bytes = (gb * 1e9) as u64;
    let target = sink();
    let exe = std::env::current_exe().expect("exe");
    let mut results = Vec::new();
    for mode in ["splice", "copy"] {
        // BENCH_RELAY_CPU=N pins the relay to CPU N with taskset (run the
        // bench itself under `taskset -c M` to keep clients off that core).
        let mut cmd = match std::env::var("BENCH_RELAY_CPU") {
            Ok(cpu) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &cpu]).arg(&exe);
                c
            }
            Err(_) => Command::new(&exe),
        };
        let mut child = cmd.args(["child", mode]).stdout(Stdio::piped()).spawn().expect("spawn relay");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("relay address");
        let relay: SocketAddr = line.trim().parse().expect("address");
        // Warm up, then measure.
        run(&child, relay, target, 200_000_000, streams);
        for _ in 0..repeats {
            let (gbps, cpu_per_gb) = run(&child, relay, target, bytes, streams);
            println!(
                "{{\"type\":\"relay_bench\",\"mode\":\"{mode}\",\"streams\":{streams},\"gbytes\":{gb},\"gbytes_per_s\":{gbps:.3},\"relay_cpu_s_per_gb\":{cpu_per_gb:.3}}}"
            );
            results.push((mode, gbps, cpu_per_gb));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    for mode in ["splice", "copy"] {
        let mut r: Vec<f64> = results.iter().filter(|x| x.0 == mode).map(|x| x.1).collect();
        let mut c: Vec<f64> = results.iter().filter(|x| x.0 == mode).map(|x| x.2).collect();
        r.sort_by(f64::total_cmp);
        c.sort_by(f64::total_cmp);
        eprintln!("{mode}: median {:.2} GB/s, relay CPU {:.3} s/GB", r[r.len() / 2], c[c.len() / 2]);
    }
}
