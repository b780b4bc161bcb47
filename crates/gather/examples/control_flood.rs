//! Measures a running gather server's memory under connections that each
//! send an unfinished control message (issue 26 item 1):
//! `cargo run -p tcpaccel-gather --example control_flood -- ADDR PID N MODE`.
//! MODE `before`: preface, then a 16 MiB length prefix and 64 KiB of its
//! body before any hello. MODE `after`: a complete hello (unique id), then a
//! 64 KiB length prefix and 60 KiB of its body. Holds the N connections
//! open for 3 s and prints the server's VmRSS (from /proc/PID/status) idle,
//! under the flood and after it, and how the connections were answered.
//! Loopback only; a measurement tool, not a test.

use std::time::Duration;
use tcpaccel_gather::proto::{self, Control, Kind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn rss_kib(pid: &str) -> anyhow::Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).ok_or_else(|| anyhow::anyhow!("no VmRSS"))?;
    Ok(line.split_whitespace().nth(1).unwrap_or("0").parse()?)
}

async fn flood_one(addr: std::net::SocketAddr, i: usize, after: bool) -> anyhow::Result<TcpStream> {
    let mut c = TcpStream::connect(addr).await?;
    c.write_all(&proto::encode_preface(proto::VERSION, Kind::Control)).await?;
    if after {
        let hello = Control::Hello { client_id: format!("flood-{i}"), class: "a".into(), target_bps: None };
        c.write_all(&proto::encode_control(&hello)).await?;
        c.write_all(&(64u32 << 10).to_be_bytes()).await?;
        c.write_all(&vec![b' '; 60 << 10]).await?;
    } else {
        c.write_all(&(16u32 << 20).to_be_bytes()).await?;
        c.write_all(&vec![b' '; 64 << 10]).await?;
    }
    Ok(c)
}

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    anyhow::ensure!(a.len() == 5, "usage: control_flood ADDR PID N before|after");
    let addr: std::net::SocketAddr = a[1].parse()?;
    anyhow::ensure!(addr.ip().is_loopback(), "loopback addresses only");
    let pid = a[2].clone();
    let n: usize = a[3].parse()?;
    let after = match a[4].as_str() {
        "before" => false,
        "after" => true,
        m => anyhow::bail!("mode {m:?}: before or after"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let idle = rss_kib(&pid)?;
        let mut conns = Vec::with_capacity(n);
        let mut failed = 0;
        for i in 0..n {
            match flood_one(addr, i, after).await {
                Ok(c) => conns.push(c),
                Err(_) => failed += 1,
            }
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        let peak = rss_kib(&pid)?;
        // How the server answered: an error message, a close, or nothing yet.
        let (mut errors, mut closed, mut silent) = (0, 0, 0);
        let mut codes = std::collections::BTreeMap::<String, usize>::new();
        for c in &mut conns {
            let mut buf = vec![0u8; 4096];
            let mut got = Vec::new();
            loop {
                match tokio::time::timeout(Duration::from_millis(20), c.read(&mut buf)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => break,
                    Ok(Ok(k)) => got.extend_from_slice(&buf[..k]),
                    Err(_) => break,
                }
            }
            // Skip a welcome, find an error.
            let mut rest = &got[..];
            let mut saw_error = false;
            while rest.len() >= 4 {
                let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
                if rest.len() < 4 + len {
                    break;
                }
                if let Ok(Control::Error { code, .. }) = proto::decode_control(&rest[4..4 + len]) {
                    *codes.entry(code.to_string()).or_default() += 1;
                    saw_error = true;
                }
                rest = &rest[4 + len..];
            }
            if saw_error {
                errors += 1;
            } else if got.is_empty() {
                silent += 1;
            } else {
                closed += 1;
            }
        }
        drop(conns);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let end = rss_kib(&pid)?;
        println!(
            "mode {} n {n}: server VmRSS idle {idle} KiB, under the flood {peak} KiB (+{} KiB), after {end} KiB; answered with an error {errors} {codes:?}, other {closed}, nothing {silent}, connect failures {failed}",
            a[4],
            peak.saturating_sub(idle)
        );
        Ok(())
    })
}
