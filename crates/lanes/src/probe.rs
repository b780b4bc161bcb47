//! Light active probes of a lane pair: the time of one TCP handshake from a
//! lane's local address to the peer (SYN out, SYN-ACK or RST back).
//!
//! What it is: a worker thread that takes probe requests and answers with
//! the measured time, so the daemon's loop never blocks on a slow path. A
//! refused connection (RST) is as good a round trip as an accepted one, so
//! the probe port need not be open. What it is not: a bandwidth test — one
//! small packet each way, at most one per lane pair per `probe.interval`.
//!
//! The worker inherits the network namespace of the thread that spawns it.

use std::net::{IpAddr, SocketAddr};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

/// One finished probe: the lane pair and the handshake time (`None` when it
/// failed or timed out).
pub type ProbeResult = ((IpAddr, IpAddr), Option<Duration>);

/// Times one handshake from `local` to `remote`.
pub fn handshake_rtt(local: IpAddr, remote: SocketAddr, timeout: Duration) -> Option<Duration> {
    match tcpaccel_sys::probe::handshake(Some(local), remote, timeout) {
        Ok(h) => Some(h.rtt),
        Err(e) => {
            tracing::debug!("probe {local} -> {remote}: {e}");
            None
        }
    }
}

/// The probe worker: send pairs in, read results out.
pub struct Prober {
    tx: Sender<(IpAddr, IpAddr)>,
    rx: Receiver<ProbeResult>,
    worker: std::thread::JoinHandle<f64>,
}

impl Prober {
    /// Spawns the worker; probes go to `port` on the peer address.
    pub fn spawn(port: u16, timeout: Duration) -> std::io::Result<Prober> {
        let (tx, req_rx) = channel::<(IpAddr, IpAddr)>();
        let (res_tx, rx) = channel::<ProbeResult>();
        let worker = std::thread::Builder::new().name("lanes-probe".into()).spawn(move || {
            let cpu0 = thread_cpu_s();
            for (local, remote) in req_rx {
                let rtt = handshake_rtt(local, SocketAddr::new(remote, port), timeout);
                if res_tx.send(((local, remote), rtt)).is_err() {
                    break;
                }
            }
            thread_cpu_s() - cpu0
        })?;
        Ok(Prober { tx, rx, worker })
    }

    /// Stops the worker (after the probe in progress) and returns the CPU
    /// time it used, s (NaN where /proc cannot say).
    pub fn stop(self) -> f64 {
        drop(self.tx);
        self.worker.join().unwrap_or(f64::NAN)
    }

    /// Queues a probe of a lane pair.
    pub fn request(&self, pair: (IpAddr, IpAddr)) {
        // The worker only stops when this side is dropped.
        let _ = self.tx.send(pair);
    }

    /// Results that arrived since the last call.
    pub fn results(&self) -> Vec<ProbeResult> {
        self.rx.try_iter().collect()
    }
}

/// CPU time (user + system) the calling thread has used, in seconds, from
/// /proc/thread-self/stat (fields 14 and 15, in clock ticks of 1/100 s:
/// Linux's USER_HZ is 100 on every architecture it exports to user space).
/// NaN where the file cannot be read.
pub fn thread_cpu_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/thread-self/stat") else { return f64::NAN };
    // The command name (field 2) may hold spaces; fields count from after it.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return f64::NAN };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    // After ")": field 3 (state) is index 0, so utime (14) is 11, stime (15) 12.
    match (tick(11), tick(12)) {
        (Some(u), Some(s)) => (u + s) as f64 / 100.0,
        _ => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn times_an_accepted_and_a_refused_handshake_on_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let open = l.local_addr().unwrap();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let rtt = handshake_rtt(lo, open, Duration::from_secs(1)).expect("accepted");
        assert!(rtt < Duration::from_secs(1));
        drop(l);
        // The port just closed: a RST answers, which still times the path.
        assert!(handshake_rtt(lo, open, Duration::from_secs(1)).is_some());
        // A local address we do not have cannot probe.
        assert!(handshake_rtt("192.0.2.1".parse().unwrap(), open, Duration::from_secs(1)).is_none());
        let p = Prober::spawn(open.port(), Duration::from_secs(1)).unwrap();
        p.request((lo, lo));
        let mut got = Vec::new();
        for _ in 0..200 {
            got = p.results();
            if !got.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(got.len(), 1);
        assert!(got[0].1.is_some());
    }
}
