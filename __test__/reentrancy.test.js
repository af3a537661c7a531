'use strict'
// User code that runs while herdcache resolves a promise — a `then` getter
// on Object.prototype, read when a promise is resolved with an object — may
// call back into the cache. That must never find the engine in use (before:
// "RefCell already mutably borrowed", a panic that cannot unwind, abort).
// Run in a child process: the getter would see every promise of the runner.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const h = require('./helpers')

const SCRIPT = `
const { Cache } = require(${JSON.stringify(path.join(__dirname, '..'))})
const cache = new Cache()
const seen = []
let inside = false
Object.defineProperty(Object.prototype, 'then', {
  configurable: true,
  get() {
    if (!inside) {
      inside = true
      try {
        seen.push(cache.stats().hits)
        cache.getOrLoad('other', () => 'x').catch((e) => seen.push(e.code))
        cache.set('written', { w: 1 }).catch((e) => seen.push(e.code))
      } finally {
        inside = false
      }
    }
    return undefined
  },
})
;(async () => {
  const first = await cache.getOrLoad('k', () => ({ a: 1 }))
  const hit = await cache.getOrLoad('k', () => ({ a: 2 }))
  const again = await cache.getOrLoad('k', () => ({ a: 3 }))
  delete Object.prototype.then
  console.log(JSON.stringify({ first, hit, again, other: await cache.get('other'), written: await cache.get('written'), reentered: seen.length > 0 }))
  await cache.close()
})()
`

test('a then getter on Object.prototype that calls back into the cache does not crash it', h.T, () => {
  const child = spawnSync(process.execPath, ['-e', SCRIPT], { encoding: 'utf8', timeout: 8000 })
  assert.equal(child.status, 0, `exit ${child.status} ${child.signal}\n${child.stderr}`)
  const out = JSON.parse(child.stdout)
  assert.deepEqual(out.first, { a: 1 })
  assert.deepEqual(out.hit, { a: 1 })
  assert.deepEqual(out.again, { a: 1 })
  assert.equal(out.other, 'x')
  assert.deepEqual(out.written, { w: 1 })
  assert.equal(out.reentered, true, 'the getter ran and called the cache')
})
