'use strict'

// A namespace: a view of a Cache whose keys all start with one more part,
// its name. It holds no state of its own beyond its names and defaults: the
// parent's memory, Redis connection, flights and counters serve it, so a
// view is as cheap to make as an object (README, "Namespaces").

const { herdError, unreadable } = require('./errors')
const { codes, ENTRY_CALL_OPTIONS } = require('./names')
const { alignResults } = require('./batch-result')
const { keyId, escapePart } = require('./keys')

/** The call options a view's `defaults` may set (a `signal` or `status` belongs to one call). */
const DEFAULT_TYPES = new Map(Object.entries(ENTRY_CALL_OPTIONS))
const GET_DEFAULTS = ['stale']
const SET_DEFAULTS = ['ttl', 'hardTtl']

/**
 * A name is one part of every key of the view (escaped by lib/keys.js
 * `escapePart`), and a string key's rules are its own: non-empty, no lone
 * surrogate. (Its length is the keys' own: the addon checks it.)
 */
function checkName(name) {
  if (typeof name !== 'string' || name === '') {
    throw herdError(
      TypeError,
      codes.INVALID_KEY,
      `a namespace name must be a non-empty string, e.g. cache.namespace('users'); got ${name === '' ? 'an empty string' : name === null ? 'null' : typeof name}`,
    )
  }
  if (!name.isWellFormed()) {
    throw herdError(
      TypeError,
      codes.INVALID_KEY,
      'the namespace name holds a lone surrogate (half of a character cut by .slice()); name.toWellFormed() mends it',
    )
  }
}

/** `defaults` checked, merged over the parent view's (both frozen), without undefined entries. */
function mergeDefaults(inherited, defaults) {
  if (defaults === undefined) return inherited
  if (typeof defaults !== 'object' || defaults === null || Array.isArray(defaults)) {
    throw herdError(
      TypeError,
      codes.INVALID_OPTION,
      `the namespace defaults must be an object, e.g. cache.namespace('users', { ttl: 60_000 }); got ${defaults === null ? 'null' : Array.isArray(defaults) ? 'an array' : typeof defaults}`,
    )
  }
  const merged = { ...inherited }
  for (const name of Object.keys(defaults)) {
    const type = DEFAULT_TYPES.get(name)
    if (type === undefined) {
      throw herdError(
        TypeError,
        codes.INVALID_OPTION,
        `unknown namespace default \`${name}\`; known: ${[...DEFAULT_TYPES.keys()].join(', ')} (signal and status belong to one call)`,
      )
    }
    const value = defaults[name]
    if (value === undefined) continue
    if (typeof value !== type) {
      throw herdError(
        TypeError,
        codes.INVALID_OPTION,
        `namespace default \`${name}\` must be a ${type}; got ${typeof value}`,
      )
    }
    merged[name] = value
  }
  return Object.freeze(merged)
}

/** The entries of `defaults` a method takes, frozen, or undefined when there are none. */
function pick(defaults, names) {
  const picked = {}
  let any = false
  for (const name of names) {
    if (defaults[name] !== undefined) {
      picked[name] = defaults[name]
      any = true
    }
  }
  return any ? Object.freeze(picked) : undefined
}

/** A call's options over the view's defaults: the defaults object itself when the call passes none. */
function withDefaults(options, defaults) {
  if (defaults === undefined || (options !== undefined && (typeof options !== 'object' || options === null))) {
    return options // none to add, or not an object: the parent rejects it as it would
  }
  return options === undefined ? defaults : { ...defaults, ...options }
}

/** What a view's loader gets: the parent's context, with `key` as the caller gave it to the view. */
class NamespaceLoaderContext {
  #context

  constructor(context, key) {
    this.key = key
    this.#context = context
  }

  get signal() {
    return this.#context.signal
  }

  setTtl(ttl, hardTtl) {
    this.#context.setTtl(ttl, hardTtl)
  }

  noStore() {
    this.#context.noStore()
  }
}

/** What a view's batch loader gets: the parent's, taking the keys as given to the view. */
class NamespaceBatchContext {
  #context
  #toParent

  constructor(context, toParent) {
    this.#context = context
    this.#toParent = toParent
  }

  get signal() {
    return this.#context.signal
  }

  setTtl(key, ttl, hardTtl) {
    this.#context.setTtl(this.#toParent(key), ttl, hardTtl)
  }

  noStore(key) {
    this.#context.noStore(this.#toParent(key))
  }
}

/** A view of a Cache under a prefix of key parts; made by `cache.namespace(name, defaults?)`. */
class Namespace {
  #cache
  #names
  #prefix
  #defaults
  #loadDefaults
  #getDefaults
  #setDefaults
  #clear

  /**
   * @param {import('../index').Cache} cache the root cache, whose calls the view makes
   * @param {string[]} names this view's names, outermost first
   * @param {Readonly<Record<string, unknown>>} defaults merged and checked
   * @param {(names: string[], namespace: string) => Promise<void>} clear the root's namespace clear
   */
  constructor(cache, names, defaults, clear) {
    this.#cache = cache
    this.#names = names
    this.#prefix = `${names.map(escapePart).join(':')}:`
    this.#defaults = defaults
    this.#loadDefaults = Object.keys(defaults).length === 0 ? undefined : defaults
    this.#getDefaults = pick(defaults, GET_DEFAULTS)
    this.#setDefaults = pick(defaults, SET_DEFAULTS)
    this.#clear = clear
  }

  /** The Cache this view belongs to: its `stats()`, `metrics()`, `ready()` and `close()` are the view's too. */
  get cache() {
    return this.#cache
  }

  /** The encoded prefix of this view's keys in the parent cache, e.g. `'users:'` (`'users:eu:'` nested). */
  get prefix() {
    return this.#prefix
  }

  /** The parent's key for `key`; what is not a key the parent rejects as it would. */
  #key(key) {
    if (typeof key === 'string') return key === '' ? key : this.#prefix + key
    try {
      if (Array.isArray(key) && key.length > 0) return [...this.#names, ...key]
    } catch (cause) {
      throw unreadable(codes.INVALID_KEY, 'the key', cause)
    }
    return key
  }

  /** `call(key)` with the parent's key for `key`; a key that cannot be read rejects, as the parent's call would. */
  #with(key, call) {
    let mapped
    try {
      mapped = this.#key(key)
    } catch (error) {
      return Promise.reject(error)
    }
    return call(mapped)
  }

  /** The cache's getOrLoad of the view's key; the loader's context has `key` as given here. */
  getOrLoad(key, loader, options) {
    const load = typeof loader === 'function' ? (context) => loader(new NamespaceLoaderContext(context, key)) : loader
    return this.#with(key, (mapped) => this.#cache.getOrLoad(mapped, load, withDefaults(options, this.#loadDefaults)))
  }

  /**
   * The cache's getOrLoadMany of the view's keys; the loader is given the
   * missing keys as given here, and its Map is looked up by them.
   */
  getOrLoadMany(keys, loader, options) {
    let isArray
    let mapped
    try {
      isArray = Array.isArray(keys)
      mapped = isArray ? keys.map((key) => this.#key(key)) : keys
    } catch (error) {
      return Promise.reject(
        error?.code === codes.INVALID_KEY ? error : unreadable(codes.INVALID_KEY, 'the keys', error),
      )
    }
    let load = loader
    if (typeof loader === 'function' && isArray) {
      let ours
      load = async (missing, context) => {
        ours ??= new Map(mapped.map((key, i) => [keyId(key), keys[i]]))
        const given = missing.map((key) => ours.get(keyId(key)))
        const result = await loader(given, new NamespaceBatchContext(context, (key) => this.#key(key)))
        return alignResults(given, result)
      }
    }
    return this.#cache.getOrLoadMany(mapped, load, withDefaults(options, this.#loadDefaults))
  }

  /** The cache's get of the view's key (`stale` from the defaults). */
  get(key, options) {
    return this.#with(key, (mapped) => this.#cache.get(mapped, withDefaults(options, this.#getDefaults)))
  }

  /** The cache's set of the view's key (`ttl`, `hardTtl` from the defaults). */
  set(key, value, options) {
    return this.#with(key, (mapped) => this.#cache.set(mapped, value, withDefaults(options, this.#setDefaults)))
  }

  /** The cache's delete of the view's key. */
  delete(key) {
    return this.#with(key, (mapped) => this.#cache.delete(mapped))
  }

  /** The cache's expire of the view's key. */
  expire(key) {
    return this.#with(key, (mapped) => this.#cache.expire(mapped))
  }

  /** The cache's deleteByTag: tags are the cache's, not a namespace's (every entry carrying one goes). */
  deleteByTag(tags) {
    return this.#cache.deleteByTag(tags)
  }

  /** Removes this namespace's entries (nested namespaces' too), here, in Redis and on every instance. */
  clear() {
    return this.#clear(this.#names, this.#prefix.slice(0, -1))
  }

  /** A namespace nested in this one; its defaults are merged over this view's. */
  namespace(name, defaults) {
    checkName(name)
    return new Namespace(this.#cache, [...this.#names, name], mergeDefaults(this.#defaults, defaults), this.#clear)
  }
}

const NO_DEFAULTS = Object.freeze({})

/**
 * `cache.namespace(name, defaults?)`: throws `ERR_HERDCACHE_INVALID_KEY` for a
 * name that is not a non-empty well-formed string, `ERR_HERDCACHE_INVALID_OPTION`
 * for bad defaults.
 */
function openNamespace(cache, name, defaults, clear) {
  checkName(name)
  return new Namespace(cache, [name], mergeDefaults(NO_DEFAULTS, defaults), clear)
}

module.exports = { Namespace, openNamespace }
