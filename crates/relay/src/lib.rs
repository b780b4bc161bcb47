//! tcpaccel-relay: split-TCP relay (SOCKS5 and fixed forwarding) and placement planner.
#![forbid(unsafe_code)]
