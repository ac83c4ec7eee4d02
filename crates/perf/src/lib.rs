//! Traffic measurement.
