'use strict'
// The `compress` option (issue 27): values at or past the threshold are
// stored zstd-compressed in Redis (an hc4 entry, src/core/body.rs), every
// reader decompresses them whatever its own option, the L1 keeps values as
// they are, and the bytes written before and after compression are counted.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, counted } = require('../helpers')
const { names, assertCorruptMisses } = require('./fixtures/fleet')

const T = { timeout: 20000 }

/** A JSON document of ~100 KB that compresses well, as API answers do. */
function document() {
  return {
    items: Array.from({ length: 1000 }, (_, i) => ({ id: i, name: `Product ${i}`, price: i % 90, tags: ['a', 'b'] })),
  }
}

/** `n` bytes that do not compress (an image's). */
function noise(n) {
  const bytes = Buffer.alloc(n)
  let state = 0x2545f491
  for (let i = 0; i < n; i++) {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    bytes[i] = state & 0xff
  }
  return bytes
}

test('values at or past the threshold are stored compressed; every reader decompresses them', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'z:'
  const writer = track(t, new Cache({ redis: redis.url, prefix, compress: { threshold: 1024 } }))
  // A reader without the option, reading Redis each time.
  const reader = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
  const doc = document()
  const json = JSON.stringify(doc)
  const loader = counted(() => doc)
  assert.deepEqual(await writer.getOrLoad('doc', loader), doc)
  assert.deepEqual(await writer.getOrLoad('doc', loader), doc, 'from the L1')
  assert.deepEqual(await reader.getOrLoad('doc', loader), doc, 'from Redis, decompressed')
  assert.deepEqual(await reader.get('doc'), doc, 'get() too')
  assert.equal(loader.calls, 1)
  const name = (key) => names(prefix, key).value
  assert.match(await redis.cmd('GETRANGE', name('doc'), 0, 100), /^hc4 [\d ]+ v\nzstd - json\n/)
  const stored = await redis.cmd('STRLEN', name('doc'))
  assert.ok(stored < json.length / 4, `STRLEN ${stored} of a ${json.length}-byte JSON text`)
  // Binary parts compress with their JSON text; a small value stays as it is.
  const record = { text: 'x'.repeat(5000), blob: Buffer.alloc(70_000, 7) }
  const got = await writer.getOrLoad('record', () => record)
  assert.ok(Buffer.isBuffer(got.blob) && got.blob.equals(record.blob))
  const back = await reader.getOrLoad('record', () => 'WRONG')
  assert.ok(back.blob.equals(record.blob) && back.text === record.text, 'decompressed by the reader')
  assert.match(await redis.cmd('GETRANGE', name('record'), 0, 100), /\nzstd - json \[/)
  await writer.set('small', { a: 1 })
  assert.match(await redis.cmd('GET', name('small')), /^hc2 [\d ]+ v\n\{"a":1\}$/, 'under the threshold: hc2')
  assert.equal(writer.stats().corruptValues + reader.stats().corruptValues, 0)
})

test(
  'bytes that do not compress are stored as they are; the bytes written are counted before and after',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'zc:'
    const cache = track(t, new Cache({ redis: redis.url, prefix, compress: { threshold: 0, level: 9 } }))
    const image = noise(1 << 20)
    assert.ok((await cache.getOrLoad('image', () => image)).equals(image))
    assert.match(await redis.cmd('GETRANGE', names(prefix, 'image').value, 0, 100), /\n- - json \[/, 'not compressed')
    const afterImage = cache.stats()
    assert.equal(afterImage.valueBytesWritten, afterImage.valueBytesStored, 'nothing saved')
    assert.ok(afterImage.valueBytesWritten >= image.length)
    const doc = document()
    await cache.set('doc', doc)
    const s = cache.stats()
    const written = s.valueBytesWritten - afterImage.valueBytesWritten
    const storedBytes = s.valueBytesStored - afterImage.valueBytesStored
    assert.equal(written, Buffer.byteLength(JSON.stringify(doc)), 'before: the JSON text')
    assert.ok(storedBytes < written / 4, `after: ${storedBytes} of ${written}`)
    assert.match(cache.metrics(), /herdcache_value_bytes_stored_total \d+/)
  },
)

test('a corrupt compressed value in Redis is a counted corrupt miss, not a crash', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'zbad:'
  const cache = track(t, new Cache({ redis: redis.url, prefix, l1: false, compress: {} }))
  const later = Date.now() + 600_000
  const header = `hc4 ${later} ${later} 1 ${Date.now()} ${later} v\n`
  const valid = await (async () => {
    await cache.set('good', document())
    const raw = await redis.cmd('GET', names(prefix, 'good').value)
    return raw.slice(raw.indexOf('\n') + 1)
  })()
  const cases = {
    'not a zstd frame': 'zstd - json\nnot zstd at all',
    'a truncated frame': valid.slice(0, 40),
    'a frame of bytes that are not JSON': 'zstd - json\n\x28\xb5\x2f\xfd\x00\x58\x11\x00\x00{not json',
    'an empty frame': 'zstd - json\n',
  }
  await assertCorruptMisses(redis, cache, prefix, header, cases)
})

test('the compress option is checked at construction', async () => {
  const redis = 'redis://127.0.0.1:9'
  const bad = [
    [1024, /must be a string/],
    [{ threshold: -1 }, /`threshold` an integer from 0/],
    [{ threshold: 1.5 }, /`threshold` an integer/],
    [{ level: 0 }, /`level` an integer from 1 to 22/],
    [{ level: 23 }, /`level` an integer from 1 to 22/],
    [{ treshold: 10 }, /unknown member `treshold`/],
  ]
  for (const [compress, message] of bad) {
    assert.throws(
      () => new Cache({ redis, compress }),
      { code: 'ERR_HERDCACHE_INVALID_OPTION', message },
      String(compress),
    )
  }
  assert.throws(() => new Cache({ compress: {} }), {
    code: 'ERR_HERDCACHE_INVALID_OPTION',
    message: /give `redis` too/,
  })
  await new Cache({ redis, compress: {}, onError() {} }).close()
  await new Cache({ redis, compress: { threshold: 0, level: 19 }, onError() {} }).close()
})
