//! Helpers shared by the lanes crate's namespace tests.
#![allow(dead_code)]

use std::process::Command;
use std::sync::Mutex;

/// The transfer tests share two cores with other builds: one at a time.
static HEAVY: Mutex<()> = Mutex::new(());

pub(crate) fn heavy() -> std::sync::MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs a command and fails the test with its stderr if it fails.
pub(crate) fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    assert!(out.status.success(), "{cmd} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// A short id for namespace names, unique per test process and moment.
pub(crate) fn unique() -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{:x}{:06x}", std::process::id(), (nanos as u64 ^ (nanos >> 64) as u64) & 0xff_ffff)
}

/// Bytes interface `dev` in namespace `ns` has sent so far (its sysfs counter).
pub(crate) fn tx_bytes(ns: &str, dev: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", &format!("/sys/class/net/{dev}/statistics/tx_bytes")])
        .output()
        .expect("read counters");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("counter of {dev} in {ns}: {out:?}"))
}
