'use strict'

// The `ctx` a getOrLoadMany loader is given (README, "Many keys in one
// load"): one signal for the batch, and getOrLoad's `setTtl` and `noStore`
// for each of its keys, made of the keys' own loader contexts.

const { herdError, describeKey } = require('./errors')
const { codes } = require('./names')
const { keyId } = require('./keys')

/** What a batch loader gets: `{ signal, setTtl(key, ttl, hardTtl?), noStore(key) }`. */
class BatchContext {
  #entries
  #byId
  #controller

  /** @param {Array<{ key: unknown, context: import('./leader').LoaderContext }>} entries */
  constructor(entries) {
    this.#entries = entries
  }

  /**
   * Aborts once every key of the batch was given up: each key's load
   * passed `hardTimeout`, or the cache was closed. (One caller's `signal`
   * never aborts it: the loads go on for the others.)
   */
  get signal() {
    if (this.#controller === undefined) {
      const controller = new AbortController()
      this.#controller = controller
      let live = this.#entries.length
      let reason
      const onAbort = (event) => {
        reason = event?.target?.reason ?? reason
        if (--live === 0) controller.abort(reason)
      }
      for (const { context } of this.#entries) {
        const signal = context.signal
        if (signal.aborted) {
          reason = signal.reason
          onAbort()
        } else signal.addEventListener('abort', onAbort, { once: true })
      }
    }
    return this.#controller.signal
  }

  /** getOrLoad's `setTtl(ttl, hardTtl?)` for one key of the batch. */
  setTtl(key, ttl, hardTtl) {
    this.#entry(key, 'setTtl').context.setTtl(ttl, hardTtl)
  }

  /** getOrLoad's `noStore()` for one key of the batch: its callers get the value, nothing is stored. */
  noStore(key) {
    this.#entry(key, 'noStore').context.noStore()
  }

  #entry(key, method) {
    if (this.#byId === undefined) this.#byId = new Map(this.#entries.map((entry) => [keyId(entry.key), entry]))
    const entry = this.#byId.get(keyId(key))
    if (entry === undefined) {
      throw herdError(
        TypeError,
        codes.INVALID_KEY,
        `ctx.${method}() was given key ${describeKey(key)}, which is not one of the keys this loader call loads`,
      )
    }
    return entry
  }
}

module.exports = { BatchContext }
