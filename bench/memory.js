'use strict'

// herdcache memory benchmark: the bytes one cached ~1 KB entry costs, next to
// a JS `Map` holding the same JSON-parsed values (the floor) and lru-cache
// (`npm run bench:memory`, or `node bench/memory.js [--quick]`).
//
// Method: every measurement is a fresh child process (`node --expose-gc`),
// so one library's garbage, JIT code or malloc arenas never count for
// another. The child loads the library, fills a throwaway instance with a
// few entries (so code and caches exist before the baseline), collects it,
// and takes the baseline; then it fills a new instance with ENTRIES distinct
// keys through the library's normal path, collects garbage again (several
// full GCs and a short wait), and reads RSS and the V8 heap. Per entry:
// (after − before) / ENTRIES. The values are the same for every library:
// record i is made by `record(i)`, seeded by i with scripts/prng.js, and
// every library ends up holding a `JSON.parse` copy of it (herdcache makes
// that copy itself; the others are handed one). Runs are interleaved
// (round 1: every library, round 2: every library, ...) and a figure is the
// median of its runs, with the range beside it: RSS moves with the machine.
//
// Options:
//   --quick          3 runs of 20 000 entries (a smoke run); writes bench/out/memory-quick.md
//   --runs=N         runs per library (default 5, at least 3)
//   --entries=N      entries per run (default 100 000)
//   --only=a,b       libraries (herdcache,js-map,lru-cache); leaves the breakdown out
//   --breakdown      also measure the breakdown (herdcache-number, herdcache-empty-object,
//                    js-map-empty-object: where herdcache's fixed bytes go); on by default
//                    without --quick and --only
//   --out=FILE       the Markdown file whose memory section is (re)written
//                    (default bench/RESULTS.md, which bench/run.js writes first)
//
// Internal: `--child=<lib> --entries=N` runs one measurement and prints it as JSON.

const fs = require('node:fs')
const v8 = require('node:v8')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { argv, flag, opt, rejectUnknownArgs, median, isoSeconds, loadAvg, machine, pkgVersion, herdcacheBuild } =
  require('./common')
const { mulberry32 } = require('../scripts/prng')

rejectUnknownArgs(
  /^--(quick|breakdown|runs=\d+|entries=\d+|only=.+|out=.+|child=.+)$/,
  'node bench/memory.js [--quick] [--breakdown] [--runs=N] [--entries=N] [--only=lib,lib] [--out=FILE]',
)
const QUICK = flag('quick')
const RUNS = Math.max(3, Number(opt('runs') ?? (QUICK ? 3 : 5)))
const ENTRIES = Number(opt('entries') ?? (QUICK ? 20_000 : 100_000))
const ONLY = opt('only') ? new Set(opt('only').split(',')) : null
const OUT = opt('out') ? path.resolve(opt('out')) : path.join(__dirname, QUICK ? 'out/memory-quick.md' : 'RESULTS.md')
const CHILD = opt('child')
const WITH_BREAKDOWN = flag('breakdown') || (!QUICK && !ONLY)

const TTL = 600_000 // no entry expires during a run
const WARMUP_ENTRIES = 500
const SECTION_START = '<!-- memory: written by bench/memory.js -->'
const SECTION_END = '<!-- /memory -->'

// ---------------------------------------------------------------- the values

const WORDS = ['alpha', 'bravo', 'delta', 'echo', 'kilo', 'lima', 'oscar', 'papa', 'romeo', 'sierra', 'tango', 'zulu']
const STATUSES = ['active', 'pending', 'suspended', 'closed']

/**
 * Record `i`: a customer with a few strings, numbers, a nested address and a
 * nested array of orders, about 1 KB as JSON. Seeded by `i`, so every
 * library (and every run) gets the same record for the same key.
 * @param {number} i
 */
function record(i) {
  const rnd = mulberry32(0x6d656d ^ i)
  const pick = (xs) => xs[Math.floor(rnd() * xs.length)]
  const hex = (n) =>
    Array.from({ length: n }, () =>
      Math.floor(rnd() * 16)
        .toString(16)
        .toUpperCase(),
    ).join('')
  const name = `${pick(WORDS)} ${pick(WORDS)}`
  const value = {
    id: i,
    uuid: `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`.toLowerCase(),
    name,
    email: `${name.replace(' ', '.')}.${i}@example.com`,
    status: pick(STATUSES),
    createdAt: new Date(1.6e12 + Math.floor(rnd() * 1e11)).toISOString(),
    score: Math.round(rnd() * 1e6) / 100,
    verified: rnd() < 0.5,
    address: { street: `${1 + Math.floor(rnd() * 999)} ${pick(WORDS)} street`, city: pick(WORDS), zip: hex(5) },
    tags: [pick(WORDS), pick(WORDS), pick(WORDS)],
    orders: [],
  }
  while (JSON.stringify(value).length < 1000) {
    value.orders.push({
      sku: `SKU-${hex(6)}`,
      qty: 1 + Math.floor(rnd() * 9),
      price: Math.round(rnd() * 100_000) / 100,
      placedAt: new Date(1.6e12 + Math.floor(rnd() * 1e11)).toISOString(),
    })
  }
  return value
}

const keyOf = (i) => `customer:${i}`
const jsonCopy = (v) => JSON.parse(JSON.stringify(v))

// ---------------------------------------------------------------- libraries

// Each library: setup (for the report), and fill(n, prefix) -> { holder, count }
// that stores n records through the library's normal path and keeps them.
const LIBRARIES = {
  herdcache: {
    version: () => require('../package.json').version,
    setup: (n) =>
      `\`new Cache({ ttl, maxEntries: ${n} })\`, \`await getOrLoad(key, loader)\` per key (the loader returns \`record(i)\`; herdcache stores its JSON copy)`,
    async fill(n, prefix) {
      const { Cache } = require('..')
      const cache = new Cache({ ttl: TTL, maxEntries: Math.max(n, 1) })
      const loader = ({ key }) => record(Number(key.slice(prefix.length)))
      for (let i = 0; i < n; i++) await cache.getOrLoad(prefix + i, loader)
      const stats = cache.stats()
      return { holder: cache, count: stats.size ?? stats.entries ?? n, check: stats }
    },
  },
  'js-map': {
    version: () => '—',
    setup: () => '`map.set(key, JSON.parse(JSON.stringify(record(i))))`: the floor',
    async fill(n, prefix) {
      const map = new Map()
      for (let i = 0; i < n; i++) map.set(prefix + i, jsonCopy(record(i)))
      return { holder: map, count: map.size }
    },
  },
  'lru-cache': {
    version: () => pkgVersion('lru-cache'),
    setup: (n) =>
      `\`new LRUCache({ max: ${n}, ttl, fetchMethod })\`, \`await fetch(key)\` per key (fetchMethod returns the JSON copy)`,
    async fill(n, prefix) {
      const { LRUCache } = require('lru-cache')
      const cache = new LRUCache({
        max: Math.max(n, 1),
        ttl: TTL,
        fetchMethod: (key) => jsonCopy(record(Number(key.slice(prefix.length)))),
      })
      for (let i = 0; i < n; i++) await cache.fetch(prefix + i)
      return { holder: cache, count: cache.size }
    },
  },
}

// The breakdown (`--breakdown`): herdcache's fixed cost per entry, apart from
// the value. A number is held in the native store alone (no JS reference);
// an empty object adds what every object value costs: two napi references
// (the value, its settled promise) and the promise itself.
const BREAKDOWN = {
  'herdcache-number': {
    version: () => require('../package.json').version,
    setup: () => '`set(key, i)`: the store alone (key, entry, map), no JS value held',
    async fill(n, prefix) {
      const { Cache } = require('..')
      const cache = new Cache({ ttl: TTL, maxEntries: Math.max(n, 1) })
      for (let i = 0; i < n; i++) cache.set(prefix + i, i)
      return { holder: cache, count: cache.stats().size }
    },
  },
  'herdcache-empty-object': {
    version: () => require('../package.json').version,
    setup: () => '`set(key, {})`: the store, two napi references, a settled promise, an empty object',
    async fill(n, prefix) {
      const { Cache } = require('..')
      const cache = new Cache({ ttl: TTL, maxEntries: Math.max(n, 1) })
      for (let i = 0; i < n; i++) cache.set(prefix + i, {})
      return { holder: cache, count: cache.stats().size }
    },
  },
  'js-map-empty-object': {
    version: () => '—',
    setup: () => '`map.set(key, {})`',
    async fill(n, prefix) {
      const map = new Map()
      for (let i = 0; i < n; i++) map.set(prefix + i, {})
      return { holder: map, count: map.size }
    },
  },
}

// ---------------------------------------------------------------- child

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function settle() {
  // Full GCs, each followed by a pause for the finalizers (napi references,
  // weak callbacks) that run on later loop turns and free more, until the
  // heap stops shrinking.
  let last = Infinity
  for (let i = 0; i < 20; i++) {
    global.gc()
    await sleep(20)
    const used = process.memoryUsage().heapUsed
    if (i >= 3 && last - used < 100_000) break
    last = used
  }
}

// Short-lived garbage, a few times the young generation (fixed at 2 × 16 MB by
// the flags the parent passes): every page of it is touched before the
// baseline, so its RSS is not billed to the first library that fills it.
function churn() {
  let keep = null
  for (let i = 0; i < 2_000_000; i++) keep = { i, list: [i, i + 1] }
  return keep
}

function snapshot() {
  const m = process.memoryUsage()
  const spaces = v8.getHeapSpaceStatistics()
  const space = (name) => spaces.find((s) => s.space_name === name) ?? { space_size: 0, space_used_size: 0 }
  const old = space('old_space')
  return {
    rss: m.rss,
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    young: space('new_space').space_size,
    oldFree: old.space_size - old.space_used_size,
  }
}

async function child(name) {
  const lib = LIBRARIES[name] ?? BREAKDOWN[name]
  if (!lib) throw new Error(`unknown library ${name}`)
  if (typeof global.gc !== 'function') throw new Error('run the child with node --expose-gc')
  // Warm-up: code compiled, allocator and caches primed; then collected.
  let warm = await lib.fill(WARMUP_ENTRIES, 'warm:')
  if (warm.holder.close) await warm.holder.close()
  warm = null
  churn()
  await settle()
  const before = snapshot()
  let filled = await lib.fill(ENTRIES, 'customer:')
  await settle()
  const after = snapshot()
  if (filled.count !== ENTRIES) throw new Error(`${name} holds ${filled.count} entries, expected ${ENTRIES}`)
  // Still held (and still answering) at the end: nothing was collected early.
  if (LIBRARIES[name]) {
    const probe = await filled.holder.get(keyOf(7))
    if (!probe || probe.id !== 7 || JSON.stringify(probe) !== JSON.stringify(record(7)))
      throw new Error(`${name} lost record 7`)
  }
  const out = { lib: name, entries: ENTRIES, before, after, check: filled.check }
  filled = null
  process.stdout.write(JSON.stringify(out))
}

// ---------------------------------------------------------------- parent

function runChild(name) {
  const out = execFileSync(
    process.execPath,
    [
      '--expose-gc',
      '--min-semi-space-size=16',
      '--max-semi-space-size=16',
      __filename,
      `--child=${name}`,
      `--entries=${ENTRIES}`,
    ],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 20, env: process.env },
  )
  const r = JSON.parse(out)
  const per = (field) => (r.after[field] - r.before[field]) / r.entries
  return { rss: per('rss'), heap: per('heapUsed'), external: per('external'), other: per('rss') - per('heapUsed') }
}

const fmtBytes = (x) => Math.round(x).toLocaleString('en-US').replace(/,/g, ' ')
const cell = (xs) => {
  const m = median(xs)
  return `${fmtBytes(m)} (${fmtBytes(Math.min(...xs))}–${fmtBytes(Math.max(...xs))})`
}

function markdown(rows, info) {
  const L = []
  L.push(SECTION_START)
  L.push('## Memory per cached entry')
  L.push('')
  L.push(`- date: ${info.date}`)
  L.push(
    `- machine: ${info.machine.cpu}, ${info.machine.mem}, ${info.machine.os}; load average at start ${info.loadStart}, at end ${info.machine.load}`,
  )
  L.push(`- node ${process.version} (V8 ${process.versions.v8}, napi ${process.versions.napi})`)
  L.push(
    `- command: \`${info.command}\` (${RUNS} interleaved runs per library, each a fresh \`node --expose-gc\` process; median (min–max); took ${info.seconds} s)`,
  )
  L.push(
    `- what: ${ENTRIES.toLocaleString('en-US')} distinct keys, each a ~1 KB JSON record (${info.valueBytes} bytes on average: strings, numbers, a nested address and an array of orders; seeded, the same for every library), every library holding a \`JSON.parse\` copy; bytes per entry = (after − before) / ${ENTRIES.toLocaleString('en-US')}, both taken after full GCs`,
  )
  if (info.build) L.push(`- herdcache build: ${info.build}`)
  L.push('')
  L.push('Libraries:')
  L.push('')
  for (const r of rows) L.push(`- **${r.lib}**${r.version !== '—' ? ` ${r.version}` : ''}: ${r.setup}`)
  L.push('')
  const table = (list) => {
    L.push(
      '| library | RSS per entry (bytes) | ÷ js-map | V8 heap used per entry | RSS − heap used per entry (native memory, heap slack) |',
    )
    L.push('|---|---:|---:|---:|---:|')
    for (const r of list) {
      L.push(
        `| ${r.lib} | ${cell(r.rss)} | ${r.ratio === undefined ? '—' : `${r.ratio.toFixed(2)}×`} | ${cell(r.heap)} | ${cell(r.other)} |`,
      )
    }
  }
  table(rows.filter((r) => !r.breakdown))
  L.push('')
  L.push(
    '÷ js-map is the median over rounds of the library RSS per entry ÷ js-map RSS per entry of the same round. The V8 heap column counts JS objects (the values, the keys a JS store keeps, promises); the last column is everything else RSS grew by: native allocations (for herdcache its store and Node-API references) and V8 heap pages that are committed but not in use.',
  )
  const parts = rows.filter((r) => r.breakdown)
  if (parts.length) {
    L.push('')
    L.push("Breakdown of herdcache's fixed cost per entry (the same method, other values):")
    L.push('')
    for (const r of parts) L.push(`- **${r.lib}**: ${r.setup}`)
    L.push('')
    table(parts)
    const m = (name, field) => {
      const r = parts.find((x) => x.lib === name)
      return r && median(r[field])
    }
    const store = m('herdcache-number', 'other')
    const object = m('herdcache-empty-object', 'other')
    const objectHeap = m('herdcache-empty-object', 'heap')
    const mapHeap = m('js-map-empty-object', 'heap')
    if (store !== undefined && object !== undefined) {
      L.push('')
      L.push(
        `The native store costs ~${fmtBytes(store)} bytes per entry (key, entry, map node and table: the number row). ` +
          `An object value adds ~${fmtBytes(object - store)} bytes of native memory: its two napi references (the value and its settled promise; ~${fmtBytes((object - store) / 2)} bytes each: a v8impl::Reference and its V8 global handle)` +
          (objectHeap !== undefined && mapHeap !== undefined
            ? `, and ~${fmtBytes(objectHeap)} bytes of V8 heap (the empty object and the promise), where a Map holding \`{}\` uses ~${fmtBytes(mapHeap)} (the object, the key string and its table slot).`
            : '.'),
      )
    }
  }
  L.push(SECTION_END)
  return L.join('\n')
}

/** Replaces the memory section of `file` (or appends one), keeping the rest. */
function writeSection(file, section) {
  let text = ''
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch {}
  const start = text.indexOf(SECTION_START)
  const end = text.indexOf(SECTION_END)
  if (start !== -1 && end > start) {
    text = text.slice(0, start) + section + text.slice(end + SECTION_END.length)
  } else {
    text = (text ? `${text.replace(/\n*$/, '')}\n\n` : '') + `${section}\n`
  }
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, text)
}

async function main() {
  const t0 = Date.now()
  const names = Object.keys(LIBRARIES).filter((n) => !ONLY || ONLY.has(n))
  if (WITH_BREAKDOWN) names.push(...Object.keys(BREAKDOWN))
  const info = {
    date: isoSeconds(),
    loadStart: loadAvg(),
    command:
      process.env.npm_lifecycle_event === 'bench:memory'
        ? `npm run bench:memory${argv.length ? ' -- ' + argv.join(' ') : ''}`
        : `node bench/memory.js${argv.length ? ' ' + argv.join(' ') : ''}`,
    build: !names.includes('herdcache')
      ? null
      : process.env.HERDCACHE_NATIVE_PATH
        ? `HERDCACHE_NATIVE_PATH=${process.env.HERDCACHE_NATIVE_PATH} (sha256 ${require('node:crypto').createHash('sha256').update(fs.readFileSync(process.env.HERDCACHE_NATIVE_PATH)).digest('hex').slice(0, 12)}…)`
        : herdcacheBuild(path.join(__dirname, '..')),
  }
  let bytes = 0
  for (let i = 0; i < 1000; i++) bytes += Buffer.byteLength(JSON.stringify(record(i)))
  info.valueBytes = Math.round(bytes / 1000)
  console.log(
    `node ${process.version}; ${RUNS} runs × ${ENTRIES} entries of ~${info.valueBytes} bytes; ${names.join(', ')}`,
  )

  const results = new Map(names.map((n) => [n, []]))
  for (let run = 0; run < RUNS; run++) {
    for (const name of names) {
      const r = runChild(name)
      results.get(name).push(r)
      console.log(
        `  run ${run + 1} ${name.padEnd(22)} rss ${fmtBytes(r.rss).padStart(6)} B/entry  heap ${fmtBytes(r.heap).padStart(6)}  other ${fmtBytes(r.other).padStart(6)}`,
      )
    }
  }
  const floor = results.get('js-map')
  const rows = names.map((name) => {
    const rs = results.get(name)
    const lib = LIBRARIES[name] ?? BREAKDOWN[name]
    const row = {
      lib: name,
      breakdown: !LIBRARIES[name],
      version: lib.version(),
      setup: lib.setup(ENTRIES),
      rss: rs.map((r) => r.rss),
      heap: rs.map((r) => r.heap),
      other: rs.map((r) => r.other),
    }
    if (floor && name !== 'js-map' && LIBRARIES[name]) row.ratio = median(rs.map((r, i) => r.rss / floor[i].rss))
    return row
  })
  info.seconds = ((Date.now() - t0) / 1000).toFixed(0)
  info.machine = machine()
  const md = markdown(rows, info)
  writeSection(OUT, md)
  console.log(`\n${md}\n\nwritten to ${path.relative(process.cwd(), OUT)}`)
  if (OUT === path.join(__dirname, 'RESULTS.md') && !ONLY) require('./readme').updateReadmeAfterBench()
}

if (CHILD) {
  child(CHILD).catch((err) => {
    console.error(err)
    process.exit(1)
  })
} else {
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}
