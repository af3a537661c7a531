'use strict'
// What the README's "Coming from @nestjs/cache-manager" section promises a
// test suite: a controller with @Cached compiles in a testing module of its
// own (no cache, no mock) and its handler runs as written; a @CachedMethod
// service needs only HerdcacheModule.forRoot() (the embedded store).

const test = require('node:test')
const assert = require('node:assert/strict')
const { Controller, Get, Injectable, Module, UseInterceptors } = require('@nestjs/common')
const { NestFactory } = require('@nestjs/core')
const { Cached, CachedMethod, HerdcacheModule } = require('herdcache/nest')
const { decorate } = require('./apps')

async function context(t, metadata) {
  class TestingModule {}
  Module(metadata)(TestingModule)
  const app = await NestFactory.createApplicationContext(TestingModule, { logger: false, abortOnError: false })
  t.after(() => app.close())
  return app
}

test('a @Cached controller compiles without HerdcacheModule, and its handler runs uncached', async (t) => {
  let runs = 0
  class ProductsController {
    findOne() {
      runs++
      return { id: 1, runs }
    }
  }
  Controller('products')(ProductsController)
  decorate(ProductsController, 'findOne', Get(':id'), Cached({ ttl: 30_000 }))
  const app = await context(t, { controllers: [ProductsController] })
  const controller = app.get(ProductsController)
  assert.deepEqual(controller.findOne(), { id: 1, runs: 1 })
  assert.deepEqual(controller.findOne(), { id: 1, runs: 2 }, 'called directly, nothing is cached')
})

test("(CacheInterceptor, for comparison, cannot compile without CACHE_MANAGER: the README's reason)", async () => {
  const { CacheInterceptor } = require('@nestjs/cache-manager')
  class LegacyController {
    findOne() {
      return 1
    }
  }
  Controller('legacy')(LegacyController)
  decorate(LegacyController, 'findOne', Get(), UseInterceptors(CacheInterceptor))
  class TestingModule {}
  Module({ controllers: [LegacyController] })(TestingModule)
  await assert.rejects(
    NestFactory.createApplicationContext(TestingModule, { logger: false, abortOnError: false }),
    /CACHE_MANAGER/,
  )
})

test('a @CachedMethod service in a testing module with HerdcacheModule.forRoot(): cached, no Redis', async (t) => {
  let runs = 0
  class UsersService {
    async findOne(id) {
      runs++
      return { id }
    }
  }
  Injectable()(UsersService)
  decorate(UsersService, 'findOne', CachedMethod({ ttl: 60_000 }))
  const app = await context(t, { imports: [HerdcacheModule.forRoot()], providers: [UsersService] })
  await app.init()
  const users = app.get(UsersService)
  assert.deepEqual(await Promise.all([users.findOne(1), users.findOne(1)]), [{ id: 1 }, { id: 1 }])
  assert.deepEqual(await users.findOne(1), { id: 1 })
  assert.equal(runs, 1)
})
