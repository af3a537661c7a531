'use strict'

// What bench/run.js, bench/fleet.js, bench/cluster.js and bench/memory.js share: argument parsing, timing, the
// 1 KB value, the in-memory peers' setup, the machine and build lines of the reports, one formatter.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const v8 = require('node:v8')
const vm = require('node:vm')
const { execFileSync } = require('node:child_process')
const { performance } = require('node:perf_hooks')

const ROOT = path.join(__dirname, '..')
const ADDON = 'herdcache.linux-x64-gnu.node'

// ---------------------------------------------------------------- options

const argv = process.argv.slice(2)
const flag = (name) => argv.includes(`--${name}`)
const opt = (name) => {
  const a = argv.find((x) => x.startsWith(`--${name}=`))
  return a === undefined ? undefined : a.slice(name.length + 3)
}
function rejectUnknownArgs(re, usage) {
  for (const a of argv) {
    if (!re.test(a)) {
      console.error(`unknown argument ${a}\nusage: ${usage}`)
      process.exit(2)
    }
  }
}

// ---------------------------------------------------------------- timing

// A full GC between samples, outside the timing (works without --expose-gc).
v8.setFlagsFromString('--expose-gc')
const gc = vm.runInNewContext('gc')

const tick = () => new Promise((resolve) => setImmediate(resolve))
const now = () => performance.now()
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

// ---------------------------------------------------------------- the value

function makeValue(extra) {
  const v = {
    id: 42,
    kind: 'feed',
    tenant: 't-0001',
    locale: 'en-GB',
    updatedAt: '2025-01-01T00:00:00.000Z',
    ...extra,
    items: [],
  }
  for (let i = 0; JSON.stringify(v).length < 1000; i++) {
    v.items.push({ id: 1000 + i, title: `item number ${i}`, price: 9.99 + i, tags: ['a', 'b'], ok: i % 2 === 0 })
  }
  return v
}

// ---------------------------------------------------------------- report lines

/**
 * The command a report names: `node <script>` and this run's arguments,
 * without `--out=` and with a `--baseline=` directory as `DIR` (a path
 * outside the repository is nobody else's).
 */
function commandLine(script) {
  const args = process.argv
    .slice(2)
    .filter((a) => !a.startsWith('--out='))
    .map((a) => (a.startsWith('--baseline=') ? '--baseline=DIR' : a))
  return `node ${script}${args.length ? ` ${args.join(' ')}` : ''}`
}

const isoSeconds = (d = new Date()) => d.toISOString().replace(/\.\d+Z$/, 'Z')
const loadAvg = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')
const fmtOps = (x) => (x >= 1e6 ? `${(x / 1e6).toFixed(2)} M` : x >= 1e3 ? `${(x / 1e3).toFixed(1)} k` : x.toFixed(0))

function machine() {
  const cpus = os.cpus()
  return {
    cpu: `${cpus.length} × ${cpus[0] ? cpus[0].model.trim() : '?'}`,
    mem: `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    load: loadAvg(),
  }
}

function pkgVersion(name) {
  try {
    return require(path.join(ROOT, 'node_modules', name, 'package.json')).version
  } catch {
    return '?'
  }
}

function addonSha(dir) {
  try {
    return require('node:crypto')
      .createHash('sha256')
      .update(fs.readFileSync(path.join(dir, ADDON)))
      .digest('hex')
      .slice(0, 12)
  } catch {
    return null
  }
}

// Which addon binary was measured (the implementation changes under the bench).
function herdcacheBuild(dir) {
  try {
    const file = path.join(ROOT, ADDON)
    const st = fs.statSync(file)
    const sha = addonSha(dir)
    let commit = ''
    try {
      const git = (args) =>
        execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
      const head = git(['rev-parse', '--short', 'HEAD'])
      const dirty = git(['status', '--porcelain', '--', 'src', 'lib', 'index.js', 'Cargo.toml', 'Cargo.lock'])
      commit = `; sources at commit ${head}${dirty ? ' with uncommitted changes in src/, lib/ or index.js' : ''}`
    } catch {}
    return `\`${path.basename(file)}\` built ${isoSeconds(st.mtime)}, sha256 ${sha}…${commit}`
  } catch {
    return null
  }
}

// ---------------------------------------------------------------- the in-memory peers

// bentocache and cache-manager, in memory, configured once for bench/run.js and bench/memory.js.
// Async (bentocache is an ES module); what it answers makes instances synchronously.
async function memoryPeers() {
  const { BentoCache, bentostore } = await import('bentocache')
  const { memoryDriver } = await import('bentocache/drivers/memory')
  const { createCache } = require('cache-manager')
  return {
    bentocache: {
      version: pkgVersion('bentocache'),
      setup: (maxItems) =>
        `memory-only L1 (\`memoryDriver({ maxItems: ${maxItems} })\`, serialized L1: the default), \`getOrSet({ key, factory })\``,
      create: ({ ttl, maxItems }) =>
        new BentoCache({
          default: 'memory',
          ttl,
          stores: { memory: bentostore().useL1Layer(memoryDriver({ maxItems })) },
        }),
    },
    'cache-manager': {
      version: pkgVersion('cache-manager'),
      setup: (ttl) =>
        `\`createCache({ ttl: ${ttl.toLocaleString('en-US').replace(/,/g, '_')} })\` (default in-memory Keyv, unbounded), \`wrap(key, fn, ${ttl.toLocaleString('en-US').replace(/,/g, '_')})\``,
      create: ({ ttl }) => createCache({ ttl }),
    },
  }
}

// ---------------------------------------------------------------- waiting

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
// `promise`, or `onTimeout()` after `ms`; the timer is cleared either way (no stray timer keeps a process alive)
function race(promise, ms, onTimeout) {
  let timer
  const t = new Promise((resolve, reject) => {
    timer = setTimeout(
      () => {
        try {
          resolve(onTimeout())
        } catch (err) {
          reject(err)
        }
      },
      Math.max(0, ms),
    )
  })
  return Promise.race([promise, t]).finally(() => clearTimeout(timer))
}
const timeoutError = (what) => () => {
  throw new Error(what)
}

// ---------------------------------------------------------------- latency histogram

// Log-linear: 16 bins per octave (±2.2 %), from 1/16 µs to ~4 000 s.
const HB_PER_OCT = 16
const HB_LOG2_MIN = -4
const HB_N = HB_PER_OCT * 36
const hbin = (us) => {
  if (!(us > 0.0625)) return 0
  const i = Math.floor((Math.log2(us) - HB_LOG2_MIN) * HB_PER_OCT)
  return i >= HB_N ? HB_N - 1 : i
}
const hval = (i) => 2 ** ((i + 0.5) / HB_PER_OCT + HB_LOG2_MIN) // µs, the bin's middle

function quantile(hist, q) {
  let total = 0
  for (let i = 0; i < HB_N; i++) total += hist[i]
  if (total === 0) return null
  const rank = Math.max(1, Math.ceil(q * total))
  let c = 0
  for (let i = 0; i < HB_N; i++) {
    c += hist[i]
    if (c >= rank) return hval(i)
  }
  return hval(HB_N - 1)
}

/**
 * A cold storm's calls of one key: `callers` calls of `cache.getOrLoad(['storm', k], load)` pushed onto `calls`;
 * each that rejects, or answers another key's value (`load` answers `{ k }`), adds one to `counts.errors`.
 */
function stormCalls(cache, k, callers, load, calls, counts) {
  const check = (value) => {
    if (value.k !== k) counts.errors++
  }
  const failed = () => counts.errors++
  for (let j = 0; j < callers; j++) calls.push(cache.getOrLoad(['storm', k], load).then(check, failed))
}

module.exports = {
  /** The arguments after the script's name. */
  argv,
  /** flag('quick'): whether `--quick` was given. */
  flag,
  /** opt('out'): the value of `--out=…`, or undefined. */
  opt,
  /** Exits with code 2 and `usage` at the first argument that does not match `re`. */
  rejectUnknownArgs,
  /** A full, synchronous GC (exposed at load time through V8 flags). */
  gc,
  /** A promise of the next event-loop turn (`setImmediate`). */
  tick,
  /** performance.now(): ms, monotonic. */
  now,
  /** The median of an array of numbers (the mean of the middle two for an even count). */
  median,
  /** The ~1 KB JSON object a loader returns: fixed fields, then `extra`'s, then items until the JSON reaches 1 000 bytes. */
  makeValue,
  commandLine,
  /** An ISO 8601 time cut to the second (`…T12:34:56Z`); now by default. */
  isoSeconds,
  /** The 1, 5 and 15 minute load averages, as 'a.aa b.bb c.cc'. */
  loadAvg,
  /** Operations per second as '1.23 M', '4.5 k' or '678'. */
  fmtOps,
  /** { cpu, mem, os, load } of this machine, as the reports print them. */
  machine,
  /** The version of a package in node_modules, or '?'. */
  pkgVersion,
  /** bentocache (memory-only L1) and cache-manager (default in-memory Keyv), as the benches set them up: { name: { version, setup(n), create(options) } }. */
  memoryPeers,
  /** The first 12 hex digits of the sha256 of the addon binary in `dir`, or null. */
  addonSha,
  /** One line on the addon binary measured (mtime, sha256 of the copy in `dir`, git commit of the sources), or null. */
  herdcacheBuild,
  /** A promise resolved after `ms`. */
  sleep,
  stormCalls,
  /** `promise`, or `onTimeout()` after `ms` (the timer cleared either way). */
  race,
  /** An `onTimeout` for `race` that rejects with `what`. */
  timeoutError,
  /** The latency histogram: bins per octave, bin count, a value's bin, a bin's value (µs), a quantile. */
  HB_PER_OCT,
  HB_LOG2_MIN,
  HB_N,
  hbin,
  hval,
  quantile,
}
