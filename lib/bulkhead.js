'use strict'

// The load bulkhead (`maxConcurrentLoads`, `maxQueuedLoads`): at most that
// many loaders of distinct keys run at once in this process; the loads past
// it wait in one FIFO queue, bounded. Coalescing already makes one load per
// key, so this caps the loads of a cold start of many keys (a deploy, a
// flushed Redis), which would otherwise all reach the database at once.
//
// It is touched only where a loader is about to be called (lib/leader.js
// `Flight.run`): a hit, a join or a stale read never reach it, and without
// `maxConcurrentLoads` there is no bulkhead at all. A background refresh
// needs a slot too (it loads from the same database) but nobody waits for
// it: when the queue is full it is skipped (counted in `refreshesSkipped`),
// and a cold load that finds the queue full takes the place of the newest
// queued refresh before it is refused, since its callers have no value.
//
// With Redis the flight reaches the bulkhead only once the fleet decided
// that this instance loads: the fleet lock is then held while the load is
// queued, and the addon extends its lease from the moment it was won until
// the flight ends (engine/fleet.rs `keep_lease`), so the queue wait is
// covered and no other instance loads the key meanwhile. The queue wait
// counts in the flight's `hardTimeout`, which runs from the call.
//
// A later fleet-wide cap can wrap `acquire`/`release`: a local slot first,
// then the fleet's, before `flight.call`.

const { herdError, describeKey } = require('./errors')
const { codes } = require('./names')

/** @typedef {import('./native-contract').Context} Context */

class Bulkhead {
  /**
   * @param {Context} ctx
   * @param {number} maxConcurrent loaders running at once, >= 1
   * @param {number} maxQueued loads waiting at once, >= 0
   */
  constructor(ctx, maxConcurrent, maxQueued) {
    this.ctx = ctx
    this.maxConcurrent = maxConcurrent
    this.maxQueued = maxQueued
    /** Slots in use: loaders called and not settled. */
    this.running = 0
    /** The queued flights; a Set's insertion order is FIFO, and a given-up flight leaves in O(1). */
    this.queue = new Set()
    /** Background refreshes among the queued, so a cold load knows whether it can take a place. */
    this.queuedRefreshes = 0
    /** Wait time not yet reported (the addon counts whole ms; the fractions add up here). */
    this.unreportedWaitMs = 0
  }

  /**
   * A slot for `flight`, whose loader is about to run: true if it has one
   * now (the caller calls the loader). Otherwise it waits in the queue, and
   * `flight.call` runs when a slot frees, or it is refused or skipped here.
   *
   * @param {object} flight a lib/leader.js Flight
   * @param {number} now performance.now()
   */
  acquire(flight, now) {
    if (this.running < this.maxConcurrent && this.queue.size === 0) {
      this.running++
      flight.slot = true
      this.report(0, 0, 0)
      return true
    }
    if (this.queue.size >= this.maxQueued && !(flight.background === false && this.makeRoom())) {
      this.refuse(flight)
      return false
    }
    flight.queued = now
    this.queue.add(flight)
    if (flight.background) this.queuedRefreshes++
    this.report(1, 0, 0)
    return false
  }

  /**
   * Frees `flight`'s slot (its loader settled: a load given up at
   * hardTimeout whose loader goes on still holds it) and starts the next
   * queued loads.
   */
  release(flight) {
    flight.slot = false
    this.running--
    this.drain()
  }

  /** A queued flight was given up (hardTimeout, close()): it leaves the queue without a slot. */
  leave(flight) {
    if (!this.queue.delete(flight)) return
    this.dequeued(flight, performance.now())
    this.report(0, 0, 0)
  }

  drain() {
    while (this.running < this.maxConcurrent && this.queue.size > 0) {
      const [flight] = this.queue
      this.queue.delete(flight)
      const now = performance.now()
      this.dequeued(flight, now)
      // The timer that gives loads up at hardTimeout may run late: a load
      // whose deadline passed while it waited is given up, and never runs.
      if (now >= flight.deadline) {
        flight.expire()
        continue
      }
      this.running++
      flight.slot = true
      flight.call(now)
    }
    this.report(0, 0, 0)
  }

  dequeued(flight, now) {
    this.unreportedWaitMs += now - flight.queued
    flight.queued = undefined
    if (flight.background) this.queuedRefreshes--
  }

  /**
   * Skips the newest queued background refresh, if there is one, so a cold
   * load can queue in its place; true if one was skipped.
   */
  makeRoom() {
    if (this.queuedRefreshes === 0) return false
    let newest
    for (const queued of this.queue) if (queued.background) newest = queued
    this.queue.delete(newest)
    this.dequeued(newest, performance.now())
    this.refuse(newest)
    return true
  }

  /** No place in the queue: a cold load's callers reject with a coded error, a refresh is skipped. */
  refuse(flight) {
    const { maxConcurrent, maxQueued } = this
    const error = herdError(
      Error,
      codes.LOAD_QUEUE_FULL,
      `the load of key ${describeKey(flight.userKey)} was refused: ${maxConcurrent} loads run and ${maxQueued} wait ` +
        'for a slot already (maxConcurrentLoads, maxQueuedLoads); try again later, or raise maxQueuedLoads',
    )
    if (flight.background) this.report(0, 0, 1)
    else this.report(0, 1, 0)
    flight.refuse(error)
  }

  /** Tells the addon what changed, for stats() and metrics(). */
  report(queued, rejected, skipped) {
    const waited = Math.floor(this.unreportedWaitMs)
    this.unreportedWaitMs -= waited
    this.ctx.recordLoadQueue(queued, waited, rejected, skipped, this.running, this.queue.size)
  }
}

/**
 * The bulkhead of a cache whose `maxConcurrentLoads` is set (`install`
 * wrote the validated options onto `ctx`), else undefined: no cap.
 *
 * @param {Context} ctx
 */
function bulkheadOf(ctx) {
  return ctx.maxConcurrentLoads > 0 ? new Bulkhead(ctx, ctx.maxConcurrentLoads, ctx.maxQueuedLoads) : undefined
}

module.exports = { bulkheadOf }
