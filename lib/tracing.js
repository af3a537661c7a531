'use strict'

// Tracing through `node:diagnostics_channel` (README, "Tracing"): the
// channels, made once from the names lib/names.js declares, and what each
// message holds. Nobody subscribed costs one `hasSubscribers` check per
// publishing site; on getOrLoad's path that check is in index.js itself
// (bench/tracing.js measures it), the others are here.

const diagnostics_channel = require('node:diagnostics_channel')
const { channels } = require('./names')

const noop = () => {}

/** `tracingChannel('herdcache:getOrLoad')`: index.js checks its `hasSubscribers` on every call. */
const getOrLoadChannel = diagnostics_channel.tracingChannel(channels.getOrLoad)
const refreshChannel = diagnostics_channel.tracingChannel(channels.refresh)
const lockChannel = diagnostics_channel.channel(channels.lock)
const invalidateChannel = diagnostics_channel.channel(channels.invalidate)
const redisErrorChannel = diagnostics_channel.channel(channels.redisError)

/**
 * The events of `tracingChannel.tracePromise` (start and end around `run`,
 * then asyncStart and asyncEnd, after error on a rejection) for the promise
 * `run` returns, with `finish()` called before the first asynchronous one:
 * what the message holds at the end (the outcome another instance's value
 * set, whether the loader ran) is known only once the promise settles, and
 * tracePromise would publish before anything could fill it in. A
 * synchronous throw becomes a rejection, as getOrLoad never throws.
 *
 * @template T
 * @param {import('node:diagnostics_channel').TracingChannel<object>} channel
 * @param {{ result?: unknown, error?: unknown }} message
 * @param {() => Promise<T>} run
 * @param {() => void} finish
 * @returns {Promise<T>}
 */
function trace(channel, message, run, finish) {
  return channel.start.runStores(message, () => {
    let promise
    try {
      promise = run()
    } catch (error) {
      promise = Promise.reject(error)
    }
    channel.end.publish(message)
    return promise.then(
      (result) => {
        finish()
        message.result = result
        channel.asyncStart.publish(message)
        channel.asyncEnd.publish(message)
        return result
      },
      (error) => {
        finish()
        message.error = error
        channel.error.publish(message)
        channel.asyncStart.publish(message)
        channel.asyncEnd.publish(message)
        throw error
      },
    )
  })
}

/**
 * One traced getOrLoad call: its message (`{ cache, key, outcome, loaded }`,
 * then `result` or `error`) and what `loaded` is judged by. The loader the
 * addon gets notes that it ran; `loaded` is whether it ran for this call's
 * own load: a loader that a stale or early-refreshing call hands on runs in
 * a background refresh (`herdcache:refresh`), and a flight another
 * instance's value answered ran none.
 */
class LoadTrace {
  /**
   * @param {object} cache
   * @param {unknown} key
   * @param {unknown} loader the caller's (a non-function goes to the addon as it is, to be refused)
   */
  constructor(cache, key, loader) {
    this.message = { cache, key, outcome: undefined, loaded: false }
    /** @type {{ outcome?: string } | undefined} the status object the addon may update later */
    this.status = undefined
    this.ran = false
    this.loader =
      typeof loader === 'function'
        ? (context) => {
            this.ran = true
            return loader(context)
          }
        : loader
  }

  /**
   * Right after the native call: how it was answered, and the status object
   * it was given (with Redis, the addon sets its `outcome` when another
   * instance's value answers the flight).
   *
   * @param {string | undefined} outcome
   * @param {{ outcome?: string }} status
   */
  answered(outcome, status) {
    this.message.outcome = outcome
    this.status = status
  }

  finish() {
    const { message } = this
    if (message.outcome !== undefined) message.outcome = this.status.outcome ?? message.outcome
    message.loaded = this.ran && message.outcome === 'miss'
  }
}

/**
 * Traces one getOrLoad call: `run(loader)` makes it with the loader the
 * trace watches, calls `answered` right after the native call, and returns
 * the caller's promise.
 *
 * @param {LoadTrace} call
 * @param {() => Promise<unknown>} run
 */
function traceGetOrLoad(call, run) {
  return trace(getOrLoadChannel, call.message, run, () => call.finish())
}

/**
 * What these functions read of lib/leader.js's Flight.
 *
 * @typedef {object} TracedFlight
 * @property {{ cache: WeakRef<object> }} ctx
 * @property {unknown} userKey
 * @property {boolean} background
 * @property {Promise<unknown>} promise
 * @property {number} started `performance.now()` when the flight started
 * @property {number | undefined} loaderStarted set when its loader runs
 */

/**
 * A background refresh (stale-while-revalidate or XFetch) was led: traced
 * from `begin(flight, waiting, since)` (which runs its loader, or with Redis
 * asks the fleet first) until its promise settles. The leader's arguments
 * are passed through, so an untraced refresh makes no closure.
 *
 * @param {TracedFlight} flight
 * @param {(flight: TracedFlight, waiting: boolean, since: number) => void} begin
 * @param {boolean} waiting
 * @param {number} since
 * @returns {boolean} whether it was traced (else `begin` was not called)
 */
function traceRefresh(flight, begin, waiting, since) {
  if (!refreshChannel.hasSubscribers) return false
  const message = { cache: flight.ctx.cache.deref(), key: flight.userKey, loaded: false }
  const run = () => {
    begin(flight, waiting, since)
    return flight.promise
  }
  const finish = () => (message.loaded = flight.loaderStarted !== undefined)
  // Nobody else may listen to the refresh's rejection.
  trace(refreshChannel, message, run, finish).then(undefined, noop)
  return true
}

/**
 * With Redis, the fleet decided for a flight that asked it: `load`, this
 * instance runs the loader (it won the fleet lock, or asking Redis failed
 * and it loads without one: JavaScript is not told which); else it runs
 * none (another instance's value answered it, or its key backs off).
 *
 * @param {TracedFlight} flight
 * @param {boolean} load
 */
function fleetDecided(flight, load) {
  if (!lockChannel.hasSubscribers) return
  lockChannel.publish({
    cache: flight.ctx.cache.deref(),
    key: flight.userKey,
    background: flight.background,
    load,
    waitedMs: performance.now() - flight.started,
  })
}

/**
 * A `set`, `delete`, `expire`, `deleteByTag` or `clear` call of this
 * instance was accepted.
 *
 * @param {object} cache
 * @param {'set' | 'delete' | 'expire' | 'deleteByTag' | 'clear'} op
 * @param {unknown} [key] none for a clear or a deleteByTag
 * @param {{ tags: string[] } | { namespace: string }} [detail] a deleteByTag's tags; a namespace's clear: its
 *   encoded names (`users`, `users:eu`)
 */
function invalidated(cache, op, key, detail) {
  if (!invalidateChannel.hasSubscribers) return
  invalidateChannel.publish(detail === undefined ? { cache, op, key } : { cache, op, key, ...detail })
}

/**
 * What the cache reports about Redis (to `onError`, or as a warning): a
 * problem no retry fixes, or what `close()` could not deliver.
 *
 * @param {object | undefined} cache
 * @param {Error & { code: string }} error
 */
function redisFailed(cache, error) {
  if (redisErrorChannel.hasSubscribers) redisErrorChannel.publish({ cache, code: error.code, error })
}

module.exports = {
  getOrLoadChannel,
  LoadTrace,
  traceGetOrLoad,
  traceRefresh,
  fleetDecided,
  invalidated,
  redisFailed,
}
