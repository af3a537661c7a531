// Types of the ESM entry (index.mjs): the declarations of index.d.ts, which
// index.mjs re-exports at run time, and the CommonJS exports object as default.

import * as herdcache from './index.js'

export * from './index.js'
export default herdcache
