//! herdcache: cache-stampede protection for Node.js, as a Node-API addon.
//!
//! - [`core`] is pure: key encoding, the stored envelope, the freshness policy
//!   (classification, XFetch, jitter) and option validation. No I/O, no clock,
//!   no randomness inside: `now` and random numbers are parameters.
//! - [`engine`] runs the protocol over a store: it reads the clock and the RNG,
//!   owns the embedded store, the flight table and the counters. No napi.
//! - `binding` (feature `napi`) is the only module that touches Node-API.
//!
//! Lints are set in `Cargo.toml` (`[lints]`).

pub mod core;
pub mod engine;

#[cfg(feature = "napi")]
mod binding;
