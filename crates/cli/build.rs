//! Builds the LD_PRELOAD shim (crates/preload, a cdylib) and embeds it in the
//! `tcpaccel` binary, so that `tcpaccel run` works from a binary installed by
//! `cargo install --path crates/cli`, which installs executables only.
//!
//! Why a nested cargo: a package cannot depend on another package's cdylib
//! on stable Cargo (artifact dependencies are unstable), and the shim needs
//! its own dependency graph (tcpaccel-core, tcpaccel-sys). The nested build
//! uses its own target directory under OUT_DIR, so it never waits on the
//! outer build's lock, and always the release profile without debug info:
//! the shim runs inside other programs and is copied into every binary.
//!
//! `TCPACCEL_EMBED_SHIM=/path/libtcpaccel_preload.so` embeds a prebuilt
//! shim instead (packagers, builds without a second cargo run).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir.join("../..");
    let dest = out.join("libtcpaccel_preload.so");

    println!("cargo:rerun-if-env-changed=TCPACCEL_EMBED_SHIM");
    if let Some(prebuilt) = std::env::var_os("TCPACCEL_EMBED_SHIM") {
        let prebuilt = PathBuf::from(prebuilt);
        println!("cargo:rerun-if-changed={}", prebuilt.display());
        copy(&prebuilt, &dest);
        return;
    }
    for dir in ["crates/preload", "crates/core", "crates/sys"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).join("src").display());
        println!("cargo:rerun-if-changed={}", root.join(dir).join("Cargo.toml").display());
    }
    println!("cargo:rerun-if-changed={}", root.join("Cargo.lock").display());

    let target_dir = out.join("shim-target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--release")
        .args(["-p", "tcpaccel-preload", "--lib"])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo")
        // The outer build's wrappers (clippy) and target dir are not ours.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR");
    let (target, host) =
        (std::env::var("TARGET").unwrap_or_default(), std::env::var("HOST").unwrap_or_default());
    let built = if target != host && !target.is_empty() {
        cmd.args(["--target", &target]);
        target_dir.join(&target).join("release/libtcpaccel_preload.so")
    } else {
        target_dir.join("release/libtcpaccel_preload.so")
    };
    let status = cmd.status().unwrap_or_else(|e| panic!("running cargo to build the preload shim: {e}"));
    if !status.success() {
        panic!(
            "building the preload shim (cargo build --release -p tcpaccel-preload) failed: {status}; \
             set TCPACCEL_EMBED_SHIM=PATH to embed a prebuilt libtcpaccel_preload.so instead"
        );
    }
    copy(&built, &dest);
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to)
        .unwrap_or_else(|e| panic!("copying the shim {} to {}: {e}", from.display(), to.display()));
}
