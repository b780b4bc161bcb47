//! Hardening from outside testing (issue 26, gather items 1-4): memory for
//! control messages, stalled transfers, sessions that send no data, and two
//! segments per stream. Each test failed on the code before these limits.

use std::net::SocketAddr;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tcpaccel_gather::proto::{self, Control, ErrorCode, FrameHeader, Kind, SessionId, Token};
use tcpaccel_gather::{Limit, SendOptions, ServerConfig, SinkSpec, Source};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

mod common;
use common::{config, start};

/// The next control message, `None` on a close; panics after `secs`.
async fn read_control(s: &mut TcpStream, secs: u64) -> Option<Control> {
    let mut len = [0u8; 4];
    match tokio::time::timeout(Duration::from_secs(secs), s.read_exact(&mut len)).await {
        Ok(Ok(_)) => {}
        Ok(Err(_)) => return None,
        Err(_) => panic!("no control message within {secs} s"),
    }
    let mut body = vec![0u8; proto::control_len(len).unwrap()];
    s.read_exact(&mut body).await.ok()?;
    Some(proto::decode_control(&body).unwrap())
}

/// The next message that is not a heartbeat or a stream count.
async fn verdict(s: &mut TcpStream, secs: u64) -> Option<Control> {
    loop {
        match read_control(s, secs).await {
            Some(Control::Received { .. } | Control::SetStreams { .. }) => {}
            other => return other,
        }
    }
}

async fn connect_from(addr: SocketAddr, source: Option<[u8; 4]>) -> std::io::Result<TcpStream> {
    let sock = TcpSocket::new_v4()?;
    if let Some(ip) = source {
        sock.bind(SocketAddr::from((ip, 0)))?;
    }
    sock.connect(addr).await
}

fn hello_bytes(id: &str) -> Vec<u8> {
    proto::encode_control(&Control::Hello { client_id: id.into(), class: "low".into(), target_bps: None })
}

struct Joined {
    ctl: TcpStream,
    session: SessionId,
    token: Token,
}

async fn join(addr: SocketAddr, id: &str, source: Option<[u8; 4]>) -> Result<Joined, Control> {
    let mut ctl = connect_from(addr, source).await.unwrap();
    ctl.write_all(&proto::encode_preface(proto::VERSION, Kind::Control)).await.unwrap();
    ctl.write_all(&hello_bytes(id)).await.unwrap();
    match read_control(&mut ctl, 10).await {
        Some(Control::Welcome { session, token, .. }) => Ok(Joined { ctl, session, token }),
        Some(other) => Err(other),
        None => panic!("{id}: closed without an answer to hello"),
    }
}

impl Joined {
    async fn stream(&self, addr: SocketAddr) -> TcpStream {
        let mut d = TcpStream::connect(addr).await.unwrap();
        d.write_all(&proto::encode_preface(proto::VERSION, Kind::Data)).await.unwrap();
        d.write_all(&proto::encode_attach(&self.session, &self.token, 0)).await.unwrap();
        d
    }

    async fn chunk(&self, d: &mut TcpStream, offset: u64, data: &[u8]) {
        d.write_all(&FrameHeader::chunk(self.session.tag(), 0, offset, data, true).encode()).await.unwrap();
        d.write_all(data).await.unwrap();
    }
}

/// Item 1: a length prefix of 16 MiB before `hello` is answered at once
/// with `malformed` and a close; before, the server allocated 16 MiB per
/// connection and waited 10 s for the body (150 such connections: 2.4 GB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_message_before_hello_is_refused_at_once() {
    let (addr, _ev) = start(config(1 << 20, 100), SinkSpec::Discard).await;
    let mut conns = Vec::new();
    for _ in 0..50 {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(&proto::encode_preface(proto::VERSION, Kind::Control)).await.unwrap();
        c.write_all(&(16u32 << 20).to_be_bytes()).await.unwrap();
        c.write_all(&[b' '; 1000]).await.unwrap();
        conns.push(c);
    }
    for c in &mut conns {
        match read_control(c, 3).await {
            Some(Control::Error { code: ErrorCode::Malformed, message, .. }) => {
                assert!(message.contains("4096"), "{message}");
            }
            other => panic!("expected a malformed error, got {other:?}"),
        }
    }
}

/// Item 1: the memory of incomplete messages is one budget for the whole
/// server and a share per source: a message that would take its source
/// over the share displaces that source's own oldest (`capacity`), and the
/// budget comes back when a connection holding part of it goes away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incomplete_messages_share_one_budget_that_is_given_back() {
    let mut cfg = config(1 << 20, 100);
    cfg.control_memory = 8192;
    let (addr, _ev) = start(cfg, SinkSpec::Discard).await;
    // One message at a time, so the server has taken each in before the
    // next: `a` is the oldest. (Sent back to back, `b`'s task could be
    // read first on the multi-threaded runtime; then `b` was displaced and
    // `a` waited for nothing: CI, a loaded 2-core run.)
    let mut a = partial(addr, None, 4000).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b = partial(addr, None, 4000).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c = partial(addr, None, 4000).await;
    match read_control(&mut a, 3).await {
        Some(Control::Error { code: ErrorCode::Capacity, message, .. }) => {
            assert!(message.contains("displaced"), "{message}")
        }
        other => panic!("the third message should displace the source's oldest: {other:?}"),
    }
    drop((b, c));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Their 8000 B are back: a hello of exactly 4000 B fits and is welcomed.
    let mut hello = hello_bytes("d")[4..].to_vec();
    hello.resize(4000, b' ');
    let mut d = TcpStream::connect(addr).await.unwrap();
    d.write_all(&proto::encode_preface(proto::VERSION, Kind::Control)).await.unwrap();
    d.write_all(&4000u32.to_be_bytes()).await.unwrap();
    d.write_all(&hello[..10]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    d.write_all(&hello[10..]).await.unwrap();
    match read_control(&mut d, 3).await {
        Some(Control::Welcome { .. }) => {}
        other => panic!("expected a welcome once the budget was given back, got {other:?}"),
    }
}

/// A control connection from `source` that announces a message of `n`
/// bytes and sends one.
async fn partial(addr: SocketAddr, source: Option<[u8; 4]>, n: u32) -> TcpStream {
    let mut c = connect_from(addr, source).await.unwrap();
    c.write_all(&proto::encode_preface(proto::VERSION, Kind::Control)).await.unwrap();
    c.write_all(&n.to_be_bytes()).await.unwrap();
    c.write_all(b"{").await.unwrap();
    c
}

/// A client from 127.0.1.1 (another network than the floods') joins under
/// the flood and is welcomed; then how many flood connections were told
/// `capacity` (displaced).
async fn welcomed_under(addr: SocketAddr, flood: &mut [TcpStream]) -> usize {
    let t0 = std::time::Instant::now();
    if let Err(other) = join(addr, "good", Some([127, 0, 1, 1])).await {
        panic!("a client from another network was refused under the flood: {other:?}");
    }
    // The 1 s is measured as a benchmark (BENCHMARKS); here only
    // that the client does not wait for the flood to time out (10 s).
    assert!(t0.elapsed() < Duration::from_secs(5), "welcomed after {:?}", t0.elapsed());
    let mut displaced = 0;
    for c in flood.iter_mut() {
        if let Ok(Some(Control::Error { code: ErrorCode::Capacity, .. })) =
            tokio::time::timeout(Duration::from_millis(20), read_control(c, 1)).await
        {
            displaced += 1;
        }
    }
    displaced
}

/// Issue 50 item 1: unfinished messages from one /24 (the legal pre-hello
/// maximum, 4096 B, and one byte each) hold at most the source's share of
/// the memory, so a client from another network is welcomed at once.
/// Before, 64 of them filled the 256 KiB and the client was refused
/// `capacity` until the flood's hello deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_messages_from_one_source_cannot_lock_a_client_out() {
    let mut cfg = config(1 << 20, 100);
    cfg.control_memory = 256 << 10;
    let (addr, _ev) = start(cfg, SinkSpec::Discard).await;
    let mut flood = Vec::new();
    for i in 0..100u8 {
        flood.push(partial(addr, Some([127, 0, 0, 2 + i]), 4096).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The flood paid for itself: its oldest were displaced to keep its share.
    let displaced = welcomed_under(addr, &mut flood).await;
    assert!(displaced >= 100 - 16, "only {displaced} of 100 displaced; the share holds 16");
}

/// Issue 50 item 1: the same flood spread over 40 networks fills the whole
/// memory; a newcomer from another network displaces the oldest message of
/// a source holding the most, and is welcomed. Before: refused `capacity`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_displaces_the_heaviest_sources_when_the_memory_is_full() {
    let mut cfg = config(1 << 20, 100);
    cfg.control_memory = 256 << 10;
    let (addr, _ev) = start(cfg, SinkSpec::Discard).await;
    let mut flood = Vec::new();
    for i in 0..120u8 {
        flood.push(partial(addr, Some([127, 30, i % 40, 1 + i / 40]), 4096).await);
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let displaced = welcomed_under(addr, &mut flood).await;
    // 120 × 4 KiB into 256 KiB: at least 56 displaced, one more for the newcomer.
    assert!(displaced >= 57, "{displaced} displaced");
}

/// Issue 50 item 1: connections that never finish their hello hold at most
/// `max_handshakes` places; beyond it the least advanced of the source
/// holding the most are closed, not the one connection of another source.
/// Before, nothing limited them (each stayed for the 10 s hello deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_before_hello_are_limited_and_the_heaviest_source_pays() {
    let mut cfg = config(1 << 20, 100);
    cfg.max_handshakes = 32;
    let (addr, _ev) = start(cfg, SinkSpec::Discard).await;
    let mut honest = connect_from(addr, Some([127, 0, 1, 1])).await.unwrap();
    honest.write_all(&proto::encode_preface(proto::VERSION, Kind::Control)).await.unwrap();
    let mut flood = Vec::new();
    for _ in 0..60 {
        let mut c = connect_from(addr, Some([127, 0, 0, 2])).await.unwrap();
        c.write_all(&proto::encode_preface(proto::VERSION, Kind::Control)).await.unwrap();
        flood.push(c);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut closed = 0;
    for c in &mut flood {
        let mut b = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(Duration::from_millis(20), c.read(&mut b)).await {
            closed += 1;
        }
    }
    assert_eq!(closed, 61 - 32, "61 connections, 32 places");
    honest.write_all(&hello_bytes("honest")).await.unwrap();
    match read_control(&mut honest, 3).await {
        Some(Control::Welcome { .. }) => {}
        other => panic!("the one connection of another source was displaced: {other:?}"),
    }
}

/// Issue 50 item 1, after `hello`: sessions from one /24 that each
/// announce a 64 KiB message and send one byte hold at most their source's
/// share (a sixteenth of 1 MiB, raised to one message); a client from another network is welcomed. Before, 16 of them
/// filled the 1 MiB and every hello was refused `capacity`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_announcing_large_messages_cannot_lock_a_client_out() {
    let mut cfg = config(1 << 20, 100);
    cfg.control_memory = 1 << 20;
    cfg.max_waiting = 100;
    cfg.max_waiting_per_source = 100;
    let (addr, _ev) = start(cfg, SinkSpec::Discard).await;
    let mut held = Vec::new();
    for i in 0..40u8 {
        let mut j = join(addr, &format!("big-{i}"), Some([127, 0, 0, 2 + i])).await.unwrap();
        j.ctl.write_all(&(64u32 << 10).to_be_bytes()).await.unwrap();
        j.ctl.write_all(b"{").await.unwrap();
        held.push(j);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = std::time::Instant::now();
    if let Err(other) = join(addr, "good", Some([127, 0, 1, 1])).await {
        panic!("a client from another network was refused: {other:?}");
    }
    // The 1 s is measured as a benchmark (BENCHMARKS); here only
    // that the client does not wait for the flood to time out (10 s).
    assert!(t0.elapsed() < Duration::from_secs(5), "welcomed after {:?}", t0.elapsed());
    let mut displaced = 0;
    for j in &mut held {
        if let Ok(Some(Control::Error { code: ErrorCode::Capacity, .. })) =
            tokio::time::timeout(Duration::from_millis(20), verdict(&mut j.ctl, 1)).await
        {
            displaced += 1;
        }
    }
    assert!(displaced >= 40 - 1, "{displaced} of 40 displaced; the share (64 KiB, the least) holds one");
}

/// Item 2: a transfer whose data stopped fails with `stalled` after the
/// data-stall timeout although its control connection keeps sending
/// `progress`, and so does one whose `end.total` is above what was sent;
/// both leave the server (their share is given back). Before, both were
/// held until the client went away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_transfers_fail_and_leave() {
    let mut cfg = config(1 << 20, 100);
    cfg.stall_timeout = Duration::from_millis(1500);
    let (addr, _ev) = start(cfg, SinkSpec::Discard).await;
    let data = vec![7u8; 1000];
    let mut a = join(addr, "stops", None).await.unwrap();
    let mut da = a.stream(addr).await;
    a.chunk(&mut da, 0, &data).await;
    let mut b = join(addr, "short", None).await.unwrap();
    let mut db = b.stream(addr).await;
    b.chunk(&mut db, 0, &data).await;
    db.write_all(&FrameHeader::end(b.session.tag(), 0).encode()).await.unwrap();
    let sha = hex::encode(Sha256::digest(&data));
    b.ctl.write_all(&proto::encode_control(&Control::End { total: 5000, sha256: sha })).await.unwrap();
    let t0 = std::time::Instant::now();
    let progress = proto::encode_control(&Control::Progress { sent: 1000, app_limited: false });
    let mut got = [None, None];
    while got.iter().any(|g| g.is_none()) && t0.elapsed() < Duration::from_secs(8) {
        for (i, j) in [&mut a, &mut b].into_iter().enumerate() {
            if got[i].is_some() {
                continue;
            }
            let _ = j.ctl.write_all(&progress).await;
            let mut len = [0u8; 4];
            if let Ok(Ok(_)) =
                tokio::time::timeout(Duration::from_millis(100), j.ctl.read_exact(&mut len)).await
            {
                let mut body = vec![0u8; proto::control_len(len).unwrap()];
                j.ctl.read_exact(&mut body).await.unwrap();
                if let Control::Error { code, message, .. } = proto::decode_control(&body).unwrap() {
                    got[i] = Some((code, message));
                }
            }
        }
    }
    for (who, g) in ["stops", "short"].iter().zip(&got) {
        match g {
            Some((ErrorCode::Stalled, m)) => assert!(m.contains("no data arrived"), "{who}: {m}"),
            other => panic!("{who}: expected stalled within 8 s, got {other:?}"),
        }
    }
    // Status is published every interval: the next one no longer has them.
    let mut left = Vec::new();
    for _ in 0..20 {
        left = tcpaccel_gather::query_status(addr).await.unwrap();
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(left.is_empty(), "stalled clients still hold their share: {left:?}");
}

/// Item 3: 120 sessions that only said hello do not lock out a client with
/// data: it is welcomed and its data arrives. Of the sessions without data,
/// those beyond 4 from one source (a /24) are refused (`capacity`), and beyond 16
/// in all the oldest are evicted (`stalled`). Before, they held the stream budget and the client was
/// refused `capacity`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_without_data_cannot_lock_out_a_client_with_data() {
    let classes = config(1 << 20, 100).classes;
    let mut cfg = ServerConfig::new(classes, 1 << 20, Some(4), 4, Duration::from_millis(100)).unwrap();
    cfg.max_waiting = 16;
    cfg.max_waiting_per_source = 4;
    let (addr, _ev) = start(cfg, SinkSpec::Discard).await;
    let mut idle = Vec::new();
    // 60 from one address: 4 wait, the rest are refused per address.
    let (mut welcomed, mut refused) = (0, 0);
    for i in 0..60u8 {
        match join(addr, &format!("same-{i}"), Some([127, 0, 0, 2])).await {
            Ok(j) => {
                welcomed += 1;
                idle.push(j.ctl);
            }
            Err(Control::Error { code: ErrorCode::Capacity, .. }) => refused += 1,
            Err(other) => panic!("same-{i}: {other:?}"),
        }
    }
    assert_eq!((welcomed, refused), (4, 56));
    // 60 from 60 networks (/24, the default source): all welcomed, the oldest evicted to keep 16 waiting.
    for i in 0..60u8 {
        let j = join(addr, &format!("many-{i}"), Some([127, 0, 10 + i, 1])).await.unwrap();
        idle.push(j.ctl);
    }
    let t0 = std::time::Instant::now();
    let opts = SendOptions {
        server: addr,
        id: "good".into(),
        class: "low".into(),
        target: None,
        source: Source::Synthetic { rate: None, limit: Limit::Bytes(200_000), seed: 3 },
        cc: None,
        timeout: Duration::from_secs(10),
    };
    let report = tcpaccel_gather::send(opts).await.expect("the client with data is admitted");
    assert!(report.complete, "{report:?}");
    eprintln!("client with data done {:?} after the 120 hellos", t0.elapsed());
    // The oldest waiting sessions were evicted with `stalled`.
    let mut evicted = 0;
    for c in &mut idle {
        if let Ok(Some(Control::Error { code: ErrorCode::Stalled, .. })) =
            tokio::time::timeout(Duration::from_millis(20), verdict(c, 1)).await
        {
            evicted += 1;
        }
    }
    assert!(evicted >= 64 - 16, "only {evicted} of the 64 waiting sessions were evicted to keep 16");
}

/// Item 4: on loopback a segment is 65483 B; a pool of 300 000 B holds two
/// of them per stream for two streams, so a third client that would shrink
/// every window below two segments is refused (`capacity`). Before, it was
/// welcomed and every stream ran with one segment's window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_keeps_two_segments_per_stream() {
    let (addr, _ev) = start(config(300_000, 100), SinkSpec::Discard).await;
    let mut senders = Vec::new();
    for id in ["one", "two"] {
        let j = join(addr, id, None).await.unwrap();
        let mut d = j.stream(addr).await;
        j.chunk(&mut d, 0, &[1u8; 1000]).await;
        senders.push((j, d));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    match join(addr, "three", None).await {
        Err(Control::Error { code: ErrorCode::Capacity, message, .. }) => {
            assert!(message.contains("two segments"), "{message}");
        }
        Ok(_) => {
            panic!("a third client was welcomed into a pool of two loopback segments per stream for two")
        }
        Err(other) => panic!("{other:?}"),
    }
}

/// Item 5: an unknown connection kind or a nonzero reserved byte in the
/// preface gets an `error` (`malformed`) before the close; before, the
/// connection was closed without a word. A stranger (bad magic) still gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_prefaces_are_told_why() {
    let (addr, _ev) = start(config(1 << 20, 100), SinkSpec::Discard).await;
    let mut kind9 = proto::encode_preface(proto::VERSION, Kind::Control);
    kind9[6] = 9;
    let mut reserved = proto::encode_preface(proto::VERSION, Kind::Control);
    reserved[7] = 1;
    for pre in [kind9, reserved] {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(&pre).await.unwrap();
        match read_control(&mut c, 3).await {
            Some(Control::Error { code: ErrorCode::Malformed, .. }) => {}
            other => panic!("preface {pre:02x?}: expected malformed, got {other:?}"),
        }
    }
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(b"GET / HT").await.unwrap();
    assert!(read_control(&mut c, 3).await.is_none(), "a stranger is closed without a reply");
}

/// Item 5: `end` is sent once; a second one is `malformed` (before, it
/// silently replaced the first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_end_is_malformed() {
    let (addr, _ev) = start(config(1 << 20, 100), SinkSpec::Discard).await;
    let mut j = join(addr, "twice", None).await.unwrap();
    let sha = hex::encode(Sha256::digest([1u8; 10]));
    for total in [10, 10] {
        j.ctl.write_all(&proto::encode_control(&Control::End { total, sha256: sha.clone() })).await.unwrap();
    }
    match verdict(&mut j.ctl, 3).await {
        Some(Control::Error { code: ErrorCode::Malformed, message, .. }) => {
            assert!(message.contains("second end"), "{message}")
        }
        other => panic!("expected malformed, got {other:?}"),
    }
}
