'use strict'

// npm run demo:nest
//
// A Nest route under a burst: GET /feed/:name with a 200 ms simulated database
// query, cached by herdcache/nest (@Cached) and, next to it, by
// @nestjs/cache-manager's CacheInterceptor — same app, same traffic, one run.
// Three phases of REQUESTS concurrent requests each:
//   1. cold start         nothing cached
//   2. steady hits        the entry is fresh
//   3. expiry under load  the TTL has just passed
// Handler runs are counted by the handler; latencies are measured around
// each request with performance.now(). With REDIS_URL both use Redis
// (herdcache's own store; cache-manager through @keyv/redis). A complete run
// without REDIS_URL writes what it printed to demo/NEST-OUTPUT.md, which
// README.md's figures come from.

const http = require('node:http')
const { performance } = require('node:perf_hooks')
const { setTimeout: sleep } = require('node:timers/promises')
const { LIBRARIES, startFeedApp } = require('./nest-apps')

const REQUESTS = 200
const QUERY_MS = 200
const TTL = 1000

const PHASES = ['cold start', 'steady hits', 'expiry under load']

function request(agent, url) {
  return new Promise((resolve, reject) => {
    const start = performance.now()
    http
      .get(url, { agent }, (res) => {
        res.resume()
        res.on('end', () =>
          resolve({ ms: performance.now() - start, status: res.statusCode, xCache: res.headers['x-cache'] }),
        )
      })
      .on('error', reject)
  })
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

async function burst(agent, app, name = 'spring-sale') {
  const before = app.runs.n
  const results = await Promise.all(Array.from({ length: REQUESTS }, () => request(agent, `${app.url}/feed/${name}`)))
  const ms = results.map((r) => r.ms).sort((a, b) => a - b)
  const bad = results.filter((r) => r.status !== 200).length
  if (bad) throw new Error(`${bad} requests failed`)
  // A background refresh the burst started counts for the phase too.
  await sleep(QUERY_MS + 100)
  return { runs: app.runs.n - before, p50: percentile(ms, 50), p99: percentile(ms, 99), max: ms[ms.length - 1] }
}

async function main() {
  const redisUrl = process.env.REDIS_URL
  const agent = new http.Agent({ keepAlive: true, maxSockets: REQUESTS })
  const rows = {}
  for (const library of LIBRARIES) {
    const app = await startFeedApp({ library, redisUrl, ttl: TTL, queryMs: QUERY_MS, prefix: `nest-demo:${library}:` })
    try {
      // Warm-up on other keys (JIT of the miss and the hit paths, sockets), so
      // the phases measure the cache, not the compiler.
      for (let i = 0; i < 8; i++) {
        await burst(agent, app, `warm-up-${i}`)
        await burst(agent, app, `warm-up-${i}`)
        await burst(agent, app, `warm-up-${i}`)
      }
      rows[library] = []
      rows[library].push(await burst(agent, app))
      rows[library].push(await burst(agent, app))
      await sleep(TTL)
      rows[library].push(await burst(agent, app))
    } finally {
      await app.close()
    }
  }
  agent.destroy()

  // What is printed, for demo/NEST-OUTPUT.md.
  let transcript = ''
  const print = (text) => {
    transcript += `${text}\n`
    console.log(text)
  }
  const fmt = (x) => (x < 10 ? x.toFixed(2) : x.toFixed(0)).padStart(6)
  print(
    `\nGET /feed/spring-sale, ${REQUESTS} concurrent requests per phase, ${QUERY_MS} ms query, ttl ${TTL} ms, store: ${redisUrl ? 'Redis' : 'in-memory'}\n`,
  )
  const line = (text) => print(text.trimEnd())
  line(`${''.padEnd(18)}  ${LIBRARIES.map((l) => l.padEnd(31)).join('│ ')}`)
  line(`${'phase'.padEnd(18)}  ${LIBRARIES.map(() => 'runs    p50    p99    max (ms) ').join('│ ')}`)
  PHASES.forEach((phase, i) => {
    const cells = LIBRARIES.map((l) => {
      const r = rows[l][i]
      return `${String(r.runs).padStart(4)} ${fmt(r.p50)} ${fmt(r.p99)} ${fmt(r.max)}      `
    })
    line(`${phase.padEnd(18)}  ${cells.join('│ ')}`)
  })
  print(
    '\nruns = handler runs in the phase. herdcache/nest runs the handler once for the burst (the others join it),' +
      '\nand at expiry serves the stale entry at once while one refresh runs; CacheInterceptor runs it per request in flight.',
  )

  // A complete run of the default traffic (in-memory) is the README's: it records it.
  if (!redisUrl) {
    console.log()
    require('./output').writeOutput('NEST-OUTPUT.md', {
      title: 'npm run demo:nest: the last complete run',
      command: 'npm run demo:nest',
      output: transcript,
    })
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
