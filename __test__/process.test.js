'use strict'
// Process-level behaviour in child processes: exiting by itself, no unhandled rejections, ESM import.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const h = require('./helpers')

const { T, ROOT } = h
const KILL_AFTER = 8000

function run(args, { cwd = ROOT } = {}) {
  return new Promise((resolve) => {
    const started = Date.now()
    const child = spawn(process.execPath, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    let killed = false
    const timer = setTimeout(() => {
      killed = true
      child.kill('SIGKILL')
    }, KILL_AFTER)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, killed, elapsed: Date.now() - started })
    })
  })
}

// Runs `body` (an async function body with `Cache`, `kTesting`, `sleep`, `waitFor` in scope)
// in a child with --unhandled-rejections=strict; it must print DONE and exit 0 by itself.
function scenario(body) {
  const code = `
'use strict'
const { Cache, kTesting } = require(${JSON.stringify(ROOT)})
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
async function waitFor(pred, what) {
  const end = Date.now() + 3000
  while (!pred()) {
    if (Date.now() > end) throw new Error('child timed out waiting for ' + what)
    await sleep(2)
  }
}
;(async () => {
${body}
})().then(() => console.log('DONE'), (e) => { console.error('SCENARIO FAILED', e); process.exitCode = 3 })
`
  return run(['--unhandled-rejections=strict', '-e', code])
}

function assertClean(r, what) {
  const info = `${what}\nexit ${r.code} signal ${r.signal} killed ${r.killed}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`
  assert.equal(r.killed, false, `the process did not exit by itself within ${KILL_AFTER} ms: ${info}`)
  assert.equal(r.code, 0, info)
  assert.match(r.stdout, /DONE/, info)
}

test('an idle process holding a Cache exits by itself within a few seconds', T, async () => {
  const r = await scenario(`
    const cache = new Cache({ ttl: 60000 })
    await cache.set('a', 1)
    await cache.getOrLoad('b', async () => { await sleep(5); return 2 })
    await cache.getOrLoad('b', () => 3)
    await cache.getOrLoad(['n', 1], () => null)
    // not closed on purpose
  `)
  assertClean(r, 'idle cache')
  assert.ok(r.elapsed < 5000, `exited after ${r.elapsed} ms`)
})

test('an idle process with a Cache that had background refreshes exits by itself', T, async () => {
  const r = await scenario(`
    const cache = new Cache({ ttl: 1000, jitter: 0, beta: 0, softTimeout: 50, hardTimeout: 5000 })
    await cache.getOrLoad('k', () => 1)
    cache[kTesting].advanceClock(1500)
    await cache.getOrLoad('k', async () => { await sleep(5); return 2 })
    await waitFor(() => cache.stats().inFlight === 0, 'refresh')
  `)
  assertClean(r, 'after a refresh')
  assert.ok(r.elapsed < 5000, `exited after ${r.elapsed} ms`)
})

test('a process with a pending loader and hardTimeout 200 exits after the timeout', T, async () => {
  const r = await scenario(`
    const cache = new Cache({ hardTimeout: 200 })
    const t0 = Date.now()
    cache.getOrLoad('k', () => new Promise(() => {})).catch((e) => {
      console.log('REJECTED', e.code, Date.now() - t0)
    })
  `)
  assertClean(r, 'pending loader')
  assert.match(r.stdout, /REJECTED ERR_HERDCACHE_TIMEOUT/, 'the load was given up at hardTimeout')
  const ms = Number(/REJECTED \S+ (\d+)/.exec(r.stdout)[1])
  assert.ok(ms >= 150 && ms < 3000, `gave up after ${ms} ms`)
  assert.ok(r.elapsed < 5000)
})

// ---- no unhandled rejection, whatever fails -------------------------------------

const FAILURES = {
  'a cold load rejects': `
    const cache = new Cache()
    await cache.getOrLoad('k', async () => { throw new Error('x') }).catch(() => {})
    await cache.close()
  `,
  'a cold load rejects with joiners': `
    const cache = new Cache()
    const l = async () => { await sleep(5); throw new Error('x') }
    await Promise.allSettled([cache.getOrLoad('k', l), cache.getOrLoad('k', l), cache.getOrLoad('k', l)])
    await cache.close()
  `,
  'a loader throws synchronously': `
    const cache = new Cache()
    await cache.getOrLoad('k', () => { throw new Error('sync') }).catch(() => {})
    await cache.close()
  `,
  'a loader returns an unserialisable value': `
    const cache = new Cache()
    await cache.getOrLoad('k', () => 1n).catch(() => {})
    const o = {}; o.o = o
    await cache.getOrLoad('k2', async () => o).catch(() => {})
    await cache.close()
  `,
  'bad keys, loaders and options': `
    const cache = new Cache()
    await cache.getOrLoad('', () => 1).catch(() => {})
    await cache.getOrLoad('k', 5).catch(() => {})
    await cache.getOrLoad('k', () => 1, { ttl: -1 }).catch(() => {})
    await cache.close()
  `,
  'the only caller aborts, then the load fails': `
    const cache = new Cache()
    const ac = new AbortController()
    const p = cache.getOrLoad('k', async () => { await sleep(30); throw new Error('late') }, { signal: ac.signal })
    ac.abort()
    await p.catch(() => {})
    await waitFor(() => cache.stats().inFlight === 0, 'the load')
    await sleep(10)
    await cache.close()
  `,
  'a caller aborts, the load then succeeds for the others': `
    const cache = new Cache()
    const ac = new AbortController()
    const l = async () => { await sleep(20); return 1 }
    const a = cache.getOrLoad('k', l, { signal: ac.signal })
    const b = cache.getOrLoad('k', l)
    ac.abort(new Error('bye'))
    await a.catch(() => {})
    await b
    await cache.close()
  `,
  'a load passes hardTimeout, the loader rejects on abort': `
    const cache = new Cache({ hardTimeout: 50 })
    const l = ({ signal }) => new Promise((_, rej) => signal.addEventListener('abort', () => rej(signal.reason)))
    await Promise.allSettled([cache.getOrLoad('k', l), cache.getOrLoad('k', l)])
    await sleep(10)
    await cache.close()
  `,
  'a load passes hardTimeout, the loader rejects later on its own': `
    const cache = new Cache({ hardTimeout: 50 })
    await cache.getOrLoad('k', async () => { await sleep(120); throw new Error('too late') }).catch(() => {})
    await sleep(150)
    await cache.close()
  `,
  'a background refresh fails without onError': `
    const cache = new Cache({ ttl: 1000, jitter: 0, beta: 0 })
    await cache.getOrLoad('k', () => 1)
    cache[kTesting].advanceClock(1500)
    await cache.getOrLoad('k', async () => { throw new Error('refresh') })
    await waitFor(() => cache.stats().backgroundErrors === 1, 'the failed refresh')
    await sleep(10)
    await cache.close()
  `,
  'a background refresh fails, waitUntil ignores the promise it gets': `
    const held = []
    const cache = new Cache({ ttl: 1000, jitter: 0, beta: 0, waitUntil: (p) => { held.push(p) } })
    await cache.getOrLoad('k', () => 1)
    cache[kTesting].advanceClock(1500)
    await cache.getOrLoad('k', () => Promise.reject(new Error('refresh')))
    await waitFor(() => cache.stats().backgroundErrors === 1, 'the failed refresh')
    await sleep(10)
    if (held.length !== 1) throw new Error('waitUntil got ' + held.length)
    await cache.close()
  `,
  'an early (XFetch) refresh fails': `
    const cache = new Cache({ ttl: 10000, jitter: 0, beta: 1 })
    cache[kTesting].setRandom({ xfetch: 1e-300 })
    await cache.getOrLoad('k', async () => { await sleep(20); return 1 })
    cache[kTesting].advanceClock(5000)
    await cache.getOrLoad('k', async () => { throw new Error('early') })
    await waitFor(() => cache.stats().backgroundErrors === 1, 'the failed early refresh')
    await sleep(10)
    await cache.close()
  `,
  'a stale caller with softTimeout while the refresh fails': `
    const cache = new Cache({ ttl: 1000, jitter: 0, beta: 0, softTimeout: 50 })
    await cache.getOrLoad('k', () => 1)
    cache[kTesting].advanceClock(1500)
    const v = await cache.getOrLoad('k', async () => { await sleep(10); throw new Error('refresh') })
    if (v !== 1) throw new Error('expected the stale value, got ' + v)
    await waitFor(() => cache.stats().backgroundErrors === 1, 'the failed refresh')
    await cache.close()
  `,
  'close() with loads in flight': `
    const cache = new Cache()
    const l = ({ signal }) => new Promise((_, rej) => signal.addEventListener('abort', () => rej(signal.reason)))
    const ps = [cache.getOrLoad('a', l), cache.getOrLoad('a', l), cache.getOrLoad('b', l)].map((p) => p.catch(() => {}))
    await sleep(5)
    await cache.close()
    await Promise.all(ps)
    await cache.getOrLoad('c', () => 1).catch(() => {})
  `,
  'delete() during a load that then fails': `
    const cache = new Cache()
    const p = cache.getOrLoad('k', async () => { await sleep(20); throw new Error('x') })
    await cache.delete('k')
    await p.catch(() => {})
    await cache.close()
  `,
}

for (const [name, body] of Object.entries(FAILURES)) {
  test(`no unhandled rejection (--unhandled-rejections=strict): ${name}`, T, async () => {
    const r = await scenario(body)
    assertClean(r, name)
    assert.doesNotMatch(r.stderr, /Unhandled|unhandled/, r.stderr)
  })
}

// ---- module formats -------------------------------------------------------------

test("ESM: import { Cache } from 'herdcache' works", T, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herdcache-esm-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(ROOT, path.join(dir, 'node_modules', 'herdcache'), 'dir')
  fs.writeFileSync(
    path.join(dir, 'main.mjs'),
    `import { Cache } from 'herdcache'
import cjs from 'herdcache'
const cache = new Cache({ ttl: 1000 })
let runs = 0
const v = await Promise.all([1, 2, 3].map(() => cache.getOrLoad(['esm', 1], async () => { runs++; return 'ok' })))
if (cjs.Cache !== Cache) throw new Error('default export differs')
await cache.close()
console.log('DONE', runs, v.join(','))
`,
  )
  const r = await run(['--unhandled-rejections=strict', path.join(dir, 'main.mjs')], { cwd: dir })
  assertClean(r, 'ESM import')
  assert.match(r.stdout, /DONE 1 ok,ok,ok/)
})

test("CommonJS: require('herdcache') exposes Cache", T, async () => {
  const r = await scenario(`
    if (typeof Cache !== 'function') throw new Error('Cache is not a class')
    const c = new Cache()
    if (!(c instanceof Cache)) throw new Error('instanceof')
    await c.close()
  `)
  assertClean(r, 'require')
})
