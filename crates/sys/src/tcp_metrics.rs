//! The kernel's TCP metrics cache (`tcp_metrics` generic netlink, what
//! `ip tcp_metrics delete ADDRESS` does): a closed connection leaves its
//! ssthresh, cwnd and RTT for its destination, and the next connection
//! there starts from them (unless `net.ipv4.tcp_no_metrics_save` is set).
//! [`forget`] deletes one destination's entries, so that one test transfer
//! does not start from what the previous one left.
//!
//! Written against `include/uapi/linux/tcp_metrics.h` and
//! `net/ipv4/tcp_metrics.c` (`tcp_metrics_nl_cmd_del`): TCP_METRICS_CMD_DEL
//! with only a destination address deletes every entry for it, whatever
//! the source; none found is ESRCH. Needs CAP_NET_ADMIN; acts in the
//! calling thread's network namespace.

use std::net::IpAddr;
use std::time::Duration;

use crate::mptcp::{get_family_request, parse_family, GENL_ID_CTRL};
use crate::netlink::{genl_message, AttrBuf, GenlHeader, NlSocket, NLM_F_ACK, NLM_F_REQUEST};
use crate::{Error, Result};

/// The generic netlink family's name and version (`TCP_METRICS_GENL_*`).
pub const FAMILY_NAME: &str = "tcp_metrics";
const FAMILY_VERSION: u8 = 1;
/// `TCP_METRICS_CMD_DEL`.
const CMD_DEL: u8 = 2;
/// `TCP_METRICS_ATTR_ADDR_IPV4` (a `struct in_addr`, network order) and
/// `TCP_METRICS_ATTR_ADDR_IPV6` (16 bytes).
const ATTR_ADDR_IPV4: u16 = 1;
const ATTR_ADDR_IPV6: u16 = 2;

const TIMEOUT: Duration = Duration::from_secs(2);

/// The TCP_METRICS_CMD_DEL request for every entry of destination `addr`
/// (an IPv4-mapped IPv6 address is the IPv4 one, as the kernel keys it).
pub fn del_request(family_id: u16, addr: IpAddr, seq: u32) -> Vec<u8> {
    let mut a = AttrBuf::default();
    match addr.to_canonical() {
        IpAddr::V4(v4) => a.put(ATTR_ADDR_IPV4, &v4.octets()),
        IpAddr::V6(v6) => a.put(ATTR_ADDR_IPV6, &v6.octets()),
    }
    let genl = GenlHeader { cmd: CMD_DEL, version: FAMILY_VERSION };
    genl_message(family_id, NLM_F_REQUEST | NLM_F_ACK, seq, genl, a.as_bytes())
}

/// Deletes the cached metrics of destination `addr` in this network
/// namespace: `Ok(true)` when there were some, `Ok(false)` when there were
/// none. Errors name the step (the family lookup, the delete) and the
/// kernel's errno (EPERM without CAP_NET_ADMIN).
pub fn forget(addr: IpAddr) -> Result<bool> {
    let mut sock = NlSocket::open(libc::NETLINK_GENERIC, "NETLINK_GENERIC")?;
    sock.request_extended_acks();
    sock.set_recv_timeout(TIMEOUT)?;
    let op = format!("nlctrl GETFAMILY {FAMILY_NAME}");
    let mut id = None;
    let looked = sock.exchange(&get_family_request(FAMILY_NAME, 1), 1, &op, |kind, p| {
        if kind == GENL_ID_CTRL {
            id = Some(parse_family(p).map_err(|e| Error::Other { op: op.clone(), msg: e.to_string() })?.id);
        }
        Ok(false)
    });
    match looked {
        Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::ENOENT) => {
            return Err(Error::Other {
                op,
                msg: format!(
                    "no generic netlink family {FAMILY_NAME:?}: this kernel has no TCP metrics cache"
                ),
            })
        }
        r => r?,
    }
    let id = id.ok_or_else(|| Error::Other { op: op.clone(), msg: "no family in the answer".into() })?;
    let op = format!("{FAMILY_NAME} DEL {addr}");
    match sock.exchange(&del_request(id, addr, 2), 2, &op, |_, _| Ok(false)) {
        Ok(()) => Ok(true),
        Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::ESRCH) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes `ip tcp_metrics delete 10.78.0.2` sends (family id 0x1d
    /// here), attribute by attribute.
    #[test]
    fn del_request_layout() {
        let m = del_request(0x1d, "10.78.0.2".parse().unwrap(), 7);
        assert_eq!(m.len(), 16 + 4 + 8);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize, m.len());
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), 0x1d);
        assert_eq!(u16::from_ne_bytes([m[6], m[7]]), NLM_F_REQUEST | NLM_F_ACK);
        assert_eq!(u32::from_ne_bytes(m[8..12].try_into().unwrap()), 7);
        assert_eq!(&m[16..20], &[CMD_DEL, 1, 0, 0]);
        assert_eq!(u16::from_ne_bytes([m[20], m[21]]), 8);
        assert_eq!(u16::from_ne_bytes([m[22], m[23]]), ATTR_ADDR_IPV4);
        assert_eq!(&m[24..28], &[10, 78, 0, 2]);
        // A mapped address is keyed as IPv4; a real IPv6 one takes 16 bytes.
        assert_eq!(del_request(0x1d, "::ffff:10.78.0.2".parse().unwrap(), 7), m);
        let v6 = del_request(0x1d, "2001:db8::2".parse().unwrap(), 7);
        assert_eq!(u16::from_ne_bytes([v6[22], v6[23]]), ATTR_ADDR_IPV6);
        assert_eq!(v6.len(), 16 + 4 + 4 + 16);
    }

    /// Against this kernel, in a namespace of its own: a closed loopback
    /// connection leaves an entry for its destination; `forget` deletes it
    /// (true), and a second call finds none (false), as `ip tcp_metrics
    /// delete` would say "No such process".
    #[test]
    fn root_forget_deletes_a_destinations_entry() {
        crate::testing::require_root();
        crate::netns::run_in_fresh(|| {
            use std::io::{Read, Write};
            crate::link::set_up(crate::link::ifindex("lo").unwrap()).unwrap();
            let to: IpAddr = "127.0.0.1".parse().unwrap();
            assert!(!forget(to).expect("forget in a fresh namespace"), "a fresh namespace has no entry");
            let l = std::net::TcpListener::bind((to, 0)).unwrap();
            let at = l.local_addr().unwrap();
            let reader = std::thread::spawn(move || {
                let (mut c, _) = l.accept().unwrap();
                std::io::copy(&mut c, &mut std::io::sink()).unwrap();
            });
            let mut c = std::net::TcpStream::connect(at).unwrap();
            c.write_all(&[0u8; 1 << 20]).unwrap();
            c.shutdown(std::net::Shutdown::Write).unwrap();
            let _ = c.read(&mut [0u8; 1]);
            drop(c);
            reader.join().unwrap();
            // The entry is written as the connection closes; give it a moment.
            let deadline = std::time::Instant::now() + Duration::from_secs(2);
            let mut found = false;
            while !found && std::time::Instant::now() < deadline {
                found = forget(to).expect("forget after a connection");
                if !found {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            assert!(found, "no cached metrics for {to} after a closed connection");
            assert!(!forget(to).unwrap(), "deleted: the second call finds none");
        })
        .unwrap();
    }
}
