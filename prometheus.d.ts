// Types of herdcache/prometheus (prometheus.js, and prometheus.mjs, which
// re-exports it). prom-client 14 or 15, an optional peer dependency.

import type { Registry, RegistryContentType } from 'prom-client'
import type { Cache } from './index'

export interface CollectOptions {
  /**
   * The value of the `cache` label on this cache's series. Needed when several caches share a registry;
   * without it (one cache) the series have no label, as in `cache.metrics()`.
   */
  name?: string | undefined
}

/**
 * Collects the cache's counters into a prom-client registry: one Counter or Gauge per `cache.metrics()` name
 * (`herdcache_hits_total`, `herdcache_entries`, …, `herdcache_redis_last_error{code}`), read from
 * `cache.stats()` at each scrape. The registry holds the cache weakly; a closed cache keeps its final values
 * until the returned function is called.
 *
 * @returns stops collecting this cache; with the last one, the metrics leave the registry
 * @throws {import('./index').HerdcacheError} `ERR_HERDCACHE_INVALID_OPTION`: not a registry, not a Cache, a bad
 *   option, a `name` taken in this registry, or a metric of that name registered by something else
 */
export declare function collectInto(
  registry: Registry<RegistryContentType>,
  cache: Cache,
  options?: CollectOptions,
): () => void
