//! The handshake-RTT probe: the time one TCP handshake takes (SYN out,
//! SYN-ACK or RST back) is one round trip plus local overhead. No payload
//! is sent. Used by the lanes daemon (per lane pair, from a lane's local
//! address), `relay plan --probe` and the doctor's target check.
//!
//! A refused connection (RST) times the path as well as an accepted one; a
//! caller that needs a listening port asks for [`Handshake::accepted`].

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::sockopt::{self, Family};

/// One timed handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handshake {
    /// From `connect` to the answer.
    pub rtt: Duration,
    /// The peer answered with a RST (nothing listens on the port).
    pub refused: bool,
    /// The address probed.
    pub remote: SocketAddr,
}

impl Handshake {
    /// The round trip if the port accepted the connection, else an error
    /// naming the address ("connection refused").
    pub fn accepted(self) -> Result<Duration> {
        if self.refused {
            return Err(Error::os(
                format!("connect({})", self.remote),
                std::io::Error::from_raw_os_error(libc::ECONNREFUSED),
            ));
        }
        Ok(self.rtt)
    }
}

/// Times one handshake to `remote`, from `local` if given (a lane's own
/// address), waiting at most `timeout`. Blocking. The socket is closed at once.
pub fn handshake(local: Option<IpAddr>, remote: SocketAddr, timeout: Duration) -> Result<Handshake> {
    let fd = sockopt::tcp_socket(Family::of(&remote))?;
    if let Some(local) = local {
        sockopt::bind(&fd, &SocketAddr::new(local, 0))?;
    }
    let stream = std::net::TcpStream::from(fd);
    // SO_SNDTIMEO bounds a blocking connect.
    stream.set_write_timeout(Some(timeout)).map_err(|e| Error::os("setsockopt(SO_SNDTIMEO)", e))?;
    let t0 = Instant::now();
    let r = sockopt::connect(&stream.as_fd(), &remote);
    let rtt = t0.elapsed();
    match r {
        Ok(()) => Ok(Handshake { rtt, refused: false, remote }),
        Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::ECONNREFUSED) => {
            Ok(Handshake { rtt, refused: true, remote })
        }
        // A connect that SO_SNDTIMEO cut short reports EINPROGRESS.
        Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::EINPROGRESS) => Err(Error::Io {
            op: format!("connect({remote}): no answer within {timeout:?}"),
            source: std::io::Error::from(std::io::ErrorKind::TimedOut),
        }),
        Err(e) => Err(e),
    }
}

/// `samples` handshakes to a listening `remote`, one after another; stops at
/// the first failure (a refused port included), naming the address.
pub fn handshake_rtts(remote: SocketAddr, samples: usize, timeout: Duration) -> Result<Vec<Duration>> {
    (0..samples).map(|_| handshake(None, remote, timeout)?.accepted()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn times_accepted_and_refused_handshakes_on_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let open = l.local_addr().unwrap();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let h = handshake(Some(lo), open, Duration::from_secs(1)).expect("accepted");
        assert!(!h.refused && h.rtt < Duration::from_secs(1), "{h:?}");
        let rtts = handshake_rtts(open, 3, Duration::from_secs(2)).unwrap();
        assert_eq!(rtts.len(), 3);
        assert!(rtts.iter().all(|r| *r < Duration::from_secs(1)));
        drop(l);
        // The port just closed: a RST answers, which still times the path,
        // but is no accepted connection.
        let h = handshake(Some(lo), open, Duration::from_secs(1)).expect("refused still times");
        assert!(h.refused, "{h:?}");
        let e = h.accepted().unwrap_err().to_string();
        assert!(e.contains(&open.to_string()) && e.contains("refused"), "{e}");
        assert!(handshake_rtts(open, 1, Duration::from_secs(2)).is_err());
        // A local address we do not have cannot probe.
        assert!(handshake(Some("192.0.2.1".parse().unwrap()), open, Duration::from_secs(1)).is_err());
    }
}
