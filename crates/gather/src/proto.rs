//! The gather wire protocol, version 2 (described for humans in
//! `docs/gather-protocol.md`): the connection preface, the JSON control
//! messages and their length-prefixed framing, the session id and token that
//! bind a data stream to its client, the binary data-frame header, and the
//! CRC-32 used for chunk checksums.
//!
//! What it is: pure encoding and decoding; every malformed input becomes a
//! [`ProtoError`], never a panic. What it is not: no sockets, no timing.

use serde::{Deserialize, Serialize};

/// The protocol version this build speaks.
///
/// Version 2 (this one) replaced version 1's consecutive 64-bit session
/// numbers with 128-bit random session ids plus a secret per-session token
/// that every data stream presents in its attach record, made `sha256`
/// mandatory in `end`, and added the server's `received` heartbeat.
pub const VERSION: u16 = 2;
/// First four bytes of every connection.
pub const MAGIC: [u8; 4] = *b"TAGP";
/// Size of the connection preface.
pub const PREFACE_LEN: usize = 8;
/// Size of a data stream's attach record (after the preface): session id
/// (16), token (16), stream index (u16), reserved (u16).
pub const ATTACH_LEN: usize = 36;
/// Size of a data-frame header.
pub const FRAME_HEADER_LEN: usize = 32;
/// Largest control message accepted (a status reply for many clients is the biggest).
pub const MAX_CONTROL_LEN: u32 = 16 << 20;
/// Largest chunk any server may ask for.
pub const MAX_CHUNK: u32 = 4 << 20;

/// Errors from decoding what a peer sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    #[error("bad magic {0:02x?} (not a gather peer)")]
    BadMagic([u8; 4]),
    #[error("protocol version {theirs} is not supported (this side speaks {ours})")]
    Version { theirs: u16, ours: u16 },
    #[error("unknown connection kind {0}")]
    BadKind(u8),
    #[error("unknown frame type {0}")]
    BadFrameType(u8),
    #[error("control message of {0} bytes exceeds the limit of {MAX_CONTROL_LEN}")]
    TooLong(u32),
    #[error("undecodable control message: {0}")]
    Json(String),
    #[error("chunk of {len} bytes exceeds the negotiated chunk size {max}")]
    ChunkTooLarge { len: u32, max: u32 },
    #[error("frame for session tag {got:016x} on a stream attached to session tag {want:016x}")]
    WrongSession { got: u64, want: u64 },
    #[error("frame names stream {got} on stream {want}")]
    WrongStream { got: u16, want: u16 },
    #[error("checksum mismatch at offset {offset}: header {header:08x}, data {data:08x}")]
    Checksum { offset: u64, header: u32, data: u32 },
    #[error("reserved bits set in {0}")]
    Reserved(&'static str),
    #[error("{what}: expected {len} lowercase hex digits, got {got:?}")]
    Hex { what: &'static str, len: usize, got: String },
}

/// 128 bits, sent as 32 lowercase hex digits in JSON and as 16 raw bytes in
/// the attach record. Two uses: [`SessionId`] names a client's session (it
/// appears in status output), [`Token`] proves a data stream belongs to it
/// (it is never shown).
macro_rules! id128 {
    ($name:ident, $what:literal) => {
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub [u8; 16]);

        impl $name {
            /// 128 bits from the operating system's random source.
            pub fn random() -> Result<$name, getrandom::Error> {
                let mut b = [0u8; 16];
                getrandom::fill(&mut b)?;
                Ok($name(b))
            }

            pub fn to_hex(&self) -> String {
                hex::encode(self.0)
            }

            pub fn from_hex(s: &str) -> Result<$name, ProtoError> {
                let bad = || ProtoError::Hex { what: $what, len: 32, got: s.chars().take(40).collect() };
                if s.len() != 32 || !s.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) {
                    return Err(bad());
                }
                let mut b = [0u8; 16];
                hex::decode_to_slice(s, &mut b).map_err(|_| bad())?;
                Ok($name(b))
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_hex())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let s = String::deserialize(d)?;
                $name::from_hex(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

id128!(SessionId, "session id");
id128!(Token, "token");

impl SessionId {
    /// The first 8 bytes as a big-endian u64: the `session` field of every
    /// data-frame header, a check that a frame is on the stream it was meant for.
    pub fn tag(&self) -> u64 {
        let b = &self.0;
        u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl std::fmt::Debug for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SessionId({})", self.to_hex())
    }
}

impl Token {
    /// Compares in time independent of where the tokens differ, so the
    /// server's answer time says nothing about how much of a guess was right.
    pub fn matches(&self, other: &Token) -> bool {
        self.0.iter().zip(other.0.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A secret: never printed.
        f.write_str("Token(..)")
    }
}

/// What a connection is for, sent in its preface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One per client: hello, parameters, stream-count commands, end of data.
    Control = 1,
    /// Carries framed chunks of one client.
    Data = 2,
    /// A one-shot status query (`tcpaccel gather status`).
    Status = 3,
}

/// `MAGIC`, version (u16 BE), kind (u8), reserved (u8, 0).
pub fn encode_preface(version: u16, kind: Kind) -> [u8; PREFACE_LEN] {
    let v = version.to_be_bytes();
    [MAGIC[0], MAGIC[1], MAGIC[2], MAGIC[3], v[0], v[1], kind as u8, 0]
}

/// Decodes a preface. The magic is checked first so that a stranger gets
/// [`ProtoError::BadMagic`]; then the version, so a peer of another version is
/// told so before anything else of its preface is interpreted.
pub fn decode_preface(b: &[u8; PREFACE_LEN]) -> Result<Kind, ProtoError> {
    let magic = [b[0], b[1], b[2], b[3]];
    if magic != MAGIC {
        return Err(ProtoError::BadMagic(magic));
    }
    let version = u16::from_be_bytes([b[4], b[5]]);
    if version != VERSION {
        return Err(ProtoError::Version { theirs: version, ours: VERSION });
    }
    if b[7] != 0 {
        return Err(ProtoError::Reserved("preface"));
    }
    match b[6] {
        1 => Ok(Kind::Control),
        2 => Ok(Kind::Data),
        3 => Ok(Kind::Status),
        k => Err(ProtoError::BadKind(k)),
    }
}

/// A data stream's attach record: session id (16 bytes), token (16 bytes),
/// stream index (u16 BE), reserved (u16, 0).
pub fn encode_attach(session: &SessionId, token: &Token, stream: u16) -> [u8; ATTACH_LEN] {
    let mut b = [0u8; ATTACH_LEN];
    b[..16].copy_from_slice(&session.0);
    b[16..32].copy_from_slice(&token.0);
    b[32..34].copy_from_slice(&stream.to_be_bytes());
    b
}

pub fn decode_attach(b: &[u8; ATTACH_LEN]) -> Result<(SessionId, Token, u16), ProtoError> {
    if b[34] != 0 || b[35] != 0 {
        return Err(ProtoError::Reserved("attach"));
    }
    let mut session = [0u8; 16];
    session.copy_from_slice(&b[..16]);
    let mut token = [0u8; 16];
    token.copy_from_slice(&b[16..32]);
    Ok((SessionId(session), Token(token), u16::from_be_bytes([b[32], b[33]])))
}

/// A control message. Every one is a JSON object with a `type` field, sent as
/// a u32 BE length followed by that many bytes of UTF-8 JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    /// Client → server, first message on the control connection.
    Hello {
        /// The client's name; a file per client in the sink is named after it.
        client_id: String,
        class: String,
        /// Optional lower target (bit/s); the class target applies if absent or larger.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target_bps: Option<u64>,
    },
    /// Server → client: accepted, with the parameters to use.
    Welcome {
        session: SessionId,
        /// The secret each data stream presents in its attach record.
        token: Token,
        streams: u32,
        chunk_size: u32,
        checksum: bool,
        /// How often the client reports progress.
        interval_ms: u64,
        target_bps: u64,
        priority: u32,
    },
    /// Server → client: have exactly this many data streams open.
    SetStreams { streams: u32 },
    /// Client → server, once per interval: bytes handed to data streams so
    /// far, and whether the source had nothing to send for part of the interval.
    Progress { sent: u64, app_limited: bool },
    /// Client → server: the data ends at `total` bytes (explicit end of
    /// data), and its SHA-256 is `sha256` (64 lowercase hex digits).
    End { total: u64, sha256: String },
    /// Server → client, once per interval: bytes received and written in
    /// order so far (a heartbeat the client's timeout watches).
    Received { bytes: u64 },
    /// Server → client: everything up to `total` arrived and was written.
    Done { total: u64, sha256: String, complete: bool },
    /// Either way: a refusal or failure; the sender closes after it.
    Error {
        code: ErrorCode,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server_version: Option<u16>,
    },
    /// Server → status client: the per-client view.
    StatusReply { clients: Vec<crate::status::ClientStatus> },
}

/// Why a peer was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    Version,
    Malformed,
    UnknownClass,
    Duplicate,
    Capacity,
    Mismatch,
    StreamLost,
    Internal,
}

/// The wire name (`unknown_class`), for messages.
impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = serde_json::to_value(self).ok();
        f.write_str(v.as_ref().and_then(|v| v.as_str()).unwrap_or("unknown"))
    }
}

/// Length prefix plus JSON.
pub fn encode_control(msg: &Control) -> Vec<u8> {
    // Serializing these plain enums cannot fail (no maps with non-string keys).
    let body = serde_json::to_vec(msg).unwrap_or_else(|_| b"{}".to_vec());
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Checks a control message's length prefix.
pub fn control_len(prefix: [u8; 4]) -> Result<usize, ProtoError> {
    let n = u32::from_be_bytes(prefix);
    if n > MAX_CONTROL_LEN {
        return Err(ProtoError::TooLong(n));
    }
    Ok(n as usize)
}

pub fn decode_control(body: &[u8]) -> Result<Control, ProtoError> {
    serde_json::from_slice(body).map_err(|e| ProtoError::Json(e.to_string()))
}

/// Data frame types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameType {
    /// A chunk of `length` bytes follows the header.
    Chunk = 1,
    /// End of this stream: no more frames; `offset` and `length` are 0.
    EndOfStream = 2,
}

/// Frame flag: `checksum` holds the CRC-32 of the chunk.
pub const FLAG_CHECKSUM: u8 = 1;

/// The 32-byte data-frame header (big-endian):
/// type u8, flags u8, stream u16, session u64, offset u64, length u32,
/// checksum u32, reserved u32 (0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: FrameType,
    pub flags: u8,
    pub stream: u16,
    pub session: u64,
    pub offset: u64,
    pub length: u32,
    pub checksum: u32,
}

impl FrameHeader {
    pub fn chunk(session: u64, stream: u16, offset: u64, data: &[u8], checksum: bool) -> FrameHeader {
        FrameHeader {
            kind: FrameType::Chunk,
            flags: if checksum { FLAG_CHECKSUM } else { 0 },
            stream,
            session,
            offset,
            length: data.len() as u32,
            checksum: if checksum { crc32(data) } else { 0 },
        }
    }

    pub fn end(session: u64, stream: u16) -> FrameHeader {
        FrameHeader {
            kind: FrameType::EndOfStream,
            flags: 0,
            stream,
            session,
            offset: 0,
            length: 0,
            checksum: 0,
        }
    }

    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut b = [0u8; FRAME_HEADER_LEN];
        b[0] = self.kind as u8;
        b[1] = self.flags;
        b[2..4].copy_from_slice(&self.stream.to_be_bytes());
        b[4..12].copy_from_slice(&self.session.to_be_bytes());
        b[12..20].copy_from_slice(&self.offset.to_be_bytes());
        b[20..24].copy_from_slice(&self.length.to_be_bytes());
        b[24..28].copy_from_slice(&self.checksum.to_be_bytes());
        b
    }

    /// Decodes and checks a header against the stream it arrived on.
    pub fn decode(
        b: &[u8; FRAME_HEADER_LEN],
        session: u64,
        stream: u16,
        max_chunk: u32,
    ) -> Result<FrameHeader, ProtoError> {
        let kind = match b[0] {
            1 => FrameType::Chunk,
            2 => FrameType::EndOfStream,
            t => return Err(ProtoError::BadFrameType(t)),
        };
        let flags = b[1];
        if flags & !FLAG_CHECKSUM != 0 || b[28..32] != [0; 4] {
            return Err(ProtoError::Reserved("frame header"));
        }
        let u64_at = |i: usize| {
            u64::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]])
        };
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let h = FrameHeader {
            kind,
            flags,
            stream: u16::from_be_bytes([b[2], b[3]]),
            session: u64_at(4),
            offset: u64_at(12),
            length: u32_at(20),
            checksum: u32_at(24),
        };
        if h.session != session {
            return Err(ProtoError::WrongSession { got: h.session, want: session });
        }
        if h.stream != stream {
            return Err(ProtoError::WrongStream { got: h.stream, want: stream });
        }
        if h.length > max_chunk {
            return Err(ProtoError::ChunkTooLarge { len: h.length, max: max_chunk });
        }
        if kind == FrameType::EndOfStream && (h.length != 0 || h.offset != 0 || flags != 0) {
            return Err(ProtoError::Reserved("end-of-stream frame"));
        }
        Ok(h)
    }

    /// Verifies the chunk against the header's checksum, when it has one.
    pub fn verify(&self, data: &[u8]) -> Result<(), ProtoError> {
        if self.flags & FLAG_CHECKSUM != 0 {
            let c = crc32(data);
            if c != self.checksum {
                return Err(ProtoError::Checksum { offset: self.offset, header: self.checksum, data: c });
            }
        }
        Ok(())
    }
}

/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, initial value and
/// final XOR 0xFFFFFFFF), as zlib's `crc32()` computes it: `crc32fast`.
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// Checks a `sha256` field: 64 lowercase hex digits.
pub fn check_sha256(s: &str) -> Result<(), ProtoError> {
    if s.len() == 64 && s.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) {
        Ok(())
    } else {
        Err(ProtoError::Hex { what: "sha256", len: 64, got: s.chars().take(80).collect() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_known_value() {
        // The standard check value of CRC-32/ISO-HDLC (zlib's crc32).
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        // zlib.crc32(b"The quick brown fox jumps over the lazy dog") in Python.
        assert_eq!(crc32(b"The quick brown fox jumps over the lazy dog"), 0x414F_A339);
    }

    /// The bytes on the wire for one chunk frame, fixed: a peer built from
    /// the document (zlib's CRC-32, big-endian fields) produces exactly these,
    /// so swapping the CRC implementation cannot change the protocol.
    #[test]
    fn chunk_header_wire_vector() {
        let session = SessionId([0x11; 16]);
        let h = FrameHeader::chunk(session.tag(), 7, 0x0102_0304_0506_0708, b"123456789", true);
        let want: [u8; FRAME_HEADER_LEN] = [
            1, 1, 0, 7, // chunk, checksum flag, stream 7
            0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, // session tag
            1, 2, 3, 4, 5, 6, 7, 8, // offset
            0, 0, 0, 9, // length
            0xCB, 0xF4, 0x39, 0x26, // CRC-32 of "123456789"
            0, 0, 0, 0,
        ];
        assert_eq!(h.encode(), want);
    }

    #[test]
    fn ids_tokens_and_attach() {
        let a = SessionId::random().unwrap();
        let b = SessionId::random().unwrap();
        assert_ne!(a, b, "two draws of 128 random bits");
        assert_eq!(SessionId::from_hex(&a.to_hex()).unwrap(), a);
        assert_eq!(serde_json::to_string(&a).unwrap(), format!("\"{}\"", a.to_hex()));
        assert!(SessionId::from_hex("00").is_err());
        assert!(SessionId::from_hex(&"A".repeat(32)).is_err(), "uppercase is not the encoding");
        let t = Token::random().unwrap();
        assert!(t.matches(&t));
        assert!(!t.matches(&Token([0; 16])));
        assert_eq!(format!("{t:?}"), "Token(..)");
        let rec = encode_attach(&a, &t, 513);
        assert_eq!(&rec[..16], &a.0);
        assert_eq!(&rec[32..], &[2, 1, 0, 0]);
        let (s, k, i) = decode_attach(&rec).unwrap();
        assert_eq!((s, i), (a, 513));
        assert!(k.matches(&t));
        let mut bad = rec;
        bad[35] = 1;
        assert_eq!(decode_attach(&bad).unwrap_err(), ProtoError::Reserved("attach"));
        check_sha256(&"0f".repeat(32)).unwrap();
        assert!(check_sha256(&"0F".repeat(32)).is_err());
        assert!(check_sha256("abc").is_err());
    }

    #[test]
    fn preface_round_trip_and_refusals() {
        assert_eq!(decode_preface(&encode_preface(VERSION, Kind::Data)), Ok(Kind::Data));
        assert_eq!(
            decode_preface(&encode_preface(7, Kind::Control)),
            Err(ProtoError::Version { theirs: 7, ours: VERSION })
        );
        assert!(matches!(decode_preface(b"GET / HT"), Err(ProtoError::BadMagic(_))));
        let mut p = encode_preface(VERSION, Kind::Status);
        p[6] = 9;
        assert_eq!(decode_preface(&p), Err(ProtoError::BadKind(9)));
    }

    #[test]
    fn frame_round_trip_and_checks() {
        let data = b"hello gather";
        let h = FrameHeader::chunk(42, 3, 1000, data, true);
        let b = h.encode();
        let d = FrameHeader::decode(&b, 42, 3, 64).unwrap();
        assert_eq!(d, h);
        d.verify(data).unwrap();
        assert!(matches!(d.verify(b"hello gathex"), Err(ProtoError::Checksum { offset: 1000, .. })));
        assert_eq!(FrameHeader::decode(&b, 41, 3, 64), Err(ProtoError::WrongSession { got: 42, want: 41 }));
        assert_eq!(FrameHeader::decode(&b, 42, 2, 64), Err(ProtoError::WrongStream { got: 3, want: 2 }));
        assert_eq!(FrameHeader::decode(&b, 42, 3, 8), Err(ProtoError::ChunkTooLarge { len: 12, max: 8 }));
        let mut bad = b;
        bad[0] = 0xee;
        assert_eq!(FrameHeader::decode(&bad, 42, 3, 64), Err(ProtoError::BadFrameType(0xee)));
        let e = FrameHeader::end(42, 3);
        assert_eq!(FrameHeader::decode(&e.encode(), 42, 3, 64).unwrap().kind, FrameType::EndOfStream);
    }

    #[test]
    fn control_round_trip() {
        let m = Control::Hello { client_id: "a".into(), class: "high".into(), target_bps: None };
        let b = encode_control(&m);
        let n = control_len([b[0], b[1], b[2], b[3]]).unwrap();
        assert_eq!(n, b.len() - 4);
        assert_eq!(decode_control(&b[4..]).unwrap(), m);
        assert!(decode_control(b"{\"type\":\"nope\"}").is_err());
        assert!(decode_control(b"\xff\xfe").is_err());
        assert_eq!(
            control_len((MAX_CONTROL_LEN + 1).to_be_bytes()),
            Err(ProtoError::TooLong(MAX_CONTROL_LEN + 1))
        );
    }
}
