'use strict'
// Shared helpers for the herdcache node:test suites (not a test file itself).
const assert = require('node:assert/strict')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const T = { timeout: 10000 }

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const tick = () => new Promise((resolve) => setImmediate(resolve))

function deferred() {
  let resolve
  let reject
  const promise = new Promise((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

// Bounded poll: short sleeps, fails (never hangs) after `timeout` ms.
async function waitFor(pred, what = 'condition', timeout = 3000) {
  const end = Date.now() + timeout
  for (;;) {
    if (await pred()) return
    if (Date.now() > end) assert.fail(`timed out after ${timeout} ms waiting for ${what}`)
    await sleep(2)
  }
}

// Resolves like `promise`, or fails after `ms` (the timer is cleared either way).
async function within(promise, ms, what) {
  let timer
  try {
    return await Promise.race([
      promise,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms)
      }),
    ])
  } finally {
    clearTimeout(timer)
  }
}

// Closes the cache when the test ends, without ever hanging the suite.
function track(t, cache) {
  t.after(async () => {
    let timer
    try {
      const closing = Promise.resolve(cache.close()).catch(() => {})
      await Promise.race([closing, new Promise((resolve) => (timer = setTimeout(resolve, 2000)))])
    } catch {
    } finally {
      clearTimeout(timer)
    }
  })
  return cache
}

function advance(cache, ms) {
  const { kTesting } = require('..')
  cache[kTesting].advanceClock(ms)
}

function setRandom(cache, r) {
  const { kTesting } = require('..')
  cache[kTesting].setRandom(r)
}

// Calls fn, asserts it did not throw synchronously and returned a thenable.
function callAsync(fn) {
  let p
  assert.doesNotThrow(() => {
    p = fn()
  }, 'must not throw synchronously (usage errors reject the returned promise)')
  assert.ok(p && typeof p.then === 'function', 'must return a promise')
  return p
}

// Awaits a promise that must reject; checks err.code (and class when given).
async function rejectsWith(promise, code, Class) {
  let rejected = false
  let err
  try {
    await promise
  } catch (e) {
    rejected = true
    err = e
  }
  assert.ok(rejected, `expected a rejection with ${code}, but it resolved`)
  assert.equal(err && err.code, code, `expected code ${code}, got ${err && err.code} (${err && err.message})`)
  if (Class)
    assert.ok(err instanceof Class, `expected ${Class.name}, got ${err && err.constructor && err.constructor.name}`)
  return err
}

function throwsWith(fn, code, Class) {
  let threw = false
  let err
  try {
    fn()
  } catch (e) {
    threw = true
    err = e
  }
  assert.ok(threw, `expected a synchronous throw with ${code}`)
  assert.equal(err && err.code, code, `expected code ${code}, got ${err && err.code} (${err && err.message})`)
  if (Class)
    assert.ok(err instanceof Class, `expected ${Class.name}, got ${err && err.constructor && err.constructor.name}`)
  return err
}

// For get/set/delete/clear, whose README entries do not say sync or async:
// accepts a synchronous throw or a rejected promise with the given code.
async function failsWith(fn, code, Class) {
  let failed = false
  let err
  try {
    await fn()
  } catch (e) {
    failed = true
    err = e
  }
  assert.ok(failed, `expected a failure with ${code}`)
  assert.equal(err && err.code, code, `expected code ${code}, got ${err && err.code} (${err && err.message})`)
  if (Class)
    assert.ok(err instanceof Class, `expected ${Class.name}, got ${err && err.constructor && err.constructor.name}`)
  return err
}

// A loader that counts its runs: impl(ctx, n) with n = 1-based run number.
function counted(impl) {
  const fn = (ctx) => {
    fn.calls += 1
    fn.ctxs.push(ctx)
    return impl(ctx, fn.calls)
  }
  fn.calls = 0
  fn.ctxs = []
  return fn
}

// A loader whose every run waits until the test settles it (runs[i].resolve/reject).
// It honours its signal (rejects with signal.reason) so close() never hangs.
function gatedLoader() {
  const fn = (ctx) => {
    const d = deferred()
    const run = { ctx, resolve: d.resolve, reject: d.reject, settled: false }
    d.promise.then(
      () => (run.settled = true),
      () => (run.settled = true),
    )
    fn.runs.push(run)
    const signal = ctx && ctx.signal
    if (signal && typeof signal.addEventListener === 'function') {
      signal.addEventListener('abort', () => d.reject(signal.reason), { once: true })
    }
    return d.promise
  }
  fn.runs = []
  Object.defineProperty(fn, 'calls', { get: () => fn.runs.length })
  return fn
}

// A loader that resolves `value` after `ms` (real time); honours its signal.
function slowLoader(ms, value) {
  return counted(
    (ctx) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => resolve(typeof value === 'function' ? value() : value), ms)
        const signal = ctx && ctx.signal
        if (signal) {
          signal.addEventListener(
            'abort',
            () => {
              clearTimeout(timer)
              reject(signal.reason)
            },
            { once: true },
          )
        }
      }),
  )
}

// A loader that never settles until its signal aborts.
function hangingLoader() {
  return counted(
    (ctx) =>
      new Promise((_, reject) => {
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true })
      }),
  )
}

const COUNTERS = [
  'hits',
  'staleServed',
  'negativeHits',
  'misses',
  'coalesced',
  'loads',
  'loadErrors',
  'backgroundRefreshes',
  'earlyRefreshes',
  'backgroundErrors',
  'timeouts',
  'evictions',
  'expirations',
  'size',
  'inFlight',
]

function served(s) {
  return s.hits + s.staleServed + s.negativeHits + s.misses + s.coalesced
}

/** tsc --strict flags with Node's types and module rules (`node16`, `nodenext`): what the type tests share. */
function tscStrict(modules = 'node16') {
  return [
    '--noEmit',
    '--strict',
    '--target',
    'es2022',
    '--module',
    modules,
    '--moduleResolution',
    modules,
    '--types',
    'node',
  ]
}

/** Runs the local TypeScript compiler: `{ code, out }` (stdout and stderr together). */
/**
 * What `make()` makes while the addon's `NativeCache.prototype.install` is
 * wrapped: `onInstall(fns, args)` sees what each install was given and
 * returned (and may replace a returned function). Restored after `make()`.
 */
function withInstall(onInstall, make) {
  const { prototype } = require('../lib/native').NativeCache
  const install = prototype.install
  const define = (value) => Object.defineProperty(prototype, 'install', { configurable: true, writable: true, value })
  define(function (...args) {
    const fns = install.apply(this, args)
    onInstall(fns, args)
    return fns
  })
  try {
    return make()
  } finally {
    define(install)
  }
}

function tsc(args, timeout = 25000) {
  const { execFile } = require('node:child_process')
  const bin = path.join(ROOT, 'node_modules', '.bin', 'tsc')
  return new Promise((resolve) => {
    execFile(bin, args, { cwd: ROOT, timeout }, (error, stdout, stderr) => {
      resolve({ code: error ? (error.code ?? 1) : 0, out: `${stdout}${stderr}` })
    })
  })
}

module.exports = {
  ROOT,
  withInstall,
  tscStrict,
  tsc,
  T,
  sleep,
  tick,
  deferred,
  waitFor,
  within,
  track,
  advance,
  setRandom,
  callAsync,
  rejectsWith,
  throwsWith,
  failsWith,
  counted,
  gatedLoader,
  slowLoader,
  hangingLoader,
  COUNTERS,
  served,
}
