'use strict'

// The batch window of getOrLoadMany (lib/many.js): when the keys getOrLoad
// asked one call to load go to its loader, in loader calls of at most
// `maxBatchSize` keys.
//
// When a batch goes to the loader: the keys whose loaders getOrLoad called
// while the call made its getOrLoad calls (without Redis: every cold key)
// go at once, when the last call was made. A key enrolled later (with Redis,
// once the fleet lock was won; with `maxConcurrentLoads`, once a slot freed)
// goes when every key of the call is decided (answered, or enrolled), or
// BATCH_WINDOW_MS after the last key enrolled (BATCH_MAX_WAIT_MS after the
// first at most), so a key that waits for another instance's fill delays
// the others by that much at most. A background
// refresh enrolling after the call was answered goes at the next
// `setImmediate`, with the refreshes that enrolled in the same turn.

const { alignResults } = require('./batch-result')
const { BatchContext } = require('./batch-context')
const { keyId } = require('./keys')

/**
 * How long, in ms, keys enrolled after the call's getOrLoad calls were made
 * wait for the call's other keys to be decided (answered, or enrolled)
 * before they go to the loader without them, counted from the last key
 * that enrolled: with Redis the locks asked in one turn are answered in
 * one callback (the addon's `engine::together`), but a key first read in a
 * later turn, or one whose ask took past the addon's 20 ms, answers on its
 * own; a key whose lock another instance holds stays undecided until its
 * fill. BATCH_MAX_WAIT_MS bounds the wait from the
 * first. When the window ends, the batch goes at the next `setImmediate`,
 * after the answers the loop already has: a host that paused the process
 * finds them all in, not only the timer.
 */
const BATCH_WINDOW_MS = 5
const BATCH_MAX_WAIT_MS = 50

const NOWHERE = Object.freeze([])

/**
 * The keys of one getOrLoadMany call that getOrLoad asked it to load, gathered into loader calls. Made at the
 * first such key: a warm call makes none.
 */
class Batch {
  /**
   * @param {Function} loader
   * @param {number} maxBatchSize
   * @param {unknown[]} keys the call's keys, as given to getOrLoad
   * @param {Array<Promise<unknown>> | undefined} promises the call's getOrLoad promises, by index (undefined
   *   while it makes its getOrLoad calls)
   * @param {boolean} calling whether the call is still making its getOrLoad calls
   */
  constructor(loader, maxBatchSize, keys, promises, calling) {
    this.loader = loader
    this.maxBatchSize = maxBatchSize
    this.keys = keys
    /** @type {Array<{ key: unknown, context: object, resolve: Function, reject: Function }>} */
    this.pending = []
    /** The call is making its getOrLoad calls: what enrols now goes when they are made. */
    this.calling = calling
    /** Keys (by index) neither answered nor enrolled: while there are some, a flush may wait for them. */
    this.open = keys.length
    this.decided = new Uint8Array(keys.length)
    /** Index lists by keyId, made at the first enrolment. */
    this.indices = undefined
    /** The call's getOrLoad promises, by index. */
    this.promises = promises
    /** Whether each key's settling is watched (from the first enrolment after the calls were made). */
    this.watching = false
    this.timer = undefined
    this.immediate = false
    /** `performance.now()` the first key enrolled after the calls were made, for BATCH_MAX_WAIT_MS. */
    this.firstEnrolled = undefined
    this.flushLater = () => this.flush()
    this.windowEnded = () => {
      this.timer = setImmediate(this.flushLater)
      this.immediate = true
    }
  }

  /** Key `i` was answered or enrolled; true if that is news. */
  decide(i) {
    if (this.decided[i] === 1) return false
    this.decided[i] = 1
    this.open--
    return true
  }

  /**
   * From the first key enrolled after the calls were made: a key answered
   * from then on may be the last one the enrolled keys wait for. (Before,
   * no key is watched: a warm call pays nothing for it.)
   */
  watch() {
    this.watching = true
    this.promises.forEach((promise, i) => {
      if (this.decided[i] === 1) return
      const done = () => this.settled(i)
      promise.then(done, done)
    })
  }

  /** Key `i`'s getOrLoad settled: the last undecided key lets the waiting batch go. */
  settled(i) {
    if (this.decide(i) && this.open === 0 && !this.calling && this.pending.length > 0) this.flush()
  }

  /** The loader getOrLoad calls for a key this process loads: its value comes from the next loader call. */
  enrol(context) {
    return new Promise((resolve, reject) => {
      const { key } = context
      if (this.indices === undefined) {
        this.indices = new Map()
        this.keys.forEach((k, i) => {
          const id = keyId(k)
          const list = this.indices.get(id)
          if (list === undefined) this.indices.set(id, [i])
          else list.push(i)
        })
      }
      const at = this.indices.get(keyId(key)) ?? NOWHERE
      this.pending.push({ key, context, resolve, reject, order: at.length > 0 ? at[0] : Number.MAX_SAFE_INTEGER })
      let news = false
      for (const i of at) news = this.decide(i) || news
      if (this.calling) return // flushed when the calls are made
      if (!this.watching) this.watch()
      if (news && this.open === 0) this.flush()
      else if (news) this.wait()
      else if (this.timer === undefined) {
        // A background refresh after the call was answered: what enrols in this turn goes together.
        this.timer = setImmediate(this.flushLater)
        this.immediate = true
      }
    })
  }

  /** A key of the call enrolled: the batch goes BATCH_WINDOW_MS from now, or BATCH_MAX_WAIT_MS after the first. */
  wait() {
    if (this.immediate) return // it goes in this turn anyway
    const now = performance.now()
    this.firstEnrolled ??= now
    if (this.timer !== undefined) clearTimeout(this.timer)
    const at = Math.min(now + BATCH_WINDOW_MS, this.firstEnrolled + BATCH_MAX_WAIT_MS)
    this.timer = setTimeout(this.windowEnded, Math.max(0, at - now))
  }

  flush() {
    if (this.timer !== undefined) {
      if (this.immediate) clearImmediate(this.timer)
      else clearTimeout(this.timer)
      this.timer = undefined
    }
    this.immediate = false
    this.firstEnrolled = undefined
    const { pending, maxBatchSize } = this
    if (pending.length === 0) return
    this.pending = []
    // In the order of the call's keys, whatever order the fleet answered them in.
    pending.sort((a, b) => a.order - b.order)
    for (let i = 0; i < pending.length; i += maxBatchSize) this.run(pending.slice(i, i + maxBatchSize))
  }

  run(entries) {
    // A key given up before its batch went (close(), hardTimeout) is not loaded.
    const live = entries.filter(({ context, reject }) => {
      const { signal } = context
      if (signal.aborted) reject(signal.reason)
      return !signal.aborted
    })
    if (live.length === 0) return
    const keys = live.map((entry) => entry.key)
    let result
    try {
      result = this.loader(keys, new BatchContext(live))
    } catch (error) {
      result = Promise.reject(error)
    }
    Promise.resolve(result).then(
      (value) => {
        let values
        try {
          values = alignResults(keys, value)
        } catch (error) {
          for (const entry of live) entry.reject(error)
          return
        }
        for (let i = 0; i < live.length; i++) {
          const v = values[i]
          if (v instanceof Error) live[i].reject(v)
          else live[i].resolve(v)
        }
      },
      (error) => {
        for (const entry of live) entry.reject(error)
      },
    )
  }
}

module.exports = { Batch }
