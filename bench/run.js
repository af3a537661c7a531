'use strict'

// herdcache benchmark: the embedded store next to its in-process peers, in one
// process run (`npm run bench`, or `node bench/run.js [--quick]`).
//
// Method: per scenario, every
// library gets one warm-up sample, then SAMPLES interleaved rounds of one
// ~SAMPLE_MS sample each (the order rotates per round); a library's figure is
// the median of its samples, and a ratio is the median of the per-round
// ratios, so drift on this shared 2-core machine hits both sides of a ratio
// alike. Each timed sample ends with one event-loop turn (deferred finalizer
// work is billed to the library that caused it); a full GC runs between
// samples, outside the timing.
//
// Options:
//   --quick              3 rounds of 100 ms (a smoke run); writes bench/out/quick.md
//   --only=a,b           libraries to run (herdcache,lru-cache,bentocache,cache-manager,js-map,js-map-copy)
//   --scenarios=1,4      scenarios to run (1..5)
//   --out=FILE           where to write the Markdown (default bench/RESULTS.md; quick: bench/out/quick.md)
//
// Without --only / --scenarios it then runs bench/nest.js (a cached Nest
// route: herdcache/nest next to @nestjs/cache-manager), which writes bench/NEST.md,
// and bench/memory.js (bytes per cached entry), which appends its section to
// the Markdown this run wrote.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const util = require('node:util')
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
  herdcacheBuild,
  memoryPeers,
} = require('./common')

// ---------------------------------------------------------------- options

rejectUnknownArgs(
  /^--(quick|only=.+|scenarios=.+|out=.+|baseline=.+)$/,
  'node bench/run.js [--quick] [--only=lib,lib] [--scenarios=1,2] [--out=FILE] [--baseline=DIR]',
)
const QUICK = flag('quick')
const SAMPLES = QUICK ? 3 : 5
const SAMPLE_MS = QUICK ? 100 : 300
const WARMUP_MS = QUICK ? 100 : 300
const ONLY = opt('only') ? new Set(opt('only').split(',')) : null
const SCENARIOS = opt('scenarios') ? new Set(opt('scenarios').split(',').map(Number)) : null
// --baseline=DIR: another checkout of herdcache (with its addon built), run as
// the library `herdcache-baseline` next to this one: a before/after in one run.
// Only for large differences: the two share this harness's call sites, whose
// inline caches then favour one of them (an A/A run of two copies of one
// build differed by 16 % on the hit). For small ones, run each checkout's
// bench in its own process, alternating.
const BASELINE = opt('baseline') ? path.resolve(opt('baseline')) : null
const OUT = opt('out') ? path.resolve(opt('out')) : path.join(__dirname, QUICK ? 'out/quick.md' : 'RESULTS.md')

const TTL = 60_000
const MAX_ENTRIES = 10_000 // herdcache's default maxEntries; the bounded peers get the same
const BURST = 1000
const HOT_CONCURRENCY = 64
const DISTINCT_KEYS = 10_000

// ---------------------------------------------------------------- the value

// A ~1 KB JSON object: what a loader returns in every scenario.
const VALUE = makeValue()
const VALUE_BYTES = Buffer.byteLength(JSON.stringify(VALUE))
const isValue = (v) => v !== null && typeof v === 'object' && v.id === 42 && v.items.length === VALUE.items.length

// Deterministic PRNG (mulberry32) for the distinct-key order.
const { mulberry32 } = require('../scripts/prng')

// ---------------------------------------------------------------- libraries

// Each library is `create(loader) -> instance` where instance.get(key) returns
// a Promise of the value, loading with `loader(key)` (sync value or promise) on
// a miss, and coalescing concurrent misses of one key.

let herdcacheModule = null
let herdcacheError = null
try {
  herdcacheModule = require('..')
} catch (err) {
  herdcacheError = err
}

// The floor: a hand-written Map<key, Promise> coalescer over a Map store
// (with a TTL check, no eviction, values kept as object references).
class JsMapCoalescer {
  constructor(ttl) {
    this.ttl = ttl
    this.store = new Map()
    this.flights = new Map()
  }

  getOrLoad(key, loader) {
    const e = this.store.get(key)
    if (e !== undefined && e.exp > Date.now()) return Promise.resolve(e.v)
    let p = this.flights.get(key)
    if (p !== undefined) return p
    p = new Promise((resolve) => resolve(loader(key))).then(
      (v) => {
        this.flights.delete(key)
        this.store.set(key, { v, exp: Date.now() + this.ttl })
        return v
      },
      (err) => {
        this.flights.delete(key)
        throw err
      },
    )
    this.flights.set(key, p)
    return p
  }

  clear() {
    this.store.clear()
  }
}

// The same floor with herdcache's value semantics (js-map-copy): one JSON copy
// per load (`JSON.parse(JSON.stringify(v))`), shared by the flight's waiters
// and by every later hit.
const copyAsync = (v) => (v instanceof Promise ? v.then(jsonCopy) : jsonCopy(v))
const jsonCopy = (v) => JSON.parse(JSON.stringify(v))

async function loadLibraries() {
  const libs = []

  const herdcacheLib = (name, { Cache }, setup) => ({
    name,
    version: (() => {
      try {
        return require('../package.json').version
      } catch {
        return '?'
      }
    })(),
    setup,
    create(loader) {
      const cache = new Cache({ ttl: TTL })
      const l = ({ key }) => loader(key)
      return {
        cache,
        get: (key) => cache.getOrLoad(key, l),
        clear: () => cache.clear(),
        close: () => cache.close(),
      }
    },
  })
  if (herdcacheModule) {
    libs.push(herdcacheLib('herdcache', herdcacheModule, '`new Cache({ ttl: 60_000 })`, `getOrLoad(key, loader)`'))
  }
  if (BASELINE) {
    libs.push(herdcacheLib('herdcache-baseline', require(BASELINE), `the same, from the checkout at ${BASELINE}`))
  }
  const { LRUCache } = require('lru-cache')
  libs.push({
    name: 'lru-cache',
    version: pkgVersion('lru-cache'),
    setup: `\`new LRUCache({ max: ${MAX_ENTRIES}, ttl: 60_000, fetchMethod })\`, \`fetch(key)\``,
    create(loader) {
      const cache = new LRUCache({ max: MAX_ENTRIES, ttl: TTL, fetchMethod: (key) => loader(key) })
      return { cache, get: (key) => cache.fetch(key), clear: () => cache.clear() }
    },
  })

  const peers = await memoryPeers()
  libs.push({
    name: 'bentocache',
    version: peers.bentocache.version,
    setup: peers.bentocache.setup(MAX_ENTRIES),
    create(loader) {
      const bento = peers.bentocache.create({ ttl: TTL, maxItems: MAX_ENTRIES })
      return {
        cache: bento,
        get: (key) => bento.getOrSet({ key, factory: () => loader(key) }),
        clear: () => bento.clear(),
        close: () => bento.disconnectAll(),
      }
    },
  })

  libs.push({
    name: 'cache-manager',
    version: peers['cache-manager'].version,
    setup: peers['cache-manager'].setup(TTL),
    create(loader) {
      const cache = peers['cache-manager'].create({ ttl: TTL })
      return {
        cache,
        get: (key) => cache.wrap(key, () => loader(key), TTL),
        clear: () => cache.clear(),
        close: () => cache.disconnect(),
      }
    },
  })

  libs.push({
    name: 'js-map',
    version: '—',
    setup:
      'hand-written `Map<key, Promise>` coalescer over a `Map` (TTL check, no eviction, object references): the floor',
    create(loader) {
      const c = new JsMapCoalescer(TTL)
      return { cache: c, get: (key) => c.getOrLoad(key, loader), clear: () => c.clear() }
    },
  })

  libs.push({
    name: 'js-map-copy',
    version: '—',
    setup:
      "the same floor making one JSON copy per load (`JSON.parse(JSON.stringify(v))`), shared by every hit: herdcache's value semantics",
    create(loader) {
      const c = new JsMapCoalescer(TTL)
      const copying = (key) => copyAsync(loader(key))
      return { cache: c, get: (key) => c.getOrLoad(key, copying), clear: () => c.clear() }
    },
  })

  return ONLY ? libs.filter((l) => ONLY.has(l.name)) : libs
}

// ---------------------------------------------------------------- scenarios

// A scenario: loaderFor(state) makes the loader (state.loads counts its runs),
// prepare(inst) warms the instance, sample(inst, state, deadline) runs until
// the deadline and returns the number of getOrLoad calls made.

const hotLoader = (state) => (key) => {
  state.loads++
  return Promise.resolve(VALUE)
}

async function checkedGet(inst, key) {
  const v = await inst.get(key)
  if (!isValue(v)) throw new Error(`unexpected value for ${key}: ${util.inspect(v, { depth: 1 })}`)
  return v
}

const scenarios = [
  {
    id: 1,
    title: 'hit, 1 in flight',
    what: "`await get('hot')` in a loop on a warm key",
    loaderFor: hotLoader,
    hitPath: true,
    async prepare(inst) {
      await checkedGet(inst, 'hot')
      return 1
    },
    async sample(inst, state, deadline) {
      const get = inst.get
      let n = 0
      let last
      do {
        for (let i = 0; i < 256; i++) last = await get('hot')
        n += 256
      } while (now() < deadline)
      if (!isValue(last)) throw new Error('bad value')
      return n
    },
  },
  {
    id: 2,
    title: `hit, ${HOT_CONCURRENCY} in flight`,
    what: `${HOT_CONCURRENCY} async loops of \`await get('hot')\` on one warm key`,
    loaderFor: hotLoader,
    hitPath: true,
    async prepare(inst) {
      await checkedGet(inst, 'hot')
      return 1
    },
    async sample(inst, state, deadline) {
      const get = inst.get
      async function worker() {
        let n = 0
        let last
        do {
          for (let i = 0; i < 64; i++) last = await get('hot')
          n += 64
        } while (now() < deadline)
        if (!isValue(last)) throw new Error('bad value')
        return n
      }
      const workers = []
      for (let w = 0; w < HOT_CONCURRENCY; w++) workers.push(worker())
      const counts = await Promise.all(workers)
      return counts.reduce((a, b) => a + b, 0)
    },
  },
  {
    id: 3,
    title: `hit, ${DISTINCT_KEYS.toLocaleString('en-US')} keys, 1 in flight`,
    what: `\`await get(key)\` over ${DISTINCT_KEYS} warm keys in a random (seeded) order`,
    loaderFor: hotLoader,
    hitPath: true,
    keys: null,
    order: null,
    init() {
      this.keys = Array.from({ length: DISTINCT_KEYS }, (_, i) => `item:${i}`)
      const rnd = mulberry32(0x5eed)
      this.order = new Uint16Array(1 << 16)
      for (let i = 0; i < this.order.length; i++) this.order[i] = Math.floor(rnd() * DISTINCT_KEYS)
    },
    async prepare(inst) {
      for (const k of this.keys) await checkedGet(inst, k)
      return this.keys.length
    },
    async sample(inst, state, deadline) {
      const get = inst.get
      const keys = this.keys
      const order = this.order
      const mask = order.length - 1
      let pos = 0
      let n = 0
      let last
      do {
        for (let i = 0; i < 256; i++) last = await get(keys[order[pos++ & mask]])
        n += 256
      } while (now() < deadline)
      if (!isValue(last)) throw new Error('bad value')
      return n
    },
  },
  {
    id: 4,
    title: `burst: ${BURST} callers, 1 cold key`,
    what: `${BURST} concurrent \`get(key)\` on a new cold key, loader resolves after \`setImmediate\`; per call, including the one load`,
    loaderFor: (state) => (key) => {
      state.loads++
      return new Promise((resolve) => setImmediate(resolve, VALUE))
    },
    clearBetweenSamples: true,
    async prepare() {
      return 0
    },
    async sample(inst, state, deadline) {
      const get = inst.get
      const ps = new Array(BURST)
      let n = 0
      do {
        const key = `burst:${++state.seq}`
        const before = state.loads
        for (let i = 0; i < BURST; i++) ps[i] = get(key)
        const vals = await Promise.all(ps)
        const runs = state.loads - before
        state.bursts++
        if (runs < state.minRuns) state.minRuns = runs
        if (runs > state.maxRuns) state.maxRuns = runs
        if (!isValue(vals[0]) || !isValue(vals[BURST - 1])) throw new Error('bad value')
        n += BURST
      } while (now() < deadline)
      return n
    },
  },
  {
    id: 5,
    title: 'cold distinct keys, 1 in flight',
    what: '`await get(newKey)` with a new key per call (the leader: one load each; the loader returns `Promise.resolve(value)`)',
    loaderFor: hotLoader,
    clearBetweenSamples: true,
    async prepare() {
      return 0
    },
    async sample(inst, state, deadline) {
      const get = inst.get
      let n = 0
      let last
      let seq = state.seq
      do {
        for (let i = 0; i < 256; i++) last = await get(`cold:${++seq}`)
        n += 256
      } while (now() < deadline)
      state.seq = seq
      if (!isValue(last)) throw new Error('bad value')
      return n
    },
  },
].filter((s) => !SCENARIOS || SCENARIOS.has(s.id))

// ---------------------------------------------------------------- harness

async function timedSample(scenario, lib, deadlineMs) {
  gc()
  await tick()
  const t0 = now()
  const ops = await scenario.sample(lib.inst, lib.state, t0 + deadlineMs)
  await tick() // bill one loop turn (deferred finalizers, timers) to this library
  const t1 = now()
  lib.state.calls += ops
  return { ops, ms: t1 - t0 }
}

async function runScenario(scenario, libDefs) {
  if (scenario.init) scenario.init()
  const libs = libDefs.map((def) => {
    const state = { loads: 0, calls: 0, seq: 0, bursts: 0, minRuns: Infinity, maxRuns: 0 }
    const inst = def.create(scenario.loaderFor(state))
    return { def, state, inst, samples: [], error: null }
  })
  for (const lib of libs) {
    try {
      lib.state.calls += await scenario.prepare(lib.inst)
    } catch (err) {
      lib.error = err
    }
  }
  const live = () => libs.filter((l) => !l.error)
  const clearAll = async () => {
    if (!scenario.clearBetweenSamples) return
    for (const lib of live()) await lib.inst.clear()
  }

  // warm-up: one sample each, not recorded
  await clearAll()
  for (const lib of live()) {
    try {
      await timedSample(scenario, lib, WARMUP_MS)
    } catch (err) {
      lib.error = err
    }
  }
  for (const lib of live()) {
    lib.loadsBefore = lib.state.loads
    lib.state.bursts = 0
    lib.state.minRuns = Infinity
    lib.state.maxRuns = 0
  }
  let totalOps = new Map(libs.map((l) => [l, 0]))

  for (let round = 0; round < SAMPLES; round++) {
    await clearAll()
    const order = live()
    const rot = round % order.length
    const rotated = order.slice(rot).concat(order.slice(0, rot))
    for (const lib of rotated) {
      try {
        const s = await timedSample(scenario, lib, SAMPLE_MS)
        lib.samples[round] = (s.ms * 1000) / s.ops // µs per op
        totalOps.set(lib, totalOps.get(lib) + s.ops)
      } catch (err) {
        lib.error = err
      }
    }
  }

  const herd = libs.find((l) => l.def.name === 'herdcache' && !l.error)
  const rows = libs.map((lib) => {
    const row = { lib: lib.def.name, error: lib.error }
    if (lib.error) return row
    row.usPerOp = median(lib.samples)
    row.opsPerSec = 1e6 / row.usPerOp
    row.spread = (Math.max(...lib.samples) - Math.min(...lib.samples)) / row.usPerOp
    row.samples = lib.samples
    row.ops = totalOps.get(lib)
    row.loadsInSamples = lib.state.loads - lib.loadsBefore
    row.bursts = lib.state.bursts
    row.minRuns = lib.state.minRuns
    row.maxRuns = lib.state.maxRuns
    if (herd && herd !== lib) {
      const ratios = []
      for (let r = 0; r < SAMPLES; r++) {
        if (herd.samples[r] !== undefined && lib.samples[r] !== undefined) ratios.push(herd.samples[r] / lib.samples[r])
      }
      row.ratio = ratios.length ? median(ratios) : undefined
    }
    if (scenario.hitPath)
      row.loadsNote = row.loadsInSamples === 0 ? 'none (all hits)' : `${row.loadsInSamples} reloads during hits!`
    else if (scenario.id === 4)
      row.loadsNote =
        row.minRuns === 1 && row.maxRuns === 1
          ? `1 per burst (${row.bursts} bursts)`
          : `**${row.minRuns === row.maxRuns ? row.minRuns : `${row.minRuns}–${row.maxRuns}`} per burst** (${row.bursts} bursts)`
    else if (scenario.id === 5)
      row.loadsNote = row.loadsInSamples === row.ops ? '1 per call' : `${row.loadsInSamples} for ${row.ops} calls`
    return row
  })

  // herdcache's own counters must agree with what the bench saw
  for (const lib of libs) {
    const row = rows.find((r) => r.lib === lib.def.name)
    if (lib.error || !lib.inst.cache || typeof lib.inst.cache.stats !== 'function' || lib.def.name !== 'herdcache')
      continue
    const st = lib.inst.cache.stats()
    const counted = st.hits + st.staleServed + st.negativeHits + st.misses + st.coalesced
    const problems = []
    if (st.loads !== lib.state.loads)
      problems.push(`stats().loads ${st.loads} but the loader ran ${lib.state.loads} times`)
    if (counted !== lib.state.calls)
      problems.push(
        `stats() counts ${counted} calls (hits ${st.hits}, stale ${st.staleServed}, negative ${st.negativeHits}, misses ${st.misses}, coalesced ${st.coalesced}) but the bench made ${lib.state.calls}`,
      )
    if (st.loadErrors || st.timeouts || st.backgroundErrors)
      problems.push(
        `errors: loadErrors ${st.loadErrors}, timeouts ${st.timeouts}, backgroundErrors ${st.backgroundErrors}`,
      )
    if (scenario.hitPath && (st.staleServed || st.backgroundRefreshes))
      problems.push(`stale ${st.staleServed}, background refreshes ${st.backgroundRefreshes} on a hit path`)
    if (scenario.id === 4 && st.coalesced !== st.misses * (BURST - 1))
      problems.push(`coalesced ${st.coalesced} ≠ misses ${st.misses} × ${BURST - 1}`)
    row.statsCheck = problems.length
      ? problems.join('; ')
      : `ok (hits ${st.hits}, misses ${st.misses}, coalesced ${st.coalesced}, loads ${st.loads}, evictions ${st.evictions})`
    row.statsOk = problems.length === 0
  }

  for (const lib of libs) {
    if (lib.inst.close) {
      try {
        await lib.inst.close()
      } catch {}
    }
  }
  return rows
}

// ---------------------------------------------------------------- sync-hit check

// Is a hit answered synchronously? On a warm key, getOrLoad must return a
// promise that is already fulfilled when the call returns (util.inspect reads
// the promise state synchronously), and its reaction must run before that of a
// `Promise.resolve()` chained after it (it is queued at `.then` time, so no
// thread hop, no extra microtask turns).
async function syncHitProbe(def) {
  const state = { loads: 0 }
  const inst = def.create(hotLoader(state))
  await inst.get('hot')
  await tick()
  const out = { lib: def.name }
  const p = inst.get('hot')
  out.nativePromise = p instanceof Promise
  out.settledOnReturn = !/<pending>/.test(util.inspect(p, { depth: 0 }))
  if (def.name === 'herdcache' && typeof inst.cache.stats === 'function') {
    // counted synchronously too (stats() is synchronous)
    const before = inst.cache.stats().hits
    inst.get('hot')
    out.hitCountedSync = inst.cache.stats().hits === before + 1
  }
  const order = []
  p.then(() => order.push('lib'))
  Promise.resolve().then(() => order.push('Promise.resolve()'))
  // how many microtask turns until it settles
  let turns = -1
  let settled = false
  p.then(() => {
    settled = true
  })
  for (let i = 0; i < 50 && !settled; i++) {
    turns = i
    await null
  }
  await tick()
  out.first = order[0]
  out.microtaskTurns = settled ? turns : 'not within 50'
  out.value = isValue(await p)
  const a = await inst.get('hot')
  const b = await inst.get('hot')
  out.sameObjectOnHits = a === b // every hit hands out one shared object
  out.loaderObject = a === VALUE // ... which is the loader's own object (no copy)
  out.loads = state.loads
  if (inst.close) {
    try {
      await inst.close()
    } catch {}
  }
  return out
}

// ---------------------------------------------------------------- output

const fmtUs = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x >= 1 ? x.toFixed(2) : x.toFixed(3))
const fmtTimes = (x) => (x < 1 ? `${(1 / x).toFixed(1)}× faster` : `${x.toFixed(1)}× slower`)
const fmtRatio = (x) => (x === undefined ? '—' : `${x >= 10 ? x.toFixed(1) : x >= 0.1 ? x.toFixed(2) : x.toFixed(3)}×`)

function summarize(results, probes) {
  const get = (id, lib) => {
    const r = results.find((x) => x.scenario.id === id)
    return r && r.rows.find((x) => x.lib === lib && !x.error)
  }
  const sentences = []
  const h1 = get(1, 'herdcache')
  if (!h1 && !results.some((r) => r.rows.some((x) => x.lib === 'herdcache'))) {
    return herdcacheError
      ? 'herdcache could not be loaded in this run, so only the peers were measured; see the note above.'
      : 'herdcache was not part of this run (`--only`).'
  }
  const hp = probes.find((p) => p.lib === 'herdcache' && !p.error)
  const syncHit = hp && hp.settledOnReturn && hp.first === 'lib'
  if (h1) {
    const floor = get(1, 'js-map')
    const peers = ['lru-cache', 'bentocache', 'cache-manager'].map((n) => get(1, n)).filter(Boolean)
    const faster = peers.filter((p) => p.ratio < 1).map((p) => `${p.lib} (${fmtTimes(p.ratio)})`)
    const slower = peers.filter((p) => p.ratio >= 1).map((p) => `${p.lib} (${fmtTimes(p.ratio)})`)
    let s = `A herdcache hit ${syncHit ? 'is synchronous (the promise is already fulfilled on return) and ' : ''}costs ${fmtUs(h1.usPerOp)} µs at one in flight`
    const h2 = get(2, 'herdcache')
    const h3 = get(3, 'herdcache')
    if (h2 && h3) s += ` (${fmtUs(h2.usPerOp)} µs at 64, ${fmtUs(h3.usPerOp)} µs over 10 000 keys)`
    if (floor) s += `, ${fmtRatio(floor.ratio)} the pure-JS floor`
    s += '; '
    if (faster.length) s += `it is faster than ${faster.join(' and ')}`
    if (faster.length && slower.length) s += ' and slower than '
    else if (slower.length) s += 'it is slower than '
    if (slower.length) s += slower.join(' and ')
    sentences.push(s + '.')
  } else if (hp) {
    sentences.push(
      syncHit
        ? 'A herdcache hit is synchronous (the promise is already fulfilled on return).'
        : '**A herdcache hit is not answered synchronously.**',
    )
  }
  const b = results.find((x) => x.scenario.id === 4)
  if (b) {
    const hb = b.rows.find((x) => x.lib === 'herdcache' && !x.error)
    const more = b.rows.filter((x) => !x.error && x.maxRuns > 1).map((x) => `${x.lib} (up to ${x.maxRuns})`)
    let s = 'In the 1 000-caller burst'
    s += more.length
      ? ` the loader ran more than once per burst for ${more.join(', ')}, once for the others`
      : ' every library ran the loader exactly once per burst'
    if (hb) {
      const f = b.rows.find((x) => x.lib === 'js-map' && !x.error)
      const l = b.rows.find((x) => x.lib === 'lru-cache' && !x.error)
      s +=
        `; a herdcache caller costs ${fmtUs(hb.usPerOp)} µs` +
        (f ? `, ${fmtRatio(f.ratio)} the floor` : '') +
        (l ? ` and ${fmtRatio(l.ratio)} lru-cache` : '')
    }
    const c = results.find((x) => x.scenario.id === 5)
    const hc = c && c.rows.find((x) => x.lib === 'herdcache' && !x.error)
    if (hc) {
      const f = c.rows.find((x) => x.lib === 'js-map-copy' && !x.error)
      s +=
        `, and a cold key (the leader) ${fmtUs(hc.usPerOp)} µs` +
        (f ? `, ${fmtRatio(f.ratio)} js-map-copy, which makes the same JSON copy of the value` : '')
    }
    sentences.push(s + '.')
  }
  return sentences.join(' ')
}

// What a hit hands out, as probed: that decides what a hit costs.
function semanticsNote(probes) {
  const ok = probes.filter((p) => !p.error)
  const names = (f) => ok.filter(f).map((p) => p.lib)
  const list = (xs) => (xs.length ? xs.join(', ') : 'none')
  const same = names((p) => p.sameObjectOnHits && p.loaderObject)
  const shared = names((p) => p.sameObjectOnHits && !p.loaderObject)
  const fresh = names((p) => !p.sameObjectOnHits)
  return (
    'Read the columns with what a hit hands out (probed on a warm key): ' +
    `the loader's own object, no copy: ${list(same)}; ` +
    `one shared copy made once per load (\`JSON.parse(JSON.stringify(v))\`), no work per hit: ${list(shared)}; ` +
    `a new object per hit (the value is stored as JSON text and parsed on every hit): ${list(fresh)}. ` +
    "herdcache, lru-cache and bentocache are bounded to 10 000 entries (in scenario 5 they evict once a sample passes 10 000 new keys); cache-manager's Keyv `Map` and the js-map floors are unbounded. " +
    'bentocache and cache-manager take a closure per call (`factory`, `fn`), as their APIs ask; the others a loader fixed once. ' +
    'In scenarios 4 and 5 every store is cleared between samples, outside the timing.'
  )
}

function markdown({ results, probes, libs, info }) {
  const L = []
  L.push('# herdcache benchmark')
  L.push('')
  L.push(`- date: ${info.date}`)
  L.push(
    `- machine: ${info.machine.cpu}, ${info.machine.mem}, ${info.machine.os}; load average at start ${info.loadStart}, at end ${info.machine.load}`,
  )
  L.push(`- node ${process.version} (V8 ${process.versions.v8}, napi ${process.versions.napi})`)
  L.push(
    `- command: \`${info.command}\` (${SAMPLES} interleaved samples of ~${SAMPLE_MS} ms per library after one ${WARMUP_MS} ms warm-up; median; took ${info.seconds} s)`,
  )
  L.push(`- value: a ${VALUE_BYTES}-byte JSON object; ttl 60 s everywhere`)
  if (info.build) L.push(`- herdcache build: ${info.build}`)
  if (herdcacheError)
    L.push(
      `- **herdcache was not measured**: \`require('..')\` failed: ${String(herdcacheError.message).split('\n')[0]}`,
    )
  L.push('')
  L.push('Libraries:')
  L.push('')
  for (const l of libs) L.push(`- **${l.name}**${l.version !== '—' ? ` ${l.version}` : ''}: ${l.setup}`)
  L.push('')
  L.push('## Results')
  L.push('')
  L.push('µs/op and ops/s are medians over the samples; ± is the spread (max − min) of the samples over the median.')
  L.push(
    '**herdcache ÷ peer** is the median over rounds of herdcache µs/op ÷ peer µs/op, both taken in the same round: below 1× herdcache is faster, above 1× slower.',
  )
  L.push('')
  L.push('| scenario | library | ops/s | µs/op | ± | herdcache ÷ peer | loader runs in the timed samples |')
  L.push('|---|---|---:|---:|---:|---:|---|')
  for (const { scenario, rows } of results) {
    for (const r of rows) {
      const sc = `${scenario.id}. ${scenario.title}`
      if (r.error) {
        L.push(`| ${sc} | ${r.lib} | failed | | | | ${String(r.error.message).split('\n')[0].replace(/\|/g, '\\|')} |`)
        continue
      }
      L.push(
        `| ${sc} | ${r.lib} | ${fmtOps(r.opsPerSec)} | ${fmtUs(r.usPerOp)} | ${(r.spread * 100).toFixed(0)} % | ${r.lib === 'herdcache' ? '—' : fmtRatio(r.ratio)} | ${r.loadsNote} |`,
      )
    }
  }
  const checks = results.flatMap(({ scenario, rows }) => rows.filter((r) => r.statsCheck).map((r) => [scenario, r]))
  if (checks.length) {
    L.push('')
    if (checks.every(([, r]) => r.statsOk)) {
      L.push(
        "herdcache's own `stats()` agreed with the bench in every scenario (calls counted once each as hit/miss/coalesced, `loads` equal to the loader runs, no errors, no stale serves; in the burst, 999 coalesced per miss).",
      )
    } else {
      for (const [scenario, r] of checks)
        L.push(`- herdcache \`stats()\` in scenario ${scenario.id}: ${r.statsOk ? 'ok' : '**' + r.statsCheck + '**'}`)
    }
  }
  L.push('')
  L.push('Scenarios:')
  L.push('')
  for (const { scenario } of results) L.push(`${scenario.id}. ${scenario.what}.`)
  L.push('')
  L.push(semanticsNote(probes))
  L.push('')
  L.push('## Is a hit synchronous?')
  L.push('')
  L.push(
    'On a warm key: is the returned promise already fulfilled when `get` returns (`util.inspect`), and does its reaction run before that of a `Promise.resolve()` chained after it?',
  )
  L.push('')
  L.push(
    '| library | native Promise | fulfilled on return | first reaction | microtask turns to settle | what a hit hands out |',
  )
  L.push('|---|---|---|---|---:|---|')
  for (const p of probes) {
    if (p.error) {
      L.push(`| ${p.lib} | failed: ${p.error} | | | |`)
      continue
    }
    L.push(
      `| ${p.lib} | ${p.nativePromise ? 'yes' : 'no'} | ${p.settledOnReturn ? 'yes' : '**no**'} | ${p.first} | ${p.microtaskTurns} | ${p.sameObjectOnHits ? (p.loaderObject ? "the loader's object" : 'one shared copy') : 'a new object per hit'} |`,
    )
  }
  const hp = probes.find((p) => p.lib === 'herdcache')
  if (hp && !hp.error) {
    L.push('')
    L.push(
      hp.settledOnReturn && hp.first === 'lib'
        ? `herdcache: **a hit is a synchronous path** — the promise is fulfilled when \`getOrLoad\` returns${hp.hitCountedSync ? ', and `stats().hits` has already been counted' : ''}.`
        : '**herdcache: a hit is NOT answered synchronously** — the promise is still pending on return or settles after `Promise.resolve()`.',
    )
  }
  L.push('')
  L.push('## What the numbers say')
  L.push('')
  L.push(summarize(results, probes))
  L.push('')
  return L.join('\n')
}

// ---------------------------------------------------------------- main

async function main() {
  const t0 = now()
  const info = {
    date: isoSeconds(),
    command:
      process.env.npm_lifecycle_event === 'bench'
        ? `npm run bench${argv.length ? ' -- ' + argv.join(' ') : ''}`
        : `node ${path.relative(process.cwd(), __filename) || 'bench/run.js'}${argv.length ? ' ' + argv.join(' ') : ''}`,
    loadStart: loadAvg(),
  }
  info.build = herdcacheModule ? herdcacheBuild(path.join(__dirname, '..')) : null
  if (herdcacheError) {
    console.log(`herdcache skipped: require('..') failed (${String(herdcacheError.message).split('\n')[0]})`)
  }
  const libs = await loadLibraries()
  console.log(
    `node ${process.version}; ${os.cpus().length} CPUs; ${SAMPLES} samples × ${SAMPLE_MS} ms; value ${VALUE_BYTES} bytes`,
  )
  console.log(`libraries: ${libs.map((l) => l.name).join(', ')}`)

  // sync-hit probe first, on fresh instances
  const probes = []
  for (const def of libs) {
    try {
      probes.push(await syncHitProbe(def))
    } catch (err) {
      probes.push({ lib: def.name, error: String(err && err.message) })
    }
  }
  console.log('\nhit returns an already-fulfilled promise?')
  for (const p of probes) {
    if (p.error) {
      console.log(`  ${p.lib.padEnd(14)} probe failed: ${p.error}`)
      continue
    }
    console.log(
      `  ${p.lib.padEnd(14)} fulfilled on return: ${p.settledOnReturn ? 'yes' : 'no '}  first reaction: ${p.first.padEnd(17)} microtask turns: ${p.microtaskTurns}  hits share one object: ${p.sameObjectOnHits ? (p.loaderObject ? "yes (the loader's)" : 'yes (a copy)') : 'no (new per hit)'}`,
    )
  }
  const hp = probes.find((p) => p.lib === 'herdcache')
  if (hp && !hp.error) {
    const ok = hp.nativePromise && hp.settledOnReturn && hp.first === 'lib'
    console.log(
      ok
        ? `  ASSERT ok: a herdcache hit is a synchronous path${hp.hitCountedSync ? ' (stats().hits counted synchronously)' : ''}`
        : '  ASSERT FAILED: a herdcache hit is not answered synchronously',
    )
    if (!ok) process.exitCode = 1
  }

  const results = []
  for (const scenario of scenarios) {
    console.log(`\n${scenario.id}. ${scenario.title}`)
    const rows = await runScenario(scenario, libs)
    results.push({ scenario, rows })
    for (const r of rows) {
      if (r.error) {
        console.log(`  ${r.lib.padEnd(14)} FAILED: ${r.error.stack || r.error}`)
        process.exitCode = 1
        continue
      }
      console.log(
        `  ${r.lib.padEnd(14)} ${fmtOps(r.opsPerSec).padStart(9)} ops/s ${fmtUs(r.usPerOp).padStart(8)} µs/op  ±${(r.spread * 100).toFixed(0).padStart(3)} %  ${r.lib === 'herdcache' ? '         ' : ('h/p ' + fmtRatio(r.ratio)).padStart(9)}  loads: ${r.loadsNote}   [${r.samples.map(fmtUs).join(' ')}]`,
      )
      if (r.statsCheck) {
        console.log(`  ${''.padEnd(14)} herdcache stats() check: ${r.statsCheck}`)
        if (!r.statsOk) process.exitCode = 1
      }
    }
  }

  info.seconds = ((now() - t0) / 1000).toFixed(0)
  info.machine = machine()
  const md = markdown({ results, probes, libs, info })
  fs.mkdirSync(path.dirname(OUT), { recursive: true })
  fs.writeFileSync(OUT, md)
  console.log('\n' + md)
  console.log(`written to ${path.relative(process.cwd(), OUT)}`)

  // The Nest route benchmark (bench/nest.js, writes bench/NEST.md) is part of
  // the full run; --only / --scenarios runs select in-process scenarios only.
  if (!ONLY && !SCENARIOS) {
    const nest = require('node:child_process').spawnSync(
      process.execPath,
      [path.join(__dirname, 'nest.js'), '--no-readme', ...(QUICK ? ['--quick'] : [])],
      { stdio: 'inherit' },
    )
    if (nest.status !== 0) process.exitCode = nest.status || 1
    const memory = require('node:child_process').spawnSync(
      process.execPath,
      // Relative, so the command line memory.js records names no path outside the repository.
      [path.join(__dirname, 'memory.js'), ...(QUICK ? ['--quick'] : []), `--out=${path.relative(process.cwd(), OUT)}`],
      { stdio: 'inherit' },
    )
    if (memory.status !== 0) process.exitCode = memory.status || 1
    const hitPath = require('node:child_process').spawnSync(
      process.execPath,
      [
        path.join(__dirname, 'hitpath.js'),
        ...(QUICK ? ['--seconds=1', `--out=${path.join(__dirname, 'out', 'hitpath-quick.md')}`] : []),
      ],
      { stdio: 'inherit' },
    )
    if (hitPath.status !== 0) process.exitCode = hitPath.status || 1
  }
  // Only a full run has every figure the README shows.
  if (OUT === path.join(__dirname, 'RESULTS.md') && !ONLY && !SCENARIOS) require('./readme').updateReadmeAfterBench()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
