//! Test support, built with the `testing` feature only (this crate's and the
//! CLI's tests enable it; the shipped binary does not carry it).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use crate::proto::{self, Control, Kind, SessionId, Token};

/// A fake server on a loopback port, on its own threads: it welcomes every
/// client (one stream, 1 Mbit/s, priority 1), swallows its data and never
/// says `done`. With `heartbeat` it sends `received {0}` every 100 ms on the
/// control connection, else nothing after the welcome. Its address.
pub fn silent_server(heartbeat: bool) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind the fake server");
    let addr = l.local_addr().expect("fake server address");
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            std::thread::spawn(move || serve(s, heartbeat));
        }
    });
    addr
}

fn serve(mut s: TcpStream, heartbeat: bool) {
    let mut pre = [0u8; proto::PREFACE_LEN];
    if s.read_exact(&mut pre).is_err() {
        return;
    }
    if proto::decode_preface(&pre).ok() == Some(Kind::Control) {
        let mut len = [0u8; 4];
        let Ok(()) = s.read_exact(&mut len) else { return };
        let Ok(n) = proto::control_len(len) else { return };
        let mut hello = vec![0u8; n];
        let Ok(()) = s.read_exact(&mut hello) else { return };
        let w = Control::Welcome {
            session: SessionId::random().expect("random session"),
            token: Token::random().expect("random token"),
            streams: 1,
            chunk_size: 65536,
            checksum: false,
            interval_ms: 100,
            target_bps: 1_000_000,
            priority: 1,
        };
        if s.write_all(&proto::encode_control(&w)).is_err() {
            return;
        }
        if heartbeat {
            let Ok(mut w) = s.try_clone() else { return };
            std::thread::spawn(move || loop {
                std::thread::sleep(Duration::from_millis(100));
                if w.write_all(&proto::encode_control(&Control::Received { bytes: 0 })).is_err() {
                    return;
                }
            });
        }
    }
    let mut sink = [0u8; 65536];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}
