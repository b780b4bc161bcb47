//! RLIMIT_NOFILE: a service started by hand inherits a soft limit of 1024
//! descriptors, which a relay with two sockets and up to four pipe ends per
//! connection exhausts at a few hundred sessions, although the hard limit
//! (what an unprivileged process may raise itself to) is usually far higher.

use crate::{Error, Result};

/// Soft and hard RLIMIT_NOFILE of this process.
pub fn nofile() -> Result<(u64, u64)> {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
        return Err(Error::os("getrlimit(RLIMIT_NOFILE)", std::io::Error::last_os_error()));
    }
    Ok((l.rlim_cur, l.rlim_max))
}

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit
/// before and after. Nothing changes when they are already equal.
pub fn raise_nofile() -> Result<(u64, u64)> {
    let (soft, hard) = nofile()?;
    if soft >= hard {
        return Ok((soft, soft));
    }
    let l = libc::rlimit { rlim_cur: hard, rlim_max: hard };
    // SAFETY: setrlimit reads one rlimit from a struct that lives across the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) } != 0 {
        return Err(Error::os(format!("setrlimit(RLIMIT_NOFILE, {hard})"), std::io::Error::last_os_error()));
    }
    Ok((soft, hard))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let (soft_after, hard) = {
            raise_nofile().unwrap();
            nofile().unwrap()
        };
        assert_eq!(soft_after, hard);
        // A second call changes nothing.
        assert_eq!(raise_nofile().unwrap(), (hard, hard));
    }
}
