//! tcpaccel-gather: the gathering server with priority QoS (buffer allocation, stream-count tuning) and its client.
#![forbid(unsafe_code)]
