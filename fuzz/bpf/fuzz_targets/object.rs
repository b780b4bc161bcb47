//! Fuzz target: the BPF object parser (`tcpaccel_sys::bpf::obj`,
//! `Object::parse`) over arbitrary bytes; seeds are the committed objects of
//! the pacer, lanes and the lab's rto_init (fuzz/bpf/seeds/object).
//!
//! Checked beyond never panicking:
//! - an accepted object only points inside the input: each program's
//!   instructions are the bytes at its section's offset, each map's
//!   definition is the 20 bytes at its offset, each relocation entry lies in
//!   the file and patches an `ld_imm64` inside its program, against a map
//!   the object defines;
//! - applying the relocations changes nothing but the relocated
//!   instructions;
//! - a refusal for bounds says an offset and length that do end past the
//!   input;
//! - parsing is a function of the bytes (twice, the same result);
//! - the committed objects themselves parse to their known programs and maps.
//!
//! Run it with `fuzz/run.sh` (see there), or alone from the repository root:
//! cargo +nightly fuzz run --fuzz-dir fuzz/bpf object
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpaccel_sys::bpf::obj::{ObjError, Object, INSN_SIZE, LD_IMM64, MAP_DEF_SIZE};

const COMMITTED: [(&[u8], &str, &[&str]); 3] = [
    (
        include_bytes!("../../../crates/pacer/bpf/pace.bpf.o"),
        "tcpaccel_pace",
        &["pace_rules", "pace_stats", "pace_dst", "pace_socks"],
    ),
    (
        include_bytes!("../../../crates/lanes/bpf/lanes.bpf.o"),
        "tcpaccel_lanes",
        &["lanes_cfg", "lanes_pairs", "lanes_lane", "lanes_stats", "lanes_events"],
    ),
    (include_bytes!("../../../crates/lab/bpf/rto_init.bpf.o"), "tcpaccel_rto_init", &["lab_rto_init"]),
];

fuzz_target!(|data: &[u8]| {
    let parsed = Object::parse(data);
    assert_eq!(parsed, Object::parse(data), "parsing twice gave two answers");
    for (elf, program, maps) in COMMITTED {
        if data == elf {
            let o = parsed.as_ref().expect("a committed object parses");
            assert_eq!(o.program_names().collect::<Vec<_>>(), [program]);
            for m in maps {
                assert!(o.maps().any(|(n, _)| n == *m), "{program}: no map {m}");
            }
        }
    }
    let o = match parsed {
        Ok(o) => o,
        Err(ObjError::OutOfBounds { offset, len, size, .. }) => {
            assert_eq!(size, data.len());
            assert!(offset.checked_add(len).is_none_or(|end| end > size as u64), "{offset}+{len} fits in {size}");
            return;
        }
        Err(_) => return,
    };
    for m in &o.maps {
        let def = &data[m.offset..m.offset + MAP_DEF_SIZE];
        let word = |k: usize| u32::from_le_bytes(def[4 * k..4 * k + 4].try_into().unwrap());
        assert_eq!(
            [m.def.map_type, m.def.key_size, m.def.value_size, m.def.max_entries, m.def.flags],
            [word(0), word(1), word(2), word(3), word(4)]
        );
    }
    for p in &o.programs {
        assert_eq!(&data[p.offset..p.offset + p.insns.len()], &p.insns[..]);
        for r in &p.relocs {
            assert!(r.offset + 16 <= data.len(), "relocation entry at {} past the input", r.offset);
            let at = r.insn * INSN_SIZE;
            assert!(at + 2 * INSN_SIZE <= p.insns.len());
            assert_eq!(p.insns[at], LD_IMM64);
            assert!(o.maps.iter().any(|m| m.name == r.map), "relocation against unknown map {}", r.map);
        }
        let fd_of = |name: &str| o.maps.iter().position(|m| m.name == name).map(|i| 1000 + i as u32);
        let out = p.relocated(fd_of).expect("every relocation names a defined map");
        assert_eq!(out.len(), p.insns.len());
        for (i, (a, b)) in p.insns.iter().zip(&out).enumerate() {
            if a != b {
                let insn = i / INSN_SIZE;
                assert!(p.relocs.iter().any(|r| r.insn == insn), "byte {i} changed outside a relocation");
            }
        }
    }
});
