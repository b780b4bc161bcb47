//! Traffic engines shared by scenarios: [`flows`] runs a list of seeded flows
//! between namespaced hosts and records each one's completion time;
//! [`workloads`] builds the lanes experiments' flow lists from the core's
//! generator. Neither builds a topology nor writes records.

pub mod flows;
pub mod workloads;
