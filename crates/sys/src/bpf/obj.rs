//! The object model of a compiled BPF program: what [`Object::parse`] reads
//! from an ELF file (sections, symbols, map definitions, programs and their
//! map relocations), as plain values.
//!
//! Pure: a function of the bytes it is given, no syscall, no `unsafe`
//! (forbidden below), no file descriptor; the syscall side
//! ([`super::sys`]) consumes an [`Object`] to create maps and load programs.
//! Every error is an [`ObjError`] that names what was being read and the
//! file offset where it went wrong. Fuzzed by `fuzz/bpf` (target `object`).
//!
//! What it reads is what tcpaccel's programs are built as
//! (`scripts/build-bpf.sh`): a little-endian 64-bit ELF for EM_BPF, classic
//! map definitions in a `maps` section ([`MapDef`], five u32s, no BTF), one
//! function per executable section, `R_BPF_64_64` relocations of `ld_imm64`
//! instructions against those maps, and a `license` section. Anything else
//! that would change what the programs do (a non-empty `.text`, another
//! relocation type) is refused by name rather than skipped.

#![forbid(unsafe_code)]

/// `enum bpf_map_type` values this loader has been used with.
pub mod map_type {
    pub const HASH: u32 = 1;
    pub const ARRAY: u32 = 2;
    pub const LRU_HASH: u32 = 9;
    pub const LPM_TRIE: u32 = 11;
    pub const RINGBUF: u32 = 27;
}

/// Size of a classic `struct map_def` (five u32s).
pub const MAP_DEF_SIZE: usize = 20;
/// Size of one BPF instruction; `ld_imm64` takes two.
pub const INSN_SIZE: usize = 8;
/// Opcode of `ld_imm64` (BPF_LD | BPF_IMM | BPF_DW), the instruction a map
/// relocation patches.
pub const LD_IMM64: u8 = 0x18;
/// `BPF_PSEUDO_MAP_FD`: the `src_reg` that makes an `ld_imm64` load a map.
const BPF_PSEUDO_MAP_FD: u8 = 1;

const SHT_SYMTAB: u32 = 2;
const SHT_REL: u32 = 9;
const SHF_EXECINSTR: u64 = 4;
const STT_FUNC: u8 = 2;
const EM_BPF: u16 = 247;
/// R_BPF_64_64: a 64-bit immediate load of a symbol's address (a map).
const R_BPF_64_64: u32 = 1;
const SHDR_SIZE: usize = 64;
const SYM_SIZE: usize = 24;
const REL_SIZE: usize = 16;

/// Why an ELF file is not a BPF object this loader can take. Offsets are
/// byte offsets in the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjError {
    #[error("not a 64-bit little-endian ELF file")]
    NotElf64Le,
    #[error("not a BPF object: e_machine is {0}, not EM_BPF (247)")]
    NotBpf(u16),
    #[error("truncated or malformed ELF: {what} at offset {offset} (+{len} bytes) is past the end of the {size}-byte file")]
    OutOfBounds { what: &'static str, offset: u64, len: u64, size: usize },
    #[error("section header entries of {0} bytes, at least 64 expected")]
    SectionHeaderSize(u16),
    #[error("{what}: section index {index}, but the file has {count} sections")]
    NoSuchSection { what: &'static str, index: u64, count: usize },
    #[error("{what} at offset {offset}: not a NUL-terminated UTF-8 string")]
    BadString { what: &'static str, offset: u64 },
    #[error("no symbol table")]
    NoSymtab,
    #[error("map {name}: definition of {size} bytes at offset {offset}, expected 20")]
    MapDefSize { name: String, offset: u64, size: u64 },
    #[error("map {name}: definition at offset {offset} runs past the end of the maps section")]
    MapOutsideSection { name: String, offset: u64 },
    #[error(
        "section .text at offset {offset} is not empty: subprograms are not supported (use __always_inline)"
    )]
    Subprogram { offset: u64 },
    #[error("section {section} at offset {offset}: no function symbol at its start")]
    NoFunction { section: String, offset: u64 },
    #[error("relocation at offset {offset}: symbol {index} of {count}")]
    NoSuchSymbol { offset: u64, index: u64, count: usize },
    #[error("section {section}: relocation at offset {offset}: type {kind} against {symbol:?} is not a map reference")]
    NotMapRelocation { section: String, offset: u64, kind: u32, symbol: String },
    #[error("section {section}: relocation at offset {offset} points at byte {at} of the section, which is not an ld_imm64 instruction")]
    NotLdImm64 { section: String, offset: u64, at: u64 },
    #[error("no license section")]
    NoLicense,
    #[error("section {section}: relocation against map {map}, which has no file descriptor")]
    NoMapFd { section: String, map: String },
}

/// `struct map_def` of a program's `maps` section: five u32s, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapDef {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
}

impl MapDef {
    /// Decodes the 20 bytes of a definition (little-endian, as the object is).
    fn decode(b: &[u8; MAP_DEF_SIZE]) -> MapDef {
        let f = |k: usize| u32::from_le_bytes([b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3]]);
        MapDef { map_type: f(0), key_size: f(1), value_size: f(2), max_entries: f(3), flags: f(4) }
    }
}

/// A map the object defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapSpec {
    pub name: String,
    pub def: MapDef,
    /// File offset of its definition.
    pub offset: usize,
}

/// One map reference in a program: the `ld_imm64` at instruction `insn`
/// loads map `map`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relocation {
    /// Index of the instruction (in units of [`INSN_SIZE`]) in the program.
    pub insn: usize,
    pub map: String,
    /// File offset of the relocation entry.
    pub offset: usize,
}

/// A program found in an object: its section, function name and
/// instructions, with the map relocations still to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramSpec {
    pub section: String,
    pub name: String,
    /// File offset of the section, whose bytes are `insns`.
    pub offset: usize,
    pub insns: Vec<u8>,
    pub relocs: Vec<Relocation>,
}

impl ProgramSpec {
    /// The instructions with every map reference pointed at the map's fd
    /// (`BPF_PSEUDO_MAP_FD`): what `BPF_PROG_LOAD` takes. `fd_of` gives the
    /// fd of a map by name (a number here; the caller owns the fd).
    pub fn relocated(&self, fd_of: impl Fn(&str) -> Option<u32>) -> Result<Vec<u8>, ObjError> {
        let mut insns = self.insns.clone();
        for r in &self.relocs {
            let fd = fd_of(&r.map)
                .ok_or_else(|| ObjError::NoMapFd { section: self.section.clone(), map: r.map.clone() })?;
            // In range and an ld_imm64: checked by parse.
            let o = r.insn * INSN_SIZE;
            // dst_reg in the low nibble, src_reg in the high one.
            insns[o + 1] = (insns[o + 1] & 0x0f) | (BPF_PSEUDO_MAP_FD << 4);
            insns[o + 4..o + 8].copy_from_slice(&fd.to_le_bytes());
        }
        Ok(insns)
    }
}

/// A parsed BPF ELF object (nothing in the kernel yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub maps: Vec<MapSpec>,
    pub programs: Vec<ProgramSpec>,
    /// The `license` section's string (what the kernel checks GPL-only
    /// helpers against).
    pub license: String,
}

/// One section header, with the fields read here.
#[derive(Debug, Clone, Copy)]
struct Section {
    name_off: u32,
    kind: u32,
    flags: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
}

/// One symbol of the symbol table.
#[derive(Debug, Clone)]
struct Symbol {
    name: String,
    shndx: usize,
    value: u64,
    size: u64,
    kind: u8,
}

/// Bounds-checked little-endian reads of the file, errors naming what was
/// read and where.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn bytes(&self, what: &'static str, offset: u64, len: u64) -> Result<&'a [u8], ObjError> {
        let oob = || ObjError::OutOfBounds { what, offset, len, size: self.b.len() };
        let start = usize::try_from(offset).map_err(|_| oob())?;
        let n = usize::try_from(len).map_err(|_| oob())?;
        self.b.get(start..start.checked_add(n).ok_or_else(oob)?).ok_or_else(oob)
    }
    fn arr<const N: usize>(&self, what: &'static str, offset: u64) -> Result<[u8; N], ObjError> {
        let s = self.bytes(what, offset, N as u64)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u16(&self, what: &'static str, offset: u64) -> Result<u16, ObjError> {
        self.arr(what, offset).map(u16::from_le_bytes)
    }
    fn u32(&self, what: &'static str, offset: u64) -> Result<u32, ObjError> {
        self.arr(what, offset).map(u32::from_le_bytes)
    }
    fn u64(&self, what: &'static str, offset: u64) -> Result<u64, ObjError> {
        self.arr(what, offset).map(u64::from_le_bytes)
    }
    /// The NUL-terminated string at `off` of the table at file offset
    /// `table` (`len` bytes).
    fn str(&self, what: &'static str, table: (u64, u64), off: u32) -> Result<String, ObjError> {
        let at = table.0.saturating_add(u64::from(off));
        let bad = || ObjError::BadString { what, offset: at };
        let t = self.bytes(what, table.0, table.1)?;
        let s = t.get(off as usize..).ok_or_else(bad)?;
        let end = s.iter().position(|&c| c == 0).ok_or_else(bad)?;
        String::from_utf8(s[..end].to_vec()).map_err(|_| bad())
    }
    fn data(&self, what: &'static str, s: &Section) -> Result<&'a [u8], ObjError> {
        self.bytes(what, s.offset, s.size)
    }
}

impl Object {
    /// Parses a little-endian 64-bit BPF ELF object.
    pub fn parse(elf: &[u8]) -> Result<Object, ObjError> {
        let r = Reader { b: elf };
        if elf.get(..4) != Some(b"\x7fELF".as_slice()) || elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
            return Err(ObjError::NotElf64Le);
        }
        let machine = r.u16("e_machine", 0x12)?;
        if machine != EM_BPF {
            return Err(ObjError::NotBpf(machine));
        }
        let shoff = r.u64("e_shoff", 0x28)?;
        let shentsize = r.u16("e_shentsize", 0x3a)?;
        let shnum = r.u16("e_shnum", 0x3c)?;
        let shstrndx = r.u16("e_shstrndx", 0x3e)?;
        if usize::from(shentsize) < SHDR_SIZE {
            return Err(ObjError::SectionHeaderSize(shentsize));
        }
        // The whole table first: its size bounds every loop below.
        r.bytes("section header table", shoff, u64::from(shnum) * u64::from(shentsize))?;
        let mut secs = Vec::with_capacity(usize::from(shnum));
        for i in 0..u64::from(shnum) {
            let o = shoff + i * u64::from(shentsize);
            secs.push(Section {
                name_off: r.u32("section header", o)?,
                kind: r.u32("section header", o + 4)?,
                flags: r.u64("section header", o + 8)?,
                offset: r.u64("section header", o + 24)?,
                size: r.u64("section header", o + 32)?,
                link: r.u32("section header", o + 40)?,
                info: r.u32("section header", o + 44)?,
            });
        }
        let count = secs.len();
        let section = |what, index: u64| {
            usize::try_from(index).ok().and_then(|i| secs.get(i)).ok_or(ObjError::NoSuchSection {
                what,
                index,
                count,
            })
        };
        let shstr = section("e_shstrndx", u64::from(shstrndx))?;
        r.data("section name table", shstr)?;
        let mut names = Vec::with_capacity(count);
        for s in &secs {
            names.push(r.str("section name", (shstr.offset, shstr.size), s.name_off)?);
        }

        let symtab = secs.iter().find(|s| s.kind == SHT_SYMTAB).ok_or(ObjError::NoSymtab)?;
        let strtab = section("symbol table's string table", u64::from(symtab.link))?;
        r.data("symbol string table", strtab)?;
        let syms = r.data("symbol table", symtab)?;
        let mut symbols = Vec::with_capacity(syms.len() / SYM_SIZE);
        for k in 0..(syms.len() / SYM_SIZE) as u64 {
            let o = symtab.offset + k * SYM_SIZE as u64;
            symbols.push(Symbol {
                name: r.str("symbol name", (strtab.offset, strtab.size), r.u32("symbol", o)?)?,
                kind: r.arr::<1>("symbol", o + 4)?[0] & 0xf,
                shndx: usize::from(r.u16("symbol", o + 6)?),
                value: r.u64("symbol", o + 8)?,
                size: r.u64("symbol", o + 16)?,
            });
        }

        let maps_idx = names.iter().position(|n| n == "maps");
        let mut maps = Vec::new();
        if let Some(mi) = maps_idx {
            let ms = &secs[mi];
            r.data("maps section", ms)?;
            for sym in symbols.iter().filter(|s| s.shndx == mi && !s.name.is_empty()) {
                let offset = ms.offset.saturating_add(sym.value);
                if sym.size < MAP_DEF_SIZE as u64 {
                    return Err(ObjError::MapDefSize { name: sym.name.clone(), offset, size: sym.size });
                }
                // Inside the section, not only inside the file.
                if sym.value.saturating_add(MAP_DEF_SIZE as u64) > ms.size {
                    return Err(ObjError::MapOutsideSection { name: sym.name.clone(), offset });
                }
                let def = MapDef::decode(&r.arr("map definition", offset)?);
                maps.push(MapSpec { name: sym.name.clone(), def, offset: offset as usize });
            }
        }

        let mut programs = Vec::new();
        for (i, s) in secs.iter().enumerate() {
            if s.flags & SHF_EXECINSTR == 0 || s.size == 0 {
                continue;
            }
            let sname = &names[i];
            if sname == ".text" {
                return Err(ObjError::Subprogram { offset: s.offset });
            }
            let insns = r.data("program section", s)?;
            let func = symbols
                .iter()
                .find(|y| y.shndx == i && y.value == 0 && y.kind == STT_FUNC && !y.name.is_empty())
                .ok_or_else(|| ObjError::NoFunction { section: sname.clone(), offset: s.offset })?;
            let mut relocs = Vec::new();
            for rs in secs.iter().filter(|x| x.kind == SHT_REL && x.info as usize == i) {
                let rel = r.data("relocation section", rs)?;
                for k in 0..(rel.len() / REL_SIZE) as u64 {
                    let o = rs.offset + k * REL_SIZE as u64;
                    let at = r.u64("relocation", o)?;
                    let info = r.u64("relocation", o + 8)?;
                    let (sym, kind) = (info >> 32, (info & 0xffff_ffff) as u32);
                    let y = usize::try_from(sym)
                        .ok()
                        .and_then(|k| symbols.get(k))
                        .ok_or(ObjError::NoSuchSymbol { offset: o, index: sym, count: symbols.len() })?;
                    let is_map = Some(y.shndx) == maps_idx && maps.iter().any(|m: &MapSpec| m.name == y.name);
                    if kind != R_BPF_64_64 || !is_map {
                        return Err(ObjError::NotMapRelocation {
                            section: sname.clone(),
                            offset: o,
                            kind,
                            symbol: y.name.clone(),
                        });
                    }
                    let fits = at % INSN_SIZE as u64 == 0
                        && at.checked_add(2 * INSN_SIZE as u64).is_some_and(|end| end <= insns.len() as u64);
                    if !fits || insns[at as usize] != LD_IMM64 {
                        return Err(ObjError::NotLdImm64 { section: sname.clone(), offset: o, at });
                    }
                    relocs.push(Relocation {
                        insn: at as usize / INSN_SIZE,
                        map: y.name.clone(),
                        offset: o as usize,
                    });
                }
            }
            programs.push(ProgramSpec {
                section: sname.clone(),
                name: func.name.clone(),
                offset: s.offset as usize,
                insns: insns.to_vec(),
                relocs,
            });
        }
        let li = names.iter().position(|n| n == "license").ok_or(ObjError::NoLicense)?;
        let ls = &secs[li];
        let license = r.str("license", (ls.offset, ls.size), 0)?;
        Ok(Object { maps, programs, license })
    }

    /// The map definitions, by name.
    pub fn maps(&self) -> impl Iterator<Item = (&str, &MapDef)> {
        self.maps.iter().map(|m| (m.name.as_str(), &m.def))
    }

    /// The programs' function names.
    pub fn program_names(&self) -> impl Iterator<Item = &str> {
        self.programs.iter().map(|p| p.name.as_str())
    }
}

/// Reads a NUL-terminated string at `off` of `b` (a helper for the
/// syscall side's info structs); `None` without a NUL or valid UTF-8.
pub(crate) fn cstr(b: &[u8], off: usize) -> Option<String> {
    let s = b.get(off..)?;
    let end = s.iter().position(|&c| c == 0)?;
    String::from_utf8(s[..end].to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACE: &[u8] = include_bytes!("../../../pacer/bpf/pace.bpf.o");
    const LANES: &[u8] = include_bytes!("../../../lanes/bpf/lanes.bpf.o");
    const RTO_INIT: &[u8] = include_bytes!("../../../lab/bpf/rto_init.bpf.o");

    /// The committed objects parse to the maps and programs their C
    /// sources define. rto_init is checked whole; the pacer's and lanes'
    /// programs change with their features, so for them the maps every
    /// user-space side opens by name.
    #[test]
    fn the_committed_objects_parse_to_their_maps_and_programs() {
        let o = Object::parse(RTO_INIT).unwrap();
        let def =
            MapDef { map_type: map_type::HASH, key_size: 8, value_size: 4, max_entries: 1024, flags: 0 };
        assert_eq!(o.maps, [MapSpec { name: "lab_rto_init".into(), def, offset: 0xc0 }]);
        assert_eq!(o.program_names().collect::<Vec<_>>(), ["tcpaccel_rto_init"]);
        let p = &o.programs[0];
        assert_eq!((p.section.as_str(), p.offset, p.insns.len()), ("sockops", 0x40, 128));
        assert_eq!(p.insns, RTO_INIT[0x40..0xc0]);
        assert_eq!(p.relocs, [Relocation { insn: 8, map: "lab_rto_init".into(), offset: 0x178 }]);
        assert_eq!(o.license, "Dual MIT/GPL");

        for (elf, program, want) in [
            (PACE, "tcpaccel_pace", &["pace_rules", "pace_stats", "pace_dst", "pace_socks"][..]),
            (
                LANES,
                "tcpaccel_lanes",
                &["lanes_cfg", "lanes_pairs", "lanes_lane", "lanes_stats", "lanes_events"][..],
            ),
        ] {
            let o = Object::parse(elf).unwrap();
            assert_eq!(o.program_names().collect::<Vec<_>>(), [program]);
            for m in want {
                assert!(o.maps().any(|(n, _)| n == *m), "{program}: no map {m}");
            }
            let p = &o.programs[0];
            assert!(!p.relocs.is_empty());
            for r in &p.relocs {
                assert!(o.maps().any(|(n, _)| n == r.map));
                assert_eq!(p.insns[r.insn * INSN_SIZE], LD_IMM64);
            }
        }
        let lanes = Object::parse(LANES).unwrap();
        let (_, ring) = lanes.maps().find(|(n, _)| *n == "lanes_events").unwrap();
        assert_eq!(ring.map_type, map_type::RINGBUF);
    }

    fn patched(at: usize, bytes: &[u8]) -> Vec<u8> {
        let mut b = RTO_INIT.to_vec();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        b
    }

    #[test]
    fn broken_objects_are_refused_with_what_and_where() {
        // rto_init.bpf.o: section headers at 0x208 (9 of 64 bytes), sockops
        // at 0x40, its one relocation at 0x178, maps at 0xc0, symbols at 0xe8.
        assert_eq!(Object::parse(b"not an elf"), Err(ObjError::NotElf64Le));
        assert_eq!(Object::parse(&patched(0x12, &[62, 0])), Err(ObjError::NotBpf(62)));
        assert_eq!(
            Object::parse(&RTO_INIT[..0x30]),
            Err(ObjError::OutOfBounds { what: "e_shentsize", offset: 0x3a, len: 2, size: 0x30 })
        );
        assert_eq!(
            Object::parse(&RTO_INIT[..RTO_INIT.len() - 1]),
            Err(ObjError::OutOfBounds {
                what: "section header table",
                offset: 0x208,
                len: 9 * 64,
                size: RTO_INIT.len() - 1
            })
        );
        assert_eq!(Object::parse(&patched(0x3a, &[40, 0])), Err(ObjError::SectionHeaderSize(40)));
        // The relocation's type (low word of r_info) is not R_BPF_64_64.
        assert_eq!(
            Object::parse(&patched(0x178 + 8, &[2])),
            Err(ObjError::NotMapRelocation {
                section: "sockops".into(),
                offset: 0x178,
                kind: 2,
                symbol: "lab_rto_init".into()
            })
        );
        // The instruction it patches is a mov, not an ld_imm64.
        assert_eq!(
            Object::parse(&patched(0x40 + 0x40, &[0xb7])),
            Err(ObjError::NotLdImm64 { section: "sockops".into(), offset: 0x178, at: 0x40 })
        );
        // The relocation points past the section.
        assert_eq!(
            Object::parse(&patched(0x178, &0x80u64.to_le_bytes())),
            Err(ObjError::NotLdImm64 { section: "sockops".into(), offset: 0x178, at: 0x80 })
        );
        // The map symbol's size (symbol 4, st_size at +16) is short of a map_def.
        assert_eq!(
            Object::parse(&patched(0xe8 + 4 * 24 + 16, &[8])),
            Err(ObjError::MapDefSize { name: "lab_rto_init".into(), offset: 0xc0, size: 8 })
        );
        // .text (section 2, sh_size at +32) holds code: a subprogram.
        assert_eq!(
            Object::parse(&patched(0x208 + 2 * 64 + 32, &[8])),
            Err(ObjError::Subprogram { offset: 0x40 })
        );
        // sockops's data (sh_offset at +24) past the end of the file.
        assert_eq!(
            Object::parse(&patched(0x208 + 3 * 64 + 24, &0x1000u64.to_le_bytes())),
            Err(ObjError::OutOfBounds {
                what: "program section",
                offset: 0x1000,
                len: 0x80,
                size: RTO_INIT.len()
            })
        );
        let lic = RTO_INIT.windows(8).position(|w| w == b"license\0").unwrap();
        assert_eq!(Object::parse(&patched(lic, b"L")), Err(ObjError::NoLicense));
        let e = Object::parse(&patched(0x178 + 8, &[2])).unwrap_err().to_string();
        assert!(e.contains("sockops") && e.contains("offset 376") && e.contains("lab_rto_init"), "{e}");
    }

    #[test]
    fn relocation_points_each_map_load_at_its_fd_and_changes_nothing_else() {
        let o = Object::parse(PACE).unwrap();
        let p = &o.programs[0];
        let fds: Vec<&str> = o.maps().map(|(n, _)| n).collect();
        let fd_of = |n: &str| fds.iter().position(|m| *m == n).map(|i| 100 + i as u32);
        let out = p.relocated(fd_of).unwrap();
        assert_eq!(out.len(), p.insns.len());
        let sites: Vec<usize> = p.relocs.iter().map(|r| r.insn * INSN_SIZE).collect();
        for (i, (a, b)) in p.insns.iter().zip(&out).enumerate() {
            let site = sites.iter().find(|s| (**s..**s + INSN_SIZE).contains(&i));
            if site.is_none() {
                assert_eq!(a, b, "byte {i} changed, outside any relocation");
            }
        }
        for r in &p.relocs {
            let o = r.insn * INSN_SIZE;
            assert_eq!(out[o + 1] >> 4, BPF_PSEUDO_MAP_FD);
            assert_eq!(out[o + 1] & 0x0f, p.insns[o + 1] & 0x0f, "dst_reg kept");
            assert_eq!(u32::from_le_bytes(out[o + 4..o + 8].try_into().unwrap()), fd_of(&r.map).unwrap());
        }
        assert_eq!(
            p.relocated(|_| None),
            Err(ObjError::NoMapFd { section: "sockops".into(), map: p.relocs[0].map.clone() })
        );
    }
}
