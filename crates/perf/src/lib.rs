//! NTttcp-style traffic measurement (being written).
pub mod cli;
