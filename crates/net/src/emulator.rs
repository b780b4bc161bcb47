//! The bridge to `tcpaccel-emu`: turns an emulated link's two [`Direction`]s
//! into the emulator's configuration and starts it inside the emulator
//! namespace. Nothing else in this crate knows the emulator's types.

use crate::error::{Error, Result};
use crate::spec::Direction;

/// A running emulator.
#[derive(Debug)]
pub struct EmuHandle {
    _private: (),
}

/// What an emulator reports when it stops.
pub type EmuSummary = serde_json::Value;

/// Starts the emulator between `if_a` and `if_b` inside namespace `ns`.
pub(crate) fn start(
    _ns: &str,
    link: &str,
    _if_a: &str,
    _if_b: &str,
    _a_to_b: &Direction,
    _b_to_a: &Direction,
) -> Result<EmuHandle> {
    Err(Error::Emulator { link: link.to_string(), msg: "the emulator crate is not available yet".into() })
}

/// Stops an emulator and returns its summary.
pub(crate) fn stop(_h: EmuHandle) -> Result<EmuSummary> {
    Ok(serde_json::Value::Null)
}
