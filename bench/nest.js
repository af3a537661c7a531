'use strict'

// herdcache/nest next to @nestjs/cache-manager's CacheInterceptor on a real
// Nest route (Express), in one run: `node bench/nest.js [--quick]`, also run
// at the end of `npm run bench`. Writes bench/NEST.md.
//
// The app (demo/nest-apps.js) serves GET /feed/:name, a ~1 KB JSON value
// from a simulated query of QUERY_MS. Servers run in child processes (the
// Redis variants: two, sharing one redis-server the bench starts on
// 127.0.0.1); this process is the client: CONCURRENCY closed loops of
// keep-alive HTTP requests to 127.0.0.1, spread over the servers.
//
//   1. hot key: a warm key (ttl 60 s), ROUNDS interleaved rounds of HOT_MS;
//      req/s and latency percentiles, medians over the rounds.
//   2. expiry under load: ttl EXPIRY_TTL, the same load for EXPIRY_MS; how
//      often the handler ran (per expiry, whole fleet) and the latency.

const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const { spawn } = require('node:child_process')
const {
  argv,
  flag,
  rejectUnknownArgs,
  now,
  median,
  isoSeconds,
  fmtOps,
  machine,
  pkgVersion,
  herdcacheBuild,
} = require('./common')
const { startRedis } = require('../__test__/redis-server')

rejectUnknownArgs(/^--(quick|no-readme)$/, 'node bench/nest.js [--quick] [--no-readme]')
const QUICK = flag('quick')
const ROUNDS = QUICK ? 1 : 3
const HOT_MS = QUICK ? 1000 : 3000
const WARM_MS = QUICK ? 500 : 1500
const EXPIRY_MS = QUICK ? 3000 : 6000
const EXPIRY_TTL = 1000
const QUERY_MS = 50
const CONCURRENCY = 32
const OUT = path.join(__dirname, QUICK ? 'out/nest-quick.md' : 'NEST.md')

const VARIANTS = [
  { id: 'herdcache/nest (memory)', library: 'herdcache/nest', redis: false },
  { id: 'CacheInterceptor (memory)', library: '@nestjs/cache-manager', redis: false },
  { id: 'herdcache/nest (Redis, 2 apps)', library: 'herdcache/nest', redis: true },
  { id: 'CacheInterceptor (@keyv/redis, 2 apps)', library: '@nestjs/cache-manager', redis: true },
]

// ---------------------------------------------------------------- servers

function startServer(library, ttl, redisUrl, prefix) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [path.join(__dirname, 'nest-server.js'), library, String(ttl), String(QUERY_MS), redisUrl || '', prefix],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    )
    let buf = ''
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`${library} server did not start`))
    }, 20000)
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (d) => {
      buf += d
      const at = buf.indexOf('\n')
      if (at >= 0 && !child.url) {
        clearTimeout(timer)
        child.url = JSON.parse(buf.slice(0, at)).url
        resolve(child)
      }
    })
    child.on('exit', (code) => {
      if (!child.url) {
        clearTimeout(timer)
        reject(new Error(`${library} server exited with ${code}`))
      }
    })
  })
}

async function stopServer(child) {
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.stdin.write('close\n')
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
  await exited
  clearTimeout(timer)
}

// ---------------------------------------------------------------- client

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY })

function get(url) {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (d) => {
          body += d
        })
        res.on('end', () => resolve({ status: res.statusCode, body }))
      })
      .on('error', reject)
  })
}

const handlerRuns = async (servers) => {
  let n = 0
  for (const s of servers) n += JSON.parse((await get(`${s.url}/runs`)).body).n
  return n
}

/** CONCURRENCY closed loops for `ms`, round-robin over the servers: { requests, errors, latencies (ms, sorted) }. */
async function load(servers, pathname, ms) {
  const latencies = []
  let errors = 0
  const end = now() + ms
  let next = 0
  const loop = async () => {
    while (now() < end) {
      const server = servers[next++ % servers.length]
      const t = now()
      try {
        const r = await get(server.url + pathname)
        if (r.status !== 200) errors++
      } catch {
        errors++
      }
      latencies.push(now() - t)
    }
  }
  const t0 = now()
  await Promise.all(Array.from({ length: CONCURRENCY }, loop))
  const elapsed = now() - t0
  latencies.sort((a, b) => a - b)
  return { requests: latencies.length, errors, latencies, elapsed }
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]

async function startVariant(variant, ttl, redis, tag) {
  const count = variant.redis ? 2 : 1
  const prefix = `bench-nest:${tag}:${variant.library}:`
  const servers = []
  for (let i = 0; i < count; i++)
    servers.push(await startServer(variant.library, ttl, variant.redis ? redis.url : '', prefix))
  return servers
}

// ---------------------------------------------------------------- scenarios

async function hotKey(redis) {
  const rows = new Map(VARIANTS.map((v) => [v.id, []]))
  for (let round = 0; round < ROUNDS; round++) {
    const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length])
    for (const variant of order) {
      const servers = await startVariant(variant, 60000, redis, `hot${round}`)
      try {
        await load(servers, '/feed/hot', WARM_MS)
        const r = await load(servers, '/feed/hot', HOT_MS)
        rows.get(variant.id).push({
          rps: r.requests / (r.elapsed / 1000),
          p50: pct(r.latencies, 50),
          p99: pct(r.latencies, 99),
          errors: r.errors,
        })
        console.log(
          `  hot key  ${variant.id.padEnd(40)} ${fmtOps(r.requests / (r.elapsed / 1000)).padStart(7)} req/s  p50 ${pct(r.latencies, 50).toFixed(2)} ms  p99 ${pct(r.latencies, 99).toFixed(2)} ms  errors ${r.errors}`,
        )
      } finally {
        for (const s of servers) await stopServer(s)
      }
    }
  }
  return VARIANTS.map((v) => {
    const samples = rows.get(v.id)
    return {
      id: v.id,
      rps: median(samples.map((s) => s.rps)),
      p50: median(samples.map((s) => s.p50)),
      p99: median(samples.map((s) => s.p99)),
      errors: samples.reduce((a, s) => a + s.errors, 0),
    }
  })
}

async function expiryUnderLoad(redis) {
  const rows = []
  for (const variant of VARIANTS) {
    const servers = await startVariant(variant, EXPIRY_TTL, redis, 'expiry')
    try {
      await load(servers, '/feed/expiring', 200) // the cold start, not counted
      const before = await handlerRuns(servers)
      const r = await load(servers, '/feed/expiring', EXPIRY_MS)
      const runs = (await handlerRuns(servers)) - before
      const expiries = r.elapsed / EXPIRY_TTL
      const row = {
        id: variant.id,
        runs,
        perExpiry: runs / expiries,
        rps: r.requests / (r.elapsed / 1000),
        p50: pct(r.latencies, 50),
        p99: pct(r.latencies, 99),
        max: r.latencies[r.latencies.length - 1],
        slow: r.latencies.filter((ms) => ms >= QUERY_MS).length,
        errors: r.errors,
      }
      rows.push(row)
      console.log(
        `  expiry   ${variant.id.padEnd(40)} handler runs ${String(runs).padStart(5)} (${row.perExpiry.toFixed(1)} per expiry)  p99 ${row.p99.toFixed(2)} ms  waited ≥ ${QUERY_MS} ms: ${row.slow}  errors ${r.errors}`,
      )
    } finally {
      for (const s of servers) await stopServer(s)
    }
  }
  return rows
}

// ---------------------------------------------------------------- report

const ms = (x) => (x >= 100 ? `${x.toFixed(0)} ms` : `${x.toFixed(2)} ms`)

function markdown({ hot, expiry, info }) {
  const L = []
  L.push('# herdcache/nest benchmark: a cached Nest route')
  L.push('')
  L.push(`- date: ${info.date}`)
  L.push(
    `- machine: ${info.machine.cpu}, ${info.machine.mem}, ${info.machine.os}; load average at start ${info.loadStart}, at end ${info.machine.load}`,
  )
  L.push(
    `- node ${process.version}; @nestjs/core ${pkgVersion('@nestjs/core')}, @nestjs/platform-express ${pkgVersion('@nestjs/platform-express')}, @nestjs/cache-manager ${pkgVersion('@nestjs/cache-manager')}, cache-manager ${pkgVersion('cache-manager')}, @keyv/redis ${pkgVersion('@keyv/redis')}; redis-server started by the bench on 127.0.0.1`,
  )
  L.push(`- command: \`${info.command}\` (took ${info.seconds} s)`)
  if (info.build) L.push(`- herdcache build: ${info.build}`)
  L.push('')
  L.push(
    `The app (demo/nest-apps.js): \`GET /feed/:name\` returns a ~1 KB JSON object after a simulated ${QUERY_MS} ms query, cached by \`@Cached()\` (herdcache/nest) or by \`@UseInterceptors(CacheInterceptor)\` with \`CacheModule.register({ ttl })\` (@nestjs/cache-manager; Redis through \`stores: [createKeyv(url)]\`). Servers run in child processes; the Redis variants run two apps on one redis-server. The client is this process: ${CONCURRENCY} closed loops of keep-alive HTTP GETs on 127.0.0.1, round-robin over the apps. Everything shares ${info.machine.cpu.split(' ')[0]} cores, so req/s is bounded by the machine and says how much the cache costs next to Nest and HTTP, not the cache alone.`,
  )
  L.push('')
  L.push(`## 1. Hot key (ttl 60 s, warm)`)
  L.push('')
  L.push(
    `${ROUNDS} round(s) of ${HOT_MS / 1000} s after ${WARM_MS / 1000} s of warm-up, variant order rotated per round; medians over the rounds.`,
  )
  L.push('')
  L.push('| variant | req/s | p50 | p99 | errors |')
  L.push('|---|---:|---:|---:|---:|')
  for (const r of hot) L.push(`| ${r.id} | ${fmtOps(r.rps)} | ${ms(r.p50)} | ${ms(r.p99)} | ${r.errors} |`)
  L.push('')
  L.push(`## 2. Expiry under load (ttl ${EXPIRY_TTL / 1000} s, ${EXPIRY_MS / 1000} s of load)`)
  L.push('')
  L.push(
    '| variant | handler runs | per expiry (whole fleet) | req/s | p50 | p99 | max | requests that waited ≥ the query | errors |',
  )
  L.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const r of expiry)
    L.push(
      `| ${r.id} | ${r.runs} | ${r.perExpiry.toFixed(1)} | ${fmtOps(r.rps)} | ${ms(r.p50)} | ${ms(r.p99)} | ${ms(r.max)} | ${r.slow} | ${r.errors} |`,
    )
  L.push('')
  L.push(
    'How to read it: CacheInterceptor does `get`, then runs the handler and `set`s the result, with no coalescing, so at each expiry every request in flight runs the handler (up to the number of concurrent requests). herdcache/nest answers through `getOrLoad`: one run per expiry (per fleet with Redis; a little more than one per TTL period, as XFetch refreshes just before expiry), while the other requests get the stale value at once.',
  )
  L.push('')
  return L.join('\n')
}

async function main() {
  const t0 = now()
  const info = {
    date: isoSeconds(),
    loadStart: machine().load,
    command: `node bench/nest.js${argv.length ? ' ' + argv.join(' ') : ''}`,
    build: herdcacheBuild(path.join(__dirname, '..')),
  }
  const redis = await startRedis(null)
  if (!redis) throw new Error('redis-server is not installed (apt-get install redis-server)')
  try {
    console.log('\nherdcache/nest vs @nestjs/cache-manager CacheInterceptor')
    const hot = await hotKey(redis)
    const expiry = await expiryUnderLoad(redis)
    info.seconds = ((now() - t0) / 1000).toFixed(0)
    info.machine = machine()
    const md = markdown({ hot, expiry, info })
    fs.mkdirSync(path.dirname(OUT), { recursive: true })
    fs.writeFileSync(OUT, md)
    console.log('\n' + md)
    console.log(`written to ${path.relative(process.cwd(), OUT)}`)
    // Run by bench/run.js, which updates the README once the memory section is written too.
    if (!QUICK && !flag('no-readme')) require('./readme').updateReadmeAfterBench()
    const bad = [...hot, ...expiry].some((r) => r.errors > 0)
    if (bad) process.exitCode = 1
  } finally {
    agent.destroy()
    await redis.stop()
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
