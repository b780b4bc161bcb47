//! The example systemd units (examples/*/tcpaccel-*.service): each passes
//! `systemd-analyze verify` with ExecStart pointed at the binary under test,
//! and every flag its ExecStart passes exists in that subcommand's --help
//! (a renamed flag would otherwise only show when the service fails to
//! start on a real host).

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

#[test]
fn example_units_verify_and_their_flags_exist() {
    let dir = std::env::temp_dir().join(format!("tcpaccel-units-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for path in UNITS {
        let text = std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        let argv = exec_start(&text);
        assert_eq!(argv[0], "/usr/local/bin/tcpaccel", "{path}");
        let name = Path::new(path).file_name().unwrap();
        let local = dir.join(name);
        std::fs::write(&local, text.replace("/usr/local/bin/tcpaccel", bin())).unwrap();
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
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
