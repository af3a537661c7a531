'use strict'

// Canonical cache keys. A route's key is, encoded as herdcache encodes
// array keys (parts escaped and joined, so no part can forge another's
// boundary):
//
//   ['nest', 'http', <route>, <params>, <query>, <vary>, <scope>]
//
// <route> is `Controller.handler` and its path pattern (or the route's `key`), <params> the sorted
// path parameters, <query> the sorted query (repeated names keep their
// order), <vary> the listed request headers, <scope> 'public' or
// 'u:<sha256, or HMAC with http.principalSecret, of the principal>'. Requests that differ only in the order of
// their query parameters share an entry.

const { createHash, createHmac } = require('node:crypto')
const { escapePart } = require('../lib/keys')
const { nestError, NEST_CODES } = require('./errors')

/**
 * JSON with object keys sorted at every level, so equal data gives one
 * string. Throws ERR_HERDCACHE_NEST_INVALID_KEY for what JSON cannot hold
 * (a cycle, a BigInt): such arguments need a key function.
 */
function stableJson(value) {
  try {
    return JSON.stringify(sortDeep(value, new Set()))
  } catch (cause) {
    const error = nestError(
      NEST_CODES.NEST_INVALID_KEY,
      `the arguments cannot be a cache key (${cause.message}); give @CachedMethod a key function`,
      TypeError,
    )
    error.cause = cause
    throw error
  }
}

function sortDeep(value, parents) {
  if (value === null || typeof value !== 'object') return value
  if (parents.has(value)) throw new TypeError('a circular structure')
  if (typeof value.toJSON === 'function') return sortDeep(value.toJSON(), parents)
  parents.add(value)
  let out
  if (Array.isArray(value)) out = value.map((v) => sortDeep(v, parents))
  else {
    out = {}
    for (const name of Object.keys(value).sort()) {
      const v = value[name]
      if (v !== undefined && typeof v !== 'function') out[name] = sortDeep(v, parents)
    }
  }
  parents.delete(value)
  return out
}

/**
 * 32 hex digits of the principal's hash: principals never appear in keys (or
 * Redis) in clear. A plain SHA-256 of a small numeric id can be reversed by
 * hashing every id, so with `secret` (`http.principalSecret`) it is an
 * HMAC-SHA256, which nobody without the secret can recompute.
 */
function hashPrincipal(principal, secret) {
  const hash = secret === undefined ? createHash('sha256') : createHmac('sha256', secret)
  return hash.update(String(principal)).digest('hex').slice(0, 32)
}

/**
 * The query part of a URL, canonical: names sorted, repeated names kept in
 * their order, limited to `allow` when given.
 * @param {string} url a request URL (path and query)
 * @param {readonly string[] | undefined} allow
 */
function canonicalQuery(url, allow) {
  const at = url.indexOf('?')
  if (at < 0) return ''
  const allowed = allow ? new Set(allow) : undefined
  const entries = []
  for (const [name, value] of new URLSearchParams(url.slice(at + 1))) {
    if (allowed === undefined || allowed.has(name)) entries.push([name, value])
  }
  // Array.prototype.sort is stable: repeated names keep their order.
  entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  return new URLSearchParams(entries).toString()
}

function canonicalParams(params) {
  if (!params || typeof params !== 'object') return ''
  const names = Object.keys(params)
  if (names.length === 0) return ''
  if (names.length > 1) names.sort()
  let out = ''
  for (const name of names) {
    out += `${out === '' ? '' : '&'}${encodeURIComponent(name)}=${encodeURIComponent(String(params[name]))}`
  }
  return out
}

function canonicalVary(headers, vary) {
  if (!vary || vary.length === 0) return ''
  return vary
    .map((name) => {
      const value = headers[name.toLowerCase()]
      return `${name.toLowerCase()}=${Array.isArray(value) ? value.join(',') : (value ?? '')}`
    })
    .join('&')
}

/**
 * The key of a route's entry.
 * @param {{ route: string, params?: object, url?: string, query?: readonly string[], headers?: object,
 *   vary?: readonly string[], principal?: string | number | null, secret?: string | Buffer }} parts
 *   `principal` null/undefined: public; `secret`: the HMAC key of the principal's hash
 */
function routeKey({ route, params, url = '', query, headers = {}, vary, principal, secret, routeEscaped = false }) {
  // Encoded here as herdcache encodes an array key (each part's `\` and `:`
  // escaped, joined with `:`): the same key as the array, and a string key
  // is one read into the addon on every hit instead of one per part. The
  // params and the query are percent-encoded (no `:` or `\` left in them).
  const scope = principal === undefined || principal === null ? 'public' : `u\\:${hashPrincipal(principal, secret)}`
  const varied = vary === undefined || vary.length === 0 ? '' : escapePart(canonicalVary(headers, vary))
  const head = routeEscaped ? route : escapePart(route)
  return `nest:http:${head}:${canonicalParams(params)}:${canonicalQuery(url, query)}:${varied}:${scope}`
}

// Route identities and string keys of decorators are few and fixed (a path
// pattern has a `:` in it, so each would be escaped on every request).
const escapedRoutes = new Map()

/** `escapePart` of a route's fixed identity, made once. */
function escapeRoute(route) {
  let escaped = escapedRoutes.get(route)
  if (escaped === undefined) {
    if (escapedRoutes.size >= 10_000) escapedRoutes.clear()
    escaped = escapePart(route)
    escapedRoutes.set(route, escaped)
  }
  return escaped
}

// Nest's PATH_METADATA: the path of a controller or a route handler.
const PATH_METADATA = 'path'
/** @type {WeakMap<Function, Map<Function, string>>} */
const routeIds = new WeakMap()

/**
 * A route's identity in keys: `Controller.handler` and the route's path
 * pattern, so two controllers of one name in different modules do not share
 * entries, while the URL's spelling (trailing slash, prefix) does not matter.
 */
function routeIdentity(controller, handler) {
  let byHandler = routeIds.get(controller)
  if (byHandler === undefined) routeIds.set(controller, (byHandler = new Map()))
  let id = byHandler.get(handler)
  if (id === undefined) {
    const paths = [Reflect.getMetadata(PATH_METADATA, controller), Reflect.getMetadata(PATH_METADATA, handler)]
    id = `${controller.name}.${handler.name} ${paths.map((p) => (Array.isArray(p) ? p.join('|') : (p ?? ''))).join(' ')}`
    byHandler.set(handler, id)
  }
  return id
}

/** The default key of a @CachedMethod call. */
function methodKey(className, methodName, args) {
  return ['nest', 'method', `${className}.${methodName}`, stableJson(args)]
}

module.exports = {
  stableJson,
  hashPrincipal,
  canonicalQuery,
  canonicalParams,
  routeKey,
  routeIdentity,
  escapeRoute,
  methodKey,
}
