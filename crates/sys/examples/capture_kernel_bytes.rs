//! Captures the raw bytes this kernel sends to the parsers of `tcpaccel-sys`,
//! for the fuzz seeds (`fuzz/sys/seeds/TARGET/`) and the unit tests' real
//! messages (`crates/sys/testdata/`). Root: it works in a fresh network
//! namespace (`tcpaccel-capture-…`, deleted at the end) with `lo` up, so the
//! answers are small and the same from one machine to the next but for
//! cookies, inodes, tokens and timings.
//!
//!   cargo run -p tcpaccel-sys --example capture_kernel_bytes -- OUT_DIR
//!
//! Writes, each file the datagrams of one answer back to back (netlink
//! messages are padded, so they read as one message stream):
//! - `rtnl_getlink.bin`, `rtnl_getaddr.bin`, `rtnl_getroute.bin`: the
//!   `RTM_GETLINK`/`GETADDR`/`GETROUTE` dumps (only `lo` exists);
//! - `diag_loopback.bin`: a sock_diag dump (`inet_diag_req_v2`, with
//!   `tcp_info` and the congestion control name) of one TCP connection
//!   127.0.0.1:40000 → 127.0.0.1:5201;
//! - `genl_family_mptcp_pm.bin`: the `nlctrl` answer for `mptcp_pm`;
//! - `mptcp_get_addr.bin`: the `GET_ADDR` dump after adding endpoint
//!   10.9.0.1 id 5 `signal`; `mptcp_get_limits.bin`: `GET_LIMITS` after
//!   `SET_LIMITS` 3 subflows, 2 accepted;
//! - `mptcp_events.bin`: the path manager's events while an MPTCP connection
//!   127.0.0.1:40001 → 127.0.0.1:5202 opens and closes;
//! - `diag_mptcp.bin`: a sock_diag dump (with `tcp_info`) of that MPTCP
//!   connection while it is open: its two subflows (client and server side),
//!   each with the nested `INET_DIAG_ULP_INFO` (name "mptcp" and the nested
//!   subflow info);
//! - `tcp_info.bin`: `getsockopt(TCP_INFO)` on the client of the first
//!   connection, after 10 000 bytes were sent and echoed.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tcpaccel_sys::diag::{self, DumpRequest, Family, PortSide};
use tcpaccel_sys::mptcp::{self, flags, Limits, PmAddr, PmClient, Request};
use tcpaccel_sys::netlink::{self, Answer, NlSocket, NLM_F_DUMP, NLM_F_REQUEST};
use tcpaccel_sys::sockopt;

const RTM_GETLINK: u16 = 18;
const RTM_GETADDR: u16 = 22;
const RTM_GETROUTE: u16 = 26;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Sends `req` on a fresh socket of `protocol` and returns the answer's
/// datagrams, back to back, up to the ACK or the dump's DONE.
fn exchange(protocol: libc::c_int, req: &[u8], seq: u32, what: &str) -> Res<Vec<u8>> {
    let mut s = NlSocket::open(protocol, what)?;
    s.set_recv_timeout(Duration::from_secs(2))?;
    s.send(req, what)?;
    let mut all = Vec::new();
    loop {
        let dg = s.recv(0, what)?.ok_or_else(|| format!("{what}: no answer"))?.to_vec();
        all.extend_from_slice(&dg);
        for m in netlink::messages(&dg) {
            let m = m?;
            if m.header.seq == seq && matches!(m.answer()?, Answer::Ack | Answer::Done | Answer::Error(_)) {
                return Ok(all);
            }
        }
    }
}

/// A dump request of rtnetlink: the type and an all-zero family header.
fn rtnl_dump(kind: u16, header_len: usize, seq: u32) -> Vec<u8> {
    netlink::message(kind, NLM_F_REQUEST | NLM_F_DUMP, seq, &[&vec![0u8; header_len]])
}

fn save(dir: &Path, name: &str, bytes: &[u8]) -> Res<()> {
    std::fs::write(dir.join(name), bytes)?;
    println!("{name}: {} bytes", bytes.len());
    Ok(())
}

/// One loopback TCP connection with 10 000 bytes echoed: (client, server side).
fn tcp_pair() -> Res<(TcpStream, TcpStream)> {
    let l = TcpListener::bind("127.0.0.1:5201")?;
    let fd = sockopt::tcp_socket(sockopt::Family::V4)?;
    sockopt::bind(&fd, &"127.0.0.1:40000".parse()?)?;
    sockopt::connect(&fd, &l.local_addr()?)?;
    let mut c = TcpStream::from(fd);
    let (mut s, _) = l.accept()?;
    c.write_all(&[7u8; 10_000])?;
    let mut buf = vec![0u8; 10_000];
    s.read_exact(&mut buf)?;
    s.write_all(&buf)?;
    c.read_exact(&mut buf)?;
    Ok((c, s))
}

fn capture(dir: &Path) -> Res<()> {
    // rtnetlink: ifinfomsg is 16 bytes, ifaddrmsg 8, rtmsg 12.
    save(
        dir,
        "rtnl_getlink.bin",
        &exchange(libc::NETLINK_ROUTE, &rtnl_dump(RTM_GETLINK, 16, 1), 1, "GETLINK")?,
    )?;
    save(
        dir,
        "rtnl_getaddr.bin",
        &exchange(libc::NETLINK_ROUTE, &rtnl_dump(RTM_GETADDR, 8, 2), 2, "GETADDR")?,
    )?;
    save(
        dir,
        "rtnl_getroute.bin",
        &exchange(libc::NETLINK_ROUTE, &rtnl_dump(RTM_GETROUTE, 12, 3), 3, "GETROUTE")?,
    )?;

    let (c, _s) = tcp_pair()?;
    let req = DumpRequest {
        port: Some(5201),
        port_side: PortSide::Either,
        families: vec![Family::V4],
        ext: diag::ext::INFO | diag::ext::CONG,
        ..Default::default()
    };
    let dump = diag::encode_request(Family::V4, &req, 4);
    save(dir, "diag_loopback.bin", &exchange(libc::NETLINK_SOCK_DIAG, &dump, 4, "sock_diag")?)?;
    let mut info = [0u8; 512];
    let n = sockopt::get_bytes(&c, libc::IPPROTO_TCP, libc::TCP_INFO, &mut info, "TCP_INFO")?;
    save(dir, "tcp_info.bin", &info[..n])?;

    // Generic netlink: the family, then the path manager.
    let family = mptcp::resolve_family(mptcp::FAMILY_NAME)?;
    let mut get_family = netlink::AttrBuf::default();
    get_family.put_str(2, mptcp::FAMILY_NAME); // CTRL_ATTR_FAMILY_NAME
    let genl = netlink::GenlHeader { cmd: 3, version: 1 }; // CTRL_CMD_GETFAMILY
    let req = netlink::genl_message(0x10, NLM_F_REQUEST | netlink::NLM_F_ACK, 5, genl, get_family.as_bytes());
    save(dir, "genl_family_mptcp_pm.bin", &exchange(libc::NETLINK_GENERIC, &req, 5, "GETFAMILY")?)?;
    let mut pm = PmClient::open()?;
    pm.add_addr(&PmAddr::ip("10.9.0.1".parse()?).with_id(5).with_flags(flags::SIGNAL))?;
    pm.set_limits(Limits { subflows: 3, add_addr_accepted: 2 })?;
    let req = Request::dump_addrs(None).encode(family.id, 6);
    save(dir, "mptcp_get_addr.bin", &exchange(libc::NETLINK_GENERIC, &req, 6, "GET_ADDR")?)?;
    let req = Request::get_limits().encode(family.id, 7);
    save(dir, "mptcp_get_limits.bin", &exchange(libc::NETLINK_GENERIC, &req, 7, "GET_LIMITS")?)?;

    // Events: listen, then open and close one MPTCP connection.
    let group = family.group(mptcp::EVENTS_GROUP).ok_or("no events group")?;
    let mut ev = NlSocket::open(libc::NETLINK_GENERIC, "events")?;
    ev.join_group(group, "events")?;
    {
        let lfd = sockopt::mptcp_socket(sockopt::Family::V4)?;
        sockopt::bind(&lfd, &"127.0.0.1:5202".parse()?)?;
        sockopt::listen(&lfd, 4)?;
        let l = TcpListener::from(lfd);
        let cfd = sockopt::mptcp_socket(sockopt::Family::V4)?;
        sockopt::bind(&cfd, &"127.0.0.1:40001".parse::<SocketAddr>()?)?;
        sockopt::connect(&cfd, &l.local_addr()?)?;
        let mut c = TcpStream::from(cfd);
        let (mut s, _) = l.accept()?;
        c.write_all(b"ping")?;
        s.read_exact(&mut [0u8; 4])?;
        let req = DumpRequest {
            port: Some(5202),
            port_side: PortSide::Either,
            families: vec![Family::V4],
            ext: diag::ext::INFO,
            ..Default::default()
        };
        let dump = diag::encode_request(Family::V4, &req, 8);
        save(dir, "diag_mptcp.bin", &exchange(libc::NETLINK_SOCK_DIAG, &dump, 8, "sock_diag mptcp")?)?;
    }
    let mut events = Vec::new();
    let until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < until {
        if ev.wait_readable(Some(Duration::from_millis(100)), "events")? {
            if let Some(dg) = ev.recv(libc::MSG_DONTWAIT, "events")? {
                events.extend_from_slice(dg);
            }
        }
    }
    save(dir, "mptcp_events.bin", &events)?;
    Ok(())
}

fn main() -> Res<()> {
    let dir = PathBuf::from(std::env::args().nth(1).ok_or("usage: capture_kernel_bytes OUT_DIR")?);
    std::fs::create_dir_all(&dir)?;
    tcpaccel_sys::testing::require_root();
    let ns = tcpaccel_sys::testing::TestNetns::one("capture");
    let name = ns.name().to_string();
    tcpaccel_sys::netns::run_in(&name, move || capture(&dir).map_err(|e| e.to_string()))??;
    Ok(())
}
