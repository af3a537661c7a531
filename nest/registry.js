'use strict'

// The caches HerdcacheModule made, by name, for the code that cannot receive
// them through dependency injection: @CachedMethod wrappers run on whatever
// `this` the caller has. Each name holds a stack, so a second application in
// the same process (tests) uses its own cache and the first one's comes back
// when the second closes.

const { nestError, NEST_CODES } = require('./errors')

const DEFAULT_NAME = 'default'

/** @type {Map<string, { cache: import('../index').Cache, http: object }[]>} */
const caches = new Map()

function register(name, cache, http = {}) {
  let stack = caches.get(name)
  if (!stack) caches.set(name, (stack = []))
  stack.push({ cache, http })
}

function unregister(name, cache) {
  const stack = caches.get(name)
  if (!stack) return
  const at = stack.findLastIndex((entry) => entry.cache === cache)
  if (at >= 0) stack.splice(at, 1)
  if (stack.length === 0) caches.delete(name)
}

/** The cache HerdcacheModule registered under `name` (and its module's `http` options), or undefined. */
function lookupEntry(name = DEFAULT_NAME) {
  const stack = caches.get(name)
  return stack ? stack[stack.length - 1] : undefined
}

/** The cache HerdcacheModule registered under `name`, or undefined. */
function lookup(name = DEFAULT_NAME) {
  return lookupEntry(name)?.cache
}

/** Like lookup, but throws ERR_HERDCACHE_NEST_NO_CACHE when there is none. */
function require_(name = DEFAULT_NAME, what = 'this call') {
  const entry = lookupEntry(name)
  if (entry === undefined) {
    const how = name === DEFAULT_NAME ? 'HerdcacheModule.forRoot()' : `HerdcacheModule.forRoot({ name: '${name}' })`
    throw nestError(
      NEST_CODES.NEST_NO_CACHE,
      `${what} needs the herdcache cache "${name}", but no running Nest application made one: import ${how} ` +
        '(or forRootAsync) in your application module, and call the method after the application initialised',
    )
  }
  return entry
}

module.exports = { DEFAULT_NAME, register, unregister, lookup, lookupEntry, requireEntry: require_ }
