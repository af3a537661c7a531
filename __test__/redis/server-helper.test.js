'use strict'
// The test harness itself: a redis-server of the test's own, and the RESP client.
const test = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const { startRedis, connect, freePort } = require('../redis-server')

const T = { timeout: 10000 }

test('RESP client: GET/SET/DEL/PTTL/INCR/FLUSHALL round trips, error replies reject', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  assert.match(redis.url, /^redis:\/\/127\.0\.0\.1:\d+$/)
  assert.equal(await redis.cmd('SET', 'a', 'line1\r\nline2 ünï'), 'OK')
  assert.equal(await redis.cmd('GET', 'a'), 'line1\r\nline2 ünï')
  assert.equal(await redis.cmd('GET', 'missing'), null)
  assert.equal(await redis.cmd('INCR', 'n'), 1)
  assert.equal(await redis.cmd('INCR', 'n'), 2)
  assert.equal(await redis.cmd('PTTL', 'a'), -1)
  assert.equal(await redis.cmd('PTTL', 'missing'), -2)
  await redis.cmd('SET', 'b', 'x', 'PX', 5000)
  const pttl = await redis.cmd('PTTL', 'b')
  assert.ok(pttl > 4000 && pttl <= 5000, `PTTL ${pttl}`)
  assert.deepEqual(await redis.cmd('MGET', 'a', 'missing'), ['line1\r\nline2 ünï', null])
  await redis.cmd('RPUSH', 'list', 'x')
  await assert.rejects(redis.cmd('GET', 'list'), /WRONGTYPE/)
  assert.equal(await redis.cmd('DEL', 'a', 'b'), 2)
  assert.equal(await redis.cmd('FLUSHALL'), 'OK')
  assert.equal(await redis.cmd('DBSIZE'), 0)
  // pipelined commands on one connection come back in order
  const c = await redis.connect()
  t.after(() => c.close())
  const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => c.cmd('INCR', 'p')))
  assert.deepEqual(
    replies,
    Array.from({ length: 50 }, (_, i) => i + 1),
  )
})

test('stop() frees the port, restart() comes back empty on the same port', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const pid = redis.pid
  await redis.cmd('SET', 'k', 'v')
  await redis.stop()
  assert.equal(redis.running, false)
  await assert.rejects(connect(redis.port), (e) => e.code === 'ECONNREFUSED')
  await redis.restart()
  assert.equal(redis.running, true)
  assert.notEqual(redis.pid, pid)
  assert.equal(await redis.cmd('GET', 'k'), null, 'no persistence')
  assert.equal(await redis.cmd('SET', 'k', 'v2'), 'OK')
})

test('two servers are independent: stopping one leaves the other running', T, async (t) => {
  const a = await startRedis(t)
  if (!a) return
  const b = await startRedis(t)
  assert.notEqual(a.port, b.port)
  await a.cmd('SET', 'who', 'a')
  await b.cmd('SET', 'who', 'b')
  await a.stop()
  assert.equal(await b.cmd('GET', 'who'), 'b')
})

test('pause() makes the server accept but not answer; resume() answers the waiting command', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const c = await redis.connect()
  t.after(() => c.close())
  redis.pause()
  let answered = false
  const p = c.cmd('PING').then((r) => ((answered = true), r))
  await new Promise((r) => setTimeout(r, 150))
  assert.equal(answered, false, 'a paused server must not answer')
  redis.resume()
  assert.equal(await p, 'PONG')
})

test('freePort() returns a port nothing listens on', T, async () => {
  const port = await freePort()
  await assert.rejects(
    new Promise((resolve, reject) => {
      const s = net.connect({ port, host: '127.0.0.1' }, () => (s.destroy(), resolve()))
      s.on('error', reject)
    }),
    (e) => e.code === 'ECONNREFUSED',
  )
})
