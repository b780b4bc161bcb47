//! tcpaccel-net: topology builder (namespaces, veth, emulated links) and cleanup.
#![forbid(unsafe_code)]
