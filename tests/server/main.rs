//! The tests that start a server (or run the store contract and the fleet
//! on the in-process store), in one binary: `support` is compiled once and
//! one test binary linked, not six (a fresh clone's `npm test` compiles
//! them all). Each module is one concern; run one with its name as the
//! filter: `cargo test --test server -- fleet::`.

mod support;

mod cluster_harness;
mod fleet;
mod recovery;
mod redis_store;
mod slot_move;
mod store_contract;
