//! tcpaccel-traffic: the traffic tool (send/recv) with TCP_INFO reports.
#![forbid(unsafe_code)]
