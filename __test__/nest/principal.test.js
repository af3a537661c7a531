'use strict'
// Who an entry belongs to, on real Nest apps: Passport's `req.user =
// { userId, username }` is a principal, a signed-in request with none is
// bypassed with one warning, `http.principalSecret` keys the principal's
// hash, and a key function returning undefined skips the cache.

const test = require('node:test')
const assert = require('node:assert/strict')
const { createHash, createHmac } = require('node:crypto')
const { Controller, Get, Injectable, Req, UseGuards } = require('@nestjs/common')
const { HerdcacheModule, Cached, evictRoute } = require('herdcache/nest')
const { startRedis } = require('../redis-server')
const { deletedInRedis } = require('../redis/fixtures/fleet')
const { decorate, startApp } = require('./apps')

const NO_PRINCIPAL = 'HERDCACHE_NEST_NO_PRINCIPAL'

/** A guard shaped like the JWT strategy of Nest's Passport recipe: `x-user: <id>` signs in as that user. */
class JwtLikeGuard {
  canActivate(context) {
    const request = context.switchToHttp().getRequest()
    const id = request.headers['x-user']
    if (id !== undefined) {
      request.user = request.headers['x-no-id'] ? { username: `user${id}` } : { userId: Number(id), username: `u${id}` }
    }
    return true
  }
}
Injectable()(JwtLikeGuard)

function profileController() {
  const runs = { profile: 0, skip: 0 }
  class ProfileController {
    profile(req) {
      runs.profile++
      return { user: req.user?.userId ?? null, run: runs.profile }
    }
    skip() {
      runs.skip++
      return { run: runs.skip }
    }
  }
  Controller('me')(ProfileController)
  decorate(ProfileController, 'profile', Get('profile'), UseGuards(JwtLikeGuard), Cached())
  // The @nestjs/cache-manager habit: trackBy returns undefined to skip a request.
  const key = (context) => (context.switchToHttp().getRequest().query.fresh === '1' ? undefined : 'skip-route')
  decorate(ProfileController, 'skip', Get('skip'), Cached({ key, scope: 'public' }))
  Req()(ProfileController.prototype, 'profile', 0)
  return { ProfileController, runs }
}

/** Collects the process warnings of one code while the test runs. */
function warningsOf(t, code) {
  const seen = []
  const listener = (warning) => {
    if (warning.code === code) seen.push(warning)
  }
  process.on('warning', listener)
  t.after(() => process.off('warning', listener))
  return seen
}

test("Passport's req.user = { userId } is a principal: one entry per user", async (t) => {
  const { ProfileController, runs } = profileController()
  const { get } = await startApp(t, { imports: [HerdcacheModule.forRoot()], controllers: [ProfileController] })
  const as = (id) => ({ headers: { 'x-user': String(id), authorization: 'Bearer token' } })
  assert.equal((await get('/me/profile', as(1))).headers.get('x-cache'), 'MISS')
  assert.equal((await get('/me/profile', as(2))).headers.get('x-cache'), 'MISS')
  const again = await get('/me/profile', as(1))
  assert.equal(again.headers.get('x-cache'), 'HIT')
  assert.deepEqual(again.body, { user: 1, run: 1 }, "user 1 gets user 1's entry")
  assert.deepEqual((await get('/me/profile', as(2))).body, { user: 2, run: 2 })
  assert.equal(runs.profile, 2)
})

test('a signed-in request with no principal is bypassed, and warned about once, naming http.principal', async (t) => {
  const warnings = warningsOf(t, NO_PRINCIPAL)
  const { ProfileController, runs } = profileController()
  const { get } = await startApp(t, { imports: [HerdcacheModule.forRoot()], controllers: [ProfileController] })
  const nameless = { headers: { 'x-user': '7', 'x-no-id': '1' } }
  for (let i = 0; i < 3; i++) assert.equal((await get('/me/profile', nameless)).headers.get('x-cache'), 'BYPASS')
  assert.equal(runs.profile, 3, 'each BYPASS ran the handler')
  await new Promise((resolve) => setImmediate(resolve)) // warnings are emitted on the next tick
  assert.equal(warnings.length, 1, 'one warning for the process')
  assert.match(warnings[0].message, /http\.principal/)
  assert.match(warnings[0].message, /username/, 'it names the fields req.user has')
})

test('@Cached({ key }) returning undefined skips the cache for that request (BYPASS)', async (t) => {
  const { ProfileController, runs } = profileController()
  const { get } = await startApp(t, { imports: [HerdcacheModule.forRoot()], controllers: [ProfileController] })
  assert.equal((await get('/me/skip')).headers.get('x-cache'), 'MISS')
  assert.equal((await get('/me/skip')).headers.get('x-cache'), 'HIT')
  const skipped = await get('/me/skip?fresh=1')
  assert.equal(skipped.headers.get('x-cache'), 'BYPASS')
  assert.deepEqual(skipped.body, { run: 2 }, 'the handler ran')
  assert.equal((await get('/me/skip')).headers.get('x-cache'), 'HIT', 'the entry is still there')
  assert.equal(runs.skip, 2)
})

for (const secret of [undefined, 'a long random secret']) {
  test(`the principal in Redis key names: ${secret ? 'HMAC with http.principalSecret' : 'plain SHA-256'}`, async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const { ProfileController } = profileController()
    const http = secret ? { principalSecret: secret } : {}
    const { get } = await startApp(t, {
      imports: [HerdcacheModule.forRoot({ redis: redis.url, prefix: 'p:', http })],
      controllers: [ProfileController],
    })
    assert.equal((await get('/me/profile', { headers: { 'x-user': '42' } })).headers.get('x-cache'), 'MISS')
    const keys = (await redis.cmd('KEYS', '*')).filter((k) => k.includes('ProfileController'))
    assert.equal(keys.length, 1, JSON.stringify(keys))
    const sha = createHash('sha256').update('42').digest('hex').slice(0, 32)
    const hmac = createHmac('sha256', secret ?? 'unused')
      .update('42')
      .digest('hex')
      .slice(0, 32)
    if (secret) {
      assert.ok(keys[0].includes(hmac), `the key carries the HMAC: ${keys[0]}`)
      assert.ok(!keys[0].includes(sha), 'not the plain hash anyone can recompute from the id')
    } else {
      assert.ok(keys[0].includes(sha), `the key carries sha256("42"): ${keys[0]}`)
    }
    assert.equal(await evictRoute(ProfileController, 'profile', { principal: 42 }), true, 'evictRoute finds it')
    const values = (await redis.cmd('KEYS', '*')).filter((k) => k.includes('ProfileController') && !k.endsWith(':lock'))
    const live = []
    for (const name of values) if (!deletedInRedis(await redis.cmd('GET', name))) live.push(name)
    assert.deepEqual(live, [], 'evicted: nothing but its tombstone left')
  })
}

test('http.principalSecret must be a non-empty string or Buffer', () => {
  for (const principalSecret of ['', 42, Buffer.alloc(0)]) {
    assert.throws(
      () =>
        HerdcacheModule.forRoot({ http: { principalSecret } }).providers[1].useFactory({ http: { principalSecret } }),
      (error) => error.code === 'ERR_HERDCACHE_INVALID_OPTION' && /principalSecret/.test(error.message),
    )
  }
})
