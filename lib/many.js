'use strict'

// Batch loads: `cache.getOrLoadMany(keys, loader, options?)` (README, "Many
// keys in one load: getOrLoadMany"). Built on getOrLoad, one call per key,
// so each key is looked up, coalesced, locked (with Redis), stored and
// refreshed exactly as getOrLoad does it; untraced, the addon makes those
// calls, up to NATIVE_KEYS in one crossing (lib/many-native.js), so a warm
// call makes no JavaScript call per key, and no batch. The loader each
// getOrLoad is given loads nothing itself: getOrLoad calls it only when this
// process really loads the key (an L1 miss, then with Redis a Redis miss and
// the fleet lock won), and it enrols the key in this call's batch instead
// (lib/batch-window.js says when a batch goes to the loader). Hits, joins,
// Redis hits and keys another instance loads never reach the batch.
//
// This file holds the call's orchestration: its input checked (the keys by
// lib/keys.js's rules), the getOrLoad calls made, the answer put together.

const { herdError, typeName, unreadable } = require('./errors')
const { codes, CALL_OPTIONS, TIERS } = require('./names')
const { isAbortSignal, SIGNAL_PROBLEM } = require('./callers')
const { keyProblem } = require('./keys')
const { Batch } = require('./batch-window')
const { NATIVE_KEYS, callNative, callNativeParts, eachKey } = require('./many-native')
const { SEES_NO_HELD_VALUE } = require('./leader')

/** Keys per loader call unless the call's `maxBatchSize` says otherwise. */
const DEFAULT_MAX_BATCH_SIZE = 100

/** getOrLoad's call options (but `status`, which belongs to one key) and `maxBatchSize`. */
// `status` is one call's; the tiers (`forceFresh`, `l1`, `redis`) are getOrLoad's alone.
const MANY_OPTIONS = new Set([...CALL_OPTIONS.filter((name) => name !== 'status' && !(name in TIERS)), 'maxBatchSize'])

function invalidOption(message) {
  return herdError(TypeError, codes.INVALID_OPTION, message)
}

const NO_OPTIONS = Object.freeze({ keyOptions: undefined, maxBatchSize: DEFAULT_MAX_BATCH_SIZE })

/**
 * The per-key options and the batch size of a call's options, or an error.
 *
 * @returns {{ keyOptions: object | undefined, maxBatchSize: number } | Error}
 */
function readOptions(options) {
  if (options === undefined) return NO_OPTIONS
  if (typeof options !== 'object' || options === null) {
    return invalidOption(`the call options must be an object; got ${typeName(options)}`)
  }
  let keyOptions
  for (const name in options) {
    if (!MANY_OPTIONS.has(name)) {
      const why = name === 'status' ? ' (status belongs to one getOrLoad call)' : ''
      return invalidOption(`unknown getOrLoadMany() option \`${name}\`${why}; known: ${[...MANY_OPTIONS].join(', ')}`)
    }
    if (name !== 'maxBatchSize') {
      keyOptions ??= {}
      keyOptions[name] = options[name]
    }
  }
  const { maxBatchSize = DEFAULT_MAX_BATCH_SIZE } = options
  if (!Number.isSafeInteger(maxBatchSize) || maxBatchSize < 1) {
    return herdError(
      typeof maxBatchSize === 'number' ? RangeError : TypeError,
      codes.INVALID_OPTION,
      `option \`maxBatchSize\` must be an integer >= 1; got ${typeof maxBatchSize === 'number' ? maxBatchSize : typeName(maxBatchSize)}`,
    )
  }
  return { keyOptions, maxBatchSize }
}

/** The error of the first of `keys` that is no key, by keyProblem's rules, or undefined. */
function keysProblem(keys, n) {
  for (let i = 0; i < n; i++) {
    let problem
    try {
      problem = keyProblem(keys[i])
    } catch (cause) {
      return unreadable(codes.INVALID_KEY, `key ${i} of getOrLoadMany()`, cause)
    }
    if (problem !== undefined) {
      return herdError(
        TypeError,
        codes.INVALID_KEY,
        `key ${i} of getOrLoadMany() is ${problem}; a key is a non-empty string or a non-empty array of strings and finite numbers (nothing was loaded)`,
      )
    }
  }
  return undefined
}

/**
 * `cache.getOrLoadMany(keys, loader, options?)`: the values of `keys`, in
 * order. Rejects, once every key has settled, with the error of the first
 * key (in `keys` order) that failed; the others were stored all the same.
 * Bad input rejects before anything is looked up or loaded.
 *
 * @param {{ getOrLoad: Function }} cache
 * @param {unknown[]} keys
 * @param {(missingKeys: unknown[], context: import('./batch-context').BatchContext) => unknown} loader
 * @param {object} [options]
 * @param {import('./many-native').Native} [native] untraced, the keys' getOrLoad calls are made by the addon,
 *   many in one call; without it (traced), each is a `cache.getOrLoad` call
 */
function getOrLoadMany(cache, keys, loader, options, native) {
  let isArray
  let n
  try {
    isArray = Array.isArray(keys)
    n = isArray ? keys.length : 0
  } catch (cause) {
    return Promise.reject(unreadable(codes.INVALID_KEY, 'the keys of getOrLoadMany()', cause))
  }
  if (!isArray) {
    return Promise.reject(
      herdError(
        TypeError,
        codes.INVALID_KEY,
        `getOrLoadMany() takes an array of keys, e.g. cache.getOrLoadMany(['a', 'b'], loader); got ${typeName(keys)}`,
      ),
    )
  }
  if (typeof loader !== 'function') {
    return Promise.reject(
      herdError(
        TypeError,
        codes.INVALID_LOADER,
        `the getOrLoadMany() loader must be a function (missingKeys, ctx) => Map | array; got ${typeName(loader)}`,
      ),
    )
  }
  const read = readOptions(options)
  if (read instanceof Error) return Promise.reject(read)
  // One native call checks the keys itself, before it looks any up; else they are checked here.
  const once = native !== undefined && n <= NATIVE_KEYS
  if (!once) {
    const problem = keysProblem(keys, n)
    if (problem !== undefined) return Promise.reject(problem)
  }
  if (n === 0) return Promise.resolve([])
  const { keyOptions } = read
  // What getOrLoad checks before the addon does (after the key), for every key: the same error.
  if (native !== undefined && keyOptions?.signal !== undefined && !isAbortSignal(keyOptions.signal)) {
    return Promise.reject((once && keysProblem(keys, n)) || invalidOption(SIGNAL_PROBLEM))
  }
  let promises
  let batch
  let calling = true
  const load = (context) => {
    batch ??= new Batch(loader, read.maxBatchSize, keys, promises, calling)
    return batch.enrol(context)
  }
  // A batch loader sees no held value, and its keys must enrol in the turn
  // they are called (lib/leader.js `Flight.call`).
  load[SEES_NO_HELD_VALUE] = true
  let fulfilled = false
  try {
    if (once) {
      const answered = callNative(native, load, keyOptions, keys)
      // The addon refused a key, before it looked any up: the call rejects
      // with keyProblem's words for it (or, were their rules to drift apart,
      // the addon's).
      if (answered instanceof Error) return Promise.reject(keysProblem(keys, n) ?? answered)
      promises = answered
      fulfilled = native.outcome[1] === 1 && keyOptions?.signal === undefined
    } else {
      promises = new Array(n)
      if (native === undefined) eachKey(cache, keys, 0, n, load, keyOptions, promises)
      else callNativeParts(native, cache, keys, n, load, keyOptions, promises)
    }
  } finally {
    calling = false
    if (batch !== undefined) {
      batch.calling = false
      batch.promises = promises
    }
  }
  batch?.flush()
  // A warm call's promises are all fulfilled. Else Promise.all answers the
  // common case at its speed; after a failure, every key is waited for, so
  // the error is the first failed key's, in order.
  if (fulfilled) return Promise.all(promises)
  return Promise.all(promises).catch(() => Promise.allSettled(promises).then(answer))
}

/** The values in order, or the first failed key's error (every key has settled). */
function answer(results) {
  const values = new Array(results.length)
  for (let i = 0; i < results.length; i++) {
    const result = results[i]
    if (result.status === 'rejected') throw result.reason
    values[i] = result.value
  }
  return values
}

module.exports = { getOrLoadMany, DEFAULT_MAX_BATCH_SIZE }
