//! iperf3's control protocol, the client's side of one TCP upload test:
//! pure encoding, decoding and the order of states, no sockets (the shell
//! is [`crate::iperf3_client`]).
//!
//! Written from iperf3's source (esnet/iperf `src/iperf_api.c`:
//! `send_parameters`, `send_results`, `get_results`, `JSON_write`/`JSON_read`;
//! `src/iperf_client_api.c`: `iperf_handle_message_client`; `src/iperf.h`:
//! the state numbers, `COOKIE_SIZE`). The exchange on the control
//! connection, for a test where the client sends:
//!
//! 1. client → server: a 37-byte cookie (36 characters of
//!    `[a-z2-7]` and a NUL); the same cookie opens each data connection.
//! 2. server → client: one signed byte per state change. `PARAM_EXCHANGE`
//!    (9): the client sends its parameters as JSON framed by a 4-byte
//!    big-endian length. `CREATE_STREAMS` (10): the client opens the data
//!    connections (each starts with the cookie). `TEST_START` (1), then
//!    `TEST_RUNNING` (2): the client sends data.
//! 3. client → server: `TEST_END` (4) when it has sent.
//! 4. server → client: `EXCHANGE_RESULTS` (13): the client sends its
//!    results JSON, then reads the server's (framed the same way).
//!    `DISPLAY_RESULTS` (14): the client answers `IPERF_DONE` (16) and closes.
//!
//! `ACCESS_DENIED` (-1: the server is busy with another client),
//! `SERVER_ERROR` (-2) and `SERVER_TERMINATE` (11) end the test at any point.

use serde::{Deserialize, Serialize};

/// Bytes of the cookie, its NUL included (`COOKIE_SIZE`).
pub const COOKIE_LEN: usize = 37;
/// Characters a cookie is made of (iperf3's `make_cookie`).
const COOKIE_CHARS: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// Largest JSON message taken from a server: its results carry one entry
/// per stream (and, if asked, its whole text output, which we never ask).
pub const MAX_JSON: usize = 1 << 20;

/// iperf3's states (`iperf.h`), one signed byte on the control connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    TestStart,
    TestRunning,
    TestEnd,
    ParamExchange,
    CreateStreams,
    ServerTerminate,
    ClientTerminate,
    ExchangeResults,
    DisplayResults,
    IperfStart,
    IperfDone,
    AccessDenied,
    ServerError,
}

impl State {
    pub fn byte(self) -> u8 {
        let v: i8 = match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfStart => 15,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
        };
        v as u8
    }

    pub fn from_byte(b: u8) -> Result<State, Iperf3Error> {
        Ok(match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            15 => State::IperfStart,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            _ => return Err(Iperf3Error::UnknownState(b)),
        })
    }
}

/// What went wrong in the exchange.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Iperf3Error {
    #[error("unknown iperf3 state byte {0}")]
    UnknownState(u8),
    #[error("the iperf3 server sent {got:?} while we expected {expected}")]
    Unexpected { got: State, expected: &'static str },
    #[error("the iperf3 server is busy with another test (ACCESS_DENIED)")]
    Busy,
    #[error("the iperf3 server reported an error (SERVER_ERROR {errno:?})")]
    ServerError { errno: Option<i32> },
    #[error("the iperf3 server ended the test (SERVER_TERMINATE)")]
    Terminated,
    #[error("iperf3 JSON message of {0} bytes is over the {MAX_JSON}-byte limit")]
    TooLong(usize),
    #[error("iperf3 results: {0}")]
    BadResults(String),
}

/// A cookie from 36 random bytes (only their low 5 bits count).
pub fn cookie(random: [u8; COOKIE_LEN - 1]) -> [u8; COOKIE_LEN] {
    let mut c = [0u8; COOKIE_LEN];
    for (o, r) in c.iter_mut().zip(random) {
        *o = COOKIE_CHARS[usize::from(r & 31)];
    }
    c
}

/// `JSON_write`'s framing: the length, 4 bytes big-endian, then the text.
pub fn frame(v: &serde_json::Value) -> Vec<u8> {
    let body = v.to_string().into_bytes();
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend(body);
    out
}

/// The length a framed message announces, refused above [`MAX_JSON`].
pub fn frame_len(prefix: [u8; 4]) -> Result<usize, Iperf3Error> {
    let n = u32::from_be_bytes(prefix) as usize;
    if n > MAX_JSON {
        return Err(Iperf3Error::TooLong(n));
    }
    Ok(n)
}

/// The parameters of one TCP test with the client sending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Seconds the server expects the test to last (it closes a test that
    /// runs far past it).
    pub time_s: u64,
    pub parallel: u16,
    /// Bytes per write (`-l`), reported by the server; ours may differ.
    pub len: u32,
    pub client_version: &'static str,
}

/// `send_parameters`' JSON for [`Params`] (the keys iperf3 3.x reads).
pub fn params_json(p: &Params) -> serde_json::Value {
    serde_json::json!({
        "tcp": true,
        "omit": 0,
        "time": p.time_s,
        "num": 0,
        "blockcount": 0,
        "parallel": p.parallel,
        "len": p.len,
        "pacing_timer": 1000,
        "client_version": p.client_version,
    })
}

/// One stream of a results message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    pub id: i64,
    /// Sent (sender) or received (receiver).
    pub bytes: u64,
    /// -1 when the side does not count them.
    pub retransmits: i64,
    #[serde(default)]
    pub start_time: f64,
    #[serde(default)]
    pub end_time: f64,
}

/// A side's results (`send_results`); the fields this client reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Results {
    pub streams: Vec<StreamResult>,
    pub congestion_used: Option<String>,
}

/// A signed count as iperf3 writes it: 3.12 writes -1 ("not counted") as
/// the unsigned 2^64 − 1.
fn signed(v: &serde_json::Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_u64().map(|u| u as i64))
}

fn stream_result(v: &serde_json::Value) -> Result<StreamResult, Iperf3Error> {
    let bad = |what: &str| Iperf3Error::BadResults(format!("a stream without a valid {what:?}: {v}"));
    let f = |k: &str| v.get(k).and_then(|x| x.as_f64()).unwrap_or(0.0);
    Ok(StreamResult {
        id: v.get("id").and_then(signed).ok_or_else(|| bad("id"))?,
        bytes: v.get("bytes").and_then(|b| b.as_u64()).ok_or_else(|| bad("bytes"))?,
        retransmits: v.get("retransmits").and_then(signed).unwrap_or(-1),
        start_time: f("start_time"),
        end_time: f("end_time"),
    })
}

/// The client's results JSON: what it sent per stream.
pub fn results_json(streams: &[StreamResult], congestion_used: Option<&str>) -> serde_json::Value {
    let mut v = serde_json::json!({
        "cpu_util_total": 0.0,
        "cpu_util_user": 0.0,
        "cpu_util_system": 0.0,
        "sender_has_retransmits": 1,
        "streams": streams.iter().map(|s| serde_json::json!({
            "id": s.id, "bytes": s.bytes, "retransmits": s.retransmits,
            "jitter": 0, "errors": 0, "omitted_errors": 0, "packets": 0, "omitted_packets": 0,
            "start_time": s.start_time, "end_time": s.end_time,
        })).collect::<Vec<_>>(),
    });
    if let Some(cc) = congestion_used {
        v["congestion_used"] = serde_json::Value::from(cc);
    }
    v
}

/// Reads the server's results JSON; a missing or malformed `streams` is an error.
pub fn parse_results(body: &[u8]) -> Result<Results, Iperf3Error> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| Iperf3Error::BadResults(e.to_string()))?;
    let streams =
        v.get("streams").cloned().ok_or_else(|| Iperf3Error::BadResults("no \"streams\"".into()))?;
    let arr =
        streams.as_array().ok_or_else(|| Iperf3Error::BadResults("\"streams\" is not a list".into()))?;
    let streams = arr.iter().map(stream_result).collect::<Result<Vec<_>, _>>()?;
    let congestion_used = v.get("congestion_used").and_then(|c| c.as_str()).map(str::to_string);
    Ok(Results { streams, congestion_used })
}

/// What the client does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing (informational state).
    Wait,
    /// Send the framed [`params_json`].
    SendParams,
    /// Open the data connections, each starting with the cookie.
    OpenStreams,
    /// Send data; when done, send [`State::TestEnd`].
    Run,
    /// Send our results, then read the server's.
    ExchangeResults,
    /// Send [`State::IperfDone`]; the test is over.
    Done,
}

/// The order of the server's states for one upload test.
#[derive(Debug, Clone, Default)]
pub struct Client {
    /// Index of the next state we expect in [`ORDER`].
    next: usize,
}

const ORDER: [(State, Step); 6] = [
    (State::ParamExchange, Step::SendParams),
    (State::CreateStreams, Step::OpenStreams),
    (State::TestStart, Step::Wait),
    (State::TestRunning, Step::Run),
    (State::ExchangeResults, Step::ExchangeResults),
    (State::DisplayResults, Step::Done),
];

impl Client {
    pub fn new() -> Client {
        Client::default()
    }

    /// No state taken yet.
    pub fn is_new(&self) -> bool {
        self.next == 0
    }

    /// The step for the state the server just sent; an error for a state out
    /// of order or one that ends the test. `errno` is the 4-byte code that
    /// follows `SERVER_ERROR`, when the shell could read it.
    pub fn on_state(&mut self, s: State, errno: Option<i32>) -> Result<Step, Iperf3Error> {
        match s {
            State::AccessDenied => return Err(Iperf3Error::Busy),
            State::ServerError => return Err(Iperf3Error::ServerError { errno }),
            State::ServerTerminate => return Err(Iperf3Error::Terminated),
            State::IperfStart => return Ok(Step::Wait),
            _ => {}
        }
        let Some(&(want, step)) = ORDER.get(self.next) else {
            return Err(Iperf3Error::Unexpected { got: s, expected: "nothing after DISPLAY_RESULTS" });
        };
        if s != want {
            return Err(Iperf3Error::Unexpected { got: s, expected: expected_name(want) });
        }
        self.next += 1;
        Ok(step)
    }
}

fn expected_name(s: State) -> &'static str {
    match s {
        State::ParamExchange => "PARAM_EXCHANGE",
        State::CreateStreams => "CREATE_STREAMS",
        State::TestStart => "TEST_START",
        State::TestRunning => "TEST_RUNNING",
        State::ExchangeResults => "EXCHANGE_RESULTS",
        _ => "DISPLAY_RESULTS",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_bytes_round_trip_and_are_signed() {
        for s in [
            State::TestStart,
            State::TestRunning,
            State::TestEnd,
            State::ParamExchange,
            State::CreateStreams,
            State::ServerTerminate,
            State::ClientTerminate,
            State::ExchangeResults,
            State::DisplayResults,
            State::IperfStart,
            State::IperfDone,
            State::AccessDenied,
            State::ServerError,
        ] {
            assert_eq!(State::from_byte(s.byte()), Ok(s));
        }
        assert_eq!(State::AccessDenied.byte(), 0xff);
        assert_eq!(State::ServerError.byte(), 0xfe);
        assert_eq!(State::DisplayResults.byte(), 14);
        assert_eq!(State::from_byte(3), Err(Iperf3Error::UnknownState(3)));
    }

    #[test]
    fn cookie_has_iperf3s_alphabet_and_a_nul() {
        let c = cookie([0xff; 36]);
        assert_eq!(&c[..36], [b'7'; 36]);
        assert_eq!(c[36], 0);
        let mut r = [0u8; 36];
        r[1] = 25;
        r[2] = 26 + 32; // high bits ignored
        let c = cookie(r);
        assert_eq!(&c[..3], b"az2");
    }

    #[test]
    fn framing_is_a_big_endian_length_then_the_text() {
        let f = frame(&serde_json::json!({ "a": 1 }));
        assert_eq!(&f[..4], &[0, 0, 0, 7]);
        assert_eq!(&f[4..], br#"{"a":1}"#);
        assert_eq!(frame_len([0, 0, 0, 7]), Ok(7));
        assert_eq!(frame_len([0, 0x20, 0, 0]), Err(Iperf3Error::TooLong(0x20_0000)));
    }

    #[test]
    fn params_have_the_keys_the_server_reads() {
        let v = params_json(&Params { time_s: 5, parallel: 1, len: 131072, client_version: "3.12" });
        assert_eq!(v["tcp"], true);
        assert_eq!(v["time"], 5);
        assert_eq!(v["parallel"], 1);
        assert_eq!(v["len"], 131072);
        assert!(v.get("reverse").is_none(), "the client sends");
    }

    #[test]
    fn results_round_trip_and_bad_results_are_errors() {
        let s = vec![StreamResult { id: 1, bytes: 123_456, retransmits: 7, start_time: 0.0, end_time: 2.5 }];
        let body = results_json(&s, Some("cubic")).to_string();
        let r = parse_results(body.as_bytes()).unwrap();
        assert_eq!(r.streams, s);
        assert_eq!(r.congestion_used.as_deref(), Some("cubic"));
        // What a 3.12 server sends as a receiver: -1 written unsigned.
        let server = br#"{"cpu_util_total":1.2,"sender_has_retransmits":-1,"streams":[{"id":1,"bytes":999,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0}]}"#;
        let r = parse_results(server).unwrap();
        assert_eq!(r.streams[0].bytes, 999);
        assert_eq!(r.streams[0].retransmits, -1);
        assert!(matches!(parse_results(b"{}"), Err(Iperf3Error::BadResults(_))));
        assert!(matches!(parse_results(b"not json"), Err(Iperf3Error::BadResults(_))));
        assert!(matches!(parse_results(br#"{"streams":[{"id":1}]}"#), Err(Iperf3Error::BadResults(_))));
    }

    #[test]
    fn the_client_follows_the_servers_order_and_stops_on_refusals() {
        let mut c = Client::new();
        assert_eq!(c.on_state(State::ParamExchange, None), Ok(Step::SendParams));
        assert_eq!(c.on_state(State::CreateStreams, None), Ok(Step::OpenStreams));
        assert_eq!(c.on_state(State::TestStart, None), Ok(Step::Wait));
        assert_eq!(c.on_state(State::TestRunning, None), Ok(Step::Run));
        assert_eq!(c.on_state(State::ExchangeResults, None), Ok(Step::ExchangeResults));
        assert_eq!(c.on_state(State::DisplayResults, None), Ok(Step::Done));
        assert!(matches!(c.on_state(State::DisplayResults, None), Err(Iperf3Error::Unexpected { .. })));

        let mut c = Client::new();
        assert_eq!(
            c.on_state(State::CreateStreams, None),
            Err(Iperf3Error::Unexpected { got: State::CreateStreams, expected: "PARAM_EXCHANGE" })
        );
        let mut c = Client::new();
        assert_eq!(c.on_state(State::AccessDenied, None), Err(Iperf3Error::Busy));
        assert_eq!(
            c.on_state(State::ServerError, Some(111)),
            Err(Iperf3Error::ServerError { errno: Some(111) })
        );
        assert_eq!(c.on_state(State::IperfStart, None), Ok(Step::Wait));
        assert_eq!(c.on_state(State::ParamExchange, None), Ok(Step::SendParams));
        assert_eq!(c.on_state(State::ServerTerminate, None), Err(Iperf3Error::Terminated));
    }
}
