//! Topologies several scenarios share, each built with
//! `tcpaccel_net::TopologyBuilder`: the two-host [`dumbbell`] with one
//! emulated bottleneck, and the dual-fabric datacenter of the lanes
//! experiments ([`fabric`]) with its leaf–spine or k = 4 FatTree fabrics
//! ([`fattree`]), with the BPF program that scales the hosts' initial RTO
//! in a dilated run ([`rto_init`]); the emulator's meter read back
//! ([`meter`]). A new shared topology is a file here; a
//! topology only one scenario uses stays in that scenario's file.

pub mod dumbbell;
pub mod fabric;
pub mod fattree;
pub mod meter;
pub mod rto_init;
