'use strict'

// What a getOrLoadMany loader resolves to, made one value per key:
// lib/batch-window.js answers each enrolled key from it, and a namespace's
// getOrLoadMany (lib/namespace.js) its view's keys.

const { herdError, typeName, JS_CODES } = require('./errors')
const { keyId } = require('./keys')

function batchResultError(message) {
  return herdError(TypeError, JS_CODES.BATCH_RESULT, message)
}

/**
 * The loader's result as an array aligned with `keys`: a Map (looked up by
 * each key, and for an array key by its parts too, so `new Map([[['user', 1],
 * row]])` answers `['user', 1]`; a key it lacks is `null`, "not found"), or an array of `keys.length` values. Throws
 * `ERR_HERDCACHE_BATCH_RESULT` for anything else.
 *
 * @param {unknown[]} keys the batch's keys, as the loader was given them
 * @param {unknown} result what the loader resolved to
 */
function alignResults(keys, result) {
  if (Array.isArray(result)) {
    if (result.length === keys.length) return result
    throw batchResultError(
      `the getOrLoadMany() loader returned an array of ${result.length} values for ${keys.length} keys; return one value per missing key, in order (null for "not found"), or a Map`,
    )
  }
  if (!(result instanceof Map)) {
    throw batchResultError(
      `the getOrLoadMany() loader returned ${typeName(result)}; return a Map from key to value, or an array aligned with the missing keys`,
    )
  }
  let byId
  return keys.map((key) => {
    if (result.has(key)) return result.get(key)
    if (typeof key === 'string') return null
    if (byId === undefined) {
      byId = new Map()
      for (const [k, v] of result) if (typeof k !== 'string') byId.set(keyId(k), v)
    }
    const id = keyId(key)
    return byId.has(id) ? byId.get(id) : null
  })
}

module.exports = { alignResults }
