'use strict'
// HerdcacheInterceptor / @Cached on real Nest apps (Express and Fastify)
// listening on 127.0.0.1, driven with fetch.

const test = require('node:test')
const assert = require('node:assert/strict')
const {
  Controller,
  Get,
  Post,
  Req,
  UseGuards,
  Injectable,
  NotFoundException,
  UnauthorizedException,
} = require('@nestjs/common')
const { kTesting } = require('herdcache')
const { HerdcacheModule, Cached, HERDCACHE } = require('herdcache/nest')
const { PLATFORMS, decorate, startApp, sleep, until, tally } = require('./apps')

class AuthGuard {
  canActivate(context) {
    const request = context.switchToHttp().getRequest()
    const auth = request.headers.authorization
    if (typeof auth !== 'string' || !auth.startsWith('Bearer ')) throw new UnauthorizedException()
    request.user = { id: auth.slice('Bearer '.length) }
    return true
  }
}
Injectable()(AuthGuard)

/** A controller with its own counters: runs[route] = handler runs. */
function makeController() {
  const runs = {}
  const state = { arrived: 0, fail: false }
  const run = (name) => (runs[name] = (runs[name] ?? 0) + 1)
  class ItemsController {
    async slow() {
      const n = run('slow')
      // The one handler run answers once all 50 requests passed the guard
      // (the interceptor runs right after it).
      await until(() => state.arrived >= 50, 5000, '50 requests')
      await sleep(50)
      return { n }
    }
    async value(req) {
      if (state.valueDelay) await sleep(state.valueDelay)
      return { id: req.params.id, n: run(`value:${req.params.id}`) }
    }
    search(req) {
      return { n: run('search'), query: req.query }
    }
    filtered() {
      return { n: run('filtered') }
    }
    write() {
      return { n: run('write') }
    }
    missing() {
      run('missing')
      throw new NotFoundException('no such item')
    }
    flaky() {
      const n = run('flaky')
      if (state.fail) throw new Error('database down')
      return { n }
    }
    me(req) {
      return { user: req.user.id, n: run(`me:${req.user.id}`) }
    }
    open() {
      return { n: run('open') }
    }
    shared() {
      return { n: run('shared') }
    }
    plain() {
      return { n: run('plain') }
    }
    aged() {
      return { n: run('aged') }
    }
  }
  Controller('items')(ItemsController)
  const arrivals = { canActivate: () => ++state.arrived > 0 }
  decorate(ItemsController, 'slow', Get('slow'), UseGuards(arrivals), Cached())
  decorate(ItemsController, 'value', Get('value/:id'), Cached({ ttl: 1000, hardTtl: 60_000 }))
  decorate(ItemsController, 'search', Get('search'), Cached())
  decorate(ItemsController, 'filtered', Get('filtered'), Cached({ query: ['a', 'b'] }))
  decorate(ItemsController, 'write', Post('write'), Cached({ key: 'write' }))
  decorate(ItemsController, 'missing', Get('missing'), Cached())
  decorate(ItemsController, 'flaky', Get('flaky'), Cached({ ttl: 1000, hardTtl: 60_000 }))
  decorate(ItemsController, 'me', Get('me'), UseGuards(AuthGuard), Cached())
  decorate(ItemsController, 'open', Get('open'), Cached())
  decorate(ItemsController, 'shared', Get('shared'), UseGuards(AuthGuard), Cached({ scope: 'public' }))
  decorate(ItemsController, 'plain', Get('plain'))
  decorate(ItemsController, 'aged', Get('aged'), Cached())
  for (const name of ['value', 'search', 'me', 'open', 'shared']) {
    Req()(ItemsController.prototype, name, 0)
  }
  return { ItemsController, runs, state }
}

for (const platform of PLATFORMS) {
  test(`@Cached routes on ${platform}`, async (t) => {
    const { ItemsController, runs, state } = makeController()
    const { app, get } = await startApp(t, {
      platform,
      imports: [HerdcacheModule.forRoot({ beta: 0, jitter: 0 })],
      controllers: [ItemsController],
      providers: [AuthGuard],
    })
    const cache = app.get(HERDCACHE)

    await t.test('50 concurrent cold GETs run the handler once: 1 MISS, 49 COALESCED', async () => {
      const responses = await Promise.all(Array.from({ length: 50 }, () => get('/items/slow')))
      assert.equal(runs.slow, 1)
      assert.deepEqual(tally(responses), { MISS: 1, COALESCED: 49 })
      for (const r of responses) {
        assert.equal(r.status, 200)
        assert.deepEqual(r.body, { n: 1 })
      }
    })

    await t.test('HIT with Age, then STALE with one background run, then HIT with the new value', async () => {
      let r = await get('/items/value/7')
      assert.equal(r.headers.get('x-cache'), 'MISS')
      assert.equal(r.headers.get('age'), null)
      assert.deepEqual(r.body, { id: '7', n: 1 })
      r = await get('/items/value/7')
      assert.equal(r.headers.get('x-cache'), 'HIT')
      assert.equal(r.headers.get('age'), '0')
      assert.deepEqual(r.body, { id: '7', n: 1 })
      assert.equal(runs['value:7'], 1)
      // Another id is another entry.
      r = await get('/items/value/8')
      assert.equal(r.headers.get('x-cache'), 'MISS')

      cache[kTesting].advanceClock(1500)
      state.valueDelay = 200
      const stale = await Promise.all([get('/items/value/7'), get('/items/value/7'), get('/items/value/7')])
      for (const s of stale) {
        assert.equal(s.headers.get('x-cache'), 'STALE')
        assert.deepEqual(s.body, { id: '7', n: 1 })
      }
      await until(() => runs['value:7'] === 2, 5000, 'the background refresh')
      state.valueDelay = 0
      let fresh
      for (let i = 0; i < 50; i++) {
        fresh = await get('/items/value/7')
        if (fresh.body.n === 2) break
        await sleep(10)
      }
      assert.equal(fresh.headers.get('x-cache'), 'HIT')
      assert.deepEqual(fresh.body, { id: '7', n: 2 }, 'the refresh re-ran the handler with the request params')
      assert.equal(runs['value:7'], 2, 'one background run for the three stale requests')
    })

    await t.test('Age counts seconds since the entry was written', async () => {
      await get('/items/aged')
      await sleep(1100)
      const r = await get('/items/aged')
      assert.equal(r.headers.get('x-cache'), 'HIT')
      assert.ok(Number(r.headers.get('age')) >= 1, `Age ${r.headers.get('age')}`)
    })

    await t.test('POST is never cached, even with a key', async () => {
      for (let i = 1; i <= 3; i++) {
        const r = await get('/items/write', { method: 'POST' })
        assert.equal(r.status, 201)
        assert.equal(r.headers.get('x-cache'), null)
        assert.deepEqual(r.body, { n: i })
      }
    })

    await t.test('routes without @Cached are not cached', async () => {
      await get('/items/plain')
      const r = await get('/items/plain')
      assert.equal(r.headers.get('x-cache'), null)
      assert.deepEqual(r.body, { n: 2 })
    })

    await t.test('the query is canonical: order does not matter, the allow-list drops other names', async () => {
      let r = await get('/items/search?b=1&a=2')
      assert.equal(r.headers.get('x-cache'), 'MISS')
      r = await get('/items/search?a=2&b=1')
      assert.equal(r.headers.get('x-cache'), 'HIT')
      r = await get('/items/search?a=2&b=1&a=3')
      assert.equal(r.headers.get('x-cache'), 'MISS', 'another value is another entry')
      r = await get('/items/search?a=3&b=1')
      assert.equal(r.headers.get('x-cache'), 'MISS', 'repeated names are part of the key')
      assert.equal(runs.search, 3)

      r = await get('/items/filtered?a=1&b=2&nonce=1')
      assert.equal(r.headers.get('x-cache'), 'MISS')
      r = await get('/items/filtered?nonce=2&b=2&a=1')
      assert.equal(r.headers.get('x-cache'), 'HIT')
      assert.equal(runs.filtered, 1)
    })

    await t.test('a handler error with no stale value is rethrown (status kept) and nothing is stored', async () => {
      let r = await get('/items/missing')
      assert.equal(r.status, 404)
      assert.equal(r.body.message, 'no such item')
      r = await get('/items/missing')
      assert.equal(r.status, 404)
      assert.equal(runs.missing, 2)

      state.fail = true
      r = await get('/items/flaky')
      assert.equal(r.status, 500)
      state.fail = false
      r = await get('/items/flaky')
      assert.equal(r.status, 200)
      assert.equal(r.headers.get('x-cache'), 'MISS')
      assert.deepEqual(r.body, { n: 2 })
    })

    await t.test('a handler error with a stale value serves the stale value', async () => {
      state.fail = true
      cache[kTesting].advanceClock(1500)
      const r = await get('/items/flaky')
      assert.equal(r.status, 200)
      assert.equal(r.headers.get('x-cache'), 'STALE')
      assert.deepEqual(r.body, { n: 2 })
      await until(() => runs.flaky === 3, 5000, 'the failing refresh')
      const again = await get('/items/flaky')
      assert.equal(again.status, 200)
      assert.equal(again.headers.get('x-cache'), 'STALE')
      assert.deepEqual(again.body, { n: 2 })
      state.fail = false
    })

    await t.test('per user: each principal has its own entry; guards still run on a warm cache', async () => {
      const alice = { headers: { authorization: 'Bearer alice' } }
      const bob = { headers: { authorization: 'Bearer bob' } }
      let r = await get('/items/me', alice)
      assert.equal(r.headers.get('x-cache'), 'MISS')
      assert.deepEqual(r.body, { user: 'alice', n: 1 })
      r = await get('/items/me', bob)
      assert.equal(r.headers.get('x-cache'), 'MISS')
      assert.deepEqual(r.body, { user: 'bob', n: 1 })
      r = await get('/items/me', alice)
      assert.equal(r.headers.get('x-cache'), 'HIT')
      assert.deepEqual(r.body, { user: 'alice', n: 1 })
      r = await get('/items/me', bob)
      assert.equal(r.headers.get('x-cache'), 'HIT')
      assert.deepEqual(r.body, { user: 'bob', n: 1 })

      r = await get('/items/me')
      assert.equal(r.status, 401, 'the guard runs before the interceptor, also on a warm cache')
      assert.equal(r.headers.get('x-cache'), null)
    })

    await t.test('private requests without a principal are not cached (BYPASS)', async () => {
      let r = await get('/items/open')
      assert.equal(r.headers.get('x-cache'), 'MISS')
      r = await get('/items/open')
      assert.equal(r.headers.get('x-cache'), 'HIT')
      assert.deepEqual(r.body, { n: 1 })
      for (const headers of [{ authorization: 'Bearer carol' }, { cookie: 'session=abc' }]) {
        r = await get('/items/open', { headers })
        assert.equal(r.headers.get('x-cache'), 'BYPASS')
      }
      assert.deepEqual(r.body, { n: 3 }, 'each BYPASS ran the handler')
      assert.equal(runs.open, 3)
    })

    await t.test("scope: 'public' shares one entry between users", async () => {
      let r = await get('/items/shared', { headers: { authorization: 'Bearer alice' } })
      assert.equal(r.headers.get('x-cache'), 'MISS')
      r = await get('/items/shared', { headers: { authorization: 'Bearer bob' } })
      assert.equal(r.headers.get('x-cache'), 'HIT')
      assert.equal(runs.shared, 1)
      r = await get('/items/shared')
      assert.equal(r.status, 401)
    })
  })

  test(`Cache-Status and Cache-Control on ${platform}`, async (t) => {
    const { ItemsController } = makeController()
    const { get } = await startApp(t, {
      platform,
      imports: [HerdcacheModule.forRoot({ ttl: 30_000, http: { headers: 'both', cacheControl: true } })],
      controllers: [ItemsController],
      providers: [AuthGuard],
    })
    const alice = { headers: { authorization: 'Bearer alice' } }
    let r = await get('/items/me', alice)
    assert.equal(r.headers.get('cache-status'), 'herdcache; fwd=miss; stored; ttl=30')
    assert.equal(r.headers.get('x-cache'), 'MISS')
    assert.equal(r.headers.get('cache-control'), 'private, max-age=30')
    assert.equal(r.headers.get('vary'), 'Authorization, Cookie')
    r = await get('/items/me', alice)
    const ttl = Number(/^herdcache; hit; ttl=(\d+)$/.exec(r.headers.get('cache-status'))?.[1])
    assert.ok(
      ttl >= 26 && ttl <= 33,
      `whole seconds left of the 30 s ttl, ±10 % jitter: ${r.headers.get('cache-status')}`,
    )
    assert.match(r.headers.get('cache-control'), /^private, max-age=(29|30)$/)

    r = await get('/items/search')
    assert.equal(r.headers.get('cache-control'), 'public, max-age=30')
    assert.equal(r.headers.get('vary'), null)
    r = await get('/items/open', { headers: { cookie: 'a=b' } })
    assert.equal(r.headers.get('cache-status'), 'herdcache; fwd=bypass')
    assert.equal(r.headers.get('cache-control'), 'private, no-store')
  })
}

test('bound globally (APP_INTERCEPTOR): only @Cached routes are cached, each once; HEAD only with head: true', async (t) => {
  const { APP_INTERCEPTOR } = require('@nestjs/core')
  const { HerdcacheInterceptor } = require('herdcache/nest')
  const { ItemsController, runs } = makeController()
  class HeadController {
    get() {
      return { n: (runs.head = (runs.head ?? 0) + 1) }
    }
  }
  Controller('head')(HeadController)
  decorate(HeadController, 'get', Get(), Cached({ head: true }))
  const { get } = await startApp(t, {
    imports: [HerdcacheModule.forRoot()],
    controllers: [ItemsController, HeadController],
    providers: [AuthGuard, { provide: APP_INTERCEPTOR, useClass: HerdcacheInterceptor }],
  })
  for (let i = 1; i <= 2; i++) {
    const r = await get('/items/plain')
    assert.equal(r.headers.get('x-cache'), null)
    assert.deepEqual(r.body, { n: i })
  }
  let r = await get('/items/search')
  assert.equal(r.headers.get('x-cache'), 'MISS')
  r = await get('/items/search')
  assert.equal(r.headers.get('x-cache'), 'HIT')
  assert.equal(runs.search, 1)

  r = await get('/head', { method: 'HEAD' })
  assert.equal(r.headers.get('x-cache'), 'MISS')
  r = await get('/head')
  assert.equal(r.headers.get('x-cache'), 'HIT', 'HEAD and GET share the entry')
  r = await get('/items/search', { method: 'HEAD' })
  assert.equal(r.headers.get('x-cache'), null, 'HEAD is not cached by default')
})

test('vary headers, a custom principal resolver, scope: user, and the misconfigurations', async (t) => {
  const runs = {}
  const count = (name) => (runs[name] = (runs[name] ?? 0) + 1)
  class MiscController {
    greeting(req) {
      return { lang: req.headers['accept-language'] ?? 'none', n: count('greeting') }
    }
    tenant(req) {
      return { tenant: req.headers['x-tenant'], n: count(`tenant:${req.headers['x-tenant']}`) }
    }
    mine() {
      return { n: count('mine') }
    }
    weird() {
      return { n: count('weird') }
    }
    other() {
      return { n: count('other') }
    }
  }
  Controller('misc')(MiscController)
  decorate(MiscController, 'greeting', Get('greeting'), Cached({ vary: ['Accept-Language'] }))
  decorate(
    MiscController,
    'tenant',
    Get('tenant'),
    Cached({ scope: 'user', principal: (req) => req.headers['x-tenant'] }),
  )
  decorate(MiscController, 'mine', Get('mine'), Cached({ scope: 'user' }))
  decorate(MiscController, 'weird', Get('weird'), Cached({ principal: () => ({ id: 1 }) }))
  decorate(MiscController, 'other', Get('other'), Cached({ cache: 'nowhere' }))
  Req()(MiscController.prototype, 'greeting', 0)
  Req()(MiscController.prototype, 'tenant', 0)
  const { APP_FILTER } = require('@nestjs/core')
  // Express: answers every error with its code, so the test can read it.
  const codes = {
    catch(exception, host) {
      const status = typeof exception.getStatus === 'function' ? exception.getStatus() : 500
      host.switchToHttp().getResponse().status(status).json({ code: exception.code })
    },
  }
  const { get } = await startApp(t, {
    imports: [HerdcacheModule.forRoot()],
    controllers: [MiscController],
    providers: [{ provide: APP_FILTER, useValue: codes }],
  })

  const en = { headers: { 'accept-language': 'en' } }
  const de = { headers: { 'accept-language': 'de' } }
  assert.equal((await get('/misc/greeting', en)).headers.get('x-cache'), 'MISS')
  assert.equal((await get('/misc/greeting', de)).headers.get('x-cache'), 'MISS')
  let r = await get('/misc/greeting', en)
  assert.equal(r.headers.get('x-cache'), 'HIT')
  assert.equal(r.headers.get('cache-control'), null, 'no Cache-Control unless http.cacheControl')
  assert.deepEqual(r.body, { lang: 'en', n: 1 })
  assert.deepEqual((await get('/misc/greeting', de)).body, { lang: 'de', n: 2 })

  for (const tenant of ['a', 'b', 'a']) await get('/misc/tenant', { headers: { 'x-tenant': tenant } })
  r = await get('/misc/tenant', { headers: { 'x-tenant': 'b' } })
  assert.equal(r.headers.get('x-cache'), 'HIT')
  assert.deepEqual(r.body, { tenant: 'b', n: 1 })
  assert.equal((await get('/misc/tenant')).headers.get('x-cache'), 'BYPASS', "scope 'user' without a principal")
  assert.equal((await get('/misc/mine')).headers.get('x-cache'), 'BYPASS')
  assert.equal((await get('/misc/mine')).headers.get('x-cache'), 'BYPASS')
  assert.equal(runs.mine, 2)

  r = await get('/misc/weird', { headers: { cookie: 'a=1' } })
  assert.equal(r.status, 500, 'a principal that is an object is a bug, not a key')
  assert.deepEqual(r.body, { code: 'ERR_HERDCACHE_NEST_INVALID_PRINCIPAL' })
  assert.equal(runs.weird, undefined)
  r = await get('/misc/other')
  assert.equal(r.status, 500, 'a cache name that no HerdcacheModule configured')
  assert.deepEqual(r.body, { code: 'ERR_HERDCACHE_NEST_NO_CACHE' })
  assert.equal(runs.other, undefined)
})

test('a background refresh re-runs the handler of the request that found the entry stale (request scope too)', async (t) => {
  const { Scope, Inject } = require('@nestjs/common')
  const { REQUEST } = require('@nestjs/core')
  let instances = 0
  let runs = 0
  class ScopedController {
    constructor(request) {
      this.request = request
      this.instance = ++instances
    }
    get() {
      runs++
      return { requestId: this.request.headers['x-request-id'], instance: this.instance }
    }
  }
  Controller({ path: 'scoped', scope: Scope.REQUEST })(ScopedController)
  Inject(REQUEST)(ScopedController, undefined, 0)
  decorate(ScopedController, 'get', Get(), Cached({ ttl: 1000, hardTtl: 60_000 }))
  const { app, get } = await startApp(t, {
    imports: [HerdcacheModule.forRoot({ beta: 0, jitter: 0 })],
    controllers: [ScopedController],
  })
  const as = (id) => ({ headers: { 'x-request-id': id } })
  assert.deepEqual((await get('/scoped', as('first'))).body, { requestId: 'first', instance: 1 })
  assert.deepEqual((await get('/scoped', as('second'))).body, { requestId: 'first', instance: 1 }, 'a HIT')
  app.get(HERDCACHE)[kTesting].advanceClock(1500)
  const stale = await get('/scoped', as('third'))
  assert.equal(stale.headers.get('x-cache'), 'STALE')
  await until(() => runs === 2, 5000, 'the refresh')
  let r
  for (let i = 0; i < 50 && r?.body.requestId !== 'third'; i++) r = await get('/scoped', as('fourth'))
  // The refresh ran the controller instance of the "third" request, with its
  // request object, after that response was sent.
  assert.equal(r.headers.get('x-cache'), 'HIT')
  assert.deepEqual(r.body, { requestId: 'third', instance: 3 })
})

test('two controllers of one name (two modules) do not share entries', async (t) => {
  const make = (path) => {
    const Users = { UsersController: class {} }.UsersController
    Users.prototype.list = () => ({ from: path })
    Controller(path)(Users)
    decorate(Users, 'list', Get(), Cached())
    return Users
  }
  const A = make('admin/users')
  const B = make('public/users')
  assert.equal(A.name, B.name)
  const { get } = await startApp(t, { imports: [HerdcacheModule.forRoot()], controllers: [A, B] })
  assert.deepEqual((await get('/admin/users')).body, { from: 'admin/users' })
  const r = await get('/public/users')
  assert.equal(r.headers.get('x-cache'), 'MISS')
  assert.deepEqual(r.body, { from: 'public/users' })
  assert.equal((await get('/admin/users/')).headers.get('x-cache'), 'HIT', 'a trailing slash is the same route')
})
