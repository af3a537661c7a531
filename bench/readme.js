'use strict'

// Writes the benchmark and demo figures of README.md from the committed
// results files (bench/RESULTS.md, bench/FLEET.md, bench/CLUSTER.md,
// bench/NEST.md, bench/BULKHEAD.md, bench/VALUES.md, bench/TRACKING.md, and what the demos
// printed: demo/OUTPUT.md, demo/NEST-OUTPUT.md), between markers:
//
//   <!-- bench:<name>:start -->  ...generated...  <!-- bench:<name>:end -->
//
// The figures are never typed by hand: the bench scripts and the demos call
// updateReadme() after they wrote their results, and __test__/readme-figures.test.js fails
// when the README differs from what this renders from the files in the tree.
//
//   node bench/readme.js           rewrite README.md's bench sections
//   node bench/readme.js --check   exit 1 (and say which section) when README.md is out of date

const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const README = path.join(ROOT, 'README.md')
const RESULT_FILES = {
  results: 'bench/RESULTS.md',
  fleet: 'bench/FLEET.md',
  cluster: 'bench/CLUSTER.md',
  nest: 'bench/NEST.md',
  bulkhead: 'bench/BULKHEAD.md',
  values: 'bench/VALUES.md',
  tracking: 'bench/TRACKING.md',
  demo: 'demo/OUTPUT.md',
  'demo-nest': 'demo/NEST-OUTPUT.md',
}

/** The results files' texts, read from `root`. */
function readResults(root = ROOT) {
  return Object.fromEntries(
    Object.entries(RESULT_FILES).map(([name, file]) => [name, fs.readFileSync(path.join(root, file), 'utf8')]),
  )
}

// ---------------------------------------------------------------- parsing

/** The text of the section whose heading line starts with `heading`, up to the next heading of its level or higher. */
function section(md, heading, file) {
  const lines = md.split('\n')
  const start = lines.findIndex((line) => line.startsWith(heading))
  if (start === -1) throw new Error(`${file} has no section "${heading}"`)
  const level = heading.indexOf(' ')
  const end = lines.findIndex((line, i) => i > start && /^#+ /.test(line) && line.indexOf(' ') <= level)
  return lines.slice(start, end === -1 ? undefined : end).join('\n')
}

/** The Markdown tables of `text`, each as rows of { column: cell }. */
function tables(text) {
  const found = []
  let block = []
  for (const line of [...text.split('\n'), '']) {
    if (line.startsWith('|')) {
      block.push(line)
      continue
    }
    if (block.length > 2) {
      const cells = (row) =>
        row
          .slice(1, -1)
          .split(' | ')
          .map((c) => c.trim())
      const header = cells(block[0])
      found.push(block.slice(2).map((row) => Object.fromEntries(cells(row).map((c, i) => [header[i], c]))))
    }
    block = []
  }
  return found
}

/** The first table of `text` that has every column of `columns`. */
function tableWith(text, columns, what) {
  const table = tables(text).find((rows) => columns.every((c) => c in rows[0]))
  if (!table) throw new Error(`${what}: no table with the columns ${columns.join(', ')}`)
  return table
}

function row(table, match, what) {
  const found = table.find(match)
  if (!found) throw new Error(`${what}: row not found`)
  return found
}

function capture(text, pattern, what) {
  const m = pattern.exec(text)
  if (!m) throw new Error(`${what}: ${pattern} not found`)
  return m
}

/** "1.19 M", "723.0 k", "84": a number, to sort by. */
function ops(cell) {
  const m = /^([\d.]+)\s*([kM]?)/.exec(cell)
  return m ? Number(m[1]) * { '': 1, k: 1e3, M: 1e6 }[m[2]] : Number.NaN
}

/** A ratio as the README writes it: two significant digits are what the noise allows. */
function times(x) {
  return `${x >= 10 ? x.toFixed(0) : x.toFixed(2)}×`
}

// ---------------------------------------------------------------- sections

const SPEED_LIBS = ['herdcache', 'lru-cache', 'bentocache', 'cache-manager']
const SPEED_SCENARIOS = [
  ['1.', 'hit, 1 in flight'],
  ['2.', 'hit, 64 in flight'],
  ['3.', 'hit, 10 000 keys, 1 in flight'],
  ['4.', '1 000 callers on one cold key (per caller)'],
  ['5.', 'a new cold key per call (1 KB value)'],
]

function speed({ results }) {
  const table = tableWith(results, ['scenario', 'library', 'µs/op'], 'bench/RESULTS.md')
  const date = capture(results, /^- date: (\S+)/m, 'bench/RESULTS.md date')[1]
  const lines = [
    `From the last run (${date}; µs per call, lower is better):`,
    '',
    `| scenario | ${SPEED_LIBS.join(' | ')} |`,
    `|---|${SPEED_LIBS.map(() => '---:').join('|')}|`,
  ]
  for (const [number, label] of SPEED_SCENARIOS) {
    const cells = SPEED_LIBS.map(
      (lib) =>
        row(table, (r) => r.scenario.startsWith(`${number} `) && r.library === lib, `RESULTS.md ${number} ${lib}`)[
          'µs/op'
        ],
    )
    lines.push(`| ${label} | ${cells.join(' | ')} |`)
  }
  return lines.join('\n')
}

const MEMORY_LIBS = ['js-map', 'herdcache', 'lru-cache', 'bentocache', 'cache-manager']

function memory({ results }) {
  const memorySection = section(results, '## Memory per cached entry', 'bench/RESULTS.md')
  const entries = capture(memorySection, /^- what: ([\d,]+) distinct keys/m, 'RESULTS.md memory entries')[1]
  const shapes = [...memorySection.matchAll(/^### \(([a-z])\) (.+) \((\w+), (\d+) bytes of JSON on average\)$/gm)]
  if (shapes.length === 0) throw new Error('RESULTS.md memory: no value shape tables (### (a) ...)')
  const median = (cell) => cell.replace(/\s*\(.*\)$/, '')
  const lines = [
    `With ${entries} entries of ~1 KB, RSS per entry in bytes (÷ a \`Map\` holding the same JSON copies, the floor), on each value shape:`,
    '',
    `| value shape | ${MEMORY_LIBS.join(' | ')} |`,
    `|---|${MEMORY_LIBS.map(() => '---:').join('|')}|`,
  ]
  for (const [, letter, title, shape, bytes] of shapes) {
    const part = section(memorySection, `### (${letter})`, `bench/RESULTS.md memory (${letter})`)
    const table = tableWith(part, ['library', 'RSS per entry (bytes)', '÷ js-map'], `RESULTS.md memory ${shape}`)
    const cells = MEMORY_LIBS.map((lib) => {
      const r = row(table, (x) => x.library === lib, `RESULTS.md memory ${shape} ${lib}`)
      const rss = median(r['RSS per entry (bytes)'])
      return lib === 'js-map' ? rss : `${rss} (${r['÷ js-map']})`
    })
    lines.push(`| (${letter}) ${title}, ${bytes} B of JSON | ${cells.join(' | ')} |`)
  }
  return lines.join('\n')
}

function fleet({ fleet: md }) {
  const stampede = section(md, '## 1. Hot-key expiry stampede', 'bench/FLEET.md')
  const table = tableWith(
    stampede,
    ['library', 'per TTL period', 'per expiry (mean / max)', 'served / s', 'p99'],
    'FLEET.md',
  )
  const setup = capture(
    stampede,
    /^(\d+) processes × (\d+) callers.*?ttl (\d+ m?s), a loader that takes (\d+ ms).*?then (\d+ s) measured\. (\d+) rounds/ms,
    'FLEET.md setup',
  )
  const [, procs, callers, ttl, loadMs, seconds, rounds] = setup
  const herd = row(table, (r) => r.library === 'herdcache', 'FLEET.md herdcache')
  // "herdcache (beta: 0)" is a diagnostic row of the bench, not a library.
  const peers = table
    .filter((r) => !r.library.startsWith('herdcache'))
    .sort((a, b) => ops(b['served / s']) - ops(a['served / s']))
  const cells = (r) => {
    const max = r['per expiry (mean / max)'].split('/')[1].trim()
    return `| ${r.library} | ${r['per TTL period']} | ${max} | ${r['served / s']} | ${r.p99} |`
  }
  const big = tableWith(stampede, ['library', 'processes', 'per TTL period', 'served / s'], 'FLEET.md 30 processes')
  const widest = big.reduce((a, b) => (Number(b.processes) > Number(a.processes) ? b : a))
  const bigCallers = capture(
    stampede,
    new RegExp(`\\*\\*${widest.processes} processes × (\\d+) callers`),
    'FLEET.md',
  )[1]
  const hits = tableWith(
    section(md, '## 2. Hit throughput', 'bench/FLEET.md'),
    ['scenario', 'library', 'ops/s'],
    'FLEET.md hits',
  )
  const hit = (scenario) =>
    row(hits, (r) => r.scenario === scenario && r.library === 'herdcache', `FLEET.md ${scenario}`)
  const ratio = (scenario, library) =>
    row(hits, (r) => r.scenario === scenario && r.library === library, `FLEET.md ${scenario} ${library}`)[
      'herdcache ÷ peer'
    ]
  // The floors of the hit part (bench/fleet.js HIT_FLOORS) are not peers.
  const floors = ['ioredis GET + JSON.parse', 'a Map that never expires']
  const at64 = hits.filter(
    (r) => r.scenario === 'hit, 64 in flight' && !r.library.startsWith('herdcache') && !floors.includes(r.library),
  )
  const best64 = at64.reduce((a, b) => (ops(b['ops/s']) > ops(a['ops/s']) ? b : a))
  return [
    `\`npm run bench:fleet\` runs a hot key expiring under ${procs} processes × ${callers} callers (ttl ${ttl}, a ` +
      `${loadMs} loader) against one Redis, for herdcache and the Redis setups of the same peers, and writes ` +
      '[bench/FLEET.md](bench/FLEET.md) with a plot ([bench/fleet.svg](bench/fleet.svg)). From the last run ' +
      `(${seconds} measured, medians of ${rounds} rounds):`,
    '',
    '| library | loader runs per TTL period (whole fleet) | at once, max | served / s | p99 |',
    '|---|---:|---:|---:|---:|',
    cells(herd),
    ...peers.map(cells),
    '',
    `At ${widest.processes} processes × ${bigCallers} callers: herdcache's loader runs per TTL period ` +
      `${widest['per TTL period']}, ${widest['served / s']} served / s. A warm-key hit with Redis configured is an L1 hit: ` +
      `${hit('hit, 1 in flight')['ops/s']} ops/s at 1 in flight (${ratio('hit, 1 in flight', 'ioredis GET + JSON.parse')} ` +
      `a raw ioredis \`GET\` + \`JSON.parse\`), ${hit('hit, 64 in flight')['ops/s']} at 64 ` +
      `(${best64['herdcache ÷ peer']} the best peer, ${best64.library}); against a \`Map\` that never expires, ` +
      `${ratio('hit, 1 in flight', 'a Map that never expires')} at 1 in flight and ` +
      `${ratio('hit, 64 in flight', 'a Map that never expires')} at 64.`,
  ].join('\n')
}

function cluster({ cluster: md }) {
  const file = 'bench/CLUSTER.md'
  const stampede = section(md, '## 1. Hot-key expiry stampede on the cluster', file)
  const table = tableWith(
    stampede,
    ['library', 'per TTL period', 'per expiry (mean / max)', 'served / s', 'p99', 'errors'],
    file,
  )
  const [, procs, callers, ttl, loadMs, seconds, rounds] = capture(
    stampede,
    /^(\d+) processes × (\d+) callers.*?ttl (\d+ m?s), a loader that takes (\d+ ms).*?then (\d+ s) measured\. (\d+) round/ms,
    `${file} setup`,
  )
  const date = capture(md, /^- date: (\S+)/m, `${file} date`)[1]
  const primaries = capture(md, /a Redis Cluster of (\d+) primaries/, `${file} nodes`)[1]
  const herd = row(table, (r) => r.library === 'herdcache', `${file} herdcache`)
  const peers = table
    .filter((r) => r.library !== 'herdcache')
    .sort((a, b) => ops(b['served / s']) - ops(a['served / s']))
  const cells = (r) => {
    const max = r['per expiry (mean / max)'].split('/')[1].trim()
    return `| ${r.library} | ${r['per TTL period']} | ${max} | ${r['served / s']} | ${r.p99} | ${r.errors} |`
  }
  const reads = section(md, '## 2. ', file)
  const keys = capture(reads, /^## 2\. ([\d ]+) distinct keys/, `${file} keys`)[1]
  const perKey = tableWith(
    reads,
    ['reader', 'per key (median)', '÷ ioredis GET', '÷ GET + JSON.parse'],
    `${file} reads`,
  )
  const reader = (name) => row(perKey, (r) => r.reader === name, `${file} ${name}`)
  const herdReads = reader('herdcache')
  return [
    `\`npm run bench:fleet\` ends with bench/cluster.js, which starts a local Redis Cluster of ${primaries} primaries and ` +
      `writes [bench/CLUSTER.md](bench/CLUSTER.md). The same hot key expiring under ${procs} processes × ${callers} callers ` +
      `(ttl ${ttl}, a ${loadMs} loader), on the cluster, for herdcache and the peers that take a cluster client; from the ` +
      `last run (${date}; ${seconds} measured, medians of ${rounds} rounds):`,
    '',
    '| library | loader runs per TTL period (whole fleet) | at once, max | served / s | p99 | errors |',
    '|---|---:|---:|---:|---:|---:|',
    cells(herd),
    ...peers.map(cells),
    '',
    `${keys} keys read in one tick (\`Promise.all\` of \`getOrLoad\`, every key in Redis, none in L1): herdcache ` +
      `${herdReads['per key (median)']} per key, ${herdReads['÷ GET + JSON.parse']} ioredis Cluster's autopipelined ` +
      `\`GET\`s with \`JSON.parse\` of the value (${reader('ioredis GET + JSON.parse')['per key (median)']}: the same ` +
      `work, as herdcache hands back parsed objects) and ${herdReads['÷ ioredis GET']} the plain \`GET\`s, which ` +
      `parse nothing (${reader('ioredis GET')['per key (median)']}). With an L1 that holds every set (its inserts evict ` +
      `nothing), herdcache ${reader('herdcache (L1 holds every set)')['per key (median)']} per key, ` +
      `${reader('herdcache (L1 holds every set)')['÷ ioredis GET']} the plain \`GET\`s.`,
  ].join('\n')
}

const NEST_VARIANTS = [
  'herdcache/nest (memory)',
  'CacheInterceptor (memory)',
  'herdcache/nest (Redis, 2 apps)',
  'CacheInterceptor (@keyv/redis, 2 apps)',
]

function nest({ nest: md }) {
  const hotSection = section(md, '## 1. Hot key', 'bench/NEST.md')
  const expirySection = section(md, '## 2. Expiry under load', 'bench/NEST.md')
  const hot = tableWith(hotSection, ['variant', 'req/s', 'p99'], 'NEST.md hot key')
  const expiry = tableWith(expirySection, ['variant', 'per expiry (whole fleet)'], 'NEST.md expiry')
  const waitedColumn = Object.keys(expiry[0]).find((c) => c.startsWith('requests that waited'))
  if (!waitedColumn) throw new Error('NEST.md expiry: no "requests that waited" column')
  const queryMs = capture(md, /after a simulated (\d+ ms) query/, 'NEST.md query')[1]
  const connections = capture(md, /(\d+) closed loops of keep-alive/, 'NEST.md connections')[1]
  const [, ttl, load] = capture(
    expirySection,
    /^## 2\. Expiry under load \(ttl ([^,]+), ([^)]+) of load\)/,
    'NEST.md ttl',
  )
  const rounds = capture(hotSection, /^(\d+) round\(s\)/m, 'NEST.md rounds')[1]
  const get = (table, variant) => row(table, (r) => r.variant === variant, `NEST.md ${variant}`)
  const reqs = (variant) => ops(get(hot, variant)['req/s'])
  const lines = [
    '`npm run bench` ends with `bench/nest.js`, which writes [bench/NEST.md](bench/NEST.md): the same route ' +
      `(a ${queryMs} query, Express) under ${connections} keep-alive connections from 127.0.0.1, for herdcache/nest ` +
      'and `CacheInterceptor`, in memory and with Redis (two apps on one redis-server). From the last run ' +
      `(medians of ${rounds} rounds; 2 cores shared by client, apps and Redis, so req/s is bounded by the machine):`,
    '',
    `| variant | hot key: req/s | p99 | expiry under load (ttl ${ttl}, ${load}): handler runs per expiry, whole fleet | requests that waited ≥ the ${queryMs} query |`,
    '|---|---:|---:|---:|---:|',
  ]
  for (const variant of NEST_VARIANTS) {
    const h = get(hot, variant)
    const e = get(expiry, variant)
    lines.push(`| ${variant} | ${h['req/s']} | ${h.p99} | ${e['per expiry (whole fleet)']} | ${e[waitedColumn]} |`)
  }
  lines.push(
    '',
    `On a hot key herdcache/nest served ${times(reqs(NEST_VARIANTS[0]) / reqs(NEST_VARIANTS[1]))} the requests of ` +
      `\`CacheInterceptor\` in memory and ${times(reqs(NEST_VARIANTS[2]) / reqs(NEST_VARIANTS[3]))} with Redis ` +
      '(the HTTP request around a hit costs far more than either cache, so these ratios move from run to run); ' +
      'at each expiry it runs the handler once for the fleet, where `CacheInterceptor` runs it for every request in flight.',
  )
  return lines.join('\n')
}

/** The date, machine and printed lines of a demo results file (demo/output.js writes them). */
function demoOutput(md, file) {
  return {
    date: capture(md, /^- date: (\S+)/m, `${file} date`)[1],
    machine: capture(md, /^- machine: (.+)$/m, `${file} machine`)[1],
    lines: capture(md, /^```\n([\s\S]*?)\n```$/m, `${file} output`)[1].split('\n'),
  }
}

/** The lines from the first that matches `first` to the first after it that matches `last`. */
function lineRange(lines, first, last, what) {
  const from = lines.findIndex((line) => first.test(line))
  const to = lines.findIndex((line, i) => from !== -1 && i > from && last.test(line))
  if (to === -1) throw new Error(`${what}: ${first} … ${last} not found`)
  return lines.slice(from, to + 1)
}

const howOften = (n) => (n === 1 ? 'once' : `${n} times`)

function demo({ demo: md }) {
  const file = 'demo/OUTPUT.md'
  const { date, machine, lines } = demoOutput(md, file)
  const text = lines.join('\n')
  const queryMs = capture(text, /^database +(\d+ ms) per query/m, `${file} database`)[1]
  const [, phases, requests, within] = capture(
    text,
    /^traffic +(\d+) phases × (\d+) requests arriving within (\d+ ms)/m,
    `${file} traffic`,
  )
  const table = lineRange(lines, /naive cache-aside.*│.*herdcache/, /^ *latencies in ms/, `${file} table`)
  capture(text, /^phase +DB qry +p50 +p95 +p99 +max +│ +DB qry +p50 +p95 +p99 +max$/m, `${file} columns`)
  // The naive cache's figures │ herdcache's, of the table's row `label`.
  const figures = (label) =>
    row(table, (line) => line.startsWith(`${label} `), `${file} ${label}`)
      .slice(label.length)
      .split('│')
      .map((side) => {
        const [queries, , , p99] = side.trim().split(/ +/)
        return { queries: Number(queries), p99 }
      })
  const [naive, herd] = figures('expiry under load')
  const answered = lineRange(lines, /^how each request was answered/, /^expiry under load /, `${file} outcomes`)
  const herdAnswered = answered[answered.length - 1].split('│')[1]
  const stale = Number((/(\d+) stale/.exec(herdAnswered) || [0, 0])[1])
  const refreshes = Number((/(\d+) background refresh/.exec(herdAnswered) || [0, 0])[1])
  const served = stale === Number(requests) ? `all ${requests} requests` : `${stale} of the ${requests} requests`
  return [
    `\`npm run demo\` sends the same traffic — ${phases} phases × ${requests} requests within ${within} on one hot ` +
      'key — to a naive cache-aside (a `Map` with a TTL) and to herdcache, against a simulated database whose ' +
      `${queryMs} query slows down with every concurrent query. From the last run ([demo/OUTPUT.md](demo/OUTPUT.md), ` +
      `${date}; ${machine}):`,
    '',
    '```',
    ...table,
    '```',
    '',
    `When the key expires under load, the naive cache runs the query ${howOften(naive.queries)} (p99 ${naive.p99} ms); ` +
      `herdcache serves ${served} the stale value (p99 ${herd.p99} ms) and runs the query ${howOften(herd.queries)} ` +
      `(${refreshes} background refresh${refreshes === 1 ? '' : 'es'}).`,
  ].join('\n')
}

function demoNest({ 'demo-nest': md }) {
  const file = 'demo/NEST-OUTPUT.md'
  const { date, machine, lines } = demoOutput(md, file)
  const [, requests, queryMs] = capture(
    lines.join('\n'),
    /^GET \/feed\/\S+, (\d+) concurrent requests per phase, (\d+ ms) query/m,
    `${file} setup`,
  )
  const table = lineRange(lines, /^ +herdcache\/nest +│/, /^expiry under load /, `${file} table`)
  return [
    `\`npm run demo:nest\` sends bursts of ${requests} concurrent requests to a Nest route with a ${queryMs} handler, ` +
      "cached by `herdcache/nest` and by `@nestjs/cache-manager`'s `CacheInterceptor`, one after the other (add " +
      '`REDIS_URL` for Redis). From the last run ([demo/NEST-OUTPUT.md](demo/NEST-OUTPUT.md), ' +
      `${date}; ${machine}; handler runs and latency in ms):`,
    '',
    '```',
    ...table,
    '```',
  ].join('\n')
}

function bulkhead({ bulkhead: md }) {
  const file = 'bench/BULKHEAD.md'
  const table = tableWith(md, ['variant', 'at once, max', 'total (ms)', 'ideal (ms)', 'errors'], file)
  const date = capture(md, /^- date: (\S+)/m, `${file} date`)[1]
  const [, keys, callers, loaderMs] = capture(
    md,
    /^- what: ([\d,]+) distinct cold keys × (\d+) callers.*?the loader takes (\d+ ms)/m,
    `${file} setup`,
  )
  const capped = row(table, (r) => r.variant.startsWith('maxConcurrentLoads'), `${file} capped`)
  const free = row(table, (r) => r.variant === 'no cap', `${file} no cap`)
  const cells = (r) =>
    `| ${r.variant} | ${r['at once, max']} | ${r['total (ms)']} | ${r['ideal (ms)']} | ${r['÷ ideal']} | ${r.errors} |`
  const fleet = tableWith(md, ['fleet variant', 'queries at once, max', 'first query at (ms)'], `${file} fleet`)
  const procs = capture(md, /^## The cold storm across a fleet of (\d+) processes/m, `${file} fleet heading`)[1]
  const fleetCells = (r) =>
    `| ${r['fleet variant']} | ${r['database queries']} | ${r['queries at once, max']} | ${r['total (ms)']} | ` +
    `${r['first query at (ms)']} | ${r['queries, first to last (ms)']} | ${r['ideal (ms)']} | ${r['÷ ideal']} | ${r.errors} |`
  return [
    `\`npm run bench:bulkhead\` (also run by \`npm run bench\`) makes a cold storm of ${keys} distinct keys × ${callers} ` +
      `callers each in one process, with a ${loaderMs} loader that counts how many run at once, and writes ` +
      `[bench/BULKHEAD.md](bench/BULKHEAD.md). From the last run (${date}):`,
    '',
    '| variant | loaders at once, max | total (ms) | ideal (ms) | ÷ ideal | errors |',
    '|---|---:|---:|---:|---:|---:|',
    cells(capped),
    cells(free),
    '',
    'No peer has a bulkhead to compare with: without the cap herdcache, like each of them, runs every ' +
      `load at once (${free['at once, max']} at the peak).`,
    '',
    `Then the same storm across ${procs} processes sharing one Redis (each is sent its own part of the keys ` +
      'first, then all of them), every loader one query to a database on loopback that counts the queries ' +
      `running at once and answers after ${loaderMs}; "÷ ideal" times the queries from the first to the last, ` +
      "after the fleet's first reads and locks, which every variant does alike. The static split of the cap over " +
      'the processes is the per-process cap that stays under it (its best case: a load spread evenly):',
    '',
    '| variant | database queries | queries at once, max | total (ms) | first query at (ms) | queries, first to last (ms) | ideal (ms) | ÷ ideal | errors |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...fleet.map(fleetCells),
  ].join('\n')
}

const VALUE_SECTIONS = [
  ['## A 1 MB Buffer', '1 MB Buffer'],
  ['## A 100 KB JSON document', '100 KB JSON document'],
]

function values({ values: md }) {
  const file = 'bench/VALUES.md'
  const date = capture(md, /^- date: (\S+)/m, `${file} date`)[1]
  const columns = ['library', 'bytes in Redis', 'cold read µs', 'hit µs', 'comes back as']
  const [buffer, json] = VALUE_SECTIONS.map(([heading]) => tableWith(section(md, heading, file), columns, file))
  const lines = [
    '`npm run bench:values` stores a 1 MB `Buffer` (bytes that do not compress, as an image) and a 100 KB JSON ' +
      'document through herdcache (its JSON format and the msgpackr serializer, each with and without `compress`) and ' +
      'the Redis setups of bentocache and cache-manager, in one run against one Redis, and writes ' +
      `[bench/VALUES.md](bench/VALUES.md). From the last run (${date}; bytes of one value in Redis, µs to read it ` +
      'into a fresh instance, µs per hit of a value it holds; medians):',
    '',
    `| library | ${VALUE_SECTIONS.map(([, title]) => `${title}: bytes in Redis | cold read µs | hit µs`).join(' | ')} |`,
    `|---|${VALUE_SECTIONS.map(() => '---:|---:|---:').join('|')}|`,
  ]
  for (const r of buffer) {
    const j = row(json, (x) => x.library === r.library, `${file} ${r.library}`)
    lines.push(
      `| ${r.library} | ${r['bytes in Redis']} | ${r['cold read µs']} | ${r['hit µs']} | ` +
        `${j['bytes in Redis']} | ${j['cold read µs']} | ${j['hit µs']} |`,
    )
  }
  const sameBuffer = 'a Buffer, equal'
  const others = buffer.filter((r) => r['comes back as'] !== sameBuffer)
  const unequal = json.filter((r) => r['comes back as'] !== 'equal')
  const told = [
    others.length === 0
      ? 'Every library hands the Buffer back as a Buffer of the same bytes.'
      : `Every library hands the Buffer back as a Buffer of the same bytes but ${others
          .map((r) => `${r.library}, which hands back ${r['comes back as']}`)
          .join('; ')}.`,
  ]
  if (unequal.length > 0) {
    told.push(`The JSON document comes back unequal through ${unequal.map((r) => r.library).join(', ')}.`)
  }
  const hit = section(md, '## The plain-JSON hit', file)
  const before = /this checkout ([\d.]+) ns\/op, the baseline ([\d.]+) ns\/op; this ÷ baseline ([\d.]+×)/.exec(hit)
  if (before) {
    const commit = capture(hit, /against the checkout of (\w+)/, `${file} baseline`)[1]
    told.push(
      `A plain JSON value's hit (bench/hitpath.js's untagged hit, in memory) costs ${before[1]} ns in this ` +
        `checkout and ${before[2]} ns in the checkout of ${commit} (${before[3]}, processes alternating).`,
    )
  } else {
    told.push(`A plain JSON value's hit costs ${capture(hit, /median ([\d.]+ ns)\/op/, `${file} hit`)[1]}.`)
  }
  lines.push('', told.join(' '))
  return lines.join('\n')
}

/** "3.2 % / 2.8 % / 3.0 %" (one figure per instance): "2.8–3.2 %", or the one figure when they are equal. */
function spread(cell) {
  const parts = cell.split(' / ').map((part) => part.trim())
  if (parts.every((part) => part === parts[0])) return parts[0]
  const numeric = parts.map((part) => Number(part.replace(/ /g, '').replace(/%$/, '')))
  if (numeric.some(Number.isNaN)) return cell
  const unit = parts[0].endsWith(' %') ? ' %' : ''
  const bare = (part) => part.replace(/ %$/, '')
  const lo = parts[numeric.indexOf(Math.min(...numeric))]
  const hi = parts[numeric.indexOf(Math.max(...numeric))]
  return lo === hi ? lo : `${bare(lo)}–${bare(hi)}${unit}`
}

function tracking({ tracking: md }) {
  const file = 'bench/TRACKING.md'
  const date = capture(md, /^- date: (\S+)/m, `${file} date`)[1]
  const absorbed = tableWith(
    section(md, '## 1. ', file),
    ['load', 'tracking', "readers' calls", 'writes/s', 'reader CPU (% of one core), each reader'],
    `${file} fleet`,
  )
  const changesColumn = Object.keys(absorbed[0]).find((c) => c.startsWith('outside changes applied/s'))
  const echoesColumn = Object.keys(absorbed[0]).find((c) => c.startsWith('own writes heard twice'))
  const lagColumn = Object.keys(absorbed[0]).find((c) => c.startsWith('marker gone after'))
  if (!changesColumn || !echoesColumn || !lagColumn) throw new Error(`${file} fleet: a column is missing`)
  const readers = capture(md, /^## 1\. Invalidation messages a fleet of (\d+) absorbs/m, `${file} readers`)[1]
  const populated = capture(md, /^## 2\. Redis with `BCAST` on a prefix of ([\d ]+) keys/m, `${file} keys`)[1]
  const redis = tableWith(
    section(md, '## 2. ', file),
    ['load', 'tracking', 'Redis CPU (% of one core)', 'on ÷ off'],
    file,
  )
  const pick = (table, load, on, what) =>
    row(
      table,
      (r) =>
        r.load.startsWith(load) &&
        r.tracking === (on ? 'on' : 'off') &&
        (!("readers' calls" in r) || !r["readers' calls"].startsWith('none')),
      `${file} ${what} ${load} ${on ? 'on' : 'off'}`,
    )
  const fleet = (load, on) => pick(absorbed, load, on, 'fleet')
  const server = (load, on) => pick(redis, load, on, 'Redis')
  const outside = 'outside SET'
  const herd = 'herdcache `set()`'
  const [, target, keys] = capture(
    md,
    /^- loads: a target of ([\d ]+) writes\/s to ([\d ]+) distinct keys/m,
    `${file} loads`,
  )
  const watched = capture(md, /"kept": still there (\d+ ms) later/, `${file} kept`)[1]
  const lag = (on) => {
    const cell = spread(fleet(outside, on)[lagColumn])
    return cell === 'kept' ? `still held ${watched} later` : cell
  }
  const idle = absorbed.filter((r) => r["readers' calls"].startsWith('none'))
  const both = (cell) => [cell(true), cell(false)]
  const line = (label, [on, off]) => `| ${label} | ${on} | ${off} |`
  const lines = [
    `\`npm run bench:tracking\` runs ${readers} instances (one process each) while an outside writer (ioredis, ` +
      `pipelined \`SET\`s) or one more instance (\`cache.set()\`) writes at a target of ${target} writes/s to ${keys} ` +
      `keys, against one Redis holding ${populated} keys under the tracked prefix, and writes ` +
      `[bench/TRACKING.md](bench/TRACKING.md). From the last run (${date}; per instance, the spread over the ${readers}):`,
    '',
    '| | `tracking: true` | `tracking: false` |',
    '|---|---:|---:|',
    line(
      `outside writes/s, applied to each L1 (\`trackedChanges\`/s) at ${fleet(outside, true)['writes/s']} written/s`,
      [spread(fleet(outside, true)[changesColumn]), spread(fleet(outside, false)[changesColumn])],
    ),
    line('an outside `DEL` at the end: gone from each L1 after (ms)', [lag(true), lag(false)]),
    line(
      `messages/s each instance hears at ${fleet(herd, true)['writes/s']} \`set()\`s/s: events channel + tracking, paired (\`trackedEchoes\`/s)`,
      [
        `${fleet(herd, true)['writes/s']} + ${spread(fleet(herd, true)[echoesColumn])}`,
        `${fleet(herd, false)['writes/s']} + 0`,
      ],
    ),
    line(
      'instance CPU under the outside writes (% of one core)',
      both((on) => spread(fleet(outside, on)['reader CPU (% of one core), each reader'])),
    ),
    line(
      'instance CPU under the `set()`s (% of one core)',
      both((on) => spread(fleet(herd, on)['reader CPU (% of one core), each reader'])),
    ),
    line('Redis CPU under the outside writes (% of one core; on ÷ off)', [
      `${server(outside, true)['Redis CPU (% of one core)']} (${server(outside, true)['on ÷ off']})`,
      server(outside, false)['Redis CPU (% of one core)'],
    ]),
    line('Redis CPU under the `set()`s (% of one core; on ÷ off)', [
      `${server(herd, true)['Redis CPU (% of one core)']} (${server(herd, true)['on ÷ off']})`,
      server(herd, false)['Redis CPU (% of one core)'],
    ]),
    line(
      'Redis used_memory at the end of the outside writes',
      both((on) => server(outside, on)['used_memory at the end'].replace(/ \(.*\)$/, '')),
    ),
  ]
  if (idle.length > 0) {
    const runs = idle.map(
      (r) => `${r['marker in L1 at the end']} (${r.load.replace(/ \(.*\)$/, '')}, tracking ${r.tracking})`,
    )
    const seconds = capture(idle[0]["readers' calls"], /\((\d+ s) run\)/, `${file} idle`)[1]
    const bound = capture(md, /more than ([\d ]+) waiting clear the L1 instead/, `${file} queue bound`)[1]
    const every = capture(md, /every (\d+ ms) \(an L1 hit/, `${file} calls`)[1]
    lines.push(
      '',
      `An instance applies what it was told at its next call, and more than ${bound} changes waiting clear its L1 ` +
        `instead: of instances that made no call during ${seconds} of these writes, ${runs.join(' and ')} still ` +
        `held their keys at the end. The instances above make a call every ${every}, as a serving one does.`,
    )
  }
  const hit = section(md, '## 3. ', file)
  const ratio = /This ÷ baseline ([\d.]+×)/.exec(hit)
  if (ratio) {
    const hits = tableWith(hit, ['checkout', 'processes', 'ns/op (median)'], `${file} hit`)
    const ours = row(hits, (r) => r.checkout === 'this checkout', `${file} hit ours`)
    const theirs = row(hits, (r) => r.checkout.endsWith('(baseline)'), `${file} hit baseline`)
    lines.push(
      '',
      `The in-memory hit (bench/hitpath.js's untagged hit) costs ${ours['ns/op (median)']} ns with this change and ` +
        `${theirs['ns/op (median)']} ns in the ${theirs.checkout.replace(' (baseline)', '')} before it ` +
        `(${ratio[1]}, processes alternating).`,
    )
  } else {
    lines.push('', `The in-memory hit costs ${capture(hit, /median ([\d.]+ ns)\/op/, `${file} hit`)[1]}.`)
  }
  return lines.join('\n')
}

const SECTIONS = { speed, memory, fleet, cluster, nest, demo, 'demo-nest': demoNest, bulkhead, values, tracking }

/** README text with every bench section rendered from `results` (the results files' texts). */
function render(readme, results) {
  let out = readme
  for (const [name, make] of Object.entries(SECTIONS)) {
    const start = `<!-- bench:${name}:start -->`
    const end = `<!-- bench:${name}:end -->`
    const from = out.indexOf(start)
    const to = out.indexOf(end)
    if (from === -1 || to < from) throw new Error(`README.md has no ${start} … ${end} section`)
    out = `${out.slice(0, from + start.length)}\n${make(results)}\n${out.slice(to)}`
  }
  return out
}

/** Rewrites README.md's bench sections from the results files; returns true when it changed. */
function updateReadme(root = ROOT) {
  const file = path.join(root, 'README.md')
  const before = fs.readFileSync(file, 'utf8')
  const after = render(before, readResults(root))
  if (after !== before) fs.writeFileSync(file, after)
  return after !== before
}

/** For the bench scripts: update the README, and say so; a failure is reported, the results stay written. */
function updateReadmeAfterBench() {
  try {
    console.log(updateReadme() ? 'README.md: bench figures updated' : 'README.md: bench figures unchanged')
  } catch (error) {
    console.error(`README.md: could not update the bench figures: ${error.message}`)
    process.exitCode = 1
  }
}

module.exports = { render, readResults, updateReadme, updateReadmeAfterBench, SECTIONS, RESULT_FILES, README }

if (require.main === module) {
  if (process.argv.includes('--check')) {
    const readme = fs.readFileSync(README, 'utf8')
    if (render(readme, readResults()) !== readme) {
      console.error('README.md: the bench figures differ from the results files; run `node bench/readme.js`')
      process.exit(1)
    }
  } else {
    console.log(updateReadme() ? 'README.md updated' : 'README.md already up to date')
  }
}
