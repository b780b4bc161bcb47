//! The 128-bit values that name a session and bind its data streams to it:
//! [`SessionId`] (shown in status) and [`Token`] (secret). Shared by the wire
//! protocol ([`crate::proto`]) and the status records ([`crate::status`]),
//! which is why they live apart from both (no import circle between them).

use serde::{Deserialize, Serialize};

/// A hex field that is not the expected number of lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: expected {len} lowercase hex digits, got {got:?}")]
pub struct HexError {
    pub what: &'static str,
    pub len: usize,
    pub got: String,
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

            pub fn from_hex(s: &str) -> Result<$name, HexError> {
                let bad = || HexError { what: $what, len: 32, got: s.chars().take(40).collect() };
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
