//! No CLI message shows a Rust Debug form (`Port(5201)`, `Some(3)`,
//! `(UnknownClass)`, `Foo { bar: 1 }`): a set of bad or empty-handed
//! invocations, each answered in words. No root needed for most; the
//! network ones touch loopback only.

use std::process::Command;

mod common;
use common::bin;

/// Debug-looking fragments of `text`, if any.
fn debug_forms(text: &str) -> Vec<String> {
    const WORDS_OK: &[&str] = &["KiB", "MiB", "GiB", "TiB", "OpenMetrics", "PySocks", "GitHub"];
    let mut found = Vec::new();
    for raw in text.split(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '`') {
        let w = raw.trim_matches(|c: char| matches!(c, ',' | ';' | ':' | '.' | '[' | ']'));
        if ["Some(", "Ok(", "Err(", "None)", "None,"].iter().any(|p| w.contains(p)) {
            found.push(w.to_string());
            continue;
        }
        // A CamelCase identifier (`UnknownClass`), alone or as `Port(`.
        let ident: String =
            w.trim_start_matches('(').chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        let camel = ident.len() > 2
            && ident.starts_with(|c: char| c.is_ascii_uppercase())
            && ident.chars().nth(1).is_some_and(|c| c.is_ascii_lowercase())
            && ident.chars().skip(1).any(|c| c.is_ascii_uppercase())
            && !WORDS_OK.contains(&ident.as_str());
        let rest = &w.trim_start_matches('(')[ident.len()..];
        let variant = ident.starts_with(|c: char| c.is_ascii_uppercase())
            && ident.chars().skip(1).all(|c| c.is_ascii_lowercase())
            && rest.starts_with('(')
            && !w.starts_with('(');
        if camel || variant {
            found.push(w.to_string());
        }
    }
    // A struct's Debug form: `Name { field: …`.
    for (i, _) in text.match_indices(" { ") {
        let before = text[..i].rsplit(|c: char| !c.is_ascii_alphanumeric()).next().unwrap_or("");
        let after: String =
            text[i + 3..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
        if before.starts_with(|c: char| c.is_ascii_uppercase())
            && text[i + 3 + after.len()..].starts_with(':')
        {
            found.push(format!("{before} {{ {after}:"));
        }
    }
    found
}

#[test]
fn the_scanner_finds_debug_forms_and_passes_words() {
    assert_eq!(debug_forms("tracing Port(5201) every 10ms"), vec!["Port(5201)"]);
    assert_eq!(debug_forms("server refused (UnknownClass): no class zz"), vec!["(UnknownClass)"]);
    assert_eq!(debug_forms("got Some(3)"), vec!["Some(3)"]);
    assert_eq!(debug_forms("bad Limits { subflows: 3 }"), vec!["Limits { subflows:"]);
    assert!(debug_forms("4 MiB at 100Mbit/s (Linux doubles it); getsockopt(SO_MAX_PACING_RATE) failed")
        .is_empty());
    assert!(debug_forms("error: cannot parse rate \"100\": missing unit; accepted forms: NUMBER[k|M|G]")
        .is_empty());
}

#[test]
fn messages_of_bad_invocations_have_no_debug_forms() {
    let cases: &[&[&str]] = &[
        &["send", "--to", "127.0.0.1:9", "--pace", "static:100"],
        &["send", "--to", "127.0.0.1:1", "--duration", "1s"],
        &["send", "--to", "127.0.0.1:1", "--bytes", "1KB", "--json"],
        &["recv", "--listen", "203.0.113.7:5201", "--once"],
        &["doctor", "--rate", "100", "--rtt", "10ms"],
        &["trace", "--port", "5201", "--duration", "50ms"],
        &["trace", "--dst", "127.0.0.1:9", "--duration", "50ms"],
        &["lanes", "--config", "/nonexistent/lanes.toml"],
        &["lab", "run", "no-such-scenario"],
        &["lab", "report", "/nonexistent/run"],
        &["net", "exec", "--run", "zzzzzz", "h1", "--", "true"],
        &["net", "up", "/nonexistent/topology.toml"],
        &["gather", "send", "--server", "127.0.0.1:1", "--class", "a", "--bytes", "1KB"],
        &["emu", "--a", "nosuch0", "--b", "nosuch1", "--rate", "10mbit"],
        &["pace", "detach", "--cgroup", "/nonexistent-cgroup"],
        &["run", "--cc", "no-such-cc", "--", "true"],
        &["relay", "plan", "--rtt-total", "50ms", "--candidates", "p1"],
    ];
    let mut bad = Vec::new();
    for args in cases {
        let out = Command::new(bin()).args(*args).output().expect("run tcpaccel");
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let found = debug_forms(&text);
        if !found.is_empty() {
            bad.push(format!("tcpaccel {}: {found:?}\n{text}", args.join(" ")));
        }
    }
    assert!(bad.is_empty(), "messages with Rust Debug forms:\n{}", bad.join("\n"));
}
