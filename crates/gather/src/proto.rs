//! The gather wire protocol, version 1 (described for humans in
//! `docs/gather-protocol.md`): the connection preface, the JSON control
//! messages and their length-prefixed framing, the binary data-frame header,
//! and the CRC-32 used for optional chunk checksums.
//!
//! What it is: pure encoding and decoding; every malformed input becomes a
//! [`ProtoError`], never a panic. What it is not: no sockets, no timing.

use serde::{Deserialize, Serialize};

/// The protocol version this build speaks.
pub const VERSION: u16 = 1;
/// First four bytes of every connection.
pub const MAGIC: [u8; 4] = *b"TAGP";
/// Size of the connection preface.
pub const PREFACE_LEN: usize = 8;
/// Size of a data stream's attach record (after the preface).
pub const ATTACH_LEN: usize = 12;
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
    #[error("frame for session {got} on a stream attached to session {want}")]
    WrongSession { got: u64, want: u64 },
    #[error("frame names stream {got} on stream {want}")]
    WrongStream { got: u16, want: u16 },
    #[error("checksum mismatch at offset {offset}: header {header:08x}, data {data:08x}")]
    Checksum { offset: u64, header: u32, data: u32 },
    #[error("reserved bits set in {0}")]
    Reserved(&'static str),
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

/// A data stream's attach record: session (u64 BE), stream index (u16 BE), reserved (u16, 0).
pub fn encode_attach(session: u64, stream: u16) -> [u8; ATTACH_LEN] {
    let mut b = [0u8; ATTACH_LEN];
    b[..8].copy_from_slice(&session.to_be_bytes());
    b[8..10].copy_from_slice(&stream.to_be_bytes());
    b
}

pub fn decode_attach(b: &[u8; ATTACH_LEN]) -> Result<(u64, u16), ProtoError> {
    if b[10] != 0 || b[11] != 0 {
        return Err(ProtoError::Reserved("attach"));
    }
    let session = u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    Ok((session, u16::from_be_bytes([b[8], b[9]])))
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
        session: u64,
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
    /// Client → server: the data ends at `total` bytes (explicit end of data).
    End {
        total: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
    },
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
    Internal,
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

/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), as zlib computes it.
pub fn crc32(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    let mut c = !0u32;
    for &b in data {
        c = TABLE[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_known_value() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
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
