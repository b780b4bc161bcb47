//! Flags are typed by clap value parsers: a bad value exits 2 before the
//! command does anything, with a message that names the flag and the value.
//! And the one pacing grammar through the binary: `send --pace`, `run --pace`
//! and `pace run --pace` take and refuse the same texts
//! (`tcpaccel_core::pace_spec::FRONT_END_CASES`). No root needed.

use std::process::{Command, Output};

use tcpaccel_core::pace_spec::{Takes, FRONT_END_CASES};

mod common;
use common::bin;

fn tcpaccel(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("run tcpaccel")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// clap's refusal of `value` for `flag`: exit 2, both named, nothing run.
fn assert_refused(args: &[&str], flag: &str, value: &str) {
    let out = tcpaccel(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(&format!("'{value}' for '{flag}")), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?} printed: {}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn bad_values_are_refused_naming_the_flag() {
    let cases: &[(&[&str], &str, &str)] = &[
        (&["send", "--to", "127.0.0.1:9", "--interval", "1ms"], "--interval", "1ms"),
        (&["send", "--to", "127.0.0.1:9", "--bind", "nowhere"], "--bind", "nowhere"),
        (&["relay", "--pace", "fast"], "--pace", "fast"),
        (&["relay", "--idle-timeout", "10"], "--idle-timeout", "10"),
        (&["relay", "--pipe-size", "big"], "--pipe-size", "big"),
        (&["relay", "plan", "--rtt-total", "soon"], "--rtt-total", "soon"),
        (&["relay", "plan", "--rtt-total", "50ms", "--candidates", "p1"], "--candidates", "p1"),
        (&["relay", "plan", "--rtt-total", "50ms", "--pair", "p1p2=3ms"], "--pair", "p1p2=3ms"),
        (&["relay", "plan", "--rtt-total", "50ms", "--probe", "p1=host:1080"], "--probe", "p1=host:1080"),
        (&["gather", "serve", "--buffer-pool", "lots", "--class", "a=1mbit"], "--buffer-pool", "lots"),
        (&["gather", "serve", "--buffer-pool", "1MB", "--class", "a=fast"], "--class", "a=fast"),
        (
            &["gather", "serve", "--buffer-pool", "1MB", "--class", "a=1mbit", "--share", "stream"],
            "--share",
            "stream",
        ),
        (
            &["gather", "send", "--server", "nowhere:1", "--class", "a", "--bytes", "1KB"],
            "--server",
            "nowhere:1",
        ),
        (
            &["gather", "send", "--server", "127.0.0.1:1", "--class", "a", "--timeout", "soon"],
            "--timeout",
            "soon",
        ),
        (&["trace", "--interval", "10"], "--interval", "10"),
        (&["trace", "--dst", "somewhere"], "--dst", "somewhere"),
        (&["doctor", "--rtt", "-5ms"], "--rtt", "-5ms"),
        (&["doctor", "--rate", "lots"], "--rate", "lots"),
        (&["lanes", "-c", "lanes.toml", "--duration", "forever"], "--duration", "forever"),
        (&["net", "up", "topo.toml", "--for", "later"], "--for", "later"),
        (&["pace", "run", "--ceiling", "lots", "--", "true"], "--ceiling", "lots"),
        (&["pace", "run", "--rule", "10.0.0.0/8=warp", "--", "true"], "--rule", "10.0.0.0/8=warp"),
    ];
    for (args, flag, value) in cases {
        assert_refused(args, flag, value);
    }
}

#[test]
fn the_pace_flags_take_and_refuse_the_same_texts() {
    for (text, takes) in FRONT_END_CASES {
        let send = ["send", "--to", "127.0.0.1:9", "--bytes", "1KB", "--pace", text];
        let run = ["run", "--pace-via", "preload", "--pace", text, "--", "true"];
        let pace = ["pace", "run", "--pace", text, "--", "true"];
        match takes {
            Takes::None => {
                for args in [&send[..], &run[..], &pace[..]] {
                    assert_refused(args, "--pace", text);
                }
            }
            Takes::Traffic => {
                for args in [&run[..], &pace[..]] {
                    assert_refused(args, "--pace", text);
                    assert!(stderr(&tcpaccel(args)).contains("traffic tool"), "{args:?}");
                }
            }
            Takes::All => {
                // The program runs (under the shim when pacing is asked for).
                let out = tcpaccel(&run);
                assert!(out.status.success(), "run --pace {text}: {}", stderr(&out));
            }
        }
        if *takes != Takes::None {
            // Parsed; what fails now is the connection to a closed port (not exit 2).
            let out = tcpaccel(&send);
            let err = stderr(&out);
            assert!(!err.contains("for '--pace"), "send --pace {text}: {err}");
            assert_ne!(out.status.code(), Some(2), "send --pace {text}: {err}");
        }
    }
}

#[test]
fn compare_needs_one_receiver_and_known_variants() {
    let none = tcpaccel(&["compare"]);
    assert_eq!(none.status.code(), Some(2), "{}", stderr(&none));
    let both = tcpaccel(&["compare", "--target", "127.0.0.1:9", "--iperf3", "127.0.0.1"]);
    assert_eq!(both.status.code(), Some(2), "{}", stderr(&both));
    assert_refused(
        &["compare", "--target", "127.0.0.1:9", "--variants", "unpaced,fast"],
        "--variants",
        "fast",
    );
    assert_refused(&["compare", "--target", "127.0.0.1:9", "--max-time", "soon"], "--max-time", "soon");
    let frac = tcpaccel(&["compare", "--target", "127.0.0.1:9", "--pace-fraction", "0"]);
    assert_eq!(frac.status.code(), Some(2), "{}", stderr(&frac));
    assert!(stderr(&frac).contains("--pace-fraction"), "{}", stderr(&frac));
}
