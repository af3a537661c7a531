'use strict'

// What one caller of a shared flight sees: its own abort signal, and the
// soft wait of a stale read.

const { OUTCOME, STATUS } = require('./names')

const noop = () => {}

/** What a call whose `signal` option fails `isAbortSignal` is told. */
const SIGNAL_PROBLEM = 'call option `signal` must be an AbortSignal'

/** Whether `signal` can be a call's `signal` option: an AbortSignal, or what looks like one. */
function isAbortSignal(signal) {
  return (
    typeof signal === 'object' &&
    signal !== null &&
    typeof signal.aborted === 'boolean' &&
    typeof signal.addEventListener === 'function'
  )
}

/**
 * One caller's view of a shared promise: it rejects with the signal's reason
 * when the signal aborts; the shared load goes on for everybody else.
 *
 * @param {Promise<unknown>} promise
 * @param {AbortSignal} signal
 */
function detach(promise, signal) {
  if (signal.aborted) {
    // Nobody else may be listening to this caller's view of the flight.
    promise.then(undefined, noop)
    return Promise.reject(signal.reason)
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (error) => {
        signal.removeEventListener('abort', onAbort)
        reject(error)
      },
    )
  })
}

/**
 * A stale read with `softTimeout`: answered by the refresh if it lands in
 * time, else (or if it fails) by the stale value. Called by the addon; the
 * caller's `status` (an object, or undefined) is told which, and why.
 *
 * @param {import('./native-contract').Context} ctx
 * @param {Promise<unknown>} flight the refresh's shared promise
 * @param {unknown} stale
 * @param {{ outcome?: string, stale?: string } | undefined} status
 */
function softWait(ctx, flight, stale, status) {
  return new Promise((resolve) => {
    let done = false
    const answer = (servedStale, value, reason) => {
      if (done) return
      done = true
      clearTimeout(timer)
      ctx.recordSoftWait(servedStale)
      if (status !== undefined) {
        if (servedStale) status.stale = reason
        else {
          status.outcome = OUTCOME.hit
          status.stale = undefined
        }
      }
      resolve(servedStale ? stale : value)
    }
    const timer = setTimeout(answer, ctx.softTimeout, true, undefined, STATUS.stale.timeout)
    flight.then(
      (value) => answer(false, value),
      () => answer(true, undefined, STATUS.stale.error),
    )
  })
}

module.exports = { detach, softWait, isAbortSignal, SIGNAL_PROBLEM }
