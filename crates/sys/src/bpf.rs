//! A minimal BPF loader: parse a compiled object, create its maps, load its
//! programs, attach them to a cgroup through a BPF link, pin and unpin, and
//! read and write maps by value.
//!
//! Why our own and not aya: aya 0.14 and later need Rust 1.87, above the
//! workspace's MSRV (1.85); aya 0.13.1 builds, but brings about twenty crates
//! for what is, here, a few hundred lines: tcpaccel's programs are built
//! without BTF (no `-g`, so the committed objects hold no build path; see
//! `scripts/build-bpf.sh`), use classic map definitions in a `maps` section
//! ([`MapDef`]) and no globals, subprograms or CO-RE relocations. What this
//! loader does not do, it refuses by name (a relocation it does not know, a
//! non-empty `.text`, an unknown program section).
//!
//! Generic on purpose: issue 13 (lanes) loads a second sock_ops program with
//! a ring buffer through the same [`Object`] → [`Loaded`] → [`Program::attach_cgroup`]
//! path, and reads its events with [`RingBuf`] (mmap of the ring).
//!
//! Map values cross the syscall boundary as bytes: a value type implements
//! [`Plain`] (a fixed size and an explicit little/native-endian layout written
//! in safe code), so no `unsafe impl` is needed outside this crate.
//!
//! Pinning policy: nothing is pinned unless the caller asks ([`Link::pin`],
//! [`Map::pin`]); a [`Link`] that is dropped unpinned detaches its program.
//! Callers that must outlive the process pin under [`BPFFS`] and remove the
//! pins themselves ([`unpin`]); this module never pins on its own.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::{Error, Result};

/// Where bpffs is mounted on Linux by convention.
pub const BPFFS: &str = "/sys/fs/bpf";

// enum bpf_cmd (linux/bpf.h)
const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_MAP_DELETE_ELEM: u32 = 3;
const BPF_MAP_GET_NEXT_KEY: u32 = 4;
const BPF_PROG_LOAD: u32 = 5;
const BPF_OBJ_PIN: u32 = 6;
const BPF_OBJ_GET: u32 = 7;
const BPF_PROG_GET_FD_BY_ID: u32 = 13;
const BPF_OBJ_GET_INFO_BY_FD: u32 = 15;
const BPF_LINK_CREATE: u32 = 28;
const BPF_LINK_DETACH: u32 = 34;
const BPF_ENABLE_STATS: u32 = 32;

/// `enum bpf_prog_type` value of a cgroup sock_ops program.
pub const PROG_TYPE_SOCK_OPS: u32 = 13;
/// `enum bpf_attach_type` value of BPF_CGROUP_SOCK_OPS.
pub const ATTACH_CGROUP_SOCK_OPS: u32 = 3;

/// `enum bpf_map_type` values this loader has been used with.
pub mod map_type {
    pub const HASH: u32 = 1;
    pub const ARRAY: u32 = 2;
    pub const LRU_HASH: u32 = 9;
    pub const LPM_TRIE: u32 = 11;
    pub const RINGBUF: u32 = 27;
}

/// `BPF_ANY` for [`Map::update`]: create or replace.
pub const UPDATE_ANY: u64 = 0;

/// A value that crosses the BPF syscall boundary as plain bytes, laid out as
/// the C side declares it (native endianness, explicit padding).
pub trait Plain: Sized {
    /// Size in bytes, equal to the C `sizeof`.
    const SIZE: usize;
    /// Writes the value into `out` (exactly `SIZE` bytes).
    fn write(&self, out: &mut [u8]);
    /// Reads a value from `b` (exactly `SIZE` bytes).
    fn read(b: &[u8]) -> Self;
}

macro_rules! plain_int {
    ($($t:ty),*) => {$(
        impl Plain for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn write(&self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes());
            }
            fn read(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..std::mem::size_of::<$t>()]);
                <$t>::from_ne_bytes(a)
            }
        }
    )*};
}
plain_int!(u8, u16, u32, u64, i32, i64);

/// Reads a native-endian u32 at `off` of `b` (a helper for [`Plain`] impls).
pub fn ne_u32(b: &[u8], off: usize) -> u32 {
    u32::read(&b[off..off + 4])
}
/// Reads a native-endian u64 at `off` of `b`.
pub fn ne_u64(b: &[u8], off: usize) -> u64 {
    u64::read(&b[off..off + 8])
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

/// A program found in an object: its section, function name and
/// instructions, with the map relocations still to apply.
#[derive(Debug, Clone)]
struct ProgramSpec {
    section: String,
    name: String,
    insns: Vec<u8>,
    /// (instruction index, map name)
    relocs: Vec<(usize, String)>,
}

/// A parsed BPF ELF object (nothing in the kernel yet).
#[derive(Debug, Clone)]
pub struct Object {
    maps: Vec<(String, MapDef)>,
    programs: Vec<ProgramSpec>,
    license: CString,
}

fn bad(op: &str, msg: impl Into<String>) -> Error {
    Error::Other { op: op.to_string(), msg: msg.into() }
}

fn rd<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..off.checked_add(N)?)?.try_into().ok()
}
fn le16(b: &[u8], off: usize) -> Option<u16> {
    rd::<2>(b, off).map(u16::from_le_bytes)
}
fn le32(b: &[u8], off: usize) -> Option<u32> {
    rd::<4>(b, off).map(u32::from_le_bytes)
}
fn le64(b: &[u8], off: usize) -> Option<u64> {
    rd::<8>(b, off).map(u64::from_le_bytes)
}
fn cstr(b: &[u8], off: usize) -> Option<String> {
    let s = b.get(off..)?;
    let end = s.iter().position(|&c| c == 0)?;
    String::from_utf8(s[..end].to_vec()).ok()
}

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

const SHT_SYMTAB: u32 = 2;
const SHT_REL: u32 = 9;
const SHF_EXECINSTR: u64 = 4;
const EM_BPF: u16 = 247;
/// R_BPF_64_64: a 64-bit immediate load of a symbol's address (a map).
const R_BPF_64_64: u32 = 1;
const BPF_PSEUDO_MAP_FD: u8 = 1;

impl Object {
    /// Parses a little-endian 64-bit BPF ELF object.
    pub fn parse(elf: &[u8]) -> Result<Object> {
        const OP: &str = "parse BPF object";
        let e = || bad(OP, "truncated or malformed ELF");
        if elf.get(..4) != Some(b"\x7fELF".as_slice()) || elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
            return Err(bad(OP, "not a 64-bit little-endian ELF file"));
        }
        if le16(elf, 0x12) != Some(EM_BPF) {
            return Err(bad(OP, "not a BPF object (e_machine is not EM_BPF)"));
        }
        let shoff = le64(elf, 0x28).ok_or_else(e)? as usize;
        let shentsize = le16(elf, 0x3a).ok_or_else(e)? as usize;
        let shnum = le16(elf, 0x3c).ok_or_else(e)? as usize;
        let shstrndx = le16(elf, 0x3e).ok_or_else(e)? as usize;
        if shentsize < 64 {
            return Err(e());
        }
        let mut secs = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let o = shoff.checked_add(i * shentsize).ok_or_else(e)?;
            secs.push(Section {
                name_off: le32(elf, o).ok_or_else(e)?,
                kind: le32(elf, o + 4).ok_or_else(e)?,
                flags: le64(elf, o + 8).ok_or_else(e)?,
                offset: le64(elf, o + 24).ok_or_else(e)?,
                size: le64(elf, o + 32).ok_or_else(e)?,
                link: le32(elf, o + 40).ok_or_else(e)?,
                info: le32(elf, o + 44).ok_or_else(e)?,
            });
        }
        let data = |s: &Section| -> Result<&[u8]> {
            let start = s.offset as usize;
            elf.get(start..start.checked_add(s.size as usize).ok_or_else(e)?).ok_or_else(e)
        };
        let shstr = data(secs.get(shstrndx).ok_or_else(e)?)?;
        let name = |s: &Section| cstr(shstr, s.name_off as usize).unwrap_or_default();

        let symtab = secs.iter().find(|s| s.kind == SHT_SYMTAB).ok_or_else(|| bad(OP, "no symbol table"))?;
        let strtab = data(secs.get(symtab.link as usize).ok_or_else(e)?)?;
        let syms = data(symtab)?;
        // (name, section index, value, size, type)
        let mut symbols = Vec::new();
        for o in (0..syms.len() / 24).map(|i| i * 24) {
            let n = cstr(strtab, le32(syms, o).ok_or_else(e)? as usize).unwrap_or_default();
            let info = syms[o + 4];
            let shndx = le16(syms, o + 6).ok_or_else(e)? as usize;
            let value = le64(syms, o + 8).ok_or_else(e)?;
            let size = le64(syms, o + 16).ok_or_else(e)?;
            symbols.push((n, shndx, value, size, info & 0xf));
        }

        let maps_idx = secs.iter().position(|s| name(s) == "maps");
        let mut maps = Vec::new();
        if let Some(mi) = maps_idx {
            let md = data(&secs[mi])?;
            for (n, shndx, value, size, _) in &symbols {
                if *shndx != mi || n.is_empty() {
                    continue;
                }
                let o = *value as usize;
                if *size < 20 {
                    return Err(bad(OP, format!("map {n}: definition of {size} bytes, expected 20")));
                }
                let f = |k: usize| le32(md, o + 4 * k).ok_or_else(e);
                let def = MapDef {
                    map_type: f(0)?,
                    key_size: f(1)?,
                    value_size: f(2)?,
                    max_entries: f(3)?,
                    flags: f(4)?,
                };
                maps.push((n.clone(), def));
            }
        }

        let mut programs = Vec::new();
        for (i, s) in secs.iter().enumerate() {
            if s.flags & SHF_EXECINSTR == 0 || s.size == 0 {
                continue;
            }
            let sname = name(s);
            if sname == ".text" {
                return Err(bad(OP, "non-empty .text: subprograms are not supported (use __always_inline)"));
            }
            let func = symbols
                .iter()
                .find(|(n, shndx, value, _, ty)| *shndx == i && *value == 0 && *ty == 2 && !n.is_empty())
                .map(|t| t.0.clone())
                .ok_or_else(|| bad(OP, format!("section {sname}: no function symbol")))?;
            let mut relocs = Vec::new();
            for r in secs.iter().filter(|r| r.kind == SHT_REL && r.info as usize == i) {
                let rel = data(r)?;
                for o in (0..rel.len() / 16).map(|k| k * 16) {
                    let off = le64(rel, o).ok_or_else(e)?;
                    let info = le64(rel, o + 8).ok_or_else(e)?;
                    let (sym, ty) = ((info >> 32) as usize, (info & 0xffff_ffff) as u32);
                    let (sn, shndx, ..) = symbols.get(sym).ok_or_else(e)?;
                    if ty != R_BPF_64_64 || Some(*shndx) != maps_idx {
                        return Err(bad(
                            OP,
                            format!(
                                "section {sname}: relocation type {ty} against {sn:?} is not a map reference"
                            ),
                        ));
                    }
                    relocs.push((off as usize / 8, sn.clone()));
                }
            }
            programs.push(ProgramSpec { section: sname, name: func, insns: data(s)?.to_vec(), relocs });
        }
        let license = secs
            .iter()
            .find(|s| name(s) == "license")
            .map(|s| data(s).map(|d| cstr(d, 0).unwrap_or_default()))
            .transpose()?
            .ok_or_else(|| bad(OP, "no license section"))?;
        let license = CString::new(license).map_err(|_| e())?;
        Ok(Object { maps, programs, license })
    }

    /// The map definitions, by name.
    pub fn maps(&self) -> impl Iterator<Item = (&str, &MapDef)> {
        self.maps.iter().map(|(n, d)| (n.as_str(), d))
    }

    /// The programs' function names.
    pub fn program_names(&self) -> impl Iterator<Item = &str> {
        self.programs.iter().map(|p| p.name.as_str())
    }

    /// Creates the maps, applies the relocations and loads every program.
    pub fn load(&self) -> Result<Loaded> {
        let mut maps = BTreeMap::new();
        for (name, def) in &self.maps {
            maps.insert(name.clone(), Map::create(name, def)?);
        }
        let mut programs = BTreeMap::new();
        for p in &self.programs {
            let (prog_type, attach) = match p.section.as_str() {
                "sockops" => (PROG_TYPE_SOCK_OPS, ATTACH_CGROUP_SOCK_OPS),
                other => {
                    return Err(bad("load BPF program", format!("section {other:?}: unknown program type")));
                }
            };
            let mut insns = p.insns.clone();
            for (idx, map) in &p.relocs {
                let m = maps.get(map).ok_or_else(|| bad("load BPF program", format!("unknown map {map}")))?;
                let o = idx * 8;
                if o + 16 > insns.len() || insns[o] != 0x18 {
                    return Err(bad(
                        "load BPF program",
                        format!("{}: relocation at {idx} is not ld_imm64", p.name),
                    ));
                }
                // dst_reg in the low nibble, src_reg in the high one.
                insns[o + 1] = (insns[o + 1] & 0x0f) | (BPF_PSEUDO_MAP_FD << 4);
                insns[o + 4..o + 8].copy_from_slice(&(m.fd.as_raw_fd() as u32).to_le_bytes());
            }
            let fd = prog_load(&p.name, prog_type, attach, &insns, &self.license)?;
            programs.insert(p.name.clone(), Program { fd, name: p.name.clone() });
        }
        Ok(Loaded { maps, programs })
    }
}

/// Maps and programs of one object, in the kernel. Dropping it closes the
/// fds: unpinned maps and programs that nothing attached go away.
#[derive(Debug)]
pub struct Loaded {
    pub maps: BTreeMap<String, Map>,
    pub programs: BTreeMap<String, Program>,
}

impl Loaded {
    pub fn map(&self, name: &str) -> Result<&Map> {
        self.maps.get(name).ok_or_else(|| bad("BPF object", format!("no map named {name}")))
    }
    pub fn program(&self, name: &str) -> Result<&Program> {
        self.programs.get(name).ok_or_else(|| bad("BPF object", format!("no program named {name}")))
    }
}

/// The `union bpf_attr` argument: 128 zeroed bytes, fields set by offset.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn bytes(&mut self, off: usize, v: &[u8]) -> &mut Self {
        self.0[off..off + v.len()].copy_from_slice(v);
        self
    }
}

fn sys_bpf(cmd: u32, attr: &mut Attr) -> io::Result<i64> {
    // SAFETY: attr is a valid, writable 128-byte union bpf_attr; every
    // pointer stored in it (keys, values, instructions, paths, log) points
    // into buffers that the caller keeps alive for the duration of the call.
    let r = unsafe {
        libc::syscall(libc::SYS_bpf, cmd as libc::c_long, attr.0.as_mut_ptr(), attr.0.len() as u32)
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn bpf_fd(cmd: u32, attr: &mut Attr, op: impl FnOnce() -> String) -> Result<OwnedFd> {
    let fd = sys_bpf(cmd, attr).map_err(|e| bpf_error(op(), e))?;
    // SAFETY: the kernel returned a new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Classifies a bpf(2) error: ENOSYS (no BPF syscall) is a missing feature,
/// EPERM a missing privilege.
fn bpf_error(op: String, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ENOSYS) => Error::Unsupported { op, source: e },
        _ => Error::os(op, e),
    }
}

fn name16(name: &str) -> [u8; 16] {
    // The kernel accepts [A-Za-z0-9_.] and 15 bytes plus NUL.
    let mut out = [0u8; 16];
    for (o, c) in
        out.iter_mut().zip(name.bytes().filter(|c| c.is_ascii_alphanumeric() || *c == b'_').take(15))
    {
        *o = c;
    }
    out
}

fn prog_load(name: &str, prog_type: u32, attach: u32, insns: &[u8], license: &CString) -> Result<OwnedFd> {
    let attempt = |log: Option<&mut Vec<u8>>| {
        let mut a = Attr::new();
        a.u32(0, prog_type)
            .u32(4, (insns.len() / 8) as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .bytes(48, &name16(name))
            .u32(68, attach);
        if let Some(log) = log {
            a.u32(24, 1).u32(28, log.len() as u32).u64(32, log.as_mut_ptr() as u64);
        }
        sys_bpf(BPF_PROG_LOAD, &mut a)
    };
    match attempt(None) {
        // SAFETY: a fresh fd from the kernel, owned by no one else.
        Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) || e.raw_os_error() == Some(libc::EACCES) => {
            // Run again with the verifier's log to say why.
            let mut log = vec![0u8; 1 << 20];
            let _ = attempt(Some(&mut log));
            let end = log.iter().position(|&c| c == 0).unwrap_or(0);
            let text = String::from_utf8_lossy(&log[..end]);
            let tail: Vec<&str> = text.lines().rev().take(12).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Err(Error::Other {
                op: format!("load BPF program {name}"),
                msg: format!("{e}; verifier log (last lines):\n{}", tail.join("\n")),
            })
        }
        Err(e) => Err(bpf_error(format!("load BPF program {name}"), e)),
    }
}

fn path_cstring(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| bad("BPF pin", format!("{}: path has a NUL byte", p.display())))
}

fn obj_pin(fd: &OwnedFd, path: &Path) -> Result<()> {
    let c = path_cstring(path)?;
    let mut a = Attr::new();
    a.u64(0, c.as_ptr() as u64).u32(8, fd.as_raw_fd() as u32);
    sys_bpf(BPF_OBJ_PIN, &mut a)
        .map_err(|e| bpf_error(format!("pin BPF object at {}", path.display()), e))?;
    Ok(())
}

fn obj_get(path: &Path) -> Result<OwnedFd> {
    let c = path_cstring(path)?;
    let mut a = Attr::new();
    a.u64(0, c.as_ptr() as u64);
    bpf_fd(BPF_OBJ_GET, &mut a, || format!("open pinned BPF object {}", path.display()))
}

fn obj_info(fd: &OwnedFd, buf: &mut [u8], what: &str) -> Result<()> {
    let mut a = Attr::new();
    a.u32(0, fd.as_raw_fd() as u32).u32(4, buf.len() as u32).u64(8, buf.as_mut_ptr() as u64);
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a).map_err(|e| bpf_error(format!("get info of {what}"), e))?;
    Ok(())
}

/// Removes a pin (a file in bpffs); a missing pin is not an error.
pub fn unpin(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::os(format!("unpin {}", path.display()), e)),
    }
}

/// A BPF map: typed access by value through [`Plain`].
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    name: String,
    def: MapDef,
}

impl Map {
    fn create(name: &str, def: &MapDef) -> Result<Map> {
        let mut a = Attr::new();
        a.u32(0, def.map_type)
            .u32(4, def.key_size)
            .u32(8, def.value_size)
            .u32(12, def.max_entries)
            .u32(16, def.flags)
            .bytes(28, &name16(name));
        let fd = bpf_fd(BPF_MAP_CREATE, &mut a, || format!("create BPF map {name} (type {})", def.map_type))?;
        Ok(Map { fd, name: name.to_string(), def: *def })
    }

    /// Opens a pinned map; its definition comes from the kernel.
    pub fn from_pin(path: &Path) -> Result<Map> {
        let fd = obj_get(path)?;
        let mut info = [0u8; 80];
        obj_info(&fd, &mut info, &format!("BPF map {}", path.display()))?;
        let def = MapDef {
            map_type: ne_u32(&info, 0),
            key_size: ne_u32(&info, 8),
            value_size: ne_u32(&info, 12),
            max_entries: ne_u32(&info, 16),
            flags: ne_u32(&info, 20),
        };
        let name = cstr(&info[24..40], 0).unwrap_or_default();
        Ok(Map { fd, name, def })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn def(&self) -> &MapDef {
        &self.def
    }

    /// Pins the map at `path` (inside a bpffs mount).
    pub fn pin(&self, path: &Path) -> Result<()> {
        obj_pin(&self.fd, path)
    }

    fn check<K: Plain, V: Plain>(&self) -> Result<()> {
        if K::SIZE != self.def.key_size as usize || V::SIZE != self.def.value_size as usize {
            return Err(bad(
                &format!("BPF map {}", self.name),
                format!(
                    "key/value of {}/{} bytes, the map has {}/{}",
                    K::SIZE,
                    V::SIZE,
                    self.def.key_size,
                    self.def.value_size
                ),
            ));
        }
        Ok(())
    }

    fn enc<T: Plain>(v: &T) -> Vec<u8> {
        let mut b = vec![0u8; T::SIZE];
        v.write(&mut b);
        b
    }

    /// The value under `key`, or `None`.
    pub fn lookup<K: Plain, V: Plain>(&self, key: &K) -> Result<Option<V>> {
        self.check::<K, V>()?;
        let k = Self::enc(key);
        let mut v = vec![0u8; V::SIZE];
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32).u64(8, k.as_ptr() as u64).u64(16, v.as_mut_ptr() as u64);
        match sys_bpf(BPF_MAP_LOOKUP_ELEM, &mut a) {
            Ok(_) => Ok(Some(V::read(&v))),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(bpf_error(format!("look up in BPF map {}", self.name), e)),
        }
    }

    /// Sets `key` to `value` (`flags`: [`UPDATE_ANY`]).
    pub fn update<K: Plain, V: Plain>(&self, key: &K, value: &V, flags: u64) -> Result<()> {
        self.check::<K, V>()?;
        let (k, v) = (Self::enc(key), Self::enc(value));
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, k.as_ptr() as u64)
            .u64(16, v.as_ptr() as u64)
            .u64(24, flags);
        sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a)
            .map_err(|e| bpf_error(format!("update BPF map {}", self.name), e))?;
        Ok(())
    }

    /// Deletes `key`; false if it was not there.
    pub fn delete<K: Plain>(&self, key: &K) -> Result<bool> {
        let k = Self::enc(key);
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32).u64(8, k.as_ptr() as u64);
        match sys_bpf(BPF_MAP_DELETE_ELEM, &mut a) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(bpf_error(format!("delete from BPF map {}", self.name), e)),
        }
    }

    /// Every key (a snapshot: entries may come and go meanwhile).
    pub fn keys<K: Plain>(&self) -> Result<Vec<K>> {
        if K::SIZE != self.def.key_size as usize {
            return Err(bad(&format!("BPF map {}", self.name), "key size mismatch"));
        }
        let mut out = Vec::new();
        let mut next = vec![0u8; K::SIZE];
        let mut cur: Option<Vec<u8>> = None;
        loop {
            let mut a = Attr::new();
            a.u32(0, self.fd.as_raw_fd() as u32)
                .u64(8, cur.as_ref().map_or(0, |c| c.as_ptr() as u64))
                .u64(16, next.as_mut_ptr() as u64);
            match sys_bpf(BPF_MAP_GET_NEXT_KEY, &mut a) {
                Ok(_) => {
                    out.push(K::read(&next));
                    cur = Some(next.clone());
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(out),
                Err(e) => return Err(bpf_error(format!("list keys of BPF map {}", self.name), e)),
            }
            if out.len() > self.def.max_entries as usize * 2 + 16 {
                return Ok(out); // entries churned under us; what we have is a snapshot
            }
        }
    }
}

/// A loaded program.
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
    name: String,
}

impl Program {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernel's run-time statistics of the program, counted only while
    /// statistics are enabled ([`enable_stats`]).
    pub fn run_stats(&self) -> Result<ProgStats> {
        read_prog_stats(&self.fd, &format!("BPF program {}", self.name))
    }

    /// Attaches the program to the cgroup open as `cgroup` (a directory of
    /// the cgroup2 mount) through a BPF link: other programs attached to
    /// the cgroup stay, and the attachment lasts as long as the link.
    pub fn attach_cgroup(&self, cgroup: &File, attach_type: u32) -> Result<Link> {
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32).u32(4, cgroup.as_raw_fd() as u32).u32(8, attach_type);
        let fd = bpf_fd(BPF_LINK_CREATE, &mut a, || format!("attach BPF program {} to a cgroup", self.name))?;
        Ok(Link { fd })
    }
}

/// What the kernel says of a cgroup link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkInfo {
    pub id: u32,
    pub prog_id: u32,
    /// The cgroup's id: the inode number of its directory in the cgroup2 mount.
    pub cgroup_id: u64,
    pub attach_type: u32,
}

/// A BPF link: the program stays attached while the link is open or pinned.
#[derive(Debug)]
pub struct Link {
    fd: OwnedFd,
}

impl Link {
    /// Pins the link so the attachment outlives this process.
    pub fn pin(&self, path: &Path) -> Result<()> {
        obj_pin(&self.fd, path)
    }

    /// Detaches the program now, even while other processes hold the link
    /// (BPF_LINK_DETACH, Linux 5.9); the link object lingers, defunct,
    /// until its last fd and pin are gone.
    pub fn detach(&self) -> Result<()> {
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32);
        sys_bpf(BPF_LINK_DETACH, &mut a).map_err(|e| bpf_error("detach BPF link".into(), e))?;
        Ok(())
    }

    /// Opens a pinned link.
    pub fn from_pin(path: &Path) -> Result<Link> {
        Ok(Link { fd: obj_get(path)? })
    }

    /// `struct bpf_link_info` for a cgroup link.
    pub fn info(&self) -> Result<LinkInfo> {
        let mut b = [0u8; 64];
        obj_info(&self.fd, &mut b, "BPF link")?;
        Ok(LinkInfo {
            id: ne_u32(&b, 4),
            prog_id: ne_u32(&b, 8),
            cgroup_id: ne_u64(&b, 16),
            attach_type: ne_u32(&b, 24),
        })
    }
}

/// The kernel's run-time statistics of one program: how often it ran and
/// for how long in all (`run_cnt`, `run_time_ns` of `struct bpf_prog_info`),
/// counted while statistics are on ([`enable_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProgStats {
    pub run_time_ns: u64,
    pub run_cnt: u64,
}

/// Keeps the kernel's per-program run-time statistics on while it lives
/// (BPF_ENABLE_STATS; off again when the last holder closes it).
#[derive(Debug)]
pub struct StatsGuard {
    _fd: OwnedFd,
}

/// Turns on run-time statistics for every BPF program (BPF_STATS_RUN_TIME)
/// until the guard is dropped.
pub fn enable_stats() -> Result<StatsGuard> {
    let mut a = Attr::new();
    a.u32(0, 0); // BPF_STATS_RUN_TIME
    Ok(StatsGuard { _fd: bpf_fd(BPF_ENABLE_STATS, &mut a, || "enable BPF run-time statistics".into())? })
}

/// The statistics of the loaded program with id `prog_id` (e.g. a link's
/// [`LinkInfo::prog_id`]).
pub fn prog_stats(prog_id: u32) -> Result<ProgStats> {
    let mut a = Attr::new();
    a.u32(0, prog_id);
    let fd = bpf_fd(BPF_PROG_GET_FD_BY_ID, &mut a, || format!("open BPF program id {prog_id}"))?;
    read_prog_stats(&fd, &format!("BPF program id {prog_id}"))
}

/// `run_time_ns` and `run_cnt` of `struct bpf_prog_info` (uapi offsets 192
/// and 200) of the program open as `fd`.
fn read_prog_stats(fd: &OwnedFd, what: &str) -> Result<ProgStats> {
    let mut b = [0u8; 216];
    obj_info(fd, &mut b, what)?;
    Ok(ProgStats { run_time_ns: ne_u64(&b, 192), run_cnt: ne_u64(&b, 200) })
}

/// True when a bpffs is mounted at `path` (per /proc/self/mounts).
pub fn bpffs_mounted(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mounts").is_ok_and(|m| {
        m.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 2 && f[2] == "bpf" && Path::new(f[1]) == path
        })
    })
}

/// Mounts bpffs at `path` unless one is there.
pub fn ensure_bpffs(path: &Path) -> Result<()> {
    if bpffs_mounted(path) {
        return Ok(());
    }
    let target = path_cstring(path)?;
    let fstype = c"bpf";
    // SAFETY: all strings are NUL-terminated and live across the call; no data argument.
    let r = unsafe { libc::mount(fstype.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENODEV) => {
                Error::Unsupported { op: format!("mount bpffs at {}", path.display()), source: e }
            }
            _ => Error::os(format!("mount bpffs at {}", path.display()), e),
        });
    }
    Ok(())
}

/// A duplicate of file descriptor `fd` of process `pid` (pidfd_getfd(2),
/// Linux 5.6; needs ptrace rights over the process).
pub fn steal_fd(pid: u32, fd: RawFd) -> Result<OwnedFd> {
    let pidfd = crate::process::Pidfd::open(pid)?
        .ok_or_else(|| Error::os(format!("pidfd_open({pid})"), io::Error::from_raw_os_error(libc::ESRCH)))?;
    // SAFETY: pidfd_getfd takes two fds and flags; no pointers.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_getfd,
            pidfd.as_fd().as_raw_fd() as libc::c_long,
            fd as libc::c_long,
            0 as libc::c_long,
        )
    };
    if r < 0 {
        return Err(Error::last(format!("pidfd_getfd(pid {pid}, fd {fd})")));
    }
    // SAFETY: a fresh fd from the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// Makes `cmd`'s child join the cgroup whose `cgroup.procs` file is open
/// as `procs` before it executes anything, so no socket of the program is
/// created outside the cgroup (writing "0" to cgroup.procs moves the writer).
pub fn command_into_cgroup(cmd: &mut std::process::Command, procs: File) {
    use std::os::unix::process::CommandExt;
    let fd = procs.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and calls
    // only write(2), which is async-signal-safe; `procs` is moved into the
    // closure, so the fd stays open until the Command is dropped.
    unsafe {
        cmd.pre_exec(move || {
            let _keep = &procs;
            if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// SO_COOKIE of a socket: the id `bpf_get_socket_cookie` returns for it.
pub fn socket_cookie(fd: &impl AsFd) -> Result<u64> {
    socket_u64(fd, libc::SO_COOKIE, "getsockopt(SO_COOKIE)")
}

/// A u64 SOL_SOCKET option; ENOPROTOOPT (a kernel without it) is a missing feature.
fn socket_u64(fd: &impl AsFd, name: libc::c_int, op: &str) -> Result<u64> {
    let mut v: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: v and len are valid for writes of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&mut v as *mut u64).cast(),
            &mut len,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOPROTOOPT) => Error::Unsupported { op: op.into(), source: e },
            _ => Error::os(op, e),
        });
    }
    Ok(v)
}

/// SO_NETNS_COOKIE of a socket: the id of its network namespace, the
/// value `bpf_get_netns_cookie` returns in a program running for a socket
/// of that namespace (Linux 5.14).
pub fn netns_cookie(fd: &impl AsFd) -> Result<u64> {
    const SO_NETNS_COOKIE: libc::c_int = 71;
    socket_u64(fd, SO_NETNS_COOKIE, "getsockopt(SO_NETNS_COOKIE)")
}

/// CLOCK_MONOTONIC in ns: the clock `bpf_ktime_get_ns` reads, so a
/// program's timestamps can be compared with user space's.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec for the kernel to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The network-namespace cookie of the calling thread's namespace (through
/// a throwaway UDP socket).
pub fn current_netns_cookie() -> Result<u64> {
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Error::last("socket(AF_INET, SOCK_DGRAM)"));
    }
    // SAFETY: a fresh fd from the kernel, owned by no one else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    netns_cookie(&fd)
}

// Ring buffer layout (kernel/bpf/ringbuf.c, tools/lib/bpf/ringbuf.c): the
// map fd is mmap()ed as one writable consumer page, then (read-only) one
// producer page followed by the data area mapped twice in a row, so that a
// record that wraps around the end reads as one contiguous slice.
const RINGBUF_BUSY: u32 = 1 << 31;
const RINGBUF_DISCARD: u32 = 1 << 30;
const RINGBUF_HDR: usize = 8;

/// A mapping that is unmapped on drop.
#[derive(Debug)]
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(fd: &OwnedFd, len: usize, prot: libc::c_int, offset: libc::off_t, what: &str) -> Result<Mapping> {
        // SAFETY: a fresh shared mapping of a BPF ring buffer map fd; the
        // kernel checks the length, protection and offset against the map.
        let p =
            unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), offset) };
        if p == libc::MAP_FAILED {
            return Err(Error::last(format!("mmap the {what} of a BPF ring buffer")));
        }
        Ok(Mapping { ptr: p.cast(), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; nothing borrows
        // the mapping past its owner (RingBuf hands out copies only).
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// A consumer of a `BPF_MAP_TYPE_RINGBUF` map: records the program
/// submitted, read in order, each copied out once, and the consumer
/// position advanced after each. Readiness: [`RingBuf::wait`] (poll(2) on
/// the map fd, which the kernel wakes on submit).
#[derive(Debug)]
pub struct RingBuf {
    fd: OwnedFd,
    consumer: Mapping,
    producer: Mapping,
    mask: u64,
    page: usize,
}

// SAFETY: the mappings are plain shared memory owned by this value; the
// positions are read and written with atomic operations only.
unsafe impl Send for RingBuf {}

impl RingBuf {
    /// Maps the ring buffer `map` (its fd is duplicated and kept).
    pub fn new(map: &Map) -> Result<RingBuf> {
        if map.def.map_type != map_type::RINGBUF {
            return Err(bad("BPF ring buffer", format!("map {} is not a ring buffer", map.name)));
        }
        let size = map.def.max_entries as usize;
        // SAFETY: sysconf takes no pointers.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        if !size.is_power_of_two() || size & (page - 1) != 0 {
            return Err(bad("BPF ring buffer", format!("size {size} is not a power-of-two number of pages")));
        }
        let fd = map.fd.try_clone().map_err(|e| Error::os("dup a BPF ring buffer fd", e))?;
        let consumer = Mapping::new(&fd, page, libc::PROT_READ | libc::PROT_WRITE, 0, "consumer page")?;
        let producer = Mapping::new(&fd, page + 2 * size, libc::PROT_READ, page as libc::off_t, "data")?;
        Ok(RingBuf { fd, consumer, producer, mask: size as u64 - 1, page })
    }

    fn consumer_pos(&self) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: the consumer page starts with the 8-byte, 8-aligned
        // consumer position (page aligned); the mapping lives as long as self.
        unsafe { &*(self.consumer.ptr as *const std::sync::atomic::AtomicU64) }
    }

    fn producer_pos(&self) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: as above, for the producer position at the start of the
        // producer page.
        unsafe { &*(self.producer.ptr as *const std::sync::atomic::AtomicU64) }
    }

    /// Calls `f` with every record available now (data only, without the
    /// header; discarded records are skipped). Returns how many were read.
    pub fn consume(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        use std::sync::atomic::{AtomicU32, Ordering};
        let mut n = 0;
        let mut cons = self.consumer_pos().load(Ordering::Acquire);
        loop {
            let prod = self.producer_pos().load(Ordering::Acquire);
            if cons >= prod {
                break;
            }
            let off = self.page + (cons & self.mask) as usize;
            // SAFETY: off is inside the first copy of the data area, and a
            // record header is 8-aligned; the kernel writes the length word
            // with release semantics when it submits or discards.
            let hdr = unsafe { &*(self.producer.ptr.add(off) as *const AtomicU32) }.load(Ordering::Acquire);
            if hdr & RINGBUF_BUSY != 0 {
                break; // reserved, not yet submitted
            }
            let len = (hdr & !(RINGBUF_BUSY | RINGBUF_DISCARD)) as usize;
            if hdr & RINGBUF_DISCARD == 0 {
                let start = off + RINGBUF_HDR;
                if start + len <= self.producer.len {
                    // SAFETY: the record (at most the ring's size) lies in the
                    // double mapping right after its header; checked above.
                    let data = unsafe { std::slice::from_raw_parts(self.producer.ptr.add(start), len) };
                    f(data);
                    n += 1;
                }
            }
            cons += ((len + RINGBUF_HDR + 7) & !7) as u64;
            self.consumer_pos().store(cons, Ordering::Release);
        }
        n
    }

    /// Waits up to `timeout` for the ring buffer to have data (poll(2)).
    /// True when it does.
    pub fn wait(&self, timeout: std::time::Duration) -> Result<bool> {
        let [r] = crate::io::poll([(self.fd.as_fd(), crate::io::READABLE)], Some(timeout))
            .map_err(|e| Error::os("poll a BPF ring buffer", e))?;
        Ok(r != 0)
    }
}

impl RingBuf {
    /// Waits up to `timeout` for the ring buffer or `other` to be readable
    /// (one poll(2) on both): (ring ready, other ready).
    pub fn wait_with(
        &self,
        other: std::os::fd::BorrowedFd<'_>,
        timeout: std::time::Duration,
    ) -> Result<(bool, bool)> {
        let [ring, o] = crate::io::poll(
            [(self.fd.as_fd(), crate::io::READABLE), (other, crate::io::READABLE)],
            Some(timeout),
        )
        .map_err(|e| Error::os("poll a BPF ring buffer and a socket", e))?;
        Ok((ring != 0, o != 0))
    }
}

impl AsFd for RingBuf {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_bpf_object() {
        let err = Object::parse(b"not an elf").unwrap_err().to_string();
        assert!(err.contains("not a 64-bit little-endian ELF"), "{err}");
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[0x12] = 62; // x86-64
        let err = Object::parse(&elf).unwrap_err().to_string();
        assert!(err.contains("not a BPF object"), "{err}");
        elf[0x12] = 247;
        elf[0x28] = 0xff; // section headers past the end
        elf[0x3a] = 64;
        elf[0x3c] = 3;
        assert!(Object::parse(&elf).unwrap_err().to_string().contains("malformed"));
    }

    #[test]
    fn names_are_cut_to_what_the_kernel_takes() {
        assert_eq!(&name16("tcpaccel_pace")[..14], b"tcpaccel_pace\0");
        assert_eq!(name16("a-very.long:name_that_goes_on")[15], 0);
        assert_eq!(&name16("a-b")[..3], b"ab\0");
    }

    #[test]
    fn plain_round_trips() {
        let mut b = [0u8; 8];
        0x0102_0304_0506_0708u64.write(&mut b);
        assert_eq!(u64::read(&b), 0x0102_0304_0506_0708);
        assert_eq!(ne_u32(&b, 0), u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    }
}
