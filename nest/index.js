'use strict'

// herdcache/nest: the NestJS module, interceptor and decorators. See the
// "NestJS" section of README.md. Needs @nestjs/common, @nestjs/core (11 or
// 12), rxjs and reflect-metadata; class-transformer is used when installed.

const { herdError, NEST_CODES } = require('../lib/errors')

// A plain Node user installs none of Nest; one who imports this subpath
// without it gets one error naming what to install, not a MODULE_NOT_FOUND.
const PEERS = ['@nestjs/common', '@nestjs/core', 'rxjs', 'reflect-metadata']
const missing = PEERS.filter((name) => {
  try {
    require.resolve(name)
    return false
  } catch {
    return true
  }
})
if (missing.length > 0) {
  throw herdError(
    Error,
    NEST_CODES.NEST_PEER_MISSING,
    `herdcache/nest needs ${missing.join(', ')} (NestJS 11 or 12): npm install ${missing.join(' ')}`,
  )
}

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
