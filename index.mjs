// The ESM entry (`import { Cache } from 'herdcache'`): the CommonJS entry's
// exports, re-exported, so `import` and `require` share one module instance
// (one addon load, one kTesting symbol) and never see two copies of a class.
import herdcache from './index.js'

export const { Cache, kTesting } = herdcache
export default herdcache
