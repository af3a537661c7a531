'use strict'

// herdcache fleet benchmark: Redis mode next to its Redis-backed peers, across
// real OS processes (`npm run bench:fleet`, or `node bench/fleet.js [--quick]`).
//
// It starts its own redis-server on a free port (`--save '' --appendonly no`,
// bound to 127.0.0.1), stops it at the end, and touches no other server.
//
// 1. Hot-key expiry stampede: PROCS processes × CALLERS callers, each caller a
//    loop of `await get('hot')` then one event-loop turn (`setImmediate`, as a
//    request arriving from a socket would give; without it a cache that
//    answers synchronously would starve timers and I/O). ttl 1 s, a 200 ms
//    loader that counts its runs. Each library runs alone against a
//    FLUSHALLed Redis: a WARM_MS warm-up (the cold start and the first
//    expiry), then the measured window. The rounds rotate the order of the
//    libraries; a figure is the median over rounds, a ratio the median of the
//    per-round ratios (drift on this shared 2-core machine hits both sides).
//    Then the same at BIG_PROCS processes × BIG_CALLERS callers (30 × 5: a
//    fleet of 30, where one XFetch draw per instance made the earliest of 30
//    refresh H(30) = 4 loader times early), for the libraries of --big-libs.
// 2. Hit throughput in one process, on a warm key, 1 and 64 in flight: the
//    method of bench/run.js (one warm-up sample, then interleaved rotated
//    samples, medians, per-round ratios, a full GC between samples).
// 3. Loader failure: PROCS processes × FAIL_CALLERS callers (a get, then
//    FAIL_GAP_MS) on one key, ttl 1 s; the backend fails from just before the
//    key expires until 3 s after expiry, then recovers. Per library: the
//    loader calls the failing backend got (fleet-wide), and how long after
//    the recovery the first fresh value was served (in the first process,
//    and once every process had one).
//
// Options:
//   --quick            one stampede round of 3 s, hit samples of 100 ms (a smoke run);
//                      writes bench/out/fleet-quick.{md,svg,png,json}
//   --only=a,b         libraries (herdcache, bento-l2, bento-l1-l2-bus, cache-manager,
//                      async-cache-dedupe, cache-aside, ioredis-raw, forever-map; and herdcache-beta0,
//                      herdcache with XFetch off, run only when named here)
//   --rounds=N         stampede rounds (default 3; quick 1)
//   --seconds=S        measured seconds per stampede run (default 10; quick 3)
//   --no-stampede      skip part 1;  --no-hits  skip part 2;  --no-failure  skip part 3
//   --no-big           skip part 1 at 30 processes
//   --big-libs=a,b     libraries of part 1 at 30 processes (default herdcache; `all`: every library of part 1)
//   --failure-only     part 3 alone (writes bench/out/fleet-failure[-quick].md unless --out)
//   --out=FILE.md      where to write the Markdown (the plot goes beside it)
//   --no-cluster       skip the Redis Cluster part (bench/cluster.js, run at the end unless
//                      --only or --failure-only; --quick is passed on)

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync, fork } = require('node:child_process')
const { performance } = require('node:perf_hooks')
const { startRedis: startRedisServer } = require('../__test__/redis-server')
const {
  argv,
  flag,
  opt,
  rejectUnknownArgs,
  gc,
  tick,
  now,
  median,
  makeValue,
  isoSeconds,
  loadAvg,
  fmtOps,
  machine,
  pkgVersion,
  addonSha,
  herdcacheBuild,
  sleep,
  race,
  timeoutError,
  HB_PER_OCT,
  HB_LOG2_MIN,
  HB_N,
  hbin,
  hval,
  quantile,
} = require('./common')

// ---------------------------------------------------------------- options

const WORKER = opt('worker') // internal: 'stampede' | 'hits'
if (!WORKER) {
  rejectUnknownArgs(
    /^--(quick|no-stampede|no-hits|no-big|big-libs=.+|no-failure|failure-only|only=.+|rounds=\d+|seconds=[\d.]+|out=.+|no-cluster)$/,
    'node bench/fleet.js [--quick] [--only=lib,lib] [--rounds=N] [--seconds=S] [--no-stampede] [--no-hits] [--no-big] [--big-libs=lib,lib|all] [--no-failure] [--failure-only] [--out=FILE.md] [--no-cluster]',
  )
}
// where herdcache is loaded from: the snapshot the orchestrator made (see snapshotHerdcache)
let HERD_MODULE = process.env.HERDCACHE_FLEET_MODULE || path.join(__dirname, '..')
const QUICK = flag('quick')
const ROUNDS = Number(opt('rounds') || (QUICK ? 1 : 3))
const SECONDS = Number(opt('seconds') || (QUICK ? 3 : 10))
const ONLY = opt('only') ? new Set(opt('only').split(',')) : null
const FAILURE_ONLY = flag('failure-only')
const OUT = opt('out')
  ? path.resolve(opt('out'))
  : path.join(
      __dirname,
      FAILURE_ONLY ? `out/fleet-failure${QUICK ? '-quick' : ''}.md` : QUICK ? 'out/fleet-quick.md' : 'FLEET.md',
    )

const PROCS = 4
// callers per process: 50 (a worker is told, for the 30-process fleet)
const CALLERS = Number(opt('callers') || 50)
const BIG_PROCS = 30
const BIG_CALLERS = 5
const BIG_LIBS = opt('big-libs') || 'herdcache'
const TTL = 1000 // ms, stampede
const LOAD_MS = 200
const WARM_MS = 1500 // cold start + first expiry, not measured
const MEASURE_MS = SECONDS * 1000
const BUCKET_MS = 100
const DRAIN_MS = 10_000 // how long a worker waits for calls still in flight at the end
const KEY = 'hot'
const STALE_AGE = TTL * 1.1 // an answer older than this is stale (herdcache writes ttl ±10 % jitter)
const SLOW_MS = 100 // a call that waited this long waited for a load

const HIT_TTL = 60_000
const HIT_SAMPLES = QUICK ? 3 : 5
const HIT_SAMPLE_MS = QUICK ? 100 : 300
const HIT_WARMUP_MS = QUICK ? 100 : 300
const HOT_CONCURRENCY = 64

// ---------------------------------------------------------------- the value

// The ~1 KB JSON object of bench/run.js, plus when it was loaded.
const VALUE_TEMPLATE = makeValue({ loadedAt: 0 })
const VALUE_BYTES = Buffer.byteLength(JSON.stringify(makeValue({ loadedAt: Date.now() })))
const ITEMS = VALUE_TEMPLATE.items.length
const isValue = (v) =>
  v !== null && typeof v === 'object' && v.id === 42 && Array.isArray(v.items) && v.items.length === ITEMS
const freshValue = () => ({ ...VALUE_TEMPLATE, loadedAt: Date.now() })

// ---------------------------------------------------------------- libraries

const LIBS = [
  {
    name: 'herdcache',
    label: 'herdcache',
    version: () => require(path.join(HERD_MODULE, 'package.json')).version,
    setup: (ttl) =>
      `\`new Cache({ redis, ttl: ${ttl} })\` (Redis mode: L1 on, hardTtl 10 × ttl, lockTtl, jitter and XFetch at their defaults), \`getOrLoad(key, loader)\``,
  },
  {
    name: 'herdcache-beta0',
    label: 'herdcache (beta: 0)',
    diagnostic: true, // stampede only; not a peer, not counted in the targets
    version: () => require(path.join(HERD_MODULE, 'package.json')).version,
    setup: () =>
      'the same with `beta: 0` (XFetch early refresh off): a diagnostic row in the stampede, to tell the lock from XFetch',
  },
  {
    name: 'bento-l2',
    label: 'bentocache (Redis L2)',
    version: () => pkgVersion('bentocache'),
    setup: (ttl) =>
      `\`bentostore().useL2Layer(redisDriver({ connection }))\`, \`ttl: ${ttl}\`, \`getOrSet({ key, factory })\` (defaults: in-process lock per key, no grace period)`,
  },
  {
    name: 'bento-l1-l2-bus',
    label: 'bentocache (L1 + L2 + bus)',
    version: () => pkgVersion('bentocache'),
    setup: (ttl) =>
      `\`bentostore().useL1Layer(memoryDriver({ maxItems: 10000 })).useL2Layer(redisDriver(…)).useBus(redisBusDriver(…))\`, \`ttl: ${ttl}\`, \`getOrSet\` (defaults otherwise)`,
  },
  {
    name: 'cache-manager',
    label: 'cache-manager + @keyv/redis',
    version: () => `${pkgVersion('cache-manager')} / @keyv/redis ${pkgVersion('@keyv/redis')}`,
    setup: (ttl) =>
      `\`createCache({ stores: [createKeyv(url)], ttl: ${ttl} })\`, \`wrap(key, fn, ${ttl})\` (in-process coalescing of the whole read-or-load)`,
  },
  {
    name: 'async-cache-dedupe',
    label: 'async-cache-dedupe (Redis)',
    version: () => pkgVersion('async-cache-dedupe'),
    setup: (ttl) =>
      `\`createCache({ ttl: ${ttl / 1000}, storage: { type: 'redis', options: { client: ioredis } } })\`, \`define('load', fn)\` (dedupe of the whole read-or-load; no stale)`,
  },
  {
    name: 'cache-aside',
    label: 'ioredis cache-aside',
    version: () => `ioredis ${pkgVersion('ioredis')}`,
    setup: (ttl) =>
      `hand-written: \`GET\`; on a miss run the loader, then \`SET key json PX ${ttl}\`; no coalescing, no lock`,
  },
  {
    name: 'ioredis-raw',
    label: 'ioredis GET + JSON.parse',
    hitsOnly: true,
    version: () => `ioredis ${pkgVersion('ioredis')}`,
    setup: () => '`JSON.parse(await redis.get(key))` on a key written once: the floor (hit throughput only)',
  },
  {
    name: 'forever-map',
    label: 'a Map that never expires',
    hitsOnly: true,
    version: () => '—',
    setup: () =>
      "`map.get(key)` of the loader's settled promise, kept for good: no TTL, no Redis, no invalidation (hit throughput only; issue 28's floor for a hit through herdcache's L1)",
  },
]
const libByName = new Map(LIBS.map((l) => [l.name, l]))
/** The floors of the hit part, measured beside the peers and never counted as one. */
const HIT_FLOORS = new Set(['ioredis-raw', 'forever-map'])
const isPeer = (name) => !name.startsWith('herdcache') && !HIT_FLOORS.has(name)

// Makes one library instance: { ready(), get(key), close(), stats?() }.
// `load()` is the loader (returns a promise of a fresh value).
async function createLib(name, { port, ttl, load }) {
  const host = '127.0.0.1'
  const url = `redis://${host}:${port}`
  switch (name) {
    case 'herdcache':
    case 'herdcache-beta0': {
      const { Cache } = require(HERD_MODULE)
      const cache = new Cache(name === 'herdcache' ? { redis: url, ttl } : { redis: url, ttl, beta: 0 })
      const loader = () => load()
      return {
        ready: () => cache.get('__ready__'),
        get: (key) => cache.getOrLoad(key, loader),
        close: () => cache.close(),
        stats: () => cache.stats(),
      }
    }
    case 'bento-l2':
    case 'bento-l1-l2-bus': {
      const { BentoCache, bentostore } = await import('bentocache')
      const { redisDriver, redisBusDriver } = await import('bentocache/drivers/redis')
      let store = bentostore()
      if (name === 'bento-l1-l2-bus') {
        const { memoryDriver } = await import('bentocache/drivers/memory')
        store = store.useL1Layer(memoryDriver({ maxItems: 10_000 }))
      }
      store = store.useL2Layer(redisDriver({ connection: { host, port } }))
      if (name === 'bento-l1-l2-bus') store = store.useBus(redisBusDriver({ connection: { host, port } }))
      const bento = new BentoCache({ default: 'c', ttl, stores: { c: store } })
      const factory = () => load()
      return {
        ready: async () => {
          await bento.has({ key: '__ready__' })
          if (name === 'bento-l1-l2-bus') await sleep(100) // let the bus subscribe
        },
        get: (key) => bento.getOrSet({ key, factory }),
        close: () => bento.disconnectAll(),
      }
    }
    case 'cache-manager': {
      const { createCache } = require('cache-manager')
      const { createKeyv } = require('@keyv/redis')
      const cache = createCache({ stores: [createKeyv(url)], ttl })
      const fn = () => load()
      return {
        ready: () => cache.get('__ready__'),
        get: (key) => cache.wrap(key, fn, ttl),
        close: () => cache.disconnect(),
      }
    }
    case 'async-cache-dedupe': {
      const { createCache } = require('async-cache-dedupe')
      const Redis = require('ioredis')
      const client = new Redis({ host, port })
      const cache = createCache({
        ttl: Math.max(1, Math.round(ttl / 1000)),
        storage: { type: 'redis', options: { client } },
      })
      cache.define('load', () => load())
      return {
        ready: () => client.ping(),
        get: (key) => cache.load(key),
        close: () => client.quit(),
      }
    }
    case 'cache-aside': {
      const Redis = require('ioredis')
      const redis = new Redis({ host, port })
      const { parse, stringify } = JSON
      return {
        ready: () => redis.ping(),
        async get(key) {
          const s = await redis.get(key)
          if (s !== null) return parse(s)
          const v = await load()
          await redis.set(key, stringify(v), 'PX', ttl)
          return v
        },
        close: () => redis.quit(),
      }
    }
    case 'forever-map': {
      const map = new Map()
      return {
        ready: async () => {},
        get(key) {
          let promise = map.get(key)
          if (promise === undefined) {
            promise = load()
            map.set(key, promise)
          }
          return promise
        },
        close: async () => map.clear(),
      }
    }
    case 'ioredis-raw': {
      const Redis = require('ioredis')
      const redis = new Redis({ host, port })
      const { parse, stringify } = JSON
      const written = new Set()
      return {
        ready: () => redis.ping(),
        async get(key) {
          if (!written.has(key)) {
            // the setup write, once
            written.add(key)
            await redis.set(key, stringify(await load()))
          }
          return parse(await redis.get(key))
        },
        close: () => redis.quit(),
      }
    }
    default:
      throw new Error(`unknown library ${name}`)
  }
}

const sparse = (h) => {
  const out = []
  for (let i = 0; i < HB_N; i++) if (h[i]) out.push(i, h[i])
  return out
}
const addSparse = (h, s) => {
  for (let j = 0; j < s.length; j += 2) h[s[j]] += s[j + 1]
}

// A worker's library, made and ready, and the orchestrator's go message (which
// answers the worker's `ready`); undefined when the library failed to start
// (the error is reported).
async function startWorkerLib(lib, options) {
  let inst
  try {
    inst = await createLib(lib, options)
    await inst.ready()
  } catch (err) {
    process.send({ type: 'error', error: String((err && err.stack) || err) })
    return undefined
  }
  const go = await new Promise((resolve) => {
    process.once('message', (m) => resolve(m))
    process.send({ type: 'ready' })
  })
  return { inst, go }
}

// ---------------------------------------------------------------- worker: stampede

async function stampedeWorker() {
  const lib = opt('lib')
  const port = Number(opt('port'))
  const proc = Number(opt('proc'))
  const total = WARM_MS + MEASURE_MS
  const nb = Math.ceil(total / BUCKET_MS) + Math.ceil(DRAIN_MS / BUCKET_MS) + 2

  const runs = [] // [startRel, endRel]
  let offset = 0 // performance.now() + offset = ms since the common start
  const rel = () => now() + offset
  const load = async () => {
    const r = [rel(), 0]
    runs.push(r)
    await sleep(LOAD_MS)
    r[1] = rel()
    return freshValue()
  }

  const started = await startWorkerLib(lib, { port, ttl: TTL, load })
  if (started === undefined) return
  const { inst, go } = started
  offset = performance.timeOrigin - go.t0
  const cpu0 = process.cpuUsage()
  while (rel() < 0) await sleep(Math.min(20, -rel()))

  const hists = new Array(nb).fill(null) // by start bucket
  const done = new Uint32Array(nb) // completions by end bucket
  const errs = new Uint32Array(nb)
  const stale = new Uint32Array(nb) // answered with a value loaded more than TTL ago
  let maxAge = 0
  let maxAgeMeasured = 0
  const errorSamples = []
  let inFlight = 0
  const get = inst.get

  async function caller() {
    for (;;) {
      const s = rel()
      if (s >= total) return
      inFlight++
      let v
      let failed = null
      try {
        v = await get(KEY)
      } catch (err) {
        failed = err
      }
      inFlight--
      const e = rel()
      const bs = Math.floor(s / BUCKET_MS)
      const be = Math.min(nb - 1, Math.floor(e / BUCKET_MS))
      let h = hists[bs]
      if (h === null) h = hists[bs] = new Uint32Array(HB_N)
      h[hbin((e - s) * 1000)]++
      if (failed !== null || !isValue(v)) {
        errs[be]++
        if (errorSamples.length < 5)
          errorSamples.push(
            failed
              ? String(failed.code || '') + ' ' + String(failed.message)
              : `unexpected value ${JSON.stringify(v).slice(0, 80)}`,
          )
      } else {
        done[be]++
        const age = Date.now() - v.loadedAt
        if (age > STALE_AGE) stale[be]++
        if (age > maxAge) maxAge = age
        if (s >= WARM_MS && age > maxAgeMeasured) maxAgeMeasured = age
      }
      await tick() // one event-loop turn between requests
    }
  }
  const callers = []
  for (let i = 0; i < CALLERS; i++) callers.push(caller())
  const drained = await race(
    Promise.all(callers).then(() => true),
    total + DRAIN_MS - rel(),
    () => false,
  )
  const cpu = process.cpuUsage(cpu0)
  let stats = null
  try {
    stats = inst.stats ? inst.stats() : null
  } catch (err) {
    stats = { error: String(err.message) }
  }
  const pending = drained ? 0 : inFlight
  let closeError = null
  try {
    await race(inst.close(), 5000, timeoutError('close() did not settle within 5 s'))
  } catch (err) {
    closeError = String(err && err.message)
  }
  process.send(
    {
      type: 'result',
      proc,
      runs,
      hists: hists.map((h) => (h ? sparse(h) : null)),
      done: Array.from(done),
      errs: Array.from(errs),
      stale: Array.from(stale),
      maxAge,
      maxAgeMeasured,
      errorSamples,
      pending,
      cpuMs: (cpu.user + cpu.system) / 1000,
      stats,
      closeError,
    },
    // Exit once the message is out: a fixed delay lost results when 30 busy
    // workers shared 2 cores (the orchestrator saw "exited without a result").
    () => process.exit(0),
  )
}

// ---------------------------------------------------------------- worker: hit throughput

const HIT_SCENARIOS = [
  {
    id: 1,
    title: 'hit, 1 in flight',
    async sample(get, key, deadline) {
      let n = 0
      let last
      do {
        for (let i = 0; i < 64; i++) last = await get(key)
        n += 64
      } while (now() < deadline)
      if (!isValue(last)) throw new Error('bad value')
      return n
    },
  },
  {
    id: 2,
    title: `hit, ${HOT_CONCURRENCY} in flight`,
    async sample(get, key, deadline) {
      async function worker() {
        let n = 0
        let last
        do {
          for (let i = 0; i < 16; i++) last = await get(key)
          n += 16
        } while (now() < deadline)
        if (!isValue(last)) throw new Error('bad value')
        return n
      }
      const ws = []
      for (let w = 0; w < HOT_CONCURRENCY; w++) ws.push(worker())
      return (await Promise.all(ws)).reduce((a, b) => a + b, 0)
    },
  },
]

async function hitsWorker() {
  const port = Number(opt('port'))
  const names = opt('libs').split(',')
  const out = { scenarios: [] }
  for (const scenario of HIT_SCENARIOS) {
    const libs = []
    for (const name of names) {
      const state = { loads: 0 }
      const load = async () => {
        state.loads++
        return freshValue()
      }
      const lib = { name, state, samples: [], error: null, key: `hot:${name}:${scenario.id}` }
      try {
        lib.inst = await createLib(name, { port, ttl: HIT_TTL, load })
        await lib.inst.ready()
        const v = await lib.inst.get(lib.key)
        if (!isValue(v)) throw new Error('bad value on the warming call')
        await lib.inst.get(lib.key)
      } catch (err) {
        lib.error = String((err && err.stack) || err)
      }
      libs.push(lib)
    }
    const live = () => libs.filter((l) => !l.error)
    const timed = async (lib, ms) => {
      gc()
      await tick()
      const t0 = now()
      const n = await scenario.sample(lib.inst.get, lib.key, t0 + ms)
      await tick()
      return { n, ms: now() - t0 }
    }
    for (const lib of live()) {
      try {
        await timed(lib, HIT_WARMUP_MS)
      } catch (err) {
        lib.error = String((err && err.stack) || err)
      }
      lib.loadsBefore = lib.state.loads
    }
    for (let round = 0; round < HIT_SAMPLES; round++) {
      const order = live()
      const rot = round % Math.max(1, order.length)
      for (const lib of order.slice(rot).concat(order.slice(0, rot))) {
        try {
          const s = await timed(lib, HIT_SAMPLE_MS)
          lib.samples[round] = (s.n / s.ms) * 1000 // ops/s
        } catch (err) {
          lib.error = String((err && err.stack) || err)
        }
      }
    }
    const rows = []
    for (const lib of libs) {
      const row = { lib: lib.name, error: lib.error }
      if (!lib.error) {
        row.samples = lib.samples
        row.opsPerSec = median(lib.samples)
        row.spread = (Math.max(...lib.samples) - Math.min(...lib.samples)) / row.opsPerSec
        row.reloads = lib.state.loads - lib.loadsBefore
        if (lib.inst.stats) {
          try {
            row.stats = lib.inst.stats()
          } catch {}
        }
      }
      try {
        await lib.inst.close()
      } catch {}
      rows.push(row)
    }
    out.scenarios.push({ id: scenario.id, title: scenario.title, rows })
  }
  process.send({ type: 'result', ...out })
  setTimeout(() => process.exit(0), 50).unref()
}

// ---------------------------------------------------------------- part 3: loader failure

const FAIL_TTL = 1000 // ms
const FAIL_MS = 3000 // the backend fails this long after the key's expiry
const FAIL_EARLY_MS = 300 // … and from this long before it (XFetch, jitter: the expiry is not one instant)
const FAIL_CALLERS = 4 // per process
const FAIL_GAP_MS = 20 // between one caller's calls
const FAIL_LOAD_MS = 20 // the backend's answer (or error) takes this long
const FAIL_WAIT_MS = 12_000 // after the recovery, how long a library may take to serve a fresh value
const FAIL_ROUNDS = QUICK ? 1 : 3

// One process of the failure scenario: callers read the key until every process saw a fresh value (or the wait
// ran out), and report the loader's calls and what they were answered with.
async function failureWorker() {
  const lib = opt('lib')
  const port = Number(opt('port'))
  const proc = Number(opt('proc'))
  const calls = [] // epoch ms of each loader call
  let failFrom = Infinity
  let recoverAt = Infinity
  const load = async () => {
    const t = Date.now()
    calls.push(t)
    await sleep(FAIL_LOAD_MS)
    if (t >= failFrom && t < recoverAt) throw new Error('backend down')
    return { ...freshValue(), loadedAt: t }
  }
  const started = await startWorkerLib(lib, { port, ttl: FAIL_TTL, load })
  if (started === undefined) return
  const { inst, go } = started
  ;({ failFrom, recoverAt } = go)
  let stop = go.until
  process.on('message', (m) => {
    if (m.type === 'stop') stop = Math.min(stop, m.at)
  })
  while (Date.now() < go.start) await sleep(Math.min(20, go.start - Date.now()))
  let firstFresh = null
  let errors = 0
  let served = 0
  let staleAfterRecovery = 0
  async function caller() {
    while (Date.now() < stop) {
      try {
        const v = await inst.get(KEY)
        served++
        const t = Date.now()
        if (v && v.loadedAt >= recoverAt) {
          if (firstFresh === null) {
            firstFresh = t
            process.send({ type: 'fresh', at: t })
          }
        } else if (t >= recoverAt) staleAfterRecovery++
      } catch {
        errors++
      }
      await sleep(FAIL_GAP_MS)
    }
  }
  await Promise.all(Array.from({ length: FAIL_CALLERS }, caller))
  await race(inst.close(), 5000, () => {})
  process.send({
    type: 'result',
    proc,
    calls,
    firstFresh,
    errors,
    served,
    staleAfterRecovery,
    loads: inst.stats ? inst.stats().loads : undefined,
  })
  setTimeout(() => process.exit(0), 20)
}

async function failureRun(srv, lib) {
  await srv.client.flushall()
  const ready = []
  let allReady
  const readyAll = new Promise((resolve) => {
    allReady = resolve
  })
  const freshSeen = new Set()
  const ps = []
  for (let p = 0; p < PROCS; p++) {
    ps.push(
      runWorker([`--worker=failure`, `--lib=${lib}`, `--port=${srv.port}`, `--proc=${p}`], (child) => {
        ready.push(child)
        child.on('message', (m) => {
          if (m.type !== 'fresh') return
          freshSeen.add(child)
          // every process has a fresh value: let them all stop soon
          if (freshSeen.size === PROCS) for (const c of ready) c.send({ type: 'stop', at: Date.now() + 200 })
        })
        if (ready.length === PROCS) allReady()
      }),
    )
  }
  const state = await race(
    Promise.race([readyAll.then(() => 'ready'), Promise.all(ps).then(() => 'exited')]),
    30_000,
    () => 'timeout',
  )
  if (state !== 'ready') {
    for (const c of ready) c.kill('SIGKILL')
    const outs = await Promise.all(ps)
    return { error: outs.map((o) => o.error).filter(Boolean)[0] || `workers not ready (${state})` }
  }
  const start = Date.now() + 300
  const expiry = start + FAIL_TTL // the first load lands at `start`
  const go = {
    type: 'go',
    start,
    failFrom: expiry - FAIL_EARLY_MS,
    recoverAt: expiry + FAIL_MS,
    until: expiry + FAIL_MS + FAIL_WAIT_MS,
  }
  for (const c of ready) c.send(go)
  const outs = await Promise.all(ps)
  const errors = outs.filter((o) => o.error).map((o) => o.error)
  if (errors.length) return { error: errors[0] }
  const procs = outs.map((o) => o.result)
  const calls = procs.flatMap((p) => p.calls)
  const failing = calls.filter((t) => t >= go.failFrom && t < go.recoverAt).length
  const fresh = procs.map((p) => p.firstFresh)
  const after = (t) => (t === null ? null : t - go.recoverAt)
  return {
    failingCalls: failing,
    callsTotal: calls.length,
    firstFreshMs:
      fresh.includes(null) && fresh.every((t) => t === null)
        ? null
        : after(Math.min(...fresh.filter((t) => t !== null))),
    allFreshMs: fresh.includes(null) ? null : after(Math.max(...fresh)),
    errorsServed: procs.reduce((n, p) => n + p.errors, 0),
    served: procs.reduce((n, p) => n + p.served, 0),
    staleAfterRecovery: procs.reduce((n, p) => n + p.staleAfterRecovery, 0),
  }
}

// Runs part 3 for every library (rounds rotate the order); medians per library.
async function failurePart(srv, wanted, odd) {
  const names = wanted.filter((l) => !l.hitsOnly && !l.diagnostic).map((l) => l.name)
  console.log(
    `\n3. loader failure: ${PROCS} processes × ${FAIL_CALLERS} callers (a get every ${FAIL_GAP_MS} ms), ttl ${FAIL_TTL} ms; the backend fails from ${FAIL_EARLY_MS} ms before expiry until ${FAIL_MS / 1000} s after it; ${FAIL_ROUNDS} round(s)`,
  )
  const runs = Object.fromEntries(names.map((n) => [n, []]))
  for (let round = 0; round < FAIL_ROUNDS; round++) {
    const rot = round % names.length
    for (const name of names.slice(rot).concat(names.slice(0, rot))) {
      const r = await failureRun(srv, name)
      runs[name].push(r)
      if (r.error) {
        console.log(`  ${name}: FAILED ${r.error.split('\n')[0]}`)
        odd.push(`part 3, ${name}: ${r.error.split('\n')[0]}`)
      } else {
        const ms = (v) => (v === null ? `> ${FAIL_WAIT_MS} ms` : `${v} ms`)
        console.log(
          `  ${name}: ${r.failingCalls} backend calls while failing, first fresh ${ms(r.firstFreshMs)} after recovery (all processes ${ms(r.allFreshMs)}), ${r.errorsServed} errors served`,
        )
      }
    }
  }
  const med = (xs) => (xs.some((x) => x === null) ? null : median(xs))
  const rows = names.map((name) => {
    const ok = runs[name].filter((r) => !r.error)
    if (!ok.length) return { lib: name, error: runs[name][0] && runs[name][0].error }
    return {
      lib: name,
      failingCalls: median(ok.map((r) => r.failingCalls)),
      firstFreshMs: med(ok.map((r) => r.firstFreshMs)),
      allFreshMs: med(ok.map((r) => r.allFreshMs)),
      errorsServed: median(ok.map((r) => r.errorsServed)),
      served: median(ok.map((r) => r.served)),
      runs: ok,
    }
  })
  return { rows, rounds: FAIL_ROUNDS }
}

function failureMarkdown(failure) {
  if (!failure) return ''
  const label = (name) => (libByName.get(name) || { label: name }).label
  const ms = (v) => (v === null || v === undefined ? `> ${FAIL_WAIT_MS / 1000} s` : `${(v / 1000).toFixed(2)} s`)
  const lines = [
    '',
    '## 3. Loader failure: calls to a failing backend, and how soon its recovery is seen',
    '',
    `${PROCS} processes × ${FAIL_CALLERS} callers, each a \`get\` then ${FAIL_GAP_MS} ms, on one key with ttl ${FAIL_TTL} ms ` +
      `(each library set up as in part 1). The backend (a ${FAIL_LOAD_MS} ms loader) fails from ${FAIL_EARLY_MS} ms before ` +
      `the key expires until ${FAIL_MS / 1000} s after, then recovers. Median of ${failure.rounds} round(s). ` +
      '"Backend calls" counts the loader calls of all processes while it fails; "first fresh" is how long after the ' +
      'recovery a caller was first served a value loaded after it (in any process; and once every process had one).',
    '',
    '| library | backend calls while failing | first fresh after recovery | every process fresh | errors to callers |',
    '|---|---:|---:|---:|---:|',
  ]
  for (const r of failure.rows) {
    if (r.error) lines.push(`| ${label(r.lib)} | failed: ${String(r.error).split('\n')[0]} | | | |`)
    else
      lines.push(
        `| ${label(r.lib)} | ${r.failingCalls} | ${ms(r.firstFreshMs)} | ${ms(r.allFreshMs)} | ${r.errorsServed} of ${r.errorsServed + r.served} calls |`,
      )
  }
  lines.push('')
  return lines.join('\n')
}

// ---------------------------------------------------------------- redis-server

/**
 * A redis-server of the bench's own (the tests' launcher, __test__/redis-server.js)
 * and an ioredis client for the bench's own commands (FLUSHALL, INFO).
 */
async function startRedis() {
  const Redis = require('ioredis')
  const server = await startRedisServer(null)
  const client = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 })
  client.on('error', () => {})
  await client.ping()
  return { port: server.port, pid: server.pid, client, server }
}

async function stopRedis(srv) {
  try {
    await race(srv.client.quit(), 2000, () => srv.client.disconnect())
  } catch {}
  await srv.server.stop()
}

const children = new Set()
process.on('exit', () => {
  for (const c of children) {
    try {
      if (c.exitCode === null) c.kill('SIGKILL')
    } catch {}
  }
})
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    console.error(`\n${sig}: stopping`)
    process.exit(130)
  })
}

// ---------------------------------------------------------------- herdcache probe

async function probeHerdcache(port) {
  let Cache
  try {
    ;({ Cache } = require(HERD_MODULE))
  } catch (err) {
    return { ok: false, why: `require('..') failed: ${String(err.message).split('\n')[0]}` }
  }
  let cache
  try {
    cache = new Cache({ redis: `redis://127.0.0.1:${port}`, ttl: 1000 })
  } catch (err) {
    return {
      ok: false,
      unsupported: err.code === 'ERR_HERDCACHE_UNSUPPORTED',
      why: `\`new Cache({ redis })\` threw ${err.code || err.name}: ${err.message}`,
    }
  }
  try {
    const v = await race(
      cache.getOrLoad('__probe__', () => ({ ok: 1 })),
      5000,
      timeoutError('getOrLoad did not settle within 5 s'),
    )
    if (!v || v.ok !== 1) throw new Error(`getOrLoad answered ${JSON.stringify(v)}`)
    const st = cache.stats()
    const missing = ['loads', 'lockAcquired', 'redisHits', 'l1Hits'].filter((k) => typeof st[k] !== 'number')
    await race(cache.close(), 5000, timeoutError('close() did not settle within 5 s'))
    return { ok: true, missingCounters: missing }
  } catch (err) {
    try {
      await race(cache.close(), 2000, () => {})
    } catch {}
    return { ok: false, why: `Redis mode constructed but failed: ${err.code || ''} ${err.message}` }
  }
}

// ---------------------------------------------------------------- orchestrator: stampede

function runWorker(args, onReady) {
  return new Promise((resolve) => {
    const child = fork(__filename, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] })
    children.add(child)
    let result = null
    let error = null
    child.on('message', (m) => {
      if (m.type === 'ready') onReady(child)
      else if (m.type === 'result') result = m
      else if (m.type === 'error') error = m.error
    })
    child.on('exit', (code, signal) => {
      children.delete(child)
      if (!result && !error) error = `worker exited (${signal || code}) without a result`
      resolve({ result, error })
    })
  })
}

async function stampedeRun(srv, lib, { procs = PROCS, callers = CALLERS } = {}) {
  await srv.client.flushall()
  await srv.client.config('RESETSTAT')
  const infoBefore = await srv.client.info('cpu')
  const ready = []
  let goResolve
  const allReady = new Promise((resolve) => {
    goResolve = resolve
  })
  const ps = []
  for (let p = 0; p < procs; p++) {
    ps.push(
      runWorker(
        [
          `--worker=stampede`,
          `--lib=${lib}`,
          `--port=${srv.port}`,
          `--proc=${p}`,
          `--callers=${callers}`,
          ...(QUICK ? ['--quick'] : []),
          `--seconds=${SECONDS}`,
        ],
        (child) => {
          ready.push(child)
          if (ready.length === procs) goResolve()
        },
      ),
    )
  }
  const failedEarly = Promise.all(ps).then(() => 'exited')
  const state = await race(Promise.race([allReady.then(() => 'ready'), failedEarly]), 30_000, () => 'timeout')
  if (state !== 'ready') {
    for (const c of children) {
      try {
        c.kill('SIGKILL')
      } catch {}
    }
    const outs = await Promise.all(ps)
    return { error: outs.map((o) => o.error).filter(Boolean)[0] || `workers not ready (${state})` }
  }
  const t0 = Date.now() + 200
  for (const c of ready) c.send({ type: 'go', t0 })
  const outs = await Promise.all(ps)
  const info = await srv.client.info()
  const num = (text, k) => Number((text.match(new RegExp(`^${k}:([\\d.]+)`, 'm')) || [])[1] || 0)
  const redisCpu =
    num(info, 'used_cpu_user') +
    num(info, 'used_cpu_sys') -
    (num(infoBefore, 'used_cpu_user') + num(infoBefore, 'used_cpu_sys'))
  const errors = outs.filter((o) => o.error).map((o) => o.error)
  if (errors.length) return { error: errors[0] }
  return { procs: outs.map((o) => o.result), redisCommands: num(info, 'total_commands_processed'), redisCpuS: redisCpu }
}

// Everything the tables and the plot need from one run of one library.
function analyzeStampede(run) {
  const total = WARM_MS + MEASURE_MS
  const nb = Math.ceil(total / BUCKET_MS)
  const w0 = WARM_MS / BUCKET_MS
  const runs = run.procs.flatMap((p) => p.runs.map((r) => ({ start: r[0], end: r[1], proc: p.proc })))
  runs.sort((a, b) => a.start - b.start)
  const measuredRuns = runs.filter((r) => r.start >= WARM_MS && r.start < total)
  // expiries: groups of loader runs that overlap in time (a run that starts
  // before the group's last one ended joins it); back-to-back refreshes are
  // separate groups, a stampede is one group
  const episodes = []
  for (const r of measuredRuns) {
    const end = r.end || Infinity // still running at the end
    const last = episodes[episodes.length - 1]
    if (last && r.start < last.end) {
      last.n++
      last.procs.add(r.proc)
      if (end > last.end) last.end = end
    } else {
      episodes.push({ first: r.start, end, n: 1, procs: new Set([r.proc]) })
    }
  }
  const measuredEpisodes = episodes
  const series = []
  const all = new Uint32Array(HB_N)
  let served = 0
  let errors = 0
  let stale = 0
  let servedTotal = 0
  for (let b = 0; b < nb; b++) {
    const h = new Uint32Array(HB_N)
    let done = 0
    let errs = 0
    let st = 0
    for (const p of run.procs) {
      if (p.hists[b]) addSparse(h, p.hists[b])
      done += p.done[b]
      errs += p.errs[b]
      st += p.stale[b]
    }
    const loads = runs.filter((r) => r.start >= b * BUCKET_MS && r.start < (b + 1) * BUCKET_MS).length
    const p99 = quantile(h, 0.99)
    let max = null
    for (let i = HB_N - 1; i >= 0; i--)
      if (h[i]) {
        max = hval(i)
        break
      }
    series.push({ t: b * BUCKET_MS, loads, p99us: p99, maxUs: max, done })
    servedTotal += done
    if (b >= w0) {
      for (let i = 0; i < HB_N; i++) all[i] += h[i]
      served += done
      errors += errs
      stale += st
    }
  }
  // calls started in the window and completed after it (the drain) count in the latency, not in served/s
  for (let b = nb; b < run.procs[0].hists.length; b++) {
    for (const p of run.procs) {
      if (p.hists[b]) addSparse(all, p.hists[b])
      errors += p.errs[b] || 0
    }
  }
  const stats = {}
  for (const p of run.procs) {
    if (!p.stats) continue
    for (const [k, v] of Object.entries(p.stats)) if (typeof v === 'number') stats[k] = (stats[k] || 0) + v
  }
  const gaps = []
  for (let k = 1; k < measuredRuns.length; k++) gaps.push(measuredRuns[k].start - measuredRuns[k - 1].start)
  return {
    medianGapMs: gaps.length ? median(gaps) : null,
    loaderRuns: measuredRuns.length,
    loaderRunsAll: runs.length,
    perTtl: measuredRuns.length / (MEASURE_MS / TTL),
    expiries: measuredEpisodes.length,
    perExpiryMean: measuredEpisodes.length
      ? measuredEpisodes.reduce((a, e) => a + e.n, 0) / measuredEpisodes.length
      : 0,
    perExpiryMax: measuredEpisodes.reduce((a, e) => Math.max(a, e.n), 0),
    perExpiryMin: measuredEpisodes.reduce((a, e) => Math.min(a, e.n), Infinity),
    procsPerExpiryMax: measuredEpisodes.reduce((a, e) => Math.max(a, e.procs.size), 0),
    servedPerSec: served / (MEASURE_MS / 1000),
    served,
    servedTotal,
    p50us: quantile(all, 0.5),
    p99us: quantile(all, 0.99),
    p999us: quantile(all, 0.999),
    slowCalls: (() => {
      let n = 0
      for (let i = 0; i < HB_N; i++) if (2 ** (i / HB_PER_OCT + HB_LOG2_MIN) >= SLOW_MS * 1000) n += all[i]
      return n
    })(),
    maxUs: (() => {
      for (let i = HB_N - 1; i >= 0; i--) if (all[i]) return hval(i)
      return null
    })(),
    errors,
    staleShare: served ? stale / served : 0,
    maxAgeMs: Math.max(...run.procs.map((p) => p.maxAgeMeasured)),
    pending: run.procs.reduce((a, p) => a + p.pending, 0),
    errorSamples: run.procs.flatMap((p) => p.errorSamples).slice(0, 5),
    closeErrors: run.procs.map((p) => p.closeError).filter(Boolean),
    cpuNodeS: run.procs.reduce((a, p) => a + p.cpuMs, 0) / 1000,
    cpuRedisS: run.redisCpuS,
    redisCmdsPerSec: run.redisCommands / ((WARM_MS + MEASURE_MS) / 1000),
    herdStats: Object.keys(stats).length ? stats : null,
    series,
  }
}

// ---------------------------------------------------------------- part 1 at 30 processes

const bigPeersText = (big) => {
  const peers = big.names.filter((n) => !n.startsWith('herdcache') && !big.rows[n].error)
  return peers.length
    ? `; peers at ${BIG_PROCS}: ${peers.map((n) => `${libByName.get(n).label} ${fmtN(big.rows[n].perTtl, 2)}`).join(', ')}`
    : ''
}

// The stampede of part 1 with BIG_PROCS processes × BIG_CALLERS callers, for
// the libraries of --big-libs among `names`: the same runs, rounds and medians.
async function bigStampede(srv, names, odd) {
  const wanted = BIG_LIBS === 'all' ? names : names.filter((n) => BIG_LIBS.split(',').includes(n))
  if (!wanted.length) return null
  const size = { procs: BIG_PROCS, callers: BIG_CALLERS }
  console.log(
    `\n1b. the same at ${BIG_PROCS} processes × ${BIG_CALLERS} callers: ${wanted.join(', ')}, ${ROUNDS} round(s)`,
  )
  const rows = {}
  const perRound = wanted.map(() => [])
  for (let round = 0; round < ROUNDS; round++) {
    const rot = round % wanted.length
    for (const n of wanted.slice(rot).concat(wanted.slice(0, rot))) {
      const run = await stampedeRun(srv, n, size)
      const a = run.error ? { error: run.error } : analyzeStampede(run)
      perRound[wanted.indexOf(n)][round] = a
      if (a.error) console.log(`  r${round + 1} ${n.padEnd(19)} FAILED: ${a.error.split('\n').slice(0, 3).join(' | ')}`)
      else
        console.log(
          `  r${round + 1} ${n.padEnd(19)} loader runs ${String(a.loaderRuns).padStart(5)} (${a.perTtl.toFixed(2)}/period, ${a.perExpiryMean.toFixed(1)}/expiry, max ${a.perExpiryMax})  served ${fmtOps(a.servedPerSec).padStart(8)}/s  p50 ${fmtMs(a.p50us).padStart(8)}  p99 ${fmtMs(a.p99us).padStart(8)}  stale ${(a.staleShare * 100).toFixed(0)} %  errors ${a.errors}${a.pending ? `  PENDING ${a.pending}` : ''}`,
        )
    }
  }
  wanted.forEach((n, i) => {
    const ok = perRound[i].filter((r) => r && !r.error)
    if (!ok.length) {
      const error = (perRound[i].find((r) => r && r.error) || { error: 'no run' }).error
      rows[n] = { error }
      odd.push(`${libByName.get(n).label} at ${BIG_PROCS} processes failed: ${error.split('\n')[0]}`)
      return
    }
    const med = (k) => median(ok.map((r) => r[k]).filter((x) => x !== null && x !== undefined))
    const row = { rounds: ok.length, failedRounds: perRound[i].length - ok.length }
    for (const k of [
      'loaderRuns',
      'perTtl',
      'perExpiryMean',
      'servedPerSec',
      'p50us',
      'p99us',
      'slowCalls',
      'staleShare',
      'errors',
    ])
      row[k] = med(k)
    row.perExpiryMax = Math.max(...ok.map((r) => r.perExpiryMax))
    row.herdStats = ok[ok.length - 1].herdStats
    row.all = perRound[i].map((a) => a && { ...a, series: undefined })
    rows[n] = row
    if (row.errors)
      odd.push(`${libByName.get(n).label} at ${BIG_PROCS} processes: ${row.errors} calls failed (median per round).`)
    const s = row.herdStats
    if (s && s.loads !== ok[ok.length - 1].loaderRunsAll)
      odd.push(
        `${libByName.get(n).label} at ${BIG_PROCS} processes: \`stats().loads\` ${s.loads} but the loader ran ${ok[ok.length - 1].loaderRunsAll} times.`,
      )
  })
  return { procs: BIG_PROCS, callers: BIG_CALLERS, names: wanted, rows }
}

// ---------------------------------------------------------------- formatting

const fmtMs = (us) => {
  if (us === null || us === undefined) return '—'
  const ms = us / 1000
  return ms >= 100
    ? `${ms.toFixed(0)} ms`
    : ms >= 10
      ? `${ms.toFixed(1)} ms`
      : ms >= 1
        ? `${ms.toFixed(2)} ms`
        : us >= 10
          ? `${us.toFixed(0)} µs`
          : `${us.toFixed(1)} µs`
}
const fmtRatio = (x) =>
  x === undefined || x === null || !Number.isFinite(x)
    ? '—'
    : `${x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x >= 0.1 ? x.toFixed(2) : x.toFixed(3)}×`
const fmtPct = (f) => {
  const x = f * 100
  return x === 0 ? '0 %' : x < 0.01 ? `${x.toPrecision(1)} %` : x < 1 ? `${x.toFixed(2)} %` : `${x.toFixed(0)} %`
}
const fmtN = (x, d = 1) => (Number.isInteger(x) ? String(x) : x.toFixed(d))

// The addon is rebuilt under the bench while herdcache is being worked on: the
// run measures a copy of the package's runtime files taken at its start
// (index.js, binding.js, lib/, the .node, package.json), so every process and
// every round loads the same build.
function snapshotHerdcache() {
  const root = path.join(__dirname, '..')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herdcache-fleet-build-'))
  for (const f of fs.readdirSync(root)) {
    if (f === 'package.json' || f === 'index.js' || f === 'binding.js' || f.endsWith('.node'))
      fs.copyFileSync(path.join(root, f), path.join(dir, f))
  }
  fs.cpSync(path.join(root, 'lib'), path.join(dir, 'lib'), { recursive: true })
  return dir
}

// ---------------------------------------------------------------- the plot (hand-written SVG)

function esc(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

function renderSvg(panels, { warmMs, totalMs, title }) {
  const W = 980
  const ML = 64
  const MR = 78
  const PH = 120 // plot height per panel
  const PT = 30 // panel title space
  const GAP = 22
  const TOP = 84
  const BOTTOM = 46
  const H = TOP + panels.length * (PT + PH + GAP) + BOTTOM
  const pw = W - ML - MR
  const x = (t) => ML + (t / totalMs) * pw
  const maxLoads = Math.max(1, ...panels.flatMap((p) => p.series.map((s) => s.loads)))
  const loadTop = 10 ** Math.ceil(Math.log10(1 + maxLoads)) // shared log scale: 1 + runs
  const ly = (n) => PH - (Math.log10(1 + n) / Math.log10(loadTop)) * PH
  const minP = 0.1 // µs
  const maxP99 = Math.max(1000, ...panels.flatMap((p) => p.series.map((s) => s.p99us || 0)))
  const maxP = 10 ** Math.ceil(Math.log10(maxP99))
  const py = (us) =>
    PH - ((Math.log10(Math.max(minP, us)) - Math.log10(minP)) / (Math.log10(maxP) - Math.log10(minP))) * PH
  const o = []
  o.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`,
  )
  o.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`)
  o.push(`<text x="${ML}" y="26" font-size="16" font-weight="bold">${esc(title)}</text>`)
  // legend
  o.push(`<rect x="${ML}" y="42" width="14" height="12" fill="#e8833a"/>`)
  o.push(`<text x="${ML + 20}" y="52">loader runs per ${BUCKET_MS} ms, all processes (left axis, log)</text>`)
  o.push(`<line x1="${ML + 340}" y1="48" x2="${ML + 370}" y2="48" stroke="#1f5fbf" stroke-width="2"/>`)
  o.push(
    `<text x="${ML + 376}" y="52">p99 latency of the calls started in that ${BUCKET_MS} ms (right axis, log)</text>`,
  )
  o.push(
    `<line x1="${ML + 340}" y1="64" x2="${ML + 370}" y2="64" stroke="#7a9cd6" stroke-width="1" stroke-dasharray="3 2"/>`,
  )
  o.push(`<text x="${ML + 376}" y="68">their max (right axis)</text>`)
  o.push(`<rect x="${ML + 560}" y="58" width="14" height="12" fill="#eeeeee" stroke="#cccccc"/>`)
  o.push(`<text x="${ML + 580}" y="68">warm-up (not counted)</text>`)
  panels.forEach((p, i) => {
    const y0 = TOP + i * (PT + PH + GAP)
    const top = y0 + PT
    o.push(
      `<text x="${ML}" y="${y0 + 18}" font-size="13"><tspan font-weight="bold">${esc(p.label)}</tspan><tspan dx="12" fill="#444">${esc(p.note || '')}</tspan></text>`,
    )
    o.push(`<g transform="translate(0 ${top})">`)
    o.push(`<rect x="${ML}" y="0" width="${pw}" height="${PH}" fill="#fafafa" stroke="#bbbbbb"/>`)
    o.push(`<rect x="${ML}" y="0" width="${x(warmMs) - ML}" height="${PH}" fill="#eeeeee"/>`)
    // x grid every second
    for (let t = 1000; t < totalMs; t += 1000)
      o.push(`<line x1="${x(t).toFixed(1)}" y1="0" x2="${x(t).toFixed(1)}" y2="${PH}" stroke="#e2e2e2"/>`)
    // left axis ticks (loader runs)
    for (let v = 1; v < loadTop * 1.01; v *= 10) {
      o.push(`<line x1="${ML - 4}" y1="${ly(v).toFixed(1)}" x2="${ML}" y2="${ly(v).toFixed(1)}" stroke="#e8833a"/>`)
      o.push(`<text x="${ML - 7}" y="${(ly(v) + 4).toFixed(1)}" text-anchor="end" fill="#b85a14">${v}</text>`)
    }
    // right axis ticks (p99)
    for (let v = minP; v <= maxP * 1.01; v *= 10) {
      const lab =
        v >= 1e6 ? `${Math.round(v / 1e6)} s` : v >= 1000 ? `${Math.round(v / 1000)} ms` : `${+v.toPrecision(1)} µs`
      o.push(
        `<line x1="${ML + pw}" y1="${py(v).toFixed(1)}" x2="${ML + pw + 4}" y2="${py(v).toFixed(1)}" stroke="#1f5fbf"/>`,
      )
      o.push(
        `<line x1="${ML}" y1="${py(v).toFixed(1)}" x2="${ML + pw}" y2="${py(v).toFixed(1)}" stroke="#1f5fbf" stroke-opacity="0.08"/>`,
      )
      o.push(`<text x="${ML + pw + 7}" y="${(py(v) + 4).toFixed(1)}" fill="#1f5fbf">${lab}</text>`)
    }
    // bars
    const bw = Math.max(1, (BUCKET_MS / totalMs) * pw - 1)
    for (const s of p.series) {
      if (!s.loads) continue
      const yy = ly(s.loads)
      o.push(
        `<rect x="${x(s.t).toFixed(1)}" y="${yy.toFixed(1)}" width="${bw.toFixed(1)}" height="${(PH - yy).toFixed(1)}" fill="#e8833a"/>`,
      )
      if (s.loads > 1)
        o.push(
          `<text x="${(x(s.t) + bw / 2).toFixed(1)}" y="${(yy - 3).toFixed(1)}" text-anchor="middle" font-size="9" fill="#b85a14">${s.loads}</text>`,
        )
    }
    // p99 and max lines (broken where no call started)
    const line = (k) => {
      let d = ''
      let pen = false
      for (const s of p.series) {
        if (s[k] === null || s[k] === undefined) {
          pen = false
          continue
        }
        d += `${pen ? 'L' : 'M'}${x(s.t + BUCKET_MS / 2).toFixed(1)} ${py(s[k]).toFixed(1)} `
        pen = true
      }
      return d.trim()
    }
    const dm = line('maxUs')
    if (dm) o.push(`<path d="${dm}" fill="none" stroke="#7a9cd6" stroke-width="1" stroke-dasharray="3 2"/>`)
    const dp = line('p99us')
    if (dp) o.push(`<path d="${dp}" fill="none" stroke="#1f5fbf" stroke-width="1.8"/>`)
    // x labels
    for (let t = 0; t <= totalMs; t += 1000)
      o.push(
        `<text x="${x(t).toFixed(1)}" y="${PH + 14}" text-anchor="middle" fill="#555" font-size="10">${t / 1000}</text>`,
      )
    o.push('</g>')
  })
  o.push(
    `<text x="${ML + pw / 2}" y="${H - 12}" text-anchor="middle" fill="#333">seconds since the load started (ttl ${TTL / 1000} s, loader ${LOAD_MS} ms, ${PROCS} processes × ${CALLERS} callers)</text>`,
  )
  o.push('</svg>')
  return o.join('\n') + '\n'
}

function toPng(svgFile) {
  const png = svgFile.replace(/\.svg$/, '.png')
  const tries = [
    ['rsvg-convert', ['-o', png, svgFile]],
    ['convert', ['-density', '110', svgFile, png]],
  ]
  for (const [cmd, args] of tries) {
    const r = spawnSync(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] })
    if (r.status === 0 && fs.existsSync(png)) return { png, tool: cmd }
  }
  return null
}

// ---------------------------------------------------------------- markdown

function methodNote(stampede, hits) {
  const parts = [
    `How to read it: the callers are closed loops with one event-loop turn (\`setImmediate\`) between calls, on ${os.cpus().length} cores shared by ${PROCS} processes and redis-server, so every library runs the machine flat out; a library that answers from memory (herdcache, bentocache's L1) is then bounded by the harness's own cost per call, and the served-per-second ratios say by how much the cache is not the bottleneck rather than its exact speed.`,
  ]
  const h = stampede && stampede.rows.herdcache
  if (h && !h.error) {
    parts.push(
      h.slowCalls === 0
        ? `herdcache's maxima of a few milliseconds are the scheduler (${PROCS} busy processes on ${os.cpus().length} cores), not loads: none of its calls waited ${SLOW_MS} ms.`
        : `${h.slowCalls} herdcache calls waited ${SLOW_MS} ms or more (median over the rounds).`,
    )
  }
  const sc1 = hits && hits.scenarios.find((x) => x.id === 1)
  if (sc1) {
    const redisOnly = sc1.rows.filter(
      (r) =>
        !r.error && ['bento-l2', 'cache-manager', 'async-cache-dedupe', 'cache-aside', 'ioredis-raw'].includes(r.lib),
    )
    if (redisOnly.length) {
      const lo = Math.min(...redisOnly.map((r) => r.opsPerSec))
      const hi = Math.max(...redisOnly.map((r) => r.opsPerSec))
      parts.push(
        `At 1 in flight a hit that reads Redis pays one loopback round trip, hence ${fmtOps(lo)}–${fmtOps(hi)} ops/s for those peers here.`,
      )
    }
  }
  return parts.join(' ')
}

function markdown(ctx) {
  const { info, stampede, hits, herd, libs } = ctx
  const L = []
  L.push('# herdcache fleet benchmark (Redis mode)')
  L.push('')
  L.push(`- date: ${info.date}`)
  L.push(
    `- machine: ${info.machine.cpu}, ${info.machine.mem}, ${info.machine.os}; load average at start ${info.loadStart}, at end ${info.machine.load}`,
  )
  L.push(
    `- node ${process.version} (V8 ${process.versions.v8}); ${info.redisVersion}, started by the bench on 127.0.0.1:${info.port} (\`--save '' --appendonly no\`), stopped at the end`,
  )
  L.push(`- command: \`${info.command}\` (took ${info.seconds} s)`)
  L.push(`- value: a ~${VALUE_BYTES}-byte JSON object (the one of bench/run.js, plus \`loadedAt\`)`)
  if (herd.ok)
    L.push(
      `- herdcache build: ${info.build || '?'}${info.buildSha ? ' (copied at the start of the run: every process loads that copy)' : ''}${info.rebuilt ? `; ${info.rebuilt}` : ''}`,
    )
  else L.push(`- **herdcache was not measured**: ${herd.why}`)
  L.push('')
  L.push('Libraries (each with its own stampede protection as it comes):')
  L.push('')
  for (const l of libs) {
    const version = l.version()
    L.push(`- **${l.label}**${version === '—' ? '' : ` ${version}`}: ${l.setup(TTL)}`)
  }
  L.push('')

  if (stampede) {
    const names = stampede.names
    L.push('## 1. Hot-key expiry stampede across processes')
    L.push('')
    L.push(
      `${PROCS} processes × ${CALLERS} callers, each a loop of \`await get('${KEY}')\` then one event-loop turn; one key, ttl ${TTL / 1000} s, a loader that takes ${LOAD_MS} ms. Each library runs alone against a FLUSHALLed Redis: ${WARM_MS / 1000} s of warm-up (the cold start and the first expiry, not counted), then ${SECONDS} s measured. ${ROUNDS > 1 ? `${ROUNDS} rounds, the order of the libraries rotated per round; every figure is the median over the rounds, and **herdcache ÷ peer** is the median of the per-round ratios of served requests per second (above 1× herdcache serves more).` : 'One round (a smoke run).'}`,
    )
    L.push('')
    L.push(
      `| library | loader runs | per TTL period | per expiry (mean / max) | served / s | herdcache ÷ peer | p50 | p99 | p99.9 | max | calls that waited ≥ ${SLOW_MS} ms | stale answers | errors |`,
    )
    L.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for (const n of names) {
      const r = stampede.rows[n]
      if (r.error) {
        L.push(
          `| ${libByName.get(n).label} | failed: ${esc(r.error.split('\n')[0]).replace(/\|/g, '\\|')} | | | | | | | | | | | |`,
        )
        continue
      }
      L.push(
        `| ${libByName.get(n).label} | ${fmtN(r.loaderRuns, 0)} | ${fmtN(r.perTtl, 2)} | ${r.perExpiryMean.toFixed(1)} / ${fmtN(r.perExpiryMax, 0)} | ${fmtOps(r.servedPerSec)} | ${n.startsWith('herdcache') ? '—' : fmtRatio(r.ratio)} | ${fmtMs(r.p50us)} | ${fmtMs(r.p99us)} | ${fmtMs(r.p999us)} | ${fmtMs(r.maxUs)} | ${fmtN(r.slowCalls, 0)} | ${fmtPct(r.staleShare)} | ${fmtN(r.errors, 0)} |`,
      )
    }
    L.push('')
    L.push(
      `*loader runs*: in the ${SECONDS} s measured, all processes; *per TTL period*: loader runs × ttl ÷ ${SECONDS} s; *per expiry*: loader runs that overlapped in time (one group per expiry or refresh; back-to-back refreshes are separate groups), mean and max over the groups; *served / s*: calls answered with the value, all processes; p50/p99/p99.9: the calls started in the window (latency histogram, ±2 %); *calls that waited ≥ ${SLOW_MS} ms*: how many calls started in the window waited for a load (the callers are a closed loop, so a stall holds back the next calls: the percentiles under-weight it, this count does not); *stale answers*: share of answers whose value was loaded more than ${STALE_AGE} ms before (ttl + the 10 % jitter herdcache may add).`,
    )
    const big = stampede.big
    if (big) {
      L.push('')
      L.push(
        `The same at **${big.procs} processes × ${big.callers} callers** (a fleet of ${big.procs}; ${big.names.length < names.length ? `${big.names.map((n) => libByName.get(n).label).join(', ')} only, the peers ran at ${PROCS} processes above` : 'every library'}):`,
      )
      L.push('')
      L.push(
        `| library | processes | loader runs | per TTL period | per expiry (mean / max) | served / s | p50 | p99 | calls that waited ≥ ${SLOW_MS} ms | stale answers | errors |`,
      )
      L.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
      for (const n of big.names) {
        const r = big.rows[n]
        const small = stampede.rows[n]
        if (small && !small.error)
          L.push(
            `| ${libByName.get(n).label} | ${PROCS} | ${fmtN(small.loaderRuns, 0)} | ${fmtN(small.perTtl, 2)} | ${small.perExpiryMean.toFixed(1)} / ${fmtN(small.perExpiryMax, 0)} | ${fmtOps(small.servedPerSec)} | ${fmtMs(small.p50us)} | ${fmtMs(small.p99us)} | ${fmtN(small.slowCalls, 0)} | ${fmtPct(small.staleShare)} | ${fmtN(small.errors, 0)} |`,
          )
        if (r.error) {
          L.push(
            `| ${libByName.get(n).label} | ${big.procs} | failed: ${esc(r.error.split('\n')[0]).replace(/\|/g, '\\|')} | | | | | | | | |`,
          )
          continue
        }
        L.push(
          `| ${libByName.get(n).label} | ${big.procs} | ${fmtN(r.loaderRuns, 0)} | ${fmtN(r.perTtl, 2)} | ${r.perExpiryMean.toFixed(1)} / ${fmtN(r.perExpiryMax, 0)} | ${fmtOps(r.servedPerSec)} | ${fmtMs(r.p50us)} | ${fmtMs(r.p99us)} | ${fmtN(r.slowCalls, 0)} | ${fmtPct(r.staleShare)} | ${fmtN(r.errors, 0)} |`,
        )
      }
      const hb = big.rows.herdcache
      if (hb && hb.herdStats)
        L.push(
          '',
          `herdcache at ${big.procs} processes, \`stats()\` summed (last round, whole run): loads ${hb.herdStats.loads}, lockAcquired ${hb.herdStats.lockAcquired}, earlyRefreshes ${hb.herdStats.earlyRefreshes} (early refresh flights started by the instances; the losers of the lock run no loader), staleServed ${hb.herdStats.staleServed}.`,
        )
    }
    L.push('')
    L.push('Costs and counters (same runs, medians):')
    L.push('')
    L.push(
      '| library | expiries | node CPU s (4 procs) | redis-server CPU s | Redis commands / s | max age of a served value |',
    )
    L.push('|---|---:|---:|---:|---:|---:|')
    for (const n of names) {
      const r = stampede.rows[n]
      if (r.error) continue
      L.push(
        `| ${libByName.get(n).label} | ${fmtN(r.expiries, 1)} | ${r.cpuNodeS.toFixed(1)} | ${r.cpuRedisS.toFixed(1)} | ${fmtOps(r.redisCmdsPerSec)} | ${fmtN(r.maxAgeMs, 0)} ms |`,
      )
    }
    for (const n of names.filter((x) => x.startsWith('herdcache'))) {
      const hr = stampede.rows[n]
      if (!hr || hr.error || !hr.herdStats) continue
      L.push('')
      const s = hr.herdStats
      const keys = [
        'loads',
        'lockAcquired',
        'redisHits',
        'l1Hits',
        'hits',
        'staleServed',
        'misses',
        'coalesced',
        'backgroundRefreshes',
        'earlyRefreshes',
        'loadErrors',
        'timeouts',
        'backgroundErrors',
      ]
      L.push(
        `${libByName.get(n).label} \`stats()\`, summed over the ${PROCS} processes (last round, whole run including warm-up): ` +
          keys
            .filter((k) => k in s)
            .map((k) => `${k} ${s[k]}`)
            .join(', ') +
          '.',
      )
      if (stampede.herdChecks[n]) L.push(stampede.herdChecks[n])
    }
    if (stampede.svg) {
      L.push('')
      L.push(`![loader runs and p99 over time, per library](${path.basename(stampede.svg)})`)
      L.push('')
      L.push(
        `The plot is of round ${stampede.plotRound + 1}: per ${BUCKET_MS} ms, the loader runs started (bars, all processes) and the p99 latency of the calls started then (line); grey is the warm-up.`,
      )
    }
    L.push('')
  }

  if (hits) {
    L.push('## 2. Hit throughput, one process')
    L.push('')
    L.push(
      `A warm key (ttl 60 s), \`await get(key)\` in a loop, 1 and ${HOT_CONCURRENCY} in flight; the method of bench/run.js: one ${HIT_WARMUP_MS} ms warm-up sample, then ${HIT_SAMPLES} interleaved rounds of one ~${HIT_SAMPLE_MS} ms sample each (order rotated), medians, a full GC between samples. **herdcache ÷ peer** is the median over rounds of herdcache ops/s ÷ peer ops/s in the same round (above 1× herdcache is faster).`,
    )
    L.push('')
    L.push('| scenario | library | ops/s | µs/op | ± | herdcache ÷ peer | loader runs in the samples |')
    L.push('|---|---|---:|---:|---:|---:|---|')
    for (const sc of hits.scenarios) {
      for (const r of sc.rows) {
        const label = libByName.get(r.lib).label
        if (r.error) {
          L.push(`| ${sc.title} | ${label} | failed | | | | ${esc(r.error.split('\n')[0]).replace(/\|/g, '\\|')} |`)
          continue
        }
        L.push(
          `| ${sc.title} | ${label} | ${fmtOps(r.opsPerSec)} | ${(1e6 / r.opsPerSec).toFixed(2)} | ${(r.spread * 100).toFixed(0)} % | ${r.lib === 'herdcache' ? '—' : fmtRatio(r.ratio)} | ${r.reloads === 0 ? 'none (all hits)' : `**${r.reloads}**`} |`,
        )
      }
    }
    L.push('')
  }

  L.push('## Against the targets')
  L.push('')
  L.push('| target | measured | met? |')
  L.push('|---|---|---|')
  for (const t of ctx.targets) L.push(`| ${t.target} | ${t.measured} | ${t.met} |`)
  L.push('')
  L.push('## What the numbers say')
  L.push('')
  L.push(ctx.summary)
  L.push('')
  L.push(ctx.methodNote)
  if (ctx.odd.length) {
    L.push('')
    L.push('## Odd things seen in this run')
    L.push('')
    for (const o of ctx.odd) L.push(`- ${o}`)
  }
  L.push('')
  return L.join('\n')
}

// ---------------------------------------------------------------- main

async function main() {
  const t0 = now()
  const info = {
    date: isoSeconds(),
    command:
      process.env.npm_lifecycle_event === 'bench:fleet'
        ? `npm run bench:fleet${argv.length ? ' -- ' + argv.join(' ') : ''}`
        : `node bench/fleet.js${argv.length ? ' ' + argv.join(' ') : ''}`,
    loadStart: loadAvg(),
  }
  const rv = spawnSync('redis-server', ['--version'], { encoding: 'utf8' })
  if (rv.status !== 0) {
    console.error('redis-server is not installed (apt-get install redis-server)')
    process.exit(1)
  }
  info.redisVersion = `redis-server ${(rv.stdout.match(/v=([\d.]+)/) || [])[1] || rv.stdout.trim()}`

  let snapshot = null
  try {
    snapshot = snapshotHerdcache()
    HERD_MODULE = process.env.HERDCACHE_FLEET_MODULE = snapshot
    info.build = herdcacheBuild(HERD_MODULE)
    info.buildSha = addonSha(snapshot)
  } catch (err) {
    console.log(`could not copy herdcache's runtime files (${err.message}); loading it from the work tree`)
  }
  const srv = await startRedis()
  info.port = srv.port
  console.log(
    `${info.redisVersion} on 127.0.0.1:${srv.port} (pid ${srv.pid}); node ${process.version}; ${os.cpus().length} CPUs`,
  )
  try {
    const herd = await probeHerdcache(srv.port)
    if (!herd.ok) console.log(`herdcache SKIPPED: ${herd.why}`)
    else {
      console.log(
        `herdcache Redis mode works (${info.build})${herd.missingCounters.length ? `; stats() lacks ${herd.missingCounters.join(', ')}` : ''}`,
      )
    }
    const wanted = LIBS.filter((l) => (!ONLY || ONLY.has(l.name)) && (!l.name.startsWith('herdcache') || herd.ok))
    const odd = []
    if (herd.ok && herd.missingCounters.length)
      odd.push(`herdcache \`stats()\` has no ${herd.missingCounters.map((k) => `\`${k}\``).join(', ')}.`)

    // ---- 1. stampede
    let stampede = null
    if (!flag('no-stampede') && !FAILURE_ONLY) {
      const names = wanted.filter((l) => !l.hitsOnly).map((l) => l.name)
      const perRound = names.map(() => [])
      console.log(
        `\n1. expiry stampede: ${PROCS} processes × ${CALLERS} callers, ttl ${TTL} ms, loader ${LOAD_MS} ms, ${WARM_MS / 1000} s warm-up + ${SECONDS} s, ${ROUNDS} round(s)`,
      )
      for (let round = 0; round < ROUNDS; round++) {
        const rot = round % names.length
        const order = names.slice(rot).concat(names.slice(0, rot))
        for (const n of order) {
          const run = await stampedeRun(srv, n)
          const a = run.error ? { error: run.error } : analyzeStampede(run)
          perRound[names.indexOf(n)][round] = a
          if (a.error)
            console.log(`  r${round + 1} ${n.padEnd(19)} FAILED: ${a.error.split('\n').slice(0, 3).join(' | ')}`)
          else
            console.log(
              `  r${round + 1} ${n.padEnd(19)} loader runs ${String(a.loaderRuns).padStart(5)} (${a.perTtl.toFixed(2)}/period, ${a.perExpiryMean.toFixed(1)}/expiry, max ${a.perExpiryMax})  served ${fmtOps(a.servedPerSec).padStart(8)}/s  p50 ${fmtMs(a.p50us).padStart(8)}  p99 ${fmtMs(a.p99us).padStart(8)}  stale ${(a.staleShare * 100).toFixed(0)} %  errors ${a.errors}${a.pending ? `  PENDING ${a.pending}` : ''}  cpu ${a.cpuNodeS.toFixed(1)}+${a.cpuRedisS.toFixed(1)} s`,
            )
        }
      }
      const rows = {}
      names.forEach((n, i) => {
        const rs = perRound[i]
        const ok = rs.filter((r) => r && !r.error)
        if (!ok.length) {
          rows[n] = { error: (rs.find((r) => r && r.error) || { error: 'no run' }).error }
          return
        }
        const med = (k) => median(ok.map((r) => r[k]).filter((x) => x !== null && x !== undefined))
        const row = { rounds: ok.length, failedRounds: rs.length - ok.length }
        for (const k of [
          'medianGapMs',
          'loaderRuns',
          'perTtl',
          'expiries',
          'perExpiryMean',
          'servedPerSec',
          'p50us',
          'p99us',
          'p999us',
          'maxUs',
          'slowCalls',
          'staleShare',
          'maxAgeMs',
          'cpuNodeS',
          'cpuRedisS',
          'redisCmdsPerSec',
          'errors',
        ])
          row[k] = med(k)
        row.perExpiryMax = Math.max(...ok.map((r) => r.perExpiryMax))
        row.pending = ok.reduce((a, r) => a + r.pending, 0)
        row.herdStats = ok[ok.length - 1].herdStats
        row.errorSamples = ok.flatMap((r) => r.errorSamples).slice(0, 3)
        row.closeErrors = ok.flatMap((r) => r.closeErrors)
        row.all = rs
        rows[n] = row
      })
      const hIdx = names.indexOf('herdcache')
      for (const [i, n] of names.entries()) {
        if (n === 'herdcache' || hIdx < 0 || rows[n].error) continue
        const ratios = []
        for (let r = 0; r < ROUNDS; r++) {
          const h = perRound[hIdx][r]
          const p = perRound[i][r]
          if (h && !h.error && p && !p.error && p.servedPerSec > 0) ratios.push(h.servedPerSec / p.servedPerSec)
        }
        rows[n].ratio = ratios.length ? median(ratios) : undefined
      }
      // herdcache's counters against what the bench saw (every round)
      const herdChecks = {}
      for (const [i, n] of names.entries()) {
        if (!n.startsWith('herdcache')) continue
        const problems = []
        let checked = 0
        perRound[i].forEach((a, r) => {
          if (!a || a.error || !a.herdStats) return
          checked++
          const s = a.herdStats
          const tag = ROUNDS > 1 ? `round ${r + 1}: ` : ''
          if (s.loads !== a.loaderRunsAll)
            problems.push(`${tag}\`stats().loads\` summed to ${s.loads} but the loader ran ${a.loaderRunsAll} times`)
          if (typeof s.lockAcquired === 'number' && s.lockAcquired < s.loads)
            problems.push(
              `${tag}\`lockAcquired\` ${s.lockAcquired} < \`loads\` ${s.loads} (loads without the Redis lock)`,
            )
          if (s.loadErrors || s.timeouts || s.backgroundErrors)
            problems.push(
              `${tag}errors: loadErrors ${s.loadErrors}, timeouts ${s.timeouts}, backgroundErrors ${s.backgroundErrors}`,
            )
        })
        if (!checked) continue
        const label = libByName.get(n).label
        herdChecks[n] = problems.length
          ? `**${label}: the counters disagree with the bench:** ${problems.join('; ')}.`
          : `${label}: the counters agree with the bench in every round (\`loads\` = the loader runs the bench counted; \`lockAcquired\` ≥ \`loads\`; no load errors or timeouts).`
        if (problems.length) odd.push(herdChecks[n])
      }
      // the plot: the last round
      const plotRound = ROUNDS - 1
      const panels = names.map((n, i) => {
        const a = perRound[i][plotRound]
        const lbl = libByName.get(n).label
        if (!a || a.error) return { label: lbl, note: 'failed', series: [] }
        return {
          label: lbl,
          note: `${a.loaderRuns} loader runs in ${SECONDS} s (${a.perExpiryMean.toFixed(1)} per expiry), ${fmtOps(a.servedPerSec)} served/s, p99 ${fmtMs(a.p99us)}`,
          series: a.series,
        }
      })
      const svgFile = !QUICK && !opt('out') ? path.join(__dirname, 'fleet.svg') : OUT.replace(/\.md$/, '') + '.svg'
      fs.mkdirSync(path.dirname(svgFile), { recursive: true })
      fs.writeFileSync(
        svgFile,
        renderSvg(panels, {
          warmMs: WARM_MS,
          totalMs: WARM_MS + MEASURE_MS,
          title: `Hot-key expiry across ${PROCS} processes: loader runs and p99 over time`,
        }),
      )
      const png = toPng(svgFile)
      console.log(
        `plot: ${path.relative(process.cwd(), svgFile)}${png ? `, ${path.relative(process.cwd(), png.png)} (${png.tool})` : ' (no SVG→PNG converter found)'}`,
      )
      stampede = { names, rows, svg: svgFile, png, plotRound, herdChecks }
      for (const n of names) {
        const r = rows[n]
        if (r.error) {
          odd.push(`${libByName.get(n).label} failed: ${r.error.split('\n')[0]}`)
          continue
        }
        if (r.failedRounds) odd.push(`${libByName.get(n).label}: ${r.failedRounds} round(s) failed.`)
        if (r.errors)
          odd.push(
            `${libByName.get(n).label}: ${r.errors} calls failed or returned a wrong value (median per round), e.g. ${r.errorSamples.map((x) => `\`${x}\``).join(', ')}.`,
          )
        if (r.pending)
          odd.push(
            `${libByName.get(n).label}: ${r.pending} calls still pending ${DRAIN_MS / 1000} s after the end of the run.`,
          )
        if (r.closeErrors.length) odd.push(`${libByName.get(n).label}: close(): ${r.closeErrors[0]}.`)
      }
      if (!flag('no-big')) stampede.big = await bigStampede(srv, names, odd)
    }

    // ---- 2. hits
    let hits = null
    if (!flag('no-hits') && !FAILURE_ONLY) {
      const names = wanted.filter((l) => !l.diagnostic).map((l) => l.name)
      console.log(`\n2. hit throughput, one process: ${names.join(', ')}`)
      await srv.client.flushall()
      const { result, error } = await runWorker(
        ['--worker=hits', `--port=${srv.port}`, `--libs=${names.join(',')}`, ...(QUICK ? ['--quick'] : [])],
        () => {},
      )
      if (error) {
        console.log(`  hit worker FAILED: ${error}`)
        odd.push(`the hit-throughput worker failed: ${error.split('\n')[0]}`)
      } else {
        hits = result
        for (const sc of hits.scenarios) {
          const h = sc.rows.find((r) => r.lib === 'herdcache' && !r.error)
          for (const r of sc.rows) {
            if (!r.error && h && r !== h) {
              const ratios = []
              for (let i = 0; i < HIT_SAMPLES; i++)
                if (h.samples[i] && r.samples[i]) ratios.push(h.samples[i] / r.samples[i])
              r.ratio = ratios.length ? median(ratios) : undefined
            }
          }
          console.log(`  ${sc.title}`)
          for (const r of sc.rows) {
            if (r.error) {
              console.log(`    ${r.lib.padEnd(19)} FAILED: ${r.error.split('\n')[0]}`)
              odd.push(`hit throughput, ${sc.title}, ${libByName.get(r.lib).label} failed: ${r.error.split('\n')[0]}`)
              continue
            }
            console.log(
              `    ${r.lib.padEnd(19)} ${fmtOps(r.opsPerSec).padStart(9)} ops/s  ±${(r.spread * 100).toFixed(0).padStart(3)} %  ${r.lib === 'herdcache' ? '' : 'h/p ' + fmtRatio(r.ratio)}  reloads ${r.reloads}`,
            )
            if (r.reloads)
              odd.push(
                `hit throughput, ${sc.title}: ${libByName.get(r.lib).label} ran its loader ${r.reloads} times during the samples of a warm key.`,
              )
          }
        }
      }
    }

    // ---- targets and summary
    const targets = []
    const sentences = []
    const peersOf = (rows, names) => names.filter((n) => !n.startsWith('herdcache') && rows[n] && !rows[n].error)
    if (stampede) {
      const { rows, names } = stampede
      const h = rows.herdcache
      const peers = peersOf(rows, names)
      const bestPeer = peers.reduce((b, n) => (!b || rows[n].servedPerSec > rows[b].servedPerSec ? n : b), null)
      const fewest = peers.reduce((b, n) => (!b || rows[n].perTtl < rows[b].perTtl ? n : b), null)
      if (h && !h.error) {
        targets.push({
          target: 'expiry: herdcache loader runs ≈ 1 per TTL period across all processes',
          measured: `${fmtN(h.perTtl, 2)} per TTL period (${h.loaderRuns} runs in ${SECONDS} s; ${h.perExpiryMean.toFixed(1)} per expiry, max ${h.perExpiryMax}); peers: ${peers.map((n) => `${libByName.get(n).label} ${fmtN(rows[n].perTtl, 2)}`).join(', ')}`,
          met:
            h.perExpiryMax <= 1 && h.perTtl <= 1.5
              ? 'yes'
              : h.perTtl <= 1.5
                ? `per period yes; per expiry max ${h.perExpiryMax}`
                : '**no**',
        })
        if (bestPeer)
          targets.push({
            target: 'expiry: served requests / s ≥ the best peer',
            measured: `${fmtOps(h.servedPerSec)}/s vs ${libByName.get(bestPeer).label} ${fmtOps(rows[bestPeer].servedPerSec)}/s (${fmtRatio(rows[bestPeer].ratio)})`,
            met: rows[bestPeer].ratio >= 1 ? 'yes' : '**no**',
          })
        const big = stampede.big && stampede.big.rows.herdcache
        if (big && !big.error)
          targets.push({
            target: `expiry at ${BIG_PROCS} processes × ${BIG_CALLERS} callers: herdcache loader runs ≤ 1.1 per TTL period (as at ${PROCS})`,
            measured: `${fmtN(big.perTtl, 2)} per TTL period (${big.loaderRuns} runs in ${SECONDS} s; ${big.perExpiryMean.toFixed(1)} per expiry, max ${big.perExpiryMax}) vs ${fmtN(h.perTtl, 2)} at ${PROCS} processes${bigPeersText(stampede.big)}`,
            met:
              big.perTtl <= 1.1 && big.perExpiryMax <= 1
                ? 'yes'
                : big.perTtl <= 1.1
                  ? `per period yes; per expiry max ${big.perExpiryMax}`
                  : '**no**',
          })
      } else {
        targets.push({
          target: 'expiry: herdcache loader runs ≈ 1 per TTL period; served / s ≥ the best peer',
          measured: 'herdcache not measured',
          met: '—',
        })
      }
      if (h && !h.error) {
        sentences.push(
          `When the hot key expires under ${PROCS} × ${CALLERS} callers, herdcache ran its loader ${fmtN(h.perTtl, 2)} times per TTL period across the ${PROCS} processes (${h.perExpiryMean.toFixed(1)} per expiry, at most ${h.perExpiryMax} at once)${peers.length ? `, against ${peers.map((n) => `${fmtN(rows[n].perTtl, 1)} for ${libByName.get(n).label}`).join(', ')}` : ''}.`,
        )
        sentences.push(
          `It served ${fmtOps(h.servedPerSec)} requests/s with p99 ${fmtMs(h.p99us)}${bestPeer ? `; the best peer, ${libByName.get(bestPeer).label}, ${fmtOps(rows[bestPeer].servedPerSec)}/s with p99 ${fmtMs(rows[bestPeer].p99us)} (herdcache ÷ it ${fmtRatio(rows[bestPeer].ratio)})` : ''}; ${fmtPct(h.staleShare)} of herdcache's answers were stale (loaded more than ${STALE_AGE} ms before; the oldest ${fmtN(h.maxAgeMs, 0)} ms).`,
        )
        const hs = h.herdStats
        if (
          hs &&
          h.perTtl > 1.5 &&
          hs.earlyRefreshes > 0.5 * hs.loads &&
          h.medianGapMs !== null &&
          h.medianGapMs < 2 * LOAD_MS
        ) {
          const b0 = rows['herdcache-beta0']
          sentences.push(
            `Those extra runs are XFetch early refreshes (${hs.earlyRefreshes} early refreshes for ${hs.loads} loads in the last round), one at a time under the lock: at ${fmtOps(h.servedPerSec / PROCS)} calls/s per process some call's draw fires within moments of every write, so the key is reloaded back to back, about once per loader time${b0 && !b0.error ? `; with \`beta: 0\` the same fleet ran ${fmtN(b0.perTtl, 2)} loads per TTL period (${b0.perExpiryMean.toFixed(1)} per expiry, at most ${b0.perExpiryMax} at once)` : ''}.`,
          )
        }
      } else if (peers.length) {
        const slow = peers.filter((n) => rows[n].p99us >= LOAD_MS * 1000 * 0.9)
        sentences.push(
          `herdcache was not measured (${herd.why}). Of the peers, ${libByName.get(fewest).label} ran the loader least (${fmtN(rows[fewest].perTtl, 2)} per TTL period, ${rows[fewest].perExpiryMean.toFixed(1)} per expiry across ${PROCS} processes); ${
            peers
              .filter((n) => rows[n].perExpiryMean >= PROCS * 0.75 && rows[n].perExpiryMean <= PROCS * 1.5)
              .map((n) => libByName.get(n).label)
              .join(', ') || 'none'
          } ran it about once per expiry per process, and the cache-aside ${fmtN(rows['cache-aside'] ? rows['cache-aside'].perExpiryMean : 0, 0)} times per expiry.`,
        )
        sentences.push(
          `${libByName.get(bestPeer).label} served the most, ${fmtOps(rows[bestPeer].servedPerSec)} requests/s; ${slow.length ? `${slow.map((n) => libByName.get(n).label).join(', ')} had a p99 at or above the ${LOAD_MS} ms loader, since no peer serves a stale value by default and every caller of an expired key waits for the reload` : 'no peer had a p99 near the loader time'}.`,
        )
      }
    }
    if (hits) {
      const sc1 = hits.scenarios.find((s) => s.id === 1)
      const sc2 = hits.scenarios.find((s) => s.id === 2)
      const get = (sc, n) => sc && sc.rows.find((r) => r.lib === n && !r.error)
      const h1 = get(sc1, 'herdcache')
      const h2 = get(sc2, 'herdcache')
      const raw1 = get(sc1, 'ioredis-raw')
      const peerRows2 = sc2 ? sc2.rows.filter((r) => !r.error && isPeer(r.lib)) : []
      const best2 = peerRows2.reduce((b, r) => (!b || r.opsPerSec > b.opsPerSec ? r : b), null)
      const peerRows1 = sc1 ? sc1.rows.filter((r) => !r.error && isPeer(r.lib)) : []
      const best1 = peerRows1.reduce((b, r) => (!b || r.opsPerSec > b.opsPerSec ? r : b), null)
      if (h2 && best2)
        targets.push({
          target: `hits, ${HOT_CONCURRENCY} in flight: ≥ the best peer`,
          measured: `${fmtOps(h2.opsPerSec)} ops/s vs ${libByName.get(best2.lib).label} ${fmtOps(best2.opsPerSec)} (${fmtRatio(best2.ratio)})`,
          met: best2.ratio >= 1 ? 'yes' : '**no**',
        })
      else
        targets.push({
          target: `hits, ${HOT_CONCURRENCY} in flight: ≥ the best peer`,
          measured: 'herdcache not measured',
          met: '—',
        })
      if (h1 && raw1)
        targets.push({
          target: 'hits, 1 in flight: ≥ raw ioredis GET + JSON.parse',
          measured: `${fmtOps(h1.opsPerSec)} ops/s vs ${fmtOps(raw1.opsPerSec)} (${fmtRatio(raw1.ratio)})`,
          met: raw1.ratio >= 1 ? 'yes' : '**no**',
        })
      else
        targets.push({
          target: 'hits, 1 in flight: ≥ raw ioredis GET + JSON.parse',
          measured: 'herdcache not measured',
          met: '—',
        })
      // Issue 28: a hit through the L1 at 0.9× or more of a `Map` that never expires, at both concurrencies.
      for (const [sc, h] of [
        [sc1, h1],
        [sc2, h2],
      ]) {
        const floor = get(sc, 'forever-map')
        const target = `${sc ? sc.title : 'hits'}: ≥ 0.9× a Map that never expires`
        targets.push(
          h && floor
            ? {
                target,
                measured: `${fmtOps(h.opsPerSec)} ops/s vs ${fmtOps(floor.opsPerSec)} (${fmtRatio(floor.ratio)})`,
                met: floor.ratio >= 0.9 ? 'yes' : '**no**',
              }
            : { target, measured: 'herdcache not measured', met: '—' },
        )
      }
      if (h1 && h2) {
        sentences.push(
          `On a warm key in one process, a herdcache hit (L1 in front of Redis) ran at ${fmtOps(h1.opsPerSec)} ops/s at 1 in flight (${raw1 ? `${fmtRatio(raw1.ratio)} raw ioredis GET + JSON.parse` : ''}${best1 ? `, ${fmtRatio(best1.ratio)} the best peer, ${libByName.get(best1.lib).label}` : ''}) and ${fmtOps(h2.opsPerSec)} ops/s at ${HOT_CONCURRENCY} in flight (${best2 ? `${fmtRatio(best2.ratio)} ${libByName.get(best2.lib).label}` : ''}).`,
        )
      } else if (best1 && best2) {
        sentences.push(
          `On a warm key in one process the fastest peer was ${libByName.get(best1.lib).label} at 1 in flight (${fmtOps(best1.opsPerSec)} ops/s${raw1 ? `; raw ioredis GET + JSON.parse ${fmtOps(raw1.opsPerSec)}` : ''}) and ${libByName.get(best2.lib).label} at ${HOT_CONCURRENCY} in flight (${fmtOps(best2.opsPerSec)} ops/s).`,
        )
      }
    }
    if (!herd.ok) sentences.push("These are the peers only: herdcache's Redis mode was not available to this run.")

    // ---- 3. loader failure
    let failure = null
    if (!flag('no-failure')) failure = await failurePart(srv, wanted, odd)

    if (herd.ok && info.buildSha) {
      const nowSha = addonSha(path.join(__dirname, '..'))
      if (nowSha !== info.buildSha) {
        info.rebuilt = `the addon in the work tree was rebuilt during the run (sha256 ${nowSha || 'missing'}… at the end); every process measured the copy taken at the start`
        console.log(`note: ${info.rebuilt}`)
      }
    }
    info.seconds = ((now() - t0) / 1000).toFixed(0)
    info.machine = machine()
    const libsUsed = wanted
    const md =
      markdown({
        info,
        stampede,
        hits,
        herd,
        libs: libsUsed,
        targets,
        summary: sentences.join(' '),
        methodNote: methodNote(stampede, hits),
        odd,
      }) + failureMarkdown(failure)
    fs.mkdirSync(path.dirname(OUT), { recursive: true })
    fs.writeFileSync(OUT, md)
    const jsonName = FAILURE_ONLY
      ? `fleet-failure${QUICK ? '-quick' : ''}.json`
      : QUICK
        ? 'fleet-quick.json'
        : 'fleet.json'
    const jsonOut = path.join(__dirname, 'out', jsonName)
    fs.mkdirSync(path.dirname(jsonOut), { recursive: true })
    fs.writeFileSync(
      jsonOut,
      JSON.stringify(
        {
          info,
          herd,
          stampede: stampede && {
            ...stampede,
            rows: Object.fromEntries(
              Object.entries(stampede.rows).map(([k, v]) => [
                k,
                { ...v, all: (v.all || []).map((a) => a && { ...a, series: undefined }) },
              ]),
            ),
          },
          hits,
          failure,
          targets,
          odd,
        },
        null,
        1,
      ),
    )
    console.log('\n' + md)
    console.log(
      `written to ${path.relative(process.cwd(), OUT)} (raw figures: ${path.relative(process.cwd(), jsonOut)})`,
    )
    // The README shows parts 1 and 2 (and the 30-process row): only a run with all of them updates it.
    const full = !ONLY && !flag('no-stampede') && !flag('no-hits') && !flag('no-big')
    if (OUT === path.join(__dirname, 'FLEET.md') && full) require('./readme').updateReadmeAfterBench()
  } finally {
    await stopRedis(srv)
    if (snapshot) fs.rmSync(snapshot, { recursive: true, force: true })
  }
  // The Redis Cluster part: its own cluster, its own results file (bench/CLUSTER.md).
  if (!flag('no-cluster') && !ONLY && !FAILURE_ONLY) {
    const cluster = spawnSync(process.execPath, [path.join(__dirname, 'cluster.js'), ...(QUICK ? ['--quick'] : [])], {
      stdio: 'inherit',
      env: { ...process.env, HERDCACHE_CLUSTER_PARENT: info.command },
    })
    if (cluster.status !== 0) process.exitCode = cluster.status || 1
  }
}

if (WORKER === 'stampede') {
  stampedeWorker().catch((err) => {
    process.send({ type: 'error', error: String((err && err.stack) || err) })
    setTimeout(() => process.exit(1), 50)
  })
} else if (WORKER === 'failure') {
  failureWorker().catch((err) => {
    process.send({ type: 'error', error: String((err && err.stack) || err) })
    setTimeout(() => process.exit(1), 50)
  })
} else if (WORKER === 'hits') {
  hitsWorker().catch((err) => {
    process.send({ type: 'error', error: String((err && err.stack) || err) })
    setTimeout(() => process.exit(1), 50)
  })
} else {
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}
