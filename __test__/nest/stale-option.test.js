'use strict'
// `stale: false` on @Cached and @CachedMethod, as the README documents it:
// past the soft TTL the request (or call) waits for a fresh load instead of
// being answered with the stale value, which the same route without it gets.

const test = require('node:test')
const assert = require('node:assert/strict')
const { Controller, Get, Injectable } = require('@nestjs/common')
const { kTesting } = require('herdcache')
const { HerdcacheModule, Cached, CachedMethod, HERDCACHE } = require('herdcache/nest')
const { decorate, startApp } = require('./apps')

test('@Cached({ stale: false }) waits for a fresh load past the soft TTL; the default serves STALE', async (t) => {
  const runs = { fresh: 0, relaxed: 0 }
  class PricesController {
    fresh() {
      return { run: ++runs.fresh }
    }
    relaxed() {
      return { run: ++runs.relaxed }
    }
  }
  Controller('prices')(PricesController)
  decorate(PricesController, 'fresh', Get('fresh'), Cached({ ttl: 1000, hardTtl: 60_000, stale: false }))
  decorate(PricesController, 'relaxed', Get('relaxed'), Cached({ ttl: 1000, hardTtl: 60_000 }))
  const { app, get } = await startApp(t, {
    imports: [HerdcacheModule.forRoot({ jitter: 0, beta: 0 })],
    controllers: [PricesController],
  })
  for (const path of ['/prices/fresh', '/prices/relaxed'])
    assert.equal((await get(path)).headers.get('x-cache'), 'MISS')
  app.get(HERDCACHE)[kTesting].advanceClock(2000)

  const relaxed = await get('/prices/relaxed')
  assert.equal(relaxed.headers.get('x-cache'), 'STALE')
  assert.deepEqual(relaxed.body, { run: 1 })
  const fresh = await get('/prices/fresh')
  assert.equal(fresh.headers.get('x-cache'), 'MISS', 'the stale entry is a miss for this route')
  assert.deepEqual(fresh.body, { run: 2 }, 'answered by the new run, not the stale value')
})

test('@CachedMethod({ stale: false }) never returns a stale result', async (t) => {
  let balance = 100
  class Accounts {
    async balance() {
      return { balance }
    }
    async cachedBalance() {
      return { balance }
    }
  }
  Injectable()(Accounts)
  decorate(Accounts, 'balance', CachedMethod({ ttl: 1000, hardTtl: 60_000, stale: false }))
  decorate(Accounts, 'cachedBalance', CachedMethod({ ttl: 1000, hardTtl: 60_000 }))
  const { app } = await startApp(t, {
    imports: [HerdcacheModule.forRoot({ jitter: 0, beta: 0 })],
    providers: [Accounts],
  })
  const accounts = app.get(Accounts)
  assert.deepEqual(await accounts.balance(), { balance: 100 })
  assert.deepEqual(await accounts.cachedBalance(), { balance: 100 })
  balance = 40
  app.get(HERDCACHE)[kTesting].advanceClock(2000)
  assert.deepEqual(await accounts.cachedBalance(), { balance: 100 }, 'without it: the stale result, at once')
  assert.deepEqual(await accounts.balance(), { balance: 40 }, 'with it: the fresh one')
})
