'use strict'

// Memory bounded in bytes (`npm run bench:l1bytes`, or `node bench/l1-bytes.js
// [--quick]`): 10 000 distinct values of 200 KB each (2 GB of them) go through
// one embedded cache with `l1MaxBytes: 64 MiB`, and the process's RSS growth
// is measured against that bound (issue 27 asks for at most 1.5 × 64 MiB).
// Beside it, the same run with `maxEntries` alone set to what 64 MiB holds
// (an entry-count bound sized by hand, as before `l1MaxBytes`), and a `Map`
// that keeps the last values up to 64 MiB (the floor: what the values
// themselves cost).
//
// Method: each variant is a fresh child process (`node --expose-gc`); it
// takes the baseline RSS after a full GC, then gets the values through the
// cache's normal path one key at a time, reading RSS after a full GC every
// 250 keys; its peak and its end growth are reported. Runs are interleaved
// and a figure is the median of its runs. Writes bench/L1BYTES.md.
//
// Internal: `--child=<variant>` runs one measurement and prints it as JSON.

const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { flag, opt, rejectUnknownArgs, median, isoSeconds, loadAvg, machine } = require('./common')

rejectUnknownArgs(/^--(quick|runs=\d+|child=.+)$/, 'node bench/l1-bytes.js [--quick] [--runs=N]')
const QUICK = flag('quick')
const RUNS = Math.max(1, Number(opt('runs') ?? (QUICK ? 1 : 3)))
const KEYS = QUICK ? 2_000 : 10_000
const VALUE_BYTES = 200 * 1024
const BOUND = 64 * 1024 * 1024
const SAMPLE_EVERY = 250
const OUT = path.join(__dirname, QUICK ? 'out/l1-bytes-quick.md' : 'L1BYTES.md')
const VARIANTS = ['l1MaxBytes', 'maxEntries', 'js-map']

/** Value i: a string whose JSON text is VALUE_BYTES long, distinct per key. */
function value(i) {
  return `${i}:`.padEnd(VALUE_BYTES - 2, 'v')
}

function rssAfterGc() {
  for (let i = 0; i < 3; i++) global.gc()
  return process.memoryUsage().rss
}

async function child(variant) {
  const { Cache } = require('..')
  const perValue = VALUE_BYTES + 8
  const cache =
    variant === 'l1MaxBytes'
      ? new Cache({ l1MaxBytes: BOUND, maxEntries: 1_000_000, ttl: 3_600_000 })
      : variant === 'maxEntries'
        ? new Cache({ maxEntries: Math.floor(BOUND / perValue), ttl: 3_600_000 })
        : null
  const map = new Map()
  let held = 0
  const get =
    cache === null
      ? async (key, load) => {
          const v = JSON.parse(JSON.stringify(load()))
          map.set(key, v)
          held += v.length + 2 + key.length
          for (const [k, old] of map) {
            if (held <= BOUND) break
            map.delete(k)
            held -= old.length + 2 + k.length
          }
          return v
        }
      : (key, load) => cache.getOrLoad(key, load)
  await get('warm', () => value(-1))
  const before = rssAfterGc()
  let peak = 0
  for (let i = 0; i < KEYS; i++) {
    const v = await get(`k${i}`, () => value(i))
    if (v.length !== VALUE_BYTES - 2) throw new Error(`value ${i} came back ${v.length} long`)
    if ((i + 1) % SAMPLE_EVERY === 0) peak = Math.max(peak, rssAfterGc() - before)
  }
  const end = rssAfterGc() - before
  const stats = cache?.stats()
  process.stdout.write(
    JSON.stringify({ peak: Math.max(peak, end), end, held: stats?.l1Bytes ?? held, size: stats?.size ?? map.size }),
  )
  await cache?.close()
}

function mib(bytes) {
  return (bytes / 2 ** 20).toFixed(1)
}

function main() {
  const runs = Object.fromEntries(VARIANTS.map((v) => [v, []]))
  for (let round = 0; round < RUNS; round++) {
    for (const variant of VARIANTS) {
      const out = execFileSync(process.execPath, ['--expose-gc', __filename, `--child=${variant}`], {
        encoding: 'utf8',
        maxBuffer: 1 << 20,
      })
      runs[variant].push(JSON.parse(out))
      console.error(`round ${round + 1}: ${variant} ${out}`)
    }
  }
  const row = (variant, what) => {
    const r = runs[variant]
    const peak = median(r.map((x) => x.peak))
    const end = median(r.map((x) => x.end))
    return `| ${what} | ${mib(peak)} | ${(peak / BOUND).toFixed(2)}× | ${mib(end)} | ${mib(median(r.map((x) => x.held)))} | ${median(r.map((x) => x.size))} |`
  }
  const md = [
    '# Memory bounded in bytes: `l1MaxBytes`',
    '',
    `Written by \`node bench/l1-bytes.js${QUICK ? ' --quick' : ''}\` on ${isoSeconds()} (${machine().cpu}, load ${loadAvg()}).`,
    '',
    `${KEYS.toLocaleString('en')} distinct values of ${VALUE_BYTES / 1024} KB (their JSON text), one key at a time, through one`,
    `embedded cache; the bound is ${mib(BOUND)} MiB. RSS growth over the baseline after a full GC, sampled every`,
    `${SAMPLE_EVERY} keys; medians of ${RUNS} run(s) per variant, each a fresh process.`,
    '',
    '| variant | peak RSS growth (MiB) | × the bound | RSS growth at the end (MiB) | held (MiB, as counted) | entries held |',
    '|---|---:|---:|---:|---:|---:|',
    row('l1MaxBytes', '`new Cache({ l1MaxBytes: 64 MiB })`'),
    row('maxEntries', '`new Cache({ maxEntries })`, sized by hand to 64 MiB'),
    row('js-map', 'a `Map` of the parsed values, trimmed to 64 MiB (the floor)'),
    '',
  ].join('\n')
  fs.mkdirSync(path.dirname(OUT), { recursive: true })
  fs.writeFileSync(OUT, md)
  console.log(md)
}

const which = opt('child')
if (which) {
  child(which).catch((error) => {
    console.error(error)
    process.exit(1)
  })
} else {
  main()
}
