//! The traffic tool's tiny wire protocol: a request header at the start of
//! every connection and a receipt from the receiver.
//!
//! What it is: pure encoding and decoding of two fixed-size messages, with
//! every malformed input turned into an error (never a panic). What it is
//! not: no I/O, no timing.
//!
//! ## Request header (client → server, 56 bytes, big-endian)
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `b"TCPACCEL"` |
//! | 8 | 2 | version (1) |
//! | 10 | 1 | mode: 1 = upload (client sends), 2 = reverse (server sends) |
//! | 11 | 1 | flags: bit 0 = `amount` is a byte count (else a duration in ms); bit 1 = checksum wanted |
//! | 12 | 2 | stream index (0-based) |
//! | 14 | 2 | stream count of the session |
//! | 16 | 8 | session id (random per `send` run; groups parallel streams) |
//! | 24 | 8 | amount: bytes, or milliseconds |
//! | 32 | 8 | reverse mode: `SO_MAX_PACING_RATE` for the server's socket, bytes/s (0 = none) |
//! | 40 | 16 | reverse mode: congestion control name, NUL-padded (empty = default) |
//!
//! ## Receipt (server → client, 48 bytes, big-endian)
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"TAXR"` |
//! | 4 | 1 | status: 0 ok, 1 bad magic, 2 bad version, 3 bad request |
//! | 5 | 1 | flags: bit 0 = sha256 present |
//! | 6 | 2 | reserved (0) |
//! | 8 | 8 | bytes (received in upload mode, sent in reverse mode) |
//! | 16 | 32 | sha256 of those bytes (zero when absent) |
//!
//! Upload: the client sends the header, the data, then a FIN; the server
//! reads to EOF and answers with one receipt. The client's completion time
//! ends when that receipt arrives, i.e. when the receiver has everything.
//! Reverse: the server answers the header with a receipt (status, 0 bytes),
//! then sends the data; in byte-count mode a second receipt follows the
//! data (with the sha256 when asked), in duration mode its FIN ends the data.
//! A rejected header gets a receipt with a non-zero status and no data.

use serde::Serialize;

pub const MAGIC: [u8; 8] = *b"TCPACCEL";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 56;
pub const RECEIPT_MAGIC: [u8; 4] = *b"TAXR";
pub const RECEIPT_LEN: usize = 48;
const FLAG_COUNT: u8 = 0x01;
const FLAG_CHECKSUM: u8 = 0x02;
const CC_LEN: usize = 16;

/// Which side sends the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The client (`send`) sends, the server (`recv`) receives.
    Upload,
    /// The server sends, the client receives (`send --reverse`).
    Reverse,
}

/// How much to send: a byte count, or for how long (in milliseconds on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Amount {
    Bytes(u64),
    Millis(u64),
}

/// The request header; see the module docs for the layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Header {
    pub mode: Mode,
    pub amount: Amount,
    pub checksum: bool,
    pub stream: u16,
    pub streams: u16,
    pub session: u64,
    /// Reverse mode only: pacing cap for the server's socket, bytes/s.
    pub pace_bytes_per_sec: u64,
    /// Reverse mode only: congestion control for the server's socket.
    pub cc: Option<String>,
}

/// Why a header was refused; also the receipt's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum Reject {
    #[error("bad magic (not a tcpaccel sender)")]
    BadMagic,
    #[error("unsupported protocol version")]
    BadVersion,
    #[error("malformed request")]
    BadRequest,
}

impl Reject {
    fn status(self) -> u8 {
        match self {
            Reject::BadMagic => 1,
            Reject::BadVersion => 2,
            Reject::BadRequest => 3,
        }
    }
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_be_bytes());
        b[10] = match self.mode {
            Mode::Upload => 1,
            Mode::Reverse => 2,
        };
        let (flags, amount) = match self.amount {
            Amount::Bytes(n) => (FLAG_COUNT, n),
            Amount::Millis(ms) => (0, ms),
        };
        b[11] = flags | if self.checksum { FLAG_CHECKSUM } else { 0 };
        b[12..14].copy_from_slice(&self.stream.to_be_bytes());
        b[14..16].copy_from_slice(&self.streams.to_be_bytes());
        b[16..24].copy_from_slice(&self.session.to_be_bytes());
        b[24..32].copy_from_slice(&amount.to_be_bytes());
        b[32..40].copy_from_slice(&self.pace_bytes_per_sec.to_be_bytes());
        if let Some(cc) = &self.cc {
            let n = cc.len().min(CC_LEN - 1);
            b[40..40 + n].copy_from_slice(&cc.as_bytes()[..n]);
        }
        b
    }

    /// Decodes a header; any inconsistency is a [`Reject`], never a panic.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, Reject> {
        if b[0..8] != MAGIC {
            return Err(Reject::BadMagic);
        }
        if u16::from_be_bytes([b[8], b[9]]) != VERSION {
            return Err(Reject::BadVersion);
        }
        let mode = match b[10] {
            1 => Mode::Upload,
            2 => Mode::Reverse,
            _ => return Err(Reject::BadRequest),
        };
        let flags = b[11];
        if flags & !(FLAG_COUNT | FLAG_CHECKSUM) != 0 {
            return Err(Reject::BadRequest);
        }
        let be64 = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_be_bytes(a)
        };
        let stream = u16::from_be_bytes([b[12], b[13]]);
        let streams = u16::from_be_bytes([b[14], b[15]]);
        if streams == 0 || stream >= streams {
            return Err(Reject::BadRequest);
        }
        let amount = if flags & FLAG_COUNT != 0 { Amount::Bytes(be64(24)) } else { Amount::Millis(be64(24)) };
        let cc_raw = &b[40..40 + CC_LEN];
        let cc_len = cc_raw.iter().position(|&c| c == 0).unwrap_or(CC_LEN);
        if cc_raw[cc_len..].iter().any(|&c| c != 0) {
            return Err(Reject::BadRequest);
        }
        let cc = match std::str::from_utf8(&cc_raw[..cc_len]) {
            Ok("") => None,
            Ok(s) if s.bytes().all(|c| c.is_ascii_graphic()) => Some(s.to_string()),
            _ => return Err(Reject::BadRequest),
        };
        Ok(Header {
            mode,
            amount,
            checksum: flags & FLAG_CHECKSUM != 0,
            stream,
            streams,
            session: be64(16),
            pace_bytes_per_sec: be64(32),
            cc,
        })
    }
}

/// The receiver's answer; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub status: Result<(), Reject>,
    pub bytes: u64,
    pub sha256: Option<[u8; 32]>,
}

/// A receipt that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad receipt from receiver: {0}")]
pub struct BadReceipt(pub &'static str);

impl Receipt {
    pub fn ok(bytes: u64, sha256: Option<[u8; 32]>) -> Receipt {
        Receipt { status: Ok(()), bytes, sha256 }
    }
    pub fn rejected(why: Reject) -> Receipt {
        Receipt { status: Err(why), bytes: 0, sha256: None }
    }

    pub fn encode(&self) -> [u8; RECEIPT_LEN] {
        let mut b = [0u8; RECEIPT_LEN];
        b[0..4].copy_from_slice(&RECEIPT_MAGIC);
        b[4] = match self.status {
            Ok(()) => 0,
            Err(r) => r.status(),
        };
        if let Some(h) = &self.sha256 {
            b[5] = 1;
            b[16..48].copy_from_slice(h);
        }
        b[8..16].copy_from_slice(&self.bytes.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; RECEIPT_LEN]) -> Result<Receipt, BadReceipt> {
        if b[0..4] != RECEIPT_MAGIC {
            return Err(BadReceipt("bad magic"));
        }
        let status = match b[4] {
            0 => Ok(()),
            1 => Err(Reject::BadMagic),
            2 => Err(Reject::BadVersion),
            3 => Err(Reject::BadRequest),
            _ => return Err(BadReceipt("unknown status")),
        };
        let mut n = [0u8; 8];
        n.copy_from_slice(&b[8..16]);
        let sha256 = match b[5] {
            0 => None,
            1 => {
                let mut h = [0u8; 32];
                h.copy_from_slice(&b[16..48]);
                Some(h)
            }
            _ => return Err(BadReceipt("unknown flags")),
        };
        Ok(Receipt { status, bytes: u64::from_be_bytes(n), sha256 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            mode: Mode::Reverse,
            amount: Amount::Bytes(123_456_789_012),
            checksum: true,
            stream: 2,
            streams: 4,
            session: 0xdead_beef_0042,
            pace_bytes_per_sec: 62_500_000,
            cc: Some("cubic".into()),
        }
    }

    #[test]
    fn header_round_trips_and_has_documented_layout() {
        let h = sample();
        let b = h.encode();
        assert_eq!(&b[0..8], b"TCPACCEL");
        assert_eq!(&b[8..10], &[0, 1]);
        assert_eq!(b[10], 2);
        assert_eq!(b[11], 0x03);
        assert_eq!(&b[40..45], b"cubic");
        assert_eq!(Header::decode(&b), Ok(h));
        let d = Header {
            mode: Mode::Upload,
            amount: Amount::Millis(2000),
            checksum: false,
            cc: None,
            ..sample()
        };
        assert_eq!(Header::decode(&d.encode()), Ok(d));
    }

    #[test]
    fn header_rejections() {
        let good = sample().encode();
        let mut b = good;
        b[0] = b'X';
        assert_eq!(Header::decode(&b), Err(Reject::BadMagic));
        let mut b = good;
        b[9] = 2;
        assert_eq!(Header::decode(&b), Err(Reject::BadVersion));
        let mut b = good;
        b[10] = 9;
        assert_eq!(Header::decode(&b), Err(Reject::BadRequest));
        let mut b = good;
        b[11] = 0x80;
        assert_eq!(Header::decode(&b), Err(Reject::BadRequest));
        let mut b = good;
        b[13] = 4; // stream 4 of 4
        assert_eq!(Header::decode(&b), Err(Reject::BadRequest));
        let mut b = good;
        b[50] = b'x'; // text after the NUL terminator
        assert_eq!(Header::decode(&b), Err(Reject::BadRequest));
        let mut b = good;
        b[41] = 0xff; // not UTF-8
        assert_eq!(Header::decode(&b), Err(Reject::BadRequest));
    }

    #[test]
    fn receipt_round_trips() {
        let r = Receipt::ok(42, Some([7u8; 32]));
        assert_eq!(Receipt::decode(&r.encode()), Ok(r));
        let r = Receipt::rejected(Reject::BadVersion);
        assert_eq!(Receipt::decode(&r.encode()), Ok(r));
        let mut b = Receipt::ok(1, None).encode();
        b[4] = 9;
        assert!(Receipt::decode(&b).is_err());
        b[0] = 0;
        assert_eq!(Receipt::decode(&b), Err(BadReceipt("bad magic")));
    }
}
