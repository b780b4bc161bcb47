//! Fails the build when `bpf/lanes.abi.rs`, the Rust side generated from
//! `bpf/lanes.abi.h` (crates/bpf-abi-gen), is not what the table generates:
//! the committed code is the code that is compiled and reviewed.

fn main() {
    tcpaccel_bpf_abi_gen::check_generated("bpf/lanes.abi.h", "crates/lanes/bpf/lanes.abi.h");
}
