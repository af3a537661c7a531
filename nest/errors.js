'use strict'

const { herdError } = require('../lib/errors')

/** A usage error of herdcache/nest, with a stable `code`. */
function nestError(code, message, Kind = Error) {
  return herdError(Kind, code, message)
}

function invalidOption(message) {
  return herdError(TypeError, 'ERR_HERDCACHE_INVALID_OPTION', message)
}

module.exports = { nestError, invalidOption }
