//! Packet formats.
