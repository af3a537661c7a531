'use strict'
// herdcache/nest with Redis: two Nest apps in two processes run a handler
// once between them; Redis stopped mid-test never turns into a 5xx; apps
// close their Redis connections on shutdown.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { Controller, Get, Param } = require('@nestjs/common')
const { HerdcacheModule, Cached, HERDCACHE } = require('herdcache/nest')
const { startRedis } = require('../redis-server')
const { PLATFORMS, decorate, startApp, tally } = require('./apps')

const FLEET_APP = path.join(__dirname, 'fleet-app.js')

/** Starts fleet-app.js; resolves { child, url, exited } once it listens. */
function startMember(t, env) {
  const child = spawn(process.execPath, [FLEET_APP], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  const lines = []
  let waiting
  child.stdout.setEncoding('utf8')
  let buffer = ''
  child.stdout.on('data', (d) => {
    buffer += d
    let at
    while ((at = buffer.indexOf('\n')) >= 0) {
      lines.push(buffer.slice(0, at))
      buffer = buffer.slice(at + 1)
      waiting?.()
    }
  })
  const nextLine = () =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`fleet app gave no output within 15 s:\n${stderr}`)), 15_000)
      const check = () => {
        if (lines.length > 0) {
          clearTimeout(timer)
          waiting = undefined
          resolve(lines.shift())
        }
      }
      waiting = check
      check()
      exited.then(() => {
        if (lines.length === 0) reject(new Error(`fleet app exited:\n${stderr}`))
      })
    })
  return nextLine().then((line) => ({ child, url: JSON.parse(line).url, exited, nextLine, stderr: () => stderr }))
}

/** Resolves the exit of a child, or rejects after `ms`. */
function exitWithin(member, ms) {
  let timer
  return Promise.race([
    member.exited.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the app did not exit within ${ms} ms:\n${member.stderr()}`)), ms)
    }),
  ])
}

for (const platform of PLATFORMS) {
  test(`two Nest apps (${platform}) in two processes on one Redis run the handler once`, async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const env = { REDIS_URL: redis.url, PLATFORM: platform, PREFIX: `fleet-${platform}:` }
    const [a, b] = await Promise.all([startMember(t, env), startMember(t, env)])

    const burst = (member) => Array.from({ length: 25 }, () => fetch(`${member.url}/slow`))
    const responses = await Promise.all([...burst(a), ...burst(b)])
    const bodies = await Promise.all(responses.map((r) => r.json()))
    for (const r of responses) assert.equal(r.status, 200)
    const writers = new Set(bodies.map((body) => body.pid))
    assert.equal(writers.size, 1, 'every response carries the one run’s value')
    const runs = await Promise.all([a, b].map((m) => fetch(`${m.url}/runs`).then((r) => r.json())))
    assert.equal(runs[0].n + runs[1].n, 1, `handler runs per app: ${runs[0].n} + ${runs[1].n}`)
    const counts = tally(responses)
    assert.equal(counts.MISS, 1, JSON.stringify(counts))
    // The other app's requests waited for this one's load: COALESCED, as in one process.
    assert.equal(counts.COALESCED, responses.length - 1, JSON.stringify(counts))

    // "close": the app closes its cache and Redis connections, and the
    // process exits by itself (no open handle).
    a.child.stdin.write('close\n')
    assert.equal(await a.nextLine(), 'closed')
    assert.deepEqual(await exitWithin(a, 5000), { code: 0, signal: null })
    // SIGTERM with enableShutdownHooks: closed, and gone.
    b.child.kill('SIGTERM')
    const exit = await exitWithin(b, 5000)
    assert.ok(exit.code === 0 || exit.signal === 'SIGTERM', JSON.stringify(exit))
  })
}

test('Redis stopped mid-test: still 200, served without Redis; back when Redis is', async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const runs = {}
  class ItemsController {
    item(id) {
      runs[id] = (runs[id] ?? 0) + 1
      return { id, n: runs[id] }
    }
  }
  Controller('items')(ItemsController)
  decorate(ItemsController, 'item', Get(':id'), Cached())
  Param('id')(ItemsController.prototype, 'item', 0)
  const { app, get } = await startApp(t, {
    imports: [
      HerdcacheModule.forRoot({ redis: redis.url, prefix: 'down:', redisTimeout: 300, circuitBreakerDuration: 200 }),
    ],
    controllers: [ItemsController],
  })
  const cache = app.get(HERDCACHE)
  let r = await get('/items/1')
  assert.equal(r.status, 200)
  assert.equal(r.headers.get('x-cache'), 'MISS')
  assert.ok((await redis.cmd('KEYS', 'down:*')).length > 0 || (await redis.cmd('KEYS', '{down:*')).length > 0)

  await redis.stop()
  const during = await Promise.all([get('/items/1'), get('/items/2'), get('/items/2'), get('/items/3')])
  for (const d of during) assert.equal(d.status, 200, JSON.stringify(d.body))
  assert.deepEqual(during[0].body, { id: '1', n: 1 }, 'the L1 still answers')
  assert.deepEqual(during[1].body, { id: '2', n: 1 })
  assert.equal(runs['2'], 1, 'still one run per key in this process')
  assert.ok(cache.stats().redisErrors > 0, 'Redis was really down')

  await redis.restart()
  await new Promise((resolve) => setTimeout(resolve, 300))
  r = await get('/items/4')
  assert.equal(r.status, 200)
  assert.equal(tally([r]).MISS, 1)
})
