//! Checks of a received frame before it enters the link: what a switch port
//! would refuse. The emulator is an L2 wire, so it looks no further than the
//! Ethernet header (it never parses IP).

use tcpaccel_core::link::DropReason;

/// Length of an Ethernet header (destination, source, EtherType/length).
pub const ETH_HLEN: usize = 14;

/// Accepts a frame of real length `len` of which `data` was received, or says
/// why it must be dropped:
/// - runt: shorter than an Ethernet header;
/// - oversize: longer than `max_frame` (or truncated by the receive slot);
/// - malformed: a group (multicast) source address, a type/length field in the
///   undefined range 1501..1535, or an 802.3 length beyond the frame.
pub fn check(data: &[u8], len: usize, max_frame: usize) -> Result<(), DropReason> {
    if len < ETH_HLEN || data.len() < ETH_HLEN {
        return Err(DropReason::Runt);
    }
    if len > max_frame || data.len() < len {
        return Err(DropReason::Oversize);
    }
    // IEEE 802.3 clause 3.2.3: the I/G bit of a source address is always 0.
    if data[6] & 1 != 0 {
        return Err(DropReason::Malformed);
    }
    let type_len = u16::from_be_bytes([data[12], data[13]]) as usize;
    if type_len < 0x0600 {
        // A length field (802.3): values above 1500 are undefined, and the
        // payload it announces must be in the frame (padding may follow).
        if type_len > 1500 || ETH_HLEN + type_len > len {
            return Err(DropReason::Malformed);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize, type_len: u16) -> Vec<u8> {
        let mut f = vec![0u8; len];
        if len >= 14 {
            f[0..6].copy_from_slice(&[0xff; 6]);
            f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
            f[12..14].copy_from_slice(&type_len.to_be_bytes());
        }
        f
    }

    #[test]
    fn good_frames_pass() {
        assert_eq!(check(&frame(60, 0x0800), 60, 1518), Ok(()));
        assert_eq!(check(&frame(1514, 0x86dd), 1514, 1518), Ok(()));
        assert_eq!(check(&frame(14, 0x0806), 14, 1518), Ok(()));
        // 802.3 with a length field and padding.
        assert_eq!(check(&frame(60, 30), 60, 1518), Ok(()));
    }

    #[test]
    fn bad_frames_are_classified() {
        assert_eq!(check(&frame(13, 0), 13, 1518), Err(DropReason::Runt));
        assert_eq!(check(&[], 0, 1518), Err(DropReason::Runt));
        assert_eq!(check(&frame(1600, 0x0800), 1600, 1518), Err(DropReason::Oversize));
        // Truncated by the slot: real length longer than what was received.
        assert_eq!(check(&frame(100, 0x0800), 9000, 9000), Err(DropReason::Oversize));
        let mut f = frame(60, 0x0800);
        f[6] = 0x01;
        assert_eq!(check(&f, 60, 1518), Err(DropReason::Malformed));
        assert_eq!(check(&frame(60, 1520), 60, 1518), Err(DropReason::Malformed));
        assert_eq!(check(&frame(60, 100), 60, 1518), Err(DropReason::Malformed));
    }
}
