//! Writes or checks the generated Rust side of every ABI table of the
//! repository (`crates/*/bpf/*.abi.h` → `*.abi.rs` beside it).
//!
//!   cargo run -p tcpaccel-bpf-abi-gen -- --write   # after changing a table
//!   cargo run -p tcpaccel-bpf-abi-gen -- --check   # exit 1 when one is stale

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn tables(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for c in std::fs::read_dir(root.join("crates"))? {
        let dir = c?.path().join("bpf");
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries {
            let p = e?.path();
            if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".abi.h")) {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn main() -> ExitCode {
    let write = match std::env::args().nth(1).as_deref() {
        Some("--write") => true,
        Some("--check") => false,
        _ => {
            eprintln!("usage: tcpaccel-bpf-abi-gen --write|--check");
            return ExitCode::from(2);
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tables = match tables(&root) {
        Ok(t) if !t.is_empty() => t,
        Ok(_) => {
            eprintln!("no crates/*/bpf/*.abi.h under {}", root.display());
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("listing {}/crates: {e}", root.display());
            return ExitCode::FAILURE;
        }
    };
    let mut stale = 0;
    for t in tables {
        let origin = t.strip_prefix(&root).unwrap_or(&t).display().to_string();
        let out = tcpaccel_bpf_abi_gen::generated_path(&t);
        let shown = out.strip_prefix(&root).unwrap_or(&out).display().to_string();
        let code = match tcpaccel_bpf_abi_gen::generate_file(&t, &origin) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
        let have = std::fs::read_to_string(&out).unwrap_or_default();
        if have == code {
            println!("bpf-abi-gen: {shown} matches {origin}");
        } else if write {
            if let Err(e) = std::fs::write(&out, code) {
                eprintln!("writing {shown}: {e}");
                return ExitCode::FAILURE;
            }
            println!("bpf-abi-gen: wrote {shown} from {origin}");
        } else {
            eprintln!("bpf-abi-gen: {shown} is not what {origin} generates (run with --write)");
            stale += 1;
        }
    }
    if stale > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
