'use strict'

// herdcache/nest: the NestJS module, interceptor and decorators. See the
// "NestJS" section of README.md. Needs @nestjs/common, @nestjs/core (11 or
// 12), rxjs and reflect-metadata; class-transformer is used when installed.

require('reflect-metadata')

const { Cache } = require('../index')
const { HerdcacheModule } = require('./module')
const { HerdcacheInterceptor, Cached } = require('./interceptor')
const { CachedMethod, cachedMethodKey, evictCached, evictRoute } = require('./method')
const { HERDCACHE, getCacheToken, getOptionsToken } = require('./options')
const { Inject } = require('@nestjs/common')

/**
 * Parameter decorator: injects the cache named `name` (the default cache
 * without a name; `Cache` by class works for that one too).
 * @param {string} [name]
 */
function InjectCache(name) {
  return Inject(getCacheToken(name))
}

module.exports = {
  HerdcacheModule,
  HerdcacheInterceptor,
  Cached,
  CachedMethod,
  HERDCACHE,
  InjectCache,
  getCacheToken,
  getOptionsToken,
  evictCached,
  evictRoute,
  cachedMethodKey,
  Cache,
}
