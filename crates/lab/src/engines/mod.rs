//! Traffic engines shared by scenarios: [`flows`] runs a list of seeded flows
//! between namespaced hosts and records each one's completion time;
//! [`workloads`] builds the lanes experiments' flow lists from the core's
//! generator; [`capture`] reads a sender-side packet capture into flow
//! completion times; [`cgroup_pacer`] paces a run's sender through the
//! cgroup pacer (BPF). None builds a topology or writes records.

pub mod capture;
pub mod cgroup_pacer;
pub mod flows;
pub mod workloads;
