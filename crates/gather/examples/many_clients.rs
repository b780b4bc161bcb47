//! Load generator for measuring how many concurrent clients one gather
//! server holds: `cargo run -p tcpaccel-gather --example many_clients --
//! ADDR N RATE DURATION CLASS`. Runs N synthetic clients at RATE each for
//! DURATION in one process and prints how many completed with matching
//! digests. A measurement tool, not a test.

use std::time::Duration;
use tcpaccel_core::units::{parse_duration, Rate};
use tcpaccel_gather::{Limit, SendOptions, Source};

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    anyhow::ensure!(a.len() == 6, "usage: many_clients ADDR N RATE DURATION CLASS");
    let server = a[1].parse()?;
    let n: usize = a[2].parse()?;
    let rate = Rate::parse(&a[3])?;
    let dur = parse_duration(&a[4])?;
    let class = a[5].clone();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let mut hs = Vec::with_capacity(n);
        for i in 0..n {
            let opts = SendOptions {
                server,
                id: format!("load-{i}"),
                class: class.clone(),
                target: None,
                cc: None,
                timeout: tcpaccel_gather::client::DEFAULT_TIMEOUT,
                source: Source::Synthetic { rate: Some(rate), limit: Limit::Duration(dur), seed: i as u64 },
            };
            hs.push(tokio::spawn(tcpaccel_gather::send(opts)));
            // Spread the joins a little so the accept queue is not the test.
            if i % 50 == 49 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let (mut ok, mut bad) = (0usize, 0usize);
        let mut bytes = 0u64;
        for h in hs {
            match h.await {
                Ok(Ok(r)) if r.complete => {
                    ok += 1;
                    bytes += r.bytes;
                }
                Ok(Ok(r)) => {
                    bad += 1;
                    eprintln!("incomplete: {r:?}");
                }
                Ok(Err(e)) => {
                    bad += 1;
                    eprintln!("failed: {e}");
                }
                Err(e) => {
                    bad += 1;
                    eprintln!("task: {e}");
                }
            }
        }
        println!("{ok} clients complete, {bad} failed, {bytes} bytes confirmed");
        anyhow::Ok(())
    })
}
