//! `struct tcp_info`, parsed by length.
//!
//! What it is: a decoder for the kernel's `struct tcp_info`
//! (include/uapi/linux/tcp.h) that reads fields by their byte offsets and
//! accepts any length from the 104-byte base structure upwards. Fields
//! added after the base structure are `Option`s, `Some` only when the
//! buffer the kernel returned reaches them; bytes beyond the last field
//! known here are ignored, so newer kernels keep working. The same parser
//! serves `getsockopt(TCP_INFO)` ([`tcp_info`]) and the `INET_DIAG_INFO`
//! attribute of sock_diag dumps.
//!
//! What it is not: no interpretation (no "is this flow cwnd-limited"), no
//! unit conversion beyond naming the kernel's units in the docs: times are
//! microseconds unless noted, rates are bytes per second.

use std::os::fd::AsFd;

use serde::Serialize;

use crate::error::{Error, Result};

/// Size of the oldest `struct tcp_info` (up to `tcpi_total_retrans`).
pub const BASE_LEN: usize = 104;
/// Size of the structure as far as this parser decodes it (up to
/// `tcpi_received_ce_bytes`, the AccECN counters of Linux 6.18). The
/// 32-bit word after it (280-byte structure) packs ECN mode and AccECN
/// failure flags whose layout changed while the series was merged; it is
/// left undecoded.
pub const KNOWN_LEN: usize = 276;
/// Buffer offered to the kernel: comfortably above [`KNOWN_LEN`] so that a
/// newer kernel's longer structure is returned whole (and then ignored).
const QUERY_LEN: usize = 512;
/// `TCP_INFO` (linux/tcp.h).
const TCP_INFO: libc::c_int = 11;

/// Why kernel bytes could not be decoded (shared with the netlink layer):
/// here a buffer shorter than the base structure
/// ([`ParseError::Truncated`]), or a subflow address of another family.
pub use crate::netlink::ParseError;

/// One snapshot of a TCP socket's state as the kernel reports it.
///
/// Times are in microseconds (`rto`, `ato`, `rtt`, `rttvar`, `rcv_rtt`,
/// `min_rtt`, `busy_time`, `rwnd_limited`, `sndbuf_limited`) except the
/// `last_*` fields and `total_rto_time`, which are milliseconds. Rates are
/// bytes per second. `snd_cwnd` and `snd_ssthresh` count segments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TcpInfo {
    /// How many bytes the kernel returned (not a kernel field).
    pub len: usize,
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub delivery_rate_app_limited: bool,
    pub fastopen_client_fail: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    // ---- beyond the base structure, present by length ----
    pub pacing_rate: Option<u64>,
    pub max_pacing_rate: Option<u64>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub segs_out: Option<u32>,
    pub segs_in: Option<u32>,
    pub notsent_bytes: Option<u32>,
    pub min_rtt: Option<u32>,
    pub data_segs_in: Option<u32>,
    pub data_segs_out: Option<u32>,
    pub delivery_rate: Option<u64>,
    pub busy_time: Option<u64>,
    pub rwnd_limited: Option<u64>,
    pub sndbuf_limited: Option<u64>,
    pub delivered: Option<u32>,
    pub delivered_ce: Option<u32>,
    pub bytes_sent: Option<u64>,
    pub bytes_retrans: Option<u64>,
    pub dsack_dups: Option<u32>,
    pub reord_seen: Option<u32>,
    pub rcv_ooopack: Option<u32>,
    pub snd_wnd: Option<u32>,
    pub rcv_wnd: Option<u32>,
    pub rehash: Option<u32>,
    pub total_rto: Option<u16>,
    pub total_rto_recoveries: Option<u16>,
    pub total_rto_time: Option<u32>,
    /// CE-marked segments received (AccECN series, 6.18).
    pub received_ce: Option<u32>,
    pub delivered_e1_bytes: Option<u32>,
    pub delivered_e0_bytes: Option<u32>,
    pub delivered_ce_bytes: Option<u32>,
    pub received_e1_bytes: Option<u32>,
    pub received_e0_bytes: Option<u32>,
    pub received_ce_bytes: Option<u32>,
}

/// Reads native-endian integers at fixed offsets of a kernel buffer.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn bytes<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        self.0.get(off..off + N)?.try_into().ok()
    }
    fn u8(&self, off: usize) -> u8 {
        self.0.get(off).copied().unwrap_or(0)
    }
    fn u16(&self, off: usize) -> Option<u16> {
        self.bytes(off).map(u16::from_ne_bytes)
    }
    fn u32(&self, off: usize) -> Option<u32> {
        self.bytes(off).map(u32::from_ne_bytes)
    }
    fn u64(&self, off: usize) -> Option<u64> {
        self.bytes(off).map(u64::from_ne_bytes)
    }
    /// A base-structure field: the length was checked up front.
    fn base32(&self, off: usize) -> u32 {
        self.u32(off).unwrap_or(0)
    }
}

impl TcpInfo {
    /// Parses a `struct tcp_info` of any length ≥ [`BASE_LEN`]. Offsets follow
    /// include/uapi/linux/tcp.h; integers are in host byte order. Shorter
    /// than the base is [`ParseError::Truncated`]; a field past the end of a
    /// longer buffer is `None` (even when the buffer ends inside it); bytes
    /// past [`KNOWN_LEN`] are ignored.
    pub fn parse(buf: &[u8]) -> std::result::Result<TcpInfo, ParseError> {
        if buf.len() < BASE_LEN {
            return Err(ParseError::Truncated { what: "tcp_info", at: 0, need: BASE_LEN, have: buf.len() });
        }
        let f = Fields(buf);
        // Byte 6 holds two 4-bit fields and byte 7 two flags. With the
        // little-endian bitfield layout (x86, arm64) the first declared field
        // takes the low bits; big-endian ABIs allocate from the high bits.
        let (wscale, flags) = (f.u8(6), f.u8(7));
        let (snd_wscale, rcv_wscale, app_limited, fo_fail) = if cfg!(target_endian = "little") {
            (wscale & 0x0f, wscale >> 4, flags & 0x01 != 0, (flags >> 1) & 0x03)
        } else {
            (wscale >> 4, wscale & 0x0f, flags & 0x80 != 0, (flags >> 5) & 0x03)
        };
        Ok(TcpInfo {
            len: buf.len(),
            state: f.u8(0),
            ca_state: f.u8(1),
            retransmits: f.u8(2),
            probes: f.u8(3),
            backoff: f.u8(4),
            options: f.u8(5),
            snd_wscale,
            rcv_wscale,
            delivery_rate_app_limited: app_limited,
            fastopen_client_fail: fo_fail,
            rto: f.base32(8),
            ato: f.base32(12),
            snd_mss: f.base32(16),
            rcv_mss: f.base32(20),
            unacked: f.base32(24),
            sacked: f.base32(28),
            lost: f.base32(32),
            retrans: f.base32(36),
            fackets: f.base32(40),
            last_data_sent: f.base32(44),
            last_ack_sent: f.base32(48),
            last_data_recv: f.base32(52),
            last_ack_recv: f.base32(56),
            pmtu: f.base32(60),
            rcv_ssthresh: f.base32(64),
            rtt: f.base32(68),
            rttvar: f.base32(72),
            snd_ssthresh: f.base32(76),
            snd_cwnd: f.base32(80),
            advmss: f.base32(84),
            reordering: f.base32(88),
            rcv_rtt: f.base32(92),
            rcv_space: f.base32(96),
            total_retrans: f.base32(100),
            pacing_rate: f.u64(104),
            max_pacing_rate: f.u64(112),
            bytes_acked: f.u64(120),
            bytes_received: f.u64(128),
            segs_out: f.u32(136),
            segs_in: f.u32(140),
            notsent_bytes: f.u32(144),
            min_rtt: f.u32(148),
            data_segs_in: f.u32(152),
            data_segs_out: f.u32(156),
            delivery_rate: f.u64(160),
            busy_time: f.u64(168),
            rwnd_limited: f.u64(176),
            sndbuf_limited: f.u64(184),
            delivered: f.u32(192),
            delivered_ce: f.u32(196),
            bytes_sent: f.u64(200),
            bytes_retrans: f.u64(208),
            dsack_dups: f.u32(216),
            reord_seen: f.u32(220),
            rcv_ooopack: f.u32(224),
            snd_wnd: f.u32(228),
            rcv_wnd: f.u32(232),
            rehash: f.u32(236),
            total_rto: f.u16(240),
            total_rto_recoveries: f.u16(242),
            total_rto_time: f.u32(244),
            received_ce: f.u32(248),
            delivered_e1_bytes: f.u32(252),
            delivered_e0_bytes: f.u32(256),
            delivered_ce_bytes: f.u32(260),
            received_e1_bytes: f.u32(264),
            received_e0_bytes: f.u32(268),
            received_ce_bytes: f.u32(272),
        })
    }

    /// Smoothed RTT.
    pub fn srtt(&self) -> std::time::Duration {
        std::time::Duration::from_micros(u64::from(self.rtt))
    }

    /// The TCP state's name (include/net/tcp_states.h).
    pub fn state_name(&self) -> &'static str {
        match self.state {
            1 => "ESTABLISHED",
            2 => "SYN_SENT",
            3 => "SYN_RECV",
            4 => "FIN_WAIT1",
            5 => "FIN_WAIT2",
            6 => "TIME_WAIT",
            7 => "CLOSE",
            8 => "CLOSE_WAIT",
            9 => "LAST_ACK",
            10 => "LISTEN",
            11 => "CLOSING",
            12 => "NEW_SYN_RECV",
            _ => "UNKNOWN",
        }
    }

    /// The congestion-avoidance state's name (`enum tcp_ca_state`).
    pub fn ca_state_name(&self) -> &'static str {
        match self.ca_state {
            0 => "Open",
            1 => "Disorder",
            2 => "CWR",
            3 => "Recovery",
            4 => "Loss",
            _ => "Unknown",
        }
    }
}

/// Reads `TCP_INFO` from a TCP socket. On an MPTCP socket the kernel answers
/// with one subflow's view at best; per-subflow state comes from sock_diag.
pub fn tcp_info(fd: &impl AsFd) -> Result<TcpInfo> {
    use std::os::fd::AsRawFd;
    let op = "getsockopt(TCP_INFO)";
    let mut buf = [0u8; QUERY_LEN];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` is a writable region of `len` bytes; the kernel writes at
    // most `len` bytes and stores the written length back into `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            TCP_INFO,
            buf.as_mut_ptr().cast::<libc::c_void>(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(Error::last(op));
    }
    let n = (len as usize).min(buf.len());
    TcpInfo::parse(&buf[..n]).map_err(|e| Error::Other { op: op.into(), msg: e.to_string() })
}

/// `SOL_MPTCP` (linux/socket.h).
const SOL_MPTCP: libc::c_int = 284;
/// `MPTCP_INFO` and `MPTCP_TCPINFO` (linux/mptcp.h).
const MPTCP_INFO: libc::c_int = 1;
const MPTCP_TCPINFO: libc::c_int = 2;
/// `struct mptcp_subflow_data`: the header before `MPTCP_TCPINFO`'s array.
const SUBFLOW_DATA_LEN: usize = 16;
/// At most this many subflows are read (the kernel allows 8 extra).
const MAX_SUBFLOWS: usize = 16;

/// The part of `struct mptcp_info` read here: up to `mptcpi_rcv_nxt`.
const MPTCP_INFO_LEN: usize = 40;

/// The connection-level counters of an MPTCP socket (`struct mptcp_info`),
/// as far as they serve a sender: data-sequence numbers count the bytes
/// of every subflow together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MptcpInfo {
    /// Subflows beyond the first (`mptcpi_subflows`).
    pub subflows: u8,
    /// Next data sequence number to write (`mptcpi_write_seq`).
    pub write_seq: u64,
    /// Oldest data sequence number not yet acknowledged at the MPTCP level.
    pub snd_una: u64,
    /// Next data sequence number expected from the peer.
    pub rcv_nxt: u64,
}

impl MptcpInfo {
    /// Decodes the start of `struct mptcp_info` (40 bytes, Linux 5.8 on);
    /// shorter is [`ParseError::Truncated`], bytes after the 40 are ignored.
    pub fn parse(buf: &[u8]) -> std::result::Result<MptcpInfo, ParseError> {
        let f = Fields(buf);
        let (Some(&subflows), Some(write_seq), Some(snd_una), Some(rcv_nxt)) =
            (buf.first(), f.u64(16), f.u64(24), f.u64(32))
        else {
            return Err(ParseError::Truncated {
                what: "mptcp_info",
                at: 0,
                need: MPTCP_INFO_LEN,
                have: buf.len(),
            });
        };
        Ok(MptcpInfo { subflows, write_seq, snd_una, rcv_nxt })
    }
}

/// Reads `MPTCP_INFO` from an MPTCP socket.
pub fn mptcp_info(fd: &impl AsFd) -> Result<MptcpInfo> {
    let op = "getsockopt(MPTCP_INFO)";
    let mut buf = [0u8; 128];
    let n = crate::sockopt::get_bytes(fd, SOL_MPTCP, MPTCP_INFO, &mut buf, op)?;
    MptcpInfo::parse(&buf[..n]).map_err(|e| Error::Other { op: op.into(), msg: e.to_string() })
}

/// Reads `MPTCP_TCPINFO` from an MPTCP socket: the `tcp_info` of every
/// subflow (`TCP_INFO` on the MPTCP socket answers for the first subflow
/// only, whatever carries the data).
pub fn mptcp_subflows_tcp_info(fd: &impl AsFd) -> Result<Vec<TcpInfo>> {
    let op = "getsockopt(MPTCP_TCPINFO)";
    let mut buf = vec![0u8; SUBFLOW_DATA_LEN + MAX_SUBFLOWS * QUERY_LEN];
    buf[0..4].copy_from_slice(&(SUBFLOW_DATA_LEN as u32).to_ne_bytes());
    buf[12..16].copy_from_slice(&(QUERY_LEN as u32).to_ne_bytes());
    let n = crate::sockopt::get_bytes(fd, SOL_MPTCP, MPTCP_TCPINFO, &mut buf, op)?;
    parse_subflow_infos(&buf[..n]).map_err(|e| Error::Other { op: op.into(), msg: e.to_string() })
}

/// Splits an `MPTCP_TCPINFO` answer into its subflows' `tcp_info`; offsets
/// in errors count from the start of `buf`.
pub fn parse_subflow_infos(buf: &[u8]) -> std::result::Result<Vec<TcpInfo>, ParseError> {
    subflow_elements(buf)?.into_iter().map(|(at, b)| TcpInfo::parse(b).map_err(|e| e.shifted(at))).collect()
}

/// The elements of a `struct mptcp_subflow_data`-headed answer
/// (`MPTCP_TCPINFO`, `MPTCP_SUBFLOW_ADDRS`): the header's own size, the
/// subflow count, the kernel's and the user's element sizes, then the
/// array at the user's stride, each element cut to the smaller size. Each
/// comes with its offset. Elements the count promises but the buffer does
/// not hold are left out (the kernel fills what the buffer had room for).
fn subflow_elements(buf: &[u8]) -> std::result::Result<Vec<(usize, &[u8])>, ParseError> {
    let f = Fields(buf);
    let (Some(head), Some(count), Some(kernel), Some(user)) = (f.u32(0), f.u32(4), f.u32(8), f.u32(12))
    else {
        let need = SUBFLOW_DATA_LEN;
        return Err(ParseError::Truncated { what: "mptcp_subflow_data", at: 0, need, have: buf.len() });
    };
    let (head, user) = (head as usize, user as usize);
    let each = user.min(kernel as usize);
    let mut out = Vec::new();
    for i in 0..(count as usize).min(MAX_SUBFLOWS) {
        let Some(start) = i.checked_mul(user).and_then(|o| o.checked_add(head)) else { break };
        let Some(b) = start.checked_add(each).and_then(|end| buf.get(start..end)) else { break };
        out.push((start, b));
    }
    Ok(out)
}

/// `MPTCP_SUBFLOW_ADDRS` (linux/mptcp.h).
const MPTCP_SUBFLOW_ADDRS: libc::c_int = 3;
/// `struct mptcp_subflow_addrs`: the local, then the remote address, each
/// in a `__kernel_sockaddr_storage`.
const SUBFLOW_ADDRS_LEN: usize = 2 * std::mem::size_of::<libc::sockaddr_storage>();

/// One subflow of an MPTCP socket: its endpoints and its `tcp_info`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MptcpSubflow {
    pub local: std::net::SocketAddr,
    pub remote: std::net::SocketAddr,
    pub info: TcpInfo,
}

/// Reads the subflows of an MPTCP socket with their endpoints: the
/// `tcp_info` array of `MPTCP_TCPINFO` beside the address array of
/// `MPTCP_SUBFLOW_ADDRS`, which the kernel fills in the same order (its
/// subflow list). Two reads, not one: a subflow that comes or goes between
/// them makes the counts differ, and the pair is read again (three tries,
/// then an error saying so).
pub fn mptcp_subflows(fd: &impl AsFd) -> Result<Vec<MptcpSubflow>> {
    let op = "getsockopt(MPTCP_SUBFLOW_ADDRS)";
    let mut counts = (0, 0);
    for _ in 0..3 {
        let infos = mptcp_subflows_tcp_info(fd)?;
        let mut buf = vec![0u8; SUBFLOW_DATA_LEN + MAX_SUBFLOWS * SUBFLOW_ADDRS_LEN];
        buf[0..4].copy_from_slice(&(SUBFLOW_DATA_LEN as u32).to_ne_bytes());
        buf[12..16].copy_from_slice(&(SUBFLOW_ADDRS_LEN as u32).to_ne_bytes());
        let n = crate::sockopt::get_bytes(fd, SOL_MPTCP, MPTCP_SUBFLOW_ADDRS, &mut buf, op)?;
        let addrs =
            parse_subflow_addrs(&buf[..n]).map_err(|e| Error::Other { op: op.into(), msg: e.to_string() })?;
        if addrs.len() == infos.len() {
            return Ok(addrs
                .into_iter()
                .zip(infos)
                .map(|((local, remote), info)| MptcpSubflow { local, remote, info })
                .collect());
        }
        counts = (infos.len(), addrs.len());
    }
    Err(Error::Other {
        op: op.into(),
        msg: format!(
            "the subflows changed between reads three times (last: {} tcp_info, {} address pairs)",
            counts.0, counts.1
        ),
    })
}

/// Splits an `MPTCP_SUBFLOW_ADDRS` answer into (local, remote) pairs; an
/// address that is not inet (or an element too short for one) is an error
/// at its offset in `buf`.
pub fn parse_subflow_addrs(
    buf: &[u8],
) -> std::result::Result<Vec<(std::net::SocketAddr, std::net::SocketAddr)>, ParseError> {
    let half = SUBFLOW_ADDRS_LEN / 2;
    subflow_elements(buf)?
        .into_iter()
        .map(|(start, b)| {
            if b.len() < SUBFLOW_ADDRS_LEN {
                let (need, have) = (SUBFLOW_ADDRS_LEN, b.len());
                return Err(ParseError::Truncated { what: "mptcp_subflow_addrs", at: start, need, have });
            }
            let addr = |at: usize| {
                let bytes = &b[at..at + half];
                crate::sockopt::sockaddr_from_bytes(bytes).ok_or(ParseError::BadFamily {
                    at: start + at,
                    family: u16::from_ne_bytes([bytes[0], bytes[1]]),
                })
            };
            Ok((addr(0)?, addr(half)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic buffer of `len` bytes in which every 4-byte word from
    /// offset 8 holds its own offset, so a field read at the wrong place
    /// shows the wrong number.
    fn synthetic(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[..8].copy_from_slice(&[1, 3, 2, 4, 5, 7, 0x7a, 0x05]);
        let mut off = 8;
        while off + 4 <= len {
            b[off..off + 4].copy_from_slice(&(off as u32).to_ne_bytes());
            off += 4;
        }
        b
    }

    fn put_u64(b: &mut [u8], off: usize, v: u64) {
        b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
    }

    #[test]
    fn short_buffer_is_an_error() {
        let short = |have| Err(ParseError::Truncated { what: "tcp_info", at: 0, need: BASE_LEN, have });
        assert_eq!(TcpInfo::parse(&[0u8; 103]), short(103));
        assert_eq!(TcpInfo::parse(&[]), short(0));
        assert_eq!(TcpInfo::parse(&[0u8; 8]), short(8));
        assert_eq!(
            TcpInfo::parse(&[0u8; 8]).unwrap_err().to_string(),
            "tcp_info truncated at byte 0: needs 104 bytes, 8 left"
        );
    }

    #[test]
    fn base_104_has_base_fields_and_no_extensions() {
        let t = TcpInfo::parse(&synthetic(104)).unwrap();
        assert_eq!(t.len, 104);
        assert_eq!((t.state, t.ca_state, t.retransmits, t.probes, t.backoff, t.options), (1, 3, 2, 4, 5, 7));
        if cfg!(target_endian = "little") {
            assert_eq!((t.snd_wscale, t.rcv_wscale), (0xa, 0x7));
            assert!(t.delivery_rate_app_limited);
            assert_eq!(t.fastopen_client_fail, 2);
        }
        assert_eq!(t.rto, 8);
        assert_eq!(t.snd_mss, 16);
        assert_eq!(t.fackets, 40);
        assert_eq!(t.last_data_sent, 44);
        assert_eq!(t.pmtu, 60);
        assert_eq!(t.rtt, 68);
        assert_eq!(t.rttvar, 72);
        assert_eq!(t.snd_ssthresh, 76);
        assert_eq!(t.snd_cwnd, 80);
        assert_eq!(t.rcv_space, 96);
        assert_eq!(t.total_retrans, 100);
        assert_eq!(t.pacing_rate, None);
        assert_eq!(t.snd_wnd, None);
        assert_eq!(t.srtt(), std::time::Duration::from_micros(68));
    }

    #[test]
    fn partial_field_is_none() {
        // 108 bytes reach half of tcpi_pacing_rate: it must stay None.
        let t = TcpInfo::parse(&synthetic(108)).unwrap();
        assert_eq!(t.pacing_rate, None);
        assert_eq!(t.total_retrans, 100);
    }

    #[test]
    fn v232_reaches_snd_wnd() {
        let mut b = synthetic(232);
        put_u64(&mut b, 104, 12_500_000);
        put_u64(&mut b, 112, u64::MAX);
        put_u64(&mut b, 160, 1 << 40);
        put_u64(&mut b, 200, 0x0102_0304_0506_0708);
        let t = TcpInfo::parse(&b).unwrap();
        assert_eq!(t.pacing_rate, Some(12_500_000));
        assert_eq!(t.max_pacing_rate, Some(u64::MAX));
        assert_eq!(t.segs_out, Some(136));
        assert_eq!(t.segs_in, Some(140));
        assert_eq!(t.notsent_bytes, Some(144));
        assert_eq!(t.min_rtt, Some(148));
        assert_eq!(t.data_segs_out, Some(156));
        assert_eq!(t.delivery_rate, Some(1 << 40));
        assert_eq!(t.delivered, Some(192));
        assert_eq!(t.delivered_ce, Some(196));
        assert_eq!(t.bytes_sent, Some(0x0102_0304_0506_0708));
        assert_eq!(t.dsack_dups, Some(216));
        assert_eq!(t.reord_seen, Some(220));
        assert_eq!(t.rcv_ooopack, Some(224));
        assert_eq!(t.snd_wnd, Some(228));
        assert_eq!(t.rcv_wnd, None);
        assert_eq!(t.total_rto_time, None);
    }

    #[test]
    fn v248_reaches_rto_stats() {
        let mut b = synthetic(248);
        b[240..242].copy_from_slice(&7u16.to_ne_bytes());
        b[242..244].copy_from_slice(&3u16.to_ne_bytes());
        let t = TcpInfo::parse(&b).unwrap();
        assert_eq!(t.rcv_wnd, Some(232));
        assert_eq!(t.rehash, Some(236));
        assert_eq!(t.total_rto, Some(7));
        assert_eq!(t.total_rto_recoveries, Some(3));
        assert_eq!(t.total_rto_time, Some(244));
    }

    #[test]
    fn v280_reaches_accecn_counters() {
        let t = TcpInfo::parse(&synthetic(280)).unwrap();
        assert_eq!(t.total_rto_time, Some(244));
        assert_eq!(t.received_ce, Some(248));
        assert_eq!(t.delivered_ce_bytes, Some(260));
        assert_eq!(t.received_ce_bytes, Some(272));
        assert_eq!(TcpInfo::parse(&synthetic(248)).unwrap().received_ce, None);
    }

    #[test]
    fn longer_unknown_tail_is_ignored() {
        let mut b = synthetic(300);
        b[KNOWN_LEN..].fill(0xff);
        let t = TcpInfo::parse(&b).unwrap();
        assert_eq!(t.len, 300);
        assert_eq!(t.received_ce_bytes, Some(272));
        assert_eq!(t.snd_cwnd, 80);
        // Same known fields as the exact-length structure.
        let mut exact = TcpInfo::parse(&synthetic(KNOWN_LEN)).unwrap();
        exact.len = 300;
        assert_eq!(t, exact);
    }

    #[test]
    fn mptcp_info_decodes_sequence_numbers() {
        let mut b = vec![0u8; 96];
        b[0] = 2;
        put_u64(&mut b, 16, 5000);
        put_u64(&mut b, 24, 4000);
        put_u64(&mut b, 32, 77);
        let i = MptcpInfo::parse(&b).unwrap();
        assert_eq!((i.subflows, i.write_seq, i.snd_una, i.rcv_nxt), (2, 5000, 4000, 77));
        assert_eq!(
            MptcpInfo::parse(&b[..39]),
            Err(ParseError::Truncated { what: "mptcp_info", at: 0, need: 40, have: 39 })
        );
        assert_eq!(MptcpInfo::parse(&b[..40]), Ok(i));
    }

    #[test]
    fn subflow_array_is_split_by_the_user_element_size() {
        let one = synthetic(BASE_LEN + 8);
        let mut b = vec![0u8; 16];
        b[0..4].copy_from_slice(&16u32.to_ne_bytes());
        b[4..8].copy_from_slice(&2u32.to_ne_bytes());
        b[8..12].copy_from_slice(&(BASE_LEN as u32 + 8).to_ne_bytes());
        b[12..16].copy_from_slice(&(BASE_LEN as u32 + 8).to_ne_bytes());
        b.extend_from_slice(&one);
        b.extend_from_slice(&one);
        let v = parse_subflow_infos(&b).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].snd_cwnd, TcpInfo::parse(&one).unwrap().snd_cwnd);
        assert!(parse_subflow_infos(&b[..8]).is_err());
    }

    /// A `struct mptcp_subflow_addrs` of two inet addresses.
    fn addrs_element(local: std::net::SocketAddr, remote: std::net::SocketAddr) -> Vec<u8> {
        let mut b = vec![0u8; SUBFLOW_ADDRS_LEN];
        for (at, a) in [(0, local), (SUBFLOW_ADDRS_LEN / 2, remote)] {
            let (ss, _) = crate::sockopt::sockaddr_of(&a);
            // SAFETY: a sockaddr_storage is plain bytes of exactly half an element.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    (&ss as *const libc::sockaddr_storage).cast::<u8>(),
                    SUBFLOW_ADDRS_LEN / 2,
                )
            };
            b[at..at + SUBFLOW_ADDRS_LEN / 2].copy_from_slice(bytes);
        }
        b
    }

    #[test]
    fn subflow_addresses_are_split_and_decoded_in_order() {
        let a: std::net::SocketAddr = "10.1.0.1:40000".parse().unwrap();
        let b: std::net::SocketAddr = "10.1.0.2:7000".parse().unwrap();
        let c: std::net::SocketAddr = "[fd00::3]:40001".parse().unwrap();
        let d: std::net::SocketAddr = "[fd00::4]:7000".parse().unwrap();
        let mut buf = vec![0u8; 16];
        buf[0..4].copy_from_slice(&16u32.to_ne_bytes());
        buf[4..8].copy_from_slice(&2u32.to_ne_bytes());
        buf[8..12].copy_from_slice(&(SUBFLOW_ADDRS_LEN as u32).to_ne_bytes());
        buf[12..16].copy_from_slice(&(SUBFLOW_ADDRS_LEN as u32).to_ne_bytes());
        buf.extend(addrs_element(a, b));
        buf.extend(addrs_element(c, d));
        assert_eq!(parse_subflow_addrs(&buf).unwrap(), vec![(a, b), (c, d)]);
        // A count beyond what arrived yields what arrived.
        assert_eq!(parse_subflow_addrs(&buf[..16 + SUBFLOW_ADDRS_LEN]).unwrap(), vec![(a, b)]);
        // An element of another family is an error naming the subflow.
        let mut bad = buf.clone();
        bad[16 + SUBFLOW_ADDRS_LEN..16 + SUBFLOW_ADDRS_LEN + 2]
            .copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        let e = parse_subflow_addrs(&bad).unwrap_err();
        assert_eq!(e, ParseError::BadFamily { at: 16 + SUBFLOW_ADDRS_LEN, family: libc::AF_UNIX as u16 });
        assert_eq!(
            parse_subflow_addrs(&buf[..12]),
            Err(ParseError::Truncated { what: "mptcp_subflow_data", at: 0, need: 16, have: 12 })
        );
    }

    #[test]
    fn live_mptcp_subflow_has_the_sockets_endpoints_and_counts_its_bytes() {
        use crate::sockopt::{self, Family};
        use std::io::{Read, Write};
        // MPTCP is on in the project's kernel; without it this fails loudly.
        let lfd = sockopt::mptcp_socket(Family::V4).expect("MPTCP socket (net.mptcp.enabled=1 expected)");
        sockopt::bind(&lfd, &"127.0.0.1:0".parse().unwrap()).unwrap();
        sockopt::listen(&lfd, 4).unwrap();
        let l = std::net::TcpListener::from(lfd);
        let addr = l.local_addr().unwrap();
        let cfd = sockopt::mptcp_socket(Family::V4).unwrap();
        sockopt::connect(&cfd, &addr).unwrap();
        let mut c = std::net::TcpStream::from(cfd);
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[7u8; 50_000]).unwrap();
        let mut got = vec![0u8; 50_000];
        s.read_exact(&mut got).unwrap();
        s.write_all(&[1]).unwrap();
        c.read_exact(&mut [0u8; 1]).unwrap();
        let subs = mptcp_subflows(&c).unwrap();
        assert_eq!(subs.len(), 1, "{subs:?}");
        assert_eq!((subs[0].local, subs[0].remote), (c.local_addr().unwrap(), addr));
        // The peer's answer came after all 50 000 bytes: they are acked.
        assert!(subs[0].info.bytes_acked.is_some_and(|b| b >= 50_000), "{:?}", subs[0].info.bytes_acked);
        // A plain TCP socket has no subflows to report: an error, not an empty list.
        let pl = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let plain = std::net::TcpStream::connect(pl.local_addr().unwrap()).unwrap();
        assert!(mptcp_subflows(&plain).is_err());
        // An MPTCP socket whose peer is plain TCP falls back: SOL_MPTCP is
        // "not supported" on it, TCP_INFO reads its one subflow.
        // (A listener of its own: `pl` still holds `plain`, unaccepted.)
        let fl = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let fb = sockopt::mptcp_socket(Family::V4).unwrap();
        sockopt::connect(&fb, &fl.local_addr().unwrap()).unwrap();
        let mut fb = std::net::TcpStream::from(fb);
        let (mut peer, _) = fl.accept().unwrap();
        fb.write_all(&[1u8; 3000]).unwrap();
        peer.read_exact(&mut [0u8; 3000]).unwrap();
        assert!(matches!(mptcp_subflows(&fb), Err(Error::Unsupported { .. })), "{:?}", mptcp_subflows(&fb));
        assert_eq!(tcp_info(&fb).unwrap().bytes_sent, Some(3000));
    }

    #[test]
    fn live_socket_reports_established() {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        c.write_all(&[0u8; 10_000]).unwrap();
        let t = tcp_info(&c).unwrap();
        assert!(t.len >= 232, "kernel returned only {} bytes", t.len);
        // 6.18 returns 280 bytes; the parser must cope whatever the length.
        if t.len >= 248 {
            assert!(t.total_rto.is_some());
        }
        assert_eq!(t.state_name(), "ESTABLISHED");
        assert!(t.snd_cwnd >= 1);
        assert!(t.snd_mss > 0);
        assert!(t.bytes_sent.is_some_and(|b| b >= 10_000) || t.bytes_acked.is_some_and(|b| b > 0));
    }

    const CAPTURED: &[u8] = include_bytes!("../testdata/tcp_info.bin");

    /// The real `getsockopt(TCP_INFO)` of a loopback client that sent 10 000
    /// bytes and had them echoed (crates/sys/testdata/README.md).
    #[test]
    fn captured_tcp_info_decodes_to_known_values() {
        let t = TcpInfo::parse(CAPTURED).unwrap();
        assert_eq!((t.len, t.state_name(), t.ca_state_name()), (280, "ESTABLISHED", "Open"));
        assert_eq!(
            (t.bytes_sent, t.bytes_received, t.bytes_acked),
            (Some(10_000), Some(10_000), Some(10_001))
        );
        assert_eq!((t.snd_cwnd, t.total_retrans, t.pmtu), (11, 0, 65_535));
        assert_eq!(t.received_ce_bytes, Some(0));
    }

    /// The captured structure at lengths 0, 8, its own less one byte, the
    /// known length less one, and 64 bytes longer than the kernel's.
    #[test]
    fn captured_tcp_info_at_any_length() {
        let whole = TcpInfo::parse(CAPTURED).unwrap();
        for len in [0, 8] {
            assert_eq!(
                TcpInfo::parse(&CAPTURED[..len]),
                Err(ParseError::Truncated { what: "tcp_info", at: 0, need: BASE_LEN, have: len })
            );
        }
        // 279 bytes still hold every field known here (they end at 276).
        let short = TcpInfo::parse(&CAPTURED[..CAPTURED.len() - 1]).unwrap();
        assert_eq!(short, TcpInfo { len: 279, ..whole.clone() });
        // 275 bytes cut the last field: it alone is absent.
        let cut = TcpInfo::parse(&CAPTURED[..KNOWN_LEN - 1]).unwrap();
        assert_eq!(cut, TcpInfo { len: KNOWN_LEN - 1, received_ce_bytes: None, ..whole.clone() });
        // A newer kernel's 64 more bytes are ignored.
        let mut long = CAPTURED.to_vec();
        long.extend_from_slice(&[0xff; 64]);
        assert_eq!(TcpInfo::parse(&long).unwrap(), TcpInfo { len: 344, ..whole });
    }
}
