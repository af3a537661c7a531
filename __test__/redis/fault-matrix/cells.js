'use strict'
// The fault matrix's one source of truth (issue 25, item 4): every operation
// (ROWS) under every way Redis can fail (COLUMNS), each cell's bound as data.
// The tests (../fault-matrix.test.js, ../fault-matrix-cluster.test.js) run
// every cell from it; render.js renders the README's table from it, and a
// test checks the README's table is that rendering. Not a test file.
//
// A bound is { rt, load, ms }: rt × redisTimeout + load × the loader's time + ms.

/** The options every cell's cache runs with: short, so the matrix runs in about a minute. */
const OPTIONS = { redisTimeout: 300, circuitBreakerDuration: 300 }
/** The loader's time in the cells that load. */
const LOAD_MS = 50
/** How long after the fault ends a kept write must be in Redis: the breaker's probe, a replay, slack. */
const DELIVERED_WITHIN = { rt: 2, ms: 2500 }
/** How long after the fault ends an outside write must reach the L1 (`tracking`): the subscription's backoff, its new connection, slack. */
const TRACKED_WITHIN = { rt: 2, ms: 2500 }

const COLUMNS = [
  {
    id: 'refused',
    title: 'never reached: refused',
    reached: false,
    how: 'a proxy in front of Redis resets every connection from the cache’s start; healed after the call',
    codes: ['ERR_HERDCACHE_REDIS_UNREACHABLE'],
  },
  {
    id: 'silent',
    title: 'never reached: silent',
    reached: false,
    how: 'the proxy accepts and never answers (a hung Redis) from the start; healed after the call',
    codes: ['ERR_HERDCACHE_REDIS_TIMEOUT'],
  },
  {
    id: 'auth',
    title: 'never reached: bad auth',
    reached: false,
    how: 'the cache’s ACL user is off (WRONGPASS) from the start; turned on after the call',
    codes: ['ERR_HERDCACHE_REDIS_AUTH'],
  },
  {
    id: 'killed',
    title: 'reached, then killed',
    reached: true,
    how: 'after ready(): every connection closed and new ones reset (what a killed redis-server looks like, its data kept to check delivery); healed after the call',
    codes: ['ERR_HERDCACHE_REDIS_UNREACHABLE', 'ERR_HERDCACHE_REDIS_CLOSED', 'ERR_HERDCACHE_REDIS_IO'],
  },
  {
    id: 'paused',
    title: 'paused 2 × redisTimeout',
    reached: true,
    how: 'after ready(): SIGSTOP of the test’s own redis-server, SIGCONT 2 × redisTimeout later',
    codes: ['ERR_HERDCACHE_REDIS_TIMEOUT'],
  },
  {
    id: 'slow',
    title: 'answers 2 × slower than redisTimeout',
    reached: true,
    how: 'after ready(): the proxy delays every chunk, each way, by 2 × redisTimeout; healed after the call',
    codes: ['ERR_HERDCACHE_REDIS_TIMEOUT'],
  },
  {
    id: 'failover',
    title: 'cluster: a primary fails over',
    reached: true,
    cluster: true,
    how: '3 + 3 cluster, after ready(): the primary of the cells’ keys SIGKILLed; the calls run at once, its replica takes over',
    codes: [
      'ERR_HERDCACHE_REDIS_UNREACHABLE',
      'ERR_HERDCACHE_REDIS_TIMEOUT',
      'ERR_HERDCACHE_REDIS_CLOSED',
      'ERR_HERDCACHE_REDIS_IO',
      'ERR_HERDCACHE_REDIS_CLUSTER',
    ],
  },
  {
    id: 'slotMove',
    title: 'cluster: a slot moves',
    reached: true,
    cluster: true,
    how: 'after ready(): the slot of the cells’ keys migrated to another primary (SETSLOT MIGRATING/IMPORTING, MIGRATE, SETSLOT NODE), then the calls',
    codes: [],
  },
]

/**
 * Each row: what the caller gets and its bound under a fault; `write` rows are
 * kept for auto-recovery and must be found in Redis once it answers.
 * `bound` may be { reached, never } when it differs before the first connection.
 */
const ROWS = [
  { id: 'cold', title: '`getOrLoad` cold', gets: 'loader', bound: { rt: 1, load: 1, ms: 100 }, reported: true },
  { id: 'warm', title: '`getOrLoad` warm in L1', gets: 'l1', bound: { ms: 50 } },
  { id: 'stale', title: '`getOrLoad` stale', gets: 'stale', bound: { ms: 50 } },
  {
    // The call never waits on the tracking connection; once Redis answers
    // again, a write made outside herdcache reaches the L1 (run.js).
    id: 'tracked',
    title: '`getOrLoad` warm in L1, then a write outside herdcache (`tracking`)',
    gets: 'l1',
    bound: { ms: 50 },
    tracked: true,
  },
  {
    id: 'keep',
    title: '`getOrLoad` whose loader calls `ctx.keep()` (stale in L1, `stale: false`)',
    gets: 'kept',
    bound: { rt: 1, load: 1, ms: 100 },
  },
  { id: 'forceFresh', title: '`getOrLoad` with `forceFresh`', gets: 'loader', bound: { rt: 1, load: 1, ms: 100 } },
  { id: 'noL1', title: '`getOrLoad` with `l1: false`', gets: 'loader', bound: { rt: 1, load: 1, ms: 100 } },
  { id: 'noRedis', title: '`getOrLoad` with `redis: false`', gets: 'loader', bound: { load: 1, ms: 100 } },
  {
    id: 'pastL1',
    title: '`getOrLoad` past `l1Ttl`, fresh in Redis',
    gets: 'l1OrLoader',
    bound: { rt: 1, load: 1, ms: 100 },
    options: { l1Ttl: 100 },
  },
  {
    id: 'pastL1Bytes',
    title: '`getOrLoad` of a value past `l1MaxValueBytes`',
    gets: 'loader',
    bound: { rt: 1, load: 1, ms: 100 },
    options: { l1MaxValueBytes: 1 },
  },
  { id: 'get', title: '`get` (not in L1)', gets: 'undefined', bound: { rt: 1, ms: 100 } },
  ...[
    ['set', '`set`'],
    ['delete', '`delete`'],
    ['expire', '`expire`'],
    ['deleteByTag', '`deleteByTag`'],
    ['clear', '`clear`'],
    ['nsClear', 'a namespace’s `clear`'],
  ].map(([id, title]) => ({
    id,
    title,
    gets: 'resolved',
    write: true,
    bound: { never: { ms: 150 }, reached: { rt: 1, ms: 100 } },
  })),
  {
    // A value the `compress` option stores compressed: kept and replayed as
    // such, and read back by a cache without the option (the check's `admin`).
    id: 'setCompressed',
    title: 'a compressed `set` (`compress`)',
    gets: 'resolved',
    write: true,
    bound: { never: { ms: 150 }, reached: { rt: 1, ms: 100 } },
    options: { compress: { threshold: 0 } },
  },
  { id: 'many', title: '`getOrLoadMany`', gets: 'loader', bound: { rt: 1, load: 1, ms: 100 } },
  {
    id: 'fleetCap',
    title: 'a load under `fleetMaxConcurrentLoads`',
    gets: 'loader',
    bound: { rt: 1, load: 1, ms: 100 },
    options: { fleetMaxConcurrentLoads: 2 },
  },
  { id: 'ready', title: '`ready()`', gets: 'ready', bound: { rt: 2, ms: 100 } },
  { id: 'close', title: '`close()` with a write kept', gets: 'closed', bound: { rt: 1, ms: 100 } },
]

/**
 * Where a column departs from the row's general expectation (what the README
 * says it does instead).
 */
const OVERRIDES = {
  // The pause ends (2 × redisTimeout) while close() makes its one more attempt
  // (bounded by redisTimeout) after a write that timed out: the write is
  // delivered then, or reported; never lost.
  paused: { close: { gets: 'closedEither' } },
  // A slot that moved is no outage: the calls reach the new owner (MOVED/ASK),
  // nothing is kept, and the fleet lock follows the slot.
  slotMove: {
    cold: { gets: 'loader', fleetOnce: true, reported: false },
    get: { gets: 'undefined' },
    ready: { gets: 'resolves' },
    close: { gets: 'closedDelivered' },
    ...Object.fromEntries(
      ['set', 'delete', 'expire', 'deleteByTag', 'clear', 'nsClear', 'setCompressed'].map((id) => [id, { live: true }]),
    ),
  },
}

/** The cell of `row` under `column`: the row's expectation, the column's overrides, its bound resolved. */
function cell(column, row) {
  const c = { ...row, ...(OVERRIDES[column.id]?.[row.id] ?? {}) }
  const b = c.bound
  c.bound = b.never || b.reached ? (column.reached ? b.reached : b.never) : b
  c.column = column.id
  c.row = row.id
  return c
}

/** A bound's value in ms for these options. */
function boundMs(bound, { redisTimeout = OPTIONS.redisTimeout, load = LOAD_MS } = {}) {
  return (bound.rt ?? 0) * redisTimeout + (bound.load ?? 0) * load + (bound.ms ?? 0)
}

/** A bound as a formula: `redisTimeout + load + 100 ms`. */
function boundText(bound) {
  const terms = []
  if (bound.rt) terms.push(bound.rt === 1 ? 'T' : `${bound.rt}T`)
  if (bound.load) terms.push('L')
  if (bound.ms || !terms.length) terms.push(`${bound.ms ?? 0}`)
  return `≤ ${terms.join(' + ')}`
}

const GETS = {
  loader: 'the loader’s value',
  l1: 'the L1 value, no load',
  l1OrLoader: 'the L1 value (the loader’s for a call that finds Redis gone first)',
  stale: 'the stale value',
  kept: 'the stale value, kept: 1 load',
  undefined: '`undefined`',
  resolved: 'resolves',
  ready: 'rejects, coded',
  resolves: 'resolves',
  closed: 'resolves; `UNDELIVERED` reported',
  closedDelivered: 'resolves; nothing undelivered',
  closedEither: 'resolves; the write delivered or `UNDELIVERED` reported',
}

/** One cell's text in the README's table. */
function cellText(c, column) {
  let what = GETS[c.gets]
  if (c.gets === 'ready' && column.reached) what = 'settles (a rejection coded)'
  const parts = [`${boundText(c.bound)}: ${what}`]
  if (c.write && !c.live) parts.push('kept, delivered')
  if (c.write && c.live) parts.push('lands')
  if (c.fleetOnce) parts.push('1 load for 2 instances')
  if (c.reported && column.codes.length) parts.push('reported')
  if (c.options?.fleetMaxConcurrentLoads && column.codes.length) parts.push('`fleetCapBypassed`')
  if (c.tracked) parts.push(`an outside write seen ${boundText(TRACKED_WITHIN)} once Redis answers`)
  return parts.join('; ')
}

module.exports = {
  OPTIONS,
  LOAD_MS,
  DELIVERED_WITHIN,
  TRACKED_WITHIN,
  COLUMNS,
  ROWS,
  OVERRIDES,
  cell,
  boundMs,
  boundText,
  cellText,
}
