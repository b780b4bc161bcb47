//! The iperf3 control exchange against a real `iperf3 -s` on loopback (CI
//! installs iperf3; without it these tests fail, naming it). Each test
//! starts its own one-off server (`-1`) on a free port and kills it after.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tcpaccel_core::units::Rate;
use tcpaccel_traffic::{run_iperf3_upload, Pace, Report, SendConfig, Volume};

struct Server(Child, SocketAddr);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn iperf3_server() -> Server {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new("iperf3")
        .args(["-s", "-1", "-B", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 is needed for this test (apt-get install iperf3)");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    // Wait until it listens; a probe connection would be taken as a
    // client, so look for the socket instead of connecting.
    while Instant::now() < deadline {
        let listening = std::fs::read_to_string("/proc/net/tcp")
            .map(|t| t.lines().any(|l| l.contains(&format!(":{port:04X} 00000000:0000 0A"))))
            .unwrap_or(false);
        if listening {
            return Server(child, addr);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("iperf3 -s did not listen on {addr} within 5 s");
}

fn cfg(to: SocketAddr, secs: u64) -> SendConfig {
    SendConfig {
        volume: Volume::Duration(Duration::from_secs(secs)),
        interval: Some(Duration::from_millis(100)),
        receipt_timeout: Duration::from_secs(10),
        ..SendConfig::new(to)
    }
}

#[test]
fn an_upload_to_iperf3_is_counted_by_the_server_and_reported_by_interval() {
    let srv = iperf3_server();
    let mut intervals = 0;
    let mut acked = 0;
    let s = run_iperf3_upload(cfg(srv.1, 1), |r| {
        let Report::Interval(iv) = r;
        intervals += 1;
        acked += iv.bytes;
    })
    .expect("an iperf3 test");
    // The server's count is everything we wrote (the stream ended in order).
    assert!(s.bytes > 1_000_000, "{s:?}");
    assert_eq!(s.bytes, s.streams[0].app_bytes, "server received what we wrote");
    assert_eq!(acked, s.bytes, "the interval reports add up to the server's count");
    assert!(intervals >= 5, "{intervals} interval reports in 1 s at 100 ms");
    assert!(s.duration_s >= 1.0 && s.duration_s < 3.0, "{}", s.duration_s);
}

#[test]
fn our_pacing_and_congestion_control_are_on_the_iperf3_data_connection() {
    let srv = iperf3_server();
    let mut c = cfg(srv.1, 2);
    c.pace = Pace::Static(Rate::mbps(40));
    c.cc = Some("reno".into());
    let s = run_iperf3_upload(c, |_| {}).expect("an iperf3 test");
    let mbit = s.goodput_bps as f64 / 1e6;
    // static:40mbit on the wire, loopback's 64 KB frames: ~40 Mbit/s of
    // payload, where loopback unpaced is far above. The margins cover the
    // unpaced first window and a busy machine.
    assert!(mbit > 25.0 && mbit < 46.0, "{mbit} Mbit/s");
    assert_eq!(s.streams[0].cc.as_deref(), Some("reno"));
    assert!(s.streams[0].pacing_cap_bytes_per_sec.is_some());
}
