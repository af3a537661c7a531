'use strict'

// The two Nest apps `npm run demo:nest` and bench/nest.js compare: the same
// controller (GET /feed/:name, a simulated database query of `queryMs`), cached by
// herdcache/nest's @Cached or by @nestjs/cache-manager's CacheInterceptor,
// on the in-memory store or Redis. Plain JS with Nest's decorator functions.

require('reflect-metadata')
const { Controller, Get, Module, UseInterceptors } = require('@nestjs/common')
const { NestFactory } = require('@nestjs/core')
const { setTimeout: sleep } = require('node:timers/promises')

const LIBRARIES = ['herdcache/nest', '@nestjs/cache-manager']

function feedController(queryMs, runs, decorators) {
  class FeedController {
    async feed() {
      runs.n++
      await sleep(queryMs)
      return { feed: 'spring-sale', items: Array.from({ length: 20 }, (_, i) => ({ id: i, title: `item ${i}` })) }
    }

    counts() {
      return runs
    }
  }
  Controller()(FeedController)
  const decorate = (name, ...ds) => {
    const d = Object.getOwnPropertyDescriptor(FeedController.prototype, name)
    Object.defineProperty(FeedController.prototype, name, Reflect.decorate(ds, FeedController.prototype, name, d) ?? d)
  }
  decorate('feed', Get('feed/:name'), ...decorators)
  decorate('counts', Get('runs'))
  return FeedController
}

/**
 * Starts one app on 127.0.0.1 (port 0).
 * @param {{ library: string, redisUrl?: string, ttl: number, hardTtl?: number, queryMs: number, prefix?: string }} options
 * @returns {Promise<{ url: string, runs: { n: number }, close: () => Promise<void> }>}
 */
async function startFeedApp({ library, redisUrl, ttl, hardTtl = ttl * 10, queryMs, prefix = 'nest-demo:' }) {
  const runs = { n: 0 }
  let imports
  let decorators
  if (library === 'herdcache/nest') {
    const { HerdcacheModule, Cached } = require('herdcache/nest')
    imports = [HerdcacheModule.forRoot({ ttl, hardTtl, redis: redisUrl, prefix })]
    decorators = [Cached()]
  } else if (library === '@nestjs/cache-manager') {
    const { CacheModule, CacheInterceptor } = require('@nestjs/cache-manager')
    const options = { ttl }
    if (redisUrl) {
      const { createKeyv } = require('@keyv/redis')
      options.stores = [createKeyv(redisUrl, { namespace: prefix })]
    }
    imports = [CacheModule.register(options)]
    decorators = [UseInterceptors(CacheInterceptor)]
  } else {
    throw new Error(`unknown library ${library}; one of ${LIBRARIES.join(', ')}`)
  }
  class FeedModule {}
  Module({ imports, controllers: [feedController(queryMs, runs, decorators)] })(FeedModule)
  const app = await NestFactory.create(FeedModule, { logger: false })
  await app.listen(0, '127.0.0.1')
  return { url: await app.getUrl(), runs, close: () => app.close() }
}

module.exports = { LIBRARIES, startFeedApp }
