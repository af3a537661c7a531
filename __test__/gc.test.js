'use strict'
// Memory: the addon holds JS values through napi references and its value
// table (src/binding/held.rs); none of them may keep a dropped Cache (and its
// entries) alive, nor a value whose entry left. Runs in a child with --expose-gc.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const { ROOT } = require('./helpers')

function runWithGc(body) {
  const code = `
'use strict'
const { Cache } = require(${JSON.stringify(ROOT)})
const collectGarbage = async () => {
  for (let i = 0; i < 10; i++) { global.gc(); await new Promise((r) => setImmediate(r)) }
}
;(async () => { ${body} })().catch((e) => { console.error(e); process.exit(1) })
`
  const result = spawnSync(process.execPath, ['--expose-gc', '-e', code], { encoding: 'utf8', timeout: 20000 })
  assert.equal(result.status, 0, result.stderr)
  return JSON.parse(result.stdout)
}

test('dropped caches are collected with their entries, flights and helpers', { timeout: 30000 }, () => {
  const out = runWithGc(`
    let collected = 0
    const registry = new FinalizationRegistry(() => { collected++ })
    // In its own function, so no scope of the loop below keeps the last one.
    async function useAndDrop(i) {
      const cache = new Cache()
      for (let k = 0; k < 50; k++) {
        await cache.getOrLoad(['k', k], async () => ({ k, pad: 'x'.repeat(2000) }))
      }
      // One entry is also read through hits, so its promise is remembered too.
      await cache.getOrLoad(['k', 0], () => null)
      await cache.getOrLoad(['k', 0], () => null)
      registry.register(cache, i)
    }
    const before = process.memoryUsage().heapUsed
    for (let i = 0; i < 100; i++) await useAndDrop(i)
    await collectGarbage()
    const grown = process.memoryUsage().heapUsed - before
    console.log(JSON.stringify({ collected, grown }))
  `)
  assert.equal(out.collected, 100, 'every dropped Cache was collected')
  // 100 caches x 50 entries x 2 KB = 10 MB if the entries leaked.
  assert.ok(out.grown < 4e6, `heap grew by ${out.grown} bytes`)
})

test('a closed cache frees its entries even while the Cache object is kept', { timeout: 30000 }, () => {
  const out = runWithGc(`
    const cache = new Cache()
    for (let k = 0; k < 2000; k++) await cache.getOrLoad(['k', k], async () => ({ pad: 'x'.repeat(2000) }))
    await collectGarbage()
    const full = process.memoryUsage().heapUsed
    await cache.close()
    await collectGarbage()
    const closed = process.memoryUsage().heapUsed
    console.log(JSON.stringify({ freed: full - closed, size: cache.stats().size }))
  `)
  assert.equal(out.size, 0)
  // 2000 x 2 KB values: at least most of 4 MB comes back.
  assert.ok(out.freed > 3e6, `only ${out.freed} bytes freed`)
})

test('a value leaves memory with its entry: evicted, replaced, deleted, expired or cleared', { timeout: 30000 }, () => {
  // The values live in a table shared by the caches of the thread
  // (src/binding/held.rs): the slot of an entry that leaves is emptied.
  // What is watched is the stored copy, as the calls get it.
  const out = runWithGc(`
    let collected = 0
    const registry = new FinalizationRegistry(() => { collected++ })
    const watch = (value) => { registry.register(value, 0) }
    const big = (k) => ({ k, pad: 'x'.repeat(20_000) })
    const small = new Cache({ maxEntries: 10, ttl: 60_000 })
    // Evicted: 200 loads through a cache of 10 entries.
    for (let k = 0; k < 200; k++) watch(await small.getOrLoad(['evicted', k], () => big(k)))
    // Replaced, deleted, and expired past its hard TTL.
    const cache = new Cache({ ttl: 60_000 })
    cache.set('replaced', big(-1)); watch(await cache.get('replaced')); cache.set('replaced', 'small')
    cache.set('deleted', big(-2)); watch(await cache.get('deleted')); cache.delete('deleted')
    watch(await cache.getOrLoad('expired', () => big(-3), { ttl: 1, hardTtl: 2 }))
    cache[Symbol.for('herdcache.testing')].advanceClock(5_000)
    await cache.getOrLoad('expired', () => 'reloaded')
    await collectGarbage()
    const beforeClear = collected
    small.clear()
    await collectGarbage()
    console.log(JSON.stringify({ beforeClear, afterClear: collected, size: small.stats().size }))
  `)
  // 190 evicted + replaced + deleted + expired; the 10 left go with clear().
  assert.equal(out.beforeClear, 193, 'every value whose entry left was collected, and no other')
  assert.equal(out.afterClear, 203, 'clear() let the rest go')
  assert.equal(out.size, 0)
})

test('a string repeated across cached values is kept once', { timeout: 30000 }, () => {
  // Each load makes its strings anew, as a database driver would; the
  // copies keep one string per text (lib/json-copy.js, interned).
  const out = runWithGc(`
    const cache = new Cache({ maxEntries: 50_000 })
    const fresh = (text) => text.split('').join('')
    const zones = ['Europe/London', 'America/New_York', 'Asia/Singapore']
    await collectGarbage()
    const before = process.memoryUsage().heapUsed
    for (let k = 0; k < 30_000; k++) {
      await cache.getOrLoad('k' + k, () => ({
        zone: fresh(zones[k % 3]),
        company: fresh('alpha bravo ltd'),
        title: fresh(k % 2 ? 'senior engineer' : 'staff analyst'),
      }))
    }
    await collectGarbage()
    const perEntry = (process.memoryUsage().heapUsed - before) / 30_000
    console.log(JSON.stringify({ perEntry, size: cache.stats().size }))
  `)
  // The object and its slot take ~64 bytes; a copy of each string another ~96.
  assert.equal(out.size, 30_000, 'every value still held')
  assert.ok(out.perEntry < 110, `${out.perEntry} bytes an entry`)
})

test('a cached value keeps no more than its own text of the strings the loader returned', { timeout: 30000 }, () => {
  // A slice of a large text, and a rope of many pieces: the copy the
  // embedded store keeps (lib/json-copy.js) holds new flat strings, as a
  // JSON round trip would, not the 4 MB text nor the rope.
  const out = runWithGc(`
    const cache = new Cache()
    await collectGarbage()
    const before = process.memoryUsage().heapUsed
    for (let k = 0; k < 50; k++) {
      await cache.getOrLoad(['k', k], () => {
        const text = ('line of a large document ' + k + ' ').repeat(150_000)
        text.indexOf('#') // flat now: a slice of it would keep all of it
        let rope = ''
        for (let i = 0; i < 200; i++) rope += ' piece ' + i
        return { slice: text.slice(100, 200), rope, list: [text.slice(300, 400)] }
      })
    }
    await collectGarbage()
    const grown = process.memoryUsage().heapUsed - before
    const v = await cache.getOrLoad(['k', 7], () => null)
    console.log(JSON.stringify({ grown, slice: v.slice.length, rope: v.rope.length }))
  `)
  assert.equal(out.slice, 100)
  assert.ok(out.rope > 1000)
  // Kept slices would hold 50 texts of ~4 MB; ropes ~10 KB each. Flat copies: ~2.5 KB an entry.
  assert.ok(out.grown < 1e6, `heap grew by ${out.grown} bytes`)
})
