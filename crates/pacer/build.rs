//! Fails the build when `bpf/pace.abi.rs`, the Rust side generated from
//! `bpf/pace.abi.h` (crates/bpf-abi-gen), is not what the table generates:
//! the committed code is the code that is compiled and reviewed.

fn main() {
    tcpaccel_bpf_abi_gen::check_generated("bpf/pace.abi.h", "crates/pacer/bpf/pace.abi.h");
}
