//! docs/walkthrough.md cannot rot: this test runs its marked commands in
//! order, as a reader would in several terminals.
//!
//! A fenced block whose info string is `sh walkthrough` holds commands that
//! must finish with exit code 0, or one of those `exit=0|1` lists (one
//! `sh -c` per block, from the workspace root, with this build's `tcpaccel`
//! first on PATH).
//! `sh walkthrough-bg wait="TEXT"` holds one long-running command (its own
//! terminal in the doc): it is started in the background and the test waits
//! until its output shows TEXT. When a `net up` prints its run id, the test
//! exports TCPACCEL_NET_RUN as the doc tells the reader to. Before a block
//! that runs `tcpaccel net down`, the services started since the last
//! `net up` get SIGINT, as the reader's Ctrl-C.
//!
//! A ```` ```text output ```` block after a marked block is the output the
//! doc shows for it, and is compared with what the step (and the services
//! running beside it) printed: every line of the excerpt must be found in
//! one output line, in the *shape* of the text ([`shape`]: whitespace runs
//! as one space, digits as `#`, run ids and hex tokens as placeholders), so
//! measured values may differ but words, units, columns and the lines
//! themselves may not. `...` in an excerpt line elides what lies between
//! the parts around it; a line of `...` alone elides whole lines. Plain
//! ```` ```text ```` blocks are not compared.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::bin;

#[derive(Debug)]
enum Step {
    /// Commands, the exit codes that count as success, a text their output
    /// must hold and one it must not, and the excerpt the doc shows.
    Run(String, Vec<i32>, Option<String>, Option<String>, Option<String>),
    Background {
        cmd: String,
        wait: String,
        excerpt: Option<String>,
    },
}

impl Step {
    fn excerpt_mut(&mut self) -> &mut Option<String> {
        match self {
            Step::Run(.., e) => e,
            Step::Background { excerpt, .. } => excerpt,
        }
    }
}

/// The shape of a text, for comparing an excerpt with real output: runs of
/// whitespace become one space; a word of six hex digits with a digit in
/// it (a run id such as `9d3dd7`) becomes `ID`, a `0x…` token `HEX`; every
/// other run of digits `#`, and a number with a fractional part (or any
/// dotted run of numbers) one `#` too: rates print without trailing zeros,
/// so `177Mbit/s` and `175.285Mbit/s` are the same shape.
fn shape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let hex6 = word.len() == 6
            && word.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            && word.chars().any(|c| c.is_ascii_digit());
        if hex6 {
            out.push_str("ID");
        } else if word.starts_with("0x") && word.len() > 2 && word[2..].chars().all(|c| c.is_ascii_hexdigit())
        {
            out.push_str("HEX");
        } else {
            let mut digits = false;
            for c in word.chars() {
                if c.is_ascii_digit() {
                    if !digits {
                        out.push('#');
                    }
                    digits = true;
                } else {
                    out.push(c);
                    digits = false;
                }
            }
        }
        word.clear();
    };
    let mut space = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.push(c);
            space = false;
            continue;
        }
        flush(&mut word, &mut out);
        if c.is_whitespace() {
            if !space {
                out.push(' ');
            }
            space = true;
        } else {
            out.push(c);
            space = false;
        }
    }
    flush(&mut word, &mut out);
    while out.contains("#.#") {
        out = out.replace("#.#", "#");
    }
    out.trim().to_string()
}

/// The lines of `excerpt` not found in `output`, in shape: each line's
/// parts around `...` in order within one output line.
fn missing_lines(excerpt: &str, output: &str) -> Vec<String> {
    let outs: Vec<String> = output.lines().map(shape).collect();
    excerpt
        .lines()
        .filter(|l| !l.trim().is_empty() && l.trim() != "...")
        .filter(|l| {
            let parts: Vec<String> = l.split("...").map(shape).filter(|p| !p.is_empty()).collect();
            !outs.iter().any(|o| {
                let mut at = 0;
                parts.iter().all(|p| match o[at..].find(p.as_str()) {
                    Some(i) => {
                        at += i + p.len();
                        true
                    }
                    None => false,
                })
            })
        })
        .map(String::from)
        .collect()
}

/// The marked blocks of the walkthrough, in order.
fn steps(doc: &str) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        if line.trim_end() == "```text output" {
            let body: Vec<&str> = lines.by_ref().take_while(|l| !l.starts_with("```")).collect();
            let last = out.last_mut().expect("a ```text output block before any marked block");
            *last.excerpt_mut() = Some(body.join("\n"));
            continue;
        }
        let Some(info) = line.strip_prefix("```sh ") else { continue };
        let body: Vec<&str> = lines.by_ref().take_while(|l| !l.starts_with("```")).collect();
        let body = body.join("\n");
        if let Some(rest) =
            info.trim().strip_prefix("walkthrough").filter(|r| r.is_empty() || r.starts_with(' '))
        {
            let codes = match attr(rest, "exit=") {
                Some(c) => c.split('|').map(|n| n.parse().expect("exit=N|M")).collect(),
                None => vec![0],
            };
            let quoted = |key: &str| attr(rest, key).map(|v| v.trim_matches('"').to_string());
            out.push(Step::Run(body, codes, quoted("expect="), quoted("reject="), None));
        } else if let Some(rest) = info.strip_prefix("walkthrough-bg") {
            let wait = rest
                .trim()
                .strip_prefix("wait=\"")
                .and_then(|w| w.strip_suffix('"'))
                .unwrap_or_else(|| panic!("walkthrough-bg block without wait=\"TEXT\": {info}"));
            out.push(Step::Background { cmd: body, wait: wait.to_string(), excerpt: None });
        }
    }
    out
}

/// The value of `key` (e.g. `exit=`) in an info string: up to the next
/// space, or the closing quote of a quoted value.
fn attr<'a>(info: &'a str, key: &str) -> Option<&'a str> {
    let at = info.find(key)? + key.len();
    let rest = &info[at..];
    match rest.strip_prefix('"') {
        Some(q) => q.find('"').map(|end| &rest[..end + 2]),
        None => Some(rest.split_whitespace().next().unwrap_or("")),
    }
}

struct Service {
    cmd: String,
    child: Child,
    log: PathBuf,
}

fn log_of(s: &Service) -> String {
    let mut t = String::new();
    if let Ok(mut f) = std::fs::File::open(&s.log) {
        let _ = f.read_to_string(&mut t);
    }
    t
}

fn interrupt(s: &mut Service) {
    // The reader's Ctrl-C: kill(1) with the child's own pid.
    let _ = Command::new("kill").args(["-INT", &s.child.id().to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = s.child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = s.child.kill();
    let _ = s.child.wait();
}

#[test]
fn walkthrough_blocks_are_found() {
    let doc = std::fs::read_to_string(root().join("docs/walkthrough.md")).expect("docs/walkthrough.md");
    let s = steps(&doc);
    assert!(s.len() >= 10, "only {} marked blocks", s.len());
    let text = format!("{s:?}");
    for must in ["recv --mptcp --listen 0.0.0.0:5201", "tcpaccel lanes --config", "pace run", "net up"] {
        assert!(text.contains(must), "the walkthrough lost its {must:?} step");
    }
    let excerpts = s
        .iter()
        .filter(|st| matches!(st, Step::Run(.., Some(_)) | Step::Background { excerpt: Some(_), .. }));
    assert!(excerpts.count() >= 6, "the output excerpts are no longer compared");
}

#[test]
fn excerpts_compare_by_shape() {
    let out = "run 74817f up from examples/topologies/dumbbell.toml\n  h1       host   tcpaccel-74817f-h1\n\
               [  0]  21.58 MiB in 2.138 s =   84.697Mbit/s  retr 62  cc bbr  pacing cap none\n\
               summary: 0 critical, 1 warn, 3 unknown — verdict: unhealthy";
    // Other numbers, run ids and padding: the same shape.
    let same = "run 9d3dd7 up from examples/topologies/dumbbell.toml\n\
                h1 host tcpaccel-9d3dd7-h1\n...\n\
                [  0]  16.38 MiB in 3.100 s =    44.31Mbit/s  retr 0 ... pacing cap none\n\
                summary: 0 critical, 1 warn ... verdict: unhealthy";
    assert_eq!(missing_lines(same, out), Vec::<String>::new());
    // Another unit, word or verdict is not.
    let other = "[  0]  16.38 KiB in 3.100 s = 44.31Mbit/s\nsummary: ... verdict: healthy\nh1 router tcpaccel-9d3dd7-h1";
    assert_eq!(missing_lines(other, out).len(), 3, "{:?}", missing_lines(other, out));
    // Parts around `...` must come in order.
    assert_eq!(missing_lines("pacing cap none ... retr 0", out).len(), 1);
    assert_eq!(shape("token 0x1b45d915 age 10 ms lane ll0"), "token HEX age # ms lane ll#");
    // A rate that happens to be whole prints without decimals (CI once saw `177Mbit/s`).
    assert_eq!(shape("=      177Mbit/s  retr 2"), shape("=  175.285Mbit/s  retr 0"));
    assert_eq!(shape("to 10.10.0.2:5201"), "to #:#");
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn root_walkthrough_commands_run() {
    tcpaccel_sys::testing::require_root();
    let root = root();
    let doc = std::fs::read_to_string(root.join("docs/walkthrough.md")).expect("docs/walkthrough.md");
    let bin_dir = Path::new(bin()).parent().expect("binary directory").to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let tmp = std::env::temp_dir().join(format!("tcpaccel-walkthrough-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut run_id: Option<String> = None;
    let mut services: Vec<Service> = Vec::new();
    let mut nets: Vec<Service> = Vec::new();
    let shell = |cmd: &str, run_id: &Option<String>| {
        let mut c = Command::new("sh");
        c.arg("-c").arg(cmd).current_dir(&root).env("PATH", &path);
        if let Some(r) = run_id {
            c.env("TCPACCEL_NET_RUN", r);
        }
        c
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for (i, step) in steps(&doc).into_iter().enumerate() {
            match step {
                Step::Run(cmd, codes, expect, reject, excerpt) => {
                    if cmd.contains("tcpaccel net down") {
                        for mut s in services.drain(..) {
                            interrupt(&mut s);
                        }
                    }
                    let out = shell(&cmd, &run_id).output().expect("run sh");
                    let (o, e) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                    eprintln!("$ {cmd}\n{o}{e}");
                    assert!(
                        out.status.code().is_some_and(|c| codes.contains(&c)),
                        "step {i} `{cmd}` failed ({}, expected exit {codes:?}):\n{o}\n{e}",
                        out.status
                    );
                    let both = format!("{o}{e}");
                    if let Some(t) = expect {
                        assert!(both.contains(&t), "step {i} `{cmd}` did not print {t:?}:\n{both}");
                    }
                    if let Some(t) = reject {
                        assert!(!both.contains(&t), "step {i} `{cmd}` printed {t:?}:\n{both}");
                    }
                    if let Some(x) = excerpt {
                        // The doc's excerpt may show the services' lines too
                        // (the lanes daemon's decisions during a transfer).
                        let all = services.iter().fold(both.clone(), |a, s| a + "\n" + &log_of(s));
                        let missing = missing_lines(&x, &all);
                        assert!(
                            missing.is_empty(),
                            "step {i} `{cmd}`: the doc's output excerpt has lines the output lacks \
                             (compared by shape):\n{}\n--- output ---\n{all}",
                            missing.join("\n")
                        );
                    }
                    if cmd.contains("tcpaccel net down") {
                        for mut n in nets.drain(..) {
                            interrupt(&mut n);
                        }
                        run_id = None;
                    }
                }
                Step::Background { cmd, wait, excerpt } => {
                    let log = tmp.join(format!("step{i}.log"));
                    let f = std::fs::File::create(&log).unwrap();
                    let child = shell(&format!("exec {cmd}"), &run_id)
                        .stdout(Stdio::from(f.try_clone().unwrap()))
                        .stderr(Stdio::from(f))
                        .spawn()
                        .expect("spawn");
                    let mut s = Service { cmd: cmd.clone(), child, log };
                    let deadline = Instant::now() + Duration::from_secs(60);
                    loop {
                        let text = log_of(&s);
                        if text.contains(&wait) {
                            if cmd.contains("net up") {
                                run_id = text
                                    .lines()
                                    .find_map(|l| {
                                        l.strip_prefix("run ").and_then(|r| r.split_whitespace().next())
                                    })
                                    .map(String::from);
                                assert!(run_id.is_some(), "no run id in:\n{text}");
                            }
                            break;
                        }
                        if let Ok(Some(st)) = s.child.try_wait() {
                            panic!("step {i} `{cmd}` exited ({st}) before printing {wait:?}:\n{text}");
                        }
                        assert!(
                            Instant::now() < deadline,
                            "step {i} `{cmd}` never printed {wait:?}:\n{text}"
                        );
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    eprintln!("$ {} &   (ready)", s.cmd);
                    if let Some(x) = excerpt {
                        let text = log_of(&s);
                        let missing = missing_lines(&x, &text);
                        assert!(
                            missing.is_empty(),
                            "step {i} `{cmd}`: the doc's output excerpt has lines the output lacks \
                             (compared by shape):\n{}\n--- output ---\n{text}",
                            missing.join("\n")
                        );
                    }
                    if cmd.contains("net up") {
                        nets.push(s);
                    } else {
                        services.push(s);
                    }
                }
            }
        }
    }));
    for mut s in services.into_iter().chain(nets) {
        interrupt(&mut s);
    }
    let _ = std::fs::remove_dir_all(&tmp);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}
