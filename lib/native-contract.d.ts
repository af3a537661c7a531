// The contract between the native addon and the JS wrapper, written down
// once. Nothing here is public API: users see index.d.ts.
//
// `index.js` makes a `NativeCache`, then calls `install(ctx, lead, softWait)`
// once. The addon keeps `lead` and `softWait` (module functions of
// lib/flight.js) strongly and `ctx` weakly, writes the validated timeouts onto
// `ctx`, and returns the raw entry points below (`napi_create_function`s,
// src/binding/mod.rs `ENTRY_POINTS`; their bodies are src/binding/hot.rs and
// src/binding/fleet.rs). The raw entry points take positional arguments and
// do not check their types beyond what the key and the call options need:
// only index.js and lib/ call them, as described here.
//
// `key` is the encoded key (a string) everywhere except `getOrLoad`, `get`,
// `set`, `delete`, `peek` and `startRefresh`, which take the key as the user
// passed it (a string or an array) and encode it themselves. `id` is the
// flight id the addon gave `lead`.
//
// After `close()`: `getOrLoad`, `get`, `set`, `delete`, `clear` and `peek`
// throw ERR_HERDCACHE_CLOSED (index.js turns that into a rejection); the
// leader's reports (`attachFlight`, `fill`, `fail`, `endFlight`,
// `acceptsStale`, `adopt`, `releaseLock`, `forget`, `acquire`) still work
// for the loads in flight; `stats` and `metrics` still answer. The Redis
// entry points (`acquire`, `readMany`, `peek`) throw ERR_HERDCACHE_CLOSED
// once the cache is released.
//
// __test__/native-contract.test.js checks that `install()` returns exactly
// the members of `EntryPoints`, that `ctx` holds exactly the members of
// `Context`, and that index.js and lib/ use no other name.

/** What `acquire` and `readMany` answer for a flight with Redis. */
export interface Acquired {
  /** `value`: a fresh value answers the flight; `stale`: a stale one may; `load`: run the loader. */
  kind: 'value' | 'stale' | 'load'
  /** With `value` and `stale`: the value's JSON text. */
  json?: string
  /** With `value` and `stale`: the envelope's fields (epoch ms, ms, stamp), for `adopt`. */
  freshUntil?: number
  hardUntil?: number
  computeMs?: number
  stamp?: number
  negative?: boolean
  /** With `load`: the fleet lock's token, when this instance won it (absent: Redis was skipped). */
  token?: string
}

/** One load in flight, as lib/flight.js keeps it in `ctx.active`. */
export interface Flight {
  /** The promise every caller of the flight shares; it settles after `endFlight`. */
  promise: Promise<unknown>
  /** Aborts the loader's signal and gives the load up with `reason`. */
  abort(reason: Error): void
  /** `performance.now()` past which the load times out (`hardTimeout`). */
  deadline: number
  /** Gives the load up with ERR_HERDCACHE_TIMEOUT (the deadline passed). */
  expire(): void
}

/** The raw functions `install()` returns. */
export interface EntryPoints {
  /**
   * The hot path: one call answers a hit (a settled promise), a join (the
   * flight's promise) or a stale read, or starts a load through `lead`. The
   * outcome is written to `outcomeBuffer[0]` (`names().outcomes[b - 1]`).
   * The call options come positionally (undefined: not given).
   */
  getOrLoad(
    key: unknown,
    loader: unknown,
    stale?: unknown,
    ttl?: unknown,
    hardTtl?: unknown,
    negativeTtl?: unknown,
    beta?: unknown,
  ): Promise<unknown>
  /** The leader made the flight's shared promise (before the loader runs); false if the flight is gone. */
  attachFlight(key: string, id: number, promise: Promise<unknown>): boolean
  /**
   * The loader's result: `value` (its JSON-normalised copy), `json` its text.
   * Without Redis: whether it was stored. With Redis: the write's promise,
   * 1 written, 0 Redis kept a newer value (call `forget`), -1 not written.
   */
  fill(
    key: string,
    id: number,
    value: unknown,
    negative: boolean,
    computeMs: number,
    json: string | undefined,
    token: string | undefined,
  ): boolean | Promise<1 | 0 | -1>
  /** The load failed (or timed out); with Redis, the lock `token` is released. */
  fail(key: string, id: number, background: boolean, timedOut: boolean, token: string | undefined, loaderRan: boolean): void
  /** The flight leaves the table; called before its promise settles. */
  endFlight(key: string, id: number): void
  /** A soft wait ended: answered by the stale value (true) or by the refresh. */
  recordSoftWait(servedStale: boolean): void
  /** The value in memory, or undefined; never loads. `stale: false` refuses a stale one. */
  get(key: unknown, stale?: unknown): unknown
  /** Stores `value` (JSON-normalised; `json` its text, for Redis); with Redis, the write's promise. */
  set(key: unknown, value: unknown, ttl?: unknown, hardTtl?: unknown, json?: string): Promise<boolean> | undefined
  /** Whether a live entry was removed; with Redis, a promise of whether Redis or memory had one. */
  delete(key: unknown): boolean | Promise<boolean>
  /** Removes every entry; with Redis, a promise. */
  clear(): Promise<void> | undefined
  /** The counters and gauges (`names().counters`). */
  stats(): Record<string, number>
  /** The counters and gauges in the Prometheus text format. */
  metrics(): string
  /** A flight was answered by a stale value from Redis: start its background refresh; false if not due. */
  startRefresh(key: unknown, loader: unknown): boolean
  /** With Redis: who loads this flight (a read first when `readFirst`, then the fleet lock). */
  acquire(key: string, id: number, readFirst: boolean): Promise<Acquired | undefined>
  /** With Redis: the first read of many flights in one pipeline; `null`: go on with `acquire(key, id, false)`. */
  readMany(keys: string[], ids: number[]): Promise<Array<Acquired | null>>
  /** Whether a stale value may still answer the flight (no caller refusing stale values joined it). */
  acceptsStale(key: string, id: number): boolean
  /** The flight was answered by another instance's value (`Acquired`'s fields); false if it is gone. */
  adopt(
    key: string,
    id: number,
    value: unknown,
    freshUntil: number,
    hardUntil: number,
    computeMs: number,
    stamp: number,
    negative: boolean,
  ): boolean
  /** With Redis: `get` past the L1: a promise of the value's JSON text, or null. */
  peek(key: unknown, stale?: unknown): Promise<string | null>
  /** A flight given up while it held the fleet lock lets go of it. */
  releaseLock(key: string, id: number, token: string): void
  /** Redis kept a newer value than the one just stored: drop ours from memory. */
  forget(key: string): void
  /** 8 bytes; byte 0 is the outcome of the last `getOrLoad` (0: none). */
  outcomeBuffer: ArrayBuffer
}

/**
 * The per-cache context index.js makes and passes to `install`, `lead` and
 * `softWait`. The addon writes `hardTimeout`, `softTimeout`, `maxValueBytes`
 * and `redis` in `install`; index.js copies the leader's entry points on.
 */
export interface Context {
  /** The `waitUntil` option: receives every background refresh's promise. */
  waitUntil: ((promise: Promise<void>) => void) | undefined
  /** The `onError` option: background refresh failures. */
  onError: ((error: unknown, info: { key: unknown; background: true }) => void) | undefined
  /** The loads in flight, in deadline order (one `hardTimeout` for all). */
  active: Set<Flight>
  /** Redis writes under way; `close()` lets them finish. */
  writes: Set<Promise<unknown>>
  /** The one timer that expires `active` flights, or undefined. */
  timer: ReturnType<typeof setTimeout> | undefined
  /** Validated, ms (written by `install`). */
  hardTimeout: number
  /** Validated, ms (written by `install`). */
  softTimeout: number
  /** Validated, UTF-8 bytes of JSON (written by `install`). */
  maxValueBytes: number
  /** Whether the cache has Redis (written by `install`). */
  redis: boolean
  /** The first reads of the flights started in this tick, sent as one `readMany`. */
  readBatch: { keys: string[]; ids: number[]; answers: Array<(answer: Acquired | null | undefined) => void> } | undefined
  attachFlight: EntryPoints['attachFlight']
  fill: EntryPoints['fill']
  fail: EntryPoints['fail']
  endFlight: EntryPoints['endFlight']
  recordSoftWait: EntryPoints['recordSoftWait']
  acquire: EntryPoints['acquire']
  readMany: EntryPoints['readMany']
  acceptsStale: EntryPoints['acceptsStale']
  adopt: EntryPoints['adopt']
  startRefresh: EntryPoints['startRefresh']
  releaseLock: EntryPoints['releaseLock']
  forget: EntryPoints['forget']
}

/**
 * lib/flight.js `lead`: runs one load. `key` is the encoded key, `userKey`
 * the key as passed; returns the promise every caller of the flight shares.
 */
export type Lead = (
  ctx: Context,
  key: string,
  userKey: unknown,
  loader: Function,
  id: number,
  background: boolean,
) => Promise<unknown>

/** lib/flight.js `softWait`: a stale read with `softTimeout`, answered by `flight` if it lands in time. */
export type SoftWait = (ctx: Context, flight: Promise<unknown>, stale: unknown) => Promise<unknown>

/** The class the addon exports (napi-derive; cold paths only). */
export interface NativeCache {
  install(ctx: Context, lead: Lead, softWait: SoftWait): EntryPoints
  /** Stops new calls; what is in flight goes on. */
  close(): void
  /** Drops every entry and flight, once the flights settled. */
  release(): void
  advanceClock(ms: number): void
  setRandom(jitter: number | null, xfetch: number | null): void
}
