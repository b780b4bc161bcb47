//! tcpaccel-tune: the tuning doctor and the connection tracer.
#![forbid(unsafe_code)]
