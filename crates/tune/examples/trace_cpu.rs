//! Bench: CPU used by the tracer sampling 100 idle loopback connections at
//! 100 Hz. Run with `cargo run --release -p tcpaccel-tune --example trace_cpu
//! [seconds]`. Prints the sampler thread's CPU time (schedstat, includes the
//! kernel's work on its dumps) as a share of one core.

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tcpaccel_tune::trace::{run, Selector, Tracer};

/// utime and stime of this thread in clock ticks.
fn user_sys() -> Result<(u64, u64), tcpaccel_sys::Error> {
    let t = tcpaccel_sys::procstat::read_task("thread-self")?;
    Ok((t.utime, t.stime))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secs: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    let mut keep = Vec::new();
    for _ in 0..100 {
        let c = TcpStream::connect(addr)?;
        let (s, _) = l.accept()?;
        keep.push((c, s));
    }
    let stop = AtomicBool::new(false);
    let dst = Selector::Dst(addr.ip(), Some(addr.port()));
    for (name, sel, hybrid) in [
        ("dump: --dst (100 client sockets)", dst.clone(), false),
        ("dump: --port (both ends, 200 sockets)", Selector::Port(addr.port()), false),
        ("dump: --port 1 (no socket matches: the kernel's table walk alone)", Selector::Port(1), false),
        ("hybrid (dump every 1 s): --dst (100 client sockets)", dst.clone(), true),
    ] {
        let (u0, s0) = user_sys()?;
        let mut tracer = Tracer::open(sel, None)?;
        if hybrid {
            tracer = tracer.hybrid(Duration::from_secs(1));
        }
        let mut rows = 0usize;
        let sum = run(&mut tracer, Duration::from_millis(10), Some(Duration::from_secs(secs)), &stop, |r| {
            rows += r.len();
            Ok(())
        })?;
        println!(
            "{name}: {} ticks ({} late), {} rows, {:.1} ms CPU over {:.2} s = {:.2}% of one core, {:.0} µs per tick",
            sum.ticks,
            sum.missed_ticks,
            rows,
            sum.cpu_s.unwrap_or(0.0) * 1e3,
            sum.wall_s,
            sum.cpu_share.unwrap_or(0.0) * 100.0,
            sum.cpu_s.unwrap_or(0.0) * 1e6 / sum.ticks.max(1) as f64
        );
        let (u1, s1) = user_sys()?;
        println!("    user {} ms, kernel {} ms (10 ms resolution)", (u1 - u0) * 10, (s1 - s0) * 10);
    }
    // The whole `tcpaccel trace --out FILE.csv` path: sampling plus CSV rows
    // written through a buffered file flushed every tick.
    for (name, hybrid) in [("dump + CSV file", false), ("hybrid + CSV file", true)] {
        let path = std::env::temp_dir().join(format!("tcpaccel-trace-cpu-{}.csv", std::process::id()));
        let file = std::io::BufWriter::new(std::fs::File::create(&path)?);
        let mut w = tcpaccel_tune::trace::RowWriter::new(file, tcpaccel_tune::trace::Format::Csv);
        let mut tracer = Tracer::open(dst.clone(), None)?;
        if hybrid {
            tracer = tracer.hybrid(Duration::from_secs(1));
        }
        let sum = run(&mut tracer, Duration::from_millis(10), Some(Duration::from_secs(secs)), &stop, |r| {
            w.write(r)?;
            w.flush()?;
            Ok(())
        })?;
        let _ = std::fs::remove_file(&path);
        println!(
            "{name}: {} ticks ({} late), {} rows, {:.2}% of one core",
            sum.ticks,
            sum.missed_ticks,
            sum.rows,
            sum.cpu_share.unwrap_or(0.0) * 100.0
        );
    }
    Ok(())
}
