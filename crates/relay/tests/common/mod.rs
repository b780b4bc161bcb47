//! Helpers shared by the relay's integration tests.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener};

/// A loopback echo server on its own threads, one per connection, that
/// half-closes after the client does; its address.
pub fn echo_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind echo");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut b = [0u8; 4096];
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 || s.write_all(&b[..n]).is_err() {
                        break;
                    }
                }
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}
