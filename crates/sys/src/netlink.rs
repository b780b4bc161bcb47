//! Byte-level netlink helpers shared by the sock_diag and MPTCP (generic
//! netlink) layers: attribute iteration, alignment and native-endian reads.
//! Pure functions over byte slices; they never panic on malformed input.

/// `NLA_F_NESTED` and `NLA_F_NET_BYTEORDER` live in the top two bits of an
/// attribute's type; the rest is the type proper.
pub(crate) const NLA_TYPE_MASK: u16 = 0x3fff;

/// Netlink lengths are padded to 4 bytes (NLMSG_ALIGN / NLA_ALIGN).
pub(crate) const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

pub(crate) fn u16_ne(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_ne_bytes([s[0], s[1]]))
}

pub(crate) fn u32_ne(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

/// A NUL-terminated (or unterminated) C string attribute, lossily decoded.
pub(crate) fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Iterates `struct nlattr`/`rtattr` records (len u16, type u16, payload,
/// padded to 4), yielding (type without flag bits, payload); the error is the
/// byte offset of the first malformed record, after which it stops.
pub(crate) struct Attrs<'a> {
    buf: &'a [u8],
    at: usize,
    failed: bool,
}

impl<'a> Attrs<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Attrs { buf, at: 0, failed: false }
    }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<(u16, &'a [u8]), usize>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.buf.len() {
            return None;
        }
        let at = self.at;
        let (len, kind) = match (u16_ne(self.buf, at), u16_ne(self.buf, at + 2)) {
            (Some(l), Some(k)) => (l as usize, k),
            _ => {
                self.failed = true;
                return Some(Err(at));
            }
        };
        if len < 4 || at + len > self.buf.len() {
            self.failed = true;
            return Some(Err(at));
        }
        let data = &self.buf[at + 4..at + len];
        // The last attribute may omit its padding.
        self.at = (at + align4(len)).min(self.buf.len());
        Some(Ok((kind & NLA_TYPE_MASK, data)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_and_stops_on_garbage() {
        // type 1 "ab" (len 6, padded to 8), nested flag on type 2 with 4 bytes, then a bad length.
        let mut b = vec![6, 0, 1, 0, b'a', b'b', 0, 0];
        b.extend_from_slice(&[8, 0, 2, 0x80, 1, 2, 3, 4]);
        b.extend_from_slice(&[99, 0, 3, 0]);
        let got: Vec<_> = Attrs::new(&b).collect();
        assert_eq!(got, vec![Ok((1, &b"ab"[..])), Ok((2, &[1u8, 2, 3, 4][..])), Err(16)]);
        assert_eq!(Attrs::new(&[1, 0]).collect::<Vec<_>>(), vec![Err(0)]);
        assert_eq!(c_string(b"eth0\0junk"), "eth0");
        assert_eq!(align4(5), 8);
    }
}
