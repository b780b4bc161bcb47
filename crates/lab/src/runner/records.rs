//! Versioned JSON Lines records of a lab run, and reading them back.
//!
//! A run directory holds `records.jsonl` (one [`Record`] per line, each with a
//! `type` tag) plus optional side files it names (e.g. 500 µs meter CSVs).
//! Reports are rendered from these records alone, so a copied directory
//! renders the same tables anywhere.
//!
//! Every record is flushed as soon as it is written: a run stopped by Ctrl-C
//! keeps everything up to that moment, and its missing `end` record (or one
//! with `complete: false`) marks it incomplete.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use tcpaccel_core::scale::Dilation;

/// Bumped when a field changes meaning; readers refuse newer major versions.
pub const RECORDS_VERSION: u32 = 1;
pub const RECORDS_FILE: &str = "records.jsonl";

/// A published reference figure shown beside a measured one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Published {
    pub variant: String,
    pub metric: String,
    pub value: f64,
    /// Where it comes from, e.g. "[PSPacer], table 1".
    pub source: String,
}

/// How a metric is shown in tables (unit and which direction is better).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSpec {
    pub name: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub description: String,
}

impl MetricSpec {
    pub fn new(name: &str, unit: &str, higher_is_better: bool, description: &str) -> MetricSpec {
        MetricSpec { name: name.into(), unit: unit.into(), higher_is_better, description: description.into() }
    }

    /// A metric where lower is better, or that has no better direction (drops, delays, CPU time).
    pub fn lower_is_better(name: &str, unit: &str, description: &str) -> MetricSpec {
        MetricSpec::new(name, unit, false, description)
    }
}

/// The header of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunHeader {
    pub version: u32,
    pub scenario: String,
    pub title: String,
    pub description: String,
    pub params: BTreeMap<String, String>,
    pub variants: Vec<String>,
    pub repeats: u32,
    pub quick: bool,
    pub seed: u64,
    pub kernel: String,
    pub cpus: usize,
    pub tool_version: String,
    /// Unix time in seconds (float).
    pub started: f64,
    pub metrics: Vec<MetricSpec>,
    pub published: Vec<Published>,
    /// Free text shown in the report (e.g. what was scaled and why).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The slice of the runs this process ran (`lab run --shard I/N`);
    /// absent for a whole run, and after `lab merge`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::runner::shard::Shard>,
    /// D of a time-dilated run (absent: not dilated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaled: Option<Scaled>,
}

/// A time-dilated run: D and the scenario parameter that set it (the one
/// parameter two runs compared at different D may differ in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scaled {
    pub param: String,
    pub d: Dilation,
}

impl RunHeader {
    /// D of this run: 1 when its scenario has no time dilation. Records
    /// hold D typed ([`RunHeader::scaled`], a zero refused when read), so
    /// there is no value to fall back from.
    pub fn dilation(&self) -> Dilation {
        self.scaled.as_ref().map_or(Dilation::ONE, |s| s.d)
    }
}

/// One time-series sample of one repeat of one variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub variant: String,
    pub repeat: u32,
    /// Series name, e.g. "goodput_mbps", "cwnd", "emu_mbps_500us".
    pub series: String,
    /// Seconds since the start of this repeat.
    pub t: f64,
    pub value: f64,
}

/// One flow's record (for CDFs of completion times).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRecord {
    pub variant: String,
    pub repeat: u32,
    pub id: u64,
    pub class: String,
    pub bytes: u64,
    pub start: f64,
    pub fct_ms: f64,
    #[serde(default)]
    pub completed: bool,
    /// In a dilated run (`scale` D > 1): `start` and `fct_ms` in experiment
    /// units (÷ D); absent at D = 1, where they equal the wall values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp_start: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp_fct_ms: Option<f64>,
    /// Bytes each lane carried for this flow ("sl", "ll0", ...), where the
    /// scenario measured them (the lanes scenarios: the sender's
    /// acknowledged bytes per subflow); absent otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lane_bytes: BTreeMap<String, u64>,
    /// Payload bytes the sender sent again for this flow
    /// (`tcpi_bytes_retrans`, every subflow), where the scenario read them;
    /// absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrans_bytes: Option<u64>,
    /// The flow's completion times as a capture at its sender showed them,
    /// where the scenario captured (the lanes scenarios with `capture=on`);
    /// absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CapturedTimes>,
}

/// A flow's times from its first SYN, in wall ms, as the sender's capture
/// showed them; a part not seen (an ACK the capture missed, a connection
/// reset before its FIN) is absent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CapturedTimes {
    /// First SYN → the ACK of the last data byte (every connection of the flow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_last_data_ack_ms: Option<f64>,
    /// First SYN → the ACK of the last FIN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_fin_ack_ms: Option<f64>,
}

/// Summary figures of one repeat of one variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub variant: String,
    pub repeat: u32,
    pub metrics: BTreeMap<String, f64>,
    /// Unix start/end of this repeat.
    pub started: f64,
    pub ended: f64,
}

/// A side file (e.g. meter CSV) relative to the run directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    pub variant: String,
    pub repeat: u32,
    pub kind: String,
    pub path: String,
}

/// Whether one variant × repeat ran on a host with CPU to spare
/// (`crate::runner::fidelity`): an unfaithful run measured the machine, and
/// its figures are shown apart with the reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FidelityRecord {
    pub variant: String,
    pub repeat: u32,
    pub faithful: bool,
    /// Why not (empty when faithful).
    pub reason: String,
    /// CPU sampling windows, and of them saturated.
    pub windows: usize,
    pub saturated_windows: usize,
    /// Lowest machine-wide idle share of a window, highest softirq share of
    /// a core in a window (absent without a window).
    pub min_idle_pct: Option<f64>,
    pub max_softirq_pct: Option<f64>,
    /// Share of the run's wall time in which some task on the host waited
    /// for a CPU (PSI `some`); recorded, not judged (see
    /// `crate::runner::fidelity::Observed`). Absent without PSI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_stall_pct: Option<f64>,
    /// The thresholds the verdict used.
    pub limit_idle_pct: f64,
    pub limit_softirq_pct: f64,
    pub limit_saturated_pct: f64,
    /// p99 of how late the run's flows started, experiment units (absent
    /// for a run without flows from the engine), and its limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_start_late_p99_ms: Option<f64>,
    #[serde(default)]
    pub limit_flow_start_late_ms: f64,
    /// p99 of how late the userspace emulator sent frames against its
    /// model's delivery time, wall ms: the worse direction of the emulators
    /// the run built (absent for a run without one, and in older records),
    /// and its limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emu_late_p99_ms: Option<f64>,
    #[serde(default)]
    pub limit_emu_late_ms: f64,
    /// The longest an emulator thread of the run took to come back for its
    /// next round beyond the sleep it asked for, wall ms (absent without an
    /// emulator, and in older records), and its limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emu_away_ms: Option<f64>,
    #[serde(default)]
    pub limit_emu_away_ms: f64,
    /// Busy share of the machine in the window the CPU rule hinges on
    /// (`tcpaccel_core::fidelity::Verdict::deciding_busy`), in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deciding_busy_pct: Option<f64>,
    /// For an unfaithful run of a scaled scenario: the D to try next
    /// (`tcpaccel_core::fidelity::suggest_scale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_scale: Option<u32>,
    /// The fabric's qdisc counters over the run, where the testbed has
    /// shaped ports (absent otherwise and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<QueueRecord>,
}

/// The fabric ports' root qdiscs over one run (`tcpaccel_core::fidelity::
/// queues`): counts from the first sample (before the run) to the last
/// (after it), backlogs as the monitor's samples saw them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueRecord {
    /// Shaped ports watched, and of them those that sent a packet.
    pub ports: usize,
    pub active_ports: usize,
    pub sent_bytes: u64,
    pub sent_packets: u64,
    pub drops: u64,
    /// Times a tbf held a packet back for want of tokens.
    pub overlimits: u64,
    /// Samples taken (one per monitor tick), and the mean wall time of one
    /// sweep over every namespace (the monitor's own cost).
    pub samples: usize,
    pub sweep_ms_mean: f64,
    pub peak_port_backlog_bytes: u64,
    pub peak_total_backlog_bytes: u64,
    pub mean_total_backlog_bytes: f64,
    /// `namespace/device` of the port that dropped most, and its drops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub most_drops_port: Option<String>,
    #[serde(default)]
    pub most_drops: u64,
    /// Why some or all ports could not be read (their counters are missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Closing record: whether all planned repeats finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct End {
    pub complete: bool,
    pub ended: f64,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Run(RunHeader),
    Sample(Sample),
    Flow(FlowRecord),
    Summary(Summary),
    Attachment(Attachment),
    Fidelity(FidelityRecord),
    /// A free-form note of the run (e.g. the doctor's findings, a warning).
    Note {
        variant: Option<String>,
        text: String,
    },
    End(End),
}

#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}: not a record: {msg}")]
    Parse { path: PathBuf, line: usize, msg: String },
    #[error("{path}: no run header (is this a tcpaccel lab run directory?)")]
    NoHeader { path: PathBuf },
    #[error("{path}: records version {found} is newer than this tcpaccel understands ({RECORDS_VERSION})")]
    Version { path: PathBuf, found: u32 },
}

/// Appends records to `DIR/records.jsonl`, flushing each line.
pub struct RecordWriter {
    file: File,
    path: PathBuf,
}

impl RecordWriter {
    pub fn create(dir: &Path) -> Result<RecordWriter, RecordsError> {
        std::fs::create_dir_all(dir)
            .map_err(|source| RecordsError::Io { path: dir.to_path_buf(), source })?;
        let path = dir.join(RECORDS_FILE);
        let file = File::create(&path).map_err(|source| RecordsError::Io { path: path.clone(), source })?;
        Ok(RecordWriter { file, path })
    }

    pub fn write(&mut self, r: &Record) -> Result<(), RecordsError> {
        let mut line = serde_json::to_string(r)
            .map_err(|e| RecordsError::Io { path: self.path.clone(), source: std::io::Error::other(e) })?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.flush())
            .map_err(|source| RecordsError::Io { path: self.path.clone(), source })
    }
}

/// All records of a run directory, grouped.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunData {
    pub header: Option<RunHeader>,
    pub samples: Vec<Sample>,
    pub flows: Vec<FlowRecord>,
    pub summaries: Vec<Summary>,
    pub attachments: Vec<Attachment>,
    /// One per variant × repeat that ran (runs recorded before the monitor have none).
    pub fidelity: Vec<FidelityRecord>,
    pub notes: Vec<(Option<String>, String)>,
    pub end: Option<End>,
    /// The claims of the run's scenario the report judges (not in the
    /// records: the runner, or whoever reads a run directory and knows the
    /// scenario — `crate::scenarios::with_claims` —, sets today's).
    pub claims: Vec<crate::runner::claims::Claim>,
    /// The human names of the scenario's metric and series keys, set with
    /// the claims ([`Scenario::names`](crate::runner::scenario::Scenario::names)).
    pub names: Vec<(&'static str, &'static str)>,
    /// What a bare point counts in the scenario, set with the claims
    /// ([`Scenario::point_label`](crate::runner::scenario::Scenario::point_label)).
    pub point_label: Option<&'static str>,
    /// The parameters of the scenario's published figures, set with the
    /// claims ([`Scenario::paper_scale`](crate::runner::scenario::Scenario::paper_scale)).
    pub paper_scale: &'static [(&'static str, &'static str)],
}

impl RunData {
    pub fn header(&self) -> &RunHeader {
        // Constructed only by `read_run`, which refuses data without a header.
        self.header.as_ref().expect("read_run guarantees a header")
    }

    pub fn complete(&self) -> bool {
        self.end.as_ref().is_some_and(|e| e.complete)
    }

    /// Whether `variant`'s `repeat` ran faithfully: `None` when no verdict
    /// was recorded (older records).
    pub fn faithful(&self, variant: &str, repeat: u32) -> Option<bool> {
        self.fidelity.iter().find(|f| f.variant == variant && f.repeat == repeat).map(|f| f.faithful)
    }

    pub fn push(&mut self, r: Record) {
        match r {
            Record::Run(h) => self.header = Some(h),
            Record::Sample(s) => self.samples.push(s),
            Record::Flow(f) => self.flows.push(f),
            Record::Summary(s) => self.summaries.push(s),
            Record::Attachment(a) => self.attachments.push(a),
            Record::Fidelity(f) => self.fidelity.push(f),
            Record::Note { variant, text } => self.notes.push((variant, text)),
            Record::End(e) => self.end = Some(e),
        }
    }
}

/// Reads `DIR/records.jsonl`. A truncated last line (a run killed mid-write) is ignored.
pub fn read_run(dir: &Path) -> Result<RunData, RecordsError> {
    let path = dir.join(RECORDS_FILE);
    let mut data = RunData::default();
    for r in read_records(dir)? {
        data.push(r);
    }
    match &mut data.header {
        None => Err(RecordsError::NoHeader { path }),
        Some(h) if h.version > RECORDS_VERSION => Err(RecordsError::Version { path, found: h.version }),
        Some(h) => {
            h.scaled =
                scaled_before_the_field(h).map_err(|msg| RecordsError::Parse { path, line: 1, msg })?;
            Ok(data)
        }
    }
}

/// Records written before [`RunHeader::scaled`] kept D only as the lanes
/// scenarios' `scale` parameter: read it from there, once, when the
/// records are read, by the typed reader the lanes scenarios read it with
/// (a bad value is refused, not taken for D = 1).
fn scaled_before_the_field(h: &RunHeader) -> Result<Option<Scaled>, String> {
    const OLD_KEY: &str = "scale";
    /// The one parameter of an old header read here (the rest ignored).
    #[derive(serde::Deserialize)]
    struct Old {
        #[serde(default)]
        scale: Option<Dilation>,
    }
    if let Some(s) = &h.scaled {
        return Ok(Some(s.clone()));
    }
    let old: Old = crate::runner::scenario::Params(h.params.clone()).typed().map_err(|e| e.to_string())?;
    Ok(old.scale.map(|d| Scaled { param: OLD_KEY.into(), d }))
}

/// Every record of `DIR/records.jsonl` in the order written (a torn last
/// line ignored), for readers that need the order ([`read_run`] groups them).
pub fn read_records(dir: &Path) -> Result<Vec<Record>, RecordsError> {
    let path = dir.join(RECORDS_FILE);
    let f = File::open(&path).map_err(|source| RecordsError::Io { path: path.clone(), source })?;
    let lines: Vec<String> = BufReader::new(f)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(|source| RecordsError::Io { path: path.clone(), source })?;
    let mut out = Vec::with_capacity(lines.len());
    let n = lines.len();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(line) {
            Ok(r) => out.push(r),
            Err(_) if i + 1 == n => {} // torn final line
            Err(e) => return Err(RecordsError::Parse { path, line: i + 1, msg: e.to_string() }),
        }
    }
    Ok(out)
}

/// Seconds since the Unix epoch, for record timestamps (wall clock is right here:
/// these are labels for humans, not inputs to any algorithm).
pub fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Kernel release (`uname -r`) read from /proc.
pub fn kernel_release() -> String {
    tcpaccel_sys::sysctl::read("kernel.osrelease").unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_torn_line() {
        let dir = std::env::temp_dir().join(format!("tcpaccel-rec-{}", std::process::id()));
        let mut w = RecordWriter::create(&dir).unwrap();
        let h = crate::testdata::header();
        w.write(&Record::Run(h.clone())).unwrap();
        w.write(&Record::Sample(Sample {
            variant: "a".into(),
            repeat: 0,
            series: "goodput_mbps".into(),
            t: 0.1,
            value: 5.0,
        }))
        .unwrap();
        drop(w);
        // Simulate a kill mid-write.
        let mut f = std::fs::OpenOptions::new().append(true).open(dir.join(RECORDS_FILE)).unwrap();
        f.write_all(b"{\"type\":\"summ").unwrap();
        let d = read_run(&dir).unwrap();
        assert_eq!(d.header.as_ref(), Some(&h));
        assert_eq!(d.samples.len(), 1);
        assert!(!d.complete());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn d_is_typed_in_the_header_and_flows_carry_experiment_units() {
        let mut h = crate::testdata::header();
        assert_eq!(h.dilation(), Dilation::ONE, "not scaled: D = 1");
        h.scaled = Some(Scaled { param: "scale".into(), d: Dilation::new(4).unwrap() });
        assert_eq!(h.dilation().get(), 4);
        let line = serde_json::to_string(&Record::Run(h.clone())).unwrap();
        assert!(line.contains("\"scaled\":{\"param\":\"scale\",\"d\":4}"), "{line}");
        // A zero D is refused when read, not taken for 1.
        let zero = line.replace("\"d\":4", "\"d\":0");
        assert!(serde_json::from_str::<Record>(&zero).is_err());
        // Records of before the field: D from their `scale` parameter, a bad one refused.
        let mut old = crate::testdata::header();
        old.params.insert("scale".into(), "3".into());
        assert_eq!(scaled_before_the_field(&old).unwrap().map(|s| s.d.get()), Some(3));
        old.params.insert("scale".into(), "x".into());
        assert_eq!(
            scaled_before_the_field(&old).unwrap_err(),
            "parameter scale=\"x\": expected a whole number"
        );
        old.params.insert("scale".into(), "0".into());
        let e = scaled_before_the_field(&old).unwrap_err();
        assert_eq!(e, "parameter scale=\"0\": the scale factor D must be at least 1, got 0");
        old.params.remove("scale");
        assert_eq!(scaled_before_the_field(&old), Ok(None), "not scaled");
        // A flow record of before the field reads back without it.
        let old = r#"{"type":"flow","variant":"a","repeat":0,"id":1,"class":"short","bytes":10,"start":0.5,"fct_ms":8.0,"completed":true}"#;
        let Record::Flow(f) = serde_json::from_str::<Record>(old).unwrap() else { panic!("not a flow") };
        assert_eq!((f.exp_start, f.exp_fct_ms), (None, None));
        assert!(f.lane_bytes.is_empty());
        let line = serde_json::to_string(&Record::Flow(f.clone())).unwrap();
        assert!(!line.contains("lane_bytes"), "no lanes measured, no field: {line}");
        let lanes = [("sl".to_string(), 3u64), ("ll0".to_string(), 7)].into();
        let f = FlowRecord { exp_start: Some(0.125), exp_fct_ms: Some(2.0), lane_bytes: lanes, ..f };
        let line = serde_json::to_string(&Record::Flow(f.clone())).unwrap();
        assert!(line.contains("\"exp_fct_ms\":2.0"), "{line}");
        assert!(line.contains("\"lane_bytes\":{\"ll0\":7,\"sl\":3}"), "{line}");
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), Record::Flow(f));
    }

    /// A value read back is the value written, to the bit: `lab merge`
    /// writes again what it read, and serde_json's default float parser
    /// read 1.0239339140000001 as 1.023933914.
    #[test]
    fn floats_read_back_to_the_bit() {
        let mut rng = tcpaccel_core::rng::Rng::seeded(5);
        let mut values = vec![1.0239339140000001, 0.1 + 0.2, 1e-300, 123456.78901234567];
        values.extend((0..2000).map(|_| rng.next_f64() * 10f64.powi(rng.below(12) as i32 - 4)));
        for v in values {
            let r = Record::Sample(Sample {
                variant: "a".into(),
                repeat: 0,
                series: "x".into(),
                t: v,
                value: -v,
            });
            let back: Record = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
            let Record::Sample(s) = back else { panic!("not a sample") };
            assert_eq!((s.t.to_bits(), s.value.to_bits()), (v.to_bits(), (-v).to_bits()), "{v:?}");
        }
    }

    #[test]
    fn refuses_no_header_and_newer_version() {
        let dir = std::env::temp_dir().join(format!("tcpaccel-rec2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(RECORDS_FILE), "{\"type\":\"note\",\"variant\":null,\"text\":\"x\"}\n")
            .unwrap();
        assert!(matches!(read_run(&dir), Err(RecordsError::NoHeader { .. })));
        let mut h = crate::testdata::header();
        h.version = RECORDS_VERSION + 1;
        std::fs::write(dir.join(RECORDS_FILE), serde_json::to_string(&Record::Run(h)).unwrap() + "\n")
            .unwrap();
        assert!(matches!(read_run(&dir), Err(RecordsError::Version { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
