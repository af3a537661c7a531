//! `LOAD_SLOTS_SCRIPT`'s effect on the [`Keyspace`]: the fleet's load
//! slots, a counting semaphore with leases and a fair queue in one hash.
//! The rules are the script's (its comment explains them); this is the
//! same computation, step for step.

use super::server::{Keyspace, Stored};
use crate::engine::shared::{SlotCall, SlotGrant};
use std::collections::BTreeMap;

/// What one call answered: the script's reply.
pub struct Answer {
  pub grant: SlotGrant,
  /// The last ticket a "slots freed" announcement names (0: none).
  pub up_to: u64,
}

/// Another instance's field, as read.
struct Other {
  ticket: i64,
  held: i64,
  wants: i64,
}

/// What the hash says besides this instance's holding.
#[derive(Default)]
struct Found {
  last: i64,
  mine: i64,
  used: i64,
  waiting: Vec<Other>,
}

/// One call of instance `me` on the slots hash `name`.
pub fn call(keyspace: &mut Keyspace, name: &str, me: &str, call: SlotCall) -> Answer {
  let now = keyspace.now as i64;
  let mut fields = match keyspace.get(name) {
    Some(Stored::Hash(fields)) => fields.clone(),
    Some(_) => {
      keyspace.del(name);
      BTreeMap::new()
    }
    None => BTreeMap::new(),
  };
  let found = read(&mut fields, me, now);
  let (cap, held, wanted) = (call.cap as i64, call.held as i64, call.wanted as i64);
  let mut free = cap - found.used - held;
  let (granted, mine, last) = grant(&found, cap, held, wanted, free);
  let held = held + granted;
  free -= granted;
  if held > 0 || mine > 0 {
    let until = if mine > 0 { now + call.wait as i64 } else { 0 };
    let lease_until = now + call.lease as i64;
    let wants = wanted - granted;
    fields.insert(
      me.to_string(),
      format!("{held} {lease_until} {mine} {until} {wants}"),
    );
  } else {
    fields.remove(me);
  }
  fields.insert("#".to_string(), last.to_string());
  let keep = call.lease.max(call.wait) * 2;
  let ttl = keyspace.pttl(name);
  let ttl = match ttl < keep as i64 {
    true => keep,
    false => ttl as u64,
  };
  keyspace.set(name, Stored::Hash(fields), Some(ttl));
  let up_to = match free > 0 && !found.waiting.is_empty() {
    true => {
      let mut tickets: Vec<i64> = found.waiting.iter().map(|o| o.ticket).collect();
      tickets.sort_unstable();
      tickets[(free as usize).min(tickets.len()) - 1]
    }
    false => 0,
  };
  let grant = SlotGrant {
    granted: granted as u64,
    free: free.max(0) as u64,
    waiting: found.waiting.len() as u64,
    ticket: mine as u64,
  };
  Answer {
    grant,
    up_to: up_to as u64,
  }
}

/// Reads every field, dropping what expired and what no instance writes.
fn read(fields: &mut BTreeMap<String, String>, me: &str, now: i64) -> Found {
  let mut found = Found::default();
  let mut dropped = Vec::new();
  for (field, value) in fields.iter() {
    if field == "#" {
      if !value.is_empty() && value.len() <= 15 && value.bytes().all(|b| b.is_ascii_digit()) {
        found.last = value.parse().unwrap_or(0);
      }
      continue;
    }
    let Some([h, hu, t, tu, w]) = parse(value) else {
      dropped.push(field.clone());
      continue;
    };
    if field == me {
      if tu > now {
        found.mine = t;
      }
      continue;
    }
    let held = if hu <= now { 0 } else { h };
    let ticket = if tu <= now { 0 } else { t };
    if held == 0 && ticket == 0 {
      dropped.push(field.clone());
      continue;
    }
    found.used += held;
    if ticket > 0 {
      found.waiting.push(Other {
        ticket,
        held,
        wants: w,
      });
    }
  }
  for field in dropped {
    fields.remove(&field);
  }
  found
}

/// `held leaseUntil ticket waitUntil wanted`, five numbers, or nothing.
fn parse(value: &str) -> Option<[i64; 5]> {
  if value.len() > 80 {
    return None;
  }
  let numbers: Vec<i64> = value
    .split(' ')
    .map(
      |n| match !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
        true => n.parse().ok(),
        false => None,
      },
    )
    .collect::<Option<_>>()?;
  numbers.try_into().ok()
}

/// How many this call is granted, and this instance's ticket and the
/// queue's last one after it.
fn grant(found: &Found, cap: i64, held: i64, wanted: i64, free: i64) -> (i64, i64, i64) {
  let (mut mine, mut last) = (found.mine, found.last);
  if wanted <= 0 {
    return (0, 0, last);
  }
  let granted = match found.waiting.is_empty() {
    true => wanted.min(free).max(0),
    false => {
      let share = (cap + found.waiting.len() as i64) / (found.waiting.len() as i64 + 1);
      let kept: i64 = found
        .waiting
        .iter()
        .filter(|other| mine == 0 || other.ticket < mine)
        .map(|other| other.wants.min((share - other.held).max(0)))
        .sum();
      wanted.min(share - held).min(free - kept).max(0)
    }
  };
  if granted == wanted {
    mine = 0;
  } else if mine == 0 || granted > 0 {
    last += 1;
    mine = last;
  }
  (granted, mine, last)
}
