//! Fuzz target: `struct tcp_info` of any length (`TcpInfo::parse`, what
//! `getsockopt(TCP_INFO)` and sock_diag's `INET_DIAG_INFO` go through), the
//! `MPTCP_TCPINFO` / `MPTCP_SUBFLOW_ADDRS` arrays and `MPTCP_INFO`.
//!
//! Checked beyond never panicking:
//! - a buffer shorter than the 104-byte base is exactly
//!   `Truncated { at: 0, need: 104, have }`, any other parses;
//! - every field past the base is absent exactly when the input ends before
//!   the field does, and holds the input's bytes at its offset otherwise;
//!   the table below covers every optional field (a field added to
//!   `TcpInfo` without a row here fails the count);
//! - base fields hold the input's bytes at their offsets; `len` is the
//!   input's length;
//! - the subflow arrays yield at most 16 elements, and errors name offsets
//!   inside the input;
//! - `struct mptcp_info` decodes from 40 bytes on (its fields at their
//!   offsets), shorter is exactly `Truncated { need: 40 }`.
//!
//! Run it with `fuzz/run.sh sys/tcpinfo` (see there).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tcpaccel_sys::netlink::ParseError;
use tcpaccel_sys::tcpinfo::{parse_subflow_addrs, parse_subflow_infos, MptcpInfo, TcpInfo, BASE_LEN};

/// Fields beyond the base structure: name, offset, size (include/uapi/linux/tcp.h).
const EXT: &[(&str, usize, usize)] = &[
    ("pacing_rate", 104, 8),
    ("max_pacing_rate", 112, 8),
    ("bytes_acked", 120, 8),
    ("bytes_received", 128, 8),
    ("segs_out", 136, 4),
    ("segs_in", 140, 4),
    ("notsent_bytes", 144, 4),
    ("min_rtt", 148, 4),
    ("data_segs_in", 152, 4),
    ("data_segs_out", 156, 4),
    ("delivery_rate", 160, 8),
    ("busy_time", 168, 8),
    ("rwnd_limited", 176, 8),
    ("sndbuf_limited", 184, 8),
    ("delivered", 192, 4),
    ("delivered_ce", 196, 4),
    ("bytes_sent", 200, 8),
    ("bytes_retrans", 208, 8),
    ("dsack_dups", 216, 4),
    ("reord_seen", 220, 4),
    ("rcv_ooopack", 224, 4),
    ("snd_wnd", 228, 4),
    ("rcv_wnd", 232, 4),
    ("rehash", 236, 4),
    ("total_rto", 240, 2),
    ("total_rto_recoveries", 242, 2),
    ("total_rto_time", 244, 4),
    ("received_ce", 248, 4),
    ("delivered_e1_bytes", 252, 4),
    ("delivered_e0_bytes", 256, 4),
    ("delivered_ce_bytes", 260, 4),
    ("received_e1_bytes", 264, 4),
    ("received_e0_bytes", 268, 4),
    ("received_ce_bytes", 272, 4),
];

/// The native-endian unsigned integer of `size` bytes at `off`.
fn int(b: &[u8], off: usize, size: usize) -> u64 {
    let mut v = [0u8; 8];
    if cfg!(target_endian = "little") {
        v[..size].copy_from_slice(&b[off..off + size]);
        u64::from_le_bytes(v)
    } else {
        v[8 - size..].copy_from_slice(&b[off..off + size]);
        u64::from_be_bytes(v)
    }
}

fuzz_target!(|data: &[u8]| {
    match TcpInfo::parse(data) {
        Err(e) => {
            assert_eq!(
                e,
                ParseError::Truncated { what: "tcp_info", at: 0, need: BASE_LEN, have: data.len() }
            );
        }
        Ok(t) => {
            assert!(data.len() >= BASE_LEN);
            assert_eq!(t.len, data.len());
            assert_eq!((t.state, t.ca_state, t.options), (data[0], data[1], data[5]));
            assert_eq!(u64::from(t.rtt), int(data, 68, 4));
            assert_eq!(u64::from(t.snd_cwnd), int(data, 80, 4));
            assert_eq!(u64::from(t.total_retrans), int(data, 100, 4));
            let json = serde_json::to_value(&t).unwrap();
            let obj = json.as_object().unwrap();
            let mut absent = 0;
            for &(name, off, size) in EXT {
                let v = &obj[name];
                if data.len() < off + size {
                    assert_eq!(v, &Value::Null, "{name} present in {} bytes", data.len());
                    absent += 1;
                } else {
                    assert_eq!(v.as_u64(), Some(int(data, off, size)), "{name}");
                }
            }
            let nulls = obj.values().filter(|v| v.is_null()).count();
            assert_eq!(nulls, absent, "an optional field of TcpInfo is missing from the table");
        }
    }
    match MptcpInfo::parse(data) {
        Ok(m) => assert!(data.len() >= 40 && m.subflows == data[0] && m.snd_una == int(data, 24, 8)),
        Err(e) => {
            assert_eq!(e, ParseError::Truncated { what: "mptcp_info", at: 0, need: 40, have: data.len() })
        }
    }
    match parse_subflow_infos(data) {
        Ok(v) => assert!(v.len() <= 16 && v.iter().all(|t| t.len <= data.len())),
        Err(e) => assert!(e.offset().is_some_and(|o| o <= data.len()), "{e:?}"),
    }
    match parse_subflow_addrs(data) {
        Ok(v) => assert!(v.len() <= 16),
        Err(e) => assert!(e.offset().is_some_and(|o| o <= data.len()), "{e:?}"),
    }
});
