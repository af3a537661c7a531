//! The Lua scripts of the fleet lock and the conditional write, run by the
//! Redis store (`engine::shared::redis`).

/// What a lock set by herdcache holds (a UUID v4 token, as a Lua pattern):
/// anything else under a lock key, or a lock without a TTL, was set by no
/// instance and is garbage (see [`LOCK_SCRIPT`]).
pub const TOKEN_PATTERN: &str =
  "^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$";

/// `announce(channel, message)`: PUBLISH that cannot fail the script. A
/// user the ACL forbids the channel (NOPERM) would otherwise abort the
/// script after its writes and before the rest (a lock left for its whole
/// lease). Returns [`ANNOUNCE_REFUSED`] if refused, else 0. An empty
/// channel announces nothing: on a Redis Cluster the store announces after
/// the script, on a sharded channel the script's slot may not hold.
macro_rules! announce_lua {
  () => {
    r#"
local function announce(channel, message)
  if channel == '' then
    return 0
  end
  local sent = redis.pcall('PUBLISH', channel, message)
  if type(sent) == 'table' and sent.err then
    return 2
  end
  return 0
end
"#
  };
}

/// Added to a script's answer when its PUBLISH was refused (`announce_lua!`).
pub const ANNOUNCE_REFUSED: i64 = 2;

/// The body of [`LOCK_SCRIPT`], declared once for it and [`REFRESH_LOCK_SCRIPT`].
macro_rules! take_lock_lua {
  () => {
    r#"
local held = redis.pcall('GET', KEYS[1])
if held == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 0
end
if held then
  local lease = redis.call('PTTL', KEYS[1])
  if lease > 0 and type(held) == 'string' and string.match(held, ARGV[3]) then
    return lease
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 0
"#
  };
}

/// Takes the lock if it is free: `SET lock token PX ttl` as `SET … NX` does,
/// and in the same round trip tells a loser how long the holder's lease has
/// left. A lock no herdcache instance can have set — no TTL (every lock has
/// one), a value that is not a token, another Redis type — is garbage: it is
/// replaced, so it can neither block a key forever nor make losers spin.
/// A lock that already holds the caller's token is the caller's: a lock
/// command retried after its connection dropped may have landed the first
/// time. KEYS[1] lock; ARGV[1] token, ARGV[2] lease ms, ARGV[3] the token
/// pattern. Returns 0 if this caller now holds the lock, else the holder's
/// lease, ms.
pub const LOCK_SCRIPT: &str = take_lock_lua!();

/// [`LOCK_SCRIPT`] for a background refresh, which first honours the
/// fleet's back-off: while the key's back-off marker lives (another
/// instance's refresh failed), no lock is taken and the marker's count and
/// remaining life are returned. A marker that is not a count, or has no
/// TTL, was set by no instance and is ignored.
/// KEYS[1] lock, KEYS[2] back-off marker; ARGV as [`LOCK_SCRIPT`]'s.
/// Returns 0 (locked), the holder's lease (ms), or {failures, ms left}.
pub const REFRESH_LOCK_SCRIPT: &str = concat!(
  r#"
local failures = redis.pcall('GET', KEYS[2])
if type(failures) == 'string' and string.match(failures, '^%d+$') and #failures <= 9 then
  local left = redis.call('PTTL', KEYS[2])
  if left > 0 then
    return {tonumber(failures), left}
  end
end
"#,
  take_lock_lua!()
);

/// A background refresh failed: leaves the key's back-off marker (the
/// failures in a row, expiring when the next refresh may run) and releases
/// our lock, in one round trip, so no other instance takes the lock in
/// between and calls the failing backend again.
/// KEYS[1] lock, KEYS[2] back-off marker; ARGV[1] token ('' when not
/// holding the lock), ARGV[2] failures, ARGV[3] back-off ms, ARGV[4]
/// channel, ARGV[5] the release event (as [`RELEASE_SCRIPT`]).
/// Returns 1 if the lock was released (plus `ANNOUNCE_REFUSED`).
pub const FAIL_REFRESH_SCRIPT: &str = concat!(
  announce_lua!(),
  r#"
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
if ARGV[1] ~= '' and redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1 + announce(ARGV[4], ARGV[5])
end
return 0
"#
);

/// Deletes the lock only if it still holds our token: a holder whose lease
/// ran out must not delete the lock another instance took since. (`pcall`:
/// another Redis type under the lock key is not ours, not an error.)
/// A release is announced (`r`): the instances waiting for the holder's
/// fill ask again at once instead of waiting out the lease.
/// KEYS[1] lock; ARGV[1] token, ARGV[2] channel (`""`: none), ARGV[3] the
/// release event. Returns 1 if released (plus `ANNOUNCE_REFUSED`).
pub const RELEASE_SCRIPT: &str = concat!(
  announce_lua!(),
  r#"
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1 + announce(ARGV[2], ARGV[3])
end
return 0
"#
);

/// Extends the lease only while the lock still holds our token.
/// KEYS[1] lock; ARGV[1] token, ARGV[2] lease ms. Returns 1 if extended.
pub const EXTEND_SCRIPT: &str = r#"
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#;

/// The header rules of `Envelope::decode_header`, in Lua, declared once and
/// put in front of every script that must tell a valid envelope's stamp:
/// `envelope_header(stored, digits)` is a valid header's fields (digit
/// strings, `kind` 'v' or 'n', `version` 'hc2', 'hc3' (tagged: a line of
/// tags follows) or 'hc4' (formatted: `core::body`); an `hc1` header's
/// refresh is its fresh and its version 'hc2'), or nil; `envelope_stamp(stored, digits)` its stamp, or nil.
macro_rules! envelope_stamp_lua {
  () => {
    r#"
local function envelope_header(stored, digits)
  local version, fresh, hard, compute, stamp, refresh, kind =
    string.match(stored, '^(hc[234]) (%d+) (%d+) (%d+) (%d+) (%d+) ([vn])\n')
  if stamp == nil then
    fresh, hard, compute, stamp, kind = string.match(stored, '^hc1 (%d+) (%d+) (%d+) (%d+) ([vn])\n')
    refresh = fresh
    version = 'hc2'
  end
  if stamp ~= nil and #fresh <= digits and #hard <= digits and #compute <= digits
    and #stamp <= digits and #refresh <= digits and tonumber(hard) >= tonumber(fresh)
    and tonumber(refresh) <= tonumber(fresh) then
    return { version = version, fresh = fresh, hard = hard, compute = compute, stamp = stamp, refresh = refresh, kind = kind }
  end
  return nil
end
local function envelope_stamp(stored, digits)
  local header = envelope_header(stored, digits)
  if header == nil then
    return nil
  end
  return tonumber(header.stamp)
end
"#
  };
}

/// Writes an envelope unless the stored one comes from a load that started
/// later (its stamp is greater), announces the fill, and releases our lock —
/// one round trip, and the lock is only released once the value is readable.
/// The header rules are `Envelope::decode_header`'s (version `hc2`, or
/// `hc1` without refreshAt; numbers of at most `envelope::MAX_DIGITS`
/// digits, so Lua's doubles compare stamps exactly as the reader reads
/// them; hardUntil >= freshUntil; refreshAt <= freshUntil), so a value the
/// reader rejects for its header is overwritten here too. A valid header
/// over a value the reader rejected (not UTF-8 JSON) is replaced when the
/// writer names its stamp (ARGV[7]): the reader, not Lua, judges JSON. A
/// foreign or other-type value is overwritten.
/// A write ends the key's refresh back-off (KEYS[3], its marker).
/// A load begun before the key's last `expire` (KEYS[4], its moment, see
/// [`EXPIRE_SCRIPT`]) is not written either: it may have read what changed.
/// KEYS[1] value, KEYS[2] lock, KEYS[3] back-off marker, KEYS[4] expire
/// marker; ARGV[1] envelope,
/// ARGV[2] hard TTL ms, ARGV[3] stamp, ARGV[4] token ('' when not holding the lock),
/// ARGV[5] channel, ARGV[6] fill message, ARGV[7] the stamp of a corrupt
/// value to replace (''), ARGV[8] the digit limit.
/// Returns 1 if written, 0 if a newer value was kept.
pub const WRITE_SCRIPT: &str = concat!(
  envelope_stamp_lua!(),
  announce_lua!(),
  r#"
local newer = false
local stored = redis.pcall('GET', KEYS[1])
if type(stored) == 'string' then
  local stamp = envelope_stamp(stored, tonumber(ARGV[8]))
  newer = stamp ~= nil and stamp > tonumber(ARGV[3]) and stamp ~= tonumber(ARGV[7])
end
if not newer then
  local expired = tonumber(redis.pcall('GET', KEYS[4]))
  newer = expired ~= nil and expired > tonumber(ARGV[3])
end
if not newer then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('DEL', KEYS[3])
end
if ARGV[4] ~= '' and redis.pcall('GET', KEYS[2]) == ARGV[4] then
  redis.call('DEL', KEYS[2])
end
if newer then
  return 0
end
return 1 + announce(ARGV[5], ARGV[6])
"#
);

/// A live `set`: the application's statement of the newest value, so it
/// always lands. Its stamp orders after the stored one: when a valid
/// envelope there is stamped no earlier than ours (another instance wrote it
/// within the clocks' error), ours is written stamped one past it (the
/// header's stamp field rewritten), so every later judgement by stamp (a
/// late fill, a replay, an `expire`, a tag) sees the `set` as the newer
/// write. Then the back-off marker goes and the fill is announced.
/// KEYS[1] value, KEYS[2] back-off marker; ARGV[1] envelope, ARGV[2] hard
/// TTL ms, ARGV[3] stamp, ARGV[4] channel, ARGV[5] fill message, ARGV[6]
/// the digit limit.
/// Returns the stamp written, plus [`ANNOUNCE_REFUSED`] as a second element
/// if the PUBLISH was refused.
pub const SET_SCRIPT: &str = concat!(
  envelope_stamp_lua!(),
  announce_lua!(),
  r#"
local stamp = tonumber(ARGV[3])
local text = ARGV[1]
local stored = redis.pcall('GET', KEYS[1])
if type(stored) == 'string' then
  local theirs = envelope_stamp(stored, tonumber(ARGV[6]))
  if theirs ~= nil and theirs >= stamp then
    local head, tail = string.match(text, '^(hc[234] %d+ %d+ %d+ )%d+( .*)$')
    if head ~= nil then
      stamp = theirs + 1
      text = head .. string.format('%d', stamp) .. tail
    end
  end
end
redis.call('SET', KEYS[1], text, 'PX', ARGV[2])
redis.call('DEL', KEYS[2])
return { stamp, announce(ARGV[4], ARGV[5]) }
"#
);

/// A live `delete`: a tombstone (`envelope::tombstone`, ARGV[3], stamped
/// ARGV[4]) in the value's place, living ARGV[5] ms, and its announcement.
/// It always lands; its stamp orders after the stored one (as a `set`'s,
/// [`SET_SCRIPT`]), so no load that began before it can write over it.
/// KEYS[1] value; ARGV[1] channel, ARGV[2] delete message, ARGV[6] the
/// digit limit. Returns 1 if a value (not a tombstone) was there, else 0;
/// plus [`ANNOUNCE_REFUSED`] if the PUBLISH was refused.
pub const DELETE_SCRIPT: &str = concat!(
  envelope_stamp_lua!(),
  announce_lua!(),
  r#"
local existed = 0
local stamp = tonumber(ARGV[4])
local stored = redis.pcall('GET', KEYS[1])
if type(stored) == 'string' then
  local h = envelope_header(stored, tonumber(ARGV[6]))
  if h == nil or tonumber(h.fresh) ~= 0 or tonumber(h.hard) ~= 0 then
    existed = 1
  end
  if h ~= nil and tonumber(h.stamp) >= stamp then
    stamp = tonumber(h.stamp) + 1
  end
elseif stored then
  existed = 1
end
local head, tail = string.match(ARGV[3], '^(hc[23] %d+ %d+ %d+ )%d+( .*)$')
redis.call('SET', KEYS[1], head .. string.format('%d', stamp) .. tail, 'PX', ARGV[5])
return existed + announce(ARGV[1], ARGV[2])
"#
);

/// A replayed `delete` (auto-recovery, `engine::recovery`): the tombstone
/// of [`DELETE_SCRIPT`] (ARGV[5], stamped with the delete, living ARGV[6]
/// ms), unless the stored value is a valid envelope from a load that
/// started after the delete (its stamp is greater: another instance wrote
/// it meanwhile), and then the announcement. The header rules are
/// [`WRITE_SCRIPT`]'s (the same pattern and digit limit); a value the
/// reader rejects for its header, or another Redis type, is replaced.
/// KEYS[1] value; ARGV[1] the delete's stamp, ARGV[2] channel, ARGV[3]
/// delete message, ARGV[4] the digit limit.
/// Returns 1 if it landed, 0 if a newer value was kept; plus
/// [`ANNOUNCE_REFUSED`] if the PUBLISH was refused.
pub const DELETE_NOT_NEWER_SCRIPT: &str = concat!(
  envelope_stamp_lua!(),
  announce_lua!(),
  r#"
local stored = redis.pcall('GET', KEYS[1])
if type(stored) == 'string' then
  local stamp = envelope_stamp(stored, tonumber(ARGV[4]))
  if stamp ~= nil and stamp > tonumber(ARGV[1]) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[5], 'PX', ARGV[6])
return 1 + announce(ARGV[2], ARGV[3])
"#
);

/// `expire`, live or replayed (auto-recovery): the stored envelope made
/// stale at ARGV[1], its value and TTL kept (`KEEPTTL`), as
/// `Meta::expired_at` says: not when it was written after the expire (a
/// greater stamp) or is stale by then already. A value the reader rejects
/// for its header, or another Redis type, is left alone (it reads as
/// corrupt: a miss). Announces the expire in any case: another instance's
/// L1 may hold a copy Redis no longer has. The header rules are
/// [`WRITE_SCRIPT`]'s; an `hc1` entry is rewritten as `hc2`, an `hc3` one
/// keeps its tags.
/// In any case it leaves its moment in KEYS[2] (raised, never lowered),
/// living ARGV[5] ms: a load begun before it and written after it is not
/// written ([`WRITE_SCRIPT`]).
/// KEYS[1] value, KEYS[2] expire marker; ARGV[1] the expire's moment (epoch
/// ms), ARGV[2] channel, ARGV[3] expire message, ARGV[4] the digit limit,
/// ARGV[5] the marker's life (ms).
/// Returns 1 if expired, else 0; plus [`ANNOUNCE_REFUSED`] if the PUBLISH
/// was refused.
pub const EXPIRE_SCRIPT: &str = concat!(
  envelope_stamp_lua!(),
  announce_lua!(),
  r#"
local expired = 0
local stored = redis.pcall('GET', KEYS[1])
local h = nil
if type(stored) == 'string' then
  h = envelope_header(stored, tonumber(ARGV[4]))
end
local at = tonumber(ARGV[1])
local marked = tonumber(redis.pcall('GET', KEYS[2]))
if marked == nil or marked < at then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[5])
end
if h ~= nil and tonumber(h.stamp) <= at and tonumber(h.fresh) > at then
  local refresh = h.refresh
  if tonumber(refresh) > at then
    refresh = ARGV[1]
  end
  local value = string.sub(stored, string.find(stored, '\n', 1, true) + 1)
  local header = h.version .. ' ' .. ARGV[1] .. ' ' .. h.hard .. ' ' .. h.compute .. ' ' .. h.stamp .. ' ' .. refresh .. ' ' .. h.kind
  redis.call('SET', KEYS[1], header .. '\n' .. value, 'KEEPTTL')
  expired = 1
end
return expired + announce(ARGV[2], ARGV[3])
"#
);

/// `ctx.keep()`: the origin said the value the loader saw has not
/// changed. If the stored envelope is still that value — the same stamp
/// and deadlines as the keeper's copy (ARGV[1..3]): two writes of one
/// moment can share a stamp, not all three — it takes the keep's deadlines
/// and stamp: its header is rewritten in place (`SETRANGE` when the new
/// one is as long, as epoch milliseconds of 13 digits make it), its tags,
/// format line and bytes untouched, and it lives ARGV[9] ms more. A value
/// another load or a `set` wrote since, a tombstone, or an `expire` after
/// the keeping load began (KEYS[4], as [`WRITE_SCRIPT`]) is left alone; so
/// is the keep itself, repeated after it landed (the keeper lets go of its
/// copy then, and reads the kept entry back). A keep ends the back-off,
/// announces the fill (the other instances' copies have the old
/// deadlines), and in any case releases our lock.
/// KEYS as [`WRITE_SCRIPT`]'s; ARGV[1..3] the kept copy's stamp,
/// freshUntil and hardUntil, ARGV[4..8] the new freshUntil, hardUntil,
/// computeMs, stamp and refreshAt, ARGV[9] ms to live, ARGV[10] token
/// (''), ARGV[11] channel, ARGV[12] fill message, ARGV[13] the digit limit.
/// Returns 1 if kept, 0 if the stored value is not the one kept.
pub const KEEP_SCRIPT: &str = concat!(
  envelope_stamp_lua!(),
  announce_lua!(),
  r#"
local kept = false
local h = nil
local stored = redis.pcall('GET', KEYS[1])
if type(stored) == 'string' then
  h = envelope_header(stored, tonumber(ARGV[13]))
end
if h ~= nil then
  kept = tonumber(h.stamp) == tonumber(ARGV[1]) and tonumber(h.fresh) == tonumber(ARGV[2])
    and tonumber(h.hard) == tonumber(ARGV[3]) and tonumber(h.hard) ~= 0
end
if kept then
  local expired = tonumber(redis.pcall('GET', KEYS[4]))
  kept = expired == nil or expired <= tonumber(ARGV[7])
end
if kept then
  local old = string.find(stored, '\n', 1, true) - 1
  local header = h.version .. ' ' .. ARGV[4] .. ' ' .. ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. ARGV[7] .. ' ' .. ARGV[8] .. ' ' .. h.kind
  if #header == old then
    redis.call('SETRANGE', KEYS[1], 0, header)
    redis.call('PEXPIRE', KEYS[1], ARGV[9])
  else
    redis.call('SET', KEYS[1], header .. string.sub(stored, old + 1), 'PX', ARGV[9])
  end
  redis.call('DEL', KEYS[3])
end
if ARGV[10] ~= '' and redis.pcall('GET', KEYS[2]) == ARGV[10] then
  redis.call('DEL', KEYS[2])
end
if not kept then
  return 0
end
return 1 + announce(ARGV[11], ARGV[12])
"#
);

/// `deleteByTag`, live or replayed: the tag's invalidation stamp raised to
/// ARGV[1] (never lowered: a replayed or skewed older one changes nothing),
/// living at least ARGV[2] ms (the longest hard TTL an entry carrying it can
/// have: no entry written before the stamp outlives it); a stamp that is
/// not a number (another program's value) is replaced. Announces in any
/// case: an instance may hold an older stamp. KEYS[1] the tag's stamp
/// name; ARGV[3] channel, ARGV[4] message.
/// Returns 1 if raised, else 0; plus [`ANNOUNCE_REFUSED`] if the PUBLISH was
/// refused.
pub const TAG_SCRIPT: &str = concat!(
  announce_lua!(),
  r#"
local raised = 0
local stored = redis.pcall('GET', KEYS[1])
local at = tonumber(ARGV[1])
local current = nil
if type(stored) == 'string' and string.match(stored, '^%d+$') then
  current = tonumber(stored)
end
if current == nil or current < at then
  local ttl = redis.call('PTTL', KEYS[1])
  local px = tonumber(ARGV[2])
  if ttl > px then
    px = ttl
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', px)
  raised = 1
end
return raised + announce(ARGV[3], ARGV[4])
"#
);

/// The fleet's load slots (`fleetMaxConcurrentLoads`): a counting
/// semaphore with leases and a fair queue, in one hash (KEYS[1]). Each
/// instance has one field, `held leaseUntil ticket waitUntil wanted`: the
/// slots it holds, until when (server ms) they count if it stops renewing
/// them (a crashed instance frees them when its lease ends), and while it
/// waits for more, its place in the queue (a ticket, from the counter in
/// field `#`), until when that place is kept without a renewal, and how
/// many it still wants. The instance is the one writer of its field and
/// sends what it holds as a whole (not a change), so a lost answer or a
/// repeat cannot make the count drift.
///
/// One call does everything: drops what expired (and fields no instance can
/// have written), sets this instance's holding to ARGV[2], and if it wants
/// ARGV[3] more grants what is free, fairly: alone, it may take all that is
/// free; while other instances want slots too, each may hold up to an
/// equal share of the cap (rounded up), and the slots the instances queued
/// before it still lack of their share are kept for them. So a freed slot
/// goes to the queue's head first, and no instance starves. An instance
/// granted less than it wants keeps its place, or after a grant goes to
/// the back (turns round-robin). When slots are free and others wait, it
/// announces it (ARGV[7] channel, ARGV[8] message and the last ticket that
/// may get one: the first `free` waiting instances'), so they ask again at
/// once, and the others do not. Time is the server's (`TIME`), so the
/// instances' clocks do not matter. ARGV[1] instance, ARGV[4] the cap,
/// ARGV[5] the holding's lease ms, ARGV[6] the queue place's ms. Returns
/// {granted, free after it, instances waiting besides this one,
/// [`ANNOUNCE_REFUSED`] if the PUBLISH was refused else 0, that last
/// ticket (0: nothing announced), this instance's ticket (0: not queued)}.
pub const LOAD_SLOTS_SCRIPT: &str = concat!(
  announce_lua!(),
  r#"
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local me = ARGV[1]
local held, wanted, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local lease, wait = tonumber(ARGV[5]), tonumber(ARGV[6])
local fields = redis.pcall('HGETALL', KEYS[1])
if type(fields) ~= 'table' or fields.err then
  redis.call('DEL', KEYS[1])
  fields = {}
end
local last, mine, used, waiting = 0, 0, 0, {}
for i = 1, #fields, 2 do
  local field, value = fields[i], fields[i + 1]
  if field == '#' then
    if string.match(value, '^%d+$') and #value <= 15 then
      last = tonumber(value)
    end
  else
    local h, hu, t, tu, w = string.match(value, '^(%d+) (%d+) (%d+) (%d+) (%d+)$')
    if h == nil or #value > 80 then
      redis.call('HDEL', KEYS[1], field)
    elseif field == me then
      if tonumber(tu) > now then
        mine = tonumber(t)
      end
    else
      h, t = tonumber(h), tonumber(t)
      if tonumber(hu) <= now then
        h = 0
      end
      if tonumber(tu) <= now then
        t = 0
      end
      if h == 0 and t == 0 then
        redis.call('HDEL', KEYS[1], field)
      else
        used = used + h
        if t > 0 then
          waiting[#waiting + 1] = {t, h, tonumber(w)}
        end
      end
    end
  end
end
local free = cap - used - held
local granted = 0
if wanted > 0 then
  if #waiting == 0 then
    granted = math.max(0, math.min(wanted, free))
  else
    local share = math.ceil(cap / (#waiting + 1))
    local kept = 0
    for _, other in ipairs(waiting) do
      if mine == 0 or other[1] < mine then
        kept = kept + math.min(other[3], math.max(0, share - other[2]))
      end
    end
    granted = math.max(0, math.min(wanted, share - held, free - kept))
  end
  if granted == wanted then
    mine = 0
  elseif mine == 0 or granted > 0 then
    last = last + 1
    mine = last
  end
else
  mine = 0
end
held = held + granted
free = free - granted
if held > 0 or mine > 0 then
  local until_ = 0
  if mine > 0 then
    until_ = now + wait
  end
  local value = string.format('%d %d %d %d %d', held, now + lease, mine, until_, wanted - granted)
  redis.call('HSET', KEYS[1], me, value)
else
  redis.call('HDEL', KEYS[1], me)
end
redis.call('HSET', KEYS[1], '#', string.format('%d', last))
local keep = math.max(lease, wait) * 2
if redis.call('PTTL', KEYS[1]) < keep then
  redis.call('PEXPIRE', KEYS[1], keep)
end
local refused, up_to = 0, 0
if free > 0 and #waiting > 0 then
  local tickets = {}
  for i, other in ipairs(waiting) do
    tickets[i] = other[1]
  end
  table.sort(tickets)
  up_to = tickets[math.min(free, #tickets)]
  refused = announce(ARGV[7], ARGV[8] .. ' ' .. string.format('%d', up_to))
end
return {granted, math.max(free, 0), #waiting, refused, up_to, mine}
"#
);

/// A replayed `clear`, one batch of the prefix's names at a time: deletes
/// each unless it holds a valid envelope newer than the clear (the rules of
/// [`DELETE_NOT_NEWER_SCRIPT`]; locks and foreign values go, as in a live
/// clear). KEYS the names; ARGV[1] the clear's stamp, ARGV[2] the digit
/// limit. Returns how many were deleted.
pub const CLEAR_NOT_NEWER_SCRIPT: &str = concat!(
  envelope_stamp_lua!(),
  r#"
local digits = tonumber(ARGV[2])
local removed = 0
for _, name in ipairs(KEYS) do
  local keep = false
  local stored = redis.pcall('GET', name)
  if type(stored) == 'string' then
    local stamp = envelope_stamp(stored, digits)
    keep = stamp ~= nil and stamp > tonumber(ARGV[1])
  end
  if not keep then
    removed = removed + redis.call('DEL', name)
  end
end
return removed
"#
);

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn the_write_script_reads_the_envelope_stamp() {
    // The pattern must match what `Envelope::encode` writes.
    use crate::core::envelope::{Envelope, Meta};
    let text = Envelope {
      meta: Meta {
        fresh_until: 1,
        hard_until: 2,
        compute_ms: 3,
        stamp: 1_700_000_000_123,
        refresh_at: Some(1),
        negative: false,
      },
      body: crate::core::body::Body::Json("{}".into()),
      tags: crate::core::tags::Tags::NONE,
      etag: Default::default(),
    }
    .encode();
    assert!(text.starts_with(b"hc2 1 2 3 1700000000123 1 v\n"));
    // A tagged or formatted entry has the same header under its own version.
    assert!(WRITE_SCRIPT.contains(r"'^(hc[234]) (%d+) (%d+) (%d+) (%d+) (%d+) ([vn])\n'"));
    // The previous version is still read, so the script still knows it.
    assert!(WRITE_SCRIPT.contains(r"'^hc1 (%d+) (%d+) (%d+) (%d+) ([vn])\n'"));
  }

  /// A `set` reads the stored stamp as the write does, and rewrites the
  /// stamp field of the header `Envelope::encode` writes (the fifth field).
  #[test]
  fn the_set_script_rewrites_the_stamp_of_the_encoded_header() {
    assert!(SET_SCRIPT.starts_with(envelope_stamp_lua!()));
    assert!(SET_SCRIPT.contains("envelope_stamp(stored,"));
    assert!(SET_SCRIPT.contains(r"'^(hc[234] %d+ %d+ %d+ )%d+( .*)$'"));
  }

  /// The replay scripts judge a stored value's header as the write does:
  /// a change of the header there must be made here too.
  #[test]
  fn the_replay_scripts_read_the_header_as_the_write_does() {
    // One header parser, the same text in front of each script.
    let parser = envelope_stamp_lua!();
    for script in [
      WRITE_SCRIPT,
      DELETE_NOT_NEWER_SCRIPT,
      CLEAR_NOT_NEWER_SCRIPT,
      EXPIRE_SCRIPT,
      KEEP_SCRIPT,
    ] {
      assert!(script.starts_with(parser));
      assert_eq!(
        script.matches("string.match(").count(),
        2,
        "only the parser reads headers"
      );
      assert!(
        script.contains("envelope_stamp(stored,") || script.contains("envelope_header(stored,")
      );
    }
  }

  /// A live delete stamps the tombstone `envelope::tombstone` writes by
  /// the pattern a `set` rewrites stamps with, and it reads the stored
  /// header with the one parser.
  #[test]
  fn the_delete_script_stamps_the_tombstone_it_is_given() {
    let tombstone = crate::core::envelope::tombstone(1_700_000_000_123);
    assert_eq!(tombstone, "hc2 0 0 0 1700000000123 0 v\nnull");
    assert!(DELETE_SCRIPT.starts_with(envelope_stamp_lua!()));
    assert!(DELETE_SCRIPT.contains(r"string.match(ARGV[3], '^(hc[23] %d+ %d+ %d+ )%d+( .*)$')"));
    assert!(DELETE_SCRIPT.contains("tonumber(h.fresh) ~= 0 or tonumber(h.hard) ~= 0"));
  }

  #[test]
  fn the_token_pattern_matches_lock_tokens_only() {
    // The Lua pattern, translated: 8-4-4-4-12 hex digits, nothing else.
    let lua_to_shape = |text: &str| -> bool {
      let groups: Vec<&str> = text.split('-').collect();
      groups.len() == 5
        && groups
          .iter()
          .zip([8, 4, 4, 4, 12])
          .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let token = uuid::Uuid::new_v4().to_string();
    assert!(lua_to_shape(&token), "{token}");
    assert_eq!(
      TOKEN_PATTERN.matches("%x").count(),
      32,
      "one %x per hex digit of a UUID"
    );
    assert!(TOKEN_PATTERN.starts_with('^') && TOKEN_PATTERN.ends_with('$'));
  }
}
