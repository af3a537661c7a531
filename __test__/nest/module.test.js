'use strict'
// HerdcacheModule: injection by class, token and name; forRootAsync with
// ConfigModule; isGlobal; closing on shutdown; option errors.

const test = require('node:test')
const assert = require('node:assert/strict')
const { Controller, Get, Injectable, Inject, Module } = require('@nestjs/common')
const { NestFactory } = require('@nestjs/core')
const { ConfigModule, ConfigService } = require('@nestjs/config')
const { Cache, kTesting } = require('herdcache')
const { HerdcacheModule, Cached, HERDCACHE, InjectCache, getCacheToken } = require('herdcache/nest')
const { decorate, inject, startApp } = require('./apps')

function counterController(path, cachedOptions = {}) {
  const runs = { n: 0 }
  class CounterController {
    get() {
      return { n: ++runs.n }
    }
  }
  Controller(path)(CounterController)
  decorate(CounterController, 'get', Get(), Cached(cachedOptions))
  return { CounterController, runs }
}

test('the Cache is injectable by class, by the HERDCACHE token, and by name', async (t) => {
  class ByClass {
    constructor(cache) {
      this.cache = cache
    }
  }
  Injectable()(ByClass)
  inject(ByClass, Cache)
  class ByToken {
    constructor(cache, reports) {
      this.cache = cache
      this.reports = reports
    }
  }
  Injectable()(ByToken)
  Inject(HERDCACHE)(ByToken, undefined, 0)
  InjectCache('reports')(ByToken, undefined, 1)
  const { CounterController } = counterController('reports', { cache: 'reports' })

  const { app, get } = await startApp(t, {
    imports: [HerdcacheModule.forRoot(), HerdcacheModule.forRoot({ name: 'reports', prefix: 'r:' })],
    providers: [ByClass, ByToken],
    controllers: [CounterController],
  })
  const byClass = app.get(ByClass)
  const byToken = app.get(ByToken)
  assert.ok(byClass.cache instanceof Cache)
  assert.equal(byClass.cache, byToken.cache)
  assert.ok(byToken.reports instanceof Cache)
  assert.notEqual(byToken.reports, byToken.cache)
  assert.equal(app.get(getCacheToken('reports')), byToken.reports)

  const r = await get('/reports')
  assert.equal(r.headers.get('x-cache'), 'MISS')
  assert.equal(byToken.reports.stats().misses, 1, 'the route used the named cache')
  assert.equal(byToken.cache.stats().misses, 0)
})

test('forRootAsync with ConfigModule / ConfigService', async (t) => {
  const { CounterController, runs } = counterController('cfg')
  let factoryCalls = 0
  const { app, get } = await startApp(t, {
    imports: [
      ConfigModule.forRoot({ ignoreEnvFile: true, load: [() => ({ CACHE_TTL: 200, CACHE_HEADERS: 'cache-status' })] }),
      HerdcacheModule.forRootAsync({
        imports: [ConfigModule],
        inject: [ConfigService],
        useFactory: (config) => {
          factoryCalls++
          assert.ok(config instanceof ConfigService)
          return { ttl: config.get('CACHE_TTL'), beta: 0, jitter: 0, http: { headers: config.get('CACHE_HEADERS') } }
        },
      }),
    ],
    controllers: [CounterController],
  })
  assert.equal(factoryCalls, 1)
  let r = await get('/cfg')
  assert.equal(r.headers.get('cache-status'), 'herdcache; fwd=miss; stored; ttl=0')
  assert.equal(r.headers.get('x-cache'), null, "http.headers 'cache-status' only")
  app.get(HERDCACHE)[kTesting].advanceClock(150)
  r = await get('/cfg')
  assert.equal(r.headers.get('cache-status'), 'herdcache; hit; ttl=0', '50 ms left')
  app.get(HERDCACHE)[kTesting].advanceClock(100)
  r = await get('/cfg')
  assert.equal(
    r.headers.get('cache-status'),
    'herdcache; hit; fwd=stale; ttl=-1',
    'the ttl from ConfigService (200 ms) applies',
  )
  assert.deepEqual(r.body, { n: 1 }, 'the stale value, while the refresh runs')
  assert.ok(runs.n <= 2)
})

test('isGlobal makes the cache injectable in modules that do not import HerdcacheModule', async (t) => {
  class NeedsCache {
    constructor(cache) {
      this.cache = cache
    }
  }
  Injectable()(NeedsCache)
  inject(NeedsCache, Cache)
  const feature = () => {
    class FeatureModule {}
    Module({ providers: [NeedsCache] })(FeatureModule)
    return FeatureModule
  }
  const { app } = await startApp(t, { imports: [HerdcacheModule.forRoot({ isGlobal: true }), feature()] })
  assert.ok(app.get(NeedsCache).cache instanceof Cache)

  class Root {}
  Module({ imports: [HerdcacheModule.forRoot(), feature()] })(Root)
  await assert.rejects(NestFactory.create(Root, { logger: false, abortOnError: false }), /Cache/)
})

test('the cache is closed on application shutdown', async () => {
  const { CounterController } = counterController('bye')
  const { app, get } = await startApp(null, { imports: [HerdcacheModule.forRoot()], controllers: [CounterController] })
  const cache = app.get(HERDCACHE)
  assert.equal((await get('/bye')).status, 200)
  await app.close()
  await assert.rejects(
    cache.getOrLoad('k', () => 1),
    (e) => e.code === 'ERR_HERDCACHE_CLOSED',
  )
})

test('bad options fail with ERR_HERDCACHE_INVALID_OPTION', async () => {
  const invalid = (e) => e.code === 'ERR_HERDCACHE_INVALID_OPTION'
  assert.throws(() => HerdcacheModule.forRootAsync({ inject: [] }), invalid)
  assert.throws(() => HerdcacheModule.forRoot({ name: '' }), invalid)
  assert.throws(() => Cached({ ttl: -1 }), invalid)
  assert.throws(() => Cached({ scope: 'everyone' }), invalid)
  assert.throws(() => Cached({ tll: 1000 }), /unknown @Cached option `tll`/)
  for (const options of [{ http: { headers: 'x' } }, { ttl: 'soon' }, { isGlobal: true }]) {
    class Root {}
    const herd =
      'isGlobal' in options
        ? HerdcacheModule.forRootAsync({ useFactory: () => options })
        : HerdcacheModule.forRoot(options)
    Module({ imports: [herd] })(Root)
    await assert.rejects(NestFactory.create(Root, { logger: false, abortOnError: false }), invalid)
  }
})

test('forRootAsync extraProviders feed the factory; getOptionsToken injects the options the cache was made with', async (t) => {
  const { getOptionsToken } = require('herdcache/nest')
  // A settings class no imported module exports: only extraProviders makes it injectable into useFactory.
  class CacheSettings {
    ttl = 12_345
  }
  Injectable()(CacheSettings)
  class ReadsOptions {
    constructor(options, reportOptions) {
      this.options = options
      this.reportOptions = reportOptions
    }
  }
  Injectable()(ReadsOptions)
  Inject(getOptionsToken())(ReadsOptions, undefined, 0)
  Inject(getOptionsToken('reports'))(ReadsOptions, undefined, 1)
  const { app } = await startApp(t, {
    imports: [
      HerdcacheModule.forRootAsync({
        isGlobal: true,
        extraProviders: [CacheSettings],
        inject: [CacheSettings],
        useFactory: (settings) => ({ ttl: settings.ttl, http: { headers: 'both' } }),
      }),
      HerdcacheModule.forRoot({ name: 'reports', ttl: 1_000, isGlobal: true }),
    ],
    providers: [ReadsOptions],
  })
  const { options, reportOptions } = app.get(ReadsOptions)
  assert.deepEqual(options, { ttl: 12_345, http: { headers: 'both' } }, 'what useFactory returned')
  assert.deepEqual(reportOptions, { ttl: 1_000 }, 'what forRoot got, without name and isGlobal')
  assert.equal(getOptionsToken('reports'), 'HERDCACHE_OPTIONS:reports')
})
