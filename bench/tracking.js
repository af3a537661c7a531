'use strict'

// What Redis client tracking costs (issue 29, item 6; README, "Writes made
// outside herdcache: `tracking`"): `npm run bench:tracking`, or
// `node bench/tracking.js [--quick] [--seconds=S] [--baseline=DIR] [--hit-seconds=S] [--out=FILE]`.
//
// One redis-server of the bench's own (127.0.0.1, a free port, no
// persistence, `--enable-debug-command yes`; it touches no other server),
// holding POPULATE keys under the prefix (`DEBUG POPULATE 1000000 {bt:`:
// `{bt::0` …, names that are no cache value's, passed over by the L1), and
// four processes forked from this file (`--role=`): three readers and one
// writer instance, each one `new Cache({ redis, prefix: 'bt:', ttl: 60000,
// tracking })` per run (made fresh, `ready()`, closed after it). The readers
// hold two keys in their L1, `marker` and `busy`, and serve: a
// `getOrLoad('busy')` every CALL_EVERY_MS (each call applies what was
// queued for the L1 since the one before).
//
// Two loads, each with `tracking: true` and `tracking: false` (the events
// channel only), in ROUNDS rounds whose order rotates, SECONDS of writing
// each, at a target of RATE writes/s to KEYS distinct keys of the prefix:
// - outside SET: this process's ioredis, pipelined (`SET {bt:k<i>} <100 B>`):
//   every write is a change made outside herdcache, one tracking message per
//   reader, applied to its L1 after the 20 ms echo window (`trackedChanges`);
// - herdcache set(): the writer instance's `cache.set('k<i>', value)`: every
//   write is announced on the events channel, and with tracking heard a
//   second time and paired (`trackedEchoes`).
// Then IDLE_RUNS: the same loads for IDLE_SECONDS with readers that make no
// call (their queued changes pass the engine's bound: is the L1 cleared?).
// Per run: the readers' `process.cpuUsage()` and Redis's `used_cpu_sys +
// used_cpu_user` (INFO cpu) from the start of the writes to TAIL_MS after
// their end (% of one core over that window); the counters' deltas; Redis's
// INFO memory, clients and stats (tracking) at its end. The lag: at the end
// of the writes, each reader's first `cache.get('marker')` applies what was
// queued (the L1 still holds both keys, or it was cleared), then it polls
// every ms; the writer removes the marker (outside: `DEL {bt:marker}`;
// herdcache: the writer's `cache.delete('marker')`): the lag is from just
// before that command to the first poll that answers `undefined` (the L1
// let it go and Redis has none), on the wall clock the processes share.
// Each message of the load was queued before it on the same connection, so
// the lag includes draining them.
//
// Then the hit path (bench/hitpath.js's untagged hit, the embedded store),
// with `--baseline=DIR` (a checkout of the commit before tracking, built)
// against DIR's, fresh processes alternating (hitpath's againstBaseline),
// for --hit-seconds (default 6; quick 3).
//
// Writes bench/TRACKING.md (with --quick: bench/out/tracking-quick.md), then
// the README's tracking section (bench/readme.js).

const fs = require('node:fs')
const path = require('node:path')
const { fork } = require('node:child_process')
const { performance } = require('node:perf_hooks')
const c = require('./common')

const ROOT = path.join(__dirname, '..')
const PREFIX = 'bt:'
const TTL = 60_000
const RATE = 10_000 // writes/s, the target
const KEYS = 10_000 // distinct keys written
const POPULATE = 1_000_000 // keys under the prefix in Redis
const READERS = 3
const TICK_MS = 5 // the writers' pace: every tick, the writes due
const MOST_IN_FLIGHT = 5_000 // writes sent and not yet answered, at most
const TAIL_MS = 500 // the measured window goes on this long after the writes end
const WATCH_MS = 400 // a reader's wait for the marker to go, from the writer's removal
const MARKER = 'marker'
const BUSY = 'busy' // the key of the readers' own calls during a run
const CALL_EVERY_MS = 10 // a reader's call, while it serves (each call applies the invalidations queued meanwhile)
const OUTSIDE_VALUE = 'x'.repeat(100)
const SET_VALUE = { id: 1, text: 'y'.repeat(80) }
const wall = () => performance.timeOrigin + performance.now()
const NOT_HELD = 'not held'

const ROLE = c.opt('role') // a forked process: 'reader' | 'writer'

/** Writes at `rate`/s for `seconds`: `issue(first, n)` sends writes first … first+n-1 and settles when answered. */
async function paced(rate, seconds, issue) {
  const started = c.now()
  const end = started + seconds * 1000
  let issued = 0
  let answered = 0
  let failed = 0
  let lastAt = started
  const inFlight = new Set()
  while (c.now() < end) {
    const due = Math.floor(((c.now() - started) * rate) / 1000) - issued
    const room = MOST_IN_FLIGHT - (issued - answered - failed)
    const n = Math.min(due, room)
    if (n > 0) {
      const sent = issue(issued, n).then(
        () => {
          answered += n
          lastAt = c.now()
        },
        () => {
          failed += n
        },
      )
      issued += n
      inFlight.add(sent)
      sent.finally(() => inFlight.delete(sent))
    }
    await c.sleep(TICK_MS)
  }
  await Promise.all(inFlight)
  return { issued, answered, failed, seconds: (lastAt - started) / 1000, wanted: seconds }
}

const keyOf = (i) => `k${i % KEYS}`

// ---------------------------------------------------------------- a forked instance

/** A forked instance: answers the bench's messages ({ id, op, ...args } → { id, ok, result | error }). */
function instanceMain() {
  const { Cache } = require(ROOT)
  let cache
  let started
  let calling = null
  const handlers = {
    async open({ url, tracking }) {
      cache = new Cache({ redis: url, prefix: PREFIX, ttl: TTL, tracking })
      await cache.ready()
      const until = c.now() + 5000
      for (;;) {
        const s = cache.stats()
        if (s.redisSubscribed === 1 && s.redisTracking === (tracking ? 1 : 0)) return { stats: s }
        if (c.now() > until) throw new Error(`not subscribed or tracking as asked: ${JSON.stringify(s)}`)
        await c.sleep(10)
      }
    },
    async hold() {
      for (const key of [MARKER, BUSY]) {
        const value = await cache.getOrLoad(key, () => key)
        if (value !== key) throw new Error(`${key} is ${JSON.stringify(value)}`)
      }
      return { size: cache.stats().size }
    },
    start({ busy }) {
      started = { cpu: process.cpuUsage(), at: c.now(), stats: cache.stats(), busy }
      if (busy) calling = setInterval(() => cache.getOrLoad(BUSY, () => BUSY).catch(() => {}), CALL_EVERY_MS)
      return {}
    },
    async watch() {
      // Answers once polling (then, a second message, when the marker went or `ms` later). This first call applies
      // what was queued for the L1; the readers hold the marker and, when busy, BUSY: fewer entries, the L1 was
      // cleared meanwhile (too many changes queued between two calls) and the marker is read from Redis.
      const first = await cache.get(MARKER)
      if (first !== MARKER) throw new Error(`the marker is ${JSON.stringify(first)} before it was removed`)
      return { held: cache.stats().size >= (started.busy ? 2 : 1) }
    },
    stop() {
      clearInterval(calling)
      calling = null
      const cpu = process.cpuUsage(started.cpu)
      const stats = cache.stats()
      const delta = {}
      for (const name of ['trackedChanges', 'trackedEchoes', 'redisHits', 'loads', 'evictions', 'redisErrors']) {
        delta[name] = stats[name] - started.stats[name]
      }
      return {
        cpuMs: (cpu.user + cpu.system) / 1000,
        ms: c.now() - started.at,
        delta,
        tracking: stats.redisTracking,
        subscribed: stats.redisSubscribed,
      }
    },
    async write({ seconds }) {
      return paced(RATE, seconds, (first, n) => {
        const writes = []
        for (let i = first; i < first + n; i++) writes.push(cache.set(keyOf(i), SET_VALUE))
        return Promise.all(writes)
      })
    },
    async remove() {
      const at = wall()
      await cache.delete(MARKER)
      return { at }
    },
    async close() {
      await cache.close()
      cache = undefined
      return {}
    },
  }
  process.on('message', async ({ id, op, ...args }) => {
    try {
      if (op === 'exit') {
        process.disconnect()
        return
      }
      const result = await handlers[op](args)
      process.send({ id, ok: true, result })
      if (op === 'watch') {
        const polling = (async () => {
          const until = c.now() + args.ms
          while (c.now() < until) {
            if ((await cache.get(MARKER)) === undefined) return { droppedAt: wall() }
            await c.sleep(1)
          }
          return { droppedAt: null }
        })()
        process.send({ id: `${id}:dropped`, ok: true, result: await polling })
      }
    } catch (error) {
      process.send({ id, ok: false, error: String(error?.stack ?? error) })
    }
  })
}

// ---------------------------------------------------------------- the bench

const { startRedis } = require('../__test__/redis-server')
const hitpath = require('./hitpath')

if (ROLE === undefined) {
  c.rejectUnknownArgs(
    /^--(quick|seconds=\d+(\.\d+)?|hit-seconds=\d+(\.\d+)?|baseline=.+|out=.+)$/,
    'node bench/tracking.js [--quick] [--seconds=S] [--baseline=DIR] [--hit-seconds=S] [--out=FILE]',
  )
}
const QUICK = c.flag('quick')
const OUT = path.resolve(c.opt('out') ?? path.join(__dirname, QUICK ? 'out/tracking-quick.md' : 'TRACKING.md'))
const SECONDS = Number(c.opt('seconds') ?? (QUICK ? 3 : 10))
const HIT_SECONDS = Number(c.opt('hit-seconds') ?? (QUICK ? 3 : 6))
const ROUNDS = QUICK ? 1 : 2
const WARMUP_SECONDS = 1

const LOADS = [
  { id: 'outside', title: 'outside SET (ioredis, pipelined)' },
  { id: 'herdcache', title: 'herdcache `set()` (a 4th instance)' },
]
const RUNS = LOADS.flatMap((load) => [true, false].map((tracking) => ({ load, tracking, busy: true })))
// Readers that make no call during the writes: the changes queue for their L1 until the next call, and past
// MAX_QUEUED_CHANGES queued it is cleared instead (QUEUE_SOURCE): whatever tells them.
const QUEUE_SOURCE = 'src/engine/fleet/invalidations.rs'
/** The bound of the changes queued for an L1, as the sources have it. */
function queuedBound() {
  const text = fs.readFileSync(path.join(ROOT, QUEUE_SOURCE), 'utf8')
  return Number(capture(text, /const MAX_QUEUED_CHANGES: usize = ([\d_]+);/)[1].replace(/_/g, ''))
}
function capture(text, pattern) {
  const m = pattern.exec(text)
  if (!m) throw new Error(`${pattern} not found`)
  return m
}
const IDLE_SECONDS = Math.min(SECONDS, 3)
const IDLE_RUNS = [
  { load: LOADS[0], tracking: true, busy: false },
  { load: LOADS[1], tracking: false, busy: false },
]

/** A forked instance: `call(op, args)` answers its result; `dropped(id)` the marker's second answer. */
function instance(role) {
  const child = fork(__filename, [`--role=${role}`], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const waiting = new Map()
  let next = 1
  child.on('message', ({ id, ok, result, error }) => {
    const w = waiting.get(id)
    if (!w) return
    waiting.delete(id)
    if (ok) w.resolve(result)
    else w.reject(new Error(`${role} ${id}: ${error}`))
  })
  child.on('exit', (code) => {
    for (const w of waiting.values()) w.reject(new Error(`${role} exited (${code})`))
    waiting.clear()
  })
  const expect = (id) => new Promise((resolve, reject) => waiting.set(id, { resolve, reject }))
  return {
    role,
    call(op, args = {}) {
      const id = next++
      const answer = expect(id)
      child.send({ id, op, ...args })
      return answer
    },
    /** Starts the marker watch: resolves when polling, with `held` (the L1 had it) and `dropped`, the promise of { droppedAt }. */
    async watch(ms) {
      const id = next++
      const polling = expect(id)
      const dropped = expect(`${id}:dropped`)
      child.send({ id, op: 'watch', ms })
      const { held } = await polling
      return { held, dropped } // wrapped: an async function answering a promise would wait for it
    },
    exit() {
      child.send({ op: 'exit' })
      return new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)))
    },
  }
}

/** INFO `section` as { field: value } (numbers where they are numbers). */
async function info(redis, section) {
  const text = await redis.cmd('INFO', section)
  const out = {}
  for (const line of text.split('\r\n')) {
    const at = line.indexOf(':')
    if (at <= 0 || line.startsWith('#')) continue
    const value = line.slice(at + 1)
    out[line.slice(0, at)] = /^-?\d+(\.\d+)?$/.test(value) ? Number(value) : value
  }
  return out
}
const redisCpu = async (redis) => {
  const cpu = await info(redis, 'cpu')
  return cpu.used_cpu_sys + cpu.used_cpu_user
}

/** One run: a fresh Cache in every instance, the writes, the marker's removal, the figures. */
async function run(ctx, { load, tracking, busy }, seconds) {
  const { redis, writerRedis, readers, writer } = ctx
  const url = redis.url
  // The writer instance has a Cache only under its own load (idle otherwise: the readers are the outside load's fleet).
  const members = load.id === 'herdcache' ? [...readers, writer] : readers
  await redis.cmd('DEL', `{${PREFIX}${MARKER}}`, `{${PREFIX}${BUSY}}`)
  await Promise.all(members.map((p) => p.call('open', { url, tracking })))
  // The first reader loads the marker (and BUSY) and writes it; the others read it from Redis (no announcement).
  await readers[0].call('hold')
  await c.sleep(50)
  for (const reader of readers.slice(1)) await reader.call('hold')
  await c.sleep(100)

  const cpu0 = await redisCpu(redis)
  const startedAt = c.now()
  await Promise.all(members.map((p) => p.call('start', { busy: busy && p.role === 'reader' })))
  let wrote
  if (load.id === 'outside') {
    wrote = await paced(RATE, seconds, (first, n) => {
      const pipeline = writerRedis.pipeline()
      for (let i = first; i < first + n; i++) pipeline.set(`{${PREFIX}${keyOf(i)}}`, OUTSIDE_VALUE)
      return pipeline.exec()
    })
  } else {
    wrote = await writer.call('write', { seconds })
  }
  const wroteAt = c.now()
  const watches = await Promise.all(readers.map((reader) => reader.watch(WATCH_MS)))
  let removedAt
  if (load.id === 'outside') {
    removedAt = wall()
    await writerRedis.del(`{${PREFIX}${MARKER}}`)
  } else {
    removedAt = (await writer.call('remove')).at
  }
  // ms; null: still there WATCH_MS later; 'not held': the L1 had let it go before (cleared), read from Redis.
  const dropped = await Promise.all(watches.map((w) => w.dropped))
  const lags = dropped.map(({ droppedAt }, i) =>
    !watches[i].held ? NOT_HELD : droppedAt === null ? null : droppedAt - removedAt,
  )
  await c.sleep(Math.max(0, wroteAt + TAIL_MS - c.now()))
  const [stopped, writerStopped] = await Promise.all([
    Promise.all(readers.map((reader) => reader.call('stop'))),
    load.id === 'herdcache' ? writer.call('stop') : null,
  ])
  const windowS = (c.now() - startedAt) / 1000
  const redisCpuS = (await redisCpu(redis)) - cpu0
  const memory = await info(redis, 'memory')
  const stats = await info(redis, 'stats')
  const clients = await info(redis, 'clients')
  await Promise.all(members.map((p) => p.call('close')))
  for (const s of stopped) {
    if (s.subscribed !== 1 || s.tracking !== (tracking ? 1 : 0)) {
      throw new Error(`a reader lost its subscription or tracking during the run: ${JSON.stringify(s)}`)
    }
  }
  return {
    wrote,
    rate: wrote.answered / wrote.seconds,
    held: watches.filter((w) => w.held).length,
    readers: stopped.map((s, i) => ({
      cpu: s.cpuMs / s.ms, // share of one core
      changes: s.delta.trackedChanges,
      echoes: s.delta.trackedEchoes,
      changesPerS: s.delta.trackedChanges / wrote.seconds,
      echoesPerS: s.delta.trackedEchoes / wrote.seconds,
      lag: lags[i],
      delta: s.delta,
    })),
    writerCpu: writerStopped === null ? null : writerStopped.cpuMs / writerStopped.ms,
    redisCpu: redisCpuS / windowS,
    windowS,
    usedMemory: memory.used_memory,
    clientsMemory: memory.mem_clients_normal,
    trackingClients: clients.tracking_clients,
    trackingPrefixes: stats.tracking_total_prefixes,
    trackingKeys: stats.tracking_total_keys,
    connectedClients: clients.connected_clients,
  }
}

const fmtInt = (n) => Math.round(n).toLocaleString('en-US').replace(/,/g, ' ')
const fmtPct = (share) => `${(share * 100).toFixed(1)} %`
const fmtMs = (ms) => (ms === null ? 'kept' : typeof ms === 'string' ? ms : ms.toFixed(1))
const fmtMiB = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`
const each = (values, fmt) => values.map(fmt).join(' / ')
const perReader = (results, pick) =>
  Array.from({ length: READERS }, (_, i) => {
    const xs = results.map((r) => pick(r.readers[i]))
    const other = xs.findIndex((x) => typeof x !== 'number') // null (kept) or NOT_HELD in a round: that
    return other === -1 ? c.median(xs) : xs[other]
  })
const med = (results, pick) => c.median(results.map(pick))

async function measureRuns() {
  const redis = await startRedis(null, { args: ['--enable-debug-command', 'yes'] })
  if (redis === null) throw new Error('redis-server is not installed (apt-get install redis-server)')
  const Redis = require('ioredis')
  const readers = Array.from({ length: READERS }, () => instance('reader'))
  const writer = instance('writer')
  const writerRedis = new Redis({ host: '127.0.0.1', port: redis.port, lazyConnect: false })
  try {
    const memoryEmpty = (await info(redis, 'memory')).used_memory
    const t0 = c.now()
    await redis.cmd('DEBUG', 'POPULATE', String(POPULATE), `{${PREFIX}`, '16')
    const populateMs = c.now() - t0
    const dbsize = await redis.cmd('DBSIZE')
    const sample = await redis.cmd('RANDOMKEY')
    if (dbsize < POPULATE || !sample.startsWith(`{${PREFIX}`)) {
      throw new Error(`DEBUG POPULATE made ${dbsize} keys (${sample})`)
    }
    // Every outside key once, so Redis's memory is the same from the first run on.
    const pipeline = writerRedis.pipeline()
    for (let i = 0; i < KEYS; i++) pipeline.set(`{${PREFIX}${keyOf(i)}}`, OUTSIDE_VALUE)
    await pipeline.exec()
    const memoryPopulated = (await info(redis, 'memory')).used_memory
    console.log(
      `redis-server: ${fmtInt(dbsize)} keys under {${PREFIX} (populated in ${(populateMs / 1000).toFixed(1)} s), used_memory ${fmtMiB(memoryPopulated)}`,
    )
    const ctx = { redis, writerRedis, readers, writer }
    await run(ctx, RUNS[0], WARMUP_SECONDS) // warm-up: processes, JIT, connections
    const results = new Map([...RUNS, ...IDLE_RUNS].map((r) => [r, []]))
    const rounds = Array.from({ length: ROUNDS }, (_, round) => RUNS.map((_, i) => RUNS[(i + round) % RUNS.length]))
    for (const spec of [...rounds.flat(), ...IDLE_RUNS]) {
      const r = await run(ctx, spec, spec.busy ? SECONDS : IDLE_SECONDS)
      results.get(spec).push(r)
      console.log(
        `${spec.load.id.padEnd(9)} tracking ${String(spec.tracking).padEnd(5)} ${spec.busy ? 'busy' : 'idle'}` +
          ` ${fmtInt(r.rate).padStart(6)} writes/s` +
          `  changes/s ${each(r.readers, (x) => fmtInt(x.changesPerS))}  echoes/s ${each(r.readers, (x) => fmtInt(x.echoesPerS))}` +
          `  lag ms ${each(r.readers, (x) => fmtMs(x.lag))}  CPU ${each(r.readers, (x) => fmtPct(x.cpu))}` +
          `  Redis ${fmtPct(r.redisCpu)}  used_memory ${fmtMiB(r.usedMemory)}`,
      )
    }
    const redisVersion = (await info(redis, 'server')).redis_version
    return { results, memoryEmpty, memoryPopulated, dbsize, populateMs, redisVersion }
  } finally {
    writerRedis.disconnect()
    await Promise.all([...readers, writer].map((p) => p.exit()))
    await redis.stop()
  }
}

function hitPath() {
  const baseline = c.opt('baseline')
  if (baseline !== undefined) return hitpath.againstBaseline(path.resolve(baseline), HIT_SECONDS)
  hitpath.hitInChild(ROOT)
  const ours = []
  const end = c.now() + HIT_SECONDS * 1000
  while (ours.length < 3 || c.now() < end) ours.push(hitpath.hitInChild(ROOT))
  console.log(`hit path, ${ours.length} processes: ${c.median(ours).toFixed(1)} ns/op`)
  return { ours }
}

// ---------------------------------------------------------------- the report

function markdown(measured, hit, info) {
  const { results } = measured
  const find = (loadId, tracking, busy = true) =>
    [...results.keys()].find((r) => r.load.id === loadId && r.tracking === tracking && r.busy === busy)
  const get = (loadId, tracking, busy = true) => results.get(find(loadId, tracking, busy))
  const L = []
  L.push('# Redis client tracking: what it costs', '')
  L.push(`- date: ${info.date}`)
  L.push(
    `- machine: ${info.machine.cpu}, ${info.machine.mem}, ${info.machine.os}; load average at start ${info.loadStart}, at end ${info.machine.load}`,
  )
  L.push(`- node ${process.version}, redis-server ${measured.redisVersion}, ioredis ${c.pkgVersion('ioredis')}`)
  L.push(`- command: \`${info.command}\` (took ${info.seconds} s)`)
  const build = c.herdcacheBuild(ROOT)
  if (build) L.push(`- herdcache build: ${build}`)
  L.push(
    `- setup: one redis-server of the bench's own (no persistence) holding ${fmtInt(measured.dbsize)} keys, ` +
      `${fmtInt(POPULATE)} of them under the prefix (\`DEBUG POPULATE ${POPULATE} {${PREFIX} 16\`: names no cache value ` +
      `has, passed over by the L1) and the ${fmtInt(KEYS)} the loads write. ${READERS} reader processes and one writer ` +
      `process, each a \`new Cache({ redis, prefix: '${PREFIX}', ttl: ${TTL}, tracking })\` per run (made, \`ready()\`, ` +
      `closed after it; \`tracking: true\` is the default). The readers hold two keys in their L1, \`${MARKER}\` and ` +
      `\`${BUSY}\`, and while they serve they call \`getOrLoad('${BUSY}')\` every ${CALL_EVERY_MS} ms (an L1 hit; a call ` +
      'applies the changes queued for the L1 since the one before).',
  )
  L.push(
    `- loads: a target of ${fmtInt(RATE)} writes/s to ${fmtInt(KEYS)} distinct keys (each key once a second), sent every ` +
      `${TICK_MS} ms, for ${SECONDS} s. **outside SET**: this process's ioredis, one pipeline per tick of \`SET {${PREFIX}k<i>} ` +
      `<${OUTSIDE_VALUE.length} B>\`: changes made outside herdcache. **herdcache \`set()\`**: the writer instance's ` +
      `\`cache.set('k<i>', value)\` (${JSON.stringify(SET_VALUE).length} B of JSON), each announced on the events channel ` +
      '(and, with tracking, heard a second time through it).',
  )
  L.push(
    `- method: the ${RUNS.length} runs (2 loads × tracking on and off) in ${ROUNDS} round(s), the order rotating, after a ` +
      `${WARMUP_SECONDS} s warm-up run; a figure is the median of its rounds. Then ${IDLE_RUNS.length} runs of ` +
      `${IDLE_SECONDS} s whose readers make no call. "writes/s": the writes answered ÷ the seconds from the first to the ` +
      `last answer. Per reader, from the start of the writes to ${TAIL_MS} ms after their end: the deltas of ` +
      '`trackedChanges` and `trackedEchoes` ÷ the seconds of writing, and `process.cpuUsage()` (every thread: the addon ' +
      "works on its own) ÷ the wall time, as % of one core; Redis's `used_cpu_sys + used_cpu_user` (INFO cpu) the same " +
      "way. \"marker gone after\": once the writes ended, each reader's first `cache.get('marker')` applies what was " +
      'queued for its L1 ("in L1": it still held both keys), then it polls every ms; the writer then removes the marker ' +
      "(`DEL` from ioredis for the outside load, `cache.delete` for herdcache's): ms from just before that command to " +
      'the first poll answering `undefined`, on the wall clock the processes share (the messages of the load were ' +
      `queued before it); "kept": still there ${WATCH_MS} ms later; "${NOT_HELD}": its L1 had let it go before (the ` +
      'polls read Redis).',
  )
  L.push('')

  L.push(`## 1. Invalidation messages a fleet of ${READERS} absorbs`, '')
  L.push(
    "| load | tracking | readers' calls | writes/s | outside changes applied/s, each reader (`trackedChanges`) | " +
      'applied ÷ writes | own writes heard twice and paired/s, each reader (`trackedEchoes`) | marker in L1 at the end | ' +
      'marker gone after (ms), each reader | reader CPU (% of one core), each reader |',
  )
  L.push('|---|---|---|---:|---:|---:|---:|---:|---:|---:|')
  const loadRows = []
  for (const spec of [...RUNS, ...IDLE_RUNS]) {
    const { load, tracking, busy } = spec
    const rs = results.get(spec)
    const row = {
      load,
      tracking,
      busy,
      rate: med(rs, (r) => r.rate),
      changes: perReader(rs, (x) => x.changesPerS),
      echoes: perReader(rs, (x) => x.echoesPerS),
      lag: perReader(rs, (x) => x.lag),
      cpu: perReader(rs, (x) => x.cpu),
      held: Math.min(...rs.map((r) => r.held)),
      applied: med(rs, (r) => Math.min(...r.readers.map((x) => x.changes)) / (r.wrote.answered + 1)),
    }
    loadRows.push(row)
    L.push(
      `| ${load.title} | ${tracking ? 'on' : 'off'} | ${busy ? `one per ${CALL_EVERY_MS} ms` : `none (${IDLE_SECONDS} s run)`} | ` +
        `${fmtInt(row.rate)} | ${each(row.changes, fmtInt)} | ${load.id === 'outside' && tracking ? row.applied.toFixed(3) : '—'} | ` +
        `${each(row.echoes, fmtInt)} | ${row.held} of ${READERS} | ${each(row.lag, fmtMs)} | ${each(row.cpu, fmtPct)} |`,
    )
  }
  L.push('')
  const rowOf = (loadId, tracking, busy = true) =>
    loadRows.find((r) => r.load.id === loadId && r.tracking === tracking && r.busy === busy)
  const meanCpu = (loadId, tracking) => {
    const { cpu } = rowOf(loadId, tracking)
    return cpu.reduce((a, b) => a + b, 0) / cpu.length
  }
  const writerCpu = (tracking) => med(get('herdcache', tracking), (r) => r.writerCpu)
  L.push(
    `"applied ÷ writes": the lowest reader's \`trackedChanges\` over the outside writes answered plus the marker's \`DEL\` ` +
      "(1.000: every change reached every reader). The readers' CPU, the mean of the three: " +
      `outside SET ${fmtPct(meanCpu('outside', true))} with tracking, ${fmtPct(meanCpu('outside', false))} without; ` +
      `herdcache \`set()\` ${fmtPct(meanCpu('herdcache', true))} with tracking, ${fmtPct(meanCpu('herdcache', false))} ` +
      `without. The writer instance's own CPU under herdcache \`set()\`: ${fmtPct(writerCpu(true))} with tracking, ` +
      `${fmtPct(writerCpu(false))} without. Without tracking the readers hear herdcache's announcements only (the same ` +
      `${fmtInt(rowOf('herdcache', false).rate)}/s each, counted by no counter) and nothing of the outside writes. In the ` +
      `runs without calls the changes wait for the next call, and more than ${fmtInt(queuedBound())} waiting clear the ` +
      `L1 instead (${QUEUE_SOURCE}, \`MAX_QUEUED_CHANGES\`), whichever channel told them.`,
  )
  L.push('')

  L.push(`## 2. Redis with \`BCAST\` on a prefix of ${fmtInt(POPULATE)} keys`, '')
  L.push(
    "| load | tracking | Redis CPU (% of one core) | on ÷ off | used_memory at the end | of it, normal clients' buffers | " +
      'tracking_clients | tracking_total_prefixes | tracking_total_keys |',
  )
  L.push('|---|---|---:|---:|---:|---:|---:|---:|---:|')
  const redisRows = {}
  for (const { load, tracking } of RUNS) {
    const rs = get(load.id, tracking)
    const off = get(load.id, false)
    const row = {
      cpu: med(rs, (r) => r.redisCpu),
      ratio: c.median(rs.map((r, i) => r.redisCpu / off[i].redisCpu)),
      used: med(rs, (r) => r.usedMemory),
      clients: med(rs, (r) => r.clientsMemory),
    }
    redisRows[`${load.id}/${tracking}`] = row
    L.push(
      `| ${load.title} | ${tracking ? 'on' : 'off'} | ${fmtPct(row.cpu)} | ${tracking ? `${row.ratio.toFixed(2)}×` : '1'} | ` +
        `${fmtInt(row.used)} B (${fmtMiB(row.used)}) | ${fmtInt(row.clients)} B | ` +
        `${med(rs, (r) => r.trackingClients)} | ${med(rs, (r) => r.trackingPrefixes)} | ${med(rs, (r) => r.trackingKeys)} |`,
    )
  }
  L.push('')
  L.push(
    `used_memory of the empty server ${fmtInt(measured.memoryEmpty)} B; with the ${fmtInt(POPULATE)} keys and the ` +
      `${fmtInt(KEYS)} outside ones, before any instance connected, ${fmtInt(measured.memoryPopulated)} B ` +
      `(${fmtMiB(measured.memoryPopulated)}). "on ÷ off": the median of the per-round ratios of the same load. ` +
      `used_memory and the clients' buffers are read once, at the end of each run (${TAIL_MS} ms after the writes), ` +
      "the instances still connected. Redis's CPU includes serving the writes themselves.",
  )
  L.push('')

  L.push('## 3. The hit path, before and after', '')
  const what = hitpath.BASELINE_HIT
  if (hit.theirs === undefined) {
    L.push(hitpath.withoutBaseline(hit, c.median))
  } else {
    L.push(`${what}, against ${hit.root}, alternating process by process:`, '')
    L.push('| checkout | processes | ns/op (median) |')
    L.push('|---|---:|---:|')
    L.push(`| this checkout | ${hit.ours.length} | ${c.median(hit.ours).toFixed(1)} |`)
    L.push(
      `| ${hit.root.replace(/^the /, '')} (baseline) | ${hit.theirs.length} | ${c.median(hit.theirs).toFixed(1)} |`,
    )
    L.push('')
    L.push(`This ÷ baseline ${c.median(hit.ratios).toFixed(2)}× (the median of the per-round ratios).`)
  }
  L.push('')

  L.push('## What it means', '')
  const outsideOn = rowOf('outside', true)
  const outsideOff = rowOf('outside', false)
  const herdOn = rowOf('herdcache', true)
  const numbers = (xs) => xs.filter((x) => typeof x === 'number')
  const range = (xs, fmt) => {
    const ns = numbers(xs)
    if (ns.length === 0) return null
    const [lo, hi] = [Math.min(...ns), Math.max(...ns)]
    return lo === hi ? fmt(lo) : `${fmt(lo)}–${fmt(hi)}`
  }
  const lagText = (xs) => {
    const r = range(xs, fmtMs)
    return r === null
      ? `still held the marker ${WATCH_MS} ms after its \`DEL\``
      : `let the marker go ${r} ms after its \`DEL\``
  }
  const more = (share) => `${fmtPct(Math.abs(share))} of a core ${share >= 0 ? 'more' : 'less'}`
  const idleOutside = rowOf('outside', true, false)
  const idleHerd = rowOf('herdcache', false, false)
  const sentences = [
    `At ${fmtInt(outsideOn.rate)} outside writes/s, each of the ${READERS} readers applied ` +
      `${range(outsideOn.changes, fmtInt)} changes/s and ${lagText(outsideOn.lag)}; ` +
      `without tracking each ${lagText(outsideOff.lag)}.`,
    `With tracking each reader used ${more(meanCpu('outside', true) - meanCpu('outside', false))} under ` +
      `the outside writes, and ${more(meanCpu('herdcache', true) - meanCpu('herdcache', false))} under ` +
      `${fmtInt(herdOn.rate)} herdcache \`set()\`s/s, where it paired ${range(herdOn.echoes, fmtInt)} echoes/s per ` +
      `reader (means of the ${READERS} readers, on − off).`,
    `Redis used ${fmtPct(redisRows['outside/true'].cpu)} of a core with tracking and ` +
      `${fmtPct(redisRows['outside/false'].cpu)} without under the outside writes ` +
      `(${redisRows['outside/true'].ratio.toFixed(2)}×), ${fmtPct(redisRows['herdcache/true'].cpu)} and ` +
      `${fmtPct(redisRows['herdcache/false'].cpu)} under herdcache's (${redisRows['herdcache/true'].ratio.toFixed(2)}×), ` +
      `with ${fmtInt(POPULATE)} keys under the tracked prefix; used_memory at the end of the outside runs ` +
      `${fmtInt(redisRows['outside/true'].used)} B on, ${fmtInt(redisRows['outside/false'].used)} B off.`,
    `Readers that made no call for ${IDLE_SECONDS} s still held the marker at the end in ${idleOutside.held} of ` +
      `${READERS} (outside SET, tracking on) and ${idleHerd.held} of ${READERS} (herdcache \`set()\`, tracking off).`,
  ]
  if (hit.theirs !== undefined) {
    sentences.push(
      `The in-memory hit: ${c.median(hit.ours).toFixed(1)} ns against ${c.median(hit.theirs).toFixed(1)} ns before ` +
        `tracking (${c.median(hit.ratios).toFixed(2)}×).`,
    )
  }
  L.push(sentences.join(' '), '')
  return L.join('\n')
}

// ---------------------------------------------------------------- main

async function main() {
  const started = c.now()
  const loadStart = c.loadAvg()
  const measured = await measureRuns()
  const hit = hitPath()
  const info = {
    date: c.isoSeconds(),
    machine: c.machine(),
    loadStart,
    command: c.commandLine('bench/tracking.js'),
    seconds: ((c.now() - started) / 1000).toFixed(0),
  }
  const md = markdown(measured, hit, info)
  fs.mkdirSync(path.dirname(OUT), { recursive: true })
  fs.writeFileSync(OUT, md)
  console.log(`wrote ${path.relative(process.cwd(), OUT)}`)
  if (OUT === path.join(__dirname, 'TRACKING.md')) require('./readme').updateReadmeAfterBench()
}

if (ROLE !== undefined) instanceMain()
else {
  main().catch((error) => {
    console.error(error)
    process.exit(1)
  })
}
