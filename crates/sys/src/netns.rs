//! Network namespaces by name, as `ip netns` creates them (a bind mount under
//! `/run/netns/NAME`).
//!
//! `setns(2)` with `CLONE_NEWNET` changes the namespace of the *calling
//! thread* only. Sockets keep the namespace they were created in, so the usual
//! pattern is: enter a namespace on a dedicated thread, open the sockets there,
//! and use them from any thread. [`run_in`] does exactly that on a fresh thread
//! so the caller's own thread is never moved.
//!
//! Namespaces are created and deleted with `ip netns add` / `del` ([`add`],
//! [`delete`]): the name is a bind mount that iproute2 makes and every other
//! tool (`ip netns exec`, `ss -N`, systemd's NetworkNamespacePath) looks for,
//! so the mount is left to the program that defines it rather than redone here.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use crate::command::{self, CommandError};
use crate::{Error, Result};

/// Where `ip netns add` puts its bind mounts.
pub const NETNS_RUN_DIR: &str = "/run/netns";

fn path_of(name: &str) -> Result<PathBuf> {
    // A name is one path component; anything else could escape /run/netns.
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(Error::Other {
            op: "netns".into(),
            msg: format!("invalid namespace name {name:?} (one path component, as `ip netns` accepts)"),
        });
    }
    Ok(PathBuf::from(NETNS_RUN_DIR).join(name))
}

/// True when `/run/netns/NAME` exists.
pub fn exists(name: &str) -> bool {
    path_of(name).map(|p| p.exists()).unwrap_or(false)
}

/// The names under `/run/netns` (every namespace `ip netns` knows), sorted;
/// none when the directory does not exist.
pub fn list() -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(NETNS_RUN_DIR) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::os(format!("list {NETNS_RUN_DIR}"), e)),
    };
    let mut names: Vec<String> =
        entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    Ok(names)
}

/// The name under `/run/netns` of the namespace the calling thread is in
/// (as `ip netns identify` prints it), or `None` when it has none there (the
/// initial namespace, usually). Only reads `/proc` and `/run/netns`.
pub fn identify() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let me = std::fs::metadata("/proc/thread-self/ns/net").ok()?;
    list().ok()?.into_iter().find(|name| {
        std::fs::metadata(std::path::Path::new(NETNS_RUN_DIR).join(name))
            .is_ok_and(|m| m.dev() == me.dev() && m.ino() == me.ino())
    })
}

/// Creates namespace `name` (`ip netns add`). Fails when it exists already,
/// so a caller never adopts (and later deletes) a namespace that is not its own.
pub fn add(name: &str) -> std::result::Result<(), CommandError> {
    command::ip(&["netns", "add", name]).map(|_| ())
}

/// Pids of the processes whose network namespace is `name` (`ip netns pids`).
pub fn pids(name: &str) -> std::result::Result<Vec<u32>, CommandError> {
    let out = command::ip(&["netns", "pids", name])?;
    Ok(out.split_whitespace().filter_map(|p| p.parse().ok()).collect())
}

/// Kills every process inside `name` (never this process), then deletes the
/// namespace name (`ip netns del`). The kernel frees the namespace, and the
/// veth ends in it, once no process or socket holds it, hence the kill first.
/// A namespace already gone is not an error. Processes that could not be
/// listed or killed are logged; callers that can wait send SIGTERM first.
pub fn delete(name: &str) -> std::result::Result<(), CommandError> {
    if !exists(name) {
        return Ok(());
    }
    let me = std::process::id();
    match pids(name) {
        Ok(pids) => {
            for pid in pids.into_iter().filter(|&p| p != me) {
                tracing::debug!(ns = name, pid, "killing process left in namespace");
                if let Err(e) = crate::process::signal(pid, crate::process::Signal::Kill) {
                    tracing::warn!(ns = name, pid, "cannot kill process in namespace: {e}");
                }
            }
        }
        Err(e) => tracing::warn!(ns = name, "cannot list processes in namespace: {e}"),
    }
    match command::ip(&["netns", "del", name]) {
        Ok(_) => Ok(()),
        Err(_) if !exists(name) => Ok(()),
        Err(e) => Err(e),
    }
}

fn open_ns(name: &str) -> Result<File> {
    let path = path_of(name)?;
    File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::NoNamespace { name: name.to_string() },
        _ => Error::os(format!("open {}", path.display()), e),
    })
}

fn setns_file(file: &File, what: &str) -> Result<()> {
    // SAFETY: `file` is an open descriptor of a namespace file that outlives the
    // call; setns only reads it and changes this thread's network namespace.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(Error::last(format!("setns(CLONE_NEWNET) into {what}")));
    }
    Ok(())
}

/// Moves the calling thread into network namespace `name`.
///
/// Only this thread moves; other threads and already open sockets keep their
/// namespace. Fails with [`Error::NoNamespace`] if `/run/netns/NAME` is missing
/// and [`Error::Privilege`] without CAP_SYS_ADMIN.
pub fn enter(name: &str) -> Result<()> {
    let file = open_ns(name)?;
    setns_file(&file, &format!("namespace {name:?}"))
}

/// Runs `f` on a new thread that first enters namespace `name`, and returns its
/// result. The caller's thread stays where it is. A panic in `f` is resumed in
/// the caller.
pub fn run_in<R: Send + 'static>(name: &str, f: impl FnOnce() -> R + Send + 'static) -> Result<R> {
    // Open the namespace here so a missing one is reported before spawning.
    let file = open_ns(name)?;
    let what = format!("namespace {name:?}");
    let handle = std::thread::Builder::new()
        .name(format!("netns-{name}"))
        .spawn(move || -> Result<R> {
            setns_file(&file, &what)?;
            drop(file);
            Ok(f())
        })
        .map_err(|e| Error::os("spawn thread for netns::run_in", e))?;
    match handle.join() {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Runs `f` on a new thread in the initial network namespace (the host's),
/// whatever namespace the caller is in, for settings that exist there only
/// (host-global sysctls such as `net.core.netdev_max_backlog`, which `ip
/// netns exec` hides). The namespace is found through pid 1, or through
/// pid 2 (kthreadd: kernel threads always run in the initial namespace)
/// where pid 1's may not be opened (a supervisor that root cannot ptrace).
/// Needs CAP_SYS_ADMIN, as `setns` does.
pub fn run_in_initial<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Result<R> {
    let file = File::open("/proc/1/ns/net")
        .or_else(|_| File::open("/proc/2/ns/net"))
        .map_err(|e| Error::os("open /proc/1/ns/net or /proc/2/ns/net", e))?;
    let handle = std::thread::Builder::new()
        .name("netns-initial".into())
        .spawn(move || -> Result<R> {
            setns_file(&file, "the initial namespace (/proc/1/ns/net)")?;
            drop(file);
            Ok(f())
        })
        .map_err(|e| Error::os("spawn thread for netns::run_in_initial", e))?;
    match handle.join() {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Runs `f` on a new thread inside a new, empty network namespace of its
/// own (unshare(CLONE_NEWNET): only `lo`, down, and the kernel's default
/// sysctls), which disappears when the thread ends. Used to ask the kernel
/// what a fresh namespace has (which sysctls are per namespace, whether a
/// qdisc kind exists) without touching any real one. Needs CAP_SYS_ADMIN.
pub fn run_in_fresh<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Result<R> {
    let handle = std::thread::Builder::new()
        .name("netns-fresh".into())
        .spawn(move || -> Result<R> {
            // SAFETY: unshare takes flags only; it moves this thread alone
            // (network namespaces are per thread) into a new namespace.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(Error::last("unshare(CLONE_NEWNET)"));
            }
            Ok(f())
        })
        .map_err(|e| Error::os("spawn thread for netns::run_in_fresh", e))?;
    match handle.join() {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// The calling thread's current network namespace, kept open so the thread can
/// return to it later (see [`enter_scoped`]).
pub struct Saved {
    file: File,
}

impl Saved {
    /// Remembers the calling thread's current network namespace.
    pub fn current() -> Result<Saved> {
        // /proc/thread-self is the thread, not the process: after setns in one
        // thread, /proc/self/ns/net may still name the main thread's namespace.
        let file = File::open("/proc/thread-self/ns/net")
            .map_err(|e| Error::os("open /proc/thread-self/ns/net", e))?;
        Ok(Saved { file })
    }

    /// Moves the calling thread back into the saved namespace.
    pub fn restore(&self) -> Result<()> {
        setns_file(&self.file, "the saved namespace")
    }
}

/// Guard returned by [`enter_scoped`]: moves the thread back on drop.
pub struct Scoped {
    saved: Saved,
    // Keep the guard on its thread: restoring from another thread would move
    // that other thread instead. A raw pointer makes the type `!Send`.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for Scoped {
    fn drop(&mut self) {
        // Going back into a namespace we were in cannot fail for lack of
        // privilege; if it does anyway, there is nothing better to do here.
        let _ = self.saved.restore();
    }
}

/// Enters namespace `name` on the calling thread and returns a guard that moves
/// the thread back to where it was when dropped. Must be dropped on the same
/// thread (the guard is `!Send`).
pub fn enter_scoped(name: &str) -> Result<Scoped> {
    let saved = Saved::current()?;
    enter(name)?;
    Ok(Scoped { saved, _not_send: std::marker::PhantomData })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_names_that_are_not_one_component() {
        for bad in ["", ".", "..", "a/b", "../x"] {
            assert!(!exists(bad));
            assert!(matches!(enter(bad), Err(Error::Other { .. })), "{bad:?}");
        }
    }

    #[test]
    fn missing_namespace_is_named() {
        let name = "tcpaccel-definitely-missing-ns";
        match enter(name) {
            Err(Error::NoNamespace { name: n }) => assert_eq!(n, name),
            other => panic!("expected NoNamespace, got {other:?}"),
        }
        match run_in(name, || 1) {
            Err(Error::NoNamespace { .. }) => {}
            other => panic!("expected NoNamespace, got {other:?}"),
        }
    }

    /// Root only: builds a namespace with a veth pair, switches offloads off
    /// inside it through `run_in`, and reads them back.
    #[test]
    fn root_enter_and_disable_offloads() {
        crate::testing::require_root();
        let t = crate::testing::TestNetns::one("systest");
        let ns = t.name();
        assert!(exists(ns));
        t.veth((ns, "tst0"), (ns, "tst1"));
        // The interface lives only in the namespace.
        assert!(matches!(crate::ethtool::offloads("tst0"), Err(Error::NoInterface { .. })));
        let r = run_in(ns, || {
            let before = crate::ethtool::offloads("tst0")?;
            crate::ethtool::disable_offloads("tst0")?;
            let after = crate::ethtool::offloads("tst0")?;
            Ok::<_, Error>((before, after))
        })
        .expect("run_in")
        .expect("offloads");
        assert!(!r.0.all_off(), "veth starts with offloads on: {:?}", r.0);
        // The thread inside knows its namespace by name; this one is not in it.
        assert_eq!(run_in(ns, identify).expect("run_in"), Some(ns.to_string()));
        assert_ne!(identify(), Some(ns.to_string()));
        assert!(r.1.all_off(), "{:?}", r.1);
        // enter_scoped moves this thread and back.
        {
            let _g = enter_scoped(ns).expect("enter");
            assert!(crate::ethtool::offloads("tst1").is_ok());
        }
        assert!(matches!(crate::ethtool::offloads("tst1"), Err(Error::NoInterface { .. })));
    }
}
