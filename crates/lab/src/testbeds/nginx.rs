//! nginx as a lab's HTTP server: one foreground process, `sendfile` on,
//! serving a directory on one address. Shared by the scenarios that fetch
//! a file over HTTP (split's chains, the programs under the cgroup pacer).
//!
//! Not here: finding or installing the binary ([`super::find_bin`];
//! `scripts/install-split-peers.sh` installs it; each scenario names what
//! it misses).

use std::net::IpAddr;
use std::path::Path;

/// The configuration of an nginx serving `root` on `addr:port`, its pid,
/// logs and temporary files in `dir`. Both paths must be absolute: nginx
/// reads a relative one from its prefix (`-p`), not from where it started.
pub fn conf(addr: IpAddr, port: u16, root: &Path, dir: &Path) -> anyhow::Result<String> {
    for p in [root, dir] {
        anyhow::ensure!(p.is_absolute(), "nginx needs absolute paths; {} is relative", p.display());
    }
    let (r, d) = (root.display(), dir.display());
    let listen = match addr {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    };
    Ok(format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\nuser root;\n\
         pid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n\
         \x20 default_type application/octet-stream;\n\
         \x20 client_body_temp_path {d}/body;\n\
         \x20 server {{ listen {listen}; root {r}; }}\n}}\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conf_listens_on_the_address_and_serves_the_root_in_the_foreground() {
        let c = conf("10.0.0.2".parse().unwrap(), 8080, Path::new("/w/www"), Path::new("/w/nginx")).unwrap();
        assert!(c.contains("listen 10.0.0.2:8080; root /w/www;"), "{c}");
        assert!(c.starts_with("daemon off;\nmaster_process off;\n"), "{c}");
        assert!(c.contains("sendfile on;") && c.contains("pid /w/nginx/nginx.pid;"), "{c}");
        let v6 = conf("fd00::2".parse().unwrap(), 80, Path::new("/r"), Path::new("/d")).unwrap();
        assert!(v6.contains("listen [fd00::2]:80;"), "{v6}");
        // A relative path would be read from nginx's prefix: refused, named.
        let e = conf("10.0.0.2".parse().unwrap(), 80, Path::new("runs/www"), Path::new("/d")).unwrap_err();
        assert!(e.to_string().contains("runs/www is relative"), "{e}");
    }
}
