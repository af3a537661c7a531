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
// With `fleetMaxConcurrentLoads` a loader also needs one of the fleet's
// slots (src/engine/slots.rs keeps them in Redis): every load queues here
// until the addon grants it one, in queue order, and gives it back when
// its loader settles (so a freed slot goes to the instance first in the
// fleet's queue, which may be this one). The addon is told, in one call,
// the slots given back and how many of the queued loads a slot would start
// now (`loadSlots`), and answers through one promise at a time
// (`nextLoadSlots`); when Redis cannot be asked it says so (FAILED_OPEN), and the
// loads queued then run under the per-process cap alone (counted in
// `fleetCapBypassed`).

const { herdError, describeKey } = require('./errors')
const { codes, LIMITS } = require('./names')

/** @typedef {import('./native-contract').Context} Context */

/** What `nextLoadSlots` answers when Redis could not be asked for fleet slots (engine/slots.rs `FAILED_OPEN`). */
const FAILED_OPEN = LIMITS.failedOpen

class Bulkhead {
  /**
   * @param {Context} ctx
   * @param {number} maxConcurrent loaders running at once, >= 1
   * @param {number} maxQueued loads waiting at once past what could start now, >= 0
   * @param {boolean} fleet a loader needs a slot of `fleetMaxConcurrentLoads` too
   */
  constructor(ctx, maxConcurrent, maxQueued, fleet) {
    this.ctx = ctx
    this.maxConcurrent = maxConcurrent
    this.maxQueued = maxQueued
    this.fleet = fleet
    /** Slots in use: loaders called and not settled. */
    this.running = 0
    /** The queued flights; a Set's insertion order is FIFO, and a given-up flight leaves in O(1). */
    this.queue = new Set()
    /** Background refreshes among the queued, so a cold load knows whether it can take a place. */
    this.queuedRefreshes = 0
    /** Wait time not yet reported (the addon counts whole ms; the fractions add up here). */
    this.unreportedWaitMs = 0
    /** With the fleet cap: queued flights that need a fleet slot (not let off it: `flight.uncapped`). */
    this.capped = 0
    /** Fleet slots granted and not yet given to a load. */
    this.spare = 0
    /** What the addon was last told the queue wants (`loadSlots`), less the grants since. */
    this.wanted = 0
    /** Fleet slots given back and not yet told to the addon. */
    this.released = 0
    /** A `nextLoadSlots` promise is pending; `wants` counts the changes of `wanted` told meanwhile. */
    this.asking = false
    this.wants = 0
    /** Loads started without a fleet slot (Redis could not be asked), not yet reported. */
    this.unreportedBypassed = 0
    this.onGrant = (granted) => this.granted(granted)
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
    if (!this.fleet && this.running < this.maxConcurrent && this.queue.size === 0) {
      this.running++
      flight.slot = true
      this.report(0, 0, 0)
      return true
    }
    // The bound counts the loads past those a slot could start now (with
    // the fleet cap, every load waits here for its fleet slot).
    const waiting = this.queue.size - (this.maxConcurrent - this.running)
    if (waiting >= this.maxQueued && !(flight.background === false && this.makeRoom())) {
      this.refuse(flight)
      return false
    }
    flight.queued = now
    this.queue.add(flight)
    if (flight.background) this.queuedRefreshes++
    if (this.fleet) {
      this.capped++
      this.tellFleet()
    }
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
    if (flight.fleetSlot) {
      flight.fleetSlot = false
      this.released++
    }
    this.drain()
  }

  /** A queued flight was given up (hardTimeout, close()): it leaves the queue without a slot. */
  leave(flight) {
    if (!this.queue.delete(flight)) return
    this.dequeued(flight, performance.now())
    if (this.fleet) this.tellFleet()
    this.report(0, 0, 0)
  }

  drain() {
    while (this.running < this.maxConcurrent && this.queue.size > 0) {
      const [flight] = this.queue
      // In queue order: the head waits for its fleet slot, and so do the others.
      if (this.fleet && !flight.uncapped && this.spare === 0) break
      this.queue.delete(flight)
      const now = performance.now()
      this.dequeued(flight, now)
      // The timer that gives loads up at hardTimeout may run late: a load
      // whose deadline passed while it waited is given up, and never runs.
      if (now >= flight.deadline) {
        flight.expire()
        continue
      }
      if (flight.uncapped) this.unreportedBypassed++
      else if (this.fleet) {
        this.spare--
        flight.fleetSlot = true
      }
      this.running++
      flight.slot = true
      flight.call(now)
    }
    if (this.fleet) {
      // Granted to loads that left meanwhile, or past the local cap: given back.
      this.released += this.spare
      this.spare = 0
      this.tellFleet()
    }
    this.report(0, 0, 0)
  }

  dequeued(flight, now) {
    this.unreportedWaitMs += now - flight.queued
    flight.queued = undefined
    if (flight.background) this.queuedRefreshes--
    if (this.fleet && !flight.uncapped) this.capped--
  }

  /**
   * Tells the addon the fleet slots given back and how many the queue wants
   * now (as many as the queued loads that a slot would start), in one call,
   * and waits for its grants.
   */
  tellFleet() {
    const wanted = Math.max(0, Math.min(this.capped, this.maxConcurrent - this.running) - this.spare)
    if (wanted !== this.wanted || this.released > 0) {
      if (wanted !== this.wanted) this.wants++
      this.wanted = wanted
      const released = this.released
      this.released = 0
      this.ctx.loadSlots(released, wanted)
    }
    if (wanted > 0 && !this.asking) {
      this.asking = true
      this.wants = 0
      this.ctx.nextLoadSlots().then(this.onGrant)
    }
  }

  /** The addon answered `nextLoadSlots`: slots granted, FAILED_OPEN, or 0 (nothing was wanted any more). */
  granted(granted) {
    this.asking = false
    if (granted > 0) {
      this.wanted = Math.max(0, this.wanted - granted)
      this.spare += granted
      this.drain()
    } else if (granted === FAILED_OPEN) {
      // Redis could not be asked: what is queued now runs under the
      // per-process cap alone; loads queued later ask again.
      this.wanted = 0
      for (const flight of this.queue) flight.uncapped = true
      this.capped = 0
      this.drain()
    } else if (this.wants > 0) {
      // The demand fell to 0 and rose again while the answer came: ask anew.
      this.tellFleet()
    }
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
    if (this.fleet) this.tellFleet()
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
    const bypassed = this.unreportedBypassed
    this.unreportedBypassed = 0
    this.ctx.recordLoadQueue(queued, waited, rejected, skipped, bypassed, this.running, this.queue.size)
  }
}

/**
 * The bulkhead of a cache whose `maxConcurrentLoads` (or
 * `fleetMaxConcurrentLoads`) is set (`install` wrote the validated options
 * onto `ctx`), else undefined: no cap.
 *
 * @param {Context} ctx
 */
function bulkheadOf(ctx) {
  if (ctx.maxConcurrentLoads === 0) return undefined
  return new Bulkhead(ctx, ctx.maxConcurrentLoads, ctx.maxQueuedLoads, ctx.fleetMaxConcurrentLoads > 0)
}

module.exports = { bulkheadOf }
