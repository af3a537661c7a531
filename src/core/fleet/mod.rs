//! The fleet protocol's pure parts, one job per file: the Redis names of a
//! key ([`keys`]), the pub/sub event wire format ([`events`]), the Lua
//! scripts ([`scripts`]), the lease and loser policy ([`lease`]), who
//! loads a key, as a machine without I/O ([`acquire`]), and what the
//! server's client tracking says ([`tracking`]).
//!
//! The lock is an *efficiency* lock (one recompute per expiry across a fleet,
//! most of the time), never a correctness guarantee: it has no fencing token,
//! so a holder paused past its lease can still write. What such a late writer
//! cannot do is overwrite a newer value: writes are conditional on the
//! envelope's stamp ([`WRITE_SCRIPT`]).

pub mod acquire;
pub mod events;
pub mod keys;
pub mod lease;
pub mod scripts;
pub mod tracking;

pub use acquire::{Acquired, Acquisition, Check, Heard, LockAttempt, Next, ReadAnswer};
pub use events::{slots_freed_head, Change, Event, OUTSIDE};
pub use keys::{
  channel_of, events_channel, load_slots, sharded_channels, slot, tag_stamp, RedisKeys, SLOTS,
};
pub use lease::{loser_wait, Lease};
pub use scripts::{
  ANNOUNCE_REFUSED, CLEAR_NOT_NEWER_SCRIPT, DELETE_NOT_NEWER_SCRIPT, DELETE_SCRIPT, EXPIRE_SCRIPT,
  EXTEND_SCRIPT, FAIL_REFRESH_SCRIPT, KEEP_SCRIPT, LOAD_SLOTS_SCRIPT, LOCK_SCRIPT,
  REFRESH_LOCK_SCRIPT, RELEASE_SCRIPT, SET_SCRIPT, TAG_SCRIPT, TOKEN_PATTERN, WRITE_SCRIPT,
};
