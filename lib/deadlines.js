'use strict'

// hardTimeout: one timer per cache, not one per load. Every load of a cache
// has the same timeout, so `ctx.active` (a Set: insertion order) is also
// deadline order, and the timer only ever waits for its first member.
//
// The timer is not cleared when the last load leaves (a clearTimeout and a
// setTimeout per load cost a third of a microsecond): it is unref'd, so an
// idle cache keeps no process alive, and it holds the context only through
// a WeakRef, so it keeps no dropped cache's memory reachable. When it fires
// with nothing in flight, it is not armed again.

/** @typedef {import('./native-contract').Context} Context */
/** @typedef {import('./native-contract').Flight} Flight */

/** @param {Context} ctx @param {Flight} flight */
function enter(ctx, flight) {
  ctx.active.add(flight)
  if (ctx.timer === undefined) arm(ctx, flight.deadline)
  else if (ctx.idle) {
    ctx.idle = false
    ctx.timer.ref()
  }
}

/** @param {Context} ctx @param {Flight} flight */
function leave(ctx, flight) {
  ctx.active.delete(flight)
  if (ctx.active.size === 0 && ctx.timer !== undefined && !ctx.idle) {
    ctx.idle = true
    ctx.timer.unref()
  }
}

/** Stops the timer (close). @param {Context} ctx */
function stop(ctx) {
  if (ctx.timer !== undefined) clearTimeout(ctx.timer)
  ctx.timer = undefined
}

function arm(ctx, deadline) {
  ctx.idle = false
  ctx.timer = setTimeout(expireDue, Math.max(0, deadline - performance.now()), ctx.self)
}

/** @param {WeakRef<Context>} self */
function expireDue(self) {
  const ctx = self.deref()
  if (ctx === undefined) return
  ctx.timer = undefined
  const now = performance.now()
  for (const flight of ctx.active) {
    if (flight.deadline > now) {
      if (ctx.timer === undefined) arm(ctx, flight.deadline)
      return
    }
    flight.expire()
  }
}

module.exports = { enter, leave, stop }
