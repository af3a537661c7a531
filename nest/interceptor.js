'use strict'

// HerdcacheInterceptor and @Cached: HTTP GET routes answered through
// cache.getOrLoad, so concurrent misses run the handler once (once per fleet
// with Redis) and stale entries are served at once while one refresh runs.

const { Injectable, SetMetadata, UseInterceptors, applyDecorators, StreamableFile } = require('@nestjs/common')
const { Reflector, ModuleRef, HttpAdapterHost } = require('@nestjs/core')
const { of, lastValueFrom, isObservable } = require('rxjs')
const { nestError, NO_PRINCIPAL_WARNING, NEST_CODES, codes } = require('./errors')
const { routeKey, routeIdentity, escapeRoute } = require('./keys')
const { CACHED_ROUTE, getCacheToken, getOptionsToken, checkOptions, ROUTE } = require('./options')
const { DEFAULT_NAME } = require('./registry')

/** ClassSerializerInterceptor's metadata key (@SerializeOptions). */
const CLASS_SERIALIZER_OPTIONS = 'class_serializer:options'
// Marks the execution context of a request a HerdcacheInterceptor already
// handles (global + route binding: once). Nest makes one context per
// request for its whole interceptor chain; a flag on it, not on the request
// (whose shape belongs to the HTTP framework), and not a WeakSet (an
// ephemeron per request was half of a hit's cost).
const HANDLED = Symbol('herdcache.handled')

const DEFAULT_HTTP = {
  headers: 'x-cache',
  cacheControl: false,
  scope: 'auto',
  // `userId`: what Passport's JWT strategy of the Nest docs puts in req.user.
  principal: (request) => request.user?.id ?? request.user?.sub ?? request.user?.userId,
  vary: undefined,
  query: undefined,
  head: false,
  serialize: true,
  principalSecret: undefined,
}
const DEFAULT_TTL = 60_000

const X_CACHE = { hit: 'HIT', stale: 'STALE', negative: 'HIT', miss: 'MISS', coalesced: 'COALESCED' }
// RFC 9211 Cache-Status values, with `herdcache` as the cache's name; `ttl`
// (whole seconds of freshness left, negative once stale) is added from the
// call's `status` (`cacheStatus`).
const CACHE_STATUS = {
  HIT: 'herdcache; hit',
  STALE: 'herdcache; hit; fwd=stale',
  MISS: 'herdcache; fwd=miss; stored',
  COALESCED: 'herdcache; fwd=miss; collapsed',
  BYPASS: 'herdcache; fwd=bypass',
}

/**
 * The `Cache-Status` of an answer: its `CACHE_STATUS`, with `ttl` from the
 * call's `status.ttl` (a value read from memory or Redis) or, for this
 * request's own load, the route's ttl.
 */
function cacheStatus(xCache, status, options) {
  const base = CACHE_STATUS[xCache]
  const ttlMs = xCache === 'MISS' ? options.ttl : status?.ttl
  return typeof ttlMs === 'number' ? `${base}; ttl=${Math.floor(ttlMs / 1000)}` : base
}
// herdcache errors that mean "the cache could not answer", not "the handler failed".
const CACHE_FAILURES = new Set([codes.CLOSED, codes.INTERNAL, codes.INVALID_KEY])

let classTransformer
function loadClassTransformer() {
  if (classTransformer === undefined) {
    try {
      classTransformer = require('class-transformer')
    } catch {
      classTransformer = null
    }
  }
  return classTransformer
}

/** A handler result that must not be stored (undefined, null, streams, files): handed to the callers as it is. */
class NotStored extends Error {
  constructor(value) {
    super('herdcache/nest: the handler result is not cacheable (undefined, null, a stream or a file)')
    this.value = value
  }
}

function storable(value) {
  if (value === undefined || value === null) return false
  if (typeof value !== 'object') return true
  return !(
    value instanceof StreamableFile ||
    Buffer.isBuffer(value) ||
    ArrayBuffer.isView(value) ||
    isObservable(value) ||
    typeof value.pipe === 'function' ||
    typeof value[Symbol.asyncIterator] === 'function'
  )
}

let warnedNoPrincipal = false

/**
 * Signed-in requests that are never cached look like a working cache (200,
 * and a BYPASS header nobody reads), so the first one is reported, once
 * per process, naming the option that fixes it.
 */
function warnNoPrincipal(request) {
  if (warnedNoPrincipal) return
  warnedNoPrincipal = true
  const fields = typeof request.user === 'object' ? Object.keys(request.user).join(', ') : typeof request.user
  process.emitWarning(
    `herdcache/nest: a request with req.user (${fields}) was not cached (X-Cache: BYPASS): no principal was found ` +
      'in it. Set http.principal in HerdcacheModule.forRoot (or principal in @Cached), e.g. ' +
      '`principal: (req) => req.user?.accountId`; the default reads req.user.id, .sub and .userId. ' +
      'This warning is shown once.',
    { type: 'Warning', code: NO_PRINCIPAL_WARNING },
  )
}

/**
 * The principal a request's entry is keyed by: null for a shared (public)
 * entry, undefined when the request is private but nobody can be named
 * (then it is not cached: BYPASS).
 */
function principalOf(request, options) {
  if (options.scope === 'public') return null
  const headers = request.headers ?? {}
  const isPrivate = options.scope === 'user' || Boolean(headers.authorization || headers.cookie || request.user)
  if (!isPrivate) return null
  const id = options.principal(request)
  if (id === undefined || id === null || id === '') {
    if (request.user) warnNoPrincipal(request)
    return undefined
  }
  if (typeof id !== 'string' && typeof id !== 'number') {
    throw nestError(
      NEST_CODES.NEST_INVALID_PRINCIPAL,
      `the principal resolver returned a ${typeof id}; it must return a string or number id (or undefined: not cached)`,
      TypeError,
    )
  }
  return id
}

/**
 * The X-Cache value of an answered request. With Redis, a request whose
 * instance waited for another instance's load is told `hit` by the cache
 * (it got a value it did not load); a value loaded after the request
 * arrived can only have come from a load that was in flight, so that is
 * COALESCED. Across machines this compares their clocks: a few ms of skew
 * can turn such a COALESCED into HIT, never a hit into a MISS.
 */
function xCache(outcome, envelope, startedAt) {
  if (outcome === 'hit' && envelope.at > startedAt) return 'COALESCED'
  return X_CACHE[outcome] ?? 'MISS'
}

class HerdcacheInterceptor {
  #reflector
  #moduleRef
  #adapterHost
  #caches = new Map()
  #plans = new WeakMap()
  #loaderErrors = new WeakSet()

  constructor(reflector, moduleRef, adapterHost) {
    this.#reflector = reflector
    this.#moduleRef = moduleRef
    this.#adapterHost = adapterHost
  }

  intercept(context, next) {
    if (context.getType() !== 'http') return next.handle()
    const route = this.#reflector.getAllAndOverride(CACHED_ROUTE, [context.getHandler(), context.getClass()])
    if (route === undefined) return next.handle()
    const http = context.switchToHttp()
    if (context[HANDLED] === true) return next.handle()
    context[HANDLED] = true
    const request = http.getRequest()

    const { cache, options, entryOptions } = this.#plan(route)
    const method = request.method
    // Never POST/PUT/PATCH/DELETE, whatever the key: only reads are cached.
    if (method !== 'GET' && !(method === 'HEAD' && options.head)) return next.handle()

    const response = http.getResponse()
    const principal = principalOf(request, options)
    if (principal === undefined) {
      this.#setHeaders(response, 'BYPASS', undefined, options, true)
      return next.handle()
    }
    const callOptions = { status: {}, ...entryOptions }
    // A promise of an Observable, as Nest's interceptor chain awaits it.
    return this.#serve(context, next, cache, request, response, options, principal, callOptions)
  }

  /** What a route's metadata resolves to (its cache, its merged options), worked out once per route. */
  #plan(route) {
    let plan = this.#plans.get(route)
    if (plan === undefined) {
      const { cache, http, ttl } = this.#cacheFor(route.cache ?? DEFAULT_NAME)
      const options = { ...DEFAULT_HTTP, ttl, ...http }
      for (const [name, value] of Object.entries(route)) if (value !== undefined) options[name] = value
      const entryOptions = {}
      if (route.ttl !== undefined) entryOptions.ttl = route.ttl
      if (route.hardTtl !== undefined) entryOptions.hardTtl = route.hardTtl
      if (route.stale === false) entryOptions.stale = false
      plan = { cache, options, entryOptions }
      this.#plans.set(route, plan)
    }
    return plan
  }

  async #serve(context, next, cache, request, response, options, principal, callOptions) {
    const isPrivate = principal !== null
    const key =
      typeof options.key === 'function'
        ? await this.#customKey(context, request, options, principal)
        : this.#routeKey(context, request, options, principal)
    if (key === undefined) {
      // The route's key function skipped this request (trackBy's undefined).
      this.#setHeaders(response, 'BYPASS', undefined, options, isPrivate)
      return next.handle()
    }
    const { status } = callOptions
    const startedAt = Date.now()
    let envelope
    try {
      // The loader closes over this request's `next`: a background refresh
      // (a later stale hit) subscribes next.handle() again, which runs the
      // downstream interceptors, the pipes and the handler once more with this
      // request's arguments, after this response went out.
      envelope = await cache.getOrLoad(key, () => this.#load(context, next, options), callOptions)
    } catch (error) {
      if (error instanceof NotStored) {
        this.#setHeaders(response, 'BYPASS', undefined, options, isPrivate)
        return of(error.value)
      }
      if (error?.code && CACHE_FAILURES.has(error.code) && !this.#loaderErrors.has(error)) {
        // The cache cannot answer (closed while shutting down, an internal
        // failure): the request is still served, uncached.
        this.#setHeaders(response, 'BYPASS', undefined, options, isPrivate)
        return next.handle()
      }
      throw error
    }
    this.#setHeaders(response, xCache(status.outcome, envelope, startedAt), envelope, options, isPrivate, status)
    return of(envelope.v)
  }

  async #load(context, next, options) {
    let value
    try {
      value = await lastValueFrom(next.handle(), { defaultValue: undefined })
    } catch (error) {
      if (error !== null && typeof error === 'object') this.#loaderErrors.add(error)
      throw error
    }
    if (!storable(value)) throw new NotStored(value)
    return { v: this.#serialize(value, context, options), at: Date.now() }
  }

  async #customKey(context, request, options, principal) {
    const custom = await options.key(context)
    if (custom === undefined) return undefined
    if (typeof custom !== 'string' || custom === '') {
      throw nestError(
        NEST_CODES.NEST_INVALID_KEY,
        '@Cached({ key }) must return a non-empty string (or undefined: this request is not cached)',
        TypeError,
      )
    }
    return routeKey({
      route: custom,
      headers: request.headers ?? {},
      vary: options.vary,
      principal: principal === null ? undefined : principal,
      secret: options.principalSecret,
    })
  }

  #routeKey(context, request, options, principal) {
    return routeKey({
      route: escapeRoute(
        typeof options.key === 'string' ? options.key : routeIdentity(context.getClass(), context.getHandler()),
      ),
      routeEscaped: true,
      params: request.params,
      url: request.originalUrl ?? request.url ?? '',
      query: options.query,
      headers: request.headers ?? {},
      vary: options.vary,
      principal: principal === null ? undefined : principal,
      secret: options.principalSecret,
    })
  }

  /**
   * What goes on the wire is what is stored: class instances become plain
   * data here (ClassSerializerInterceptor semantics).
   */
  #serialize(value, context, options) {
    if (typeof options.serialize === 'function') return options.serialize(value, context)
    if (options.serialize === false || typeof value !== 'object') return value
    const transformer = loadClassTransformer()
    if (!transformer) return value
    const serializerOptions = this.#reflector.getAllAndOverride(CLASS_SERIALIZER_OPTIONS, [
      context.getHandler(),
      context.getClass(),
    ])
    return transformer.instanceToPlain(value, serializerOptions)
  }

  #setHeaders(response, xCache, envelope, options, isPrivate, status) {
    const adapter = this.#adapterHost.httpAdapter
    const set = (name, value) => adapter.setHeader(response, name, value)
    const mode = options.headers
    if (mode === 'x-cache' || mode === 'both') set('X-Cache', xCache)
    if (mode === 'cache-status' || mode === 'both') set('Cache-Status', cacheStatus(xCache, status, options))
    const served = envelope !== undefined && (xCache === 'HIT' || xCache === 'STALE')
    const ageMs = served ? Math.max(0, Date.now() - envelope.at) : undefined
    if (mode !== false && ageMs !== undefined) set('Age', String(Math.floor(ageMs / 1000)))
    if (options.cacheControl) {
      const vary = [...(isPrivate ? ['Authorization', 'Cookie'] : []), ...(options.vary ?? [])]
      if (xCache === 'BYPASS') set('Cache-Control', 'private, no-store')
      else {
        const fresh = xCache === 'STALE' ? 0 : Math.max(0, Math.floor((options.ttl - (ageMs ?? 0)) / 1000))
        set('Cache-Control', `${isPrivate ? 'private' : 'public'}, max-age=${fresh}`)
      }
      if (vary.length > 0) set('Vary', vary.join(', '))
    }
  }

  #cacheFor(name) {
    let found = this.#caches.get(name)
    if (found === undefined) {
      let cache
      let moduleOptions
      try {
        cache = this.#moduleRef.get(getCacheToken(name), { strict: false })
        moduleOptions = this.#moduleRef.get(getOptionsToken(name), { strict: false })
      } catch {
        throw nestError(
          NEST_CODES.NEST_NO_CACHE,
          `@Cached needs the herdcache cache "${name}": import HerdcacheModule.forRoot(${
            name === DEFAULT_NAME ? '' : `{ name: '${name}' }`
          }) in the application`,
        )
      }
      const http = moduleOptions?.http ?? {}
      found = { cache, http, ttl: moduleOptions?.ttl ?? DEFAULT_TTL }
      this.#caches.set(name, found)
    }
    return found
  }
}

Injectable()(HerdcacheInterceptor)
Reflect.defineMetadata('design:paramtypes', [Reflector, ModuleRef, HttpAdapterHost], HerdcacheInterceptor)

/**
 * Marks a GET route (or every route of a controller) as cached and binds
 * HerdcacheInterceptor to it. Options: `ttl`, `hardTtl`, `stale`, `key`,
 * `scope` ('auto' | 'user' | 'public'), `vary`, `query` (allow-list),
 * `principal`, `head`, `cache` (a cache name).
 * @param {object} [options]
 */
function Cached(options = {}) {
  checkOptions(options, ROUTE, '@Cached')
  return applyDecorators(SetMetadata(CACHED_ROUTE, { ...options }), UseInterceptors(HerdcacheInterceptor))
}

module.exports = { HerdcacheInterceptor, Cached, principalOf }
