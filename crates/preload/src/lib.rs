//! `libtcpaccel_preload.so`: the LD_PRELOAD shim behind `tcpaccel run`.
//!
//! It gives an unmodified program what a qdisc like PSPacer gave every
//! application without changing it: the TCP sockets the program connects or
//! accepts get the pacing rate, congestion control and buffer sizes chosen on
//! the `tcpaccel run` command line, and optionally become MPTCP sockets bound
//! to a lane's source address (like mptcpize).
//!
//! The rule above all: never break the program. Non-TCP sockets pass through
//! untouched; every option that fails is skipped (and logged to
//! `TCPACCEL_LOG` when set); `errno` of the real call is preserved; if MPTCP
//! cannot be had, the plain socket the program asked for is created.
//!
//! Configuration comes from the environment, set by `tcpaccel run`:
//! `TCPACCEL_PACE` (a pacing in the one grammar, `tcpaccel_core::pace_spec`:
//! `none`, `static:RATE`, `dynamic`, `dynamic:CEILING`, rates on the wire,
//! which the shim converts to `SO_MAX_PACING_RATE`'s payload bytes/s with
//! `Framing::ETHERNET_1500_TS`, as a socket's MSS is not known before it
//! connects; a value it cannot use is logged on every socket, never applied),
//! `TCPACCEL_CC`, `TCPACCEL_SNDBUF`, `TCPACCEL_RCVBUF` (bytes),
//! `TCPACCEL_MPTCP=1`, `TCPACCEL_BIND` (source IP), `TCPACCEL_LOG` (a file).
//!
//! Why this crate has `unsafe` although `tcpaccel-sys` owns syscalls: a shim
//! exporting `connect`/`accept` with the C ABI and finding the real ones with
//! `dlsym(RTLD_NEXT)` cannot be written without it, and it must not live in
//! `tcpaccel-sys`, whose symbols would then interpose the `tcpaccel` binary
//! itself. Socket options still go through `tcpaccel-sys`. Every `unsafe`
//! block says why it is sound.
//!
//! Dynamic pacing runs a background thread (started on the first dynamic
//! socket) that reads TCP_INFO every 5 ms and sets `SO_MAX_PACING_RATE` to
//! [PSPacer] eq. 1 (`cwnd·mss/RTT`, via `tcpaccel_core::pacing::DynamicPacer`).
//! The kernel's internal pacing keeps no sender-side queue of its own (the
//! segments wait in the socket, before RTT timing starts), so the local
//! queueing correction is zero here. After `fork` the child has no such
//! thread; its sockets keep the last rate set.

use libc::{c_int, sockaddr, socklen_t};
use std::ffi::CStr;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tcpaccel_core::pace_spec::PaceSpec;
use tcpaccel_core::pacing::{DynamicConfig, DynamicPacer, Framing, TcpSample};
use tcpaccel_core::units::Rate;
use tcpaccel_sys::sockopt;

/// What `TCPACCEL_PACE` asks for, in `SO_MAX_PACING_RATE`'s payload bytes/s.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ShimPace {
    #[default]
    None,
    Static(u64),
    /// The TCP_INFO loop, under an optional ceiling.
    Dynamic {
        ceiling: Option<u64>,
    },
}

/// Reads `TCPACCEL_PACE` with the one pacing grammar. The on-wire rates
/// become payload caps of full 1500-byte-MTU segments with timestamps (what
/// `tcpaccel run` always promised: the MSS is not known before connect).
fn parse_pace(v: &str) -> Result<ShimPace, String> {
    let cap = |r: Rate| Framing::ETHERNET_1500_TS.payload_bytes_per_sec(r).max(1);
    match PaceSpec::parse(v).map_err(|e| e.to_string())? {
        PaceSpec::None => Ok(ShimPace::None),
        PaceSpec::Static(r) => Ok(ShimPace::Static(cap(r))),
        PaceSpec::Dynamic { mode: Some(m), .. } => Err(format!(
            "pacing {v:?}: dynamic={} names one of the traffic tool's pacers; the shim's dynamic is its own TCP_INFO loop: write dynamic or dynamic:CEILING",
            m.name()
        )),
        PaceSpec::Dynamic { mode: None, ceiling } => Ok(ShimPace::Dynamic { ceiling: ceiling.map(cap) }),
    }
}

#[derive(Debug, Default, Clone)]
struct Config {
    pace: ShimPace,
    /// Why `TCPACCEL_PACE` was not used, logged on each socket.
    pace_refused: Option<String>,
    cc: Option<String>,
    sndbuf: Option<u64>,
    rcvbuf: Option<u64>,
    mptcp: bool,
    bind: Option<IpAddr>,
    log: Option<String>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn config() -> &'static Config {
    static CFG: OnceLock<Config> = OnceLock::new();
    CFG.get_or_init(|| {
        let mut c = Config { log: env("TCPACCEL_LOG"), ..Config::default() };
        match env("TCPACCEL_PACE").as_deref().map(parse_pace) {
            Some(Ok(p)) => c.pace = p,
            Some(Err(why)) => c.pace_refused = Some(why),
            None => {}
        }
        c.cc = env("TCPACCEL_CC");
        c.sndbuf = env("TCPACCEL_SNDBUF").and_then(|v| v.parse().ok());
        c.rcvbuf = env("TCPACCEL_RCVBUF").and_then(|v| v.parse().ok());
        c.mptcp = env("TCPACCEL_MPTCP").as_deref() == Some("1");
        c.bind = env("TCPACCEL_BIND").and_then(|v| v.parse().ok());
        c
    })
}

fn log(line: &str) {
    if let Some(path) = &config().log {
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "pid={} {line}", std::process::id());
        }
    }
}

/// The next definition of `name` after this library (the real libc one).
fn real(name: &CStr) -> Option<usize> {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name has no other
    // preconditions; a null result is handled.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    (!p.is_null()).then_some(p as usize)
}

macro_rules! real_fn {
    ($cache:ident, $name:literal, $ty:ty) => {{
        static $cache: OnceLock<Option<usize>> = OnceLock::new();
        // SAFETY: the symbol named here has exactly the C signature `$ty`
        // (POSIX socket API); transmuting its address to that fn type is sound.
        $cache.get_or_init(|| real($name)).map(|p| unsafe { std::mem::transmute::<usize, $ty>(p) })
    }};
}

type SocketFn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
type ConnectFn = unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int;
type AcceptFn = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
type Accept4Fn = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int;
type CloseFn = unsafe extern "C" fn(c_int) -> c_int;

fn errno() -> c_int {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

fn set_errno(e: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = e }
}

/// A TCP (or MPTCP) stream socket over IPv4/IPv6?
fn is_tcp(fd: c_int) -> bool {
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` is not -1 and is the program's own, open for the duration
    // of its connect/accept call that we are in; a closed one only makes
    // getsockopt fail with EBADF (read as "not TCP"). We never close it.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    sockopt::is_tcp(&b)
}

/// Applies the configured options to a TCP socket; returns what was applied, for the log.
fn apply(fd: c_int, before_connect: bool) -> String {
    let c = config();
    // SAFETY: `fd` is open for the duration of this call: we are inside the
    // program's connect/accept on it (or just after accept returned it).
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    let mut done = Vec::new();
    let mut note = |what: String, r: tcpaccel_sys::Result<()>| match r {
        Ok(()) => done.push(what),
        Err(e) => done.push(format!("{what}:failed({e})")),
    };
    if before_connect {
        if let Some(ip) = c.bind {
            let fam_ok = matches!(
                (sockopt::domain(&b), ip),
                (Ok(libc::AF_INET), IpAddr::V4(_)) | (Ok(libc::AF_INET6), IpAddr::V6(_))
            );
            if fam_ok && !sockopt::is_bound(&b).unwrap_or(false) {
                note(format!("bind={ip}"), sockopt::bind(&b, &SocketAddr::new(ip, 0)));
            }
        }
        if let Some(v) = c.sndbuf {
            note(format!("sndbuf_bytes={v}"), sockopt::set_send_buffer(&b, v));
        }
        if let Some(v) = c.rcvbuf {
            note(format!("rcvbuf_bytes={v}"), sockopt::set_recv_buffer(&b, v));
        }
    }
    if let Some(cc) = &c.cc {
        note(format!("cc={cc}"), sockopt::set_congestion(&b, cc));
    }
    match c.pace {
        ShimPace::None => {}
        // SO_MAX_PACING_RATE's unit (payload bytes/s) in the field's name.
        ShimPace::Static(r) => note(format!("pacing_bytes_per_s={r}"), sockopt::set_max_pacing_rate(&b, r)),
        ShimPace::Dynamic { ceiling } => {
            register_dynamic(fd, ceiling);
            done.push("pacing=dynamic".into());
        }
    }
    if let Some(why) = &c.pace_refused {
        done.push(format!("pacing=refused({why})"));
    }
    done.join(" ")
}

/// Dynamically paced sockets. `Vec::new` is const, so the registry needs no lazy init.
static PACERS: Mutex<Vec<(c_int, DynamicPacer)>> = Mutex::new(Vec::new());

fn register_dynamic(fd: c_int, ceiling: Option<u64>) {
    static THREAD: OnceLock<()> = OnceLock::new();
    THREAD.get_or_init(|| {
        let _ = std::thread::Builder::new().name("tcpaccel-pace".into()).spawn(dynamic_loop);
    });
    let cfg = DynamicConfig { ceiling: ceiling.map(Rate::from_bytes_per_sec), ..DynamicConfig::default() };
    if let Ok(mut p) = PACERS.lock() {
        p.retain(|(f, _)| *f != fd);
        p.push((fd, DynamicPacer::new(cfg)));
        PACED.store(p.len(), Ordering::Relaxed);
    }
}

fn dynamic_loop() {
    let start = std::time::Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(5));
        let now = tcpaccel_core::Instant::from_nanos(start.elapsed().as_nanos() as u64);
        let Ok(mut pacers) = PACERS.lock() else { return };
        pacers.retain_mut(|(fd, pacer)| {
            // SAFETY: fds leave this registry in our `close` before the real
            // close runs, under this same lock, so `fd` is still open here.
            let b = unsafe { BorrowedFd::borrow_raw(*fd) };
            let Ok(info) = tcpaccel_sys::tcpinfo::tcp_info(&b) else { return false };
            // Pace only ESTABLISHED (1); keep waiting through SYN_SENT (2) and
            // the CLOSE (7) of a socket not yet connected; forget the rest.
            if info.state != 1 {
                return matches!(info.state, 2 | 7);
            }
            let s = TcpSample {
                cwnd: info.snd_cwnd,
                mss: info.snd_mss,
                srtt: info.srtt(),
                min_rtt: info.min_rtt.map(|us| Duration::from_micros(us as u64)).unwrap_or_default(),
                local_queue: Duration::ZERO,
            };
            if let Some(rate) = pacer.on_sample(now, &s).rate {
                let _ = sockopt::set_max_pacing_rate(&b, rate.bytes_per_sec());
            }
            true
        });
    }
}

/// How many sockets are dynamically paced: programs that use none never take the lock in `close`.
static PACED: AtomicUsize = AtomicUsize::new(0);

fn forget(fd: c_int) {
    if PACED.load(Ordering::Relaxed) == 0 {
        return;
    }
    // try_lock with a bounded wait: a child forked while the pacing thread
    // held the lock must not hang in close(); it gives up and the stale entry
    // is dropped by the loop when tcp_info fails on the reused fd.
    for _ in 0..10_000 {
        match PACERS.try_lock() {
            Ok(mut p) => {
                p.retain(|(f, _)| *f != fd);
                PACED.store(p.len(), Ordering::Relaxed);
                return;
            }
            Err(std::sync::TryLockError::WouldBlock) => std::thread::yield_now(),
            Err(std::sync::TryLockError::Poisoned(_)) => return,
        }
    }
}

/// Interposed `socket(2)`: with `TCPACCEL_MPTCP=1`, TCP stream sockets become MPTCP.
///
/// # Safety
/// Called by C code with the `socket(2)` contract.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let Some(real_socket) = real_fn!(REAL_SOCKET, c"socket", SocketFn) else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    let stream = ty & 0xf == libc::SOCK_STREAM;
    let inet = domain == libc::AF_INET || domain == libc::AF_INET6;
    if config().mptcp && stream && inet && (protocol == 0 || protocol == libc::IPPROTO_TCP) {
        // SAFETY: same arguments as the caller's, protocol swapped for MPTCP.
        let fd = unsafe { real_socket(domain, ty, sockopt::IPPROTO_MPTCP) };
        if fd >= 0 {
            log(&format!("fd={fd} socket=mptcp"));
            return fd;
        }
        log(&format!("socket=mptcp:failed(errno {}) falling back to tcp", errno()));
    }
    // SAFETY: the caller's own arguments.
    unsafe { real_socket(domain, ty, protocol) }
}

/// Interposed `connect(2)`.
///
/// # Safety
/// Called by C code with the `connect(2)` contract.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let Some(real_connect) = real_fn!(REAL_CONNECT, c"connect", ConnectFn) else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    if is_tcp(fd) {
        let applied = apply(fd, true);
        log(&format!("fd={fd} connect {applied}"));
    }
    // SAFETY: the caller's own arguments; errno is the real call's.
    unsafe { real_connect(fd, addr, len) }
}

fn after_accept(fd: c_int) {
    if fd >= 0 && is_tcp(fd) {
        let saved = errno();
        let applied = apply(fd, false);
        log(&format!("fd={fd} accept {applied}"));
        set_errno(saved);
    }
}

/// Interposed `accept(2)`.
///
/// # Safety
/// Called by C code with the `accept(2)` contract.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    let Some(real_accept) = real_fn!(REAL_ACCEPT, c"accept", AcceptFn) else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: the caller's own arguments.
    let r = unsafe { real_accept(fd, addr, len) };
    after_accept(r);
    r
}

/// Interposed `accept4(2)`.
///
/// # Safety
/// Called by C code with the `accept4(2)` contract.
#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    let Some(real_accept4) = real_fn!(REAL_ACCEPT4, c"accept4", Accept4Fn) else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: the caller's own arguments.
    let r = unsafe { real_accept4(fd, addr, len, flags) };
    after_accept(r);
    r
}

/// Interposed `close(2)`: forgets a dynamically paced fd before it can be reused.
///
/// # Safety
/// Called by C code with the `close(2)` contract.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    let Some(real_close) = real_fn!(REAL_CLOSE, c"close", CloseFn) else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    forget(fd);
    // SAFETY: the caller's own argument.
    unsafe { real_close(fd) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pace_variable_takes_the_one_grammar_on_the_wire() {
        // 20 Mbit/s on the wire = 2.5 MB/s × 1448/1538 of payload.
        assert_eq!(parse_pace("static:20mbit"), Ok(ShimPace::Static(2_353_706)));
        assert_eq!(parse_pace("static:20Mbit/s"), Ok(ShimPace::Static(2_353_706)));
        assert_eq!(parse_pace("none"), Ok(ShimPace::None));
        assert_eq!(parse_pace("dynamic"), Ok(ShimPace::Dynamic { ceiling: None }));
        assert_eq!(parse_pace("dynamic:20mbit"), Ok(ShimPace::Dynamic { ceiling: Some(2_353_706) }));
        // The tiniest rate still paces (1 byte/s), never "0 = unlimited".
        assert_eq!(parse_pace("static:7bit/s"), Ok(ShimPace::Static(1)));
        // The old payload-bytes form is a bit/s rate now: never read as bytes.
        assert_eq!(parse_pace("static:1250000bit"), Ok(ShimPace::Static(147_106)));
        for bad in ["turbo", "static:0", "static:", "dynamic=kernel", "dynamic=loop:1gbit"] {
            let e = parse_pace(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn takes_what_the_other_front_ends_take_and_what_run_passes() {
        use tcpaccel_core::pace_spec::{Takes, FRONT_END_CASES};
        for (text, takes) in FRONT_END_CASES {
            let p = parse_pace(text);
            assert_eq!(p.is_ok(), *takes == Takes::All, "{text}: {p:?}");
            // `tcpaccel run` passes the parsed value's Display: the same pacing.
            if let Ok(spec) = PaceSpec::parse(text) {
                assert_eq!(parse_pace(&spec.to_string()).ok(), p.clone().ok(), "{text} as {spec}");
            }
        }
    }
}
