//! tcpaccel-emu: the userspace link emulator (AF_PACKET wire, one thread per direction).
#![forbid(unsafe_code)]
