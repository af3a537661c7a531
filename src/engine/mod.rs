//! The protocol over the embedded store, without napi: what a call gets
//! ([`Decision`]), when a refresh starts, what a finished load writes. It
//! reads the clock and draws random numbers (the core takes them as
//! parameters), and both can be pinned for tests.

pub mod cache;
pub mod fleet;
pub mod flights;
pub mod memory;
pub mod metrics;
pub mod shared;

pub use cache::{Decision, Engine, Refresh};
