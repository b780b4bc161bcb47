//! A TCP upload to an `iperf3 -s`, with our socket options on the data
//! connection: the thin socket shell around [`crate::iperf3`].
//!
//! What it is: [`run_iperf3_upload`], which takes the same [`SendConfig`]
//! as [`crate::run_send`] (one stream, upload, a duration; congestion
//! control, buffers and `static:RATE` pacing on the data socket) and gives
//! the same interval reports and summary, so a caller can measure against
//! either receiver. The goodput is the bytes the iperf3 server says it
//! received over the time from the first byte until our socket saw the
//! last one acknowledged. What it is not: no reverse or parallel tests, no
//! UDP, no dynamic pacing.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tcpaccel_core::units::Rate;
use tcpaccel_sys::{sockopt, tcpinfo};

use crate::iperf3::{self, Client, Iperf3Error, Params, State, Step, StreamResult};
use crate::pace::{framing_from_tcp_info, Pace};
use crate::pump::{self, Until};
use crate::report::{IntervalReport, Report, StreamSample};
use crate::send::{SendConfig, SendSummary, StreamSummary, Volume};
use crate::{Error, Result};

/// Bytes per write on the data connection, also announced as `len`.
const BLOCK: u32 = 128 * 1024;
/// How long we wait for the last byte's acknowledgment after writing.
const DRAIN_MAX: Duration = Duration::from_secs(10);

fn proto(peer: SocketAddr, e: Iperf3Error) -> Error {
    Error::Protocol { peer, msg: e.to_string() }
}

fn read_exact(s: &mut TcpStream, buf: &mut [u8], peer: SocketAddr, what: &str) -> Result<()> {
    s.read_exact(buf).map_err(|e| Error::io(format!("iperf3: read {what}"), peer, e))
}

fn write_all(s: &mut TcpStream, buf: &[u8], peer: SocketAddr, what: &str) -> Result<()> {
    s.write_all(buf).map_err(|e| Error::io(format!("iperf3: send {what}"), peer, e))
}

fn random_cookie() -> [u8; iperf3::COOKIE_LEN] {
    let mut rng = tcpaccel_core::rng::Rng::fork(crate::send::session_id(7), 0);
    let mut r = [0u8; iperf3::COOKIE_LEN - 1];
    for b in r.iter_mut() {
        *b = rng.next_u64() as u8;
    }
    iperf3::cookie(r)
}

/// Tries of the control connection while the server says nothing and closes.
const BUSY_TRIES: u32 = 10;
/// The wait between two of them: a server takes a moment after a test
/// (its report, a fresh listening socket) before it takes the next client.
const BUSY_WAIT: Duration = Duration::from_millis(300);

/// Connects the control connection and sends the cookie, and reads the
/// first state byte. A server busy with another client (or still ending the
/// last test) writes ACCESS_DENIED and closes without reading our cookie, so
/// the reset can overtake the byte: that is tried again, a few times.
fn open_control(
    peer: SocketAddr,
    cookie: &[u8; iperf3::COOKIE_LEN],
    connect_timeout: Duration,
    timeout: Duration,
) -> Result<(TcpStream, Option<u8>)> {
    let mut tries = 0;
    loop {
        tries += 1;
        let mut ctrl = match TcpStream::connect_timeout(&peer, connect_timeout) {
            Ok(c) => c,
            // Between two tests the server closes and reopens its listening
            // socket; a refusal then is as passing as a busy server.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused && tries < BUSY_TRIES => {
                std::thread::sleep(BUSY_WAIT);
                continue;
            }
            Err(e) => return Err(Error::io("iperf3: connect the control connection", peer, e)),
        };
        ctrl.set_read_timeout(Some(timeout)).map_err(|e| Error::io("set read timeout", peer, e))?;
        ctrl.set_nodelay(true).map_err(|e| Error::io("set TCP_NODELAY", peer, e))?;
        let mut b = [0u8; 1];
        let r = ctrl.write_all(cookie).and_then(|()| ctrl.read_exact(&mut b));
        match r {
            Ok(()) if b[0] == State::AccessDenied.byte() && tries < BUSY_TRIES => {
                std::thread::sleep(BUSY_WAIT)
            }
            Ok(()) => return Ok((ctrl, Some(b[0]))),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::UnexpectedEof
                        | std::io::ErrorKind::BrokenPipe
                ) =>
            {
                if tries >= BUSY_TRIES {
                    return Err(Error::io(
                        format!("iperf3: the server closed the control connection at once, {tries} times (busy with another test?)"),
                        peer,
                        e,
                    ));
                }
                std::thread::sleep(BUSY_WAIT);
            }
            Err(e) => return Err(Error::io("iperf3: open the control connection", peer, e)),
        }
    }
}

/// One upload test against an iperf3 server (module docs).
pub fn run_iperf3_upload(cfg: SendConfig, mut on_report: impl FnMut(&Report)) -> Result<SendSummary> {
    let peer = cfg.to;
    let Volume::Duration(duration) = cfg.volume else {
        return Err(Error::Config("an iperf3 test here runs for a duration, not a byte count".into()));
    };
    if cfg.parallel != 1 || cfg.reverse || cfg.mptcp || cfg.checksum {
        return Err(Error::Config(
            "an iperf3 test here is one plain TCP stream from us to the server".into(),
        ));
    }
    let static_rate = match cfg.pace {
        Pace::None => None,
        Pace::Static(r) => Some(r),
        Pace::Dynamic { .. } => {
            return Err(Error::Config("an iperf3 test here paces with none or static:RATE only".into()))
        }
    };
    let timeout = cfg.receipt_timeout;
    let cookie = random_cookie();
    let (mut ctrl, first) = open_control(peer, &cookie, cfg.connect_timeout, timeout)?;

    let mut client = Client::new();
    let mut data: Option<TcpStream> = None;
    let mut framing = cfg.framing.unwrap_or(crate::pace::Framing::ETHERNET_1500_TS);
    let mut pacing_cap = None;
    let mut run: Option<Ran> = None;
    let mut received = None;
    let mut congestion_used = None;
    loop {
        let b = match (client.is_new(), first) {
            (true, Some(b)) => [b],
            _ => {
                let mut b = [0u8; 1];
                read_exact(&mut ctrl, &mut b, peer, "the server's state")?;
                b
            }
        };
        let state = State::from_byte(b[0]).map_err(|e| proto(peer, e))?;
        let errno = if state == State::ServerError {
            let mut e = [0u8; 4];
            ctrl.read_exact(&mut e).ok().map(|_| i32::from_be_bytes(e))
        } else {
            None
        };
        match client.on_state(state, errno).map_err(|e| proto(peer, e))? {
            Step::Wait => {}
            Step::SendParams => {
                let p = Params {
                    // The server stops a test that runs well past its time;
                    // give it the whole seconds of ours, rounded up.
                    time_s: duration.as_secs() + u64::from(duration.subsec_nanos() > 0),
                    parallel: 1,
                    len: BLOCK,
                    client_version: "3.12",
                };
                write_all(&mut ctrl, &iperf3::frame(&iperf3::params_json(&p)), peer, "parameters")?;
            }
            Step::OpenStreams => {
                let mut s = crate::send::connect(&cfg)?;
                write_all(&mut s, &cookie, peer, "the data connection's cookie")?;
                if let (None, Ok(i)) = (cfg.framing, tcpinfo::tcp_info(&s)) {
                    framing = framing_from_tcp_info(&i, peer.is_ipv6());
                }
                if let Some(r) = static_rate {
                    let cap = framing.payload_bytes_per_sec(r);
                    sockopt::set_max_pacing_rate(&s, cap)?;
                    pacing_cap = Some(cap);
                }
                pump::limit_unsent(&s, pacing_cap);
                data = Some(s);
            }
            Step::Run => {
                let s =
                    data.as_ref().ok_or_else(|| proto(peer, Iperf3Error::BadResults("no stream".into())))?;
                run = Some(send_and_sample(&cfg, s, duration, &mut on_report)?);
                write_all(&mut ctrl, &[State::TestEnd.byte()], peer, "TEST_END")?;
            }
            Step::ExchangeResults => {
                let r =
                    run.as_ref().ok_or_else(|| proto(peer, Iperf3Error::BadResults("no test ran".into())))?;
                let cc = data.as_ref().and_then(|s| sockopt::get_congestion(s).ok());
                let ours = [StreamResult {
                    id: 1,
                    bytes: r.written,
                    retransmits: r.retransmits.map_or(-1, i64::from),
                    start_time: 0.0,
                    end_time: r.duration.as_secs_f64(),
                }];
                write_all(
                    &mut ctrl,
                    &iperf3::frame(&iperf3::results_json(&ours, cc.as_deref())),
                    peer,
                    "results",
                )?;
                let mut len = [0u8; 4];
                read_exact(&mut ctrl, &mut len, peer, "the server's results length")?;
                let n = iperf3::frame_len(len).map_err(|e| proto(peer, e))?;
                let mut body = vec![0u8; n];
                read_exact(&mut ctrl, &mut body, peer, "the server's results")?;
                let theirs = iperf3::parse_results(&body).map_err(|e| proto(peer, e))?;
                received = Some(theirs.streams.iter().map(|s| s.bytes).sum::<u64>());
                congestion_used = cc;
            }
            Step::Done => {
                write_all(&mut ctrl, &[State::IperfDone.byte()], peer, "IPERF_DONE")?;
                break;
            }
        }
    }
    let _ = ctrl.shutdown(Shutdown::Both);
    let r = run.ok_or_else(|| proto(peer, Iperf3Error::BadResults("no test ran".into())))?;
    let bytes = received.unwrap_or(0);
    let goodput = Rate::from_bytes_over(bytes, r.duration).bits_per_sec();
    let local = data.as_ref().and_then(|s| s.local_addr().ok());
    Ok(SendSummary {
        kind: "summary",
        to: peer,
        mode: crate::proto::Mode::Upload,
        pace: cfg.pace,
        session: 0,
        seed: cfg.seed,
        bytes,
        duration_s: r.duration.as_secs_f64(),
        goodput_bps: goodput,
        retransmits: r.retransmits.map(u64::from),
        checksum_ok: None,
        stopped_early: r.stopped_early,
        streams: vec![StreamSummary {
            stream: 0,
            local,
            bytes,
            app_bytes: r.written,
            duration_s: r.duration.as_secs_f64(),
            goodput_bps: goodput,
            retransmits: r.retransmits,
            cc: congestion_used,
            pacing_cap_bytes_per_sec: pacing_cap,
            applied_pacing_cap_bytes_per_sec: data
                .as_ref()
                .and_then(|s| sockopt::get_max_pacing_rate(s).ok()),
            framing,
            sha256: None,
            peer_sha256: None,
        }],
    })
}

/// What the data connection did.
struct Ran {
    written: u64,
    /// From the first write until the last byte was acknowledged.
    duration: Duration,
    retransmits: Option<u32>,
    stopped_early: bool,
}

/// Writes for `duration` on a thread while this one samples TCP_INFO every
/// `cfg.interval`; then waits (bounded) until everything is acknowledged.
fn send_and_sample(
    cfg: &SendConfig,
    s: &TcpStream,
    duration: Duration,
    on_report: &mut impl FnMut(&Report),
) -> Result<Ran> {
    let peer = cfg.to;
    let stop = cfg.stop.clone().unwrap_or_default();
    let abort = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(AtomicU64::new(0));
    let writer = s.try_clone().map_err(|e| Error::io("clone the data socket", peer, e))?;
    let t0 = Instant::now();
    let (c2, a2, st2) = (Arc::clone(&counter), Arc::clone(&abort), Arc::clone(&stop));
    let buf = pump::pattern(cfg.seed, 0);
    let handle = std::thread::Builder::new()
        .name("iperf3-send".into())
        .spawn(move || {
            pump::write_data(&writer, &buf, Until::Deadline(t0 + duration), &c2, None, Some(&st2), &a2)
        })
        .map_err(|e| Error::io("spawn the iperf3 sender thread", peer, e))?;
    let tick = cfg.interval.unwrap_or(Duration::from_millis(100));
    let (mut last, mut reported, mut last_retr) = (t0, 0u64, 0u32);
    let mut sample = |now: Instant, on_report: &mut dyn FnMut(&Report)| -> Option<tcpinfo::TcpInfo> {
        let info = tcpinfo::tcp_info(s).ok();
        // TCP counts the SYN as one acknowledged byte; the cookie is not data.
        let acked = info
            .as_ref()
            .and_then(|i| i.bytes_acked)
            .map(|a| a.saturating_sub(1 + iperf3::COOKIE_LEN as u64))
            .unwrap_or(0);
        let bytes = acked.saturating_sub(reported);
        reported += bytes;
        let retr = info.as_ref().map(|i| i.total_retrans);
        let d_retr = retr.map(|r| r.saturating_sub(last_retr));
        last_retr = retr.unwrap_or(last_retr);
        if cfg.interval.is_some() {
            let st = StreamSample::new(0, bytes, now.duration_since(last), d_retr, info.as_ref());
            on_report(&Report::Interval(IntervalReport::new(
                last.duration_since(t0),
                now.duration_since(t0),
                vec![st],
            )));
        }
        last = now;
        info
    };
    let mut next = t0 + tick;
    while !handle.is_finished() {
        std::thread::sleep(tick.min(Duration::from_millis(50)));
        let now = Instant::now();
        if now >= next {
            sample(now, on_report);
            next = now + tick;
        }
    }
    let written = handle
        .join()
        .map_err(|_| Error::Protocol { peer, msg: "the iperf3 sender thread panicked".into() })?
        .map_err(|e| Error::io("iperf3: send data", peer, e))?;
    // Until the server has it all: our socket's unacknowledged and unsent
    // bytes at zero (bounded, and cut by a stop request).
    let drain_end = Instant::now() + DRAIN_MAX;
    let mut info;
    loop {
        let now = Instant::now();
        info = sample(now, on_report);
        let done = info.as_ref().is_none_or(|i| i.unacked == 0 && i.notsent_bytes.unwrap_or(0) == 0);
        if done || now >= drain_end || stop.load(Ordering::Relaxed) {
            break;
        }
        std::thread::sleep(tick.min(Duration::from_millis(10)));
    }
    abort.store(true, Ordering::Relaxed);
    Ok(Ran {
        written,
        duration: t0.elapsed(),
        retransmits: info.as_ref().map(|i| i.total_retrans),
        stopped_early: stop.load(Ordering::Relaxed),
    })
}
