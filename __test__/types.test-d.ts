// Type test: compiled by __test__/types.test.js with `tsc --noEmit --strict`.
// Every public API of the README is used here; misuse is marked with @ts-expect-error
// (tsc fails on an expect-error line that is not an error).
import * as diagnostics_channel from 'node:diagnostics_channel'
import {
  Cache,
  type ChannelMessages,
  channels,
  type BatchLoaderContext,
  type GetOrLoadMessage,
  type InvalidateMessage,
  type Key,
  type LockMessage,
  type ManyOptions,
  type Namespace,
  type NamespaceDefaults,
  type RedisErrorMessage,
  type RefreshMessage,
  type UndeliveredError,
} from '..'

type Outcome = 'hit' | 'stale' | 'negative' | 'miss' | 'coalesced'

async function main(): Promise<void> {
  const collected: Promise<unknown>[] = []
  const cache = new Cache({
    ttl: 60_000,
    hardTtl: 600_000,
    jitter: 0.1,
    beta: 1,
    negativeTtl: 5000,
    softTimeout: 0,
    hardTimeout: 30_000,
    refreshBackoff: 10_000,
    maxEntries: 10_000,
    maxConcurrentLoads: 50,
    maxQueuedLoads: 1_000,
    prefix: 'app:',
    waitUntil: (promise) => {
      collected.push(promise)
    },
    onError: (error, info) => {
      const background: boolean = info.background
      const key = info.key
      if ((error as UndeliveredError).code === 'ERR_HERDCACHE_UNDELIVERED') {
        const undelivered = error as UndeliveredError
        const keys: string[] = undelivered.keys
        const ops: Array<'set' | 'delete' | 'expire' | 'deleteByTag' | 'clear'> = undelivered.operations.map(
          (o) => o.op,
        )
        const tags: string[] = undelivered.tags
        void tags
        const namespaces: Array<string | undefined> = undelivered.operations.map((o) => o.namespace)
        void namespaces
        void keys
        void ops
      }
      void error
      void background
      void key
    },
  })
  const defaults = new Cache()
  const empty = new Cache({})

  // getOrLoad: string and array keys, async and sync loaders, the loader context
  const feed = await cache.getOrLoad(['feed', 'tenant-1', 'en', 42], async ({ key, signal }) => {
    const s: AbortSignal = signal
    void s
    void key
    return { items: [1, 2, 3], title: 'home' }
  })
  const n: number = feed.items[0]
  const title: string = feed.title
  void n
  void title

  // the loader adapts its entry: its own TTLs, or nothing stored
  const token = await cache.getOrLoad(['token', 't1'], async (ctx) => {
    ctx.setTtl(30_000)
    ctx.setTtl(30_000, 60_000)
    // @ts-expect-error a TTL is a number of ms
    ctx.setTtl('30s')
    ctx.noStore()
    return { token: 'abc' }
  })
  void token
  // a conditional refresh: the held value, its validator, keep()
  const page = await cache.getOrLoad('page', async (ctx) => {
    const held: { value: unknown; age: number; etag: string | undefined } | undefined = ctx.stale
    if (held?.etag === '"v1"') return ctx.keep()
    ctx.setEtag('"v1"')
    // @ts-expect-error a validator is a string
    ctx.setEtag(1)
    return 'body'
  })
  const maybePage: string | undefined = page
  void maybePage
  const count: number = await cache.getOrLoad('count', () => 7)
  void count
  const maybe = await cache.getOrLoad('user:404', async () => null)
  void maybe

  // call options
  const ac = new AbortController()
  const status: { outcome?: Outcome } = {}
  const v = await cache.getOrLoad('k', async () => 'v', {
    ttl: 1000,
    hardTtl: 10_000,
    beta: 0,
    negativeTtl: 0,
    stale: false,
    signal: ac.signal,
    status,
  })
  const str: string = v
  void str
  const outcome: Outcome | undefined = status.outcome
  void outcome
  const p: Promise<string> = cache.getOrLoad('k2', () => 'x')
  void p

  // other methods (the README does not say whether they are sync or async: await works for both)
  const got: unknown = await cache.get('k')
  const gotFresh: unknown = await cache.get(['k', 1], { stale: false })
  void got
  void gotFresh
  await cache.set('k', { a: 1 })
  await cache.set(['k', 2], 'v', { ttl: 100, hardTtl: 200 })
  const removed: boolean = await cache.delete('k')
  void removed
  const expired: boolean = await cache.expire(['k', 1])
  void expired
  await cache.set('k', 'v', { tags: ['user:1'] })
  const tagged: number = await cache.getOrLoad('k', () => 1, { tags: ['user:1', 'tenant:7'] as const })
  void tagged
  await cache.deleteByTag('user:1')
  await cache.deleteByTag(['user:1', 'tenant:7'])
  await cache.clear()

  // getOrLoadMany: a Map or an array, per-key TTLs, the batch size
  type Row = { id: number; name: string }
  const manyOptions: ManyOptions = { ttl: 60_000, maxBatchSize: 50, tags: ['users'] }
  const rows: (Row | null)[] = await cache.getOrLoadMany(
    [1, 2, 3].map((id) => ['user', id] as [string, number]),
    async (missing, ctx: BatchLoaderContext<[string, number]>) => {
      const first = missing[0]
      if (first !== undefined) ctx.setTtl(first, 1000)
      void ctx.signal
      return new Map(missing.map((key): [[string, number], Row] => [key, { id: key[1], name: 'n' }]))
    },
    manyOptions,
  )
  const names: (string | null)[] = await cache.getOrLoadMany(['a', 'b'], (missing, ctx) => {
    ctx.noStore('a')
    return missing.map((k) => (k === 'a' ? null : k))
  })
  void rows
  void names

  // namespaces
  const defaultsOfUsers: NamespaceDefaults = { ttl: 300_000, stale: false }
  const users: Namespace = cache.namespace('users', defaultsOfUsers)
  const eu: Namespace = users.namespace('eu', { hardTtl: 600_000 })
  const prefix: string = eu.prefix
  const owner: Cache = users.cache
  const profile: { name: string } = await users.getOrLoad(['42', 'profile'] as const, (ctx) => {
    const given: readonly ['42', 'profile'] = ctx.key
    void given
    ctx.setTtl(1000)
    return { name: 'Ada' }
  })
  const nsMany: (number | null)[] = await users.getOrLoadMany(['1', '2'], async (missing) => missing.map(Number))
  void nsMany
  const nsGot: unknown = await users.get('42', { stale: true })
  await users.set('43', 1, { ttl: 100 })
  const nsRemoved: boolean = await users.delete(['43'])
  const nsExpired: boolean = await eu.expire('1')
  await eu.clear()
  void prefix
  void owner
  void profile
  void nsGot
  void nsRemoved
  void nsExpired
  // @ts-expect-error a namespace name is a string
  cache.namespace(42)
  // @ts-expect-error signal belongs to one call, not to a namespace's defaults
  cache.namespace('s', { signal: AbortSignal.timeout(1) })
  // @ts-expect-error a view has no stats() of its own: view.cache.stats()
  users.stats()
  // @ts-expect-error nor close()
  users.close()

  const s = cache.stats()
  const total: number =
    s.hits +
    s.staleServed +
    s.negativeHits +
    s.misses +
    s.coalesced +
    s.loads +
    s.loadErrors +
    s.backgroundRefreshes +
    s.earlyRefreshes +
    s.backgroundErrors +
    s.timeouts +
    s.evictions +
    s.expirations +
    s.size +
    s.inFlight +
    s.recovered +
    s.recoveryDropped +
    s.recoveryPending +
    s.loadsQueued +
    s.loadQueueWaitMs +
    s.loadsRejected +
    s.refreshesSkipped +
    s.loadSlotsUsed +
    s.loadQueueLength
  void total
  const text: string = cache.metrics()
  void text
  const closing: Promise<unknown> = cache.close()
  await closing
  await defaults.close()
  await empty.close()

  // ---- misuse ----
  // @ts-expect-error getOrLoadMany takes an array of keys
  cache.getOrLoadMany('k', async () => [])
  // @ts-expect-error status belongs to one getOrLoad call
  cache.getOrLoadMany(['k'], async () => [], { status: {} })
  // @ts-expect-error the loader returns a Map or an array
  cache.getOrLoadMany(['k'], async () => 'v')
  // @ts-expect-error a number is not a key
  cache.getOrLoad(42, () => 1)
  // @ts-expect-error the loader is required
  cache.getOrLoad('k')
  // @ts-expect-error the loader must be a function
  cache.getOrLoad('k', 'loader')
  // @ts-expect-error an object is not a key part
  cache.getOrLoad([{ id: 1 }], () => 1)
  // @ts-expect-error stale is a boolean
  cache.getOrLoad('k', () => 1, { stale: 'no' })
  // @ts-expect-error ttl is a number
  new Cache({ ttl: '1000' })
  // @ts-expect-error unknown option (typo)
  new Cache({ tll: 1000 })
  // @ts-expect-error maxConcurrentLoads is a number
  new Cache({ maxConcurrentLoads: '50' })
  new Cache({ serializer: 'json' })
  new Cache({
    serializer: { name: 'text', serialize: (v: unknown) => JSON.stringify(v), deserialize: (s) => JSON.parse(String(s)) },
  })
  // @ts-expect-error a serializer other than 'json' is an object with its functions
  new Cache({ serializer: 'msgpack' })
  // @ts-expect-error serialize returns bytes or a string
  new Cache({ serializer: { name: 'n', serialize: () => 1, deserialize: (s) => s } })
  // @ts-expect-error delete needs a key
  cache.delete()
  // @ts-expect-error expire needs a key
  cache.expire()
  // @ts-expect-error tags are strings
  cache.getOrLoad('k', () => 1, { tags: [1] })
  // @ts-expect-error deleteByTag needs a tag
  cache.deleteByTag()
  // @ts-expect-error stats are read-only numbers, not strings
  const bad: string = cache.stats().hits
  void bad
}

void main

// An option may be undefined (absent), under exactOptionalPropertyTypes too: the README's first example.
const fromEnv = new Cache({ ttl: 60_000, redis: process.env.REDIS_URL, onError: undefined })
void fromEnv

// A Redis Cluster: the URLs of some of its nodes.
const seeds = ['redis://127.0.0.1:7000', 'redis://127.0.0.1:7001'] as const
const onCluster = new Cache({ redis: { cluster: seeds }, prefix: 'app:' })
void onCluster
// @ts-expect-error a cluster is named by its nodes' URLs
void new Cache({ redis: { cluster: 'redis://127.0.0.1:7000' } })
// @ts-expect-error an array of URLs is not a cluster: { cluster: [...] }
void new Cache({ redis: ['redis://127.0.0.1:7000'] })

// herdcache/prometheus: the package's own subpath, with prom-client's registries.
import { collectInto, type CollectOptions } from 'herdcache/prometheus'
import { type OpenMetricsContentType, Registry, register } from 'prom-client'

const scraped = new Cache()
const uncollect: () => void = collectInto(register, scraped)
const named: CollectOptions = { name: 'users' }
collectInto(new Registry(), scraped, named)
collectInto(new Registry<OpenMetricsContentType>(), scraped, { name: undefined })
uncollect()
// @ts-expect-error the registry comes first
collectInto(scraped, register)
// @ts-expect-error the cache is required
collectInto(register)
// @ts-expect-error the name is a string: the `cache` label's value
collectInto(register, scraped, { name: 1 })
// @ts-expect-error an unknown option
collectInto(register, scraped, { label: 'users' })

// Tracing: the channel names are literal types, and each message is typed.
const getOrLoadName: 'herdcache:getOrLoad' = channels.getOrLoad
const names: string[] = [channels.refresh, channels.lock, channels.invalidate, channels.redisError]
void getOrLoadName
void names
// @ts-expect-error the names are read-only
channels.lock = 'mine'
const loads = diagnostics_channel.tracingChannel<unknown, GetOrLoadMessage>(channels.getOrLoad)
loads.subscribe({
  start(message) {
    const key: Key = message.key
    const cache: Cache = message.cache
    void key
    void cache
  },
  end() {},
  asyncStart() {},
  asyncEnd(message) {
    const outcome: 'hit' | 'stale' | 'negative' | 'miss' | 'coalesced' | undefined = message.outcome
    const loaded: boolean = message.loaded
    const result: unknown = message.result
    void outcome
    void loaded
    void result
  },
  error(message) {
    const error: unknown = message.error
    void error
  },
})
diagnostics_channel.tracingChannel<unknown, RefreshMessage>(channels.refresh).subscribe({
  start() {},
  end() {},
  asyncStart() {},
  asyncEnd(message) {
    const loaded: boolean = message.loaded
    const cache: Cache | undefined = message.cache
    void loaded
    void cache
  },
  error() {},
})
diagnostics_channel.subscribe(channels.lock, (message) => {
  const { load, waitedMs, background }: LockMessage = message as ChannelMessages[typeof channels.lock]
  const decided: boolean = load && background
  const ms: number = waitedMs
  void decided
  void ms
})
diagnostics_channel.subscribe(channels.invalidate, (message) => {
  const { op, key, namespace } = message as InvalidateMessage
  const what: 'set' | 'delete' | 'expire' | 'deleteByTag' | 'clear' = op
  const which: Key | undefined = key
  const cleared: string | undefined = namespace
  void cleared
  void what
  void which
})
diagnostics_channel.subscribe(channels.redisError, (message) => {
  const { code, error } = message as RedisErrorMessage
  const coded: string = error.code
  void code
  void coded
})
// @ts-expect-error op is set, delete, expire or clear
const evicted: InvalidateMessage['op'] = 'evict'
void evicted
// @ts-expect-error a lock message says load, not acquired
const acquired: LockMessage['acquired'] = true
void acquired
// @ts-expect-error the outcome is one of the Outcome names
const odd: GetOrLoadMessage['outcome'] = 'expired'
void odd
