//! The pure core: nothing here reads a clock, draws a random number or does
//! I/O. Time (`now`, epoch milliseconds) and uniform draws (`u` in (0, 1]) are
//! parameters, so every rule is unit-tested with fixed inputs.

pub mod body;
pub mod breaker;
pub mod envelope;
pub mod error;
pub mod etag;
pub mod fleet;
pub mod key;
pub mod options;
pub mod policy;
pub mod tags;
