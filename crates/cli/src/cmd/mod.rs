//! One module per subcommand: its clap arguments beside its code.
pub mod doctor;
pub mod emu;
pub mod gather;
pub mod install;
pub mod lab;
pub mod lanes;
pub mod net;
pub mod pace;
pub mod relay;
pub mod run;
pub mod trace;
pub mod traffic;
pub mod values;
