'use strict'

// @CachedMethod for service (or any class) methods, and the eviction helpers
// for write paths.

const { invalidOption, nestError, NEST_CODES } = require('./errors')
const { methodKey, routeKey, routeIdentity } = require('./keys')
const { CACHED_METHOD, CACHED_ROUTE, checkOptions, METHOD } = require('./options')
const { DEFAULT_NAME, requireEntry } = require('./registry')

/**
 * Caches a method's result through `cache.getOrLoad`: concurrent calls with
 * equal arguments share one run (one per fleet with Redis), stale results
 * are served while one refresh runs. The key is class + method + the
 * arguments as canonical JSON, unless `key(...args)` is given (called with
 * the instance as `this`). The wrapper keeps `this`, the arguments, the
 * method's name and length, and its Reflect metadata. It always returns a
 * promise. The cache is the one HerdcacheModule made (`cache` names another);
 * without one the call rejects with ERR_HERDCACHE_NEST_NO_CACHE.
 * `tags` (an array, or `tags(...args)` called with the instance as `this`)
 * gives each result its tags, for `cache.deleteByTag`.
 * @param {{ key?: (...args: any[]) => string | (string | number)[], ttl?: number, hardTtl?: number,
 *   stale?: boolean, cache?: string, tags?: string[] | ((...args: any[]) => string[]) }} [options]
 */
function CachedMethod(options = {}) {
  checkOptions(options, METHOD, '@CachedMethod')
  const { key, tags, cache: cacheName = DEFAULT_NAME } = options
  const callOptions = {}
  for (const name of ['ttl', 'hardTtl', 'stale']) if (options[name] !== undefined) callOptions[name] = options[name]
  if (Array.isArray(tags)) callOptions.tags = tags
  const passOptions = Object.keys(callOptions).length > 0 ? callOptions : undefined
  /** The call options of one call: the static ones, or with its own tags. */
  const optionsFor =
    typeof tags === 'function' ? (self, args) => ({ ...callOptions, tags: tags.apply(self, args) }) : () => passOptions

  return (target, propertyKey, descriptor) => {
    if (!descriptor || typeof descriptor.value !== 'function') {
      throw invalidOption('@CachedMethod decorates a method (not a property, getter or class)')
    }
    const original = descriptor.value
    const className = typeof target === 'function' ? target.name : target.constructor.name
    const methodName = String(propertyKey)
    const label = `${className}.${methodName}`

    const wrapper = {
      [methodName](...args) {
        try {
          const { cache } = requireEntry(cacheName, `@CachedMethod ${label}`)
          const entryKey = key === undefined ? methodKey(className, methodName, args) : key.apply(this, args)
          return cache.getOrLoad(entryKey, () => original.apply(this, args), optionsFor(this, args))
        } catch (error) {
          return Promise.reject(error)
        }
      },
    }[methodName]

    // Metadata other decorators put on the function (Nest's route metadata,
    // Swagger's, ...) must survive the wrapping.
    for (const metadataKey of Reflect.getOwnMetadataKeys(original)) {
      Reflect.defineMetadata(metadataKey, Reflect.getOwnMetadata(metadataKey, original), wrapper)
    }
    Object.defineProperty(wrapper, 'length', { value: original.length })
    Reflect.defineMetadata(CACHED_METHOD, { className, methodName, key, cache: cacheName }, wrapper)
    descriptor.value = wrapper
    return descriptor
  }
}

/** The key `target[methodName](...args)` is cached under; target: an instance, or its class. */
function cachedMethodKey(target, methodName, ...args) {
  const { meta, self } = methodMeta(target, methodName)
  return meta.key === undefined ? methodKey(meta.className, meta.methodName, args) : meta.key.apply(self, args)
}

/**
 * Removes the cached result of `target[methodName](...args)` (on every
 * instance's L1 with Redis). Resolves `true` if an entry was removed.
 * @returns {Promise<boolean>}
 */
async function evictCached(target, methodName, ...args) {
  const { meta } = methodMeta(target, methodName)
  const key = cachedMethodKey(target, methodName, ...args)
  return requireEntry(meta.cache, `evictCached(${meta.className}.${meta.methodName})`).cache.delete(key)
}

function methodMeta(target, methodName) {
  const isClass = typeof target === 'function'
  const fn = isClass ? (target.prototype?.[methodName] ?? target[methodName]) : target?.[methodName]
  const meta = typeof fn === 'function' ? Reflect.getMetadata(CACHED_METHOD, fn) : undefined
  if (meta === undefined) {
    throw nestError(
      NEST_CODES.NEST_NOT_CACHED,
      `${isClass ? target.name : target?.constructor?.name}.${String(methodName)} is not a @CachedMethod`,
      TypeError,
    )
  }
  return { meta, self: isClass ? undefined : target }
}

/**
 * Removes a @Cached route's entry: the one for these path `params`, `query`
 * and `headers` (the route's `vary`), shared (`principal` omitted) or the
 * given principal's. Routes with a `key` function cannot be addressed here.
 * @param {Function} controller the controller class
 * @param {string} handlerName
 * @param {{ params?: object, query?: object | string, headers?: object, principal?: string | number }} [request]
 * @returns {Promise<boolean>}
 */
async function evictRoute(controller, handlerName, request = {}) {
  const handler = controller?.prototype?.[handlerName]
  const route =
    (typeof handler === 'function' ? Reflect.getMetadata(CACHED_ROUTE, handler) : undefined) ??
    Reflect.getMetadata(CACHED_ROUTE, controller)
  if (route === undefined || typeof handler !== 'function') {
    const what = `${controller?.name}.${handlerName}`
    throw nestError(NEST_CODES.NEST_NOT_CACHED, `${what} is not a @Cached route`, TypeError)
  }
  if (typeof route.key === 'function') {
    throw nestError(
      NEST_CODES.NEST_NOT_CACHED,
      `${controller.name}.${handlerName} has a key function: delete its key with cache.delete`,
      TypeError,
    )
  }
  const { cache, http } = requireEntry(route.cache ?? DEFAULT_NAME, `evictRoute(${controller.name}.${handlerName})`)
  const { params, query, headers = {}, principal } = request
  const queryString = typeof query === 'string' ? query.replace(/^\?/, '') : new URLSearchParams(query).toString()
  const search = query === undefined ? '' : `?${queryString}`
  const lowerHeaders = Object.fromEntries(Object.entries(headers).map(([n, v]) => [n.toLowerCase(), v]))
  const key = routeKey({
    route: typeof route.key === 'string' ? route.key : routeIdentity(controller, handler),
    params,
    url: search,
    query: route.query ?? http.query,
    headers: lowerHeaders,
    vary: route.vary ?? http.vary,
    principal,
    secret: http.principalSecret,
  })
  return cache.delete(key)
}

module.exports = { CachedMethod, cachedMethodKey, evictCached, evictRoute }
