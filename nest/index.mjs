// ESM entry of herdcache/nest: the CommonJS implementation, re-exported by
// name, so `import` and `require` users share one module state (the cache
// registry, the metadata keys). Loaded with require, as the root index.mjs
// does: when loading fails, Node 20 would otherwise reject the import and
// then throw the same error again, uncaught.
import { createRequire } from 'node:module'

const nest = createRequire(import.meta.url)('./index.js')

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
