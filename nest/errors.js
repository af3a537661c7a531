'use strict'

const { herdError, NEST_CODES } = require('../lib/errors')
const { codes } = require('../lib/names')

/** A usage error of herdcache/nest, with a stable `code` (one of NEST_CODES). */
function nestError(code, message, Kind = Error) {
  return herdError(Kind, code, message)
}

function invalidOption(message) {
  return herdError(TypeError, codes.INVALID_OPTION, message)
}

/** The code of the one process warning herdcache/nest emits: a signed-in request bypassed for want of a principal. */
const NO_PRINCIPAL_WARNING = 'HERDCACHE_NEST_NO_PRINCIPAL'

module.exports = { nestError, invalidOption, NO_PRINCIPAL_WARNING, NEST_CODES, codes }
