//! RTT probe by TCP handshake time: the time `connect` takes to a listening
//! port is one round trip (SYN → SYN-ACK) plus local overhead. Used by
//! `relay plan --probe`. Blocking; no payload is sent.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Connects `samples` times to `addr` and returns each handshake time.
/// Stops at the first failure, returning it with the address.
pub fn handshake_rtts(
    addr: SocketAddr,
    samples: usize,
    timeout: Duration,
) -> Result<Vec<Duration>, ProbeError> {
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t0 = Instant::now();
        let s = TcpStream::connect_timeout(&addr, timeout).map_err(|source| ProbeError { addr, source })?;
        out.push(t0.elapsed());
        drop(s);
    }
    Ok(out)
}

#[derive(Debug, thiserror::Error)]
#[error("probe {addr}: {source}")]
pub struct ProbeError {
    pub addr: SocketAddr,
    pub source: std::io::Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_handshake_is_fast_and_refused_port_fails() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let rtts = handshake_rtts(addr, 3, Duration::from_secs(2)).unwrap();
        assert_eq!(rtts.len(), 3);
        assert!(rtts.iter().all(|r| *r < Duration::from_secs(1)));
        drop(l);
        assert!(handshake_rtts(addr, 1, Duration::from_secs(2)).is_err());
    }
}
