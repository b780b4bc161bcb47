//! What an installed `tcpaccel` needs besides itself: the LD_PRELOAD shim
//! that `tcpaccel run` preloads, shell completions and man pages, the last
//! two generated from the clap definitions so they never drift from `--help`.
//!
//! The shim is embedded in the binary at build time (see build.rs) because
//! `cargo install` installs executables only. `run` prefers a shim file it
//! finds on disk (beside the binary after `cargo build`, or under
//! `../lib/tcpaccel/` in the .deb) and otherwise writes the embedded copy
//! once to a private cache file named by its content hash (here). The
//! `tcpaccel shim` command, which asks `run` where it finds one, is
//! `cmd::shim`: this module does not depend on `run`.

use crate::exit::{self, Verdict};
use anyhow::Context;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The shim built from this source tree (crates/preload), as bytes.
pub(crate) static SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libtcpaccel_preload.so"));

pub(crate) const SHIM_FILE: &str = "libtcpaccel_preload.so";

#[derive(clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish, powershell.
    shell: clap_complete::Shell,
}

#[derive(clap::Args)]
pub(crate) struct ManArgs {
    /// Directory to write tcpaccel.1 and one page per subcommand (tcpaccel-lab-run.1, …) into.
    dir: PathBuf,
}

/// Prints the completion script for `shell` to stdout.
pub(crate) fn completions(a: CompletionsArgs, mut cli: clap::Command) -> anyhow::Result<Verdict> {
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cli, "tcpaccel", &mut buf);
    write_stdout(&buf)?;
    Ok(Verdict::Ok)
}

/// Every page a `tcpaccel` man tree has: (file name, roff text).
pub(crate) fn man_pages(cli: clap::Command) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut cli = cli;
    // Propagates global arguments (--log) and the version into the subcommands.
    cli.build();
    let mut pages = Vec::new();
    collect_pages(&cli, "tcpaccel", &mut pages)?;
    Ok(pages)
}

fn collect_pages(cmd: &clap::Command, name: &str, pages: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
    // The page is named after the full command (tcpaccel-lab-run), its synopsis
    // shows how it is typed (tcpaccel lab run).
    let page = cmd.clone().display_name(name).bin_name(name.replace('-', " "));
    let mut roff = Vec::new();
    clap_mangen::Man::new(page)
        .title(name.to_uppercase())
        .source(concat!("tcpaccel ", env!("CARGO_PKG_VERSION")))
        .manual("tcpaccel manual")
        .render(&mut roff)
        .with_context(|| format!("rendering the man page of {name}"))?;
    pages.push((format!("{name}.1"), roff));
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        collect_pages(sub, &format!("{name}-{}", sub.get_name()), pages)?;
    }
    Ok(())
}

/// Writes every man page into `DIR` and lists the files written.
pub(crate) fn man(a: ManArgs, cli: clap::Command) -> anyhow::Result<Verdict> {
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let mut list = String::new();
    for (file, roff) in man_pages(cli)? {
        let path = a.dir.join(&file);
        std::fs::write(&path, roff).with_context(|| format!("writing {}", path.display()))?;
        list.push_str(&format!("{}\n", path.display()));
    }
    write_stdout(list.as_bytes())?;
    Ok(Verdict::Ok)
}

pub(crate) fn write_stdout(b: &[u8]) -> anyhow::Result<()> {
    match std::io::stdout().lock().write_all(b) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

/// 64-bit FNV-1a: names a shim version in the cache (identity is checked byte for byte).
fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| (h ^ u64::from(*x)).wrapping_mul(0x0100_0000_01b3))
}

/// `$XDG_CACHE_HOME/tcpaccel`, else `$HOME/.cache/tcpaccel` (absolute paths only, per the XDG spec).
pub(crate) fn cache_dir() -> Option<PathBuf> {
    let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    std::env::var_os("XDG_CACHE_HOME")
        .and_then(abs)
        .or_else(|| std::env::var_os("HOME").and_then(abs).map(|h| h.join(".cache")))
        .map(|c| c.join("tcpaccel"))
}

/// The embedded shim as a file in `dir` (created 0700 if missing): reused when
/// a file of that name holds exactly these bytes, else written anew.
pub(crate) fn cached_shim(dir: &Path, shim: &[u8]) -> anyhow::Result<PathBuf> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating the shim cache {}", dir.display()))?;
    let path = dir.join(format!("libtcpaccel_preload-{:016x}.so", fnv1a(shim)));
    if std::fs::read(&path).is_ok_and(|b| b == shim) {
        return Ok(path);
    }
    write_atomically(&path, shim).with_context(|| format!("writing the shim to {}", path.display()))?;
    Ok(path)
}

/// Writes through a temporary file and a rename, so a concurrent `run` never
/// preloads a half-written library.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}.{}.tmp", SHIM_FILE, std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The embedded shim from the cache, or a usage error saying where it looked.
pub(crate) fn embedded_shim() -> anyhow::Result<PathBuf> {
    let dir = cache_dir().ok_or_else(|| {
        exit::usage(
            "neither XDG_CACHE_HOME nor HOME is an absolute path, so the embedded shim has nowhere to go; \
             pass --preload PATH or set TCPACCEL_PRELOAD_LIB (`tcpaccel shim --out PATH` writes one)",
        )
    })?;
    cached_shim(&dir, SHIM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_shim_is_a_shared_object() {
        // ELF magic and type ET_DYN (3): a library LD_PRELOAD can load.
        assert_eq!(&SHIM[..4], b"\x7fELF");
        assert_eq!(u16::from_le_bytes([SHIM[16], SHIM[17]]), 3);
        // It exports the hooks the shim interposes.
        let has = |sym: &[u8]| SHIM.windows(sym.len()).any(|w| w == sym);
        assert!(has(b"connect\0") && has(b"socket\0"), "no hook symbols in the embedded shim");
    }

    #[test]
    fn cache_reuses_identical_and_replaces_different_files() {
        let dir = std::env::temp_dir().join(format!("tcpaccel-shimcache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let a = cached_shim(&dir, b"version one").unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"version one");
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "the cache directory is private");
        // Same bytes: same file, left alone.
        let before = std::fs::metadata(&a).unwrap().modified().unwrap();
        assert_eq!(cached_shim(&dir, b"version one").unwrap(), a);
        assert_eq!(std::fs::metadata(&a).unwrap().modified().unwrap(), before);
        // A file of that name with other contents (truncated, tampered) is rewritten.
        std::fs::write(&a, b"version").unwrap();
        assert_eq!(cached_shim(&dir, b"version one").unwrap(), a);
        assert_eq!(std::fs::read(&a).unwrap(), b"version one");
        // Another version gets another name.
        let b = cached_shim(&dir, b"version two").unwrap();
        assert_ne!(a, b);
        // No temporary files left behind.
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
