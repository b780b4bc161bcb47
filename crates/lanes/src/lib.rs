//! tcpaccel-lanes: the datacenter lanes daemon on Linux MPTCP (userspace path manager).
#![forbid(unsafe_code)]
