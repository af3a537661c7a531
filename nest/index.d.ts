// Types of herdcache/nest (nest/index.js). NestJS 11 and 12.
//
// This file is CommonJS to TypeScript (the package has no "type"), and Nest
// 12 is ESM-only: under `moduleResolution: node16` a CommonJS file may only
// import its types with `resolution-mode: 'import'` (TypeScript 5.3 or newer;
// nodenext and bundler accept it as well).

import type { CallHandler, DynamicModule, ExecutionContext, NestInterceptor } from '@nestjs/common' with {
  'resolution-mode': 'import',
}
import type { Observable } from 'rxjs' with { 'resolution-mode': 'import' }
import type { Cache, CacheOptions, Key } from '../index'

export { Cache }

/** Injection token of the default cache (the `Cache` class injects the same instance). */
export declare const HERDCACHE: 'HERDCACHE'

/** Who an HTTP entry belongs to. */
export type CacheScope = 'auto' | 'user' | 'public'

/** Resolves the principal of a request: a user id, or undefined/null (then a private request is not cached). */
export type PrincipalResolver = (request: any) => string | number | null | undefined

/** HTTP options shared by the module defaults (`http`) and each route's `@Cached`. */
export interface SharedHttpOptions {
  /**
   * `'auto'` (default): private when the request has `Authorization`, a
   * cookie or `req.user`, then keyed by the hashed principal (not cached
   * when there is none: BYPASS); `'user'`: always per principal;
   * `'public'`: one entry for everybody.
   */
  scope?: CacheScope
  /** Default: `req.user?.id ?? req.user?.sub ?? req.user?.userId`. */
  principal?: PrincipalResolver
  /** Request headers whose values are part of the key (e.g. `accept-language`). */
  vary?: string[]
  /** Allow-list of query parameter names in the key (default: all, sorted). */
  query?: string[]
  /** Serve HEAD from the GET entry (default false: HEAD is not cached). */
  head?: boolean
}

export interface HerdcacheHttpOptions extends SharedHttpOptions {
  /** Response headers: `X-Cache`, RFC 9211 `Cache-Status`, both, or none. Default `'x-cache'`. `Age` comes with either. */
  headers?: 'x-cache' | 'cache-status' | 'both' | false
  /** Send `Cache-Control` (private + `Vary: Authorization, Cookie` for per-user entries). Default false. */
  cacheControl?: boolean
  /**
   * How a handler result becomes the stored value: `true` (default)
   * class-transformer's `instanceToPlain` with the route's @SerializeOptions,
   * `false` as it is, or your function.
   */
  serialize?: boolean | ((value: unknown, context: ExecutionContext) => unknown)
  /**
   * Key of an HMAC-SHA256 of the principal in cache keys (and Redis key
   * names). Without it the hash is a plain SHA-256, which anyone can
   * recompute for small ids (1, 2, 3, ...) and so tell whose entry a key is.
   */
  principalSecret?: string | Buffer
}

/** Options of one cache: the `Cache` options plus the interceptor defaults. */
export interface HerdcacheOptions extends CacheOptions {
  http?: HerdcacheHttpOptions
}

export interface HerdcacheModuleOptions extends HerdcacheOptions {
  /** A named cache (`@InjectCache(name)`, `@Cached({ cache: name })`); default `'default'`. */
  name?: string
  isGlobal?: boolean
}

export interface HerdcacheModuleAsyncOptions {
  name?: string
  isGlobal?: boolean
  imports?: any[]
  inject?: any[]
  useFactory: (...args: any[]) => HerdcacheOptions | Promise<HerdcacheOptions>
  /** Providers the factory injects that no imported module exports; made in the cache's module. */
  extraProviders?: any[]
}

export declare class HerdcacheModule {
  static forRoot(options?: HerdcacheModuleOptions): DynamicModule
  static forRootAsync(options: HerdcacheModuleAsyncOptions): DynamicModule
}

/** Answers @Cached GET routes through `cache.getOrLoad`. Bind per route (@Cached does), per controller, or globally (APP_INTERCEPTOR). */
export declare class HerdcacheInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<any>
}

export interface CachedOptions extends SharedHttpOptions {
  /** Soft TTL of the entry, ms (default: the cache's). */
  ttl?: number
  /** Hard TTL of the entry, ms. */
  hardTtl?: number
  /** `false`: never answer with a stale value. */
  stale?: boolean
  /**
   * A string names the route in the key (params, query, vary and scope are
   * still added); a function gives the whole route part of the key, or
   * `undefined` to skip the cache for this request (BYPASS).
   */
  key?: string | ((context: ExecutionContext) => string | undefined | Promise<string | undefined>)
  /** The name of the cache to use. */
  cache?: string
}

/** Caches a GET route (or every GET route of a controller) and binds HerdcacheInterceptor to it. */
export declare function Cached(options?: CachedOptions): MethodDecorator & ClassDecorator

export interface CachedMethodOptions<A extends any[] = any[]> {
  /** The key of a call; `this` is the instance. Default: class + method + the arguments as JSON. */
  key?: (this: any, ...args: A) => Key
  /** Soft TTL of the results, ms (default: the cache's). */
  ttl?: number
  /** Hard TTL of the results, ms. */
  hardTtl?: number
  /** `false`: never return a stale result; the call waits for a fresh run. */
  stale?: boolean
  /** The name of the cache to use. */
  cache?: string
  /** Tags of each result (for `cache.deleteByTag`): fixed, or per call; `this` is the instance. */
  tags?: readonly string[] | ((this: any, ...args: A) => readonly string[])
}

/** Caches a method's results through `getOrLoad`; the method then returns a promise. */
export declare function CachedMethod(options?: CachedMethodOptions): MethodDecorator

/** Injects the cache named `name` (the default cache without a name). */
export declare function InjectCache(name?: string): PropertyDecorator & ParameterDecorator

export declare function getCacheToken(name?: string): string
/** Injection token of the options the cache `name` was made with (what forRoot got or useFactory returned). */
export declare function getOptionsToken(name?: string): string

/** The key `target[method](...args)` is cached under; `target` is an instance or its class. */
export declare function cachedMethodKey(target: object, method: string, ...args: unknown[]): Key

/** Removes the cached result of `target[method](...args)` (from every instance's L1 with Redis). */
export declare function evictCached(target: object, method: string, ...args: unknown[]): Promise<boolean>

/** Removes a @Cached route's entry for these params / query / vary headers, shared or of `principal`. */
export declare function evictRoute(
  controller: Function,
  handler: string,
  request?: { params?: Record<string, string | number>; query?: Record<string, string> | string; headers?: Record<string, string>; principal?: string | number },
): Promise<boolean>
