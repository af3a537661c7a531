'use strict'

// The hit path as the application uses the cache (README, "Tags" and
// "Tracing"): an untagged entry, a tagged one while tags are in use, and an
// untagged one with a subscriber to `herdcache:getOrLoad`. Run by
// `npm run bench` (after the peers' scenarios); writes bench/HITPATH.md, keeping
// the section bench/hitprofile.js wrote there (where a hit's time goes).
//
//   node bench/hitpath.js [--seconds=4] [--baseline=DIR] [--out=FILE]
//
// Method: one cache, warm keys, `await cache.getOrLoad(key, loader,
// options)` in a loop (bench/run.js's "hit, 1 in flight"). Rounds alternate,
// in one process, between the variants (the order rotating within a round);
// the subscriber handles all five events and does nothing (so what is timed
// is herdcache's tracing and diagnostics_channel's publishing, not a
// tracer). Each sample is SAMPLE_MS after a full GC; a figure is the median
// of its samples, a ratio the median of the per-round ratios. Every
// unsubscribed sample after the first round runs after a subscribe and an
// unsubscribe: what an application that stops tracing gets.
//
// --baseline=DIR: then the untagged, unsubscribed hit of this checkout and
// of DIR (another checkout with its addon, such as the commit before a
// change near the hot path), each sample in a fresh process, alternating; a
// process of each runs before the timed ones. bench/values.js measures the
// plain-JSON hit (before and after binary values) with the same functions.

const fs = require('node:fs')
const path = require('node:path')
const diagnostics_channel = require('node:diagnostics_channel')
const { execFileSync } = require('node:child_process')
const { opt, rejectUnknownArgs, gc, now, median, machine } = require('./common')

const OUT = path.resolve(opt('out') ?? path.join(__dirname, 'HITPATH.md'))
const ROOT = path.join(__dirname, '..')
const SECONDS = Number(opt('seconds') ?? 4)
const SAMPLE_MS = 200
const BATCH = 256
const noop = () => {}
const SUBSCRIBER = { start: noop, end: noop, asyncStart: noop, asyncEnd: noop, error: noop }
const loader = () => ({ id: 42, items: [1, 2, 3] })

/** ns per `await getOrLoad` of a warm key, over `ms`. */
async function hitNs(cache, ms) {
  let n = 0
  let last
  const started = now()
  const deadline = started + ms
  do {
    for (let i = 0; i < BATCH; i++) last = await cache.getOrLoad('hot', loader)
    n += BATCH
  } while (now() < deadline)
  if (last?.id !== 42) throw new Error('not the cached value')
  return ((now() - started) * 1e6) / n
}

/** A cache of the checkout at `root`, its key warm. */
async function warmCache(root) {
  const { Cache } = require(root)
  const cache = new Cache()
  await cache.getOrLoad('hot', loader)
  return cache
}

const fmt = (ns) => ns.toFixed(1)

/**
 * The variants timed against each other in one process: what a hit costs as
 * the application uses the cache.
 */
const VARIANTS = [
  { id: 'plain', title: 'untagged entry, nobody subscribed', key: 'hot' },
  { id: 'options', title: 'untagged entry, call options `{ ttl }`', key: 'hot', options: { ttl: 60_000 } },
  {
    id: 'tagged',
    title: 'tagged entry, call options `{ tags }` (2 tags)',
    key: 'hot-tagged',
    options: { tags: ['user:42', 'tenant:7'] },
  },
  { id: 'traced', title: 'untagged entry, a subscriber to getOrLoad', key: 'hot', traced: true },
]

/** ns per `await getOrLoad(key, loader, options)` of a warm key, over `ms`. */
async function variantNs(cache, variant, ms) {
  const { options } = variant
  let n = 0
  let last
  const started = now()
  const deadline = started + ms
  do {
    for (let i = 0; i < BATCH; i++) last = await cache.getOrLoad(variant.key, loader, options)
    n += BATCH
  } while (now() < deadline)
  if (last?.id !== 42) throw new Error('not the cached value')
  return ((now() - started) * 1e6) / n
}

async function inProcess() {
  const { channels } = require(ROOT)
  const cache = await warmCache(ROOT)
  const tagged = VARIANTS.find((v) => v.id === 'tagged')
  await cache.getOrLoad(tagged.key, loader, tagged.options)
  // Tags in use: a thousand others invalidated (their stamps known).
  await cache.deleteByTag(Array.from({ length: 50 }, (_, i) => `other:${i}`))
  for (let i = 0; i < 20; i++) await cache.deleteByTag(Array.from({ length: 50 }, (_, j) => `more:${i}:${j}`))
  const channel = diagnostics_channel.tracingChannel(channels.getOrLoad)
  const sample = async (variant) => {
    if (variant.traced) channel.subscribe(SUBSCRIBER)
    gc()
    try {
      return await variantNs(cache, variant, SAMPLE_MS)
    } finally {
      if (variant.traced) channel.unsubscribe(SUBSCRIBER)
    }
  }
  for (const variant of VARIANTS) await sample(variant) // warm-up
  const times = new Map(VARIANTS.map((v) => [v.id, []]))
  const ratios = new Map(VARIANTS.map((v) => [v.id, []]))
  const end = now() + SECONDS * 1000
  let rounds = 0
  for (; rounds < 3 || now() < end; rounds++) {
    // The order rotates, so no variant always runs first after the GC.
    const order = VARIANTS.map((_, i) => VARIANTS[(i + rounds) % VARIANTS.length])
    const round = new Map()
    for (const variant of order) round.set(variant.id, await sample(variant))
    for (const variant of VARIANTS) {
      times.get(variant.id).push(round.get(variant.id))
      ratios.get(variant.id).push(round.get(variant.id) / round.get('plain'))
    }
  }
  const stats = cache.stats()
  if (stats.loads !== 2 || stats.misses !== 2) throw new Error(`the keys did not stay warm: ${JSON.stringify(stats)}`)
  await cache.close()
  const rows = VARIANTS.map((variant) => ({
    ...variant,
    ns: median(times.get(variant.id)),
    ratio: median(ratios.get(variant.id)),
  }))
  console.log(`hit path, ${rounds} rounds of ${SAMPLE_MS} ms per variant (medians):`)
  for (const row of rows) {
    console.log(`  ${row.title.padEnd(44)} ${fmt(row.ns).padStart(7)} ns/op  ${row.ratio.toFixed(2)}× the untagged hit`)
  }
  return { rows, rounds }
}

/** bench/HITPATH.md: the in-process table, and the baseline comparison when one ran. */
function markdown({ rows, rounds }, baseline, info) {
  const L = []
  L.push('# The hit path: tags and tracing')
  L.push('')
  L.push(`Written by \`${info.command}\` on ${info.date} (node ${process.version}, ${info.cpu}, load ${info.load}).`)
  L.push('')
  L.push(
    `One cache, warm keys, \`await cache.getOrLoad(key, loader, options)\` in a loop; ${rounds} rounds of ${SAMPLE_MS} ms per variant, ` +
      'alternating in one process (the order rotating), each sample after a full GC. A figure is the median of its ' +
      "samples, a ratio the median of the per-round ratios to the round's untagged hit. The tagged variant's cache " +
      "knows 1 050 tags' invalidation stamps; the subscriber handles all five events and does nothing. No peer has " +
      'this path: the peers are in RESULTS.md.',
  )
  L.push('')
  L.push('| hit | ns/op | × untagged |')
  L.push('|---|---:|---:|')
  for (const row of rows) L.push(`| ${row.title} | ${fmt(row.ns)} | ${row.ratio.toFixed(2)} |`)
  if (baseline !== undefined) {
    L.push('')
    L.push(
      `Against ${baseline.root} (the untagged hit, nobody subscribed, one process per sample, ${baseline.ours.length} each, alternating): ` +
        `this checkout ${fmt(median(baseline.ours))} ns/op, the baseline ${fmt(median(baseline.theirs))} ns/op, ` +
        `${median(baseline.ratios).toFixed(2)}×.`,
    )
  }
  L.push('')
  return L.join('\n')
}

/** One process of `root`'s unsubscribed hit: prints its ns/op (median of 3 samples). */
async function child(root) {
  const cache = await warmCache(root)
  await hitNs(cache, SAMPLE_MS)
  const samples = []
  for (let i = 0; i < 3; i++) {
    gc()
    samples.push(await hitNs(cache, SAMPLE_MS))
  }
  await cache.close()
  process.stdout.write(String(median(samples)))
}

/** ns per untagged, unsubscribed hit of the checkout at `root`, measured in a fresh process of its own. */
const hitInChild = (root) =>
  Number(execFileSync(process.execPath, [__filename, `--child=${root}`], { encoding: 'utf8' }))

/**
 * This checkout's untagged hit against `baseline`'s (another checkout's root), one fresh process per sample,
 * alternating, for at least 3 rounds and `seconds`: { root (the baseline named by its commit), ours, theirs,
 * ratios } (ns/op and this ÷ baseline, per round).
 */
function againstBaseline(baseline, seconds = SECONDS) {
  hitInChild(ROOT)
  hitInChild(baseline)
  const ours = []
  const theirs = []
  const ratios = []
  const end = now() + seconds * 1000
  for (let round = 0; round < 3 || now() < end; round++) {
    const times = new Map()
    for (const root of round % 2 === 0 ? [ROOT, baseline] : [baseline, ROOT]) times.set(root, hitInChild(root))
    ours.push(times.get(ROOT))
    theirs.push(times.get(baseline))
    ratios.push(times.get(ROOT) / times.get(baseline))
  }
  console.log(`hit path without a subscriber, ${ours.length} processes each (medians):`)
  console.log(`  this checkout               ${fmt(median(ours))} ns/op`)
  console.log(`  baseline                    ${fmt(median(theirs))} ns/op (${baseline})`)
  console.log(`  this ÷ baseline             ${median(ratios).toFixed(2)}×`)
  return { root: checkoutName(baseline), ours, theirs, ratios }
}

/** The section bench/hitprofile.js wrote in `file` (where a hit's time goes), kept as it is; '' if none. */
function keptProfile(file) {
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : ''
  const start = text.indexOf('<!-- profile: written by bench/hitprofile.js -->')
  const end = text.indexOf('<!-- /profile -->')
  return start !== -1 && end > start ? `\n${text.slice(start, end + '<!-- /profile -->'.length)}\n` : ''
}

/** A checkout named by its commit (a results file names no path outside the repository). */
function checkoutName(root) {
  try {
    const commit = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()
    return `the checkout of ${commit}`
  } catch {
    return 'the baseline checkout'
  }
}

async function main() {
  rejectUnknownArgs(
    /^--(seconds=\d+(\.\d+)?|baseline=.+|child=.+|out=.+)$/,
    'node bench/hitpath.js [--seconds=4] [--baseline=DIR] [--out=FILE]',
  )
  const childRoot = opt('child')
  if (childRoot !== undefined) return child(path.resolve(childRoot))
  const { cpu, load } = machine()
  console.log(`node ${process.version}, ${cpu}, load ${load}`)
  const measured = await inProcess()
  const baselineRoot = opt('baseline')
  const baseline = baselineRoot === undefined ? undefined : againstBaseline(path.resolve(baselineRoot))
  // The baseline is named by its commit below, not by its path.
  const args = process.argv
    .slice(2)
    .filter((a) => !a.startsWith('--out='))
    .map((a) => (a.startsWith('--baseline=') ? '--baseline=DIR' : a))
  const info = {
    command: `node bench/hitpath.js${args.length ? ` ${args.join(' ')}` : ''}`,
    date: new Date().toISOString().slice(0, 19) + 'Z',
    cpu,
    load,
  }
  fs.writeFileSync(OUT, markdown(measured, baseline, info) + keptProfile(OUT))
  console.log(`written to ${path.relative(process.cwd(), OUT)}`)
}

/** What `againstBaseline` times, for the reports that call it. */
const BASELINE_HIT =
  "bench/hitpath.js's untagged hit (a small JSON value, the embedded store, `await getOrLoad` of a warm key in a loop; " +
  'each figure a fresh process, the median of 3 samples of 200 ms)'

/** A report's line when `againstBaseline` ran without a baseline (`hit.ours`: this checkout's figures). */
function withoutBaseline(hit, median) {
  return (
    `${BASELINE_HIT}: this checkout ${hit.ours.length} processes, median ${median(hit.ours).toFixed(1)} ns/op. ` +
    'No baseline in this run (`--baseline=DIR` compares with another checkout).'
  )
}

module.exports = {
  hitInChild,
  againstBaseline,
  checkoutName,
  BASELINE_HIT,
  withoutBaseline,
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
}
