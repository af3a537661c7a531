'use strict'
// Issue 10 item 4: a slow or partitioned Redis, not only a stopped one. A TCP
// proxy (../tcp-proxy.js) between cache A and a real redis-server adds latency,
// blackholes and cuts connections; cache B talks to Redis directly. While the
// network is broken every call of A answers (from its L1 or its loader) within
// about redisTimeout + the loader's time, nothing rejects; once the proxy heals,
// A uses Redis again (locks, values another instance wrote) and its pub/sub
// connection carries invalidations again.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { startProxy } = require('../tcp-proxy')
const { Cache } = require('../..')
const { track, counted } = require('../helpers')
const { sleep, waitFor, within, names, storedEnvelope } = require('./fixtures/fleet')

const T = { timeout: 30000 }
const REDIS_TIMEOUT = 200
const BREAKER = 500
const LOADER_MS = 20
const OUTAGE_MS = 1200
// Generous: an answer is expected after about REDIS_TIMEOUT + LOADER_MS.
const CALL_BOUND = 2000

const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

const loaderOf = (value) =>
  counted(async () => {
    await sleep(LOADER_MS)
    return value
  })

async function setup(t, prefix, more = {}) {
  const redis = await startRedis(t)
  if (!redis) return null
  const proxy = await startProxy(t, redis.port)
  const options = { prefix, ttl: 60000, beta: 0, redisTimeout: REDIS_TIMEOUT, circuitBreakerDuration: BREAKER, ...more }
  const a = track(t, new Cache({ ...options, redis: proxy.url }))
  const b = track(t, new Cache({ ...options, redis: redis.url }))
  // Live subscriptions first: what "pub/sub resumes after heal" resumes, and the L1 the outage must
  // keep serving (the subscription's going live clears the L1).
  await Promise.all([a.ready(), b.ready()])
  return { redis, proxy, a, b }
}

/** One call that must resolve (never reject) within CALL_BOUND. */
function answer(cache, key, loader, what) {
  return within(
    cache
      .getOrLoad(key, loader)
      .catch((e) => assert.fail(`${what}: getOrLoad(${key}) rejected: ${e.code} ${e.message}`)),
    CALL_BOUND,
    `${what}: getOrLoad(${key})`,
  )
}

/**
 * Calls on A during an outage: a key in A's L1 and, each round, 10 callers of
 * a cold key. `warmKept`: the L1 value must be served (else the warm key may
 * also be reloaded, e.g. when the L1 is dropped on a resubscription).
 */
async function callsDuringOutage(a, what, { warmKept = true } = {}) {
  const end = Date.now() + OUTAGE_MS
  let round = 0
  while (Date.now() < end) {
    round++
    const cold = loaderOf(`L${round}`)
    const [warm, ...values] = await Promise.all([
      answer(a, 'warm', loaderOf('W-reloaded'), what),
      ...Array.from({ length: 10 }, () => answer(a, `cold${round}`, cold, what)),
    ])
    if (warmKept) assert.equal(warm, 'W', `${what}: the value in A's L1 is served`)
    else assert.ok(warm === 'W' || warm === 'W-reloaded', `${what}: warm key answered from L1 or its loader: ${warm}`)
    assert.deepEqual(new Set(values), new Set([`L${round}`]), `${what}: cold calls answered by the loader`)
    assert.equal(cold.calls, 1, `${what}: one load per key in the process`)
    await sleep(30)
  }
  return round
}

/**
 * After heal(): A takes fleet locks and writes to Redis again, reads what B
 * wrote, and its pub/sub connection delivers invalidations again.
 */
async function resumesAfterHeal(t, { redis, a, b }, prefix, what) {
  const before = a.stats()
  let n = 0
  await waitFor(
    async () => {
      n++
      assert.equal(await answer(a, `after${n}`, () => `A${n}`, `${what}, healed`), `A${n}`)
      return a.stats().lockAcquired > before.lockAcquired
    },
    `${what}: A taking a fleet lock again after heal`,
    8000,
    50,
  )
  await storedEnvelope(redis, names(prefix, `after${n}`).value, (e) => e.value === `A${n}`)
  assert.equal(a.stats().circuitOpen, 0, `${what}: A's breaker is closed once Redis answers`)

  // Values B wrote are read from Redis, each the right one (no reply mixed up
  // with a late reply of the outage).
  const hits = a.stats().redisHits
  for (let i = 0; i < 20; i++) await b.set(`fromB${i}`, { i })
  for (let i = 0; i < 20; i++) {
    assert.deepEqual(
      await answer(a, `fromB${i}`, () => 'WRONG', `${what}, healed`),
      { i },
      `${what}: A reads B's value`,
    )
  }
  assert.equal(a.stats().redisHits, hits + 20, `${what}: redisHits grows again`)

  // Pub/sub: a key in A's L1, changed and deleted by B, reaches A's L1.
  // B writes the first values too: B's set then follows B's own write by
  // B's clock. (Had A written them, B's set, a few ms later, could lose to
  // A's value by write stamp: A's clock, measured across the flapping
  // link, may be that far off. That is the stamps' last-writer-wins, not
  // pub/sub, and not what this checks.) B's notices of those first writes
  // reach A a moment after A can read them, and drop them from A's L1 then.
  const keys = ['sub-set', 'sub-del']
  for (const key of keys) await b.set(key, `${key}-1`)
  await waitFor(
    async () => {
      for (const key of keys) assert.equal(await answer(a, key, () => 'WRONG', `${what}, healed`), `${key}-1`)
      const l1 = a.stats().l1Hits
      for (const key of keys) assert.equal(await a.getOrLoad(key, () => 'WRONG'), `${key}-1`)
      return a.stats().l1Hits === l1 + 2
    },
    `${what}: both keys in A's L1`,
    5000,
    50,
  )
  await b.set('sub-set', 'sub-set-2')
  await b.delete('sub-del')
  await waitFor(
    async () => (await a.get('sub-set')) === 'sub-set-2',
    `${what}: B's set reaching A's L1 after heal`,
    5000,
    20,
  )
  await waitFor(
    async () => (await a.get('sub-del')) === undefined,
    `${what}: B's delete reaching A's L1 after heal`,
    5000,
    20,
  )
}

async function partitionScenario(t, prefix, what, breakIt, { warmKept = true, failures = true } = {}) {
  const env = await setup(t, prefix)
  if (!env) return
  const { redis, proxy, a, b } = env
  assert.equal(await a.getOrLoad('warm', () => 'W'), 'W')
  assert.equal(await a.getOrLoad('missed', () => 'M1'), 'M1')
  await storedEnvelope(redis, names(prefix, 'missed').value, (e) => e.value === 'M1')
  await sleep(50)

  breakIt(proxy)
  // Published while A is cut off: must not be lost for ever.
  await b.set('missed', 'M2')
  const rounds = await callsDuringOutage(a, what, { warmKept })
  t.diagnostic(
    `${what}: ${rounds} rounds, A redisErrors ${a.stats().redisErrors}, proxy ${JSON.stringify(proxy.stats)}`,
  )
  if (failures) assert.ok(a.stats().redisErrors > 0, `${what}: the failures are counted in redisErrors`)

  proxy.heal()
  await resumesAfterHeal(t, env, prefix, what)
  await waitFor(
    async () => (await a.get('missed')) === 'M2',
    `${what}: a change made during the outage reaching A after heal`,
    5000,
    20,
  )
  assert.deepEqual(unhandled, [], 'no unhandled rejection')
}

test('latency below redisTimeout: Redis is still used, nothing fails', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const proxy = await startProxy(t, redis.port)
  const prefix = 'slow:'
  const a = track(t, new Cache({ redis: proxy.url, prefix, ttl: 60000, redisTimeout: 1000 }))
  const b = track(t, new Cache({ redis: redis.url, prefix, ttl: 60000 }))
  proxy.delay(50) // ~100 ms per round trip
  const loader = loaderOf('slowly')
  const values = await within(
    Promise.all(Array.from({ length: 10 }, () => a.getOrLoad('k', loader))),
    5000,
    'calls over a slow link',
  )
  assert.deepEqual(new Set(values), new Set(['slowly']))
  assert.equal(loader.calls, 1)
  assert.equal(a.stats().lockAcquired, 1, 'the fleet lock is taken through the slow link')
  assert.equal(a.stats().redisErrors, 0, 'latency below redisTimeout is not a failure')
  await storedEnvelope(redis, names(prefix, 'k').value, (e) => e.value === 'slowly')
  await b.set('fromB', 'b')
  assert.equal(
    await within(
      a.getOrLoad('fromB', () => 'WRONG'),
      5000,
      'a read over a slow link',
    ),
    'b',
  )
  assert.equal(a.stats().redisHits, 1)
})

test(
  'latency above redisTimeout (400 ms each way): calls answer from L1 or the loader; Redis use resumes after heal',
  T,
  (t) => partitionScenario(t, 'lat:', 'latency', (proxy) => proxy.delay(400)),
)

test('blackhole (connections held, nothing forwarded): calls answer; Redis use and pub/sub resume after heal', T, (t) =>
  partitionScenario(t, 'hole:', 'blackhole', (proxy) => proxy.blackhole()),
)

test('connections cut and new ones refused: calls answer; Redis use and pub/sub resume after heal', T, (t) =>
  partitionScenario(t, 'cut:', 'cut+refuse', (proxy) => proxy.cut({ refuse: true })),
)

test('connections cut, reconnecting allowed: calls answer; pub/sub resubscribes', T, (t) =>
  // The L1 may be dropped on a resubscription (invalidations may have been
  // missed), and the reconnect may succeed before any command fails.
  partitionScenario(t, 'blip:', 'cut', (proxy) => proxy.cut(), { warmKept: false, failures: false }),
)

test(
  "values cached before the subscription first went live are dropped when it does: another instance's change is not missed",
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const proxy = await startProxy(t, redis.port)
    const prefix = 'first:'
    proxy.cut({ refuse: true }) // A starts with Redis unreachable
    const options = { prefix, ttl: 60000, redisTimeout: REDIS_TIMEOUT, circuitBreakerDuration: BREAKER }
    const a = track(t, new Cache({ ...options, redis: proxy.url }))
    const b = track(t, new Cache({ ...options, redis: redis.url }))
    await b.ready()
    assert.equal(await answer(a, 'k', () => 'old', 'Redis unreachable from the start'), 'old')
    assert.equal(await a.getOrLoad('k', () => 'WRONG'), 'old', "A's L1 holds it")
    assert.equal(a.stats().redisSubscribed, 0)
    await b.set('k', 'new') // published while A hears nothing
    proxy.heal()
    await waitFor(() => a.stats().redisSubscribed === 1, "A's subscription going live", 8000)
    await waitFor(async () => (await a.get('k')) === 'new', "B's change reaching A once it subscribed", 5000, 20)
    assert.deepEqual(unhandled, [], 'no unhandled rejection')
  },
)

test(
  '[ghost lock] a lock command that times out but lands later does not stall the next caller for lockTtl',
  T,
  async (t) => {
    // A's lock command (the lock script, which takes the lock as `SET … NX PX`
    // would, and is called with the token pattern) is slower than
    // redisTimeout: A gives up on Redis and
    // answers from its loader, but the command still reaches Redis and takes the
    // lock under A's token, which nobody will release or fill. Another instance
    // must not wait the whole lease (lockTtl) for it.
    const redis = await startRedis(t)
    if (!redis) return
    const proxy = await startProxy(t, redis.port)
    const prefix = 'ghost:'
    const lockTtl = 5000
    const a = track(
      t,
      new Cache({ redis: proxy.url, prefix, redisTimeout: REDIS_TIMEOUT, circuitBreakerDuration: 5000, lockTtl }),
    )
    const b = track(t, new Cache({ redis: redis.url, prefix, lockTtl }))
    assert.equal(await a.getOrLoad('warm', () => 'W'), 'W')
    proxy.delay(2 * REDIS_TIMEOUT, { match: /\^%x%x%x%x%x%x%x%x%-/ }) // only the lock script's call
    assert.equal(await answer(a, 'k', () => 'fromA', 'a slow lock command'), 'fromA')
    await sleep(3 * REDIS_TIMEOUT) // the delayed SET lands
    proxy.heal()
    const status = {}
    const got = await within(
      b.getOrLoad('k', () => 'fromB', { status }),
      2500,
      `B's call (lockTtl ${lockTtl})`,
    )
    assert.ok(got === 'fromA' || got === 'fromB', `B answers with a loaded value: ${got}`)
  },
)

test('repeated cuts while callers run: no rejection, and Redis is used again at the end', T, async (t) => {
  // A short lockTtl: a lock left behind by a cut (see [ghost lock]) must not
  // decide this test.
  const env = await setup(t, 'flap:', { lockTtl: 600 })
  if (!env) return
  const { proxy, a } = env
  let stop = false
  let calls = 0
  const worker = async (w) => {
    for (let i = 0; !stop; i++) {
      const key = `w${w}-${i % 20}`
      const v = await answer(a, key, loaderOf(key), 'flapping')
      assert.equal(v, key)
      calls++
      await sleep(5)
    }
  }
  const workers = Array.from({ length: 5 }, (_, w) => worker(w))
  for (let i = 0; i < 8; i++) {
    await sleep(100)
    if (i % 3 === 0) proxy.blackhole()
    else if (i % 3 === 1) proxy.cut()
    else proxy.delay(300)
    await sleep(100)
    proxy.heal()
  }
  stop = true
  await within(Promise.all(workers), CALL_BOUND * 2, 'the callers')
  t.diagnostic(`${calls} calls, proxy ${JSON.stringify(proxy.stats)}`)
  assert.ok(calls > 50, `the callers kept being answered (${calls} calls)`)
  await resumesAfterHeal(t, env, 'flap:', 'flapping')
  assert.deepEqual(unhandled, [], 'no unhandled rejection')
})
