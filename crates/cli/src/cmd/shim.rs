//! `tcpaccel shim`: where `tcpaccel run` finds the LD_PRELOAD shim, or the
//! embedded shim written to a file of the user's choice.
//!
//! Its own module because it joins the two sides: where `run` looks
//! (`run::find_shim`) and the embedded copy (`install`), which therefore
//! need not know each other's command.

use crate::cmd::install::{write_atomically, write_stdout, SHIM};
use crate::exit::Verdict;
use anyhow::Context;
use std::path::PathBuf;

#[derive(clap::Args)]
pub(crate) struct ShimArgs {
    /// Write the embedded shim to this file instead (e.g. to install it system-wide).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Prints the shim `run` would preload (writing the embedded copy to the cache
/// if no shim file is installed), or writes the embedded shim to `--out`.
pub(crate) fn shim(a: ShimArgs) -> anyhow::Result<Verdict> {
    let path = match a.out {
        Some(out) => {
            write_atomically(&out, SHIM).with_context(|| format!("writing the shim to {}", out.display()))?;
            out
        }
        None => crate::cmd::run::find_shim(None)?,
    };
    write_stdout(format!("{}\n", path.display()).as_bytes())?;
    Ok(Verdict::Ok)
}
