// ESM entry of herdcache/nest: the CommonJS implementation, re-exported by
// name (one copy of the module state for require and import users).
import nest from './index.js'

export const {
  HerdcacheModule,
  HerdcacheInterceptor,
  Cached,
  CachedMethod,
  HERDCACHE,
  InjectCache,
  getCacheToken,
  getOptionsToken,
  evictCached,
  evictRoute,
  cachedMethodKey,
  Cache,
} = nest
export default nest
