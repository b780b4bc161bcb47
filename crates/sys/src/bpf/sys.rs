//! The syscall side of the BPF loader: creates the maps of a parsed
//! [`Object`] (the pure model of [`super::obj`]), loads its programs with
//! their map relocations applied, attaches them to a cgroup through a BPF
//! link, pins and unpins, and reads and writes maps by value ([`Plain`]).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::obj::{cstr, MapDef, Object};
use super::{ne_u32, ne_u64, Plain};
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

/// `BPF_ANY` for [`Map::update`]: create or replace.
pub const UPDATE_ANY: u64 = 0;

/// Which program type and attach type a program section is for.
fn program_type(section: &str) -> Option<(u32, u32)> {
    match section {
        "sockops" => Some((PROG_TYPE_SOCK_OPS, ATTACH_CGROUP_SOCK_OPS)),
        _ => None,
    }
}

pub(super) fn bad(op: &str, msg: impl Into<String>) -> Error {
    Error::Other { op: op.to_string(), msg: msg.into() }
}

impl Object {
    /// Creates the maps, applies the relocations and loads every program.
    pub fn load(&self) -> Result<Loaded> {
        let license = CString::new(self.license.as_str())
            .map_err(|_| bad("load BPF object", "the license has a NUL byte"))?;
        let mut maps = BTreeMap::new();
        for m in &self.maps {
            maps.insert(m.name.clone(), Map::create(&m.name, &m.def)?);
        }
        let mut programs = BTreeMap::new();
        for p in &self.programs {
            let (prog_type, attach) = program_type(&p.section).ok_or_else(|| {
                bad("load BPF program", format!("section {:?}: unknown program type", p.section))
            })?;
            let insns = p
                .relocated(|name| maps.get(name).map(|m: &Map| m.fd.as_raw_fd() as u32))
                .map_err(|e| bad(&format!("load BPF program {}", p.name), e.to_string()))?;
            let fd = prog_load(&p.name, prog_type, attach, &insns, &license)?;
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
        // E2BIG: the verifier gave up on the program's paths (too complex).
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EACCES | libc::E2BIG)) => {
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
    pub(super) fd: OwnedFd,
    pub(super) name: String,
    pub(super) def: MapDef,
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
/// counted while statistics are on ([`enable_stats`]), and how many
/// instructions the verifier processed to accept it (`verified_insns`; its
/// limit is 1,000,000, past which a load fails with E2BIG).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProgStats {
    pub run_time_ns: u64,
    pub run_cnt: u64,
    pub verified_insns: u32,
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

/// `run_time_ns`, `run_cnt` and `verified_insns` of `struct bpf_prog_info`
/// (uapi offsets 192, 200 and 216) of the program open as `fd`.
fn read_prog_stats(fd: &OwnedFd, what: &str) -> Result<ProgStats> {
    let mut b = [0u8; 220];
    obj_info(fd, &mut b, what)?;
    Ok(ProgStats { run_time_ns: ne_u64(&b, 192), run_cnt: ne_u64(&b, 200), verified_insns: ne_u32(&b, 216) })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cut_to_what_the_kernel_takes() {
        assert_eq!(&name16("tcpaccel_pace")[..14], b"tcpaccel_pace\0");
        assert_eq!(name16("a-very.long:name_that_goes_on")[15], 0);
        assert_eq!(&name16("a-b")[..3], b"ab\0");
    }
}
