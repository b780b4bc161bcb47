//! Signals to other processes: kill(2) by pid, and pidfd_send_signal(2)
//! through a [`Pidfd`] for a caller that must not hit a later process that
//! reused the pid.
//!
//! What it does not do: start or reap processes (std::process does), or
//! handle signals sent to this process ([`crate::signals`]).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::error::{Error, Result};

/// The signals tcpaccel sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: stop and clean up.
    Term,
    /// SIGKILL.
    Kill,
    /// SIGINT: as Ctrl-C would.
    Int,
}

impl Signal {
    fn raw(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
            Signal::Int => libc::SIGINT,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Signal::Term => "SIGTERM",
            Signal::Kill => "SIGKILL",
            Signal::Int => "SIGINT",
        }
    }
}

fn pid_t(pid: u32) -> Result<libc::pid_t> {
    match libc::pid_t::try_from(pid) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(Error::Other { op: format!("signal process {pid}"), msg: "not a process id".into() }),
    }
}

/// Sends `sig` to process `pid` (kill(2)). `Ok(false)` when there is no
/// such process (ESRCH): it already ended, which is what the caller wanted.
/// Only for a pid that cannot have been reused meanwhile (a child not yet
/// reaped, a pid just read); otherwise hold a [`Pidfd`].
pub fn signal(pid: u32, sig: Signal) -> Result<bool> {
    let p = pid_t(pid)?;
    // SAFETY: kill takes two integers; p > 0 names one process, never a group.
    if unsafe { libc::kill(p, sig.raw()) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        return Ok(false);
    }
    Err(Error::os(format!("kill({pid}, {})", sig.name()), e))
}

/// One process held open (pidfd_open(2)): signals through it reach that
/// process or nobody, never a later one with the same pid, and it becomes
/// readable when the process ends.
#[derive(Debug)]
pub struct Pidfd {
    fd: OwnedFd,
    pid: u32,
}

impl Pidfd {
    /// Opens process `pid`. `Ok(None)` when it does not exist.
    pub fn open(pid: u32) -> Result<Option<Pidfd>> {
        let p = pid_t(pid)?;
        // SAFETY: pidfd_open takes a pid and flags; no pointers.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, p as libc::c_long, 0 as libc::c_long) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ESRCH) {
                return Ok(None);
            }
            return Err(Error::os(format!("pidfd_open({pid})"), e));
        }
        // SAFETY: the kernel returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        Ok(Some(Pidfd { fd, pid }))
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `sig` (pidfd_send_signal(2)). `Ok(false)` when the process has
    /// ended.
    pub fn signal(&self, sig: Signal) -> Result<bool> {
        // SAFETY: the descriptor is open for the call; a null siginfo asks for
        // the same information kill(2) would give; flags 0.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd() as libc::c_long,
                sig.raw() as libc::c_long,
                std::ptr::null::<libc::siginfo_t>(),
                0 as libc::c_long,
            )
        };
        if rc == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ESRCH) {
            return Ok(false);
        }
        Err(Error::os(format!("pidfd_send_signal({}, {})", self.pid, sig.name()), e))
    }

    /// Waits up to `timeout` for the process to end; true when it has.
    pub fn wait_exit(&self, timeout: Duration) -> Result<bool> {
        let r = crate::io::poll([(self.fd.as_fd(), crate::io::READABLE)], Some(timeout))
            .map_err(|e| Error::os(format!("poll the pidfd of process {}", self.pid), e))?;
        Ok(r[0] != 0)
    }
}

impl AsFd for Pidfd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    #[test]
    fn term_reaches_the_child_and_its_pidfd_sees_the_end() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let fd = Pidfd::open(child.id()).unwrap().expect("the child exists");
        assert!(!fd.wait_exit(Duration::from_millis(20)).unwrap(), "still running");
        assert!(fd.signal(Signal::Term).unwrap());
        assert!(fd.wait_exit(Duration::from_secs(5)).unwrap(), "ended after SIGTERM");
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGTERM));
        // Reaped: the pidfd still names that process, which is gone.
        assert!(!fd.signal(Signal::Kill).unwrap());
    }

    #[test]
    fn kill_by_pid_and_a_process_that_is_gone() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        assert!(signal(child.id(), Signal::Kill).unwrap());
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
        // pid_max is at most 2^22: this pid names no process.
        assert!(!signal(1 << 23, Signal::Term).unwrap());
        assert!(Pidfd::open(1 << 23).unwrap().is_none());
        assert!(signal(0, Signal::Term).is_err(), "0 would signal the whole process group");
    }
}
