//! `lab merge`: the shards of one run (`lab run --shard I/N`) joined into
//! the records an unsharded run of the same seed writes.
//!
//! [`merge`] is pure: it takes each shard's records in the order they were
//! written and returns one record list — the header without its shard, the
//! setup notes once, then every run's records in the runner's order
//! ([`shard::plan`]), then one end record. Only timing differs from an
//! unsharded run: the start time (the earliest shard's), each run's
//! `started`/`ended` and fidelity (another host, another moment) and the end
//! time (the latest shard's). [`merge_dirs`] reads the shard directories,
//! copies the files their records attach and writes the result.

use crate::runner::records::*;
use crate::runner::shard::{self, RunId, Shard};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(transparent)]
    Records(#[from] RecordsError),
    #[error("shard {0}: no run header first")]
    NoHeader(usize),
    #[error("{what}: shard {shard} was run with {other}, shard {first_shard} with {first} — not shards of one run")]
    Mismatch { what: &'static str, shard: String, other: String, first_shard: String, first: String },
    #[error("shard {shard} given twice")]
    Twice { shard: Shard },
    #[error("shards of {count}: missing {missing:?} (got {got:?})")]
    Missing { count: u32, missing: Vec<u32>, got: Vec<u32> },
    #[error(
        "shard {shard} holds records of repeat {repeat} of {variant:?}, a run of another shard or of none"
    )]
    Foreign { shard: Shard, repeat: u32, variant: String },
    #[error("{path}: attached by two shards")]
    AttachedTwice { path: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("no shard directories given")]
    Empty,
}

/// The run a record belongs to, when it names one.
fn run_of(r: &Record) -> Option<RunId> {
    let id = |variant: &String, repeat: u32| Some(RunId { repeat, variant: variant.clone() });
    match r {
        Record::Sample(s) => id(&s.variant, s.repeat),
        Record::Flow(f) => id(&f.variant, f.repeat),
        Record::Summary(s) => id(&s.variant, s.repeat),
        Record::Attachment(a) => id(&a.variant, a.repeat),
        Record::Fidelity(f) => id(&f.variant, f.repeat),
        Record::Run(_) | Record::Note { .. } | Record::End(_) => None,
    }
}

/// One shard's records cut by run: each run's records in the order
/// written, the notes no run claims (written after its last run), its end.
struct Cut {
    header: RunHeader,
    shard: Shard,
    runs: BTreeMap<RunId, Vec<Record>>,
    rest: Vec<Record>,
    end: Option<End>,
}

/// Where a shard's record stream stands, in the runner's writing order:
/// a run writes its records and notes, then its fidelity record, then its
/// summary or the note that it failed.
#[derive(PartialEq)]
enum At {
    Between,
    InRun,
    LastOfRun,
}

fn cut(i: usize, records: Vec<Record>) -> Result<Cut, MergeError> {
    let mut it = records.into_iter();
    let Some(Record::Run(header)) = it.next() else { return Err(MergeError::NoHeader(i)) };
    let shard = header.shard.unwrap_or(Shard::ALL);
    let mut c = Cut { header, shard, runs: BTreeMap::new(), rest: Vec::new(), end: None };
    let mut current: Option<RunId> = None;
    let mut at = At::Between;
    // Notes written before a run's first keyed record go with that run.
    let mut pending: Vec<Record> = Vec::new();
    for r in it {
        if let Record::End(e) = r {
            c.end = Some(e);
            continue;
        }
        let between = at == At::Between;
        match run_of(&r) {
            Some(id) if between || current.as_ref() != Some(&id) => {
                let rs = c.runs.entry(id.clone()).or_default();
                rs.append(&mut pending);
                current = Some(id);
                at = At::InRun;
            }
            None if between => {
                pending.push(r);
                continue;
            }
            _ => {}
        }
        let id = current.clone().expect("a run is open here");
        at = match (&r, at) {
            (Record::Fidelity(_), _) => At::LastOfRun,
            (_, At::LastOfRun) | (Record::Summary(_), _) => At::Between,
            (_, a) => a,
        };
        c.runs.entry(id).or_default().push(r);
    }
    c.rest = pending;
    Ok(c)
}

/// The header fields shards of one run share (all but timing, host and shard).
fn same_run(a: &RunHeader, b: &RunHeader) -> Option<(&'static str, String, String)> {
    macro_rules! check {
        ($($f:ident),*) => {$(
            if a.$f != b.$f {
                return Some((stringify!($f), format!("{:?}", b.$f), format!("{:?}", a.$f)));
            }
        )*};
    }
    check!(
        version,
        scenario,
        params,
        variants,
        repeats,
        quick,
        seed,
        tool_version,
        metrics,
        published,
        notes
    );
    None
}

/// Joins the records of every shard of one run (any order) into the
/// records of the whole run.
pub fn merge(shards: Vec<Vec<Record>>) -> Result<Vec<Record>, MergeError> {
    let cuts: Vec<Cut> = shards.into_iter().enumerate().map(|(i, r)| cut(i, r)).collect::<Result<_, _>>()?;
    let first = cuts.first().ok_or(MergeError::Empty)?;
    let count = first.shard.count;
    let mut seen = BTreeSet::new();
    for c in &cuts {
        if let Some((what, other, first_v)) = same_run(&first.header, &c.header) {
            return Err(MergeError::Mismatch {
                what,
                shard: c.shard.to_string(),
                other,
                first_shard: first.shard.to_string(),
                first: first_v,
            });
        }
        if c.shard.count != count {
            return Err(MergeError::Mismatch {
                what: "shard count",
                shard: c.shard.to_string(),
                other: c.shard.count.to_string(),
                first_shard: first.shard.to_string(),
                first: count.to_string(),
            });
        }
        if !seen.insert(c.shard.index) {
            return Err(MergeError::Twice { shard: c.shard });
        }
    }
    let missing: Vec<u32> = (0..count).filter(|i| !seen.contains(i)).collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing { count, missing, got: seen.into_iter().collect() });
    }
    let plan = shard::plan(&first.header.variants, first.header.repeats);
    let owner: BTreeMap<&RunId, Shard> = plan
        .iter()
        .enumerate()
        .map(|(k, id)| (id, Shard { index: (k % count as usize) as u32, count }))
        .collect();
    for c in &cuts {
        if let Some(id) = c.runs.keys().find(|id| owner.get(id) != Some(&c.shard)) {
            return Err(MergeError::Foreign {
                shard: c.shard,
                repeat: id.repeat,
                variant: id.variant.clone(),
            });
        }
    }

    let mut cuts = cuts;
    cuts.sort_by_key(|c| c.shard.index);
    let mut header = cuts[0].header.clone();
    header.shard = None;
    header.started = cuts.iter().map(|c| c.header.started).fold(f64::INFINITY, f64::min);
    let hosts: BTreeSet<(&str, usize)> =
        cuts.iter().map(|c| (c.header.kernel.as_str(), c.header.cpus)).collect();
    let mut out = vec![Record::Run(header)];
    if hosts.len() > 1 {
        let list: Vec<String> = cuts
            .iter()
            .map(|c| format!("shard {}: kernel {}, {} CPUs", c.shard, c.header.kernel, c.header.cpus))
            .collect();
        out.push(Record::Note {
            variant: None,
            text: format!("shards ran on unlike hosts: {}", list.join("; ")),
        });
    }
    let mut absent = 0usize;
    for id in &plan {
        let c = &mut cuts[owner[id].index as usize];
        match c.runs.remove(id) {
            Some(rs) => out.extend(rs),
            None => absent += 1,
        }
    }
    // Notes after a shard's last run, once each.
    let mut rest: Vec<Record> = Vec::new();
    for r in cuts.iter().flat_map(|c| &c.rest) {
        if !rest.contains(r) {
            rest.push(r.clone());
        }
    }
    out.extend(rest);
    let complete = cuts.iter().all(|c| c.end.as_ref().is_some_and(|e| e.complete)) && absent == 0;
    let ended = cuts.iter().filter_map(|c| c.end.as_ref().map(|e| e.ended)).fold(0.0, f64::max);
    let reason = if complete {
        // What the runner writes when every run finished.
        cuts.iter().find_map(|c| c.end.as_ref().map(|e| e.reason.clone())).unwrap_or_default()
    } else {
        cuts.iter()
            .filter(|c| !c.end.as_ref().is_some_and(|e| e.complete))
            .map(|c| match &c.end {
                Some(e) => format!("shard {}: {}", c.shard, e.reason),
                None => format!("shard {}: no end record (stopped while running)", c.shard),
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    out.push(Record::End(End { complete, ended, reason }));
    Ok(out)
}

/// Every record of `dir/records.jsonl` in order (the reader of [`read_run`]).
fn read_dir(dir: &Path) -> Result<Vec<Record>, MergeError> {
    Ok(read_records(dir)?)
}

/// Reads the shard directories, merges them into `out` (records and the
/// files their attachments name) and returns the merged run.
pub fn merge_dirs(dirs: &[PathBuf], out: &Path) -> Result<RunData, MergeError> {
    if dirs.is_empty() {
        return Err(MergeError::Empty);
    }
    let shards: Vec<Vec<Record>> = dirs.iter().map(|d| read_dir(d)).collect::<Result<_, _>>()?;
    // Where each attached file comes from, before merging consumes the records.
    let mut sources: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (dir, records) in dirs.iter().zip(&shards) {
        for r in records {
            if let Record::Attachment(a) = r {
                if sources.insert(a.path.clone(), dir.join(&a.path)).is_some() {
                    return Err(MergeError::AttachedTwice { path: a.path.clone() });
                }
            }
        }
    }
    let merged = merge(shards)?;
    let mut w = RecordWriter::create(out)?;
    for r in &merged {
        w.write(r)?;
    }
    for (rel, src) in &sources {
        let dst = out.join(rel);
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|source| MergeError::Io { path: parent.into(), source })?;
        }
        std::fs::copy(src, &dst).map_err(|source| MergeError::Io { path: src.clone(), source })?;
    }
    let mut data = RunData::default();
    for r in merged {
        data.push(r);
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(shard: Option<Shard>, started: f64) -> RunHeader {
        RunHeader {
            variants: vec!["a".into(), "b".into(), "c".into()],
            repeats: 2,
            shard,
            started,
            ..crate::testdata::header()
        }
    }

    fn flow(v: &str, repeat: u32, id: u64) -> Record {
        Record::Flow(FlowRecord {
            variant: v.into(),
            repeat,
            id,
            class: "short".into(),
            bytes: 1000 * id,
            start: 0.1 * id as f64,
            fct_ms: 5.0,
            completed: true,
            exp_start: None,
            exp_fct_ms: None,
            lane_bytes: BTreeMap::new(),
            retrans_bytes: None,
            capture: None,
        })
    }

    fn summary(v: &str, repeat: u32) -> Record {
        Record::Summary(Summary {
            variant: v.into(),
            repeat,
            metrics: [("goodput".to_string(), repeat as f64)].into(),
            started: 1.0,
            ended: 2.0,
        })
    }

    /// The records one run of `id` writes.
    fn run(id: &RunId) -> Vec<Record> {
        let note =
            |t: &str| Record::Note { variant: Some(id.variant.clone()), text: format!("{t} r{}", id.repeat) };
        let fidelity = Record::Fidelity(crate::testdata::fidelity(&id.variant, id.repeat, true));
        // The last run of a plan fails: its note comes after its fidelity.
        let last = id.repeat == 1 && id.variant == "c";
        vec![
            note("first"),
            flow(&id.variant, id.repeat, 1),
            note("between"),
            flow(&id.variant, id.repeat, 2),
            fidelity,
            if last { note("failed") } else { summary(&id.variant, id.repeat) },
        ]
    }

    fn end(complete: bool, ended: f64) -> Record {
        Record::End(End {
            complete,
            ended,
            reason: if complete { "all repeats done" } else { "interrupted" }.into(),
        })
    }

    /// What the runner writes for `shard`, from the same plan.
    fn records(shard: Option<Shard>) -> Vec<Record> {
        let s = shard.unwrap_or(Shard::ALL);
        let h = header(shard, 100.0 + s.index as f64);
        let plan = shard::plan(&h.variants, h.repeats);
        let mut out = vec![Record::Run(h)];
        for id in s.select(&plan) {
            out.extend(run(id));
        }
        out.push(end(true, 200.0 + s.index as f64));
        out
    }

    #[test]
    fn merged_shards_equal_the_unsharded_records() {
        let whole = records(None);
        for n in 1..=8u32 {
            // Shards given in any order.
            let shards: Vec<Vec<Record>> =
                (0..n).rev().map(|i| records(Some(Shard { index: i, count: n }))).collect();
            let mut merged = merge(shards).unwrap();
            // Timing: the earliest start, the latest end.
            let Record::Run(h) = &mut merged[0] else { panic!("header first") };
            assert_eq!(h.started, 100.0);
            h.started = 100.0 + 0.0;
            let Some(Record::End(e)) = merged.last_mut() else { panic!("end last") };
            assert_eq!(e.ended, 200.0 + (n - 1) as f64);
            e.ended = 200.0;
            assert_eq!(merged, whole, "{n} shards");
        }
    }

    #[test]
    fn refuses_shards_of_other_runs_and_gaps() {
        let s = |i, n| records(Some(Shard { index: i, count: n }));
        let e = merge(vec![s(0, 3), s(2, 3)]).unwrap_err().to_string();
        assert!(e.contains("missing [1]"), "{e}");
        let e = merge(vec![s(0, 2), s(0, 2), s(1, 2)]).unwrap_err().to_string();
        assert!(e.contains("0/2 given twice"), "{e}");
        let e = merge(vec![s(0, 2), s(1, 3)]).unwrap_err().to_string();
        assert!(e.contains("shard count"), "{e}");
        let mut other = s(1, 2);
        let Record::Run(h) = &mut other[0] else { panic!() };
        h.seed = 7;
        let e = merge(vec![s(0, 2), other]).unwrap_err().to_string();
        assert!(e.contains("seed: shard 1/2 was run with 7, shard 0/2 with 42"), "{e}");
        // A record of a run that is not the shard's.
        let mut stray = s(1, 2);
        stray.insert(2, flow("a", 0, 9));
        let e = merge(vec![s(0, 2), stray]).unwrap_err().to_string();
        assert!(e.contains("repeat 0 of \"a\""), "{e}");
        assert!(matches!(merge(vec![vec![end(true, 1.0)]]), Err(MergeError::NoHeader(0))));
        assert!(matches!(merge(vec![]), Err(MergeError::Empty)));
    }

    #[test]
    fn an_unfinished_shard_makes_the_merge_incomplete_and_says_which() {
        let mut cut_short = records(Some(Shard { index: 1, count: 2 }));
        cut_short.truncate(cut_short.len() - 3); // its last run half written, no end
        let merged = merge(vec![records(Some(Shard { index: 0, count: 2 })), cut_short]).unwrap();
        let Some(Record::End(e)) = merged.last() else { panic!("end last") };
        assert!(!e.complete);
        assert_eq!(e.reason, "shard 1/2: no end record (stopped while running)");
        let mut late = records(Some(Shard { index: 0, count: 2 }));
        *late.last_mut().unwrap() = end(false, 3.0);
        let merged = merge(vec![late, records(Some(Shard { index: 1, count: 2 }))]).unwrap();
        let Some(Record::End(e)) = merged.last() else { panic!("end last") };
        assert_eq!((e.complete, e.reason.as_str()), (false, "shard 0/2: interrupted"));
    }

    #[test]
    fn merge_dirs_copies_attachments_and_reads_back() {
        let base = std::env::temp_dir().join(format!("tcpaccel-merge-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let mut dirs = Vec::new();
        for i in 0..2u32 {
            let dir = base.join(format!("s{i}"));
            let mut w = RecordWriter::create(&dir).unwrap();
            let mut rs = records(Some(Shard { index: i, count: 2 }));
            let v = if i == 0 { "a" } else { "b" };
            let rel = format!("meter/{v}-r0.csv");
            std::fs::create_dir_all(dir.join("meter")).unwrap();
            std::fs::write(dir.join(&rel), format!("t,v\n{i},1\n")).unwrap();
            rs.insert(
                2,
                Record::Attachment(Attachment {
                    variant: v.into(),
                    repeat: 0,
                    kind: "csv".into(),
                    path: rel,
                }),
            );
            for r in &rs {
                w.write(r).unwrap();
            }
            dirs.push(dir);
        }
        let out = base.join("merged");
        let data = merge_dirs(&dirs, &out).unwrap();
        assert!(data.complete());
        assert_eq!(data.attachments.len(), 2);
        assert_eq!(std::fs::read_to_string(out.join("meter/b-r0.csv")).unwrap(), "t,v\n1,1\n");
        assert_eq!(read_run(&out).unwrap(), data, "what is written reads back as returned");
        assert_eq!(data.flows.len(), 12);
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A scenario whose runs write what their seed, variant and repeat
    /// give: the runner's own output, sharded and merged, must equal the
    /// unsharded run's.
    struct Seeded;
    struct SeededBed;
    impl crate::runner::scenario::Testbed for SeededBed {
        fn run_one(&mut self, ctx: &mut crate::runner::scenario::RunCtx<'_>) -> anyhow::Result<()> {
            ctx.note(format!("seed {}", ctx.seed))?;
            let mut rng = tcpaccel_core::rng::Rng::seeded(ctx.seed);
            for id in 0..3 {
                let bytes = 1 + rng.below(1 << 20);
                ctx.flow(id, &ctx.variant.clone(), bytes, id as f64 * 0.25, bytes as f64 / 1e3, true)?;
            }
            ctx.sample("x", 0.0, (ctx.seed % 1000) as f64)?;
            ctx.metric("m", ctx.repeat as f64);
            Ok(())
        }
    }
    impl crate::runner::scenario::Scenario for Seeded {
        fn name(&self) -> &'static str {
            "seeded"
        }
        fn title(&self) -> &'static str {
            "Seeded"
        }
        fn description(&self) -> &'static str {
            "runs that write what their seed gives"
        }
        fn params(&self) -> Vec<crate::runner::scenario::ParamSpec> {
            vec![]
        }
        fn variants(&self, _: &crate::runner::scenario::Params) -> anyhow::Result<Vec<String>> {
            Ok(vec!["a".into(), "b".into(), "c".into()])
        }
        fn metrics(&self) -> Vec<MetricSpec> {
            vec![MetricSpec::new("m", "", true, "")]
        }
        fn estimate(
            &self,
            _: &crate::runner::scenario::Params,
            _: tcpaccel_core::scale::Dilation,
        ) -> anyhow::Result<std::time::Duration> {
            Ok(std::time::Duration::from_millis(1))
        }
        fn prepare(
            &self,
            _: &crate::runner::scenario::Params,
            _: &crate::runner::scenario::RunConfig,
            _: &Path,
        ) -> anyhow::Result<Box<dyn crate::runner::scenario::Testbed>> {
            Ok(Box::new(SeededBed))
        }
    }

    /// The records with what timing decides blanked: start and end times,
    /// and the fidelity monitor's reading of the host.
    fn untimed(mut d: RunData) -> RunData {
        let h = d.header.as_mut().unwrap();
        h.started = 0.0;
        for s in &mut d.summaries {
            (s.started, s.ended) = (0.0, 0.0);
        }
        for f in &mut d.fidelity {
            *f = crate::testdata::fidelity(&f.variant, f.repeat, true);
        }
        if let Some(e) = &mut d.end {
            e.ended = 0.0;
        }
        d
    }

    #[test]
    fn the_runners_shards_merged_equal_its_unsharded_run() {
        use crate::runner::scenario::{resolve_params, run, RunOptions};
        let base = std::env::temp_dir().join(format!("tcpaccel-shards-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let opts = |out: PathBuf, shard| RunOptions {
            quick: false,
            repeats: Some(3),
            out,
            seed: 7,
            json: true,
            shard,
        };
        let params = resolve_params(&Seeded, false, &[]).unwrap();
        let whole = run(&Seeded, &params, &opts(base.join("whole"), Shard::ALL)).unwrap();
        assert_eq!((whole.flows.len(), whole.summaries.len()), (27, 9));
        for n in [2u32, 4, 9, 11] {
            let dirs: Vec<PathBuf> = (0..n)
                .map(|i| {
                    let dir = base.join(format!("{n}-{i}"));
                    let d = run(&Seeded, &params, &opts(dir.clone(), Shard { index: i, count: n })).unwrap();
                    assert_eq!(d.header().shard, Some(Shard { index: i, count: n }));
                    dir
                })
                .collect();
            let merged = merge_dirs(&dirs, &base.join(format!("{n}-merged"))).unwrap();
            assert_eq!(untimed(merged), untimed(whole.clone()), "{n} shards");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }
}
