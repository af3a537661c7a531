'use strict'

// herdcache fleet benchmark, Redis Cluster part (`npm run bench:fleet` runs it
// after bench/fleet.js; alone: `npm run bench:cluster`, or
// `node bench/cluster.js [--quick]`). Writes bench/CLUSTER.md.
//
// It starts its own 3-primary Redis Cluster on 127.0.0.1 (one redis-server
// per node, `--cluster-enabled yes --save '' --appendonly no`, each in a temp
// dir of its own; HERDCACHE_TEST_SERVER names another server binary, e.g.
// valkey-server), joins it with `redis-cli --cluster create`, waits for
// `cluster_state:ok` on every node, and stops the nodes at the end, on an
// error and on SIGINT/SIGTERM. It touches no other server.
//
// 1. Hot-key expiry stampede on the cluster: PROCS processes × CALLERS
//    callers, each a loop of `await get('hot')` then one event-loop turn, ttl
//    1 s, a 200 ms loader that counts its runs (bench/fleet.js's stampede
//    worker, with cluster clients): herdcache and the peers that take a
//    cluster connection (bentocache with an ioredis `Cluster`, cache-manager
//    with @keyv/redis's `createCluster`). Each library runs alone on a
//    FLUSHALLed cluster; the rounds rotate the order; figures are medians.
// 2. KEYS distinct keys read in one tick: the keys are written by another
//    process (a herdcache instance of the orchestrator) before the reader
//    starts, so they are in Redis and not in the reader's L1; the reader
//    runs `Promise.all(keys.map((k) => cache.getOrLoad(k, loader)))` on a key
//    set it never read, and an ioredis `Cluster` with
//    `enableAutoPipelining: true` runs `Promise.all` of plain `GET`s of the
//    same keys' Redis names. Per-key cost = wall time ÷ keys; the rounds
//    alternate which goes first; figures are medians.
//
// Options:
//   --quick            1 stampede round of 3 s, 3 read rounds (a smoke run); writes bench/out/cluster-quick.md
//   --only=a,b         libraries of part 1 (herdcache, bento-l2, bento-l1-l2-bus, cache-manager)
//   --rounds=N         stampede rounds (default 3; quick 1)
//   --seconds=S        measured seconds per stampede run (default 10; quick 3)
//   --read-rounds=N    measured rounds of part 2 (default 7; quick 3)
//   --keys=N           keys per read round (default 10000)
//   --no-stampede      skip part 1;  --no-reads  skip part 2
//   --out=FILE.md      where to write the Markdown

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync, fork } = require('node:child_process')
const net = require('node:net')
const { performance } = require('node:perf_hooks')
const { connect, SERVER } = require('../__test__/redis-server')
const {
  argv,
  flag,
  opt,
  rejectUnknownArgs,
  tick,
  now,
  median,
  makeValue,
  isoSeconds,
  loadAvg,
  fmtOps,
  machine,
  pkgVersion,
  addonSha,
  herdcacheBuild,
  sleep,
  race,
  timeoutError,
  HB_N,
  hbin,
  hval,
  quantile,
} = require('./common')

// ---------------------------------------------------------------- options

const WORKER = opt('worker') // internal: 'stampede' | 'reads'
if (!WORKER) {
  rejectUnknownArgs(
    /^--(quick|no-stampede|no-reads|only=.+|rounds=\d+|seconds=[\d.]+|read-rounds=\d+|keys=\d+|out=.+)$/,
    'node bench/cluster.js [--quick] [--only=lib,lib] [--rounds=N] [--seconds=S] [--read-rounds=N] [--keys=N] [--no-stampede] [--no-reads] [--out=FILE.md]',
  )
}
// where herdcache is loaded from: the orchestrator's copy of the runtime files (see snapshotHerdcache)
let HERD_MODULE = process.env.HERDCACHE_CLUSTER_MODULE || path.join(__dirname, '..')
const QUICK = flag('quick')
const ROUNDS = Number(opt('rounds') || (QUICK ? 1 : 3))
const SECONDS = Number(opt('seconds') || (QUICK ? 3 : 10))
const READ_ROUNDS = Number(opt('read-rounds') || (QUICK ? 3 : 7))
const KEYS = Number(opt('keys') || 10_000)
const ONLY = opt('only') ? new Set(opt('only').split(',')) : null
const OUT = opt('out') ? path.resolve(opt('out')) : path.join(__dirname, QUICK ? 'out/cluster-quick.md' : 'CLUSTER.md')

const NODES = 3
const NODE_TIMEOUT = 1000 // --cluster-node-timeout, ms
const PREFIX = 'bench:'
const PROCS = 4
const CALLERS = 50
const TTL = 1000 // ms, stampede
const LOAD_MS = 200
const WARM_MS = 1500 // cold start + first expiry, not measured
const MEASURE_MS = SECONDS * 1000
const DRAIN_MS = 10_000 // how long a worker waits for calls still in flight at the end
const KEY = 'hot'
const STALE_AGE = TTL * 1.1 // an answer older than this is stale (herdcache writes ttl ±10 % jitter)
const SLOW_MS = 100 // a call that waited this long waited for a load
const READ_TTL = 600_000 // the read keys outlive the run

const VALUE_TEMPLATE = makeValue({ loadedAt: 0 })
const VALUE_BYTES = Buffer.byteLength(JSON.stringify(makeValue({ loadedAt: Date.now() })))
const ITEMS = VALUE_TEMPLATE.items.length
const isValue = (v) =>
  v !== null && typeof v === 'object' && v.id === 42 && Array.isArray(v.items) && v.items.length === ITEMS
const freshValue = () => ({ ...VALUE_TEMPLATE, loadedAt: Date.now() })

// ---------------------------------------------------------------- libraries

const hostPort = (url) => {
  const u = new URL(url)
  return { host: u.hostname, port: Number(u.port) }
}

const LIBS = [
  {
    name: 'herdcache',
    label: 'herdcache',
    version: () => require(path.join(HERD_MODULE, 'package.json')).version,
    setup: (ttl) =>
      `\`new Cache({ redis: { cluster: [3 seed URLs] }, prefix: '${PREFIX}', ttl: ${ttl} })\` (L1 on, hardTtl 10 × ttl, lockTtl, jitter and XFetch at their defaults), \`getOrLoad(key, loader)\``,
  },
  {
    name: 'bento-l2',
    label: 'bentocache (Redis L2)',
    version: () => pkgVersion('bentocache'),
    setup: (ttl) =>
      `\`bentostore().useL2Layer(redisDriver({ connection: new Redis.Cluster(seeds) }))\` (ioredis ${pkgVersion('ioredis')}), \`ttl: ${ttl}\`, \`getOrSet({ key, factory })\` (defaults: in-process lock per key, no grace period)`,
  },
  {
    name: 'bento-l1-l2-bus',
    label: 'bentocache (L1 + L2 + bus)',
    version: () => pkgVersion('bentocache'),
    setup: (ttl) =>
      `\`bentostore().useL1Layer(memoryDriver({ maxItems: 10000 })).useL2Layer(redisDriver({ connection: cluster })).useBus(redisBusDriver({ connection: cluster }))\` (one ioredis \`Cluster\`; the bus duplicates it, classic \`PUBLISH\`/\`SUBSCRIBE\`), \`ttl: ${ttl}\`, \`getOrSet\``,
  },
  {
    name: 'cache-manager',
    label: 'cache-manager + @keyv/redis',
    version: () => `${pkgVersion('cache-manager')} / @keyv/redis ${pkgVersion('@keyv/redis')}`,
    setup: (ttl) =>
      `\`createCache({ stores: [createKeyv({ rootNodes: seeds.map((url) => ({ url })) })], ttl: ${ttl} })\` (@keyv/redis's node-redis \`createCluster\`), \`wrap(key, fn, ${ttl})\``,
  },
]
const libByName = new Map(LIBS.map((l) => [l.name, l]))

// Makes one library instance on the cluster: { ready(), get(key), close(), stats?() }.
async function createLib(name, { seeds, ttl, load }) {
  switch (name) {
    case 'herdcache': {
      const { Cache } = require(HERD_MODULE)
      const cache = new Cache({ redis: { cluster: seeds }, prefix: PREFIX, ttl })
      const loader = () => load()
      return {
        ready: () => cache.ready(),
        get: (key) => cache.getOrLoad(key, loader),
        close: () => cache.close(),
        stats: () => cache.stats(),
      }
    }
    case 'bento-l2':
    case 'bento-l1-l2-bus': {
      const { BentoCache, bentostore } = await import('bentocache')
      const { redisDriver, redisBusDriver } = await import('bentocache/drivers/redis')
      const { Cluster } = require('ioredis')
      const cluster = new Cluster(seeds.map(hostPort))
      let store = bentostore()
      if (name === 'bento-l1-l2-bus') {
        const { memoryDriver } = await import('bentocache/drivers/memory')
        store = store.useL1Layer(memoryDriver({ maxItems: 10_000 }))
      }
      store = store.useL2Layer(redisDriver({ connection: cluster }))
      if (name === 'bento-l1-l2-bus') store = store.useBus(redisBusDriver({ connection: cluster }))
      const bento = new BentoCache({ default: 'c', ttl, stores: { c: store } })
      const factory = () => load()
      return {
        ready: async () => {
          await bento.has({ key: '__ready__' })
          if (name === 'bento-l1-l2-bus') await sleep(200) // let the bus subscribe
        },
        get: (key) => bento.getOrSet({ key, factory }),
        close: () => bento.disconnectAll(),
      }
    }
    case 'cache-manager': {
      const { createCache } = require('cache-manager')
      const { createKeyv } = require('@keyv/redis')
      const cache = createCache({ stores: [createKeyv({ rootNodes: seeds.map((url) => ({ url })) })], ttl })
      const fn = () => load()
      return {
        ready: () => cache.get('__ready__'),
        get: (key) => cache.wrap(key, fn, ttl),
        close: () => cache.disconnect(),
      }
    }
    default:
      throw new Error(`unknown library ${name}`)
  }
}

// ---------------------------------------------------------------- worker: stampede

async function stampedeWorker() {
  const lib = opt('lib')
  const seeds = opt('seeds').split(',')
  const proc = Number(opt('proc'))
  const total = WARM_MS + MEASURE_MS

  const runs = [] // [startRel, endRel]
  let offset = 0 // performance.now() + offset = ms since the common start
  const rel = () => now() + offset
  const load = async () => {
    const r = [rel(), 0]
    runs.push(r)
    await sleep(LOAD_MS)
    r[1] = rel()
    return freshValue()
  }
  let inst
  try {
    inst = await createLib(lib, { seeds, ttl: TTL, load })
    await race(inst.ready(), 10_000, timeoutError('ready() did not settle within 10 s'))
  } catch (err) {
    process.send({ type: 'error', error: String((err && err.stack) || err) })
    setTimeout(() => process.exit(1), 50)
    return
  }
  const go = await new Promise((resolve) => {
    process.once('message', resolve)
    process.send({ type: 'ready' })
  })
  offset = performance.timeOrigin - go.t0
  const cpu0 = process.cpuUsage()
  while (rel() < 0) await sleep(Math.min(20, -rel()))

  const hist = new Uint32Array(HB_N) // calls started in the measured window
  let served = 0 // answered with the value, ended in the window
  let errors = 0
  let stale = 0
  let slow = 0
  let maxAge = 0
  const errorSamples = []
  let inFlight = 0
  const get = inst.get

  async function caller() {
    for (;;) {
      const s = rel()
      if (s >= total) return
      inFlight++
      let v
      let failed = null
      try {
        v = await get(KEY)
      } catch (err) {
        failed = err
      }
      inFlight--
      const e = rel()
      const measured = s >= WARM_MS
      if (measured) {
        hist[hbin((e - s) * 1000)]++
        if (e - s >= SLOW_MS) slow++
      }
      if (failed !== null || !isValue(v)) {
        if (measured) errors++
        if (errorSamples.length < 5)
          errorSamples.push(
            failed
              ? `${failed.code || failed.name || ''} ${failed.message}`
              : `unexpected value ${JSON.stringify(v).slice(0, 80)}`,
          )
      } else if (measured) {
        if (e < total) served++
        const age = Date.now() - v.loadedAt
        if (age > STALE_AGE) stale++
        if (age > maxAge) maxAge = age
      }
      await tick() // one event-loop turn between requests
    }
  }
  const callers = []
  for (let i = 0; i < CALLERS; i++) callers.push(caller())
  const drained = await race(
    Promise.all(callers).then(() => true),
    total + DRAIN_MS - rel(),
    () => false,
  )
  const cpu = process.cpuUsage(cpu0)
  let stats = null
  const runsAtStats = runs.length
  const runsEndedAtStats = runs.filter((r) => r[1] !== 0).length
  try {
    stats = inst.stats ? inst.stats() : null
  } catch (err) {
    stats = { error: String(err.message) }
  }
  let closeError = null
  try {
    await race(inst.close(), 5000, timeoutError('close() did not settle within 5 s'))
  } catch (err) {
    closeError = String(err && err.message)
  }
  process.send(
    {
      type: 'result',
      proc,
      runs,
      hist: Array.from(hist),
      served,
      errors,
      stale,
      slow,
      maxAge,
      errorSamples,
      pending: drained ? 0 : inFlight,
      cpuMs: (cpu.user + cpu.system) / 1000,
      stats,
      runsAtStats,
      runsEndedAtStats,
      closeError,
    },
    () => process.exit(0),
  )
}

// ---------------------------------------------------------------- worker: many keys in one tick

const readKey = (set, i) => `r${set}:k${i}`
/** The ioredis reader that does herdcache's work: GET, then JSON.parse of the value. */
const PARSED = 'ioredis GET + JSON.parse'
/** The reader whose L1 holds every set (see readsWorker). */
const ROOMY = 'herdcache (L1 holds every set)'
/** The Redis name herdcache stores key `k` under (README: `{<prefix>k}`). */
const redisName = (key) => `{${PREFIX}${key}}`

async function readsWorker() {
  const seeds = opt('seeds').split(',')
  const sets = Number(opt('sets'))
  const { Cache } = require(HERD_MODULE)
  const { Cluster } = require('ioredis')
  const cache = new Cache({ redis: { cluster: seeds }, prefix: PREFIX, ttl: READ_TTL })
  // The same reads with an L1 that holds every set: its inserts evict
  // nothing (the first instance's default maxEntries, 10 000, evicts the
  // previous set at every insert), which tells what the evictions cost.
  const roomy = new Cache({ redis: { cluster: seeds }, prefix: PREFIX, ttl: READ_TTL, maxEntries: sets * KEYS })
  const ioredis = new Cluster(seeds.map(hostPort), { enableAutoPipelining: true })
  let loads = 0
  const loader = () => {
    loads++
    return freshValue()
  }
  const { parse } = JSON
  const readers = {
    herdcache: (keys) => Promise.all(keys.map((k) => cache.getOrLoad(k, loader))),
    [ROOMY]: (keys) => Promise.all(keys.map((k) => roomy.getOrLoad(k, loader))),
    'ioredis GET': (names) => Promise.all(names.map((n) => ioredis.get(n))),
    [PARSED]: (names) =>
      Promise.all(
        names.map((n) =>
          ioredis.get(n).then((s) => {
            // the value is the envelope's second line (src/core/envelope.rs)
            return s === null ? null : parse(s.slice(s.indexOf('\n') + 1))
          }),
        ),
      ),
  }
  const order = Object.keys(readers)
  await race(cache.ready(), 10_000, timeoutError('herdcache ready() did not settle within 10 s'))
  await race(roomy.ready(), 10_000, timeoutError('herdcache ready() did not settle within 10 s'))
  await ioredis.get(redisName(readKey(0, 0)))
  const rounds = []
  // set 0: warm-up (each reader's first batch: slot map, connections), then one set per round
  for (let set = 0; set < sets; set++) {
    const keys = Array.from({ length: KEYS }, (_, i) => readKey(set, i))
    const names = keys.map(redisName)
    const rot = set % order.length
    const row = { set, warmup: set === 0, ms: {}, bad: {} }
    for (const reader of order.slice(rot).concat(order.slice(0, rot))) {
      const input = reader.startsWith('herdcache') ? keys : names
      const loadsBefore = loads
      const cpu0 = process.cpuUsage()
      const t0 = now()
      let values
      let error = null
      try {
        values = await race(readers[reader](input), 30_000, timeoutError('the batch did not settle within 30 s'))
      } catch (err) {
        error = `${err.code || err.name || ''} ${err.message}`
      }
      const ms = now() - t0
      const cpu = process.cpuUsage(cpu0)
      const bad = error
        ? KEYS
        : values.filter((v) => (reader === 'ioredis GET' ? typeof v !== 'string' : !isValue(v))).length
      row.ms[reader] = ms
      row.cpuMs = row.cpuMs || {}
      row.cpuMs[reader] = (cpu.user + cpu.system) / 1000
      row.bad[reader] = bad
      if (reader.startsWith('herdcache')) row.loads = (row.loads || 0) + loads - loadsBefore
      if (error) row.error = error
      await sleep(50)
    }
    rounds.push(row)
  }
  const stats = cache.stats()
  await race(cache.close(), 5000, () => {})
  await race(roomy.close(), 5000, () => {})
  await race(ioredis.quit(), 2000, () => ioredis.disconnect())
  process.send({ type: 'result', rounds, stats, order }, () => process.exit(0))
}

// ---------------------------------------------------------------- the cluster

const CLI = (() => {
  const base = path.basename(SERVER)
  if (base.endsWith('-server')) {
    const cli = path.join(path.dirname(SERVER), base.replace(/-server$/, '-cli'))
    const r = spawnSync(cli, ['--version'], { stdio: 'ignore' })
    if (!r.error && r.status === 0) return cli
  }
  return 'redis-cli'
})()

/** Whether nothing listens on 127.0.0.1:port (checked by listening on it a moment). */
function portFree(port) {
  return new Promise((resolve) => {
    const srv = net.createServer()
    srv.unref()
    srv.once('error', () => resolve(false))
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)))
  })
}

/** A port P with P and its cluster bus port P + 10000 free. */
async function clusterPort(taken) {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 20_000)
    if (taken.has(port) || taken.has(port + 10_000)) continue
    if ((await portFree(port)) && (await portFree(port + 10_000))) return port
  }
  throw new Error('no free port pair (P, P + 10000) for a cluster node in 50 attempts')
}

const liveNodes = new Set() // { child, dir }
const tempDirs = new Set()
function killNodesNow() {
  for (const n of liveNodes) {
    try {
      n.child.kill('SIGKILL')
    } catch {}
  }
  for (const dir of tempDirs) {
    try {
      fs.rmSync(dir, { recursive: true, force: true })
    } catch {}
  }
}

async function command(port, ...args) {
  const c = await connect(port)
  try {
    return await c.cmd(...args)
  } finally {
    c.close()
  }
}

function spawnNode(port, dir) {
  const child = spawn(
    SERVER,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      `nodes-${port}.conf`,
      '--cluster-node-timeout',
      String(NODE_TIMEOUT),
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let output = ''
  child.stdout.on('data', (d) => (output = (output + d).slice(-4000)))
  child.stderr.on('data', (d) => (output = (output + d).slice(-4000)))
  child.exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve((child.exitInfo = { code, signal })))
    child.on('error', (error) => resolve((child.exitInfo = { error })))
  })
  child.output = () => output
  return child
}

async function stopNode(node) {
  liveNodes.delete(node)
  if (node.child.exitInfo) return
  try {
    node.child.kill('SIGTERM')
  } catch {}
  const exited = await race(
    node.child.exited.then(() => true),
    3000,
    () => false,
  )
  if (!exited) {
    try {
      node.child.kill('SIGKILL')
    } catch {}
    await node.child.exited
  }
}

/** Starts NODES cluster-enabled servers, joins them into one cluster, waits for cluster_state:ok everywhere. */
async function startCluster() {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'herdcache-cluster-bench-'))
  tempDirs.add(base)
  const nodes = []
  const cluster = {
    nodes,
    ports: () => nodes.map((n) => n.port),
    seeds: () => nodes.map((n) => `redis://127.0.0.1:${n.port}`),
    async stop() {
      await Promise.all(nodes.map(stopNode))
      fs.rmSync(base, { recursive: true, force: true })
      tempDirs.delete(base)
    },
  }
  try {
    const taken = new Set()
    for (let i = 0; i < NODES; i++) {
      let node = null
      for (let attempt = 0; attempt < 5 && !node; attempt++) {
        const port = await clusterPort(taken)
        const dir = path.join(base, `node-${port}`)
        fs.mkdirSync(dir)
        const child = spawnNode(port, dir)
        const candidate = { port, dir, child }
        liveNodes.add(candidate)
        const end = Date.now() + 5000
        for (;;) {
          if (child.exitInfo) {
            liveNodes.delete(candidate)
            break
          }
          try {
            const info = await command(port, 'INFO', 'server')
            if (new RegExp(`\\bprocess_id:${child.pid}\\b`).test(info)) {
              node = candidate
              break
            }
          } catch {}
          if (Date.now() > end) throw new Error(`${SERVER} did not answer on port ${port}:\n${child.output()}`)
          await sleep(20)
        }
      }
      if (!node) throw new Error(`could not start ${SERVER} on a free port (5 attempts)`)
      taken.add(node.port)
      taken.add(node.port + 10_000)
      nodes.push(node)
    }
    const create = spawnSync(
      CLI,
      ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-yes'],
      { encoding: 'utf8', timeout: 30_000 },
    )
    if (create.status !== 0)
      throw new Error(`${CLI} --cluster create failed (${create.status}):\n${create.stdout}\n${create.stderr}`)
    const end = Date.now() + 30_000
    for (;;) {
      const states = await Promise.all(
        nodes.map((n) =>
          command(n.port, 'CLUSTER', 'INFO')
            .then((s) => /cluster_state:ok/.test(s) && /cluster_known_nodes:(\d+)/.exec(s)?.[1] === String(NODES))
            .catch(() => false),
        ),
      )
      if (states.every(Boolean)) break
      if (Date.now() > end) throw new Error('the cluster did not reach cluster_state:ok on every node within 30 s')
      await sleep(100)
    }
    return cluster
  } catch (err) {
    await cluster.stop()
    throw err
  }
}

/** The command on every node (FLUSHALL, CONFIG RESETSTAT, INFO …): the replies in node order. */
const onEvery = (cluster, ...args) => Promise.all(cluster.ports().map((p) => command(p, ...args)))

async function redisCounters(cluster) {
  const infos = await onEvery(cluster, 'INFO')
  const num = (text, k) => Number((text.match(new RegExp(`^${k}:([\\d.]+)`, 'm')) || [])[1] || 0)
  return {
    cpuS: infos.reduce((a, t) => a + num(t, 'used_cpu_user') + num(t, 'used_cpu_sys'), 0),
    commands: infos.reduce((a, t) => a + num(t, 'total_commands_processed'), 0),
    keys: infos.reduce((a, t) => a + Number((/^db0:keys=(\d+)/m.exec(t) || [])[1] || 0), 0),
    perNodeCommands: infos.map((t) => num(t, 'total_commands_processed')),
  }
}

// ---------------------------------------------------------------- orchestrator

const children = new Set()
process.on('exit', () => {
  for (const c of children) {
    try {
      if (c.exitCode === null) c.kill('SIGKILL')
    } catch {}
  }
  killNodesNow()
})
if (!WORKER) {
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
      console.error(`\n${sig}: stopping the workers and the cluster`)
      process.exit(130) // the exit handler kills them
    })
  }
}

function runWorker(args, onReady, limitMs) {
  return new Promise((resolve) => {
    const child = fork(__filename, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] })
    children.add(child)
    let result = null
    let error = null
    const limit = setTimeout(() => {
      error = `worker killed after ${limitMs / 1000} s`
      child.kill('SIGKILL')
    }, limitMs)
    child.on('message', (m) => {
      if (m.type === 'ready') onReady(child)
      else if (m.type === 'result') result = m
      else if (m.type === 'error') error = m.error
    })
    child.on('exit', (code, signal) => {
      clearTimeout(limit)
      children.delete(child)
      if (!result && !error) error = `worker exited (${signal || code}) without a result`
      resolve({ result, error })
    })
  })
}

async function stampedeRun(cluster, lib) {
  await onEvery(cluster, 'FLUSHALL')
  await onEvery(cluster, 'CONFIG', 'RESETSTAT')
  const before = await redisCounters(cluster)
  const ready = []
  let goResolve
  const allReady = new Promise((resolve) => {
    goResolve = resolve
  })
  const limit = 30_000 + WARM_MS + MEASURE_MS + DRAIN_MS + 10_000
  const ps = []
  for (let p = 0; p < PROCS; p++) {
    ps.push(
      runWorker(
        [
          '--worker=stampede',
          `--lib=${lib}`,
          `--seeds=${cluster.seeds().join(',')}`,
          `--proc=${p}`,
          `--seconds=${SECONDS}`,
        ],
        (child) => {
          ready.push(child)
          if (ready.length === PROCS) goResolve()
        },
        limit,
      ),
    )
  }
  const failedEarly = Promise.all(ps).then(() => 'exited')
  const state = await race(Promise.race([allReady.then(() => 'ready'), failedEarly]), 30_000, () => 'timeout')
  if (state !== 'ready') {
    for (const c of children) {
      try {
        c.kill('SIGKILL')
      } catch {}
    }
    const outs = await Promise.all(ps)
    return { error: outs.map((o) => o.error).filter(Boolean)[0] || `workers not ready (${state})` }
  }
  const t0 = Date.now() + 200
  for (const c of ready) c.send({ type: 'go', t0 })
  const outs = await Promise.all(ps)
  const after = await redisCounters(cluster)
  const errors = outs.filter((o) => o.error).map((o) => o.error)
  if (errors.length) return { error: errors[0] }
  return {
    procs: outs.map((o) => o.result),
    redisCommands: after.commands - before.commands,
    perNodeCommands: after.perNodeCommands,
    redisCpuS: after.cpuS - before.cpuS,
  }
}

function analyzeStampede(run) {
  const total = WARM_MS + MEASURE_MS
  const runs = run.procs.flatMap((p) => p.runs.map((r) => ({ start: r[0], end: r[1], proc: p.proc })))
  runs.sort((a, b) => a.start - b.start)
  const measured = runs.filter((r) => r.start >= WARM_MS && r.start < total)
  // expiries: groups of loader runs that overlap in time (as bench/fleet.js)
  const episodes = []
  for (const r of measured) {
    const end = r.end || Infinity
    const last = episodes[episodes.length - 1]
    if (last && r.start < last.end) {
      last.n++
      if (end > last.end) last.end = end
    } else episodes.push({ end, n: 1 })
  }
  const hist = new Uint32Array(HB_N)
  for (const p of run.procs) for (let i = 0; i < HB_N; i++) hist[i] += p.hist[i]
  const stats = {}
  for (const p of run.procs) {
    if (!p.stats) continue
    for (const [k, v] of Object.entries(p.stats)) if (typeof v === 'number') stats[k] = (stats[k] || 0) + v
  }
  const sum = (k) => run.procs.reduce((a, p) => a + p[k], 0)
  const served = sum('served')
  return {
    loaderRuns: measured.length,
    loaderRunsAll: runs.length,
    perTtl: measured.length / (MEASURE_MS / TTL),
    expiries: episodes.length,
    perExpiryMean: episodes.length ? episodes.reduce((a, e) => a + e.n, 0) / episodes.length : 0,
    perExpiryMax: episodes.reduce((a, e) => Math.max(a, e.n), 0),
    servedPerSec: served / (MEASURE_MS / 1000),
    p50us: quantile(hist, 0.5),
    p99us: quantile(hist, 0.99),
    p999us: quantile(hist, 0.999),
    maxUs: (() => {
      for (let i = HB_N - 1; i >= 0; i--) if (hist[i]) return hval(i)
      return null
    })(),
    slowCalls: sum('slow'),
    errors: sum('errors'),
    staleShare: served ? sum('stale') / served : 0,
    maxAgeMs: Math.max(...run.procs.map((p) => p.maxAge)),
    pending: sum('pending'),
    errorSamples: run.procs.flatMap((p) => p.errorSamples).slice(0, 5),
    closeErrors: run.procs.map((p) => p.closeError).filter(Boolean),
    cpuNodeS: sum('cpuMs') / 1000,
    cpuRedisS: run.redisCpuS,
    redisCmdsPerSec: run.redisCommands / (total / 1000),
    perNodeCommands: run.perNodeCommands,
    herdStats: Object.keys(stats).length ? stats : null,
    runsAtStats: sum('runsAtStats'),
    runsEndedAtStats: sum('runsEndedAtStats'),
  }
}

async function stampedePart(cluster, names, odd) {
  console.log(
    `\n1. expiry stampede on the cluster: ${PROCS} processes × ${CALLERS} callers, ttl ${TTL} ms, loader ${LOAD_MS} ms, ${WARM_MS / 1000} s warm-up + ${SECONDS} s, ${ROUNDS} round(s)`,
  )
  const perRound = names.map(() => [])
  for (let round = 0; round < ROUNDS; round++) {
    const rot = round % names.length
    for (const n of names.slice(rot).concat(names.slice(0, rot))) {
      const run = await stampedeRun(cluster, n)
      const a = run.error ? { error: run.error } : analyzeStampede(run)
      perRound[names.indexOf(n)][round] = a
      if (a.error) console.log(`  r${round + 1} ${n.padEnd(17)} FAILED: ${a.error.split('\n').slice(0, 3).join(' | ')}`)
      else
        console.log(
          `  r${round + 1} ${n.padEnd(17)} loader runs ${String(a.loaderRuns).padStart(4)} (${a.perTtl.toFixed(2)}/period, max ${a.perExpiryMax} at once)  served ${fmtOps(a.servedPerSec).padStart(8)}/s  p50 ${fmtMs(a.p50us).padStart(8)}  p99 ${fmtMs(a.p99us).padStart(8)}  errors ${a.errors}${a.pending ? `  PENDING ${a.pending}` : ''}  cpu ${a.cpuNodeS.toFixed(1)}+${a.cpuRedisS.toFixed(1)} s`,
        )
    }
  }
  const rows = {}
  names.forEach((n, i) => {
    const rs = perRound[i]
    const ok = rs.filter((r) => r && !r.error)
    if (!ok.length) {
      rows[n] = { error: (rs.find((r) => r && r.error) || { error: 'no run' }).error, all: rs }
      odd.push(`${libByName.get(n).label}: every round failed: ${rows[n].error.split('\n')[0]}`)
      return
    }
    const med = (k) => median(ok.map((r) => r[k]).filter((x) => x !== null && x !== undefined))
    const row = { rounds: ok.length, failedRounds: rs.length - ok.length, all: rs }
    for (const k of [
      'loaderRuns',
      'perTtl',
      'expiries',
      'perExpiryMean',
      'servedPerSec',
      'p50us',
      'p99us',
      'p999us',
      'maxUs',
      'slowCalls',
      'staleShare',
      'maxAgeMs',
      'cpuNodeS',
      'cpuRedisS',
      'redisCmdsPerSec',
      'errors',
    ])
      row[k] = med(k)
    row.perExpiryMax = Math.max(...ok.map((r) => r.perExpiryMax))
    row.errorsTotal = ok.reduce((a, r) => a + r.errors, 0)
    row.pending = ok.reduce((a, r) => a + r.pending, 0)
    row.herdStats = ok[ok.length - 1].herdStats
    row.errorSamples = ok.flatMap((r) => r.errorSamples).slice(0, 3)
    row.closeErrors = ok.flatMap((r) => r.closeErrors)
    rows[n] = row
    const label = libByName.get(n).label
    if (row.failedRounds) odd.push(`${label}: ${row.failedRounds} of ${rs.length} rounds failed.`)
    if (row.errorsTotal)
      odd.push(`${label}: ${row.errorsTotal} calls failed over the rounds (e.g. ${row.errorSamples.join('; ')}).`)
    if (row.pending) odd.push(`${label}: ${row.pending} calls still pending ${DRAIN_MS / 1000} s after the end.`)
    if (row.closeErrors.length) odd.push(`${label}: close(): ${row.closeErrors[0]}`)
  })
  const h = rows.herdcache
  if (h && !h.error) {
    for (const [round, r] of h.all.entries()) {
      if (!r || r.error) continue
      if (r.perExpiryMax > 1)
        odd.push(`herdcache round ${round + 1}: ${r.perExpiryMax} loader runs overlapped in one expiry.`)
      // stats() is read after the callers ended, before close(): a refresh still running then is not a load yet
      const loads = r.herdStats && r.herdStats.loads
      if (r.herdStats && (loads < r.runsEndedAtStats || loads > r.runsAtStats))
        odd.push(
          `herdcache round ${round + 1}: \`stats().loads\` ${loads} but the loader had run ${r.runsAtStats} times (${r.runsEndedAtStats} finished) when stats() was read.`,
        )
    }
    const s = h.herdStats || {}
    for (const k of ['loadErrors', 'timeouts', 'backgroundErrors'])
      if (s[k]) odd.push(`herdcache (last round): \`stats().${k}\` ${s[k]}.`)
  }
  return { names, rows }
}

async function writeReadKeys(cluster, sets) {
  const { Cache } = require(HERD_MODULE)
  const writer = new Cache({ redis: { cluster: cluster.seeds() }, prefix: PREFIX, ttl: READ_TTL })
  await race(writer.ready(), 10_000, timeoutError('the writer did not become ready within 10 s'))
  const t0 = now()
  for (let set = 0; set < sets; set++) {
    const writes = []
    for (let i = 0; i < KEYS; i++) writes.push(writer.set(readKey(set, i), freshValue()))
    await Promise.all(writes)
  }
  const ms = now() - t0
  await race(writer.close(), 5000, () => {})
  return ms
}

async function readsPart(cluster, odd) {
  const sets = READ_ROUNDS + 1
  console.log(
    `\n2. ${KEYS} keys in one tick, L1 cold: ${READ_ROUNDS} round(s) + a warm-up, herdcache vs ioredis Cluster (enableAutoPipelining)`,
  )
  await onEvery(cluster, 'FLUSHALL')
  const writeMs = await writeReadKeys(cluster, sets)
  const counters = await redisCounters(cluster)
  console.log(
    `  wrote ${sets} × ${KEYS} keys with a herdcache instance in ${(writeMs / 1000).toFixed(1)} s; ${counters.keys} keys on the cluster`,
  )
  if (counters.keys !== sets * KEYS)
    odd.push(`part 2: the cluster holds ${counters.keys} keys after the writes, not ${sets * KEYS}.`)
  await onEvery(cluster, 'CONFIG', 'RESETSTAT')
  const out = await runWorker(
    ['--worker=reads', `--seeds=${cluster.seeds().join(',')}`, `--sets=${sets}`, `--keys=${KEYS}`],
    () => {},
    120_000,
  )
  if (out.error) {
    odd.push(`part 2 failed: ${out.error.split('\n')[0]}`)
    return { error: out.error }
  }
  const after = await redisCounters(cluster)
  const { rounds, stats, order } = out.result
  const measured = rounds.filter((r) => !r.warmup)
  for (const r of rounds)
    console.log(
      `  ${r.warmup ? 'warm-up' : `r${r.set}     `} ${order.map((k) => `${k} ${r.ms[k].toFixed(1)} ms`).join('  ')}${r.loads ? `  LOADER RAN ${r.loads}` : ''}${r.error ? `  ERROR ${r.error}` : ''}`,
    )
  const perKeyUs = (reader) => measured.map((r) => (r.ms[reader] * 1000) / KEYS)
  const summary = {}
  for (const reader of order) {
    const xs = perKeyUs(reader)
    summary[reader] = {
      medianUs: median(xs),
      minUs: Math.min(...xs),
      maxUs: Math.max(...xs),
      cpuUs: median(measured.map((r) => (r.cpuMs[reader] * 1000) / KEYS)),
    }
  }
  // the per-round ratios (the two readers ran back to back on the same keys)
  const ratios = measured.map((r) => r.ms.herdcache / r.ms['ioredis GET'])
  const ratio = median(ratios)
  // against the same work: herdcache hands back parsed objects
  const vsParsed = median(measured.map((r) => r.ms.herdcache / r.ms[PARSED]))
  for (const r of rounds) {
    if (r.loads) odd.push(`part 2 round ${r.set}: herdcache ran the loader ${r.loads} times (every key was in Redis).`)
    for (const [reader, bad] of Object.entries(r.bad))
      if (bad) odd.push(`part 2 round ${r.set}: ${reader} got ${bad} wrong or missing values.`)
    if (r.error) odd.push(`part 2 round ${r.set}: ${r.error}`)
  }
  for (const k of ['loadErrors', 'timeouts', 'backgroundErrors'])
    if (stats[k]) odd.push(`part 2: herdcache \`stats().${k}\` ${stats[k]}.`)
  return {
    rounds,
    order,
    summary,
    ratio,
    ratios,
    vsParsed,
    stats,
    writeMs,
    redisCommands: after.commands,
    perNodeCommands: after.perNodeCommands,
  }
}

// ---------------------------------------------------------------- Markdown

const fmtMs = (us) => {
  if (us === null || us === undefined) return '—'
  const ms = us / 1000
  return ms >= 100
    ? `${ms.toFixed(0)} ms`
    : ms >= 10
      ? `${ms.toFixed(1)} ms`
      : ms >= 1
        ? `${ms.toFixed(2)} ms`
        : us >= 10
          ? `${us.toFixed(0)} µs`
          : `${us.toFixed(1)} µs`
}
const fmtUs = (us) => `${us >= 10 ? us.toFixed(1) : us.toFixed(2)} µs`
const fmtRatio = (x) => (Number.isFinite(x) ? `${x >= 10 ? x.toFixed(1) : x.toFixed(2)}×` : '—')
const fmtPct = (f) => {
  const x = f * 100
  return x === 0 ? '0 %' : x < 1 ? `${x.toFixed(2)} %` : `${x.toFixed(0)} %`
}
const fmtN = (x, d = 2) => (Number.isInteger(x) ? String(x) : x.toFixed(d))
/** 10000 as '10 000'. */
const fmtCount = (n) => n.toLocaleString('en-US').replace(/,/g, ' ')
const STATS_SHOWN = [
  'loads',
  'lockAcquired',
  'redisHits',
  'l1Hits',
  'hits',
  'staleServed',
  'misses',
  'coalesced',
  'backgroundRefreshes',
  'earlyRefreshes',
  'loadErrors',
  'timeouts',
  'backgroundErrors',
]
const statsLine = (s) =>
  STATS_SHOWN.filter((k) => typeof s[k] === 'number')
    .map((k) => `${k} ${s[k]}`)
    .join(', ')

/** The paragraph of "What the numbers say", from the figures. */
function summary({ stampede, reads }) {
  const parts = []
  const h = stampede && stampede.rows.herdcache
  if (h && !h.error) {
    const peers = stampede.names.filter((n) => n !== 'herdcache' && !stampede.rows[n].error)
    const best = peers.reduce(
      (a, n) => (a === null || stampede.rows[n].servedPerSec > stampede.rows[a].servedPerSec ? n : a),
      null,
    )
    parts.push(
      `When the hot key expires under ${PROCS} × ${CALLERS} callers on the cluster, herdcache ran its loader ${h.perTtl === 1 ? 'once' : `${fmtN(h.perTtl)} times`} per TTL period across the ${PROCS} processes (at most ${h.perExpiryMax} at once, ${h.errorsTotal} errors over the rounds)${peers.length ? `, against ${peers.map((n) => `${fmtN(stampede.rows[n].perTtl)} for ${libByName.get(n).label}`).join(', ')}` : ''}. It served ${fmtOps(h.servedPerSec)} calls/s with p99 ${fmtMs(h.p99us)}${best ? `; the best peer, ${libByName.get(best).label}, ${fmtOps(stampede.rows[best].servedPerSec)}/s with p99 ${fmtMs(stampede.rows[best].p99us)}` : ''}.`,
    )
  }
  if (reads && !reads.error) {
    const s = reads.summary
    const hc = s.herdcache.medianUs
    const get = s['ioredis GET'].medianUs
    const parsed = s[PARSED].medianUs
    const { vsParsed } = reads
    parts.push(
      `Reading ${fmtCount(KEYS)} keys in one tick with a cold L1, herdcache cost ${fmtUs(hc)} per key, ${fmtRatio(reads.ratio)} ioredis Cluster's autopipelined plain \`GET\`s (${fmtUs(get)}) and ${fmtRatio(vsParsed)} the same \`GET\`s followed by \`JSON.parse\` (${fmtUs(parsed)}).`,
    )
    if (reads.ratio > 1)
      parts.push(
        vsParsed <= 1
          ? 'herdcache hands back parsed objects, the plain `GET`s strings: the gap to them is the parse of each ~1 KB value (and the garbage it makes), which the `GET` + `JSON.parse` row pays too, and there herdcache is as fast or faster.'
          : 'herdcache costs more than the `GET`s with `JSON.parse` too: that part of the gap is its own (the batching, the envelope, the L1 inserts and evictions: `maxEntries` is 10 000 at its default).',
      )
  }
  return parts.join(' ')
}

function markdown({ info, libs, stampede, reads, odd, skipped }) {
  const L = []
  L.push('# herdcache fleet benchmark: Redis Cluster')
  L.push('')
  L.push(`- date: ${info.date}`)
  L.push(
    `- machine: ${info.machine.cpu}, ${info.machine.mem}, ${info.machine.os}; load average at start ${info.loadStart}, at end ${info.machine.load}`,
  )
  L.push(
    `- node ${process.version} (V8 ${process.versions.v8}); a Redis Cluster of ${NODES} primaries (no replicas), ${info.serverVersion}, started by the bench on 127.0.0.1:${info.ports.join(', ')} (\`--cluster-enabled yes --cluster-node-timeout ${NODE_TIMEOUT} --save '' --appendonly no\`, each node in a temp dir of its own), joined by \`${path.basename(CLI)} --cluster create … --cluster-yes\` (16 384 slots split in 3), stopped at the end`,
  )
  L.push(`- command: \`${info.command}\` (took ${info.seconds} s)`)
  L.push(`- value: a ~${VALUE_BYTES}-byte JSON object (the one of bench/run.js, plus \`loadedAt\`)`)
  L.push(
    `- herdcache build: ${info.build || '?'}${info.buildSha ? ' (copied at the start of the run: every process loads that copy)' : ''}`,
  )
  L.push('')
  L.push('Libraries, each on the cluster through its own cluster client:')
  L.push('')
  for (const l of libs) L.push(`- **${l.label}** ${l.version()}: ${l.setup(TTL)}`)
  for (const s of skipped) L.push(`- not measured: ${s}`)
  L.push('')

  if (stampede) {
    L.push('## 1. Hot-key expiry stampede on the cluster')
    L.push('')
    L.push(
      `${PROCS} processes × ${CALLERS} callers, each a loop of \`await get('${KEY}')\` then one event-loop turn; one key, ttl ${TTL / 1000} s, a loader that takes ${LOAD_MS} ms. Each library runs alone against the FLUSHALLed cluster: ${WARM_MS / 1000} s of warm-up (the cold start and the first expiry, not counted), then ${SECONDS} s measured. ${ROUNDS} round(s), the order of the libraries rotated per round; every figure is the median over the rounds.`,
    )
    L.push('')
    L.push(
      `| library | loader runs | per TTL period | per expiry (mean / max) | served / s | p50 | p99 | p99.9 | max | calls that waited ≥ ${SLOW_MS} ms | stale answers | errors |`,
    )
    L.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for (const n of stampede.names) {
      const r = stampede.rows[n]
      const label = libByName.get(n).label
      if (r.error) {
        L.push(`| ${label} | failed: ${r.error.split('\n')[0].replace(/\|/g, '/')} |||||||||||`)
        continue
      }
      L.push(
        `| ${label} | ${fmtN(r.loaderRuns, 1)} | ${fmtN(r.perTtl)} | ${r.perExpiryMean.toFixed(1)} / ${r.perExpiryMax} | ${fmtOps(r.servedPerSec)} | ${fmtMs(r.p50us)} | ${fmtMs(r.p99us)} | ${fmtMs(r.p999us)} | ${fmtMs(r.maxUs)} | ${fmtN(r.slowCalls, 0)} | ${fmtPct(r.staleShare)} | ${fmtN(r.errors, 0)} |`,
      )
    }
    L.push('')
    L.push(
      `*loader runs*: started in the ${SECONDS} s measured, all processes; *per TTL period*: loader runs × ttl ÷ ${SECONDS} s; *per expiry*: loader runs that overlapped in time, mean and max over the groups; *served / s*: calls answered with the value, all processes; p50/p99/p99.9/max: the calls started in the window (latency histogram, ±2 %); *stale answers*: share of answers whose value was loaded more than ${STALE_AGE} ms before; *errors*: calls that rejected or answered something else.`,
    )
    L.push('')
    L.push('Raw figures, per round:')
    L.push('')
    L.push(
      '| library | round | loader runs | per TTL period | max at once | served / s | p50 | p99 | errors | node CPU s | redis CPU s (3 nodes) | Redis commands / s (3 nodes) |',
    )
    L.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for (const n of stampede.names) {
      const label = libByName.get(n).label
      for (const [i, r] of (stampede.rows[n].all || []).entries()) {
        if (!r) continue
        if (r.error) {
          L.push(`| ${label} | ${i + 1} | failed: ${r.error.split('\n')[0].replace(/\|/g, '/')} |||||||||`)
          continue
        }
        L.push(
          `| ${label} | ${i + 1} | ${r.loaderRuns} | ${fmtN(r.perTtl)} | ${r.perExpiryMax} | ${fmtOps(r.servedPerSec)} | ${fmtMs(r.p50us)} | ${fmtMs(r.p99us)} | ${r.errors} | ${r.cpuNodeS.toFixed(1)} | ${r.cpuRedisS.toFixed(1)} | ${fmtOps(r.redisCmdsPerSec)} |`,
        )
      }
    }
    L.push('')
    const h = stampede.rows.herdcache
    if (h && !h.error && h.herdStats)
      L.push(
        `herdcache \`stats()\`, summed over the ${PROCS} processes (last round, whole run including warm-up): ${statsLine(h.herdStats)}.`,
      )
    L.push('')
  }

  if (reads) {
    L.push(`## 2. ${fmtCount(KEYS)} distinct keys in one tick, L1 cold`)
    L.push('')
    if (reads.error) {
      L.push(`Failed: ${reads.error.split('\n')[0]}`)
      L.push('')
    } else {
      const s = reads.summary
      L.push(
        `${READ_ROUNDS + 1} sets of ${fmtCount(KEYS)} keys (\`r<set>:k<i>\`, spread over the slots by their hash) were written first by another herdcache instance, in the orchestrator process (${(reads.writeMs / 1000).toFixed(1)} s for all), with ttl ${READ_TTL / 60_000} min. One reader process then made one herdcache instance (defaults, \`ttl: ${READ_TTL}\`; its L1 of 10 000 entries evicts the previous set at every insert), a second one whose L1 holds every set (\`maxEntries: ${fmtCount((READ_ROUNDS + 1) * KEYS)}\`: nothing evicted), and one ioredis \`Cluster\` with \`enableAutoPipelining: true\`, and for each set, one after the other in an order rotated per set: \`await Promise.all(keys.map((k) => cache.getOrLoad(k, loader)))\` (every key in Redis, none in this instance's L1: the loader must not run), \`await Promise.all(names.map((n) => cluster.get(n)))\` (plain \`GET\`s of the same keys' Redis names, \`{${PREFIX}<key>}\`; the strings are not parsed), and the same \`GET\`s with \`JSON.parse\` of the value line (what herdcache hands back is a parsed object). Set 0 is the warm-up (connections, slot maps), not counted; then ${READ_ROUNDS} measured rounds. Per-key cost = wall time of the batch ÷ ${fmtCount(KEYS)}; medians over the rounds; **÷ ioredis GET** and **÷ GET + JSON.parse** are the medians of the per-round ratios.`,
      )
      L.push('')
      L.push('| reader | per key (median) | min | max | process CPU per key | ÷ ioredis GET | ÷ GET + JSON.parse |')
      L.push('|---|---:|---:|---:|---:|---:|---:|')
      const measured = reads.rounds.filter((r) => !r.warmup)
      const ratioTo = (reader, base) =>
        reader === base ? '1×' : fmtRatio(median(measured.map((r) => r.ms[reader] / r.ms[base])))
      for (const reader of reads.order) {
        const x = s[reader]
        L.push(
          `| ${reader} | ${fmtUs(x.medianUs)} | ${fmtUs(x.minUs)} | ${fmtUs(x.maxUs)} | ${fmtUs(x.cpuUs)} | ${ratioTo(reader, 'ioredis GET')} | ${ratioTo(reader, PARSED)} |`,
        )
      }
      L.push('')
      L.push('Raw figures, per set (wall time of the whole batch, ms; the reader that went first is marked \\*):')
      L.push('')
      L.push(`| set | ${reads.order.join(' | ')} | herdcache loader runs |`)
      L.push(`|---|${reads.order.map(() => '---:').join('|')}|---:|`)
      for (const r of reads.rounds) {
        const first = reads.order[r.set % reads.order.length]
        L.push(
          `| ${r.set}${r.warmup ? ' (warm-up)' : ''} | ${reads.order.map((k) => `${r.ms[k].toFixed(1)}${k === first ? '\\*' : ''}`).join(' | ')} | ${r.loads} |`,
        )
      }
      L.push('')
      L.push(
        `herdcache \`stats()\` of the reader (whole part): ${statsLine(reads.stats)}. Redis commands during the reads, per node: ${reads.perNodeCommands.join(', ')}.`,
      )
      L.push('')
    }
  }

  const said = summary({ stampede, reads })
  if (said) {
    L.push('## What the numbers say')
    L.push('')
    L.push(said)
    L.push('')
  }
  L.push('## Against the targets')
  L.push('')
  L.push('| target | measured | met? |')
  L.push('|---|---|---|')
  const h = stampede && stampede.rows.herdcache
  if (h && !h.error) {
    const peers = stampede.names
      .filter((n) => n !== 'herdcache' && !stampede.rows[n].error)
      .map((n) => `${libByName.get(n).label} ${fmtN(stampede.rows[n].perTtl)}`)
    L.push(
      `| stampede on the cluster: herdcache loader runs ≈ 1 per TTL period across all processes, no errors | ${fmtN(h.perTtl)} per TTL period (max ${h.perExpiryMax} at once), ${h.errorsTotal} errors over the rounds${peers.length ? `; peers: ${peers.join(', ')}` : ''} | ${h.perTtl <= 1.1 && h.perExpiryMax === 1 && h.errorsTotal === 0 ? 'yes' : 'no'} |`,
    )
  }
  if (reads && !reads.error) {
    const hc = reads.summary.herdcache.medianUs
    const io = reads.summary[PARSED].medianUs
    const plain = reads.summary['ioredis GET'].medianUs
    L.push(
      `| ${fmtCount(KEYS)} keys in one tick: herdcache's per-key cost ≤ ioredis Cluster's (autopipelined GETs doing the same work: each value parsed, as herdcache hands back objects) | ${fmtUs(hc)} vs ${fmtUs(io)} per key (herdcache ÷ ioredis ${fmtRatio(reads.vsParsed)}; ÷ plain GETs that parse nothing, ${fmtUs(plain)}: ${fmtRatio(reads.ratio)}) | ${reads.vsParsed <= 1 ? 'yes' : 'no'} |`,
    )
  }
  L.push('')
  L.push('## Odd things seen in this run')
  L.push('')
  if (odd.length) for (const o of odd) L.push(`- ${o}`)
  else L.push('- none')
  L.push('')
  return L.join('\n')
}

// ---------------------------------------------------------------- main

// The run measures a copy of herdcache's runtime files taken at its start, so
// every process loads the same build (as bench/fleet.js does).
function snapshotHerdcache() {
  const root = path.join(__dirname, '..')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herdcache-cluster-build-'))
  for (const f of fs.readdirSync(root)) {
    if (f === 'package.json' || f === 'index.js' || f === 'binding.js' || f.endsWith('.node'))
      fs.copyFileSync(path.join(root, f), path.join(dir, f))
  }
  fs.cpSync(path.join(root, 'lib'), path.join(dir, 'lib'), { recursive: true })
  return dir
}

async function main() {
  const t0 = now()
  // bench/fleet.js runs this at its end, and says how it was run
  const parent = process.env.HERDCACHE_CLUSTER_PARENT
  const info = {
    date: isoSeconds(),
    command: parent
      ? `${parent} (its Redis Cluster part, bench/cluster.js${argv.length ? ` ${argv.join(' ')}` : ''})`
      : process.env.npm_lifecycle_event === 'bench:cluster'
        ? `npm run bench:cluster${argv.length ? ` -- ${argv.join(' ')}` : ''}`
        : `node bench/cluster.js${argv.length ? ` ${argv.join(' ')}` : ''}`,
    loadStart: loadAvg(),
  }
  const rv = spawnSync(SERVER, ['--version'], { encoding: 'utf8' })
  if (rv.error || rv.status !== 0) {
    console.error(`${SERVER} is not installed (apt-get install redis-server): the cluster bench needs it`)
    process.exit(1)
  }
  info.serverVersion = `${path.basename(SERVER)} ${(rv.stdout.match(/v=([\d.]+)/) || [])[1] || rv.stdout.trim()}`
  const snapshot = snapshotHerdcache()
  tempDirs.add(snapshot)
  HERD_MODULE = process.env.HERDCACHE_CLUSTER_MODULE = snapshot
  info.build = herdcacheBuild(snapshot)
  info.buildSha = addonSha(snapshot)

  const cluster = await startCluster()
  info.ports = cluster.ports()
  console.log(
    `${info.serverVersion}: a ${NODES}-primary cluster on 127.0.0.1:${info.ports.join(', ')}; node ${process.version}; ${os.cpus().length} CPUs; herdcache ${info.build}`,
  )
  const odd = []
  const skipped = [
    '**async-cache-dedupe** and the hand-written ioredis cache-aside of bench/fleet.js: async-cache-dedupe documents no Redis Cluster setup (its storage takes an ioredis client; its invalidation references are written as multi-key pipelines, which an ioredis `Cluster` sends only within one slot), and the cache-aside has no stampede protection to compare (bench/FLEET.md shows it on one node)',
  ]
  try {
    const names = LIBS.map((l) => l.name).filter((n) => !ONLY || ONLY.has(n))
    const stampede = flag('no-stampede') ? null : await stampedePart(cluster, names, odd)
    const reads = flag('no-reads') ? null : await readsPart(cluster, odd)
    info.seconds = ((now() - t0) / 1000).toFixed(0)
    info.machine = machine()
    const md = markdown({ info, libs: LIBS.filter((l) => names.includes(l.name)), stampede, reads, odd, skipped })
    fs.mkdirSync(path.dirname(OUT), { recursive: true })
    fs.writeFileSync(OUT, md)
    const jsonOut = path.join(__dirname, 'out', QUICK ? 'cluster-quick.json' : 'cluster.json')
    fs.mkdirSync(path.dirname(jsonOut), { recursive: true })
    fs.writeFileSync(jsonOut, JSON.stringify({ info, stampede, reads, odd }, null, 1))
    console.log(`\n${md}`)
    console.log(
      `written to ${path.relative(process.cwd(), OUT)} (raw figures: ${path.relative(process.cwd(), jsonOut)})`,
    )
    const full = !ONLY && stampede && reads
    if (OUT === path.join(__dirname, 'CLUSTER.md') && full) require('./readme').updateReadmeAfterBench()
  } finally {
    await cluster.stop()
    fs.rmSync(snapshot, { recursive: true, force: true })
    tempDirs.delete(snapshot)
  }
}

const fail = (err) => {
  process.send({ type: 'error', error: String((err && err.stack) || err) })
  setTimeout(() => process.exit(1), 50)
}
if (WORKER === 'stampede') stampedeWorker().catch(fail)
else if (WORKER === 'reads') readsWorker().catch(fail)
else
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
