// The ESM entry (`import { Cache } from 'herdcache'`): the CommonJS entry's
// exports, re-exported, so `import` and `require` share one module instance
// (one addon load, one kTesting symbol) and never see two copies of a class.
// Loaded with require rather than `import ... from './index.js'`: when loading
// fails (ERR_HERDCACHE_NO_BINARY), Node 20 would reject the import and then
// throw the same error again, uncaught.
import { createRequire } from 'node:module'

const herdcache = createRequire(import.meta.url)('./index.js')

export const { Cache, kTesting, channels } = herdcache
export default herdcache
