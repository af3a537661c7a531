// Hand-written types of the public entry (index.js). The options the addon
// takes are declared, with their docs, on the Rust side (`cache_options!` in
// src/core/options.rs) and reach this file through the generated binding.d.ts.

import type { CacheOptions as NativeCacheOptions } from './binding'

/** A key: a non-empty string, or an array of strings and finite numbers. */
export type Key = string | ReadonlyArray<string | number>

/** How one `getOrLoad` call was answered. */
export type Outcome = 'hit' | 'stale' | 'negative' | 'miss' | 'coalesced'

/** `status.source`: this process's memory, Redis (written there before), another instance's load (this one found the lock taken), or a load in this process (this call's, or one it joined). */
export type StatusSource = 'memory' | 'redis' | 'fleet' | 'load'

/** `status.lock`: with Redis, what the fleet lock said when the call's load asked for it. */
export type StatusLock = 'won' | 'lost'

/** `status.stale`: why a stale value was served: a refresh started or running; no refresh, the key backs off after failed ones; `softTimeout` passed first; the refresh failed (stale-if-error). */
export type StatusStale = 'refresh' | 'backoff' | 'timeout' | 'error'

/**
 * What a call that passes `status` is told of how it was answered; filled only then, so a call without one
 * pays nothing. Fields a call's answer does not have are left as they were.
 */
export interface CallStatus {
  /** How this call was answered (with Redis, updated if another instance's value answered it). */
  outcome?: Outcome
  /** Where the value came from. Not set when the call rejects. */
  source?: StatusSource
  /** With Redis, when the call's load asked the fleet lock. */
  lock?: StatusLock
  /** Why a stale value was served (set only then). */
  stale?: StatusStale
  /** ms of freshness the value had left when answered from memory or Redis (negative: stale for that long). */
  ttl?: number
  /** ms from the call to its answer. */
  waitedMs?: number
}

export interface LoaderContext<K extends Key = Key> {
  /** The key as the caller passed it. */
  readonly key: K
  /**
   * Aborts when the load passes `hardTimeout` or the cache is closed; never
   * because one caller stopped waiting. Pass it on to your database client.
   */
  readonly signal: AbortSignal
  /**
   * Sets this entry's soft TTL, and its hard TTL (without it, the call's
   * hardTtl/ttl ratio is kept), in ms, from what was loaded: a token's own
   * expiry, say. The call options' rules apply (a TypeError or RangeError
   * with code `ERR_HERDCACHE_INVALID_OPTION`).
   */
  setTtl(ttl: number, hardTtl?: number): void
  /**
   * The callers of this load get its result, but nothing is stored (in
   * memory nor Redis); the next call loads again.
   */
  noStore(): void
  /**
   * The value this process holds for the key as the loader starts, fresh or
   * stale (a refresh, `forceFresh`, a `stale: false` call); undefined on a
   * cold load.
   */
  readonly stale: HeldValue | undefined
  /**
   * Stores a validator (an HTTP `ETag` or `Last-Modified`: 1 to 1024 bytes
   * on one line) with the value, in memory and in Redis: a later refresh, on
   * any instance, finds it in `stale.etag`. A TypeError or RangeError with
   * code `ERR_HERDCACHE_INVALID_OPTION` otherwise.
   */
  setEtag(etag: string): void
  /**
   * The origin said {@link LoaderContext.stale} has not changed (an HTTP
   * 304): the load ends with that value, fresh for a new TTL, its validator
   * kept; what the loader returns is ignored. In Redis only the entry's
   * deadlines are rewritten. An Error with code
   * `ERR_HERDCACHE_INVALID_OPTION` when there is no `stale`.
   */
  keep(): undefined
}

/** {@link LoaderContext.stale}: a value this process holds. */
export interface HeldValue {
  readonly value: unknown
  /** ms since the load that produced it began. */
  readonly age: number
  /** What its loader gave `setEtag`, on whichever instance; undefined: none. */
  readonly etag: string | undefined
}

/**
 * Loads a value. `null` or `undefined` means "not found" and is cached for
 * `negativeTtl`. The result must be JSON-representable.
 */
export type Loader<T, K extends Key = Key> = (context: LoaderContext<K>) => T | PromiseLike<T>

/** What a {@link Cache.getOrLoadMany} loader gets besides the missing keys. */
export interface BatchLoaderContext<K extends Key = Key> {
  /** Aborts once every key of this loader call was given up (`hardTimeout` passed, or the cache was closed). */
  readonly signal: AbortSignal
  /** {@link LoaderContext.setTtl} for one of this call's keys (another key: `ERR_HERDCACHE_INVALID_KEY`). */
  setTtl(key: K, ttl: number, hardTtl?: number): void
  /** {@link LoaderContext.noStore} for one of this call's keys. */
  noStore(key: K): void
}

/**
 * Loads the keys getOrLoadMany could not answer, in one call: a `Map` from key to value (a key it lacks is
 * "not found", `null`) or an array aligned with `missingKeys`. A value `null`/`undefined` is "not found"; an
 * `Error` fails that key alone.
 */
export type BatchLoader<T, K extends Key = Key> = (
  missingKeys: K[],
  context: BatchLoaderContext<K>,
) => ReadonlyMap<K, T | null | undefined | Error> | readonly (T | null | undefined | Error)[] | PromiseLike<ReadonlyMap<K, T | null | undefined | Error> | readonly (T | null | undefined | Error)[]>

/** The options of {@link Cache.getOrLoadMany}: getOrLoad's for every key (but `status`), and `maxBatchSize`. */
export interface ManyOptions extends Omit<CallOptions, 'status'> {
  /** The most keys one loader call is given, an integer `>= 1`; default 100. */
  maxBatchSize?: number
}

/**
 * Each option may also be `undefined`, which means absent (the default), so
 * `redis: process.env.REDIS_URL` compiles under `exactOptionalPropertyTypes`.
 */
type AbsentAsUndefined<T> = { [K in keyof T]?: T[K] | undefined }

/** A Redis Cluster (or Valkey cluster) as the `redis` option: the URLs of some of its nodes. */
export interface RedisClusterOptions {
  /** Seed nodes, e.g. `['redis://127.0.0.1:7000', 'redis://127.0.0.1:7001']`: user, password and TLS as for one node. */
  cluster: readonly string[]
}

/**
 * How values are stored, in place of the built-in `'json'`: superjson, msgpackr, protobuf, … `name` is stored
 * with every value (1 to 64 letters, digits or `._:@/+-`, not `json`); a value written under another name is a
 * miss, loaded again. `deserialize` gets what `serialize` returned: a string back as a string, bytes as a Buffer.
 */
export interface Serializer {
  name: string
  serialize(value: unknown): Uint8Array | string
  deserialize(stored: Buffer | string): unknown
}

/** The `compress` option: values of `threshold` stored bytes or more are stored zstd-compressed at `level`. */
export interface CompressOptions {
  /** Stored bytes from which a value is compressed; default 1024. */
  threshold?: number | undefined
  /** zstd level, 1 to 22; default 3. */
  level?: number | undefined
}

export interface CacheOptions
  extends AbsentAsUndefined<Omit<NativeCacheOptions, 'redis' | 'serializer' | 'compress'>> {
  /**
   * Values of `threshold` stored bytes or more (default 1024) are stored zstd-compressed in Redis when that
   * saves bytes; every reader decompresses them, whatever its own option. The L1 keeps values as they are.
   */
  compress?: CompressOptions | undefined
  /**
   * How values are stored: `'json'` (the default: JSON text, with `Buffer`, `Uint8Array` and `ArrayBuffer`
   * parts kept as raw bytes), or a {@link Serializer} of the application's.
   */
  serializer?: 'json' | Serializer | undefined
  /**
   * A `redis://` or `rediss://` URL (user, password and db in the URL), or `{ cluster: [url, ...] }` for a
   * Redis Cluster. With it, all instances sharing the Redis recompute a key once per expiry between them.
   * Without it, the embedded in-process store.
   */
  redis?: string | RedisClusterOptions | undefined
  /**
   * Receives every background refresh's promise (it never rejects), so a
   * serverless host keeps the function alive until the refresh is done:
   * Vercel's `waitUntil`, Next.js `after()`.
   */
  waitUntil?: ((promise: Promise<void>) => void) | undefined
  /**
   * Background refresh failures; they never reject anybody's call. With Redis, also what `close()` could
   * not deliver: an {@link UndeliveredError} (`key` is undefined then; its `keys` name them).
   */
  onError?: ((error: unknown, info: { key: Key | undefined; background: true }) => void) | undefined
}

export interface EntryOptions {
  /** Soft TTL, ms, of the entry this call writes. */
  ttl?: number
  /** Hard TTL, ms, of the entry this call writes; defaults keep the cache's hardTtl/ttl ratio. */
  hardTtl?: number
  /**
   * Tags of the entry this call writes (at most 64 non-empty strings of at most 1024 bytes): `deleteByTag(tag)`
   * invalidates every entry carrying one, on every instance. A background refresh given none keeps the entry's.
   */
  tags?: readonly string[]
}

export interface CallOptions extends EntryOptions {
  /** XFetch eagerness for this call. */
  beta?: number
  /** How long, ms, a "not found" result of this call's load is cached. */
  negativeTtl?: number
  /** How long, ms, this process uses its copy of the entry this call writes; past it a call reads Redis again. */
  l1Ttl?: number
  /** `false`: never answer this call with a stale value (balances, prices, personal data). */
  stale?: boolean
  /** Stops this caller waiting (rejects with `signal.reason`); the load goes on for others. */
  signal?: AbortSignal
  /** Receives how this call was answered: `outcome`, `source`, `lock`, `stale`, `ttl`, `waitedMs` ({@link CallStatus}). */
  status?: CallStatus
}

/** The options of one `getOrLoad` call: {@link CallOptions}, and where the call may read and write. */
export interface GetOrLoadOptions extends CallOptions {
  /**
   * `true`: load now, even if a fresh value is cached here or in Redis; joins a load of the key already running
   * here, and no value written before the call answers it. If the loader fails, a value in memory (fresh or stale)
   * answers, unless `stale: false`.
   */
  forceFresh?: boolean
  /** `false`: this call neither reads nor writes this process's memory (L1); it still coalesces and uses Redis. */
  l1?: boolean
  /** `false`: this call neither reads, locks nor writes Redis: memory and this process's load only. */
  redis?: boolean
}

export interface GetOptions {
  /** `false`: a stale value is `undefined`. */
  stale?: boolean
}

/** Counters since the cache was made, and two gauges (`size`, `inFlight`). */
export interface CacheStats {
  /** Fresh values served. */
  hits: number
  /** Stale values served while a refresh ran. */
  staleServed: number
  /** "Not found" markers served. */
  negativeHits: number
  /** Calls that ran the loader themselves. */
  misses: number
  /** Calls that joined a load in flight. */
  coalesced: number
  /** Loader runs, foreground and background. */
  loads: number
  /** Loader runs that failed. */
  loadErrors: number
  /** Background refreshes started (stale or early). */
  backgroundRefreshes: number
  /** Of those, started early by XFetch. */
  earlyRefreshes: number
  /** Background refreshes that failed. */
  backgroundErrors: number
  /** Loads given up at `hardTimeout`. */
  timeouts: number
  /** Entries evicted by `maxEntries`. */
  evictions: number
  /** Entries reclaimed past their hard TTL. */
  expirations: number
  /** Entries held now. */
  size: number
  /** Bytes held in memory now, as `l1MaxBytes` counts them (each value's JSON text and its key); 0 without `l1MaxBytes` or `l1MaxValueBytes`. */
  l1Bytes: number
  /** Loads running now. */
  inFlight: number
  /** With Redis: calls answered from the in-process L1 without Redis. */
  l1Hits: number
  /** With Redis: loads answered by a value another instance wrote. */
  redisHits: number
  /** With Redis: fleet locks won (recomputes this instance ran for the fleet): `cache_lock_acquired`. */
  lockAcquired: number
  /** With Redis: loads that found the fleet lock taken. */
  lockContended: number
  /** With Redis: waits for another instance's fill notice. */
  lockWaits: number
  /** With Redis: fill notices that ended a wait. */
  fillNotices: number
  /** With Redis: Redis commands that failed or timed out (the call was served without Redis). */
  redisErrors: number
  /** With Redis: values in Redis that were not herdcache entries (treated as misses). */
  corruptValues: number
  /** With Redis: bytes of the values written to Redis, before compression (JSON text or encoded bytes). */
  valueBytesWritten: number
  /** With Redis: the same values' bytes after compression (`compress`): what Redis was sent. */
  valueBytesStored: number
  /** With Redis: 1 while the circuit breaker skips Redis after a failure. */
  circuitOpen: number
  /** With Redis: `set`/`delete`/`clear` calls that could not reach Redis, delivered later (auto-recovery). */
  recovered: number
  /** With Redis: such calls given up: past `recoveryMaxEntries` or `recoveryMaxAge`, or undelivered at `close()`. */
  recoveryDropped: number
  /** With Redis: such calls waiting now to be delivered. */
  recoveryPending: number
  /** With Redis: 1 while the last Redis command got an answer (the command connection is up). */
  redisConnected: number
  /** With Redis: 1 while the events subscription is live. */
  redisSubscribed: number
  /** With Redis and `tracking`: 1 while Redis tells this instance's L1 of changes made outside herdcache. */
  redisTracking: number
  /** With Redis and `tracking`: changes made outside herdcache (redis-cli, other services, `EXPIRE`, evictions, `FLUSHDB`) applied to the L1. */
  trackedChanges: number
  /** With Redis and `tracking`: herdcache's own changes Redis's tracking told again, not applied twice. */
  trackedEchoes: number
  /** With `maxConcurrentLoads`: loads that waited in its queue for a slot. */
  loadsQueued: number
  /** With `maxConcurrentLoads`: ms loads waited in that queue, all of them together. */
  loadQueueWaitMs: number
  /** With `maxConcurrentLoads`: cold loads refused because the queue was full (`ERR_HERDCACHE_LOAD_QUEUE_FULL`). */
  loadsRejected: number
  /** With `maxConcurrentLoads`: background refreshes not run because the queue was full. */
  refreshesSkipped: number
  /** With `maxConcurrentLoads`: loaders running now. */
  loadSlotsUsed: number
  /** With `maxConcurrentLoads`: loads waiting now for a slot. */
  loadQueueLength: number
  /** With `fleetMaxConcurrentLoads`: slots of the fleet's cap this instance holds now. */
  fleetSlotsHeld: number
  /** With `fleetMaxConcurrentLoads`: loads run without a fleet slot because Redis could not be asked for one. */
  fleetCapBypassed: number
  /** With Redis: the code of the last Redis failure's cause (`ERR_HERDCACHE_REDIS_*`), kept once Redis answers again; else null. */
  lastRedisError: string | null
}

/** An error herdcache made; `code` is stable. */
export interface HerdcacheError extends Error {
  code:
    | 'ERR_HERDCACHE_INVALID_KEY'
    | 'ERR_HERDCACHE_INVALID_LOADER'
    | 'ERR_HERDCACHE_INVALID_OPTION'
    | 'ERR_HERDCACHE_INVALID_VALUE'
    | 'ERR_HERDCACHE_UNSERIALIZABLE'
    | 'ERR_HERDCACHE_VALUE_TOO_LARGE'
    | 'ERR_HERDCACHE_TIMEOUT'
    | 'ERR_HERDCACHE_CLOSED'
    | 'ERR_HERDCACHE_BACKED_OFF'
    | 'ERR_HERDCACHE_UNDELIVERED'
    | 'ERR_HERDCACHE_REDIS_AUTH'
    | 'ERR_HERDCACHE_REDIS_NOPERM'
    | 'ERR_HERDCACHE_REDIS_DB'
    | 'ERR_HERDCACHE_REDIS_UNREACHABLE'
    | 'ERR_HERDCACHE_REDIS_TLS'
    | 'ERR_HERDCACHE_REDIS_TIMEOUT'
    | 'ERR_HERDCACHE_REDIS_FAILED'
    | 'ERR_HERDCACHE_INTERNAL'
    | 'ERR_HERDCACHE_NO_BINARY'
    | 'ERR_HERDCACHE_LOAD_QUEUE_FULL'
    | 'ERR_HERDCACHE_BATCH_RESULT'
    | 'ERR_HERDCACHE_SERIALIZE'
    | 'ERR_HERDCACHE_DESERIALIZE'
}

/** What `close()` reports to `onError` when writes or invalidations could not reach Redis. */
export interface UndeliveredError extends HerdcacheError {
  code: 'ERR_HERDCACHE_UNDELIVERED'
  /**
   * The calls given up, in call order; `key` is the key's string form (none for a clear), `tag` a
   * `deleteByTag`'s tag; a namespace's clear has its encoded names as `namespace` (`'users'`, `'users:eu'`).
   */
  operations: Array<{
    op: 'set' | 'delete' | 'expire' | 'deleteByTag' | 'clear'
    key?: string
    tag?: string
    namespace?: string
  }>
  /** The keys of the `set`, `delete` and `expire` calls among them. */
  keys: string[]
  /** The tags of the `deleteByTag` calls among them. */
  tags: string[]
}

/**
 * The `node:diagnostics_channel` names herdcache publishes on (README, "Tracing"). `getOrLoad` and `refresh` are
 * `tracingChannel` names (events `start`, `end`, `asyncStart`, `asyncEnd`, `error`); the others plain channels.
 * Nobody subscribed, nothing is published.
 */
export declare const channels: {
  /** `tracingChannel`: every `getOrLoad` call, start to settled; messages are {@link GetOrLoadMessage}. */
  readonly getOrLoad: 'herdcache:getOrLoad'
  /** `tracingChannel`: every background refresh (stale or early), led to settled; {@link RefreshMessage}. */
  readonly refresh: 'herdcache:refresh'
  /** With Redis: the fleet decided whether this instance runs a flight's loader; {@link LockMessage}. */
  readonly lock: 'herdcache:lock'
  /** A `set`, `delete` or `clear` call of this instance was accepted; {@link InvalidateMessage}. */
  readonly invalidate: 'herdcache:invalidate'
  /** What the cache reports about Redis (as to `onError`); {@link RedisErrorMessage}. */
  readonly redisError: 'herdcache:redis:error'
}

/**
 * A `herdcache:getOrLoad` message: one object for all the events of one call, filled in as it goes.
 * `outcome` is known from `end` on; `loaded`, and `result` or `error`, from `asyncStart` (after `error`) on.
 */
export interface GetOrLoadMessage {
  cache: Cache
  /** The key as the caller passed it (for a call rejected with `ERR_HERDCACHE_INVALID_KEY`, whatever that was). */
  key: Key
  /**
   * How the call was answered (as `status.outcome`): from `end`, as the call was answered at once; from `asyncStart`,
   * with Redis, what another instance's value made of a `'miss'` or `'coalesced'`. Undefined for a rejected usage.
   */
  outcome: Outcome | undefined
  /** Whether this call's own load ran its loader (a `'miss'` whose loader ran); set at `asyncStart`. */
  loaded: boolean
  /** The value, on `asyncStart` and `asyncEnd` of a fulfilled call. */
  result?: unknown
  /** The rejection (the loader's own error, or a {@link HerdcacheError}), from `error` on. */
  error?: unknown
}

/** A `herdcache:refresh` message: one background refresh, from being led to its promise settling. */
export interface RefreshMessage {
  /** Undefined if the Cache object was collected meanwhile. */
  cache: Cache | undefined
  key: Key
  /** Whether its loader ran (with Redis, false when another instance's value answered it, or it backed off). */
  loaded: boolean
  /** The refreshed value, on `asyncStart` and `asyncEnd` of a fulfilled refresh. */
  result?: unknown
  /** Why it failed (the loader's error, `ERR_HERDCACHE_TIMEOUT`, `_CLOSED`, `_BACKED_OFF`), from `error` on. */
  error?: unknown
}

/** A `herdcache:lock` message: with Redis, the fleet's decision for a flight that asked it who loads. */
export interface LockMessage {
  cache: Cache | undefined
  key: Key
  /** The flight is a background refresh. */
  background: boolean
  /**
   * `true`: this instance runs the loader: it won the fleet lock, or (rarely) asking Redis failed midway and it loads
   * without it (fail-open; `stats().lockAcquired` counts won locks only). `false`: it runs none: another instance's
   * value answered the flight, or its key backs off fleet-wide.
   */
  load: boolean
  /** ms from the flight's start to the decision (its first read, the lock, any wait for the holder's fill notice). */
  waitedMs: number
}

/**
 * A `herdcache:invalidate` message: this instance's `set`, `delete`, `expire`, `deleteByTag` or `clear` call, once
 * accepted.
 */
export interface InvalidateMessage {
  cache: Cache
  op: 'set' | 'delete' | 'expire' | 'deleteByTag' | 'clear'
  /** Undefined for `clear` and `deleteByTag`. */
  key: Key | undefined
  /** A `deleteByTag`'s tags. */
  tags?: readonly string[]
  /** A namespace's `clear()`: its encoded names (`'users'`, `'users:eu'` nested); absent for the others. */
  namespace?: string
}

/** A `herdcache:redis:error` message: what the cache reports about Redis, as `onError` gets it. */
export interface RedisErrorMessage {
  cache: Cache | undefined
  /** `ERR_HERDCACHE_REDIS_*`, or `ERR_HERDCACHE_UNDELIVERED` from `close()`. */
  code: HerdcacheError['code']
  error: HerdcacheError
}

/** The message of each channel, by its name. */
export interface ChannelMessages {
  'herdcache:getOrLoad': GetOrLoadMessage
  'herdcache:refresh': RefreshMessage
  'herdcache:lock': LockMessage
  'herdcache:invalidate': InvalidateMessage
  'herdcache:redis:error': RedisErrorMessage
}

/** Call options a namespace applies to each of its calls, under the call's own. */
export interface NamespaceDefaults {
  ttl?: number | undefined
  hardTtl?: number | undefined
  negativeTtl?: number | undefined
  l1Ttl?: number | undefined
  beta?: number | undefined
  stale?: boolean | undefined
}

/**
 * A view of a {@link Cache} whose keys all start with its names (README, "Namespaces"): `cache.namespace('users')`.
 * It has the cache's per-key calls; `stats()`, `metrics()`, `ready()` and `close()` are its cache's (`view.cache`).
 */
export interface Namespace {
  /** The cache the view belongs to. */
  readonly cache: Cache
  /** The encoded prefix of the view's keys in its cache: `'users:'`, `'users:eu:'` nested. */
  readonly prefix: string
  /** As {@link Cache.getOrLoad}; the loader's `ctx.key` is the key as given to the view. */
  getOrLoad<T, K extends Key = Key>(key: K, loader: Loader<T, K>, options?: GetOrLoadOptions): Promise<T>
  /** As {@link Cache.getOrLoadMany}; the loader is given the missing keys as given to the view. */
  getOrLoadMany<T, K extends Key = Key>(keys: readonly K[], loader: BatchLoader<T, K>, options?: ManyOptions): Promise<(T | null)[]>
  get<T = unknown>(key: Key, options?: GetOptions): Promise<T | undefined>
  set<T>(key: Key, value: T, options?: EntryOptions): Promise<void>
  delete(key: Key): Promise<boolean>
  expire(key: Key): Promise<boolean>
  /** The cache's `deleteByTag`: tags belong to the cache, so every entry carrying one goes, in any namespace. */
  deleteByTag(tags: string | readonly string[]): Promise<void>
  /** Removes this namespace's entries (nested namespaces' too) here, in Redis and on every instance; no others. */
  clear(): Promise<void>
  /** A namespace nested in this one; its defaults are merged over this view's. */
  namespace(name: string, defaults?: NamespaceDefaults): Namespace
}

/** Test hooks; not part of the stable API. */
export declare const kTesting: unique symbol

export declare class Cache {
  /** @throws {HerdcacheError} `ERR_HERDCACHE_INVALID_OPTION` */
  constructor(options?: CacheOptions)

  /**
   * The cached value for `key`, or the loader's. Concurrent callers of one
   * key share one load; a stale value is served at once while one
   * background refresh runs. The value is shared between callers: treat it
   * as read-only.
   */
  getOrLoad<T, K extends Key = Key>(key: K, loader: Loader<T, K>, options?: GetOrLoadOptions): Promise<T>

  /**
   * The values of `keys`, in order: each key as {@link Cache.getOrLoad} answers it (from memory, Redis, or a load
   * another caller or instance runs), and the keys this process must load in one `loader(missingKeys, ctx)` call
   * per `maxBatchSize`. Rejects, once every key settled, with the first failed key's error; the others are stored.
   */
  getOrLoadMany<T, K extends Key = Key>(keys: readonly K[], loader: BatchLoader<T, K>, options?: ManyOptions): Promise<(T | null)[]>

  /** The cached value (fresh, or stale unless `stale: false`), or `undefined`. Never loads. */
  get<T = unknown>(key: Key, options?: GetOptions): Promise<T | undefined>

  /** Writes a value (not `null`/`undefined`); a load in flight for the key is not stored. */
  set<T>(key: Key, value: T, options?: EntryOptions): Promise<void>

  /** Removes the key; a load in flight for it is not stored. `true` if something was removed. */
  delete(key: Key): Promise<boolean>

  /**
   * Makes the key's value stale now (a soft invalidation), on every instance: it is kept until its hard TTL, so
   * the next reader gets it at once and one refresh runs (fleet-wide); a caller with `stale: false` loads. A load
   * in flight for the key is not stored. `true` if a fresh value was made stale.
   */
  expire(key: Key): Promise<boolean>

  /**
   * Invalidates every entry carrying `tags` (one tag, or several), on every instance, without scanning or deleting
   * keys: each entry is judged by its tags' invalidation stamps as it is read, and a load in flight carrying one is
   * not stored. With Redis, settles once the fleet was told (or the invalidation was kept for auto-recovery).
   */
  deleteByTag(tags: string | readonly string[]): Promise<void>

  /** Removes every entry. */
  clear(): Promise<void>

  /**
   * A view whose keys all start with the part `name` (`ns.get('42')` is this cache's `'users:42'`, `ns.get([42])`
   * its `['users', 42]`), sharing this cache's memory, Redis connection, flights and counters. `defaults` are call
   * options under each call's own. Its `clear()` removes only its keys, on every instance.
   *
   * @throws {HerdcacheError} `ERR_HERDCACHE_INVALID_KEY` (name), `ERR_HERDCACHE_INVALID_OPTION` (defaults)
   */
  namespace(name: string, defaults?: NamespaceDefaults): Namespace

  /** Counters and gauges. */
  stats(): CacheStats

  /**
   * Resolves once Redis answered as the fleet needs it (connected, authenticated, db selected, scripts loaded,
   * events subscription live), at once without Redis; rejects with the cause's coded error
   * (`ERR_HERDCACHE_REDIS_*`) within twice `redisTimeout`. Calls made meanwhile fail open as ever.
   */
  ready(): Promise<void>

  /** The counters in the Prometheus text format (`herdcache_…`). */
  metrics(): string

  /** Rejects new calls, aborts the signals of loads in flight, resolves when they settled. */
  close(): Promise<void>

  [kTesting]: {
    advanceClock(ms: number): void
    /**
     * This host's wall clock reads `ms` off (positive: ahead). With Redis the offset to the server's clock is
     * measured again, which corrects it; resolves once it was (true if Redis answered).
     */
    skewClock(ms: number): Promise<boolean>
    setRandom(draws: { jitter?: number | null; xfetch?: number | null }): void
  }
}
