'use strict'

// The error codes only JavaScript makes. The native side declares the
// others (`core::error::Code`, exported by `names().codes`; `lib/names.js`
// joins both into `codes`). Every code here is in the README, and the
// core ones in `index.d.ts`'s `HerdcacheError` (`__test__/names.test.js`).

/** Codes of the core package made in JavaScript, by their name after `ERR_HERDCACHE_`. */
const JS_CODES = Object.freeze({
  /** A loader result JSON cannot represent (lib/flight.js). */
  UNSERIALIZABLE: 'ERR_HERDCACHE_UNSERIALIZABLE',
  /** A value past `maxValueBytes` of JSON (lib/flight.js). */
  VALUE_TOO_LARGE: 'ERR_HERDCACHE_VALUE_TOO_LARGE',
  /** No native binary loads (lib/native.js): the addon cannot say so itself. */
  NO_BINARY: 'ERR_HERDCACHE_NO_BINARY',
})

/** Codes of `herdcache/nest` (nest/). */
const NEST_CODES = Object.freeze({
  NEST_INVALID_KEY: 'ERR_HERDCACHE_NEST_INVALID_KEY',
  NEST_INVALID_PRINCIPAL: 'ERR_HERDCACHE_NEST_INVALID_PRINCIPAL',
  NEST_NO_CACHE: 'ERR_HERDCACHE_NEST_NO_CACHE',
  NEST_NOT_CACHED: 'ERR_HERDCACHE_NEST_NOT_CACHED',
  NEST_PEER_MISSING: 'ERR_HERDCACHE_NEST_PEER_MISSING',
})

/**
 * Errors herdcache makes in JavaScript. Each carries a stable `code`
 * (`ERR_HERDCACHE_…`); the native side builds the same shape with
 * `napi_create_type_error(code, message)`.
 *
 * @param {ErrorConstructor} Kind TypeError, RangeError or Error
 * @param {string} code
 * @param {string} message what happened and what to do
 * @param {unknown} [cause]
 */
function herdError(Kind, code, message, cause) {
  const error = cause === undefined ? new Kind(message) : new Kind(message, { cause })
  error.code = code
  return error
}

function describeKey(key) {
  try {
    return JSON.stringify(key)
  } catch {
    return String(key)
  }
}

module.exports = { herdError, describeKey, JS_CODES, NEST_CODES }
