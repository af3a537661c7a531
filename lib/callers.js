'use strict'

// What one caller of a shared flight sees: its own abort signal, and the
// soft wait of a stale read.

const noop = () => {}

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
 * time, else (or if it fails) by the stale value. Called by the addon.
 *
 * @param {import('./native-contract').Context} ctx
 * @param {Promise<unknown>} flight the refresh's shared promise
 * @param {unknown} stale
 */
function softWait(ctx, flight, stale) {
  return new Promise((resolve) => {
    let done = false
    const answer = (servedStale, value) => {
      if (done) return
      done = true
      clearTimeout(timer)
      ctx.recordSoftWait(servedStale)
      resolve(servedStale ? stale : value)
    }
    const timer = setTimeout(answer, ctx.softTimeout, true)
    flight.then(
      (value) => answer(false, value),
      () => answer(true),
    )
  })
}

module.exports = { detach, softWait }
