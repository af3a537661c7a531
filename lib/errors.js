'use strict'

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

module.exports = { herdError, describeKey }
