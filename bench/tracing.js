'use strict'

// The hit path with and without a subscriber to `herdcache:getOrLoad`
// (README, "Tracing"). Not run by `npm run bench`; its figures are not in
// the README.
//
//   node bench/tracing.js [--seconds=4] [--baseline=DIR]
//
// Method: one cache, one warm key, `await cache.getOrLoad('hot', loader)` in
// a loop (bench/run.js's "hit, 1 in flight"). Rounds alternate, in one
// process, between no subscriber and a subscriber of all five events whose
// handlers do nothing (so what is timed is herdcache's tracing and
// diagnostics_channel's publishing, not a tracer); the order within a round
// rotates. Each sample is SAMPLE_MS after a full GC; a figure is the median
// of its samples, the ratio the median of the per-round ratios. Every
// unsubscribed sample after the first round runs after a subscribe and an
// unsubscribe: what an application that stops tracing gets.
//
// --baseline=DIR: then the unsubscribed hit of this checkout and of DIR
// (another checkout with its addon, such as the commit before tracing), each
// sample in a fresh process, alternating; a process of each runs before the
// timed ones. Whether the one `hasSubscribers` check changed the hit path.

const path = require('node:path')
const diagnostics_channel = require('node:diagnostics_channel')
const { execFileSync } = require('node:child_process')
const { opt, rejectUnknownArgs, gc, now, median, machine } = require('./common')

rejectUnknownArgs(
  /^--(seconds=\d+(\.\d+)?|baseline=.+|child=.+)$/,
  'node bench/tracing.js [--seconds=4] [--baseline=DIR]',
)
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

async function inProcess() {
  const { channels } = require(ROOT)
  const cache = await warmCache(ROOT)
  const channel = diagnostics_channel.tracingChannel(channels.getOrLoad)
  const sample = async (traced) => {
    if (traced) channel.subscribe(SUBSCRIBER)
    gc()
    try {
      return await hitNs(cache, SAMPLE_MS)
    } finally {
      if (traced) channel.unsubscribe(SUBSCRIBER)
    }
  }
  await sample(false) // warm-up, both ways
  await sample(true)
  const plain = []
  const traced = []
  const ratios = []
  const end = now() + SECONDS * 1000
  for (let round = 0; round < 3 || now() < end; round++) {
    const times = new Map()
    for (const subscribed of round % 2 === 0 ? [false, true] : [true, false]) {
      times.set(subscribed, await sample(subscribed))
    }
    plain.push(times.get(false))
    traced.push(times.get(true))
    ratios.push(times.get(true) / times.get(false))
  }
  const stats = cache.stats()
  if (stats.loads !== 1 || stats.misses !== 1) throw new Error(`the key did not stay warm: ${JSON.stringify(stats)}`)
  await cache.close()
  console.log(`hit path, ${plain.length} rounds of ${SAMPLE_MS} ms each way (medians):`)
  console.log(`  no subscriber               ${fmt(median(plain))} ns/op`)
  console.log(`  a subscriber to getOrLoad   ${fmt(median(traced))} ns/op`)
  console.log(`  traced ÷ untraced           ${median(ratios).toFixed(2)}×`)
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

function againstBaseline(baseline) {
  const run = (root) => Number(execFileSync(process.execPath, [__filename, `--child=${root}`], { encoding: 'utf8' }))
  run(ROOT)
  run(baseline)
  const ours = []
  const theirs = []
  const ratios = []
  const end = now() + SECONDS * 1000
  for (let round = 0; round < 3 || now() < end; round++) {
    const times = new Map()
    for (const root of round % 2 === 0 ? [ROOT, baseline] : [baseline, ROOT]) times.set(root, run(root))
    ours.push(times.get(ROOT))
    theirs.push(times.get(baseline))
    ratios.push(times.get(ROOT) / times.get(baseline))
  }
  console.log(`hit path without a subscriber, ${ours.length} processes each (medians):`)
  console.log(`  this checkout               ${fmt(median(ours))} ns/op`)
  console.log(`  baseline                    ${fmt(median(theirs))} ns/op (${baseline})`)
  console.log(`  this ÷ baseline             ${median(ratios).toFixed(2)}×`)
}

async function main() {
  const childRoot = opt('child')
  if (childRoot !== undefined) return child(path.resolve(childRoot))
  const { cpu, load } = machine()
  console.log(`node ${process.version}, ${cpu}, load ${load}`)
  await inProcess()
  const baseline = opt('baseline')
  if (baseline !== undefined) againstBaseline(path.resolve(baseline))
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
