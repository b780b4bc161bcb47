//! The example systemd units (examples/*/tcpaccel-*.service), which the
//! Debian package ships: each passes `systemd-analyze verify`, its
//! Documentation= pages included (man(1) finds them among the pages
//! `tcpaccel man` writes), with ExecStart pointed at the binary under test;
//! ExecStart is /usr/bin/tcpaccel, where the package puts the binary; and
//! every flag its ExecStart passes exists in that subcommand's --help (a
//! renamed flag would otherwise only show when the service fails to start
//! on a real host). .ci/run verifies them once more as unpacked from the
//! package.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::bin;

const UNITS: &[&str] = &[
    "examples/relay/tcpaccel-relay.service",
    "examples/lanes/tcpaccel-lanes.service",
    "examples/gather/tcpaccel-gather.service",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn exec_start(unit: &str) -> Vec<String> {
    let line = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("an ExecStart line");
    line.split_whitespace().map(String::from).collect()
}

/// Where the package installs the binary and the units
/// (`[package.metadata.deb]` of crates/cli/Cargo.toml): the units' paths
/// must follow it.
#[test]
fn the_package_ships_the_units_and_the_binary_where_they_name_it() {
    let manifest = std::fs::read_to_string(repo().join("crates/cli/Cargo.toml")).unwrap();
    let asset = |src: &str| {
        manifest
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("[\"{src}\"")))
            .unwrap_or_else(|| panic!("no asset {src} in crates/cli/Cargo.toml"))
            .to_string()
    };
    assert!(asset("target/release/tcpaccel").contains("\"usr/bin/\""), "the binary goes to /usr/bin");
    for path in UNITS {
        assert!(asset(&format!("../../{path}")).contains("\"usr/lib/systemd/system/\""), "{path}");
    }
}

#[test]
fn example_units_verify_and_their_flags_exist() {
    let dir = std::env::temp_dir().join(format!("tcpaccel-units-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The pages the package installs, for the Documentation= lines.
    let man = dir.join("man");
    let pages = Command::new(bin()).arg("man").arg(man.join("man1")).output().unwrap();
    assert!(pages.status.success(), "tcpaccel man: {}", String::from_utf8_lossy(&pages.stderr));
    for path in UNITS {
        let text = std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        let argv = exec_start(&text);
        assert_eq!(argv[0], "/usr/bin/tcpaccel", "{path}");
        let name = Path::new(path).file_name().unwrap();
        let local = dir.join(name);
        std::fs::write(&local, text.replace("/usr/bin/tcpaccel", bin())).unwrap();
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=yes"])
            .env("MANPATH", &man)
            .arg(&local)
            .output()
            .expect("systemd-analyze (package systemd) must be installed");
        let msgs = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && msgs.trim().is_empty(),
            "{path}: systemd-analyze verify says:\n{msgs}"
        );

        // The subcommand is every word before the first flag.
        let words: Vec<&String> = argv[1..].iter().take_while(|a| !a.starts_with('-')).collect();
        let help = Command::new(bin()).args(&words).arg("--help").output().unwrap();
        assert!(help.status.success(), "{path}: tcpaccel {words:?} --help failed");
        let help = String::from_utf8_lossy(&help.stdout);
        let env_file = text.contains("$GATHER_ARGS").then(|| {
            std::fs::read_to_string(repo().join("examples/gather/gather.env"))
                .expect("examples/gather/gather.env")
        });
        let mut flags: Vec<String> = argv.iter().filter(|a| a.starts_with("--")).cloned().collect();
        if let Some(env) = env_file {
            let args =
                env.lines().find_map(|l| l.strip_prefix("GATHER_ARGS=")).expect("GATHER_ARGS= in gather.env");
            flags.extend(args.split_whitespace().filter(|a| a.starts_with("--")).map(String::from));
        }
        for f in flags {
            assert!(
                help.contains(&format!("{f} ")) || help.contains(&format!("{f}\n")),
                "{path}: {f} is not a flag of tcpaccel {words:?}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
