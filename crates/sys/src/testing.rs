//! Helpers for the root-only tests of every crate (public because each
//! crate's integration tests call them; nothing else should).
//!
//! The convention: a test that needs root (network namespaces, AF_PACKET,
//! BPF, cgroups, sysctls) is named `root_*` and calls [`require_root`]
//! first; an integration test file holding only such tests is named
//! `tests/root_*.rs`. Root tests never skip: run as another user they fail,
//! saying so. `cargo test --workspace -- --skip root_` runs the others alone.

/// Fails the calling test at once unless this process is root, naming the
/// test's location and how to leave the root tests out.
#[track_caller]
pub fn require_root() {
    if !crate::privilege::is_root() {
        let at = std::panic::Location::caller();
        panic!(
            "root-only test ({}:{}) run without root: it needs root (CI runs as root) and does not \
             skip; to run only the tests that do not need root: cargo test --workspace -- --skip root_",
            at.file(),
            at.line()
        );
    }
}

/// Network namespaces of one test, named `tcpaccel-TAG-ID` (one) or
/// `tcpaccel-TAG-ID-ROLE` (several), ID unique per process and call, so
/// parallel tests and runs never meet, and CI's leftover check and `tcpaccel
/// lab clean` (prefix `tcpaccel-`) find whatever a killed test left. Each has
/// `lo` up. Dropping the value, also when the test panics, deletes them
/// through [`crate::netns::delete`] (processes left inside are killed first).
///
/// The set-up helpers panic with the failing command and its stderr: they
/// are for tests, where that is the report wanted.
pub struct TestNetns {
    names: Vec<(String, String)>,
}

impl TestNetns {
    /// One namespace, `tcpaccel-TAG-ID`; [`TestNetns::name`] is its name.
    #[track_caller]
    pub fn one(tag: &str) -> TestNetns {
        let name = format!("tcpaccel-{tag}-{}", unique_id());
        let mut t = TestNetns { names: Vec::new() };
        t.add(String::new(), name);
        t
    }

    /// One namespace per role, `tcpaccel-TAG-ID-ROLE` with the same ID;
    /// [`TestNetns::ns`] gives a role's name.
    #[track_caller]
    pub fn new(tag: &str, roles: &[&str]) -> TestNetns {
        let base = format!("tcpaccel-{tag}-{}", unique_id());
        let mut t = TestNetns { names: Vec::new() };
        for role in roles {
            t.add(role.to_string(), format!("{base}-{role}"));
        }
        t
    }

    #[track_caller]
    fn add(&mut self, role: String, name: String) {
        crate::netns::add(&name).unwrap_or_else(|e| panic!("create test namespace: {e}"));
        // Recorded before anything else can fail, so Drop deletes it.
        self.names.push((role, name.clone()));
        self.ip(&name, &["link", "set", "lo", "up"]);
    }

    /// The name of the namespace made by [`TestNetns::one`] (the first one).
    pub fn name(&self) -> &str {
        &self.names[0].1
    }

    /// The name of the namespace of `role`.
    #[track_caller]
    pub fn ns(&self, role: &str) -> &str {
        match self.names.iter().find(|(r, _)| r == role) {
            Some((_, n)) => n,
            None => panic!("no test namespace of role {role:?}"),
        }
    }

    /// Every namespace's name, in the order made.
    pub fn names(&self) -> Vec<&str> {
        self.names.iter().map(|(_, n)| n.as_str()).collect()
    }

    /// `ip -n NS ARGS..`, failing the test with its stderr; returns stdout.
    #[track_caller]
    pub fn ip(&self, ns: &str, args: &[&str]) -> String {
        let mut a = vec!["-n", ns];
        a.extend_from_slice(args);
        crate::command::ip(&a).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A veth pair, `if_a` in `ns_a` and `if_b` in `ns_b` (may be the same
    /// namespace), both ends up.
    #[track_caller]
    pub fn veth(&self, (ns_a, if_a): (&str, &str), (ns_b, if_b): (&str, &str)) {
        self.ip(ns_a, &["link", "add", if_a, "type", "veth", "peer", "name", if_b, "netns", ns_b]);
        self.ip(ns_a, &["link", "set", if_a, "up"]);
        self.ip(ns_b, &["link", "set", if_b, "up"]);
    }

    /// Adds address `cidr` (e.g. "10.0.0.1/24") to `dev` in `ns`.
    #[track_caller]
    pub fn addr(&self, ns: &str, dev: &str, cidr: &str) {
        self.ip(ns, &["addr", "add", cidr, "dev", dev]);
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        for (_, name) in self.names.iter().rev() {
            if let Err(e) = crate::netns::delete(name) {
                eprintln!("test namespace {name} not deleted: {e}");
            }
        }
    }
}

/// Hex digits unique to this process and call: the pid, a per-process
/// counter and the clock's low bits (a pid reused by a later run differs there).
fn unique_id() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{:x}{n:x}{:04x}", std::process::id(), nanos & 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_differ_between_calls() {
        assert_ne!(unique_id(), unique_id());
    }

    /// Root only: the namespaces exist with their names and `lo` up, a veth
    /// joins two of them, and dropping the fixture (here by a panic) deletes
    /// them all, with a process still inside one.
    #[test]
    fn root_test_netns_is_made_and_deleted_even_on_panic() {
        require_root();
        let names = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let seen = names.clone();
        let r = std::panic::catch_unwind(move || {
            let t = TestNetns::new("fixturetest", &["a", "b"]);
            *seen.lock().unwrap() = t.names().iter().map(|s| s.to_string()).collect();
            assert!(t.ns("a").starts_with("tcpaccel-fixturetest-") && t.ns("a").ends_with("-a"));
            t.veth((t.ns("a"), "fxa"), (t.ns("b"), "fxb"));
            t.addr(t.ns("a"), "fxa", "10.123.0.1/24");
            let out = t.ip(t.ns("a"), &["-j", "addr", "show", "dev", "fxa"]);
            assert!(out.contains("10.123.0.1"), "{out}");
            assert!(t.ip(t.ns("b"), &["link", "show", "lo"]).contains("UP"));
            // A process inside keeps nothing alive after Drop.
            let child = std::process::Command::new("ip")
                .args(["netns", "exec", t.ns("b"), "sleep", "30"])
                .spawn()
                .expect("spawn sleep");
            std::mem::forget(child);
            std::thread::sleep(std::time::Duration::from_millis(200));
            panic!("deliberate");
        });
        assert!(r.is_err());
        let names = names.lock().unwrap().clone();
        assert_eq!(names.len(), 2);
        for n in &names {
            assert!(!crate::netns::exists(n), "{n} left behind");
        }
    }
}
