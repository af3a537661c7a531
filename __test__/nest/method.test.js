'use strict'
// @CachedMethod on services and controllers; evictCached / evictRoute.

const test = require('node:test')
const assert = require('node:assert/strict')
const { Controller, Get, Injectable, SetMetadata, Param, Module } = require('@nestjs/common')
const { NestFactory } = require('@nestjs/core')
const {
  HerdcacheModule,
  Cached,
  CachedMethod,
  HERDCACHE,
  evictCached,
  evictRoute,
  cachedMethodKey,
} = require('herdcache/nest')
const { decorate, inject, startApp, sleep } = require('./apps')

class Repo {
  constructor() {
    this.queries = []
  }
  async find(table, id) {
    this.queries.push(`${table}:${id}`)
    await sleep(30)
    return { table, id, name: `${table} #${id}` }
  }
}
Injectable()(Repo)

const CUSTOM = 'test:custom'

class UsersService {
  constructor(repo) {
    this.repo = repo
    this.table = 'users'
  }
  findOne(id) {
    return this.repo.find(this.table, id)
  }
  findTwin(id) {
    return this.repo.find('twins', id)
  }
  byEmail(email, options) {
    return this.repo.find(this.table, `${email}/${options.active}`)
  }
  posts(userId) {
    return this.repo.find('posts', userId)
  }
  settings(userId) {
    return this.repo.find('settings', userId)
  }
}
Injectable()(UsersService)
inject(UsersService, Repo)
// Metadata put on the function by a decorator applied first (it sits below @CachedMethod).
Reflect.defineMetadata(CUSTOM, 'kept', UsersService.prototype.findOne)
decorate(UsersService, 'findOne', CachedMethod({ ttl: 60_000 }), SetMetadata('role', 'admin'))
decorate(UsersService, 'findTwin', CachedMethod())
decorate(
  UsersService,
  'posts',
  CachedMethod({
    tags(userId) {
      return [`user:${userId}`, this.table]
    },
  }),
)
decorate(UsersService, 'settings', CachedMethod({ tags: ['settings'] }))
decorate(
  UsersService,
  'byEmail',
  CachedMethod({
    key(email, options) {
      return ['user-by-email', this.table, email.toLowerCase(), String(options.active)]
    },
  }),
)

class ProfileController {
  constructor(users) {
    this.users = users
  }
  profile(id) {
    return this.users.findOne(id)
  }
  listing() {
    return { at: ++ProfileController.listings }
  }
}
ProfileController.listings = 0
Controller('profiles')(ProfileController)
inject(ProfileController, UsersService)
// A controller method that is a route and a @CachedMethod: the route metadata must survive.
decorate(ProfileController, 'profile', CachedMethod(), Get(':id'))
decorate(ProfileController, 'listing', Get(), Cached({ scope: 'public' }))
Param('id')(ProfileController.prototype, 'profile', 0)

test('@CachedMethod keeps this, the arguments and the metadata, and coalesces', async (t) => {
  const { app, get } = await startApp(t, {
    imports: [HerdcacheModule.forRoot()],
    providers: [Repo, UsersService],
    controllers: [ProfileController],
  })
  const users = app.get(UsersService)
  const repo = app.get(Repo)

  const results = await Promise.all(Array.from({ length: 20 }, () => users.findOne(1)))
  assert.deepEqual(repo.queries, ['users:1'], '20 concurrent calls, one run with this.repo and this.table')
  for (const r of results) assert.deepEqual(r, { table: 'users', id: 1, name: 'users #1' })
  assert.deepEqual(await users.findOne(2), { table: 'users', id: 2, name: 'users #2' })
  await users.findTwin(1)
  assert.deepEqual(
    repo.queries,
    ['users:1', 'users:2', 'twins:1'],
    'two methods with the same arguments do not collide',
  )
  await users.findOne(1)
  assert.equal(repo.queries.length, 3, 'a hit')

  const wrapped = UsersService.prototype.findOne
  assert.equal(Reflect.getMetadata(CUSTOM, wrapped), 'kept')
  assert.equal(Reflect.getMetadata('role', wrapped), 'admin')
  assert.equal(wrapped.name, 'findOne')
  assert.equal(wrapped.length, 1)

  // The key function sees `this` and the arguments.
  await users.byEmail('Ann@Example.com', { active: true })
  await users.byEmail('ann@example.com', { active: true })
  assert.equal(repo.queries.filter((q) => q.startsWith('users:Ann')).length, 1)
  assert.deepEqual(cachedMethodKey(users, 'byEmail', 'ANN@example.com', { active: true }), [
    'user-by-email',
    'users',
    'ann@example.com',
    'true',
  ])

  // Route + @CachedMethod on a controller method.
  let r = await get('/profiles/5')
  assert.equal(r.status, 200)
  assert.deepEqual(r.body, { table: 'users', id: '5', name: 'users #5' })
  r = await get('/profiles/5')
  assert.equal(repo.queries.filter((q) => q === 'users:5').length, 1)

  // Eviction.
  assert.equal(await evictCached(users, 'findOne', 1), true)
  assert.equal(await evictCached(UsersService, 'findOne', 1), false, 'already gone; by class works too')
  await users.findOne(1)
  assert.equal(repo.queries.filter((q) => q === 'users:1').length, 2, 'the evicted key ran again')
  assert.throws(
    () => cachedMethodKey(users, 'nope'),
    (e) => e.code === 'ERR_HERDCACHE_NEST_NOT_CACHED',
  )

  assert.deepEqual((await get('/profiles')).body, { at: 1 })
  assert.equal((await get('/profiles')).headers.get('x-cache'), 'HIT')
  assert.equal(await evictRoute(ProfileController, 'listing'), true)
  r = await get('/profiles')
  assert.equal(r.headers.get('x-cache'), 'MISS')
  assert.deepEqual(r.body, { at: 2 })
  await assert.rejects(evictRoute(ProfileController, 'profile'), (e) => e.code === 'ERR_HERDCACHE_NEST_NOT_CACHED')
  assert.ok(app.get(HERDCACHE).stats().misses >= 5)
})

test('@CachedMethod tags: per call (this and the arguments) or fixed, invalidated by cache.deleteByTag', async (t) => {
  const { app } = await startApp(t, { imports: [HerdcacheModule.forRoot()], providers: [Repo, UsersService] })
  const users = app.get(UsersService)
  const repo = app.get(Repo)
  const cache = app.get(HERDCACHE)
  await Promise.all([users.posts(1), users.posts(2), users.settings(1), users.settings(2), users.findOne(1)])
  assert.equal(repo.queries.length, 5)
  await cache.deleteByTag('user:1')
  await Promise.all([users.posts(1), users.posts(2), users.settings(1), users.findOne(1)])
  assert.deepEqual(repo.queries.slice(5), ['posts:1'], "only user 1's posts ran again")
  await cache.deleteByTag('settings')
  await Promise.all([users.settings(1), users.settings(2), users.posts(1)])
  assert.deepEqual(repo.queries.slice(6).sort(), ['settings:1', 'settings:2'])
  await cache.deleteByTag('users')
  await users.posts(2)
  assert.deepEqual(repo.queries.slice(8), ['posts:2'], 'the tag from `this.table`')
  assert.throws(
    () => CachedMethod({ tags: 'user' }),
    (e) => e.code === 'ERR_HERDCACHE_INVALID_OPTION' && /tags/.test(e.message),
  )
})

test('@CachedMethod without HerdcacheModule rejects with ERR_HERDCACHE_NEST_NO_CACHE', async () => {
  // An application that failed to start registers no cache.
  class Broken {}
  Module({ imports: [HerdcacheModule.forRoot()], providers: [UsersService] })(Broken) // no Repo: DI fails
  await assert.rejects(NestFactory.create(Broken, { logger: false, abortOnError: false }), /Repo/)

  const users = new UsersService(new Repo())
  await assert.rejects(users.findOne(1), (e) => {
    assert.equal(e.code, 'ERR_HERDCACHE_NEST_NO_CACHE')
    assert.match(e.message, /UsersService\.findOne.*HerdcacheModule\.forRoot\(\)/)
    return true
  })
  assert.deepEqual(users.repo.queries, [], 'the method did not run uncached either')
  await assert.rejects(evictCached(users, 'findOne', 1), (e) => e.code === 'ERR_HERDCACHE_NEST_NO_CACHE')
  assert.throws(
    () => CachedMethod({ key: 'static' }),
    (e) => e.code === 'ERR_HERDCACHE_INVALID_OPTION',
  )
  const circular = { a: 1 }
  circular.self = circular
  assert.throws(
    () => cachedMethodKey(UsersService, 'findOne', circular),
    (e) => e.code === 'ERR_HERDCACHE_NEST_INVALID_KEY',
  )
  assert.throws(
    () =>
      decorate(
        class X {
          get y() {
            return 1
          }
        },
        'y',
        CachedMethod(),
      ),
    (e) => e.code === 'ERR_HERDCACHE_INVALID_OPTION',
  )
})
