'use strict'

// herdcache memory benchmark: the bytes one cached ~1 KB entry costs, next to
// a JS `Map` holding the same JSON-parsed values (the floor) and the peers
// bench/run.js measures (lru-cache, bentocache in memory, cache-manager), on
// two value shapes: a flat record of strings and numbers, and a nested record
// with arrays (`npm run bench:memory`, or `node bench/memory.js [--quick]`).
//
// Method: every measurement is a fresh child process (`node --expose-gc`),
// so one library's garbage, JIT code or malloc arenas never count for
// another. The child loads the library, fills a throwaway instance with a
// few entries (so code and caches exist before the baseline), collects it,
// and takes the baseline; then it fills a new instance with ENTRIES distinct
// keys through the library's normal path, collects garbage again (several
// full GCs and a short wait), and reads RSS and the V8 heap. Per entry:
// (after − before) / ENTRIES. The values are the same for every library:
// record i of a shape is made by `SHAPES[shape].make(i)`, seeded by i with
// scripts/prng.js, and every library is handed a `JSON.parse` copy of it
// (herdcache makes that copy itself; bentocache keeps it serialized, its
// default). Runs are interleaved (round 1: every library on every shape,
// round 2: ...) and a figure is the median of its runs, with the range
// beside it: RSS moves with the machine.
//
// Options:
//   --quick          3 runs of 20 000 entries (a smoke run); writes bench/out/memory-quick.md
//   --runs=N         runs per library and shape (default 5, at least 3)
//   --entries=N      entries per run (default 100 000)
//   --only=a,b       libraries (herdcache,js-map,lru-cache,bentocache,cache-manager); leaves the breakdown out
//   --shapes=a,b     value shapes (flat,nested; default both)
//   --breakdown      also measure the breakdown (herdcache-number, herdcache-empty-object,
//                    js-map-empty-object: where herdcache's fixed bytes go); on by default
//                    without --quick and --only
//   --out=FILE       the Markdown file whose memory section is (re)written
//                    (default bench/RESULTS.md, which bench/run.js writes first)
//
// Internal: `--child=<lib> --shape=<shape> --entries=N` runs one measurement and prints it as JSON.

const fs = require('node:fs')
const v8 = require('node:v8')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const {
  argv,
  flag,
  opt,
  rejectUnknownArgs,
  median,
  isoSeconds,
  loadAvg,
  machine,
  pkgVersion,
  herdcacheBuild,
  memoryPeers,
} = require('./common')
const { mulberry32 } = require('../scripts/prng')

rejectUnknownArgs(
  /^--(quick|breakdown|runs=\d+|entries=\d+|only=.+|shapes=.+|out=.+|child=.+|shape=.+)$/,
  'node bench/memory.js [--quick] [--breakdown] [--runs=N] [--entries=N] [--only=lib,lib] [--shapes=flat,nested] [--out=FILE]',
)
const QUICK = flag('quick')
const RUNS = Math.max(3, Number(opt('runs') ?? (QUICK ? 3 : 5)))
const ENTRIES = Number(opt('entries') ?? (QUICK ? 20_000 : 100_000))
const ONLY = opt('only') ? new Set(opt('only').split(',')) : null
const OUT = opt('out') ? path.resolve(opt('out')) : path.join(__dirname, QUICK ? 'out/memory-quick.md' : 'RESULTS.md')
const CHILD = opt('child')
const CHILD_SHAPE = opt('shape')
const WITH_BREAKDOWN = flag('breakdown') || (!QUICK && !ONLY)

const TTL = 600_000 // no entry expires during a run
const WARMUP_ENTRIES = 500
const SECTION_START = '<!-- memory: written by bench/memory.js -->'
const SECTION_END = '<!-- /memory -->'

// ---------------------------------------------------------------- the values

const WORDS = ['alpha', 'bravo', 'delta', 'echo', 'kilo', 'lima', 'oscar', 'papa', 'romeo', 'sierra', 'tango', 'zulu']
const STATUSES = ['active', 'pending', 'suspended', 'closed']
const PLANS = ['free', 'starter', 'team', 'business', 'enterprise']
const LOCALES = ['en-GB', 'en-US', 'de-DE', 'fr-FR', 'es-ES', 'it-IT', 'nl-NL', 'pt-BR']
const ZONES = ['Europe/London', 'Europe/Berlin', 'America/New_York', 'America/Sao_Paulo', 'Asia/Tokyo']

/** Helpers over one seeded generator: pick, hex digits, decimal digits, a date. */
function draws(seed) {
  const rnd = mulberry32(seed)
  const pick = (xs) => xs[Math.floor(rnd() * xs.length)]
  const hex = (n) =>
    Array.from({ length: n }, () =>
      Math.floor(rnd() * 16)
        .toString(16)
        .toUpperCase(),
    ).join('')
  const digits = (n) => Array.from({ length: n }, () => Math.floor(rnd() * 10)).join('')
  const date = () => new Date(1.6e12 + Math.floor(rnd() * 1e11)).toISOString()
  return { rnd, pick, hex, digits, date }
}

/**
 * Nested record `i`: a customer with a few strings, numbers, a nested address
 * and a nested array of orders, about 1 KB as JSON. Seeded by `i`, so every
 * library (and every run) gets the same record for the same key.
 * @param {number} i
 */
function nestedRecord(i) {
  const { rnd, pick, hex } = draws(0x6d656d ^ i)
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

/**
 * Flat record `i`: one row of an account table, strings and numbers only (no
 * nested object, no array), the same 33 fields in the same order for every
 * record; the free-text `notes` grows until the JSON reaches 1 000 bytes.
 * @param {number} i
 */
function flatRecord(i) {
  const { rnd, pick, hex, digits, date } = draws(0x666c74 ^ i)
  const first = pick(WORDS)
  const last = pick(WORDS)
  const value = {
    id: i,
    uuid: `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`.toLowerCase(),
    firstName: first,
    lastName: last,
    email: `${first}.${last}.${i}@example.com`,
    phone: `+44 ${digits(4)} ${digits(6)}`,
    status: pick(STATUSES),
    plan: pick(PLANS),
    company: `${pick(WORDS)} ${pick(WORDS)} ltd`,
    jobTitle: `${pick(['senior', 'lead', 'staff', 'junior'])} ${pick(['engineer', 'analyst', 'designer', 'manager'])}`,
    street: `${1 + Math.floor(rnd() * 999)} ${pick(WORDS)} street`,
    city: pick(WORDS),
    zip: hex(5),
    country: pick(['GB', 'US', 'DE', 'FR', 'ES', 'IT', 'NL', 'BR']),
    locale: pick(LOCALES),
    timezone: pick(ZONES),
    createdAt: date(),
    updatedAt: date(),
    lastLoginAt: date(),
    referrer: `https://${pick(WORDS)}.example.org/${hex(10).toLowerCase()}`,
    userAgent: `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/${100 + Math.floor(rnd() * 30)}.0.${digits(4)}.${digits(2)}`,
    score: Math.round(rnd() * 1e6) / 100,
    balance: Math.round(rnd() * 1e8) / 100,
    creditLimit: 1000 * (1 + Math.floor(rnd() * 50)),
    loginCount: Math.floor(rnd() * 5000),
    age: 18 + Math.floor(rnd() * 70),
    latitude: Math.round((rnd() * 180 - 90) * 1e6) / 1e6,
    longitude: Math.round((rnd() * 360 - 180) * 1e6) / 1e6,
    seats: 1 + Math.floor(rnd() * 200),
    invoices: Math.floor(rnd() * 120),
    rating: Math.round(rnd() * 50) / 10,
    version: 1 + Math.floor(rnd() * 40),
    notes: '',
  }
  while (JSON.stringify(value).length < 1000) value.notes += (value.notes ? ' ' : '') + pick(WORDS)
  return value
}

const SHAPES = {
  flat: {
    make: flatRecord,
    title: 'flat record: strings and numbers',
    what: '33 fields of strings and numbers, no nested object or array (an account row)',
  },
  nested: {
    make: nestedRecord,
    title: 'nested record with arrays',
    what: 'strings, numbers, a nested address, an array of 3 tags and an array of order objects',
  },
}
const SHAPE_NAMES = opt('shapes') ? opt('shapes').split(',') : Object.keys(SHAPES)
for (const s of [...SHAPE_NAMES, ...(CHILD_SHAPE ? [CHILD_SHAPE] : [])])
  if (!SHAPES[s]) throw new Error(`unknown shape ${s} (flat, nested)`)

const keyOf = (i) => `customer:${i}`
const jsonCopy = (v) => JSON.parse(JSON.stringify(v))
const indexOf = (key, prefix) => Number(key.slice(prefix.length))

// ---------------------------------------------------------------- libraries

// Each library: setup (for the report), and fill(n, prefix, make) -> { holder, get, count?, close? }
// that stores n records (`make(i)`) through the library's normal path and keeps them; `get(key)`
// answers a stored record (a promise), `count` is the number of entries when the library says.
const LIBRARIES = {
  herdcache: {
    version: () => require('../package.json').version,
    setup: (n) =>
      `\`new Cache({ ttl, maxEntries: ${n} })\`, \`await getOrLoad(key, loader)\` per key (the loader returns \`record(i)\`; herdcache stores its JSON copy)`,
    async fill(n, prefix, make) {
      const { Cache } = require('..')
      const cache = new Cache({ ttl: TTL, maxEntries: Math.max(n, 1) })
      const loader = ({ key }) => make(indexOf(key, prefix))
      for (let i = 0; i < n; i++) await cache.getOrLoad(prefix + i, loader)
      const stats = cache.stats()
      return {
        holder: cache,
        get: (key) => cache.get(key),
        close: () => cache.close(),
        count: stats.size ?? stats.entries ?? n,
        check: stats,
      }
    },
  },
  'js-map': {
    version: () => '—',
    setup: () => '`map.set(key, JSON.parse(JSON.stringify(record(i))))`: the floor',
    async fill(n, prefix, make) {
      const map = new Map()
      for (let i = 0; i < n; i++) map.set(prefix + i, jsonCopy(make(i)))
      return { holder: map, get: async (key) => map.get(key), count: map.size }
    },
  },
  'lru-cache': {
    version: () => pkgVersion('lru-cache'),
    setup: (n) =>
      `\`new LRUCache({ max: ${n}, ttl, fetchMethod })\`, \`await fetch(key)\` per key (fetchMethod returns the JSON copy)`,
    async fill(n, prefix, make) {
      const { LRUCache } = require('lru-cache')
      const cache = new LRUCache({
        max: Math.max(n, 1),
        ttl: TTL,
        fetchMethod: (key) => jsonCopy(make(indexOf(key, prefix))),
      })
      for (let i = 0; i < n; i++) await cache.fetch(prefix + i)
      return { holder: cache, get: async (key) => cache.get(key), count: cache.size }
    },
  },
  // The peers as bench/run.js sets them up (bench/common.js's memoryPeers), bounded to n.
  bentocache: {
    version: () => pkgVersion('bentocache'),
    setup: (n) =>
      `${PEERS.bentocache.setup(n)} per key (the factory returns the JSON copy; bentocache keeps it serialized, a JSON string)`,
    async fill(n, prefix, make) {
      const bento = PEERS.bentocache.create({ ttl: TTL, maxItems: Math.max(n, 1) })
      for (let i = 0; i < n; i++) {
        const key = prefix + i
        await bento.getOrSet({ key, factory: () => jsonCopy(make(i)) })
      }
      return { holder: bento, get: (key) => bento.get({ key }), close: () => bento.disconnectAll() }
    },
  },
  'cache-manager': {
    version: () => pkgVersion('cache-manager'),
    setup: () =>
      `${PEERS['cache-manager'].setup(TTL)} per key (fn returns the JSON copy; Keyv keeps it as it is, in a \`{ value, expires }\` wrapper)`,
    async fill(n, prefix, make) {
      const cache = PEERS['cache-manager'].create({ ttl: TTL })
      for (let i = 0; i < n; i++) await cache.wrap(prefix + i, () => jsonCopy(make(i)), TTL)
      const store = cache.stores[0]?.store
      return {
        holder: cache,
        get: (key) => cache.get(key),
        close: () => cache.disconnect(),
        count: store instanceof Map ? store.size : undefined,
      }
    },
  },
}
let PEERS = null // memoryPeers(), loaded by the child that needs it

// The breakdown (`--breakdown`): herdcache's fixed cost per entry, apart from
// the value. Every value is held in a slot of the addon's value table, a JS
// array (src/binding/held.rs): a small integer takes the slot alone, an
// empty object the slot and the object.
const BREAKDOWN = {
  'herdcache-number': {
    version: () => require('../package.json').version,
    setup: () => '`set(key, i)`: the store (key, entry, index) and a slot of the value table (a small integer)',
    async fill(n, prefix) {
      const { Cache } = require('..')
      const cache = new Cache({ ttl: TTL, maxEntries: Math.max(n, 1) })
      for (let i = 0; i < n; i++) cache.set(prefix + i, i)
      return { holder: cache, count: cache.stats().size }
    },
  },
  'herdcache-empty-object': {
    version: () => require('../package.json').version,
    setup: () => '`set(key, {})`: the store, a slot of the value table, an empty object',
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

async function child(name, shape) {
  const lib = LIBRARIES[name] ?? BREAKDOWN[name]
  if (!lib) throw new Error(`unknown library ${name}`)
  if (typeof global.gc !== 'function') throw new Error('run the child with node --expose-gc')
  if (name === 'bentocache' || name === 'cache-manager') PEERS = await memoryPeers()
  const make = SHAPES[shape ?? 'nested'].make
  // Warm-up: code compiled, allocator and caches primed; then collected.
  let warm = await lib.fill(WARMUP_ENTRIES, 'warm:', make)
  const close = warm.close ?? (warm.holder.close && (() => warm.holder.close()))
  if (close) await close()
  warm = null
  churn()
  await settle()
  const before = snapshot()
  let filled = await lib.fill(ENTRIES, 'customer:', make)
  await settle()
  const after = snapshot()
  if (filled.count !== undefined && filled.count !== ENTRIES)
    throw new Error(`${name} holds ${filled.count} entries, expected ${ENTRIES}`)
  // Still held (and still answering) at the end: nothing was collected or evicted early.
  if (LIBRARIES[name]) {
    for (const i of [0, 7, ENTRIES >> 1, ENTRIES - 1]) {
      const probe = await filled.get(keyOf(i))
      if (!probe || probe.id !== i || JSON.stringify(probe) !== JSON.stringify(make(i)))
        throw new Error(`${name} lost record ${i} (${shape})`)
    }
  }
  const out = { lib: name, shape, entries: ENTRIES, before, after, check: filled.check }
  filled = null
  process.stdout.write(JSON.stringify(out))
}

// ---------------------------------------------------------------- parent

function runChild(name, shape) {
  const out = execFileSync(
    process.execPath,
    [
      '--expose-gc',
      '--min-semi-space-size=16',
      '--max-semi-space-size=16',
      __filename,
      `--child=${name}`,
      ...(shape ? [`--shape=${shape}`] : []),
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
    `- command: \`${info.command}\` (${RUNS} interleaved runs per library and shape, each a fresh \`node --expose-gc\` process; median (min–max); took ${info.seconds} s)`,
  )
  L.push(
    `- what: ${ENTRIES.toLocaleString('en-US')} distinct keys, each a ~1 KB JSON record of one of ${SHAPE_NAMES.length} shape${SHAPE_NAMES.length > 1 ? 's' : ''} (below; seeded, the same for every library), every library handed a \`JSON.parse\` copy (herdcache makes its own); bytes per entry = (after − before) / ${ENTRIES.toLocaleString('en-US')}, both taken after full GCs`,
  )
  if (info.build) L.push(`- herdcache build: ${info.build}`)
  L.push('')
  L.push('Libraries:')
  L.push('')
  const seen = new Set()
  for (const r of rows.filter((r) => !r.breakdown)) {
    if (seen.has(r.lib)) continue
    seen.add(r.lib)
    L.push(`- **${r.lib}**${r.version !== '—' ? ` ${r.version}` : ''}: ${r.setup}`)
  }
  L.push('')
  L.push('Value shapes:')
  L.push('')
  for (const shape of SHAPE_NAMES)
    L.push(`- **${shape}**: ${SHAPES[shape].what}; ${info.valueBytes[shape]} bytes of JSON on average`)
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
  SHAPE_NAMES.forEach((shape, k) => {
    L.push('')
    L.push(
      `### (${String.fromCharCode(97 + k)}) ${SHAPES[shape].title} (${shape}, ${info.valueBytes[shape]} bytes of JSON on average)`,
    )
    L.push('')
    table(rows.filter((r) => !r.breakdown && r.shape === shape))
  })
  L.push('')
  L.push(
    '÷ js-map is the median over rounds of the library RSS per entry ÷ js-map RSS per entry of the same round and shape. The V8 heap column counts JS objects (the values, the keys a JS store keeps, promises, a peer’s entry wrappers); the last column is everything else RSS grew by: native allocations (for herdcache its store and Node-API references) and V8 heap pages that are committed but not in use. ' +
      'bentocache keeps each value as its JSON string (its L1 is serialized by default, and parses it again on every hit), so it holds no parsed object at all; the others hold the parsed object.',
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
    const slotHeap = m('herdcache-number', 'heap')
    const objectHeap = m('herdcache-empty-object', 'heap')
    const mapHeap = m('js-map-empty-object', 'heap')
    if (store !== undefined && slotHeap !== undefined) {
      L.push('')
      L.push(
        `The native store costs ~${fmtBytes(store)} bytes per entry (its slot in the slab: key, entry and LRU links; its index cell: the number row's native memory), ` +
          `and the value table's slot ~${fmtBytes(slotHeap)} bytes of V8 heap (the number row's heap: a small integer is no object)` +
          (objectHeap !== undefined && mapHeap !== undefined
            ? `. With an empty object, the V8 heap per entry is ~${fmtBytes(objectHeap)} bytes (the slot and the object), where a Map holding \`{}\` uses ~${fmtBytes(mapHeap)} (the object, the key string and its table slot).`
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
  info.valueBytes = {}
  for (const shape of SHAPE_NAMES) {
    let bytes = 0
    for (let i = 0; i < 1000; i++) bytes += Buffer.byteLength(JSON.stringify(SHAPES[shape].make(i)))
    info.valueBytes[shape] = Math.round(bytes / 1000)
  }
  if (names.some((n) => n === 'bentocache' || n === 'cache-manager')) PEERS = await memoryPeers()
  // One measurement: a library on a shape, or a breakdown row (its own values).
  const units = [
    ...SHAPE_NAMES.flatMap((shape) => names.filter((n) => LIBRARIES[n]).map((lib) => ({ lib, shape }))),
    ...names.filter((n) => !LIBRARIES[n]).map((lib) => ({ lib, shape: null })),
  ]
  const id = (u) => (u.shape ? `${u.lib} ${u.shape}` : u.lib)
  console.log(
    `node ${process.version}; ${RUNS} runs × ${ENTRIES} entries; shapes ${SHAPE_NAMES.map((s) => `${s} ~${info.valueBytes[s]} bytes`).join(', ')}; ${names.join(', ')}`,
  )

  const results = new Map(units.map((u) => [id(u), []]))
  for (let run = 0; run < RUNS; run++) {
    for (const u of units) {
      const r = runChild(u.lib, u.shape)
      results.get(id(u)).push(r)
      console.log(
        `  run ${run + 1} ${id(u).padEnd(24)} rss ${fmtBytes(r.rss).padStart(6)} B/entry  heap ${fmtBytes(r.heap).padStart(6)}  other ${fmtBytes(r.other).padStart(6)}`,
      )
    }
  }
  const rows = units.map((u) => {
    const rs = results.get(id(u))
    const lib = LIBRARIES[u.lib] ?? BREAKDOWN[u.lib]
    const row = {
      lib: u.lib,
      shape: u.shape,
      breakdown: !LIBRARIES[u.lib],
      version: lib.version(),
      setup: lib.setup(ENTRIES),
      rss: rs.map((r) => r.rss),
      heap: rs.map((r) => r.heap),
      other: rs.map((r) => r.other),
    }
    const floor = u.shape && results.get(id({ lib: 'js-map', shape: u.shape }))
    if (floor && u.lib !== 'js-map') row.ratio = median(rs.map((r, i) => r.rss / floor[i].rss))
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
  child(CHILD, CHILD_SHAPE).catch((err) => {
    console.error(err)
    process.exit(1)
  })
} else {
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}
