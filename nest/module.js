'use strict'

// HerdcacheModule: makes a Cache (or several, by name) a provider, registers
// it for @CachedMethod once the application initialised, and closes it on
// application shutdown.

const { Module } = require('@nestjs/common')
const { Cache } = require('../index')
const { invalidOption } = require('./errors')
const registry = require('./registry')
const { getCacheToken, getOptionsToken, checkOptions, MODULE_HTTP } = require('./options')

const MODULE_KEYS = new Set(['name', 'isGlobal'])

/**
 * Holds one cache for its module. Once the module initialised, the cache is
 * registered for @CachedMethod (an application that failed to start
 * registers nothing); on application shutdown (after the HTTP server
 * stopped) it is unregistered and closed.
 */
class HerdcacheLifecycle {
  constructor(name, cache, options) {
    this.name = name
    this.cache = cache
    this.http = options.http ?? {}
  }

  onModuleInit() {
    registry.register(this.name, this.cache, this.http)
  }

  async onApplicationShutdown() {
    registry.unregister(this.name, this.cache)
    await this.cache.close()
  }
}

/** Makes the cache from the options (Cache options plus `http`). */
function createCache(name, options) {
  if (options === null || typeof options !== 'object') {
    throw invalidOption(`HerdcacheModule "${name}": the options (or what useFactory returned) must be an object`)
  }
  const { http, ...cacheOptions } = options
  checkOptions(http, MODULE_HTTP, 'HerdcacheModule http')
  for (const key of MODULE_KEYS) {
    if (key in cacheOptions) {
      throw invalidOption(
        `HerdcacheModule: \`${key}\` belongs next to useFactory in forRootAsync({ ${key}, ... }), not in its result`,
      )
    }
  }
  return new Cache(cacheOptions)
}

function dynamicModule({
  name = registry.DEFAULT_NAME,
  isGlobal = false,
  imports = [],
  optionsProvider,
  extraProviders = [],
}) {
  const cacheToken = getCacheToken(name)
  const optionsToken = getOptionsToken(name)
  const providers = [
    optionsProvider,
    ...extraProviders,
    { provide: cacheToken, useFactory: (options) => createCache(name, options), inject: [optionsToken] },
    {
      provide: `HERDCACHE_LIFECYCLE:${name}`,
      useFactory: (cache, options) => new HerdcacheLifecycle(name, cache, options),
      inject: [cacheToken, optionsToken],
    },
  ]
  const exports = [cacheToken, optionsToken]
  if (name === registry.DEFAULT_NAME) {
    providers.push({ provide: Cache, useExisting: cacheToken })
    exports.push(Cache)
  }
  return { module: HerdcacheModule, global: isGlobal === true, imports, providers, exports }
}

class HerdcacheModule {
  /**
   * A cache from static options: the `Cache` options (ttl, redis, prefix, ...),
   * `http` (the interceptor's defaults), and `name` / `isGlobal`.
   * @param {object} [options]
   */
  static forRoot(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw invalidOption('HerdcacheModule.forRoot options must be an object')
    }
    const { name, isGlobal, ...rest } = options
    return dynamicModule({ name, isGlobal, optionsProvider: { provide: getOptionsToken(name), useValue: rest } })
  }

  /**
   * A cache from options made by a factory, which may inject providers
   * (e.g. ConfigService from `imports: [ConfigModule]`).
   * @param {{ useFactory: Function, inject?: any[], imports?: any[], name?: string, isGlobal?: boolean,
   *   extraProviders?: any[] }} options
   */
  static forRootAsync(options) {
    if (options === null || typeof options !== 'object' || typeof options.useFactory !== 'function') {
      throw invalidOption('HerdcacheModule.forRootAsync needs { useFactory, inject?, imports?, name?, isGlobal? }')
    }
    const { name, isGlobal, imports = [], inject = [], useFactory, extraProviders = [] } = options
    return dynamicModule({
      name,
      isGlobal,
      imports,
      extraProviders,
      optionsProvider: { provide: getOptionsToken(name), useFactory, inject },
    })
  }
}
Module({})(HerdcacheModule)

module.exports = { HerdcacheModule, HerdcacheLifecycle }
