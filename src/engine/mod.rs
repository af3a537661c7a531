//! The protocol over the stores, without napi. [`Cache`] composes the local
//! engine (memory, flights, counters: [`Engine`]) and, with Redis, the
//! fleet, and takes a flight's steps; the binding converts JS values and
//! runs the futures it hands out. The engine reads the clock and draws
//! random numbers (the core takes them as parameters), and both can be
//! pinned for tests.

/// Work for tokio, boxed: the binding runs it (`execute_tokio_future`
/// allocates a task per future anyway).
pub type Pending<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'static>>;

pub mod cache;
pub mod clock;
pub mod epoch;
pub mod fleet;
pub mod flights;
pub mod local;
pub mod memory;
pub mod metrics;
pub mod recovery;
pub mod shared;
#[cfg(test)]
mod sim;
pub mod slots;
pub mod together;

pub use cache::{Adopted, Cache, Effect, Event, FirstStep, Step, Written};
pub use flights::{Answered, Origin};
pub use local::{Backoff, Decision, Engine, Keep, Loaded, Refresh, Served};
