'use strict'

// The soak (`npm run soak`; not part of `npm test`): minutes of mixed traffic
// on the embedded store and on Redis (a redis-server of its own), many keys
// over a small maxEntries, loaders that throw, return null or undefined, hang
// past hardTimeout, ignore their signal or return what JSON cannot store,
// callers that abort. After every round, with the loads settled and a forced GC:
// RSS and heapUsed, and the counters checked against what the callers saw.
// After close(): the process's active handles (and Redis's client count) are
// back to what they were before the caches.
//
// The `events` mode (not in the default list) is a fleet under everyday
// production events: loads on several processes and worker threads against one
// redis-server of its own, while a seeded chaos loop kills Redis connections
// (CLIENT KILL), terminates workers and SIGKILLs processes mid-load, closes
// caches mid-load and restarts Redis. At the end: no lock key left, the
// counters add up, connections and handles back to the baseline, and no call
// rejected except as documented (ERR_HERDCACHE_CLOSED from a closed cache).
//
// Exits non-zero when memory keeps growing over the last rounds, a counter
// disagrees, a call fails in a way it should not, a rejection goes unhandled,
// or a handle leaks. `--help` prints the usage (USAGE below).
//
// Run with --expose-gc (the npm script does).

const path = require('node:path')
const { setTimeout: sleep, setImmediate: yieldToLoop } = require('node:timers/promises')
const workerThreads = require('node:worker_threads')

const ROOT = path.join(__dirname, '..')
const { startRedis, connect } = require(path.join(ROOT, '__test__', 'redis-server.js'))
const { mulberry32 } = require('./prng')

const KNOWN_MODES = ['embedded', 'redis', 'events']
const DEFAULT_MODES = 'embedded,redis'

const USAGE = `usage: npm run soak [-- --mode=<modes>] [-- --help]
       node --expose-gc scripts/soak.js [--mode=<modes>] [--help|-h]

Minutes of traffic against herdcache; exits non-zero on a problem (a counter
that disagrees, memory that keeps growing, a leaked handle or connection, a
rejection that is not documented, an unhandled rejection).

modes (--mode=a,b or SOAK_MODES=a,b; default: ${DEFAULT_MODES}):
  embedded  mixed traffic on the embedded store: loaders that throw, return null,
            hang past hardTimeout or cannot be stored; callers that abort;
            memory, counters and handles checked every round
  redis     the same on a redis-server of its own, two caches of one fleet
  events    (not in the default list) the fleet under everyday production events:
            loads on SOAK_EVENTS_PROCESSES child processes and SOAK_EVENTS_WORKERS
            worker threads (each with SOAK_EVENTS_CACHES caches on one redis-server
            of its own), while a seeded chaos loop runs CLIENT KILL (TYPE normal,
            TYPE pubsub, ID), worker.terminate() and SIGKILL of a process mid-load,
            cache.close() mid-load, and redis-server restarts. Then: no
            {prefix key}:lock left after lockTtl + a margin, the counters of every
            cache that was closed add up, Redis is back to the soak's own
            connection, the handles of every process and thread are back to their
            baseline, and no call rejected except with ERR_HERDCACHE_CLOSED from a
            closed cache

environment:
  SOAK_SECONDS=120            total time, split between the modes
  SOAK_ROUND_SECONDS=10       length of a round (embedded, redis; shortened to
                              have 4 rounds per mode)
  SOAK_MODES=${DEFAULT_MODES}   the modes, as --mode
  SOAK_MAX_HEAP_GROWTH_MB=8   allowed heapUsed growth from round 2 to the last
  SOAK_MAX_RSS_GROWTH_MB=40   allowed RSS growth from round 2 to the last
  SOAK_SEED                   seed of the traffic and of the chaos (printed)
  SOAK_EVENTS_PROCESSES=2     events: child processes running loads
  SOAK_EVENTS_WORKERS=3       events: worker threads running loads (in the soak's process)
  SOAK_EVENTS_CACHES=2        events: caches per process or thread
  SOAK_EVENTS_CHAOS_MS=600    events: mean interval between two chaos events
  SOAK_EVENTS_CHAOS=all       events: which chaos, a list of kill-normal, kill-pubsub,
                              kill-id, terminate, sigkill, close, restart; none: loads only

examples:
  npm run soak                                    # embedded and redis, 60 s each
  SOAK_SECONDS=40 npm run soak -- --mode=events   # 40 s of the events mode
  SOAK_MODES=embedded,redis,events npm run soak   # all three, 40 s each
`

const env = (name, fallback) =>
  process.env[name] === undefined || process.env[name] === '' ? fallback : process.env[name]

/** The command line: --help/-h, --mode=a,b (or --mode a,b); the loader role of the events mode is internal. */
function parseArgs(argv) {
  const out = { help: false, modes: undefined, loader: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--help' || a === '-h') out.help = true
    else if (a === '--events-loader') out.loader = true
    else if (a.startsWith('--mode=') || a.startsWith('--modes=')) out.modes = a.slice(a.indexOf('=') + 1)
    else if (a === '--mode' || a === '--modes') out.modes = argv[++i]
    else if (!out.loader) out.unknown = a
  }
  return out
}
const ARGS = parseArgs(process.argv.slice(2))
const IS_LOADER = ARGS.loader || (!workerThreads.isMainThread && workerThreads.workerData?.role === 'events-loader')

const SECONDS = Number(env('SOAK_SECONDS', 120))
const MODES = String(ARGS.modes ?? env('SOAK_MODES', DEFAULT_MODES))
  .split(',')
  .map((m) => m.trim())
  .filter(Boolean)
const MAX_HEAP_GROWTH = Number(env('SOAK_MAX_HEAP_GROWTH_MB', 8)) * 1024 * 1024
const MAX_RSS_GROWTH = Number(env('SOAK_MAX_RSS_GROWTH_MB', 40)) * 1024 * 1024
const SEED = Number(env('SOAK_SEED', Date.now() % 2 ** 31)) >>> 0
const MIN_ROUNDS = 4
const perMode = SECONDS / Math.max(1, MODES.length)
const ROUND_MS = Math.max(1000, Math.min(Number(env('SOAK_ROUND_SECONDS', 10)), perMode / MIN_ROUNDS) * 1000)
const ROUNDS = Math.max(MIN_ROUNDS, Math.round((perMode * 1000) / ROUND_MS))

const WORKERS = 48
const KEYS = 20000
const HOT_KEYS = 300
const MAX_ENTRIES = 500
const HARD_TIMEOUT = 250
const IGNORING_LOADER_MS = 600 // well past HARD_TIMEOUT: its late result is dropped

const OUTCOMES = { hit: 'hits', stale: 'staleServed', negative: 'negativeHits', miss: 'misses', coalesced: 'coalesced' }
const SERVED = Object.values(OUTCOMES)

const problems = []
const PRINTED = 20
const problem = (msg) => {
  problems.push(msg)
  if (problems.length <= PRINTED) console.error(`  PROBLEM: ${msg}`)
  else if (problems.length === PRINTED + 1) console.error('  (more problems: counted, listed at the end)')
}

function describeReason(reason) {
  const where =
    String((reason && reason.stack) || '')
      .split('\n')
      .find((line) => /^\s+at /.test(line)) || ''
  return `${(reason && reason.name) || 'value'}${reason && reason.code ? ` ${reason.code}` : ''}: ${(reason && reason.message) || reason} ${where.trim()}`
}

if (!IS_LOADER) {
  if (ARGS.help) {
    process.stdout.write(USAGE)
    process.exit(0)
  }
  if (ARGS.unknown !== undefined) {
    process.stderr.write(`unknown argument ${ARGS.unknown}\n\n${USAGE}`)
    process.exit(2)
  }
  // Counted, not kept: holding the reasons would grow the heap being measured.
  process.on('unhandledRejection', (reason) => problem(`unhandled rejection: ${describeReason(reason)}`))

  if (typeof global.gc !== 'function') {
    console.error('run with --expose-gc (npm run soak does): memory is measured after a forced GC')
    process.exit(2)
  }
  for (const m of MODES) {
    if (!KNOWN_MODES.includes(m)) {
      console.error(`unknown mode ${m} in SOAK_MODES / --mode (${KNOWN_MODES.join(', ')}; --help)`)
      process.exit(2)
    }
  }
}

const { Cache } = require(ROOT)
const random = mulberry32(SEED)

class SoakError extends Error {}

const mb = (bytes) => (bytes / 1024 / 1024).toFixed(1)

function memory() {
  global.gc()
  global.gc()
  const m = process.memoryUsage()
  return { rss: m.rss, heapUsed: m.heapUsed }
}

/** The loader kinds, with their weights, and what each run is counted as. */
const LOADERS = [
  [60, 'value', async ({ key }) => ({ key, at: Date.now(), pad: 'x'.repeat(64 + Math.floor(random() * 512)) })],
  [6, 'sync value', ({ key }) => [key, random()]],
  [4, 'slow value', ({ key, signal }) => sleepOrAbort(5 + random() * 20, signal).then(() => ({ key, slow: true }))],
  [6, 'throws', () => Promise.reject(new SoakError('loader failed'))],
  [
    2,
    'throws sync',
    () => {
      throw new SoakError('loader failed synchronously')
    },
  ],
  [7, 'null', () => null],
  [3, 'undefined', async () => undefined],
  [
    4,
    'hangs',
    ({ signal }) =>
      new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })),
  ],
  [2, 'ignores its signal', () => sleep(IGNORING_LOADER_MS).then(() => 'too late')],
  [2, 'unserializable', () => ({ big: 10n })],
]
const LOADER_WEIGHT = LOADERS.reduce((s, [w]) => s + w, 0)

function sleepOrAbort(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer)
        reject(signal.reason)
      },
      { once: true },
    )
  })
}

/** A loader of a random kind that records its run in `runs`. */
function loader(runs) {
  let r = random() * LOADER_WEIGHT
  let kind = LOADERS[LOADERS.length - 1]
  for (const l of LOADERS) {
    if ((r -= l[0]) < 0) {
      kind = l
      break
    }
  }
  const [, name, impl] = kind
  return (ctx) => {
    runs[name] = (runs[name] || 0) + 1
    return impl(ctx)
  }
}

function pickKey() {
  return random() < 0.5 ? `hot${Math.floor(random() * HOT_KEYS)}` : `k${Math.floor(random() * KEYS)}`
}

/** An AbortSignal for ~10 % of the calls: a timeout, a controller aborted later, or one aborted already. */
function callerSignal(timers) {
  const r = random()
  if (r < 0.05) return AbortSignal.timeout(1 + Math.floor(random() * 30))
  if (r < 0.095) {
    const ac = new AbortController()
    const timer = setTimeout(() => ac.abort(new SoakError('caller gave up')), Math.floor(random() * 20))
    timers.add(timer)
    timer.unref()
    return ac.signal
  }
  if (r < 0.1) return AbortSignal.abort()
  return undefined
}

/** What a caller may legitimately be rejected with. */
function expectedRejection(err) {
  if (err instanceof SoakError) return 'loader error'
  if (err && err.code === 'ERR_HERDCACHE_TIMEOUT') return 'timeout'
  if (err && err.code === 'ERR_HERDCACHE_UNSERIALIZABLE') return 'unserializable'
  if (err && (err.name === 'AbortError' || err.name === 'TimeoutError')) return 'aborted'
  return null
}

function newTally() {
  // outcomes: of the calls without a signal (a caller that left early keeps
  // the outcome it had when it left, while its flight may be answered otherwise).
  return { calls: 0, resolved: 0, outcomes: {}, rejections: {}, runs: {}, backgroundErrors: 0, ops: 0 }
}

async function round(caches, tallies, end) {
  const timers = new Set()
  const worker = async () => {
    let n = 0
    while (Date.now() < end) {
      // A resolved promise does not yield to the event loop: timers (hardTimeout, aborts) need it.
      if (++n % 32 === 0) await yieldToLoop()
      const i = Math.floor(random() * caches.length)
      const cache = caches[i]
      const tally = tallies[i]
      const r = random()
      if (r < 0.01) {
        tally.ops++
        await cache.delete(pickKey())
        continue
      }
      if (r < 0.02) {
        tally.ops++
        await cache.set(pickKey(), { set: true, at: Date.now() }, random() < 0.5 ? { ttl: 50 } : undefined)
        continue
      }
      if (r < 0.03) {
        tally.ops++
        await cache.get(pickKey(), random() < 0.5 ? { stale: false } : undefined)
        continue
      }
      const status = {}
      const options = { status }
      const signal = callerSignal(timers)
      if (signal) options.signal = signal
      if (random() < 0.05) options.stale = false
      if (random() < 0.1) options.ttl = 20 + Math.floor(random() * 200)
      tally.calls++
      try {
        await cache.getOrLoad(pickKey(), loader(tally.runs), options)
        tally.resolved++
      } catch (err) {
        const why = expectedRejection(err)
        if (why) tally.rejections[why] = (tally.rejections[why] || 0) + 1
        else problem(`a call rejected with ${err && err.code} ${err && err.message}`)
      }
      if (signal) continue
      if (status.outcome) tally.outcomes[status.outcome] = (tally.outcomes[status.outcome] || 0) + 1
      else problem('a call ended without status.outcome')
    }
  }
  await Promise.all(Array.from({ length: WORKERS }, worker))
  for (const timer of timers) clearTimeout(timer)
  // Let loads in flight (and those ignoring their signal) settle before counting.
  const settleBy = Date.now() + IGNORING_LOADER_MS + HARD_TIMEOUT + 2000
  while (caches.some((c) => c.stats().inFlight > 0) && Date.now() < settleBy) await sleep(20)
  await sleep(IGNORING_LOADER_MS + 50)
}

/** The counters against what the callers saw; returns a one-line summary. */
function checkCounters(mode, caches, tallies, options) {
  caches.forEach((cache, i) => {
    const s = cache.stats()
    const t = tallies[i]
    const name = `${mode}[${i}]`
    const served = SERVED.reduce((sum, k) => sum + s[k], 0)
    if (served !== t.calls)
      problem(`${name}: hits+staleServed+negativeHits+misses+coalesced = ${served}, calls = ${t.calls}`)
    for (const [outcome, counter] of Object.entries(OUTCOMES)) {
      // Only calls without a signal are tallied, so <=.
      const seen = t.outcomes[outcome] || 0
      if (seen > s[counter]) problem(`${name}: ${seen} calls saw outcome '${outcome}', ${counter} = ${s[counter]}`)
    }
    const runs = Object.values(t.runs).reduce((a, b) => a + b, 0)
    if (s.loads !== runs) problem(`${name}: loads = ${s.loads}, loader runs = ${runs}`)
    const failedRuns = (t.runs.throws || 0) + (t.runs['throws sync'] || 0) + (t.runs.unserializable || 0)
    if (s.loadErrors !== failedRuns + s.timeouts) {
      problem(`${name}: loadErrors = ${s.loadErrors}, failed runs ${failedRuns} + timeouts ${s.timeouts}`)
    }
    const mustTimeOut = (t.runs.hangs || 0) + (t.runs['ignores its signal'] || 0)
    if (s.timeouts < mustTimeOut) problem(`${name}: timeouts = ${s.timeouts}, hanging runs = ${mustTimeOut}`)
    if (s.backgroundErrors !== t.backgroundErrors) {
      problem(`${name}: backgroundErrors = ${s.backgroundErrors}, onError called ${t.backgroundErrors} times`)
    }
    if (s.inFlight !== 0) problem(`${name}: inFlight = ${s.inFlight} after the round settled`)
    if (s.size > options.maxEntries) problem(`${name}: size ${s.size} > maxEntries ${options.maxEntries}`)
    if (mode === 'redis' && s.corruptValues !== 0) problem(`${name}: corruptValues = ${s.corruptValues}`)
  })
  const s = caches[0].stats()
  const t = tallies[0]
  const rej = Object.entries(t.rejections)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ')
  return (
    `since the start: calls ${t.calls} (hit ${s.hits}, stale ${s.staleServed}, neg ${s.negativeHits}, miss ${s.misses}, coal ${s.coalesced}; ` +
    `rejected: ${rej || 'none'}), loads ${s.loads}, timeouts ${s.timeouts}, evictions ${s.evictions}, size ${s.size}` +
    (mode === 'redis' ? `, locks ${s.lockAcquired}, redisHits ${s.redisHits}, redisErrors ${s.redisErrors}` : '')
  )
}

function resourceCounts() {
  const counts = {}
  for (const r of process.getActiveResourcesInfo()) counts[r] = (counts[r] || 0) + 1
  return counts
}

function diffResources(before, after) {
  const out = []
  for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if ((after[k] || 0) > (before[k] || 0)) out.push(`${k} +${after[k] - (before[k] || 0)}`)
  }
  return out
}

async function connectedClients(redisClient) {
  const info = await redisClient.cmd('INFO', 'clients')
  return Number(/connected_clients:(\d+)/.exec(info)[1])
}

async function soakMode(mode) {
  let redis = null
  let probe = null
  if (mode === 'redis') {
    redis = await startRedis(null)
    if (!redis)
      throw new Error('redis-server is not installed: the Redis soak needs it (SOAK_MODES=embedded to skip it)')
    probe = await connect(redis.port)
  }
  try {
    const options = {
      ttl: 200,
      hardTtl: 1000,
      negativeTtl: 100,
      hardTimeout: HARD_TIMEOUT,
      refreshBackoff: 200,
      maxEntries: MAX_ENTRIES,
    }
    if (redis) Object.assign(options, { redis: redis.url, prefix: 'soak:', lockTtl: 300, redisTimeout: 500 })
    await sleep(50)
    const baseline = resourceCounts()
    const clientsBefore = probe ? await connectedClients(probe) : 0

    const count = redis ? 2 : 1 // with Redis, two instances of a fleet in one process
    const tallies = Array.from({ length: count }, newTally)
    const caches = tallies.map(
      (tally) =>
        new Cache({
          ...options,
          onError: () => {
            tally.backgroundErrors++
          },
        }),
    )
    console.log(
      `\n== ${mode}: ${ROUNDS} rounds of ${ROUND_MS / 1000} s, ${count} cache(s), maxEntries ${MAX_ENTRIES}, ${KEYS} keys`,
    )
    const samples = []
    for (let r = 1; r <= ROUNDS; r++) {
      const started = Date.now()
      await round(caches, tallies, started + ROUND_MS)
      const summary = checkCounters(mode, caches, tallies, options)
      const m = memory()
      samples.push(m)
      console.log(`round ${r}: rss ${mb(m.rss)} MB, heapUsed ${mb(m.heapUsed)} MB; ${summary}`)
    }
    // Flat: from the first measured round (the second: the first warms up) to the last.
    const first = samples[1]
    const last = samples[samples.length - 1]
    const heapGrowth = last.heapUsed - first.heapUsed
    const rssGrowth = last.rss - first.rss
    console.log(`growth from round 2 to round ${ROUNDS}: heapUsed ${mb(heapGrowth)} MB, rss ${mb(rssGrowth)} MB`)
    if (heapGrowth > MAX_HEAP_GROWTH)
      problem(`${mode}: heapUsed grew ${mb(heapGrowth)} MB (limit ${mb(MAX_HEAP_GROWTH)})`)
    if (rssGrowth > MAX_RSS_GROWTH) problem(`${mode}: rss grew ${mb(rssGrowth)} MB (limit ${mb(MAX_RSS_GROWTH)})`)

    const closing = Promise.all(caches.map((c) => c.close()))
    let closeTimer
    const closed = await Promise.race([
      closing.then(() => true),
      new Promise((resolve) => (closeTimer = setTimeout(resolve, 5000, false))),
    ])
    clearTimeout(closeTimer)
    if (!closed) problem(`${mode}: close() did not resolve within 5 s`)
    // Handles back to the baseline (sockets and timers take a moment to go).
    let leaked = []
    for (let i = 0; i < 100; i++) {
      leaked = diffResources(baseline, resourceCounts())
      if (!leaked.length) break
      await sleep(20)
    }
    if (leaked.length) problem(`${mode}: active resources after close() beyond the baseline: ${leaked.join(', ')}`)
    else console.log(`active resources after close(): back to the baseline (${JSON.stringify(baseline)})`)
    if (probe) {
      let clients = 0
      for (let i = 0; i < 100; i++) {
        clients = await connectedClients(probe)
        if (clients <= clientsBefore) break
        await sleep(20)
      }
      if (clients > clientsBefore)
        problem(`${mode}: Redis has ${clients} clients after close(), ${clientsBefore} before`)
      else console.log(`Redis connections after close(): ${clients} (before the caches: ${clientsBefore})`)
    }
    return { mode, samples, heapGrowth, rssGrowth }
  } finally {
    if (probe) probe.close()
    if (redis) await redis.stop()
  }
}

// ---- the events mode ---------------------------------------------------------
//
// The soak's process runs the chaos and hosts the worker threads; child
// processes (this file with --events-loader) run loads too. Each process or
// thread ("loader") checks its own caches and handles and reports to the soak.

const EVENTS = {
  processes: Number(env('SOAK_EVENTS_PROCESSES', 2)),
  workers: Number(env('SOAK_EVENTS_WORKERS', 3)),
  caches: Number(env('SOAK_EVENTS_CACHES', 2)),
  chaosMs: Number(env('SOAK_EVENTS_CHAOS_MS', 600)),
  chaos: String(env('SOAK_EVENTS_CHAOS', 'all'))
    .split(',')
    .map((c) => c.trim())
    .filter(Boolean),
  loops: 10, // concurrent callers per loader
  hotKeys: 16,
  coldKeys: 3000,
  prefix: 'soakev:',
  options: {
    ttl: 400,
    hardTtl: 4000,
    negativeTtl: 200,
    lockTtl: 1000,
    hardTimeout: 4000,
    redisTimeout: 500,
    circuitBreakerDuration: 1000,
    refreshBackoff: 500,
  },
}
const CLOSED = 'ERR_HERDCACHE_CLOSED'
// close() resolves once loads settled (loaders honour their signal at once) and
// what could not reach Redis had one more attempt (redisTimeout).
const CLOSE_BOUND_MS = 3000 + 2 * EVENTS.options.redisTimeout

/** Resolves true when `promise` settles within `ms`, false otherwise. */
async function within(promise, ms) {
  let timer
  const settled = await Promise.race([
    Promise.resolve(promise).then(
      () => true,
      () => true,
    ),
    new Promise((resolve) => (timer = setTimeout(resolve, ms, false))),
  ])
  clearTimeout(timer)
  return settled
}

async function until(predicate, ms, step = 20) {
  const end = Date.now() + ms
  for (;;) {
    if (await predicate()) return true
    if (Date.now() >= end) return false
    await sleep(step)
  }
}

/** A loader: a child process or a worker thread running loads on its caches. */
async function runEventsLoader(cfg, port) {
  const rnd = mulberry32(cfg.seed)
  let reported = 0
  const report = (check, msg) => {
    // Bounded: a problem that recurs is counted in the cache reports anyway.
    const at = `+${((Date.now() - cfg.started) / 1000).toFixed(1)}s`
    if (++reported <= 30) port.send({ type: 'problem', check, msg: `${at} ${cfg.name}: ${msg}` })
  }
  process.on('unhandledRejection', (reason) => report('f', `unhandled rejection: ${describeReason(reason)}`))

  let baseline
  let made = 0
  const newSlot = () => {
    const tally = {
      name: `${cfg.name}.c${made++}`,
      calls: 0,
      outcomes: {},
      noOutcome: 0,
      pending: 0,
      rejections: {},
      undocumented: 0,
      runs: 0,
      ops: 0,
      backgroundErrors: 0,
      undelivered: 0,
      closing: false,
    }
    const cache = new Cache({
      ...cfg.options,
      redis: cfg.url,
      prefix: cfg.prefix,
      onError: (err) => {
        if (err && err.code === 'ERR_HERDCACHE_UNDELIVERED') tally.undelivered++
        else tally.backgroundErrors++
      },
    })
    return { cache, tally }
  }
  const slots = []

  const pickKey = () =>
    rnd() < 0.6 ? `hot${Math.floor(rnd() * cfg.hotKeys)}` : `cold${Math.floor(rnd() * cfg.coldKeys)}`
  // 20-200 ms, honouring the signal; one cold key in twenty is "not found".
  const loaderFor = (tally) => (ctx) => {
    tally.runs++
    return sleepOrAbort(20 + rnd() * 180, ctx.signal).then(() =>
      /^cold\d*0$/.test(ctx.key) && ctx.key.length % 2 === 0 ? null : { by: cfg.name, at: Date.now() },
    )
  }
  const rejected = (tally, err, what) => {
    const code = (err && err.code) || `uncoded ${(err && err.name) || typeof err}`
    tally.rejections[code] = (tally.rejections[code] || 0) + 1
    // Documented for these events: ERR_HERDCACHE_CLOSED, from a cache that was closed.
    if (code === CLOSED && tally.closing) return
    tally.undocumented++
    report(
      'e',
      `${tally.name}: ${what} rejected with ${describeReason(err)}${tally.closing ? '' : ' (its cache was not closed)'}`,
    )
  }

  let stopping = false
  const loop = async () => {
    while (!stopping && Date.now() < cfg.hardEnd) {
      const { cache, tally } = slots[Math.floor(rnd() * slots.length)]
      const r = rnd()
      tally.pending++
      if (r < 0.04) {
        tally.ops++
        const what = r < 0.02 ? 'set' : 'delete'
        try {
          await (what === 'set' ? cache.set(pickKey(), { set: cfg.name, at: Date.now() }) : cache.delete(pickKey()))
        } catch (err) {
          rejected(tally, err, what)
        }
      } else {
        const status = {}
        tally.calls++
        try {
          await cache.getOrLoad(pickKey(), loaderFor(tally), { status })
        } catch (err) {
          rejected(tally, err, 'getOrLoad')
        }
        // Read once settled: with Redis the addon may correct it (another instance's value).
        if (status.outcome) tally.outcomes[status.outcome] = (tally.outcomes[status.outcome] || 0) + 1
        else tally.noOutcome++
      }
      tally.pending--
      await sleep(2 + Math.floor(rnd() * 8))
    }
  }

  /** The counters of a closed cache against what its callers saw: (b). */
  const check = (slot, how) => {
    const { cache, tally } = slot
    const s = cache.stats()
    const out = []
    const withOutcome = tally.calls - tally.noOutcome
    const served = SERVED.reduce((sum, k) => sum + s[k], 0)
    if (served !== withOutcome) {
      out.push(`hits+staleServed+negativeHits+misses+coalesced = ${served}, calls with an outcome = ${withOutcome}`)
    }
    // No caller here has a signal: each outcome's count is its counter's (README, Counters).
    const split = []
    for (const [outcome, counter] of Object.entries(OUTCOMES)) {
      const seen = tally.outcomes[outcome] || 0
      if (seen !== s[counter]) split.push(`${seen} calls saw outcome '${outcome}', ${counter} = ${s[counter]}`)
    }
    if (tally.noOutcome > (tally.rejections[CLOSED] || 0)) {
      out.push(`${tally.noOutcome} calls had no status.outcome, ${tally.rejections[CLOSED] || 0} were closed`)
    }
    if (s.loads !== tally.runs) out.push(`loads = ${s.loads}, loader runs = ${tally.runs}`)
    if (s.backgroundErrors !== tally.backgroundErrors) {
      out.push(`backgroundErrors = ${s.backgroundErrors}, onError called ${tally.backgroundErrors} times`)
    }
    if (s.inFlight !== 0) out.push(`inFlight = ${s.inFlight} after close()`)
    if (s.corruptValues !== 0) out.push(`corruptValues = ${s.corruptValues}`)
    if (tally.pending !== 0) out.push(`${tally.pending} calls still pending after close() resolved`)
    return {
      name: tally.name,
      how,
      problems: out,
      split,
      calls: tally.calls,
      ops: tally.ops,
      outcomes: tally.outcomes,
      rejections: tally.rejections,
      undocumented: tally.undocumented,
      undelivered: tally.undelivered,
      stats: {
        loads: s.loads,
        lockAcquired: s.lockAcquired,
        lockContended: s.lockContended,
        redisErrors: s.redisErrors,
        redisHits: s.redisHits,
        timeouts: s.timeouts,
        recovered: s.recovered,
        recoveryDropped: s.recoveryDropped,
      },
    }
  }

  const closeSlot = async (slot, how) => {
    slot.tally.closing = true
    const inFlight = slot.cache.stats().inFlight
    if (!(await within(slot.cache.close(), CLOSE_BOUND_MS))) {
      report('f', `${slot.tally.name}: close() (${how}) did not resolve within ${CLOSE_BOUND_MS} ms`)
    }
    // A call after close() rejects with ERR_HERDCACHE_CLOSED (documented); not tallied.
    const after = await slot.cache
      .getOrLoad('after-close', () => 1)
      .then(
        () => 'resolved',
        (e) => (e && e.code) || String(e),
      )
    if (after !== CLOSED) report('e', `${slot.tally.name}: a getOrLoad after close() gave ${after}`)
    await until(() => slot.tally.pending === 0, 3000)
    const r = check(slot, how)
    r.inFlightAtClose = inFlight
    return r
  }

  port.onMessage(async (m) => {
    if (m.type === 'close-cache') {
      // Mid-load: the callers keep going, on a new cache in its place.
      const i = m.index % slots.length
      const old = slots[i]
      slots[i] = newSlot()
      port.send({ type: 'cache', report: await closeSlot(old, 'closed mid-load') })
    } else if (m.type === 'stop') {
      stopping = true
      if (!(await within(running, cfg.options.hardTimeout + 3000))) {
        report('f', `calls still pending ${cfg.options.hardTimeout + 3000} ms after the loads stopped`)
      }
      const reports = await Promise.all(slots.map((slot) => closeSlot(slot, 'closed at the end')))
      let leaked = []
      await until(() => (leaked = diffResources(baseline, resourceCounts())).length === 0, 3000)
      port.last({ type: 'done', reports, leaked, baseline })
    }
  })
  // The baseline once the message listener holds the channel (and before any cache).
  await sleep(20)
  baseline = resourceCounts()
  for (let i = 0; i < cfg.caches; i++) slots.push(newSlot())
  const running = Promise.all(Array.from({ length: cfg.loops }, loop))
  port.send({ type: 'ready' })
}

function startEventsLoader() {
  if (!workerThreads.isMainThread) {
    const { parentPort, workerData } = workerThreads
    return runEventsLoader(workerData.cfg, {
      send: (m) => parentPort.postMessage(m),
      onMessage: (fn) => parentPort.on('message', fn),
      last: (m) => {
        parentPort.postMessage(m)
        parentPort.removeAllListeners('message')
        parentPort.unref()
      },
    })
  }
  const cfg = JSON.parse(process.argv[process.argv.indexOf('--events-loader') + 1])
  return runEventsLoader(cfg, {
    send: (m) => process.send(m),
    onMessage: (fn) => process.on('message', fn),
    // The process must then exit by itself: nothing of herdcache may hold it.
    last: (m) => process.send(m, () => process.disconnect()),
  })
}

/** CLIENT LIST as objects ({ id, addr, age, idle, flags, cmd, ... }). */
function parseClientList(text) {
  return String(text)
    .split('\n')
    .filter((line) => line.trim())
    .map((line) =>
      Object.fromEntries(
        line
          .trim()
          .split(' ')
          .map((kv) => kv.split(/=(.*)/s).slice(0, 2)),
      ),
    )
}

async function soakEvents(seconds) {
  const { fork } = require('node:child_process')
  const redis = await startRedis(null)
  if (!redis) throw new Error('redis-server is not installed: the events soak needs it')
  const rnd = mulberry32((SEED ^ 0x5eed5) >>> 0)
  const o = EVENTS.options
  const checks = { a: [], b: [], b2: [], c: [], d: [], e: [], f: [] }
  const fail = (check, msg) => {
    checks[check].push(msg)
    problem(msg)
  }
  const events = {}
  const counted = (name, n = 1) => (events[name] = (events[name] || 0) + n)

  // The soak's own connection: the only one Redis should have at the end.
  let admin = null
  let adminId = null
  let connecting = null
  const adminCmd = async (...args) => {
    if (!admin || admin.closed) {
      // One connection at a time: the chaos and the lock watch share it.
      connecting ??= connect(redis.port)
        .then(async (c) => {
          adminId = String(await c.cmd('CLIENT', 'ID'))
          admin = c
        })
        .finally(() => (connecting = null))
      await connecting
    }
    return admin.cmd(...args)
  }
  const clients = async () => parseClientList(await adminCmd('CLIENT', 'LIST'))
  const lockKeys = async () => {
    const keys = []
    let cursor = '0'
    do {
      const [next, batch] = await adminCmd('SCAN', cursor, 'MATCH', `{${EVENTS.prefix}*}:lock`, 'COUNT', 1000)
      cursor = next
      keys.push(...batch)
    } while (cursor !== '0')
    return keys
  }
  await adminCmd('PING')
  await sleep(50)
  const baseClients = (await clients()).length
  const baseline = resourceCounts()

  const started = Date.now()
  const chaosEnd = started + seconds * 1000
  const loaders = new Map()
  const cacheReports = []
  let nextId = 0
  const spawnLoader = (kind) => {
    const id = nextId++
    const name = `${kind === 'worker' ? 'w' : 'p'}${id}`
    const cfg = {
      id,
      name,
      url: redis.url,
      prefix: EVENTS.prefix,
      seed: (SEED + id * 7919) >>> 0,
      caches: EVENTS.caches,
      loops: EVENTS.loops,
      hotKeys: EVENTS.hotKeys,
      coldKeys: EVENTS.coldKeys,
      options: o,
      hardEnd: chaosEnd + 60000, // the loops are bounded even if the stop never comes
      started,
    }
    const l = { id, name, kind, ready: false, ended: null, exited: false, done: null }
    counted(kind === 'worker' ? 'worker threads started' : 'processes started')
    const onMessage = (m) => {
      if (m.type === 'ready') l.ready = true
      else if (m.type === 'problem') fail(m.check, m.msg)
      else if (m.type === 'cache') cacheReports.push(m.report)
      else if (m.type === 'done') {
        l.done = m
        cacheReports.push(...m.reports)
      }
    }
    const exited = (code, signal) => {
      l.exited = true
      loaders.delete(id)
      const expected =
        (l.ended === 'terminated' && code === 1) ||
        (l.ended === 'killed' && signal === 'SIGKILL') ||
        (l.ended === 'stopped' && code === 0 && l.done)
      if (!expected) {
        fail(
          'f',
          `${name} (${kind}) exited with code ${code}${signal ? `, signal ${signal}` : ''} (${l.ended || 'running'})`,
        )
      }
    }
    if (kind === 'worker') {
      const w = new workerThreads.Worker(__filename, { workerData: { role: 'events-loader', cfg } })
      l.handle = w
      l.send = (m) => w.postMessage(m)
      l.exit = new Promise((resolve) => w.once('exit', resolve))
      w.on('message', onMessage)
      w.on('error', (err) => fail('f', `${name}: the worker thread failed: ${describeReason(err)}`))
      w.on('exit', (code) => exited(code, null))
    } else {
      const c = fork(__filename, ['--events-loader', JSON.stringify(cfg)], {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      })
      l.handle = c
      l.send = (m) => {
        if (c.connected) c.send(m)
      }
      l.exit = new Promise((resolve) => c.once('exit', resolve))
      c.on('message', onMessage)
      c.on('error', (err) => fail('f', `${name}: the process failed: ${describeReason(err)}`))
      c.on('exit', exited)
    }
    loaders.set(id, l)
    return l
  }
  for (let i = 0; i < EVENTS.processes; i++) spawnLoader('process')
  for (let i = 0; i < EVENTS.workers; i++) spawnLoader('worker')
  console.log(
    `\n== events: ${seconds} s of chaos on ${EVENTS.processes} processes + ${EVENTS.workers} worker threads, ` +
      `${EVENTS.caches} caches each, ${EVENTS.loops} callers each, redis ${redis.url}, ${JSON.stringify(o)}`,
  )
  await until(() => [...loaders.values()].every((l) => l.ready), 10000)

  const live = (kind) => [...loaders.values()].filter((l) => l.ready && !l.ended && (!kind || l.kind === kind))
  const pick = (list) => list[Math.floor(rnd() * list.length)]
  let lastRestart = 0
  const CHAOS = [
    [
      20,
      'CLIENT KILL TYPE normal',
      'kill-normal',
      async () => {
        const n = await adminCmd('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
        counted('connections killed (TYPE normal)', n)
        return `${n} connections`
      },
    ],
    [
      10,
      'CLIENT KILL TYPE pubsub',
      'kill-pubsub',
      async () => {
        const n = await adminCmd('CLIENT', 'KILL', 'TYPE', 'pubsub', 'SKIPME', 'yes')
        counted('connections killed (TYPE pubsub)', n)
        return `${n} connections`
      },
    ],
    [
      20,
      'CLIENT KILL ID',
      'kill-id',
      async () => {
        const ids = (await clients()).map((c) => c.id).filter((id) => id !== adminId)
        if (!ids.length) return false
        const id = pick(ids)
        await adminCmd('CLIENT', 'KILL', 'ID', id, 'SKIPME', 'yes').catch(() => 0) // it may be gone already
        return id
      },
    ],
    [
      15,
      'worker.terminate() mid-load',
      'terminate',
      async () => {
        const l = pick(live('worker'))
        if (!l) return false
        l.ended = 'terminated'
        await l.handle.terminate()
        return `${l.name} -> ${spawnLoader('worker').name}`
      },
    ],
    [
      5,
      'SIGKILL of a process mid-load',
      'sigkill',
      async () => {
        const l = pick(live('process'))
        if (!l) return false
        l.ended = 'killed'
        l.handle.kill('SIGKILL')
        await l.exit
        return `${l.name} -> ${spawnLoader('process').name}`
      },
    ],
    [
      20,
      'cache.close() mid-load',
      'close',
      async () => {
        const l = pick(live())
        if (!l) return false
        const index = Math.floor(rnd() * EVENTS.caches)
        l.send({ type: 'close-cache', index })
        return `${l.name} cache #${index}`
      },
    ],
    [
      6,
      'redis-server restart',
      'restart',
      async () => {
        if (Date.now() - lastRestart < 5000) return false
        if (admin) admin.close()
        await redis.restart()
        lastRestart = Date.now()
      },
    ],
  ]
  const enabled = CHAOS.filter(([, , tag]) => EVENTS.chaos.includes('all') || EVENTS.chaos.includes(tag))
  const weight = enabled.reduce((s, [w]) => s + w, 0)
  const at = () => `+${((Date.now() - started) / 1000).toFixed(1)}s`
  const timeline = []

  // The lock watch: loaders take at most 200 ms, so one token holding a lock key
  // longer than lockTtl + a margin is a lease kept alive for a load that is gone.
  const LONG_HOLD = o.lockTtl + 1000
  const holds = new Map() // key -> { token, since }
  const longHolds = []
  let watching = true
  const watch = (async () => {
    while (watching) {
      try {
        const keys = await lockKeys()
        const tokens = keys.length ? await adminCmd('MGET', ...keys) : []
        const now = Date.now()
        const seen = new Set()
        keys.forEach((key, i) => {
          if (tokens[i] === null) return
          seen.add(key)
          const h = holds.get(key)
          if (h && h.token === tokens[i]) {
            if (!h.long && now - h.since > LONG_HOLD) longHolds.push((h.long = { key, since: h.since, last: now }))
            if (h.long) h.long.last = now
          } else holds.set(key, { token: tokens[i], since: now, long: null })
        })
        for (const key of holds.keys()) if (!seen.has(key)) holds.delete(key)
      } catch {
        // Redis restarting: nothing to watch.
      }
      await sleep(250)
    }
  })()

  while (Date.now() < chaosEnd) {
    await sleep(Math.max(0, Math.min(EVENTS.chaosMs * (0.25 + 1.5 * rnd()), chaosEnd - Date.now())))
    if (!enabled.length || Date.now() >= chaosEnd) continue
    let r = rnd() * weight
    const [, name, , run] = enabled.find(([w]) => (r -= w) < 0) || enabled[0]
    try {
      const what = await run()
      if (what !== false) {
        counted(name)
        const text = `${at()} ${name}${typeof what === 'string' ? ` ${what}` : ''}`
        timeline.push([Date.now(), text])
        console.log(`  ${text}`)
      }
    } catch (err) {
      // The soak's own commands (a CLIENT KILL during a restart, say): not the library's.
      counted(`chaos step failed (${name}: ${err.message})`)
    }
    if (name === 'redis-server restart') holds.clear()
  }
  watching = false
  await watch
  const rel = (t) => `+${((t - started) / 1000).toFixed(1)}s`
  for (const h of longHolds) {
    // The events between the lock's first sighting and the moment its lease should have run out.
    const near = timeline.filter(([t]) => t >= h.since - 300 && t <= h.since + o.lockTtl).map(([, text]) => text)
    fail(
      'a',
      `${h.key} held by one token from ${rel(h.since)} to ${rel(h.last)} (${h.last - h.since} ms seen; loaders take <= 200 ms, lockTtl ${o.lockTtl}); ` +
        `chaos meanwhile: ${near.join('; ') || 'none'}`,
    )
  }
  const longest = longHolds.reduce((m, h) => Math.max(m, h.last - h.since), 0)
  const calm = o.circuitBreakerDuration + 2000
  console.log(`chaos over (${JSON.stringify(events)}); ${calm} ms of calm loads, then stop`)
  await sleep(calm)

  // Stop: the loads finish, every cache is closed, every loader exits by itself.
  const stopping = [...loaders.values()].filter((l) => !l.ended)
  for (const l of stopping) {
    l.ended = 'stopped'
    l.send({ type: 'stop' })
  }
  await Promise.all(
    stopping.map(async (l) => {
      const bound = o.hardTimeout + 3000 + CLOSE_BOUND_MS + 3000 + 5000
      if (!(await within(l.exit, bound))) {
        fail(
          'f',
          `${l.name} did not exit within ${bound} ms of the stop (${l.done ? 'after its report' : 'no report'})`,
        )
        if (l.kind === 'worker') await l.handle.terminate()
        else l.handle.kill('SIGKILL')
        await l.exit
      }
    }),
  )
  // Also wait for loaders still on their way out (terminated or killed just before).
  await until(() => loaders.size === 0, 5000)
  const endedAt = Date.now()

  // (a) no lock key left within lockTtl + a margin of the last loader's end.
  const lockWait = o.lockTtl + 1500
  let locks = []
  await until(async () => (locks = await lockKeys()).length === 0, lockWait, 100)
  let lockLine = `none left ${Date.now() - endedAt} ms after the last loader ended`
  if (locks.length) {
    const seenAt = Date.now() - endedAt
    const pttls = await Promise.all(locks.slice(0, 5).map((k) => adminCmd('PTTL', k)))
    const setAt = pttls.map((pttl) => seenAt - (o.lockTtl - pttl))
    // Observe them longer: do they expire (a lease running out) or are they extended?
    const observeUntil = endedAt + o.hardTimeout + o.lockTtl + 1500
    let still = locks
    await until(async () => (still = await lockKeys()).length === 0, Math.max(0, observeUntil - Date.now()), 200)
    const pttlsLater = await Promise.all(still.slice(0, 5).map((k) => adminCmd('PTTL', k)))
    lockLine =
      `${locks.length} left ${lockWait} ms after the last loader ended (lockTtl ${o.lockTtl}): ` +
      `${locks.slice(0, 5).join(', ')} PTTL ${pttls.join(', ')} (set or extended ~${setAt.join(', ')} ms after the last loader ended); ` +
      `${still.length} still there ${Date.now() - endedAt} ms after${still.length ? ` (PTTL ${pttlsLater.join(', ')})` : ''}`
    fail('a', `lock keys: ${lockLine}`)
  }

  // (c) Redis back to the soak's own connection.
  let left = []
  await until(async () => (left = await clients()).length <= baseClients, 5000, 100)
  let clientLine = `${left.length} (before the loads: ${baseClients}, the soak's own)`
  if (left.length > baseClients) {
    const others = left.filter((c) => c.id !== adminId)
    clientLine +=
      `, ${Date.now() - endedAt} ms after the last loader ended; every child process has exited, so these are ` +
      `held by the soak's process (worker threads' caches): ` +
      others
        .slice(0, 8)
        .map((c) => `[id ${c.id} age ${c.age}s idle ${c.idle}s flags ${c.flags} sub ${c.sub} cmd ${c.cmd}]`)
        .join(' ') +
      (others.length > 8 ? ' …' : '')
    fail('c', `Redis connections: ${clientLine}`)
  }

  // (d) handles: this process's (the loaders reported theirs).
  let leaked = []
  await until(() => (leaked = diffResources(baseline, resourceCounts())).length === 0, 3000)
  if (leaked.length) fail('d', `the soak's process: active resources beyond the baseline: ${leaked.join(', ')}`)
  const stoppedLoaders = stopping.filter((l) => l.done)
  for (const l of stoppedLoaders) {
    if (l.done.leaked.length)
      fail('d', `${l.name}: active resources after close() beyond its baseline: ${l.done.leaked.join(', ')}`)
  }

  // (b) counters and (e) rejections, from the reports.
  const totals = { calls: 0, ops: 0, outcomes: {}, rejections: {}, undocumented: 0, undelivered: 0 }
  const add = (into, from) => {
    for (const [k, v] of Object.entries(from)) into[k] = (into[k] || 0) + v
  }
  const stats = {}
  for (const r of cacheReports) {
    for (const p of r.problems) fail('b', `${r.name} (${r.how}): ${p}`)
    if (r.split.length)
      fail('b2', `${r.name} (${r.how}): status.outcome and the counters split differently: ${r.split.join('; ')}`)
    totals.calls += r.calls
    totals.ops += r.ops
    totals.undocumented += r.undocumented
    totals.undelivered += r.undelivered
    add(totals.outcomes, r.outcomes)
    add(totals.rejections, r.rejections)
    add(stats, r.stats)
  }
  const midLoad = cacheReports.filter((r) => r.how === 'closed mid-load').length

  const lines = []
  const verdict = (c) => (checks[c].length ? `FAIL (${checks[c].length})` : 'pass')
  lines.push(
    `chaos (${EVENTS.chaos.join(',')}, seed ${SEED}): ${Object.entries(events)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  )
  lines.push(
    `calls: ${totals.calls} getOrLoad (${Object.entries(totals.outcomes)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}), ` +
      `${totals.ops} set/delete; rejections: ${
        Object.entries(totals.rejections)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ') || 'none'
      }; ` +
      `undelivered reported by close(): ${totals.undelivered}; ` +
      `${Object.entries(stats)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')} (caches checked)`,
  )
  lines.push(
    `(a) no lock key left: ${verdict('a')}: at the end ${lockLine}; during the run ${longHolds.length} lock keys held by one token ` +
      `for more than lockTtl + 1000 ms${longHolds.length ? ` (the longest seen ${longest} ms)` : ''}`,
  )
  lines.push(
    `(b) counters add up: ${verdict('b')}: ${cacheReports.length} caches checked ` +
      `(${midLoad} closed mid-load, ${cacheReports.length - midLoad} at the end; ` +
      `those of terminated workers and killed processes cannot be)`,
  )
  lines.push(
    `(b2) status.outcome agrees with the counters, outcome by outcome: ${verdict('b2')}: ${checks.b2.length} of ${cacheReports.length} caches disagree`,
  )
  lines.push(`(c) Redis connections back to the baseline: ${verdict('c')}: ${clientLine}`)
  lines.push(
    `(d) active handles back to the baseline: ${verdict('d')}: the soak's process ${leaked.length ? leaked.join(', ') : 'at its baseline'}; ` +
      `${stoppedLoaders.filter((l) => !l.done.leaked.length).length} of ${stopping.length} loaders at theirs`,
  )
  lines.push(
    `(e) rejections documented: ${verdict('e')}: ${totals.undocumented} undocumented (only ${CLOSED} from a closed cache is)`,
  )
  lines.push(`(f) no crash, hang or unhandled rejection: ${verdict('f')}`)
  for (const line of lines) console.log(line)
  if (admin) admin.close()
  await redis.stop()
  return { mode: 'events', lines }
}

async function main() {
  console.log(`soak: ${SECONDS} s, modes ${MODES.join(', ')}, seed ${SEED}, node ${process.version}`)
  const results = []
  for (const mode of MODES) results.push(await (mode === 'events' ? soakEvents(perMode) : soakMode(mode)))
  console.log('\n== summary')
  for (const r of results) {
    if (r.lines) {
      for (const line of r.lines) console.log(`${r.mode}: ${line}`)
      continue
    }
    const rss = r.samples.map((s) => mb(s.rss)).join(' ')
    const heap = r.samples.map((s) => mb(s.heapUsed)).join(' ')
    console.log(`${r.mode}: rss per round [${rss}] MB, heapUsed per round [${heap}] MB`)
  }
  if (problems.length) {
    console.error(`\nsoak FAILED (seed ${SEED}): ${problems.length} problem(s)`)
    // The same problem recurs every round: list each kind once, with its count.
    const kinds = new Map()
    for (const p of problems) {
      const kind = p.split('\n')[0].replace(/\d+/g, 'N')
      const k = kinds.get(kind) || { first: p.split('\n')[0], n: 0 }
      k.n++
      kinds.set(kind, k)
    }
    for (const { first, n } of [...kinds.values()].slice(0, 30)) console.error(`  - ${first}${n > 1 ? ` (×${n})` : ''}`)
    process.exitCode = 1
  } else {
    console.log('\nsoak passed: memory flat, counters agree, no leaked handles, no unhandled rejection')
  }
  // The process must now exit by itself; if something still holds it, say what.
  setTimeout(() => {
    console.error(`the process did not exit 5 s after the soak: ${process.getActiveResourcesInfo().join(', ')}`)
    process.exit(1)
  }, 5000).unref()
}

if (IS_LOADER) {
  startEventsLoader().catch((err) => {
    console.error(err)
    process.exit(1)
  })
} else {
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}
