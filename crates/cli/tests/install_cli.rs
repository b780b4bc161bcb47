//! What an installed `tcpaccel` brings along: the shim built into the binary
//! (found by `run` with no library on disk, as after `cargo install`), shell
//! completions and man pages generated from the clap definitions.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::bin;

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("tcpaccel-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The binary alone in `dir/bin` (no shim beside it, no deps/), as `cargo install` leaves it.
fn lone_binary(dir: &Path) -> PathBuf {
    let b = dir.join("bin");
    std::fs::create_dir_all(&b).unwrap();
    let exe = b.join("tcpaccel");
    std::fs::copy(bin(), &exe).unwrap();
    exe
}

/// Runs `exe args` with HOME set to `home` and nothing else pointing at a shim.
fn run_installed(exe: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    Command::new(exe)
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CACHE_HOME")
        .env_remove("TCPACCEL_PRELOAD_LIB")
        .env_remove("LD_PRELOAD")
        .output()
        .expect("spawn the copied tcpaccel")
}

#[test]
fn run_preloads_the_built_in_shim_when_none_is_installed() {
    let scratch = Scratch::new("embedded-shim");
    let exe = lone_binary(&scratch.0);
    let home = scratch.0.join("home");
    std::fs::create_dir_all(&home).unwrap();

    // `tcpaccel shim` names the file run will preload: the cached copy.
    let out = run_installed(&exe, &home, &["shim"]);
    assert!(out.status.success(), "{out:?}");
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(path.starts_with(home.join(".cache/tcpaccel")), "{}", path.display());
    assert_eq!(&std::fs::read(&path).unwrap()[..4], b"\x7fELF");

    // And run really preloads it: a loopback connect gets the congestion control.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let log = scratch.0.join("shim.log");
    let script =
        format!("import socket; s=socket.create_connection(('127.0.0.1', {port})); s.close(); print('ok')");
    let out = run_installed(
        &exe,
        &home,
        &["run", "--cc", "reno", "--shim-log", log.to_str().unwrap(), "--", "python3", "-c", &script],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
    let log = std::fs::read_to_string(&log).expect("the shim wrote its log: it was preloaded");
    assert!(log.contains("connect") && log.contains("cc=reno"), "{log}");
    assert!(l.accept().is_ok());

    // Nowhere to cache it: a clear usage error, not a silent run without the
    // shim (--cc needs the shim; a run that needs nothing of it preloads none).
    let out = Command::new(&exe)
        .args(["run", "--cc", "reno", "--", "true"])
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("TCPACCEL_PRELOAD_LIB")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--preload"), "{out:?}");
}

#[test]
fn a_named_shim_must_exist() {
    let out = Command::new(bin())
        .args(["run", "--cc", "reno", "--preload", "/nonexistent/libtcpaccel_preload.so", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/libtcpaccel_preload.so does not exist")
    );
}

#[test]
fn shim_out_writes_a_loadable_copy() {
    let scratch = Scratch::new("shim-out");
    let dest = scratch.0.join("lib/libtcpaccel_preload.so");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let out = Command::new(bin()).args(["shim", "--out"]).arg(&dest).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    // LD_PRELOAD of the written copy into a program that runs fine.
    let out = Command::new("true").env("LD_PRELOAD", &dest).output().unwrap();
    assert!(out.status.success());
    assert!(out.stderr.is_empty(), "the loader complained: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn completions_cover_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(bin()).args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        for sub in ["emu", "lab", "relay", "gather", "lanes", "completions", "man"] {
            assert!(text.contains(sub), "{shell} completion lacks {sub}");
        }
        // Options of nested subcommands too.
        assert!(text.contains("--quick"), "{shell} completion lacks lab run --quick");
    }
    let out = Command::new(bin()).args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"));
}

#[test]
fn man_pages_for_every_subcommand() {
    let scratch = Scratch::new("man");
    let out = Command::new(bin()).arg("man").arg(&scratch.0).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let listed = String::from_utf8_lossy(&out.stdout);
    for page in ["tcpaccel.1", "tcpaccel-run.1", "tcpaccel-lab.1", "tcpaccel-lab-run.1", "tcpaccel-net-up.1"]
    {
        let p = scratch.0.join(page);
        assert!(listed.contains(p.to_str().unwrap()), "{page} not listed");
        let roff = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(roff.contains(".TH"), "{page} is not a man page");
    }
    let run = std::fs::read_to_string(scratch.0.join("tcpaccel-lab-run.1")).unwrap();
    assert!(run.contains(".TH TCPACCEL-LAB-RUN 1") && run.contains("tcpaccel 0."), "{run}");
    assert!(run.contains("tcpaccel lab run") && run.contains("\\-\\-quick"), "{run}");
    // The top page lists the subcommands.
    let top = std::fs::read_to_string(scratch.0.join("tcpaccel.1")).unwrap();
    assert!(top.contains("tcpaccel\\-lab(1)") || top.contains("lab"), "{top}");
}
