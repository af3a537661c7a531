'use strict'
// The addon in worker threads: each worker has its own env and caches; a
// worker that ends, or is terminated mid-load, tears its caches down without
// crashing the process.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Worker } = require('node:worker_threads')
const { once } = require('node:events')
const { ROOT } = require('./helpers')

function worker(body) {
  const code = `
const { Cache } = require(${JSON.stringify(ROOT)})
const { parentPort } = require('node:worker_threads')
;(async () => { ${body} })()
`
  return new Worker(code, { eval: true })
}

test('caches in several worker threads coalesce independently and exit cleanly', { timeout: 20000 }, async () => {
  const workers = Array.from({ length: 3 }, () =>
    worker(`
      const cache = new Cache()
      let loads = 0
      const values = await Promise.all(
        Array.from({ length: 200 }, () => cache.getOrLoad('k', async () => ({ load: ++loads }))),
      )
      await cache.close()
      parentPort.postMessage({ loads, same: values.every((v) => v === values[0]) })
    `),
  )
  // Listen for exits now: a worker may be gone before its message is read.
  const exits = workers.map((w) => once(w, 'exit').then(([c]) => c))
  const results = await Promise.all(workers.map((w) => once(w, 'message').then(([m]) => m)))
  for (const r of results) assert.deepEqual(r, { loads: 1, same: true })
  assert.deepEqual(await Promise.all(exits), [0, 0, 0])
})

test('terminating a worker in the middle of loads and hits does not crash the process', {
  timeout: 20000,
}, async () => {
  const w = worker(`
    const cache = new Cache()
    for (let k = 0; k < 100; k++) await cache.getOrLoad(['warm', k], () => ({ k }))
    cache.getOrLoad('pending', () => new Promise(() => {}))
    cache.getOrLoad('pending', () => 1)
    parentPort.postMessage('ready')
  `)
  const exit = once(w, 'exit').then(([c]) => c)
  await once(w, 'message')
  await w.terminate()
  assert.equal(await exit, 1, 'terminated')
  // The main thread's own cache still works after the worker's env is gone.
  const { Cache } = require('..')
  const cache = new Cache()
  assert.equal(await cache.getOrLoad('main', () => 'alive'), 'alive')
  await cache.close()
})
