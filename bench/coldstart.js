'use strict'

// Cold start with Redis unreachable (issue 25): a fresh process makes its cache while Redis refuses
// connections, accepts them and never answers (a hung Redis, a proxy with no backend), or rejects the
// password; from that moment 50 request loops run for 3 s, each request a `getOrLoad` of one of 100 keys
// (a 50 ms loader) given up after 2 s. Per library: requests, % served (answered with the value within
// the request timeout), p50 / p99 / max latency (a request given up counts as the timeout), loader runs.
// herdcache next to the peers that keep their cache in Redis, each in a fresh process, in the same run.
//
//   node bench/coldstart.js [--quick] [--only=a,b] [--out=FILE]     (npm run bench:coldstart)
//
//   --quick     1 s of loops instead of 3 (a smoke run); writes bench/out/coldstart-quick.md
//   --only=a,b  libraries (herdcache, bento-l2, bento-l1-l2-bus, cache-manager, async-cache-dedupe)
//
// Writes bench/COLDSTART.md (or FILE). Everything runs on 127.0.0.1; the run takes about a minute.

const fs = require('node:fs')
const path = require('node:path')
const { fork } = require('node:child_process')
const c = require('./common')

const LOOPS = 50
const KEYS = 100
const LOADER_MS = 50
const REQUEST_TIMEOUT = 2000

const LIBS = [
  {
    name: 'herdcache',
    label: 'herdcache',
    version: () => require(path.join(__dirname, '..', 'package.json')).version,
    setup:
      '`new Cache({ redis })` (defaults: redisTimeout 1 000 ms, circuitBreakerDuration 5 000 ms), `getOrLoad(key, loader)`',
  },
  {
    name: 'bento-l2',
    label: 'bentocache (Redis L2)',
    version: () => c.pkgVersion('bentocache'),
    setup: '`bentostore().useL2Layer(redisDriver({ connection }))`, `getOrSet({ key, factory })` (defaults)',
  },
  {
    name: 'bento-l1-l2-bus',
    label: 'bentocache (L1 + L2 + bus)',
    version: () => c.pkgVersion('bentocache'),
    setup: '`useL1Layer(memoryDriver()).useL2Layer(redisDriver(…)).useBus(redisBusDriver(…))`, `getOrSet` (defaults)',
  },
  {
    name: 'cache-manager',
    label: 'cache-manager + @keyv/redis',
    version: () => `${c.pkgVersion('cache-manager')} / @keyv/redis ${c.pkgVersion('@keyv/redis')}`,
    setup: '`createCache({ stores: [createKeyv(url)] })`, `wrap(key, fn)` (defaults)',
  },
  {
    name: 'async-cache-dedupe',
    label: 'async-cache-dedupe (Redis)',
    version: () => `${c.pkgVersion('async-cache-dedupe')} / ioredis ${c.pkgVersion('ioredis')}`,
    setup:
      "`createCache({ ttl, storage: { type: 'redis', options: { client: new Redis(…) } } })`, `define('load', fn)`",
  },
]

const SCENARIOS = [
  { name: 'refused', what: 'nothing listens on the port (connection refused)' },
  { name: 'silent', what: 'a TCP server that accepts and never answers' },
  { name: 'bad auth', what: 'a redis-server with `requirepass`, the URL with a wrong password' },
]

// ---------------------------------------------------------------- the child: one library, one cold start

/** A maker of the library's instance ({ get(key) → promise, close() }), its modules loaded; `conn`: { host, port, password }. */
async function createLib(name, conn, load) {
  const auth = conn.password ? `:${conn.password}@` : ''
  const url = `redis://${auth}${conn.host}:${conn.port}`
  switch (name) {
    case 'herdcache': {
      const { Cache } = require('..')
      // The bench reads the cache's errors itself (stats()); onError keeps them out of stderr.
      return () => {
        const cache = new Cache({ redis: url, onError: () => {} })
        return { get: (key) => cache.getOrLoad(key, load), close: () => cache.close(), stats: () => cache.stats() }
      }
    }
    case 'bento-l2':
    case 'bento-l1-l2-bus': {
      const { BentoCache, bentostore } = await import('bentocache')
      const { redisDriver, redisBusDriver } = await import('bentocache/drivers/redis')
      const { memoryDriver } = await import('bentocache/drivers/memory')
      const connection = { host: conn.host, port: conn.port, password: conn.password }
      return () => {
        let store = bentostore()
        if (name === 'bento-l1-l2-bus') store = store.useL1Layer(memoryDriver({ maxItems: 10_000 }))
        store = store.useL2Layer(redisDriver({ connection }))
        if (name === 'bento-l1-l2-bus') store = store.useBus(redisBusDriver({ connection }))
        const bento = new BentoCache({ default: 'c', stores: { c: store } })
        return { get: (key) => bento.getOrSet({ key, factory: load }), close: () => bento.disconnectAll() }
      }
    }
    case 'cache-manager': {
      const { createCache } = require('cache-manager')
      const { createKeyv } = require('@keyv/redis')
      return () => {
        const cache = createCache({ stores: [createKeyv(url)] })
        return { get: (key) => cache.wrap(key, load), close: () => cache.disconnect() }
      }
    }
    case 'async-cache-dedupe': {
      const { createCache } = require('async-cache-dedupe')
      const Redis = require('ioredis')
      return () => {
        const client = new Redis({ host: conn.host, port: conn.port, password: conn.password })
        client.on('error', () => {})
        const cache = createCache({ ttl: 60, storage: { type: 'redis', options: { client } } })
        cache.define('load', (key) => load(key))
        return { get: (key) => cache.load(key), close: () => client.quit() }
      }
    }
    default:
      throw new Error(`unknown library ${name}`)
  }
}

/** The q-quantile of `xs` (nearest rank), or null when empty. */
function quantile(xs, q) {
  if (xs.length === 0) return null
  const s = Float64Array.from(xs).sort()
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]
}

async function child({ lib, conn, seconds }) {
  let loads = 0
  const load = () => {
    loads++
    return c.sleep(LOADER_MS).then(() => ({ at: Date.now() }))
  }
  // Modules are loaded before the clock starts; the cache (and its connection) is made at t0.
  const make = await createLib(lib, conn, load)
  const TIMED_OUT = Symbol('timed out')
  const latencies = []
  const counts = { requests: 0, served: 0, timedOut: 0, errors: 0, errorKinds: {}, maxMs: 0 }
  const t0 = c.now()
  const instance = make()
  const end = t0 + seconds * 1000
  let key = 0
  const loop = async (i) => {
    while (c.now() < end) {
      const k = `k${(key++ * 7 + i) % KEYS}`
      const started = c.now()
      let outcome
      try {
        outcome = await c.race(
          Promise.resolve().then(() => instance.get(k)),
          REQUEST_TIMEOUT,
          () => TIMED_OUT,
        )
      } catch (err) {
        outcome = err instanceof Error ? err : new Error(String(err))
      }
      const ms = c.now() - started
      counts.requests++
      if (outcome === TIMED_OUT) counts.timedOut++
      else if (outcome instanceof Error) {
        counts.errors++
        const kind = outcome.code || outcome.name || 'Error'
        counts.errorKinds[kind] = (counts.errorKinds[kind] || 0) + 1
      } else counts.served++
      latencies.push(ms)
      if (ms > counts.maxMs) counts.maxMs = ms
      await c.tick()
    }
  }
  await Promise.all(Array.from({ length: LOOPS }, (_, i) => loop(i)))
  const elapsed = c.now() - t0
  const stats = instance.stats ? instance.stats() : null
  await c
    .race(
      Promise.resolve().then(() => instance.close()),
      1000,
      () => undefined,
    )
    .catch(() => {})
  return {
    ...counts,
    loads,
    elapsedMs: elapsed,
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    lastRedisError: stats ? stats.lastRedisError : undefined,
  }
}

// ---------------------------------------------------------------- the parent

function runChild(lib, conn, seconds) {
  return new Promise((resolve) => {
    const proc = fork(__filename, ['--child'], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] })
    let stderr = ''
    proc.stderr.on('data', (d) => (stderr = (stderr + d).slice(-2000)))
    let result = null
    const killer = setTimeout(() => proc.kill('SIGKILL'), seconds * 1000 + REQUEST_TIMEOUT + 15000)
    proc.on('message', (msg) => {
      result = msg
      // A peer's reconnecting client may keep its process alive: the result is in, so end it.
      setTimeout(() => proc.kill('SIGKILL'), 200).unref()
    })
    proc.on('exit', () => {
      clearTimeout(killer)
      resolve(result || { error: `the child exited without a result: ${stderr.split('\n').slice(-5).join(' ')}` })
    })
    proc.send({ lib, conn, seconds })
  })
}

const fmtMs = (ms) =>
  ms === null || ms === undefined ? '—' : ms >= 100 ? ms.toFixed(0) : ms >= 1 ? ms.toFixed(1) : ms.toFixed(3)

async function main() {
  c.rejectUnknownArgs(/^--(quick|only=.+|out=.+)$/, 'node bench/coldstart.js [--quick] [--only=a,b] [--out=FILE]')
  const QUICK = c.flag('quick')
  const seconds = QUICK ? 1 : 3
  const OUT = c.opt('out') ?? path.join(__dirname, QUICK ? path.join('out', 'coldstart-quick.md') : 'COLDSTART.md')
  const only = c.opt('only')
  const libs = only ? LIBS.filter((l) => only.split(',').includes(l.name)) : LIBS
  if (only && libs.length !== only.split(',').length)
    throw new Error(`--only: known libraries are ${LIBS.map((l) => l.name)}`)

  const started = c.now()
  const loadStart = c.loadAvg()
  const { startRedis, freePort } = require('../__test__/redis-server')
  const { startSilentServer } = require('../__test__/tcp-proxy')
  const authRedis = await startRedis(null)
  await authRedis.cmd('CONFIG', 'SET', 'requirepass', 'secret')
  const silent = await startSilentServer(null)
  const refusedPort = await freePort()
  const conns = {
    refused: { host: '127.0.0.1', port: refusedPort },
    silent: { host: '127.0.0.1', port: silent.port },
    'bad auth': { host: '127.0.0.1', port: authRedis.port, password: 'wrong' },
  }
  const rows = []
  try {
    for (const scenario of SCENARIOS) {
      for (const lib of libs) {
        const r = await runChild(lib.name, conns[scenario.name], seconds)
        rows.push({ scenario: scenario.name, lib: lib.name, ...r })
        console.error(`${scenario.name} / ${lib.name}: ${JSON.stringify(r)}`)
      }
    }
  } finally {
    await silent.close()
    await authRedis.stop()
  }

  const machine = c.machine()
  const label = (name) => LIBS.find((l) => l.name === name).label
  const L = []
  L.push('# herdcache cold start with Redis unreachable', '')
  L.push(`- date: ${c.isoSeconds()}`)
  L.push(
    `- machine: ${machine.cpu}, ${machine.mem}, ${machine.os}; load average at start ${loadStart}, at end ${machine.load}`,
  )
  L.push(`- node ${process.version}`)
  L.push(
    `- command: \`npm run bench:coldstart\`${QUICK ? ' --quick' : ''} (took ${((c.now() - started) / 1000).toFixed(0)} s)`,
  )
  const build = c.herdcacheBuild(path.join(__dirname, '..'))
  if (build) L.push(`- herdcache build: ${build}`)
  if (process.env.HERDCACHE_NATIVE_PATH)
    L.push(
      `- herdcache binary loaded: HERDCACHE_NATIVE_PATH=${process.env.HERDCACHE_NATIVE_PATH} (not the build above)`,
    )
  L.push(
    `- what: each library in a fresh process; its modules loaded, the cache is made (t0) while Redis is unreachable, ` +
      `and from t0 ${LOOPS} request loops run for ${seconds} s, each request a getOrLoad of one of ${KEYS} keys ` +
      `(a ${LOADER_MS} ms loader), given up after ${REQUEST_TIMEOUT} ms, one event-loop turn between requests. ` +
      `"served": answered with the value within the request timeout; latencies count a request given up as ${REQUEST_TIMEOUT} ms ` +
      '(p50 and p99 by nearest rank). A library whose process crashed says so (with default options, as an application would run it). All on 127.0.0.1.',
  )
  L.push('- libraries:')
  for (const lib of libs) L.push(`  - ${lib.label} ${lib.version()}: ${lib.setup}`)
  for (const scenario of SCENARIOS) {
    L.push('', `## Redis ${scenario.name}: ${scenario.what}`, '')
    L.push('| library | requests | served | p50 ms | p99 ms | max ms | loader runs | given up / errors |')
    L.push('|---|---:|---:|---:|---:|---:|---:|---|')
    for (const r of rows.filter((x) => x.scenario === scenario.name)) {
      if (r.error) {
        L.push(`| ${label(r.lib)} | failed: ${String(r.error).split('\n')[0]} | | | | | | |`)
        continue
      }
      const served = r.requests ? ((100 * r.served) / r.requests).toFixed(r.served === r.requests ? 0 : 1) : '0'
      const kinds = Object.entries(r.errorKinds)
        .map(([k, n]) => `${n} ${k}`)
        .join(', ')
      L.push(
        `| ${label(r.lib)} | ${r.requests} | ${served} % | ${fmtMs(r.p50)} | ${fmtMs(r.p99)} | ${fmtMs(r.maxMs)} | ${r.loads} | ` +
          `${r.timedOut} given up${r.errors ? `, ${r.errors} rejected (${kinds})` : ''}${r.lastRedisError ? `; lastRedisError ${r.lastRedisError}` : ''} |`,
      )
    }
  }
  L.push(
    '',
    `How to read it: a request loop waits for its request before it makes the next, so a library that answers at once ` +
      `makes many requests and one that hangs makes about ${LOOPS} × ${seconds * 1000} / ${REQUEST_TIMEOUT}. ` +
      `With ${KEYS} keys, ${KEYS} loader runs is one per key; more means loads were not shared, fewer that some keys were never answered.`,
    '',
  )
  fs.mkdirSync(path.dirname(OUT), { recursive: true })
  fs.writeFileSync(OUT, L.join('\n'))
  console.log(L.join('\n'))
  console.log(`wrote ${path.relative(process.cwd(), OUT)}`)
}

if (process.argv.includes('--child')) {
  // A peer that crashes its process (an 'error' event nobody listens to) is a result: the row says so.
  process.on('uncaughtException', (err) => {
    const first = String((err && err.message) || err).split('\n')[0]
    process.send({ error: `the process crashed: ${first}` }, () => process.exit(1))
  })
  process.once('message', async (msg) => {
    try {
      const result = await child(msg)
      process.send(result, () => process.exit(0))
    } catch (err) {
      process.send({ error: String((err && err.stack) || err) }, () => process.exit(1))
    }
  })
} else {
  main().catch((error) => {
    console.error(error)
    process.exit(1)
  })
}
