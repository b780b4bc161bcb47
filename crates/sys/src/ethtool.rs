//! The ethtool ioctl (`SIOCETHTOOL`), used to switch segmentation and checksum
//! offloads off on emulated links and to read them back.
//!
//! Why: with TSO/GSO on, the kernel hands a veth 64 KB "super frames" that an
//! AF_PACKET emulator would see as one oversize frame; with GRO on, the
//! receiving side merges frames again; with tx checksumming on, frames leave
//! with a partial checksum (CHECKSUM_PARTIAL) that nobody fills in once the
//! frame has gone through a packet socket. All four must be off for the
//! emulator to see, time and forward real wire-sized frames.
//!
//! We use the legacy one-feature commands (`ETHTOOL_S{TSO,GSO,GRO,TXCSUM}`,
//! `include/uapi/linux/ethtool.h`); the kernel maps them onto its feature bits
//! (`net/ethtool/ioctl.c`, `ethtool_set_one_feature`) and still supports them.
//! The ioctl acts in the network namespace of the calling thread (the socket it
//! goes through is created there). This module does not touch other settings
//! (ring sizes, link speed).

use std::ffi::c_void;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::{Error, Result};

// include/uapi/linux/ethtool.h
const ETHTOOL_GTXCSUM: u32 = 0x0000_0016;
const ETHTOOL_STXCSUM: u32 = 0x0000_0017;
const ETHTOOL_GSG: u32 = 0x0000_0018;
const ETHTOOL_GTSO: u32 = 0x0000_001e;
const ETHTOOL_STSO: u32 = 0x0000_001f;
const ETHTOOL_GGSO: u32 = 0x0000_0023;
const ETHTOOL_SGSO: u32 = 0x0000_0024;
const ETHTOOL_GGRO: u32 = 0x0000_002b;
const ETHTOOL_SGRO: u32 = 0x0000_002c;

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `struct ifreq` with the `ifr_data` member of the union; padded to the size
/// of the kernel's struct (40 bytes on 64-bit) so the kernel's copy stays
/// within our buffer.
#[repr(C)]
struct IfreqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut c_void,
    _pad: [u8; 24 - std::mem::size_of::<*mut c_void>()],
}

/// The offload state of one interface, as the legacy get-commands report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Offloads {
    /// Any TCP segmentation offload (TSO, TSO6, TSO-ECN, ...).
    pub tso: bool,
    /// Generic segmentation offload.
    pub gso: bool,
    /// Generic receive offload.
    pub gro: bool,
    /// Any transmit checksum offload.
    pub tx_checksum: bool,
    /// Scatter-gather (read only here; reported for diagnosis).
    pub scatter_gather: bool,
}

impl Offloads {
    /// True when TSO, GSO, GRO and tx checksumming are all off.
    pub fn all_off(&self) -> bool {
        !(self.tso || self.gso || self.gro || self.tx_checksum)
    }
}

fn control_socket() -> Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the returned descriptor is checked and
    // immediately owned.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Error::last("socket(AF_INET, SOCK_DGRAM) for SIOCETHTOOL"));
    }
    // SAFETY: fd is a fresh, valid descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ifname_bytes(ifname: &str) -> Result<[libc::c_char; libc::IFNAMSIZ]> {
    let b = ifname.as_bytes();
    if b.is_empty() || b.len() >= libc::IFNAMSIZ || b.contains(&0) {
        return Err(Error::NoInterface { name: ifname.to_string() });
    }
    let mut out = [0 as libc::c_char; libc::IFNAMSIZ];
    for (o, &c) in out.iter_mut().zip(b) {
        *o = c as libc::c_char;
    }
    Ok(out)
}

fn ethtool_value(sock: &OwnedFd, ifname: &str, cmd: u32, data: u32, what: &str) -> Result<u32> {
    let mut val = EthtoolValue { cmd, data };
    let mut ifr = IfreqData {
        name: ifname_bytes(ifname)?,
        data: (&mut val as *mut EthtoolValue).cast(),
        _pad: [0; 24 - std::mem::size_of::<*mut c_void>()],
    };
    // SAFETY: ifr is a properly laid-out ifreq whose data pointer refers to a
    // live `ethtool_value`; both outlive the call, and the kernel writes at
    // most sizeof(struct ethtool_value) through the pointer.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL as _, &mut ifr as *mut IfreqData) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENODEV) => Error::NoInterface { name: ifname.to_string() },
            _ => Error::os(format!("SIOCETHTOOL {what} on {ifname}"), e),
        });
    }
    Ok(val.data)
}

/// Reads the offload state of `ifname` (in the calling thread's namespace).
pub fn offloads(ifname: &str) -> Result<Offloads> {
    let sock = control_socket()?;
    let get = |cmd, what| ethtool_value(&sock, ifname, cmd, 0, what).map(|v| v != 0);
    Ok(Offloads {
        tso: get(ETHTOOL_GTSO, "get tso")?,
        gso: get(ETHTOOL_GGSO, "get gso")?,
        gro: get(ETHTOOL_GGRO, "get gro")?,
        tx_checksum: get(ETHTOOL_GTXCSUM, "get tx-checksum")?,
        scatter_gather: get(ETHTOOL_GSG, "get scatter-gather")?,
    })
}

/// Switches TSO, GSO, GRO and tx checksumming off on `ifname`, in the calling
/// thread's network namespace, and checks that they are off afterwards.
///
/// Features that are already off are left alone, so a device on which a
/// feature is fixed-off (not in its `hw_features`) is fine. Fails with
/// [`Error::NoInterface`] for a missing interface, [`Error::Privilege`]
/// without CAP_NET_ADMIN, and [`Error::Unsupported`] if a feature is on and
/// cannot be switched off.
pub fn disable_offloads(ifname: &str) -> Result<()> {
    let sock = control_socket()?;
    // Order matters little, but TSO first: the kernel would drop it anyway once
    // checksumming is off (netdev_fix_features), and asking explicitly keeps
    // it off if checksumming is switched back on later.
    let steps: [(u32, u32, &str); 4] = [
        (ETHTOOL_GTSO, ETHTOOL_STSO, "tso"),
        (ETHTOOL_GGSO, ETHTOOL_SGSO, "gso"),
        (ETHTOOL_GGRO, ETHTOOL_SGRO, "gro"),
        (ETHTOOL_GTXCSUM, ETHTOOL_STXCSUM, "tx-checksum"),
    ];
    for (get, set, what) in steps {
        if ethtool_value(&sock, ifname, get, 0, &format!("get {what}"))? == 0 {
            continue;
        }
        ethtool_value(&sock, ifname, set, 0, &format!("set {what} off"))?;
    }
    let now = offloads(ifname)?;
    if !now.all_off() {
        return Err(Error::Unsupported {
            op: format!("disable offloads on {ifname}"),
            source: std::io::Error::other(format!("still on after switching off: {now:?}")),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifreq_has_kernel_size() {
        // struct ifreq is 40 bytes on LP64 Linux.
        assert_eq!(std::mem::size_of::<IfreqData>(), 40);
    }

    #[test]
    fn missing_interface_is_named() {
        match offloads("tcpaccel-nope0") {
            Err(Error::NoInterface { name }) => assert_eq!(name, "tcpaccel-nope0"),
            other => panic!("expected NoInterface, got {other:?}"),
        }
        assert!(matches!(disable_offloads("this-name-is-far-too-long"), Err(Error::NoInterface { .. })));
    }

    #[test]
    fn loopback_reads_back() {
        // Every namespace has lo; reading needs no privilege. Its checksum
        // and scatter-gather features are fixed on (drivers/net/loopback.c),
        // so a get that decoded nothing would show here.
        let o = offloads("lo").expect("read lo offloads");
        assert!(o.tx_checksum && o.scatter_gather, "lo reads {o:?}");
        assert!(!o.all_off());
    }

    #[test]
    fn root_disable_offloads_turns_all_four_off_on_a_veth() {
        crate::testing::require_root();
        let t = crate::testing::TestNetns::one("ethtool");
        t.ip(t.name(), &["link", "add", "eth0", "type", "veth", "peer", "name", "eth1"]);
        let (before, after, peer) = crate::netns::run_in(t.name(), || {
            let before = offloads("eth0")?;
            disable_offloads("eth0")?;
            Ok::<_, Error>((before, offloads("eth0")?, offloads("eth1")?))
        })
        .expect("enter the namespace")
        .expect("ethtool in the namespace");
        // A veth starts with TSO, GSO and tx checksumming on: switching them
        // off is work the call must do, not a state it finds.
        assert!(before.tso && before.gso && before.tx_checksum, "veth defaults: {before:?}");
        assert!(!after.tso && !after.gso && !after.gro && !after.tx_checksum, "after: {after:?}");
        assert!(after.all_off());
        assert!(peer.tx_checksum, "only the named interface changes: {peer:?}");
    }
}
