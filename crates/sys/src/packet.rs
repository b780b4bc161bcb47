//! AF_PACKET raw sockets bound to one interface: the emulator's wire ends.
//!
//! A [`PacketSocket`] receives every frame arriving on its interface
//! (`ETH_P_ALL`), never the frames it (or anyone on this host) sends out of it
//! (`PACKET_IGNORE_OUTGOING`, Linux ≥ 4.20, with a `PACKET_OUTGOING` filter as
//! fallback), is non-blocking, receives in batches with `recvmmsg(2)` into
//! caller-provided buffers ([`RecvBatch`], allocated once), and sends single
//! frames or batches (`sendmmsg(2)`). Buffers are made large (`SO_RCVBUFFORCE`
//! as root) so a scheduling hiccup does not drop frames in the kernel.
//!
//! The socket lives in the network namespace of the thread that opened it,
//! whichever thread uses it later. This module decides nothing about timing;
//! [`PacketSocket::wait_readable`] only waits (ppoll) for the caller.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::sockopt::set_raw;
use crate::{Error, Result};

/// `SO_TIMESTAMPNS` (= `SCM_TIMESTAMPNS`) on the 64-bit architectures we run
/// on, where the "old" timespec already has a 64-bit `tv_sec`
/// (include/uapi/asm-generic/socket.h).
const SO_TIMESTAMPNS: i32 = 35;

/// Frames per `recvmmsg` call by default.
pub const DEFAULT_BATCH: usize = 64;

/// How to open a [`PacketSocket`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Requested receive buffer, bytes (the kernel doubles it for overhead).
    pub rcvbuf: usize,
    /// Requested send buffer, bytes.
    pub sndbuf: usize,
    /// Put the interface in promiscuous mode while the socket is open (needed
    /// on real NICs to see frames for other MACs; harmless on veth).
    pub promiscuous: bool,
    /// Send straight to the driver, skipping the qdisc (`PACKET_QDISC_BYPASS`):
    /// the emulator is the queue.
    pub qdisc_bypass: bool,
    /// Ask for the kernel's receive timestamp of every frame
    /// (`SO_TIMESTAMPNS`, CLOCK_REALTIME, taken when the frame entered the
    /// interface's receive path): see [`Frame::timestamp`].
    pub timestamps: bool,
    /// Also receive the frames this host sends (`PACKET_OUTGOING`), as a
    /// capture at a sender needs; the emulator leaves it off, it must not
    /// see its own sends. On `lo` every frame would then be seen twice.
    pub outgoing: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rcvbuf: 32 << 20,
            sndbuf: 8 << 20,
            promiscuous: true,
            qdisc_bypass: true,
            timestamps: true,
            outgoing: false,
        }
    }
}

/// A raw packet socket bound to one interface.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: i32,
    ifname: String,
    /// False when PACKET_IGNORE_OUTGOING was refused: filter by pkttype.
    ignores_outgoing: bool,
    /// [`Options::outgoing`]: outgoing frames are wanted.
    keeps_outgoing: bool,
}

/// Index of interface `ifname` in the calling thread's namespace (as the
/// `c_int` that `sockaddr_ll` holds).
pub fn ifindex(ifname: &str) -> Result<i32> {
    let i = crate::link::ifindex(ifname)?;
    i32::try_from(i).map_err(|_| Error::NoInterface { name: ifname.to_string() })
}

/// The socket buffer is full (or the device queue, ENOBUFS): try later.
fn is_full(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::ENOBUFS))
}

fn eth_p_all_be() -> u16 {
    (libc::ETH_P_ALL as u16).to_be()
}

impl PacketSocket {
    /// Opens a socket on `ifname` in the calling thread's network namespace.
    /// Needs CAP_NET_RAW ([`Error::Privilege`] otherwise); a missing interface
    /// gives [`Error::NoInterface`].
    pub fn open(ifname: &str, opts: &Options) -> Result<PacketSocket> {
        let ifindex = ifindex(ifname)?;
        // Protocol 0: receive nothing until bound to the interface, so no frame
        // of another interface slips in between socket() and bind().
        // SAFETY: plain socket(2); the result is checked and owned at once.
        let raw = unsafe {
            libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0)
        };
        if raw < 0 {
            return Err(Error::last(format!("socket(AF_PACKET) for {ifname}")));
        }
        // SAFETY: raw is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        let one: libc::c_int = 1;
        let ignores_outgoing = !opts.outgoing
            && set_raw(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one, "PACKET_IGNORE_OUTGOING")
                .is_ok();
        if opts.qdisc_bypass {
            // Best effort: older kernels lack it and the emulator works anyway.
            let _ = set_raw(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &one, "PACKET_QDISC_BYPASS");
        }
        if opts.timestamps {
            set_raw(&fd, libc::SOL_SOCKET, SO_TIMESTAMPNS, &one, &format!("SO_TIMESTAMPNS on {ifname}"))?;
        }
        set_buffer(&fd, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, opts.rcvbuf, ifname)?;
        set_buffer(&fd, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, opts.sndbuf, ifname)?;

        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = eth_p_all_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: sll is a valid sockaddr_ll and we pass its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ENODEV) => Error::NoInterface { name: ifname.to_string() },
                _ => Error::os(format!("bind AF_PACKET socket to {ifname}"), e),
            });
        }
        if opts.promiscuous {
            // SAFETY: packet_mreq is plain old data; all-zero is valid.
            let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
            mreq.mr_ifindex = ifindex;
            mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
            set_raw(
                &fd,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &mreq,
                &format!("PACKET_MR_PROMISC on {ifname}"),
            )?;
        }
        Ok(PacketSocket {
            fd,
            ifindex,
            ifname: ifname.to_string(),
            ignores_outgoing,
            keeps_outgoing: opts.outgoing,
        })
    }

    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// The hardware (MAC) address of the bound interface, as the kernel
    /// reports it in the socket's own address (`sll_addr` from getsockname).
    pub fn hwaddr(&self) -> Result<[u8; 6]> {
        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: sll is a writable sockaddr_ll and len holds its size; the
        // kernel writes at most len bytes and updates len.
        let rc = unsafe {
            libc::getsockname(self.fd.as_raw_fd(), (&mut sll as *mut libc::sockaddr_ll).cast(), &mut len)
        };
        if rc != 0 {
            return Err(Error::last(format!("getsockname of the packet socket on {}", self.ifname)));
        }
        if sll.sll_halen != 6 {
            return Err(Error::os(
                format!("hardware address of {}", self.ifname),
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{} bytes long, not an Ethernet MAC", sll.sll_halen),
                ),
            ));
        }
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&sll.sll_addr[..6]);
        Ok(mac)
    }

    /// Receives up to `batch.capacity()` frames without blocking; returns how
    /// many are now in `batch` (0 when none were waiting).
    pub fn recv_batch(&self, batch: &mut RecvBatch) -> Result<usize> {
        batch.prepare();
        let hdrs = batch.hdrs.as_mut_ptr();
        let vlen = batch.hdrs.len() as libc::c_uint;
        let n = crate::io::retry_eintr(|| {
            // SAFETY: prepare() pointed every header at this batch's own
            // buffers (iovecs, frame slots and address slots), which stay
            // alive and unmoved during the call; vlen is the number of headers.
            let n = unsafe {
                libc::recvmmsg(
                    self.fd.as_raw_fd(),
                    hdrs,
                    vlen,
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                    std::ptr::null_mut(),
                )
            };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(n)
            }
        });
        let n = match n {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                batch.n = 0;
                return Ok(0);
            }
            Err(e) => return Err(Error::os(format!("recvmmsg on {}", self.ifname), e)),
        };
        batch.n = n as usize;
        batch.parse_timestamps();
        batch.skip_outgoing = !self.ignores_outgoing && !self.keeps_outgoing;
        Ok(batch.n)
    }

    /// Sends one frame out of the interface. `Ok(false)` when the socket
    /// buffer is full (try again after [`PacketSocket::wait_writable`]).
    pub fn send(&self, frame: &[u8]) -> Result<bool> {
        let r = crate::io::retry_eintr(|| {
            // SAFETY: frame is a live slice and we pass its exact length.
            let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        });
        match r {
            Ok(()) => Ok(true),
            Err(e) if is_full(&e) => Ok(false),
            Err(e) => Err(Error::os(format!("send {} bytes on {}", frame.len(), self.ifname), e)),
        }
    }

    /// Sends up to 64 frames with one `sendmmsg`; returns how many went out
    /// (fewer when the socket buffer filled; 0 means try later).
    pub fn send_batch(&self, frames: &[&[u8]]) -> Result<usize> {
        const MAX: usize = 64;
        let n = frames.len().min(MAX);
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: iovec and mmsghdr are plain old data; all-zero is valid.
        let mut iov: [libc::iovec; MAX] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut hdrs: [libc::mmsghdr; MAX] = unsafe { std::mem::zeroed() };
        for i in 0..n {
            iov[i] =
                libc::iovec { iov_base: frames[i].as_ptr() as *mut libc::c_void, iov_len: frames[i].len() };
            hdrs[i].msg_hdr.msg_iov = &mut iov[i];
            hdrs[i].msg_hdr.msg_iovlen = 1;
        }
        let rc = crate::io::retry_eintr(|| {
            // SAFETY: each header points at one iovec describing a live frame
            // slice; the kernel only reads them during the call.
            let rc = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
            if rc < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(rc as usize)
            }
        });
        match rc {
            Ok(sent) => Ok(sent),
            Err(e) if is_full(&e) => Ok(0),
            Err(e) => Err(Error::os(format!("sendmmsg on {}", self.ifname), e)),
        }
    }

    /// Waits until a frame can be read or `timeout` passes (`None`: forever).
    /// Returns true when readable. Uses ppoll, so the timeout has ns
    /// resolution (subject to the thread's timer slack; see
    /// [`set_timer_slack`]).
    pub fn wait_readable(&self, timeout: Option<Duration>) -> Result<bool> {
        self.wait(libc::POLLIN, timeout)
    }

    /// Waits until the socket can take another frame or `timeout` passes.
    pub fn wait_writable(&self, timeout: Option<Duration>) -> Result<bool> {
        self.wait(libc::POLLOUT, timeout)
    }

    fn wait(&self, events: i16, timeout: Option<Duration>) -> Result<bool> {
        let op = || format!("ppoll on {}", self.ifname);
        let [revents] =
            crate::io::poll([(self.fd.as_fd(), events)], timeout).map_err(|e| Error::os(op(), e))?;
        if revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
            return Err(Error::Other {
                op: op(),
                msg: format!("socket error (revents {revents:#x}); is the interface gone?"),
            });
        }
        Ok(revents & events != 0)
    }

    /// Frames the kernel dropped because the receive buffer was full, since
    /// the previous call (`PACKET_STATISTICS` resets on read): (received, dropped).
    pub fn take_stats(&self) -> Result<(u64, u64)> {
        // SAFETY: tpacket_stats is plain old data.
        let mut st: libc::tpacket_stats = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: st and len are live and len is st's size.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(Error::last(format!("PACKET_STATISTICS on {}", self.ifname)));
        }
        Ok((st.tp_packets as u64, st.tp_drops as u64))
    }
}

fn set_buffer(fd: &OwnedFd, force: i32, plain: i32, bytes: usize, ifname: &str) -> Result<()> {
    let v: libc::c_int = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    // The FORCE variants ignore net.core.{r,w}mem_max but need CAP_NET_ADMIN;
    // without it, the plain option is capped by the sysctl.
    if set_raw(fd, libc::SOL_SOCKET, force, &v, "SO_*BUFFORCE").is_ok() {
        return Ok(());
    }
    set_raw(fd, libc::SOL_SOCKET, plain, &v, &format!("socket buffer size on {ifname}"))
}

/// One received frame in a [`RecvBatch`].
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// The bytes received (at most the slot size).
    pub data: &'a [u8],
    /// The frame's real length on the wire (without FCS); larger than
    /// `data.len()` when the frame was truncated to fit the slot.
    pub len: usize,
    /// `sll_pkttype`: host, broadcast, multicast, other host, outgoing.
    pub pkt_type: u8,
    /// When the kernel received the frame, as CLOCK_REALTIME since the Unix
    /// epoch, if the socket asked for timestamps.
    pub timestamp: Option<Duration>,
}

impl Frame<'_> {
    pub fn truncated(&self) -> bool {
        self.len > self.data.len()
    }
}

/// Preallocated buffers for [`PacketSocket::recv_batch`]: `capacity` slots of
/// `slot` bytes each, with their addresses and headers. No allocation after
/// creation.
pub struct RecvBatch {
    slot: usize,
    bufs: Vec<u8>,
    iov: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_ll>,
    hdrs: Vec<libc::mmsghdr>,
    /// Control-message space per slot, as u64 for cmsghdr alignment.
    ctrl: Vec<u64>,
    /// Receive timestamps (ns since the epoch; 0 = none) of the last batch.
    stamps: Vec<u64>,
    n: usize,
    skip_outgoing: bool,
}

/// u64 words of control space per slot: one cmsghdr (16) + timespec (16), with room.
const CTRL_WORDS: usize = 8;

// SAFETY: the raw pointers inside `iov` and `hdrs` only ever point into this
// struct's own heap buffers (re-pointed by `prepare` before every use), so
// moving the struct to another thread moves everything they refer to.
unsafe impl Send for RecvBatch {}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch").field("slot", &self.slot).field("capacity", &self.hdrs.len()).finish()
    }
}

impl RecvBatch {
    /// `capacity` frames of up to `slot` bytes each (a frame longer than the
    /// slot is reported truncated, with its real length).
    pub fn new(capacity: usize, slot: usize) -> RecvBatch {
        let capacity = capacity.max(1);
        let slot = slot.max(1);
        // SAFETY: iovec, sockaddr_ll and mmsghdr are plain old data; all-zero
        // is a valid value of each.
        let (iov, addrs, hdrs) = unsafe {
            (
                vec![std::mem::zeroed::<libc::iovec>(); capacity],
                vec![std::mem::zeroed::<libc::sockaddr_ll>(); capacity],
                vec![std::mem::zeroed::<libc::mmsghdr>(); capacity],
            )
        };
        RecvBatch {
            slot,
            bufs: vec![0; capacity * slot],
            iov,
            addrs,
            hdrs,
            ctrl: vec![0; capacity * CTRL_WORDS],
            stamps: vec![0; capacity],
            n: 0,
            skip_outgoing: false,
        }
    }

    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    pub fn slot_size(&self) -> usize {
        self.slot
    }

    /// Frames received by the last call (including skipped outgoing ones).
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn prepare(&mut self) {
        let base = self.bufs.as_mut_ptr();
        for i in 0..self.hdrs.len() {
            // SAFETY: i * slot is within bufs (capacity * slot bytes).
            let p = unsafe { base.add(i * self.slot) };
            self.iov[i] = libc::iovec { iov_base: p.cast(), iov_len: self.slot };
            let h = &mut self.hdrs[i];
            h.msg_len = 0;
            h.msg_hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_ll).cast();
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            h.msg_hdr.msg_iov = &mut self.iov[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = self.ctrl[i * CTRL_WORDS..].as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = CTRL_WORDS * 8;
            h.msg_hdr.msg_flags = 0;
        }
        self.n = 0;
        self.skip_outgoing = false;
    }

    /// Walks each received frame's control messages (as bytes, no pointer
    /// arithmetic) for an SCM_TIMESTAMPNS timespec.
    fn parse_timestamps(&mut self) {
        const HDR: usize = 16; // struct cmsghdr on LP64: size_t len, int level, int type
        for i in 0..self.n {
            self.stamps[i] = 0;
            #[allow(clippy::unnecessary_cast)] // msg_controllen is u32 on some libcs
            let len = (self.hdrs[i].msg_hdr.msg_controllen as usize).min(CTRL_WORDS * 8);
            let words = &self.ctrl[i * CTRL_WORDS..(i + 1) * CTRL_WORDS];
            let mut bytes = [0u8; CTRL_WORDS * 8];
            for (k, w) in words.iter().enumerate() {
                bytes[k * 8..k * 8 + 8].copy_from_slice(&w.to_ne_bytes());
            }
            let mut off = 0;
            while off + HDR <= len {
                let clen = u64::from_ne_bytes(bytes[off..off + 8].try_into().unwrap_or_default()) as usize;
                let level = i32::from_ne_bytes(bytes[off + 8..off + 12].try_into().unwrap_or_default());
                let ty = i32::from_ne_bytes(bytes[off + 12..off + 16].try_into().unwrap_or_default());
                if clen < HDR || off + clen > len {
                    break;
                }
                if level == libc::SOL_SOCKET && ty == SO_TIMESTAMPNS && clen >= HDR + 16 {
                    let sec = i64::from_ne_bytes(bytes[off + 16..off + 24].try_into().unwrap_or_default());
                    let nsec = i64::from_ne_bytes(bytes[off + 24..off + 32].try_into().unwrap_or_default());
                    if sec > 0 && (0..1_000_000_000).contains(&nsec) {
                        self.stamps[i] = sec as u64 * 1_000_000_000 + nsec as u64;
                    }
                }
                off += clen.div_ceil(8) * 8;
            }
        }
    }

    /// Frame `i` of the last receive, or `None` past the end or for a frame
    /// this host sent (only seen on kernels without PACKET_IGNORE_OUTGOING).
    pub fn frame(&self, i: usize) -> Option<Frame<'_>> {
        if i >= self.n {
            return None;
        }
        let pkt_type = self.addrs[i].sll_pkttype;
        if self.skip_outgoing && pkt_type == libc::PACKET_OUTGOING {
            return None;
        }
        // With MSG_TRUNC, msg_len is the real length even when truncated.
        let len = self.hdrs[i].msg_len as usize;
        let start = i * self.slot;
        let data = &self.bufs[start..start + len.min(self.slot)];
        let timestamp = (self.stamps[i] != 0).then(|| Duration::from_nanos(self.stamps[i]));
        Some(Frame { data, len, pkt_type, timestamp })
    }

    /// The frames of the last receive, in order (outgoing ones skipped).
    pub fn frames(&self) -> impl Iterator<Item = Frame<'_>> {
        (0..self.n).filter_map(move |i| self.frame(i))
    }
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`) so that its
/// timed waits wake within `ns` of the deadline instead of the default 50 µs.
/// Meant for the threads that drive packet sockets on a schedule.
pub fn set_timer_slack(ns: u64) -> Result<()> {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes a plain integer and affects only
    // the calling thread.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns.max(1) as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(Error::last("prctl(PR_SET_TIMERSLACK)"));
    }
    Ok(())
}

/// Gives the calling thread real-time FIFO priority `priority` (1..=99), so
/// that the TCP endpoints sharing the CPUs cannot delay the frames it times.
/// The kernel's RT throttling (`kernel.sched_rt_runtime_us`, 95% by default)
/// still leaves the rest of the system some CPU. Needs CAP_SYS_NICE.
pub fn set_realtime(priority: i32) -> Result<()> {
    let param = libc::sched_param { sched_priority: priority.clamp(1, 99) };
    // SAFETY: pid 0 is the calling thread; param is a live sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc != 0 {
        return Err(Error::last("sched_setscheduler(SCHED_FIFO)"));
    }
    Ok(())
}

/// Sets the nice value of the calling thread only (Linux applies
/// setpriority to a thread id). Lower is more CPU; below 0 needs CAP_SYS_NICE.
pub fn set_thread_nice(nice: i32) -> Result<()> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: plain integer arguments; affects only thread `tid`.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice.clamp(-20, 19)) };
    if rc != 0 {
        return Err(Error::last("setpriority(thread)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_interface_is_named() {
        match PacketSocket::open("tcpaccel-nope0", &Options::default()) {
            Err(Error::NoInterface { name }) => assert_eq!(name, "tcpaccel-nope0"),
            other => panic!("expected NoInterface, got {other:?}"),
        }
    }

    #[test]
    fn batch_starts_empty() {
        let b = RecvBatch::new(8, 2048);
        assert_eq!((b.capacity(), b.slot_size(), b.len()), (8, 2048, 0));
        assert!(b.frame(0).is_none());
    }

    /// Root only: two sockets on the ends of a veth pair in a fresh namespace;
    /// frames go across, a socket never sees what it sent, truncation is
    /// reported with the real length.
    #[test]
    fn root_veth_round_trip() {
        crate::testing::require_root();
        let t = crate::testing::TestNetns::one("pkttest");
        t.ip(t.name(), &["link", "add", "pa", "type", "veth", "peer", "name", "pb"]);
        t.ip(t.name(), &["link", "set", "pa", "address", "02:00:00:00:00:aa"]);
        t.ip(t.name(), &["link", "set", "pa", "up"]);
        t.ip(t.name(), &["link", "set", "pb", "up"]);
        let r = crate::netns::run_in(t.name(), || -> Result<()> {
            set_timer_slack(1)?;
            let a = PacketSocket::open("pa", &Options::default())?;
            let b = PacketSocket::open("pb", &Options::default())?;
            assert_eq!(a.hwaddr()?, [0x02, 0, 0, 0, 0, 0xaa], "the MAC set on pa");
            let mut batch = RecvBatch::new(16, 256);
            // Drain whatever the kernel sent on link-up (IPv6 ND and the like).
            std::thread::sleep(Duration::from_millis(50));
            while b.recv_batch(&mut batch)? > 0 {}
            while a.recv_batch(&mut batch)? > 0 {}

            let mut frame = vec![0u8; 300];
            frame[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xbb]);
            frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xaa]);
            frame[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental ethertype
            frame[14] = 7;
            assert!(a.send(&frame)?);
            assert!(a.send_batch(&[&frame[..100], &frame[..60]])? == 2);
            assert!(b.wait_readable(Some(Duration::from_millis(500)))?);
            std::thread::sleep(Duration::from_millis(20));
            let mut got = Vec::new();
            while b.recv_batch(&mut batch)? > 0 {
                for f in batch.frames() {
                    if f.data.len() >= 14 && f.data[12..14] == [0x88, 0xb5] {
                        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
                        let ts = f.timestamp.expect("kernel timestamp");
                        assert!(ts <= now && now - ts < Duration::from_secs(1), "{ts:?} vs {now:?}");
                        got.push((f.len, f.data.len(), f.truncated()));
                    }
                }
            }
            assert_eq!(got, vec![(300, 256, true), (100, 100, false), (60, 60, false)]);
            // The sender does not see its own frames.
            while a.recv_batch(&mut batch)? > 0 {
                assert!(batch.frames().all(|f| f.data.get(12..14) != Some(&[0x88, 0xb5][..])));
            }
            let (_, drops) = b.take_stats()?;
            assert_eq!(drops, 0);
            Ok(())
        })
        .expect("netns");
        r.expect("packet round trip");
    }
}
