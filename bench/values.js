'use strict'

// Values as applications have them (issue 27, `npm run bench:values`, or
// `node bench/values.js [--quick] [--seconds=S] [--baseline=DIR] [--out=FILE]`):
// a 1 MB Buffer (bytes that do not compress, as an image's) and a 100 KB
// JSON document (an API's answer: records of ids, names, prices, flags),
// each through herdcache (the built-in json format and the msgpackr
// serializer, each with and without `compress`) and through the Redis
// setups of bentocache and cache-manager, in the same run, against a
// redis-server of the bench's own (127.0.0.1, a free port, no persistence;
// it touches no other server).
//
// For each value and library, in a FLUSHALLed Redis:
// - bytes in Redis: one instance (the writer) loads the value under
//   VALUE_KEYS keys and closes; then STRLEN and MEMORY USAGE of the Redis
//   key(s) whose name holds the first key's: what the library stored for
//   one value.
// - cold read µs: a second instance (a fresh process-level cache, its
//   memory empty) reads those keys one at a time, each awaited; the first
//   WARM_KEYS are not timed (the JIT's warm-up), one full GC before them.
//   Its loader must never run (it throws). Median.
// - hit µs: the same instance then reads one key it holds in memory, in a
//   loop, for HIT_SAMPLES samples of HIT_SAMPLE_MS after a full GC; median.
//   The Redis commands the server processed meanwhile are counted, so a
//   "hit" that went to Redis shows.
// - what came back: the value the cold read and the hit answered, against
//   the loader's (the same type and bytes, or what it became).
// The libraries run in turn, in ROUNDS rounds whose order rotates; a
// figure is the median of every round's samples.
//
// Then the plain-JSON hit (bench/hitpath.js's untagged hit: a small JSON
// value, embedded store, `await getOrLoad` in a loop), of this checkout in
// fresh processes for `--seconds` (default 10; quick 3) and, with
// `--baseline=DIR` (another checkout, built: the commit before binary
// values, say), against DIR's, alternating process by process
// (hitpath's againstBaseline).
//
// Writes bench/VALUES.md (with --quick: bench/out/values-quick.md), then the
// README's values section (bench/readme.js).

const fs = require('node:fs')
const path = require('node:path')
const { isDeepStrictEqual } = require('node:util')
const { startRedis } = require('../__test__/redis-server')
const c = require('./common')
const hitpath = require('./hitpath')

c.rejectUnknownArgs(
  /^--(quick|seconds=\d+(\.\d+)?|baseline=.+|out=.+)$/,
  'node bench/values.js [--quick] [--seconds=S] [--baseline=DIR] [--out=FILE]',
)
const QUICK = c.flag('quick')
const ROOT = path.join(__dirname, '..')
const OUT = path.resolve(c.opt('out') ?? path.join(__dirname, QUICK ? 'out/values-quick.md' : 'VALUES.md'))
const SECONDS = Number(c.opt('seconds') ?? (QUICK ? 3 : 10))
const ROUNDS = QUICK ? 1 : 2
const COLD_SAMPLES = QUICK ? 10 : 20 // per round
const WARM_KEYS = 3
const VALUE_KEYS = WARM_KEYS + COLD_SAMPLES
const HIT_SAMPLES = QUICK ? 3 : 5 // per round
const HIT_SAMPLE_MS = QUICK ? 100 : 200
const TTL = 600_000
const HOST = '127.0.0.1'

// ---------------------------------------------------------------- the values

/** `n` bytes that do not compress (xorshift32): what an image or an archive is. */
function incompressible(n) {
  const out = Buffer.alloc(n)
  let state = 0x9e3779b9
  for (let i = 0; i < n; i++) {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    out[i] = state >>> 24
  }
  return out
}

/** An API's answer of about `bytes` of JSON: records of ids, names, prices, flags and short texts. */
function jsonDocument(bytes) {
  const doc = { page: 1, generatedAt: '2026-11-30T12:00:00Z', items: [] }
  for (let i = 0; JSON.stringify(doc).length < bytes; i++) {
    doc.items.push({
      id: i,
      sku: `SKU-${String((i * 7919) % 1_000_000).padStart(6, '0')}`,
      name: `Product ${i} of the catalogue`,
      price: (i % 300) + (i % 100) / 100,
      inStock: i % 3 === 0,
      tags: ['home', 'sale', `t${i % 17}`],
      updatedAt: `2026-11-${String(1 + (i % 28)).padStart(2, '0')}T10:${String(i % 60).padStart(2, '0')}:00Z`,
    })
  }
  return doc
}

const VALUES = [
  { id: 'buffer', title: 'a 1 MB Buffer', value: incompressible(1 << 20) },
  { id: 'json', title: 'a 100 KB JSON document', value: jsonDocument(100 * 1024) },
]

/** What `got` is next to the loader's `want`: 'equal', or what it became. */
function comesBackAs(got, want) {
  if (Buffer.isBuffer(want)) {
    if (Buffer.isBuffer(got)) return got.equals(want) ? 'a Buffer, equal' : 'a Buffer, other bytes'
    if (got?.type === 'Buffer' && Array.isArray(got.data)) {
      const same = got.data.length === want.length && Buffer.from(got.data).equals(want)
      return `\`{ type: 'Buffer', data: [numbers] }\`, not a Buffer (${same ? 'the same bytes' : 'other bytes'})`
    }
    return `a ${got?.constructor?.name ?? typeof got}, not a Buffer`
  }
  return isDeepStrictEqual(got, want) ? 'equal' : 'not equal'
}

// ---------------------------------------------------------------- the libraries

const { pack, unpack } = require('msgpackr')
const msgpackr = { name: 'msgpackr', serialize: (v) => pack(v), deserialize: (b) => unpack(b) }

const herdcache = (options) => (url) => {
  const { Cache } = require(ROOT)
  const cache = new Cache({ redis: url, ttl: TTL, ...options })
  return {
    ready: () => cache.get('__ready__'),
    read: (key, loader) => cache.getOrLoad(key, loader),
    close: () => cache.close(),
  }
}

async function bentocache(url) {
  const { BentoCache, bentostore } = await import('bentocache')
  const { redisDriver } = await import('bentocache/drivers/redis')
  const { memoryDriver } = await import('bentocache/drivers/memory')
  const { port } = new URL(url)
  const store = bentostore()
    .useL1Layer(memoryDriver({ maxItems: 1000 }))
    .useL2Layer(redisDriver({ connection: { host: HOST, port: Number(port) } }))
  const bento = new BentoCache({ default: 'c', ttl: TTL, stores: { c: store } })
  return {
    ready: () => bento.has({ key: '__ready__' }),
    read: (key, factory) => bento.getOrSet({ key, factory }),
    close: () => bento.disconnectAll(),
  }
}

function cacheManager(url) {
  const { createCache } = require('cache-manager')
  const { Keyv, createKeyv } = require('@keyv/redis')
  // cache-manager's own memory store (what createCache() makes without stores): a Keyv that keeps values as they are.
  const memory = new Keyv()
  memory.serialize = undefined
  memory.deserialize = undefined
  const cache = createCache({ stores: [memory, createKeyv(url)], ttl: TTL })
  return {
    ready: () => cache.get('__ready__'),
    read: (key, fn) => cache.wrap(key, fn),
    close: () => cache.disconnect(),
  }
}

const LIBS = [
  { label: 'herdcache json', herd: true, open: herdcache({}) },
  { label: 'herdcache json + compress', herd: true, open: herdcache({ compress: { threshold: 1024 } }) },
  { label: 'herdcache msgpackr', herd: true, open: herdcache({ serializer: msgpackr }) },
  {
    label: 'herdcache msgpackr + compress',
    herd: true,
    open: herdcache({ serializer: msgpackr, compress: { threshold: 1024 } }),
  },
  { label: 'bentocache', open: bentocache },
  { label: 'cache-manager', open: cacheManager },
]

const SETUPS = [
  `herdcache ${require('../package.json').version}: \`new Cache({ redis, ttl })\` (its L1 at its defaults), \`getOrLoad(key, loader)\`; ` +
    "`compress: { threshold: 1024 }` (zstd level 3); `serializer: { name: 'msgpackr', serialize: pack, deserialize: unpack }` " +
    `(msgpackr ${c.pkgVersion('msgpackr')}'s \`pack\`/\`unpack\`)`,
  `bentocache ${c.pkgVersion('bentocache')}: \`bentostore().useL1Layer(memoryDriver({ maxItems: 1000 })).useL2Layer(redisDriver({ connection }))\`, ` +
    '`getOrSet({ key, factory })`; its default serializer (JSON), in Redis and in its L1 (a hit parses the value again). ' +
    '`memoryDriver({ serialize: false })` would keep the L1 unserialized, but with an L2 it crashes the first L1 read ' +
    "of a value read from Redis (bentocache issue #111, open; `Cannot read properties of undefined (reading 'deserialize')`), " +
    'so it is not measured',
  `cache-manager ${c.pkgVersion('cache-manager')} with @keyv/redis ${c.pkgVersion('@keyv/redis')}: \`createCache({ stores: [memory, createKeyv(url)] })\`, ` +
    "`wrap(key, fn)`, the memory store a `Keyv` without serialization (cache-manager's own default store); Keyv's default " +
    'serializer (@keyv/serialize: JSON, a Buffer as a `:base64:` string) in Redis',
]

// ---------------------------------------------------------------- one library, one value

const keyName = (i) => `val-${String(i).padStart(4, '0')}`

/** { keys: [{ name, type, strlen, memory }], dbsize }: the Redis keys holding `key`'s value. */
async function storedBytes(redis, key) {
  const keys = []
  let cursor = '0'
  do {
    const [next, names] = await redis.cmd('SCAN', cursor, 'COUNT', 1000)
    cursor = next
    for (const name of names) {
      if (!name.includes(key)) continue
      const type = await redis.cmd('TYPE', name)
      const strlen = type === 'string' ? await redis.cmd('STRLEN', name) : null
      keys.push({ name, type, strlen, memory: await redis.cmd('MEMORY', 'USAGE', name, 'SAMPLES', '0') })
    }
  } while (cursor !== '0')
  return { keys, dbsize: await redis.cmd('DBSIZE') }
}

/** Redis's count of the commands it processed (INFO stats). */
async function commandsProcessed(redis) {
  const info = await redis.cmd('INFO', 'stats')
  return Number(/total_commands_processed:(\d+)/.exec(info)[1])
}

/** Waits (bounded) until Redis holds `n` keys or more: a write may land after its call is answered. */
async function untilKeys(redis, n, what) {
  const end = c.now() + 5000
  while ((await redis.cmd('DBSIZE')) < n) {
    if (c.now() > end) throw new Error(`${what}: fewer than ${n} keys in Redis after 5 s`)
    await c.sleep(10)
  }
}

/** µs per `await read(key)` of a key the instance holds, over `ms` (at least one call). */
async function hitUs(inst, key, loader, ms) {
  let n = 0
  let last
  const started = c.now()
  const deadline = started + ms
  do {
    last = await inst.read(key, loader)
    n++
  } while (c.now() < deadline)
  return { us: ((c.now() - started) * 1000) / n, calls: n, last }
}

/** One round of one library with one value: bytes (first round), cold read and hit samples. */
async function measure(redis, lib, spec, first) {
  const url = `redis://${HOST}:${redis.port}`
  await redis.cmd('FLUSHALL')
  const writer = await lib.open(url)
  await writer.ready()
  const load = () => spec.value
  for (let i = 0; i < VALUE_KEYS; i++) await writer.read(keyName(i), load)
  await writer.close()
  await untilKeys(redis, VALUE_KEYS, lib.label)
  const stored = first ? await storedBytes(redis, keyName(0)) : undefined

  const reader = await lib.open(url)
  await reader.ready()
  let loads = 0
  const refuse = () => {
    loads++
    throw new Error(`${lib.label}: the reader's loader ran: the value was not read from Redis`)
  }
  const cold = []
  let coldValue
  c.gc() // once: right after a full GC the next call pays for the sweep (~0.5 ms here), which no read pays in service
  for (let i = VALUE_KEYS - 1; i >= 0; i--) {
    const started = c.now()
    const value = await reader.read(keyName(i), refuse)
    const us = (c.now() - started) * 1000
    if (i < COLD_SAMPLES) cold.push(us)
    coldValue = value
  }
  const hot = keyName(0)
  const hits = []
  let hitCalls = 0
  let hitValue
  const commandsBefore = await commandsProcessed(redis)
  for (let s = 0; s < HIT_SAMPLES; s++) {
    c.gc()
    const { us, calls, last } = await hitUs(reader, hot, refuse, HIT_SAMPLE_MS)
    hits.push(us)
    hitCalls += calls
    hitValue = last
  }
  const hitCommands = (await commandsProcessed(redis)) - commandsBefore - 1 // INFO itself
  await reader.close()
  if (loads !== 0) throw new Error(`${lib.label}: the reader's loader ran ${loads} times`)
  return {
    stored,
    cold,
    hits,
    hitCommands,
    hitCalls,
    cold_as: comesBackAs(coldValue, spec.value),
    hit_as: comesBackAs(hitValue, spec.value),
  }
}

async function valuesTables(redis) {
  const results = new Map(VALUES.flatMap((spec) => LIBS.map((lib) => [`${spec.id}/${lib.label}`, undefined])))
  for (let round = 0; round < ROUNDS; round++) {
    const order = LIBS.map((_, i) => LIBS[(i + round * 3) % LIBS.length])
    for (const spec of VALUES) {
      for (const lib of order) {
        const id = `${spec.id}/${lib.label}`
        const got = await measure(redis, lib, spec, round === 0)
        const before = results.get(id)
        if (before === undefined) results.set(id, got)
        else {
          before.cold.push(...got.cold)
          before.hits.push(...got.hits)
          before.hitCommands += got.hitCommands
          before.hitCalls += got.hitCalls
          if (got.cold_as !== before.cold_as || got.hit_as !== before.hit_as) throw new Error(`${id}: rounds differ`)
        }
        console.log(
          `${spec.title.padEnd(24)} ${lib.label.padEnd(34)} cold ${c.median(got.cold).toFixed(0).padStart(7)} µs` +
            `  hit ${c.median(got.hits).toFixed(3).padStart(10)} µs  ${got.cold_as}`,
        )
      }
    }
  }
  return VALUES.map((spec) => ({
    spec,
    rows: LIBS.map((lib) => {
      const r = results.get(`${spec.id}/${lib.label}`)
      return {
        lib,
        strlen: r.stored.keys.reduce((sum, k) => sum + (k.strlen ?? 0), 0),
        memory: r.stored.keys.reduce((sum, k) => sum + k.memory, 0),
        keys: r.stored.keys,
        dbsize: r.stored.dbsize,
        cold: c.median(r.cold),
        coldSamples: r.cold.length,
        hit: c.median(r.hits),
        hitSamples: r.hits.length,
        hitCommands: r.hitCommands,
        hitCalls: r.hitCalls,
        cold_as: r.cold_as,
        hit_as: r.hit_as,
      }
    }),
  }))
}

// ---------------------------------------------------------------- the plain-JSON hit

function plainHit() {
  const baseline = c.opt('baseline')
  if (baseline !== undefined) return hitpath.againstBaseline(path.resolve(baseline), SECONDS)
  hitpath.hitInChild(ROOT)
  const ours = []
  const end = c.now() + SECONDS * 1000
  while (ours.length < 3 || c.now() < end) ours.push(hitpath.hitInChild(ROOT))
  console.log(`plain-JSON hit, ${ours.length} processes: ${c.median(ours).toFixed(1)} ns/op`)
  return { ours }
}

// ---------------------------------------------------------------- the report

/** µs with 3 significant figures (at least one decimal below 10). */
function fmtUs(us) {
  if (us >= 100) return us.toFixed(0)
  if (us >= 10) return us.toFixed(1)
  if (us >= 1) return us.toFixed(2)
  return us.toFixed(3)
}
const fmtBytes = (n) => n.toLocaleString('en-US').replace(/,/g, ' ')
const perHit = (commands, calls) =>
  commands === 0
    ? '0'
    : commands / calls < 0.01
      ? `${commands} in ${fmtBytes(calls)} hits`
      : (commands / calls).toFixed(2)
const ratio = (x, best) => `${(x / best).toFixed(x / best >= 10 ? 0 : 2)}×`

function valueTable(L, { spec, rows }) {
  const peers = rows.filter((r) => !r.lib.herd)
  const best = (field) => Math.min(...peers.map((r) => r[field]))
  L.push(`## ${spec.title[0].toUpperCase()}${spec.title.slice(1)}`, '')
  L.push(
    '| library | bytes in Redis | MEMORY USAGE | bytes ÷ best peer | cold read µs | cold ÷ best peer | hit µs | hit ÷ best peer | Redis commands per hit | comes back as |',
  )
  L.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---|')
  for (const r of rows) {
    const as = r.cold_as === r.hit_as ? r.cold_as : `${r.cold_as} (cold), ${r.hit_as} (hit)`
    L.push(
      `| ${r.lib.label} | ${fmtBytes(r.strlen)} | ${fmtBytes(r.memory)} | ${ratio(r.strlen, best('strlen'))} | ` +
        `${fmtUs(r.cold)} | ${ratio(r.cold, best('cold'))} | ${fmtUs(r.hit)} | ${ratio(r.hit, best('hit'))} | ` +
        `${perHit(r.hitCommands, r.hitCalls)} | ${as} |`,
    )
  }
  L.push('')
  const keys = rows.map((r) => {
    const names = r.keys.map((k) => `\`${k.name}\` (${k.type})`).join(', ')
    const extra = r.dbsize > VALUE_KEYS * r.keys.length ? ` (${r.dbsize - VALUE_KEYS * r.keys.length} more keys)` : ''
    return `${r.lib.label} ${names}${extra}`
  })
  L.push(`The Redis key(s) of one value: ${keys.join('; ')}.`, '')
}

function markdown(tables, hit, info) {
  const L = []
  L.push('# Values as applications have them: bytes in Redis, cold reads, hits', '')
  L.push(`- date: ${info.date}`)
  L.push(
    `- machine: ${info.machine.cpu}, ${info.machine.mem}, ${info.machine.os}; load average at start ${info.loadStart}, at end ${info.machine.load}`,
  )
  L.push(`- node ${process.version}, ${info.redisVersion}`)
  L.push(`- command: \`${info.command}\` (took ${info.seconds} s)`)
  const build = c.herdcacheBuild(ROOT)
  if (build) L.push(`- herdcache build: ${build}`)
  for (const setup of SETUPS) L.push(`- ${setup}`)
  L.push(
    `- method: per value and library, in a FLUSHALLed Redis, a writer instance loads the value under ${VALUE_KEYS} keys and ` +
      'closes. "bytes in Redis" is the STRLEN of the Redis key(s) holding the first (MEMORY USAGE beside it: what the ' +
      `server spends, key and overhead included). A second instance (its memory empty) then reads the keys one at a time, ` +
      `one full GC before them, its loader never run: "cold read" is the median of the last ${COLD_SAMPLES} reads per round ` +
      `(${WARM_KEYS} untimed first). Then it reads one key it holds in a loop, ${HIT_SAMPLES} samples of ${HIT_SAMPLE_MS} ms ` +
      'per round after a full GC: "hit" is the median µs per `await`. "Redis commands per hit" counts what the server ' +
      "processed meanwhile (the few herdcache's rows show, a couple in millions of hits, are not the hits': it sends " +
      'them on its own). "÷ best peer": the figure over the lowest of the peer rows in its column. The libraries run ' +
      `in turn, ${ROUNDS} round(s), the order rotating; a figure is the median of every round's samples.`,
  )
  L.push('')
  for (const table of tables) valueTable(L, table)
  L.push('## The plain-JSON hit, before and after', '')
  const what = hitpath.BASELINE_HIT
  if (hit.theirs === undefined) {
    L.push(hitpath.withoutBaseline(hit, c.median))
  } else {
    L.push(
      `${what}, against ${hit.root}, alternating process by process, ${hit.ours.length} each: this checkout ` +
        `${c.median(hit.ours).toFixed(1)} ns/op, the baseline ${c.median(hit.theirs).toFixed(1)} ns/op; this ÷ baseline ` +
        `${c.median(hit.ratios).toFixed(2)}× (the median of the per-round ratios).`,
    )
  }
  L.push('')
  return L.join('\n')
}

// ---------------------------------------------------------------- main

async function main() {
  const started = c.now()
  const loadStart = c.loadAvg()
  const redisVersion = require('node:child_process').execFileSync('redis-server', ['--version'], { encoding: 'utf8' })
  const redis = await startRedis(null)
  if (redis === null) throw new Error('redis-server is not installed (apt-get install redis-server)')
  let tables
  try {
    tables = await valuesTables(redis)
  } finally {
    await redis.stop()
  }
  const hit = plainHit()
  const info = {
    date: c.isoSeconds(),
    machine: c.machine(),
    loadStart,
    redisVersion: `redis-server ${(/v=([\d.]+)/.exec(redisVersion) || [])[1] ?? '?'}`,
    command: c.commandLine('bench/values.js'),
    seconds: ((c.now() - started) / 1000).toFixed(0),
  }
  const md = markdown(tables, hit, info)
  fs.mkdirSync(path.dirname(OUT), { recursive: true })
  fs.writeFileSync(OUT, md)
  console.log(`wrote ${path.relative(process.cwd(), OUT)}`)
  if (OUT === path.join(__dirname, 'VALUES.md')) require('./readme').updateReadmeAfterBench()
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
