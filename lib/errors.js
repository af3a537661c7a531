'use strict'

// The error codes only JavaScript makes. The native side declares the
// others (`core::error::Code`, exported by `names().codes`; `lib/names.js`
// joins both into `codes`). Every code here is in the README, and the
// core ones in `index.d.ts`'s `HerdcacheError` (`__test__/names.test.js`).

/** What every code of herdcache starts with (`lib/names.js` names the codes by what follows it). */
const CODE_PREFIX = 'ERR_HERDCACHE_'

/** Codes of the core package made in JavaScript, by their name after `ERR_HERDCACHE_`. */
const JS_CODES = Object.freeze({
  /** A loader result JSON cannot represent (lib/leader.js). */
  UNSERIALIZABLE: 'ERR_HERDCACHE_UNSERIALIZABLE',
  /** A value past `maxValueBytes` of JSON (lib/leader.js, index.js `set`). */
  VALUE_TOO_LARGE: 'ERR_HERDCACHE_VALUE_TOO_LARGE',
  /** No native binary loads (lib/native.js): the addon cannot say so itself. */
  NO_BINARY: 'ERR_HERDCACHE_NO_BINARY',
  /** A cold load past `maxConcurrentLoads` found the queue full (`maxQueuedLoads`; lib/bulkhead.js). */
  LOAD_QUEUE_FULL: 'ERR_HERDCACHE_LOAD_QUEUE_FULL',
  /** A getOrLoadMany loader's result is not a Map or an array aligned with its keys (lib/batch-result.js). */
  BATCH_RESULT: 'ERR_HERDCACHE_BATCH_RESULT',
  /** The `serializer` option's `serialize` threw, or returned neither a Buffer/Uint8Array nor a string (lib/values.js). */
  SERIALIZE: 'ERR_HERDCACHE_SERIALIZE',
  /** The `serializer` option's `deserialize` threw on a value (lib/values.js). */
  DESERIALIZE: 'ERR_HERDCACHE_DESERIALIZE',
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

/**
 * The error for an argument whose reading threw (a revoked Proxy, a getter
 * or a Proxy trap that throws): bad input, with a code, the exception as its
 * cause.
 *
 * @param {string} code
 * @param {string} what e.g. 'the key'
 * @param {unknown} cause what reading it threw
 */
function unreadable(code, what, cause) {
  return herdError(
    TypeError,
    code,
    `${what} could not be read: reading it threw (a revoked Proxy, or a getter or Proxy trap that throws; the error is this one's \`cause\`)`,
    cause,
  )
}

/** What `value` is, for an error message: 'null', 'an array', else its `typeof`. */
function typeName(value) {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value
}

function describeKey(key) {
  try {
    return JSON.stringify(key)
  } catch {
    return String(key)
  }
}

function unserializable(userKey, cause) {
  return herdError(
    TypeError,
    JS_CODES.UNSERIALIZABLE,
    `the loader for key ${describeKey(userKey)} returned a value JSON cannot represent` +
      (cause ? ` (${cause.message})` : ' (a function, a symbol or undefined inside)') +
      '; return plain data: objects, arrays, strings, numbers, booleans, null',
    cause,
  )
}

/**
 * The error for a value whose JSON text is longer than `maxValueBytes`
 * UTF-8 bytes (or whose stored bytes are more: lib/values.js), or
 * undefined. A UTF-16 unit is 1 to 3 UTF-8 bytes, so the exact count is
 * only taken when the length alone does not decide.
 *
 * @param {string | Buffer | undefined} json
 * @param {number} maxValueBytes
 */
function sizeProblem(json, maxValueBytes) {
  // No text: lib/json-copy.js copied the value, its text bounded within maxValueBytes.
  if (json === undefined) return undefined
  if (typeof json !== 'string') return storedSizeProblem(json.length, maxValueBytes)
  if (json.length * 3 <= maxValueBytes) return undefined
  const bytes = json.length > maxValueBytes ? json.length : Buffer.byteLength(json)
  if (bytes <= maxValueBytes) return undefined
  return herdError(
    RangeError,
    JS_CODES.VALUE_TOO_LARGE,
    `the value is ${json.length > maxValueBytes ? 'over ' : ''}${bytes} bytes of JSON, more than maxValueBytes (${maxValueBytes}); nothing was stored. Cache something smaller, or raise maxValueBytes`,
  )
}

/** `sizeProblem` for a value stored as bytes (binary parts, a serializer's). */
function storedSizeProblem(bytes, maxValueBytes) {
  if (bytes <= maxValueBytes) return undefined
  return herdError(
    RangeError,
    JS_CODES.VALUE_TOO_LARGE,
    `the value is ${bytes} bytes stored, more than maxValueBytes (${maxValueBytes}); nothing was stored. Cache something smaller, or raise maxValueBytes`,
  )
}

module.exports = {
  herdError,
  unreadable,
  typeName,
  describeKey,
  unserializable,
  sizeProblem,
  CODE_PREFIX,
  JS_CODES,
  NEST_CODES,
}
