//! The help texts from the outside (issue 51 item 10): every subcommand's
//! `--help` explains the short terms it uses where it first uses them (or
//! names the glossary), and the long `--precise` / `--hold` paragraphs live
//! in the docs, one line in `--help` pointing there.

use std::process::Command;

mod common;
use common::bin;

fn help(path: &[&str]) -> String {
    let out = Command::new(bin()).args(path).arg("--help").output().unwrap();
    assert!(out.status.success(), "{path:?} --help: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Every subcommand path, from the `Commands:` sections of the help texts.
fn all_commands() -> Vec<Vec<String>> {
    let mut todo = vec![Vec::<String>::new()];
    let mut all = Vec::new();
    while let Some(path) = todo.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        let subs = text
            .split("Commands:\n")
            .nth(1)
            .map(|rest| {
                rest.lines()
                    .take_while(|l| l.starts_with("  "))
                    .filter_map(|l| l.split_whitespace().next())
                    .filter(|c| *c != "help")
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        for s in subs {
            let mut p = path.clone();
            p.push(s);
            todo.push(p);
        }
        all.push(path);
    }
    all
}

/// Where `term` first occurs as a word of its own.
fn first_word(text: &str, term: &str) -> Option<usize> {
    text.match_indices(term).map(|(at, _)| at).find(|&at| {
        let before = text[..at].chars().next_back();
        let after = text[at + term.len()..].chars().next();
        let edge = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric() && c != '_' && c != '-');
        edge(before) && edge(after)
    })
}

#[test]
fn short_terms_are_explained_where_first_used() {
    let terms = [
        ("SL", "short-flow lane"),
        ("LL", "long-flow lane"),
        ("FCT", "flow completion time"),
        ("KS", "kolmogorov"),
        ("D", "dilation"),
    ];
    let commands = all_commands();
    assert!(commands.len() > 20, "only {} commands found", commands.len());
    let mut used = 0;
    for path in &commands {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        let lower = text.to_lowercase();
        for (term, meaning) in terms {
            let Some(at) = first_word(&text, term) else { continue };
            used += 1;
            // The explanation ends by the end of the line that first uses the term.
            let line_end = text[at..].find('\n').map_or(text.len(), |e| at + e);
            let explained = lower.find(meaning).is_some_and(|m| m < line_end);
            assert!(
                explained || text.contains("docs/glossary.md"),
                "`tcpaccel {} --help` uses {term} without saying what it means:\n{text}",
                path.join(" ")
            );
        }
    }
    assert!(used >= 4, "the terms are no longer used at all? ({used})");
    // The top-level help names the glossary, and the glossary has every term.
    assert!(help(&[]).contains("docs/glossary.md"));
    let glossary =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/glossary.md")).unwrap();
    for (term, _) in terms {
        assert!(glossary.contains(&format!("**{term}**")), "docs/glossary.md lacks {term}");
    }
}

#[test]
fn precise_and_hold_are_one_line_pointing_to_the_doc() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/pacing-precision.md"))
        .unwrap();
    for (path, flag) in [
        (&["pace", "run"][..], "--precise"),
        (&["run"][..], "--precise"),
        (&["send"][..], "--precise"),
        (&["pace", "run"][..], "--hold"),
        (&["pace", "attach"][..], "--hold"),
    ] {
        let text = help(path);
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(flag) && !l.trim_start().starts_with(&format!("{flag}-")))
            .unwrap_or_else(|| panic!("`{path:?} --help` has no {flag}:\n{text}"));
        assert!(line.len() < 200, "`{path:?} --help`: {flag} takes {} characters:\n{line}", line.len());
        assert!(line.contains("docs/pacing-precision.md"), "{flag} does not point to the doc: {line}");
        assert!(doc.contains(&format!("**`{flag}`**")), "docs/pacing-precision.md has no {flag} paragraph");
    }
}
