//! The crate's one EINTR policy and its one poll(2) wrapper.
//!
//! EINTR, the rule every module follows:
//! - a call that does work (connect, splice, send, receive, a netlink
//!   request) is run again: a signal that arrives meanwhile is not the
//!   call's failure ([`retry_eintr`]);
//! - a wait ([`poll`]) returns "nothing ready" instead, so that a caller
//!   waiting in a loop gets to look at its stop flags (SIGINT/SIGTERM set
//!   them, see [`crate::signals`]) before it waits again.
//!
//! What it does not do: read or write. Each socket type keeps its own calls
//! and wraps them in [`retry_eintr`].

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// Runs `call` again while it fails with EINTR.
pub fn retry_eintr<T>(mut call: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match call() {
            Err(e) if is_eintr(&e) => continue,
            r => return r,
        }
    }
}

/// True for EINTR (`ErrorKind::Interrupted`).
pub fn is_eintr(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINTR)
}

/// What to wait for on one descriptor.
pub const READABLE: i16 = libc::POLLIN;
pub const WRITABLE: i16 = libc::POLLOUT;

/// Waits until one of `fds` (descriptor, events) is ready or `timeout`
/// passes (`None`: forever) and returns each one's `revents` (POLLERR,
/// POLLHUP and POLLNVAL included whatever was asked). All zero when the
/// time passed or a signal interrupted the wait.
///
/// ppoll(2), so the timeout has nanosecond resolution (subject to the
/// thread's timer slack): the link emulator's wire threads wait for tens
/// of microseconds.
pub fn poll<const N: usize>(
    fds: [(BorrowedFd<'_>, i16); N],
    timeout: Option<Duration>,
) -> io::Result<[i16; N]> {
    let mut pfds = fds.map(|(fd, events)| libc::pollfd { fd: fd.as_raw_fd(), events, revents: 0 });
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: pfds is an array of N valid pollfds and ts a valid timespec
    // (or null), both alive across the call; the borrowed descriptors stay
    // open for it; a null sigmask leaves the signal mask unchanged.
    let rc = unsafe { libc::ppoll(pfds.as_mut_ptr(), N as libc::nfds_t, tsp, std::ptr::null()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return if is_eintr(&e) { Ok([0; N]) } else { Err(e) };
    }
    Ok(pfds.map(|p| p.revents))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;
    use std::time::Instant;

    #[test]
    fn poll_reports_each_descriptor_and_times_out_with_nothing_ready() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let (c, _d) = UnixStream::pair().unwrap();
        let t0 = Instant::now();
        let r =
            poll([(b.as_fd(), READABLE), (c.as_fd(), READABLE)], Some(Duration::from_millis(30))).unwrap();
        assert_eq!(r, [0, 0]);
        assert!(t0.elapsed() >= Duration::from_millis(25), "returned before the timeout");
        a.write_all(b"x").unwrap();
        let r = poll([(b.as_fd(), READABLE), (c.as_fd(), READABLE | WRITABLE)], None).unwrap();
        assert_eq!(r[0] & READABLE, READABLE);
        assert_eq!(r[1], WRITABLE, "c is writable, not readable");
        drop(a);
        let r = poll([(b.as_fd(), READABLE)], Some(Duration::ZERO)).unwrap();
        assert_ne!(r[0] & libc::POLLHUP, 0, "the peer's close shows as POLLHUP");
    }

    #[test]
    fn retry_eintr_retries_only_eintr() {
        let mut n = 0;
        let r = retry_eintr(|| {
            n += 1;
            if n < 3 {
                Err(io::Error::from_raw_os_error(libc::EINTR))
            } else {
                Ok(n)
            }
        });
        assert_eq!(r.unwrap(), 3);
        let mut m = 0;
        let r: io::Result<()> = retry_eintr(|| {
            m += 1;
            Err(io::Error::from_raw_os_error(libc::EAGAIN))
        });
        assert_eq!((r.unwrap_err().raw_os_error(), m), (Some(libc::EAGAIN), 1));
    }
}
