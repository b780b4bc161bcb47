//! Privilege checks. tcpaccel's lab needs root (or CAP_NET_ADMIN plus
//! CAP_NET_RAW and CAP_SYS_ADMIN for setns); we check the effective uid, which
//! is what CI and the README assume, and let the kernel's EPERM speak otherwise.

/// True when running with effective uid 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
