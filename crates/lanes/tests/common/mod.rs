//! Helpers shared by the lanes crate's namespace tests.
#![allow(dead_code)]

use std::process::Command;

/// Bytes interface `dev` in namespace `ns` has sent so far (its sysfs counter).
pub fn tx_bytes(ns: &str, dev: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", &format!("/sys/class/net/{dev}/statistics/tx_bytes")])
        .output()
        .expect("read counters");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("counter of {dev} in {ns}: {out:?}"))
}
