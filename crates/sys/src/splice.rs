//! Pipes and `splice(2)` for zero-copy relaying between two sockets, plus the
//! one socket call a relay needs besides options: `shutdown(SHUT_WR)`.
//!
//! A relay moves bytes socket → pipe → socket; the pages never reach user
//! space. All calls here are non-blocking (`SPLICE_F_NONBLOCK`, `O_NONBLOCK`
//! pipes) so an async runtime can drive them by readiness. `EAGAIN` comes back
//! as `Ok(None)`: note that it means "no data" when splicing from a socket
//! into an empty pipe, but "pipe full" or "socket buffer full" otherwise — the
//! caller must know which (see the relay's data path).
//!
//! This module does not decide when to splice or how big a pipe should be; it
//! only wraps the calls. Socket options (SO_LINGER, buffers) live in `sockopt`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::{Error, Result};

/// One pipe used as the in-kernel buffer of one relay direction.
#[derive(Debug)]
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
}

/// The default pipe capacity on Linux (16 pages), used when the size cannot be read.
const DEFAULT_PIPE_CAPACITY: usize = 64 * 1024;

impl Pipe {
    /// Creates a non-blocking, close-on-exec pipe and asks the kernel for
    /// `want` bytes of capacity (`F_SETPIPE_SZ`). If the kernel refuses the
    /// size (above `/proc/sys/fs/pipe-max-size` for an unprivileged user, or
    /// the per-user pipe quota is spent), the pipe keeps its default size;
    /// [`Pipe::capacity`] tells what was obtained.
    pub fn new(want: usize) -> Result<Pipe> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is a valid array of two c_ints that pipe2 fills in.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if rc != 0 {
            return Err(Error::last("pipe2"));
        }
        // SAFETY: pipe2 succeeded, so both descriptors are open and owned by us
        // alone; wrapping them makes sure they are closed exactly once.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let mut capacity = DEFAULT_PIPE_CAPACITY;
        if want > 0 {
            let want_c = libc::c_int::try_from(want).unwrap_or(libc::c_int::MAX);
            // SAFETY: fcntl on a descriptor we own, with an integer argument.
            let got = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, want_c) };
            if got > 0 {
                capacity = got as usize;
            } else {
                // SAFETY: fcntl on a descriptor we own, no argument.
                let cur = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
                if cur > 0 {
                    capacity = cur as usize;
                }
            }
        }
        Ok(Pipe { read, write, capacity })
    }

    /// Bytes the pipe can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Moves up to `len` bytes from socket `from` into the pipe.
    ///
    /// `Ok(Some(0))` is end of file; `Ok(None)` is `EAGAIN` (no data in the
    /// socket, or no room in the pipe).
    pub fn fill_from(&self, from: BorrowedFd<'_>, len: usize) -> io::Result<Option<usize>> {
        splice_raw(from.as_raw_fd(), self.write.as_raw_fd(), len)
    }

    /// Moves up to `len` bytes from the pipe into socket `to`.
    ///
    /// `Ok(None)` is `EAGAIN`: the socket's send buffer is full (or the pipe is empty).
    pub fn drain_to(&self, to: BorrowedFd<'_>, len: usize) -> io::Result<Option<usize>> {
        splice_raw(self.read.as_raw_fd(), to.as_raw_fd(), len)
    }
}

fn splice_raw(from: libc::c_int, to: libc::c_int, len: usize) -> io::Result<Option<usize>> {
    let r = crate::io::retry_eintr(|| {
        // SAFETY: both descriptors are open for the duration of the call (the
        // caller holds a BorrowedFd or the Pipe); null offsets are required for
        // pipes and sockets; no memory is passed.
        let n = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                len,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        };
        if n >= 0 {
            Ok(n as usize)
        } else {
            Err(io::Error::last_os_error())
        }
    });
    match r {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `shutdown(fd, SHUT_WR)`: sends FIN after the queued data, keeps reading.
///
/// `ENOTCONN` (the peer is already gone) is not an error for a relay.
pub fn shutdown_write(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: shutdown on an open descriptor borrowed for the call.
    let rc = unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_WR) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENOTCONN) {
        Ok(())
    } else {
        Err(e)
    }
}

/// True for errors that say splice cannot be used between these descriptors
/// at all (old kernel, a socket type without splice support), as opposed to a
/// connection error. A relay falls back to copying on these.
pub fn is_unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    #[test]
    fn pipe_has_a_capacity_of_at_least_one_page() {
        let p = Pipe::new(256 * 1024).expect("pipe2");
        assert!(p.capacity() >= 4096);
    }

    #[test]
    fn splices_between_loopback_sockets_and_reports_eof() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let l2 = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l2.local_addr().unwrap()).unwrap();
        let (mut d, _) = l2.accept().unwrap();
        let pipe = Pipe::new(0).unwrap();

        // Nothing sent yet: EAGAIN means "no data", reported as None.
        b.set_nonblocking(true).unwrap();
        assert_eq!(pipe.fill_from(b.as_fd(), 65536).unwrap(), None);

        a.write_all(b"hello splice").unwrap();
        a.shutdown(std::net::Shutdown::Write).unwrap();
        let mut moved = 0;
        let mut eof = false;
        for _ in 0..1000 {
            match pipe.fill_from(b.as_fd(), 65536).unwrap() {
                Some(0) => {
                    eof = true;
                    break;
                }
                Some(n) => moved += n,
                None => std::thread::sleep(std::time::Duration::from_millis(2)),
            }
        }
        assert!(eof);
        assert_eq!(moved, 12);
        assert_eq!(pipe.drain_to(c.as_fd(), 65536).unwrap(), Some(12));
        shutdown_write(c.as_fd()).unwrap();
        let mut got = Vec::new();
        d.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"hello splice");
    }
}
