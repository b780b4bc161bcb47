//! Traffic engines shared by scenarios: [`flows`] runs a list of seeded flows
//! between namespaced hosts and records each one's completion time;
//! [`workloads`] builds the lanes experiments' flow lists from the core's
//! generator; [`cgroup_pacer`] paces a run's sender through the cgroup
//! pacer (BPF). None builds a topology nor writes records.

pub mod cgroup_pacer;
pub mod flows;
pub mod workloads;
