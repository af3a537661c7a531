// ESM entry of herdcache/prometheus: the CommonJS implementation, re-exported,
// so `import` and `require` users share one module state (what each registry
// collects). Loaded with require, as the root index.mjs does: when loading
// fails, Node 20 would otherwise reject the import and then throw the same
// error again, uncaught.
import { createRequire } from 'node:module'

const prometheus = createRequire(import.meta.url)('./prometheus.js')

export const { collectInto } = prometheus
export default prometheus
