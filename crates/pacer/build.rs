//! Generates the Rust side of `bpf/pace.bpf.c`'s ABI from its table,
//! `bpf/pace.abi.h` (see bpf/abi_gen.rs): the one source of every layout
//! the program shares with this crate.

include!("../../bpf/abi_gen.rs");

fn main() {
    let header = "bpf/pace.abi.h";
    println!("cargo:rerun-if-changed={header}");
    println!("cargo:rerun-if-changed=../../bpf/abi_gen.rs");
    let text = std::fs::read_to_string(header).unwrap_or_else(|e| panic!("{header}: {e}"));
    let structs = parse_abi(&text).unwrap_or_else(|e| panic!("{header}: {e}"));
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("pace.abi.rs"), generate_abi(&structs, &format!("crates/pacer/{header}")))
        .unwrap_or_else(|e| panic!("writing the generated ABI: {e}"));
}
