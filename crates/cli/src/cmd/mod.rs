//! One module per subcommand: its clap arguments beside its code.
pub(crate) mod compare;
pub(crate) mod doctor;
pub(crate) mod emu;
pub(crate) mod gather;
pub(crate) mod install;
pub(crate) mod lab;
pub(crate) mod lanes;
pub(crate) mod net;
pub(crate) mod pace;
pub(crate) mod relay;
pub(crate) mod run;
pub(crate) mod shim;
pub(crate) mod trace;
pub(crate) mod traffic;
pub(crate) mod values;
