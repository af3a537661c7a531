// The contract between the native addon and the JS wrapper, written down
// once. Nothing here is public API: users see index.d.ts.
//
// `index.js` makes a `NativeCache`, then calls `install(ctx, lead, softWait,
// resume, scheduleReads, reportProblem, decode)` once. The addon keeps the six
// functions (module functions of lib/leader.js, lib/callers.js and lib/values.js) strongly and `ctx` weakly,
// writes the validated timeouts onto `ctx`, and returns the raw entry points
// below (`napi_create_function`s, src/binding/mod.rs `ENTRY_POINTS`; their
// bodies are src/binding/{entry,flight,ops}.rs). The raw entry points take
// positional arguments and do not check their types beyond what the key and
// the call options need: only index.js and lib/ call them, as described here.
//
// A flight is addressed by its id alone: the addon gives it to `lead`, and
// the leader's reports (`fill`, `fail`) take it, never the key. The addon
// makes the promise every caller of a flight shares and settles it itself
// (`fill` fulfils it, `fail` rejects it; with Redis, another instance's
// value may fulfil it, and then the addon sets the `outcome` of the callers'
// `status` objects). With Redis the addon also decides, before any loader
// runs, whether this instance loads: it calls `resume`.
//
// After `close()`: `getOrLoad`, `get`, `set`, `delete`, `clear` and `peek`
// throw ERR_HERDCACHE_CLOSED (index.js turns that into a rejection); the
// leader's reports (`fill`, `fail`, `recordSoftWait`) still work for the
// loads in flight; `stats` and `metrics` still answer.
//
// __test__/native-contract.test.js checks that `install()` returns exactly
// the members of `EntryPoints`, that `ctx` holds exactly the members of
// `Context`, and that index.js and lib/ use no other name.

/** One load in flight, as lib/leader.js keeps it in `ctx.active` (and lib/bulkhead.js in its queue). */
export interface Flight {
  /** The promise every caller of the flight shares (the addon settles it). */
  promise: Promise<unknown>
  /** close(): aborts the loader's signal, or gives up a load whose loader has not started. */
  abort(reason: Error): void
  /** `performance.now()` past which the load times out (`hardTimeout`). */
  deadline: number
  /** Gives the load up with ERR_HERDCACHE_TIMEOUT (the deadline passed). */
  expire(): void
}

/** The raw functions `install()` returns. */
export interface EntryPoints {
  /**
   * The hot path: one call answers a hit, a join (the flight's promise) or a
   * stale read, or starts a flight (calling `lead`). How it gives its answer is
   * `names().given[outcomeBuffer[2]]`: 'promise', 'value' (an answer from memory, a hit, a "not found"
   * marker or a stale value served at once, is returned as the value itself) or 'slot' (the call returns
   * undefined and left that value in `values`, at the index bytes 16 to 20 of `outcomeBuffer` hold as a
   * uint32: read it at once). The caller makes a value's promise (`Promise.resolve`).
   * The outcome is written to `outcomeBuffer[0]` (`names().outcomes[b - 1]`).
   * The call options come positionally (undefined: not given); `status` is
   * kept by a flight that another instance's value may answer.
   */
  getOrLoad(
    key: unknown,
    loader: unknown,
    stale?: unknown,
    ttl?: unknown,
    hardTtl?: unknown,
    negativeTtl?: unknown,
    beta?: unknown,
    status?: unknown,
    tags?: unknown,
    /** The bits of `names().tiers` the call asks for (`forceFresh`, `l1: false`, `redis: false`). */
    tiers?: number,
    l1Ttl?: unknown,
  ): unknown
  /**
   * lib/many-native.js, untraced: `getOrLoad(key, loader, stale, ttl, hardTtl, negativeTtl, beta, undefined,
   * tags, undefined, l1Ttl)` for each of `keys` (at most `names().limits.manyKeys`), in order, in one call, the options read once.
   * Every key is read first: one that is no key is thrown (ERR_HERDCACHE_INVALID_KEY) before any is looked up.
   * Returns `collect(...answers)` (lib/many-native.js passes `(...promises) => promises`), each key's promise (a
   * key getOrLoad rejects: a rejected one) or its value from memory, of which the caller makes a promise. `outcomeBuffer[0]` ends as the last key's call leaves it;
   * `outcomeBuffer[1]` is 1 when no promise can reject (every key was answered from memory: fresh, negative or
   * stale), else 0.
   */
  getOrLoadMany(
    collect: (...promises: Array<Promise<unknown>>) => Array<Promise<unknown>>,
    loader: Function,
    stale: unknown,
    ttl: unknown,
    hardTtl: unknown,
    negativeTtl: unknown,
    beta: unknown,
    l1Ttl: unknown,
    tags: unknown,
    ...keys: unknown[]
  ): unknown[]
  /**
   * The loader's result: `value` (its normalised copy: lib/values.js `encode`), `body` its JSON text, or
   * with `format` (an `hc4` entry's format, src/core/body.rs) its bytes as a Buffer;
   * `ttl`/`hardTtl` what the loader set with `ctx.setTtl` (undefined: the
   * flight's), `noStore` whether it called `ctx.noStore()` (then nothing is
   * stored, in memory nor Redis), `etag` what it gave `ctx.setEtag` (undefined: none). With `kept`
   * (`ctx.keep()`), `value` is the value `heldValue` gave, `kept` its stamp, and there is no `body`: the
   * addon stores it for a new TTL and, with Redis, rewrites the stored entry's deadlines only. The addon
   * stores it and fulfils the flight's promise; with Redis, once it is written there: then it returns
   * that write's promise (for `close()`). Throws ERR_HERDCACHE_INVALID_OPTION
   * for TTLs the call options' rules refuse, or a validator src/core/etag.rs refuses; the flight is
   * then still there.
   */
  fill(
    id: number,
    value: unknown,
    negative: boolean,
    computeMs: number,
    body: string | Buffer | undefined,
    format: string | undefined,
    ttl: number | undefined,
    hardTtl: number | undefined,
    noStore: boolean,
    etag: string | undefined,
    kept: number | undefined,
  ): Promise<void> | undefined
  /**
   * What this process holds for flight `id`'s key as its loader starts (`ctx.stale`): the value, its age in ms, its validator, its stamp (for `fill`'s `kept`), and
   * whether it is a "not found" marker; undefined when nothing servable is held.
   */
  heldValue(id: number): [unknown, number, string | undefined, number, boolean] | undefined
  /** The load failed, timed out (`timedOut`) or was given up: the addon rejects the flight's promise with `error`. */
  fail(id: number, error: unknown, timedOut: boolean, loaderRan: boolean): void
  /** A soft wait ended: answered by the stale value (true) or by the refresh. */
  recordSoftWait(servedStale: boolean): void
  /** With Redis: sends the first reads the addon queued (`scheduleReads`), in one pipeline. */
  flushReads(): void
  /**
   * lib/bulkhead.js: what the load bulkhead did since its last report (loads queued, whole ms they waited,
   * loads refused, refreshes skipped: added to the counters) and its state now (the gauges).
   */
  recordLoadQueue(
    queued: number,
    waitedMs: number,
    rejected: number,
    skipped: number,
    bypassed: number,
    slotsUsed: number,
    queueLength: number,
  ): void
  /**
   * lib/bulkhead.js, with `fleetMaxConcurrentLoads`: `released` fleet slots given back (their loaders settled, or
   * no queued load needed them), and the queued loads a fleet slot would start now number `wanted` (all of them,
   * not a change); the addon keeps Redis in step (src/engine/slots.rs).
   */
  loadSlots(released: number, wanted: number): void
  /**
   * lib/bulkhead.js: the fleet slots granted since the last answer (> 0, now held), -1 when Redis could not be
   * asked (the queued loads run under the per-process cap alone), or 0 when nothing is wanted any more. One at a
   * time.
   */
  nextLoadSlots(): Promise<number>
  /** The value in memory, or undefined; never loads. `stale: false` refuses a stale one. */
  get(key: unknown, stale?: unknown): unknown
  /**
   * Stores `value` (normalised; `body` its JSON text, or with `format` its bytes, for Redis: as `fill`);
   * with Redis, the write's promise.
   */
  set(
    key: unknown,
    value: unknown,
    ttl?: unknown,
    hardTtl?: unknown,
    body?: string | Buffer,
    tags?: unknown,
    format?: string,
  ): Promise<boolean> | undefined
  /** Whether a live entry was removed; with Redis, a promise of whether Redis or memory had one. */
  delete(key: unknown): boolean | Promise<boolean>
  /** Whether a fresh entry was made stale; with Redis, a promise of whether Redis or memory had one. */
  expire(key: unknown): boolean | Promise<boolean>
  /** Invalidates every entry carrying one of `tags` (an array); with Redis, a promise settled once the fleet was told or the invalidations kept. */
  deleteByTag(tags: unknown): Promise<void> | undefined
  /** Removes every entry; with Redis, a promise. */
  clear(): Promise<void> | undefined
  /**
   * A namespace's clear: `names` (an array key, the view's names) encoded, and `:`, is the prefix of the keys
   * removed; with Redis, a promise.
   */
  clearPrefix(names: unknown): Promise<void> | undefined
  /** With Redis: `get` past the L1: a promise of the value's JSON text, `[format, bytes]` (for `Decode`), or null. */
  peek(key: unknown, stale?: unknown): Promise<string | [string, Buffer] | null>
  /**
   * The counters and gauges (`names().counters`), after counting `remembered` more fresh hits: the ones index.js
   * answered from the hits it remembers since it last asked.
   */
  stats(remembered?: number): Record<string, number>
  /** The counters and gauges in the Prometheus text format, `remembered` counted as for `stats`. */
  metrics(remembered?: number): string
  /**
   * 24 bytes; byte 0 is the outcome of the last `getOrLoad` (0: none), byte 1 what the last `getOrLoadMany` says,
   * byte 2 how the last `getOrLoad` gave its answer; bytes 4 to 8 a uint32, the epoch that call was decided in;
   * bytes 16 to 20 a uint32, the slot of `values` it left its value in; bytes 8 to 16 a float64: after a fresh hit, until when (`Date.now()` ms) index.js may answer that key again
   * itself while `epochBuffer` does not move (0: it may not).
   */
  outcomeBuffer: ArrayBuffer
  /**
   * 4 bytes, a uint32 the addon moves (from any thread) whenever a remembered hit may answer differently
   * (src/engine/epoch.rs); index.js only reads it. Absent where Node-API refuses external buffers: nothing is
   * remembered then.
   */
  epochBuffer?: ArrayBuffer
  /**
   * 8 bytes, a float64: this machine's coarse wall clock in ms, rewritten every ms by a thread of the addon
   * (src/engine/clock.rs `published_wall_clock`); index.js only reads it. Present with `epochBuffer`.
   */
  clockBuffer?: ArrayBuffer
  /**
   * The addon's value table (src/binding/held.rs): where it keeps the values in memory, one array without a
   * prototype for every cache of this thread's Node-API environment. Only the addon writes it; index.js reads
   * the slot `getOrLoad` names, at once.
   */
  values: unknown[]
}

/**
 * The per-cache context index.js makes and passes to `install`, `lead`,
 * `softWait`, `resume` and `scheduleReads`. The addon writes `hardTimeout`,
 * `softTimeout`, `maxValueBytes` and `redis` in `install`; index.js copies
 * the leader's entry points on.
 */
export interface Context {
  /**
   * The Cache this context belongs to, named in the diagnostics channels' messages (lib/tracing.js). Weakly: a
   * load in flight holds the context, and must not keep a dropped Cache alive.
   */
  cache: WeakRef<object>
  /** The `waitUntil` option: receives every background refresh's promise. */
  waitUntil: ((promise: Promise<void>) => void) | undefined
  /** The `onError` option: background refresh failures. */
  onError: ((error: unknown, info: { key: unknown; background: true }) => void) | undefined
  /** The `serializer` option when it is the application's (lib/values.js); undefined: the built-in `json`. */
  serializer:
    | { name: string; serialize(value: unknown): unknown; deserialize(stored: Buffer | string): unknown }
    | undefined
  /** The loads in flight, in deadline order (one `hardTimeout` for all). */
  active: Set<Flight>
  /** With Redis: the flights whose loader waits for the fleet's decision (`resume`), by id. */
  waiting: Map<number, Flight>
  /** Redis writes under way; `close()` lets them finish. */
  writes: Set<Promise<unknown>>
  /** The codes `reportProblem` warned of (no `onError`): each once. */
  warned: Set<string>
  /** Keys (as `describeKey` names them) whose failed refresh was warned of (no `onError`), until they load again. */
  failing: Set<string>
  /** The one timer that expires `active` flights, or undefined. */
  timer: ReturnType<typeof setTimeout> | undefined
  /** The timer is unref'd: no load is in flight. */
  idle: boolean
  /** A weak reference to this context: all the timer holds. */
  self: WeakRef<Context> | undefined
  /** Validated, ms (written by `install`). */
  hardTimeout: number
  /** Validated, ms (written by `install`). */
  softTimeout: number
  /** Validated, UTF-8 bytes of JSON (written by `install`). */
  maxValueBytes: number
  /** Whether the cache has Redis (written by `install`). */
  redis: boolean
  /** Whether the store reads values' JSON text: Redis, or `l1MaxBytes` weighing it (written by `install`; lib/json-copy.js copies values without it). */
  needsText: boolean
  /** Validated, loaders at once in this process (`maxConcurrentLoads`, else `fleetMaxConcurrentLoads`); 0: no cap (written by `install`). */
  maxConcurrentLoads: number
  /** Validated, loads waiting for a slot at most (written by `install`). */
  maxQueuedLoads: number
  /** Validated, loaders at once across the fleet; 0: no fleet cap (written by `install`). */
  fleetMaxConcurrentLoads: number
  /**
   * The load bulkhead (lib/bulkhead.js), when `maxConcurrentLoads` is set: a slot before a loader runs (false:
   * queued, or refused), freed when it settles; a queued flight given up leaves.
   */
  bulkhead: { acquire(flight: Flight, now: number): boolean; release(flight: Flight): void; leave(flight: Flight): void } | undefined
  fill: EntryPoints['fill']
  heldValue: EntryPoints['heldValue']
  fail: EntryPoints['fail']
  recordSoftWait: EntryPoints['recordSoftWait']
  flushReads: EntryPoints['flushReads']
  recordLoadQueue: EntryPoints['recordLoadQueue']
  loadSlots: EntryPoints['loadSlots']
  nextLoadSlots: EntryPoints['nextLoadSlots']
}

/**
 * lib/leader.js `lead`: the addon started flight `id`; the leader runs its
 * loader now, or (`waiting`, with Redis) when `resume` says so. With Redis,
 * a flight is led only once its first read did not answer it, `since` ms
 * after it started (counted in its `hardTimeout`).
 */
export type Lead = (
  ctx: Context,
  id: number,
  userKey: unknown,
  loader: Function,
  background: boolean,
  promise: Promise<unknown>,
  waiting: boolean,
  since: number,
) => void

/** lib/callers.js `softWait`: a stale read with `softTimeout`, answered by `flight` if it lands in time. */
export type SoftWait = (
  ctx: Context,
  flight: Promise<unknown>,
  stale: unknown,
  status: { outcome?: string; stale?: string } | undefined,
) => Promise<unknown>

/** lib/leader.js `resume`: with Redis, the fleet decided: run the loader (`load`), or the flight was answered. */
export type Resume = (ctx: Context, id: number, load: boolean) => void

/** lib/leader.js `scheduleReads`: calls `ctx.flushReads` in a microtask. */
export type ScheduleReads = (ctx: Context) => void

/**
 * lib/values.js `decode`: a stored value in a format of its own (an `hc4` entry: binary parts, a serializer's
 * bytes) as JS makes it; it may throw. Called for values another instance wrote.
 */
export type Decode = (ctx: Context, format: string, bytes: Buffer) => unknown

/**
 * lib/leader.js `reportProblem`: what the addon found about Redis that no retry fixes (each once), with
 * its stable code: to `onError`, else a process warning once per code. Called when a Redis call completes.
 */
export type ReportProblem = (ctx: Context, code: string, message: string) => void

/** The class the addon exports (napi-derive; cold paths only). */
export interface NativeCache {
  install(
    ctx: Context,
    lead: Lead,
    softWait: SoftWait,
    resume: Resume,
    scheduleReads: ScheduleReads,
    reportProblem: ReportProblem,
    decode: Decode,
  ): EntryPoints
  /** Stops new calls; what is in flight goes on, but the flights no leader has yet reject with `reason`. */
  close(reason: Error): void
  /** Fulfils with null once Redis answers as the fleet needs (at once without Redis), else with the cause. */
  ready(): Promise<{ code: string; message: string } | null>
  /** The last Redis failure's cause, or null. */
  lastRedisError(): { code: string; message: string } | null
  /**
   * With Redis, at close (once loads and writes settled): one more attempt to deliver what could not
   * reach Redis; fulfils with what is still undelivered (given up), never rejects.
   */
  flushRecovery(): Promise<
    Array<{ op: 'set' | 'delete' | 'expire' | 'deleteByTag' | 'clear'; key?: string; tag?: string; namespace?: string }>
  >
  /** Drops every entry and flight, once the flights settled. */
  release(): void
  advanceClock(ms: number): void
  /** This host's wall clock reads `ms` off; with Redis the server's clock is measured again, which corrects it. */
  skewClock(ms: number): Promise<boolean>
  setRandom(jitter: number | null, xfetch: number | null): void
}
