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

async function main() {
  console.log(`soak: ${SECONDS} s, modes ${MODES.join(', ')}, seed ${SEED}, node ${process.version}`)
  const results = []
  for (const mode of MODES) results.push(await soakMode(mode))
  console.log('\n== summary')
  for (const r of results) {
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

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
