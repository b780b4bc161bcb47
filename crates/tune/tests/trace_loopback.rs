//! The tracer on real loopback connections: rows at the requested interval
//! with cwnd > 0 during a transfer, and 100 idle sockets sampled per tick.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tcpaccel_tune::trace::{run, Row, Selector, Tracer};

#[test]
fn trace_of_a_loopback_transfer_has_rows_every_interval() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let sender = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let buf = vec![7u8; 64 * 1024];
        // A modest, bounded transfer: 64 KiB every 2 ms (~260 Mbit/s).
        while !d2.load(Ordering::Relaxed) {
            if s.write_all(&buf).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    let (mut rx, _) = l.accept().unwrap();
    let receiver = std::thread::spawn(move || {
        let mut buf = vec![0u8; 256 * 1024];
        while let Ok(n) = rx.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
    });
    let interval = Duration::from_millis(10);
    let mut tracer = Tracer::open(Selector::Port(addr.port()), None).unwrap();
    let mut all: Vec<Row> = Vec::new();
    let stop = AtomicBool::new(false);
    let sum = run(&mut tracer, interval, Some(Duration::from_secs(1)), &stop, |rows| {
        all.extend_from_slice(rows);
        Ok(())
    })
    .unwrap();
    done.store(true, Ordering::Relaxed);
    eprintln!("loopback transfer trace: {sum:?}");
    sender.join().unwrap();
    receiver.join().unwrap();

    // 1 s at 10 ms is ticks 0..=100. On a loaded machine some are late and
    // skipped (counted), but the schedule itself must account for all.
    assert!(sum.ticks + sum.missed_ticks >= 95 && sum.ticks + sum.missed_ticks <= 101, "{sum:?}");
    assert!(sum.ticks >= 10, "{sum:?}");
    assert_eq!(sum.sockets, 2, "both ends of the connection: {sum:?}");
    let client: Vec<&Row> = all.iter().filter(|r| r.dst == addr).collect();
    assert!(client.len() as u64 >= sum.ticks - 1);
    assert!(client.iter().all(|r| r.cwnd > 0));
    // Each sample is taken at or after its tick's absolute deadline, and
    // ticks only move forward: the schedule does not drift.
    for r in &client {
        assert!(r.t_s + 1e-9 >= r.tick as f64 * 0.010, "tick {} sampled early at {}", r.tick, r.t_s);
    }
    for w in client.windows(2) {
        assert!(w[1].tick > w[0].tick && w[1].t_s > w[0].t_s);
    }
    assert!(client.last().unwrap().bytes_acked.unwrap_or(0) > 1_000_000, "data moved");
}

#[test]
fn samples_a_hundred_idle_sockets_per_tick() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mut keep = Vec::new();
    for _ in 0..100 {
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        keep.push((c, s));
    }
    let mut tracer = Tracer::open(Selector::Dst(addr.ip(), Some(addr.port())), None).unwrap();
    let stop = AtomicBool::new(false);
    let mut per_tick = Vec::new();
    let sum = run(&mut tracer, Duration::from_millis(10), Some(Duration::from_millis(300)), &stop, |rows| {
        per_tick.push(rows.len());
        Ok(())
    })
    .unwrap();
    assert!(per_tick.iter().all(|&n| n == 100), "{per_tick:?}");
    assert_eq!(sum.sockets, 100);
    eprintln!("100 sockets at 100 Hz: {sum:?}");
}

#[test]
fn pid_selection_finds_this_process_sockets() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let c = TcpStream::connect(addr).unwrap();
    let (_s, _) = l.accept().unwrap();
    let mut tracer = Tracer::open(Selector::Pid(std::process::id()), None).unwrap();
    let mut rows = Vec::new();
    tracer.sample(0, Duration::ZERO, &mut rows).unwrap();
    let mine: Vec<_> =
        rows.iter().filter(|r| r.src.port() == addr.port() || r.dst.port() == addr.port()).collect();
    assert_eq!(mine.len(), 2, "both ends belong to this process: {rows:?}");
    assert!(mine.iter().any(|r| r.src == c.local_addr().unwrap()));
    // A process that does not exist is an error, not an empty trace.
    assert!(Tracer::open(Selector::Pid(u32::MAX - 1), None).is_err());
}

#[test]
fn hybrid_mode_requeries_known_sockets_and_discovers_new_ones() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mut keep = Vec::new();
    for _ in 0..10 {
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        keep.push((c, s));
    }
    let sel = Selector::Dst(addr.ip(), Some(addr.port()));
    let mut tracer = Tracer::open(sel, None).unwrap().hybrid(Duration::from_millis(100));
    let mut rows = Vec::new();
    let ms = Duration::from_millis;
    tracer.sample(0, ms(0), &mut rows).unwrap(); // dump
    assert_eq!(rows.len(), 10);
    tracer.sample(1, ms(10), &mut rows).unwrap(); // exact queries
    assert_eq!(rows.len(), 10);
    assert!(rows.iter().all(|r| r.cwnd > 0 && r.tick == 1));
    // One more connection: not seen until the next discovery dump.
    let c = TcpStream::connect(addr).unwrap();
    let (s, _) = l.accept().unwrap();
    keep.push((c, s));
    // One connection closed: it drops out at once.
    let (gone, _) = keep.remove(0);
    let gone_src = gone.local_addr().unwrap();
    drop(gone);
    std::thread::sleep(ms(20));
    tracer.sample(2, ms(20), &mut rows).unwrap();
    assert_eq!(rows.len(), 9, "closed socket dropped, new one not yet discovered");
    assert!(rows.iter().all(|r| r.src != gone_src));
    tracer.sample(10, ms(100), &mut rows).unwrap(); // discovery dump
    assert_eq!(rows.len(), 10);
}
