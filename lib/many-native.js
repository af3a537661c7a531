'use strict'

// getOrLoadMany's native fast path: untraced, the addon makes the keys'
// getOrLoad calls, up to NATIVE_KEYS in one crossing (`callNative`), so a
// warm call makes no JavaScript call per key; more keys go in parts of
// NATIVE_KEYS (`callNativeParts`).

const { unreadable } = require('./errors')
const { codes, LIMITS } = require('./names')
const { detach } = require('./callers')

/**
 * What makes an untraced call's getOrLoad calls (index.js): the addon's `getOrLoadMany` and the outcome bytes it
 * writes (lib/native-contract.d.ts).
 *
 * @typedef {{ getOrLoadMany: Function, outcome: Uint8Array }} Native
 */

/** The most keys of one native call (src/binding/entry.rs `MANY_KEYS`, through `LIMITS`): they go as arguments. */
const NATIVE_KEYS = LIMITS.manyKeys

/** What the addon's getOrLoadMany answers with: its promises, as an array (made from arguments: cheaply). */
const collect = (...promises) => promises

/** A call's options when it has none. */
const NO_KEY_OPTIONS = Object.freeze({})

/**
 * The addon's getOrLoadMany of `keys` (at most NATIVE_KEYS): `getOrLoad(key, loader, o)` for each, in order, as
 * getOrLoad makes it (`o` checked here, but for what the addon checks). The promises, each detached from
 * `o.signal` as getOrLoad does; or, when the addon refused a key (which it does before it looks any up), its
 * ERR_HERDCACHE_INVALID_KEY error.
 *
 * @param {Native} native
 * @returns {Array<Promise<unknown>> | Error}
 */
function callNative(native, loader, o, keys) {
  const { stale, ttl, hardTtl, negativeTtl, beta, l1Ttl, tags } = o ?? NO_KEY_OPTIONS
  let promises
  try {
    promises = native.getOrLoadMany(collect, loader, stale, ttl, hardTtl, negativeTtl, beta, l1Ttl, tags, ...keys)
  } catch (error) {
    if (error?.code === codes.INVALID_KEY) return error
    // The addon throws only coded errors: this came from reading `keys` (an
    // element's getter, a Proxy's trap).
    if (typeof error?.code !== 'string') return unreadable(codes.INVALID_KEY, 'a key of getOrLoadMany()', error)
    throw error
  }
  const signal = o?.signal
  for (let i = 0; i < promises.length; i++) {
    // A key answered from memory comes as its value.
    const promise = Promise.resolve(promises[i])
    // As getOrLoad's `signal`: this call stops waiting, the loads go on.
    promises[i] = signal === undefined ? promise : detach(promise, signal)
  }
  return promises
}

/**
 * `cache.getOrLoad` for keys `from` to `to` (excluded), into `promises`: the calls the addon's getOrLoadMany
 * makes for its keys, made from JavaScript (traced, and where the addon refused a part).
 */
function eachKey(cache, keys, from, to, loader, options, promises) {
  for (let i = from; i < to; i++) promises[i] = cache.getOrLoad(keys[i], loader, options)
}

/**
 * The getOrLoad calls of the `n` keys of `keys` (over NATIVE_KEYS), NATIVE_KEYS to a native call, into `promises`.
 *
 * @param {Native} native
 */
function callNativeParts(native, cache, keys, n, loader, options, promises) {
  for (let start = 0; start < n; start += NATIVE_KEYS) {
    const end = Math.min(n, start + NATIVE_KEYS)
    // keyProblem checked these keys, their length too: were the addon to
    // refuse one all the same (its rules and keyProblem's drifted apart:
    // __test__/keys.test.js), each key of the part is answered by its own
    // getOrLoad call, the refused one with its error.
    const part = callNative(native, loader, options, keys.slice(start, end))
    if (part instanceof Error) eachKey(cache, keys, start, end, loader, options, promises)
    else for (let i = start; i < end; i++) promises[i] = part[i - start]
  }
}

module.exports = { NATIVE_KEYS, callNative, callNativeParts, eachKey }
