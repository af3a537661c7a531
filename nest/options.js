'use strict'

// Tokens, metadata keys, and the checks of herdcache/nest's own options.

const { invalidOption } = require('./errors')
const { DEFAULT_NAME } = require('./registry')

/** Injection token of the default cache (the `Cache` class is an alias of it). */
const HERDCACHE = 'HERDCACHE'
/** Metadata key @Cached writes on a route handler or controller. */
const CACHED_ROUTE = 'herdcache:cached-route'
/** Metadata key @CachedMethod writes on the wrapper it installs. */
const CACHED_METHOD = 'herdcache:cached-method'

/** The injection token of the cache named `name` (`HERDCACHE` for the default one). */
function getCacheToken(name = DEFAULT_NAME) {
  checkName(name)
  return name === DEFAULT_NAME ? HERDCACHE : `HERDCACHE:${name}`
}

/** The injection token of the options HerdcacheModule was given for the cache `name`. */
function getOptionsToken(name = DEFAULT_NAME) {
  checkName(name)
  return `HERDCACHE_OPTIONS:${name}`
}

function checkName(name) {
  if (typeof name !== 'string' || name === '') {
    throw invalidOption(`a cache name must be a non-empty string; got ${name === '' ? "''" : typeof name}`)
  }
}

const HEADER_MODES = new Set(['x-cache', 'cache-status', 'both', false])
const SCOPES = new Set(['auto', 'user', 'public'])

/** Options of the HTTP layer that a route's @Cached may override. */
const SHARED_HTTP = {
  scope: (v) => SCOPES.has(v) || "'auto', 'user' or 'public'",
  principal: (v) => typeof v === 'function' || 'a function (request) => id',
  vary: (v) => isStringArray(v) || 'an array of request header names',
  query: (v) => isStringArray(v) || 'an array of query parameter names (the allow-list)',
  head: (v) => typeof v === 'boolean' || 'a boolean',
}

const MODULE_HTTP = {
  ...SHARED_HTTP,
  headers: (v) => HEADER_MODES.has(v) || "'x-cache', 'cache-status', 'both' or false",
  cacheControl: (v) => typeof v === 'boolean' || 'a boolean',
  serialize: (v) => typeof v === 'boolean' || typeof v === 'function' || 'a boolean or a function (value, context)',
  principalSecret: (v) =>
    (typeof v === 'string' && v !== '') || (Buffer.isBuffer(v) && v.length > 0) || 'a non-empty string or Buffer',
}

const ROUTE = {
  ...SHARED_HTTP,
  ttl: (v) => isMs(v) || 'a number of ms > 0',
  hardTtl: (v) => isMs(v) || 'a number of ms > 0',
  stale: (v) => typeof v === 'boolean' || 'a boolean',
  key: (v) =>
    typeof v === 'string' || typeof v === 'function' || 'a string or a function (context) => string | undefined',
  cache: (v) => (typeof v === 'string' && v !== '') || 'a cache name (string)',
}

const METHOD = {
  ttl: ROUTE.ttl,
  hardTtl: ROUTE.hardTtl,
  stale: ROUTE.stale,
  cache: ROUTE.cache,
  key: (v) => typeof v === 'function' || 'a function (...args) => key',
  tags: (v) => isStringArray(v) || typeof v === 'function' || 'an array of tags or a function (...args) => tags',
}

function isStringArray(v) {
  return Array.isArray(v) && v.every((s) => typeof s === 'string' && s !== '')
}

function isMs(v) {
  return typeof v === 'number' && Number.isFinite(v) && v > 0
}

/**
 * Throws ERR_HERDCACHE_INVALID_OPTION when `options` is not an object of the
 * names in `schema` with acceptable values.
 */
function checkOptions(options, schema, what) {
  if (options === undefined) return {}
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalidOption(`${what} options must be an object`)
  }
  for (const [name, value] of Object.entries(options)) {
    const check = schema[name]
    if (check === undefined) {
      throw invalidOption(`unknown ${what} option \`${name}\`; known: ${Object.keys(schema).join(', ')}`)
    }
    if (value === undefined) continue
    const verdict = check(value)
    if (verdict !== true) throw invalidOption(`${what} option \`${name}\` must be ${verdict}`)
  }
  return options
}

module.exports = {
  HERDCACHE,
  CACHED_ROUTE,
  CACHED_METHOD,
  getCacheToken,
  getOptionsToken,
  checkOptions,
  MODULE_HTTP,
  ROUTE,
  METHOD,
}
