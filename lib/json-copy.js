'use strict'

// The copy a call returns is `JSON.parse(JSON.stringify(value))` (README,
// "Values are stored as JSON"). Where nothing needs the JSON text itself
// (the embedded store, not bounded in bytes), `jsonCopy` makes that copy
// without the text, for the values made of what it knows: plain objects,
// arrays, strings, finite numbers, booleans, null, and Dates with their
// built-in `toJSON`. On bench/run.js's 1 KB value it took 3.3 µs where
// the text and back took 10.5 (bench/memory.js's flat record: 3.1 and 5.5;
// its nested one: 4.4 and 8.3), most of a cold key.
//
// How, so that the copy is what `JSON.parse` would have built, in memory too:
// - An object is copied with spread, which lays the copy out as its source
//   (`JSON.parse` sizes its objects exactly; one filled key by key would
//   grow a property array with slack). Its members are then made JSON's:
//   -0 as 0, a non-finite number as null, an object as its copy.
// - A string is kept when it is shorter than 13 characters: V8 makes none
//   shorter than that a rope or a slice. A longer one may be either, and
//   the copy must not keep the whole text a slice was cut from, nor a rope
//   of a hundred pieces: they are copied together, in one JSON round trip
//   of their list, into new flat strings, as `JSON.parse` makes them.
// - A copied string of up to LONGEST_INTERNED characters is kept once for
//   the copies made lately that have it (`interned`): values repeat
//   such strings (a time zone, a company, a job title), and a JS string
//   cannot be changed, so sharing one is not seen. bench/memory.js's flat
//   record repeats three.
//
// For anything else (a class instance, a Map, a binary, a BigInt, a member
// that is undefined, a function or a symbol, a symbol key, a `toJSON` of
// the application's, a `__proto__` key, a structure deeper than MAX_DEPTH:
// a cycle) it answers NOT_COPIED and the caller takes the JSON way, which
// has the exact rules and errors. One difference is left, on purpose: a
// getter (or a Proxy's trap) of a value it gives up on has run once more
// by the time the JSON way reads it.

const NOT_COPIED = Symbol('herdcache.notCopied')

/** Deeper than this is copied the JSON way (it reports a cycle as JSON does). */
const MAX_DEPTH = 64

/** V8's shortest rope or slice (`ConsString::kMinLength`, `SlicedString::kMinLength`): a shorter string is flat. */
const SHORTEST_SHARED = 13

/** The longest copied string kept once for all the copies that have it. */
const LONGEST_INTERNED = 64
/**
 * The copied strings of the copies made lately, by a hash of their text: a
 * fixed table that a string replaces another in (no Map: the garbage of a
 * Map emptied and grown again fragmented the old space by more than the
 * strings it saved, bench/memory.js).
 */
const INTERNED_BITS = 12
const interned = new Array(1 << INTERNED_BITS).fill('')

/** The string kept for `text`: one made before with its text, else `text`, kept for the next. */
function intern(text) {
  const n = text.length
  if (n > LONGEST_INTERNED) return text
  // FNV-1a over its characters.
  let hash = 0x811c9dc5
  for (let i = 0; i < n; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193)
  const at = (hash ^ (hash >>> 16)) & (interned.length - 1)
  const known = interned[at]
  if (known === text) return known
  interned[at] = text
  return text
}

/** At most this many bytes of JSON per string character (`\uXXXX`), per number, and per `true`/`null`. */
const BYTES_PER_CHAR = 6
const NUMBER_BYTES = 25
const WORD_BYTES = 5

const { getPrototypeOf, getOwnPropertySymbols } = Object
const { isArray } = Array
const { isFinite: finite } = Number
const OBJECT = Object.prototype
const DATE = Date.prototype
const { toJSON: dateToJSON, toISOString: dateToISOString, valueOf: dateValueOf } = DATE
const dateToPrimitive = DATE[Symbol.toPrimitive]

/**
 * One copy in the making: its long strings (each with where it goes), and
 * its JSON bytes left. One is kept and reused, so that a copy allocates
 * only what it returns (a getter that makes a copy meanwhile gets its own).
 */
class Copying {
  constructor() {
    this.busy = false
    this.left = 0
    this.holders = []
    this.names = []
    this.strings = []
  }

  start(maxBytes) {
    this.busy = true
    this.left = maxBytes
  }

  /** Forgets what it held (so it keeps nothing alive) and is free again. */
  end() {
    this.holders.length = 0
    this.names.length = 0
    this.strings.length = 0
    this.busy = false
  }

  /** A string for `holder[name]`: kept if short, else copied with the others at the end. */
  string(text, holder, name) {
    this.left -= BYTES_PER_CHAR * text.length + 3
    if (text.length < SHORTEST_SHARED) return
    this.holders.push(holder)
    this.names.push(name)
    this.strings.push(text)
  }

  /** Puts a new flat copy of each long string where it goes (or the one kept for its text). */
  finish() {
    const { strings } = this
    if (strings.length === 0) return
    const copies = JSON.parse(JSON.stringify(strings))
    const { holders, names } = this
    for (let i = 0; i < copies.length; i++) holders[i][names[i]] = intern(copies[i])
  }
}

/**
 * `JSON.parse(JSON.stringify(value))` for an object `value` made only of
 * what this module copies, else NOT_COPIED; also NOT_COPIED when its JSON
 * text could be longer than `maxBytes` (the JSON way measures it then).
 *
 * @param {object} value not null
 * @param {number} maxBytes
 * @returns {unknown}
 */
function jsonCopy(value, maxBytes) {
  if (inheritsEnumerable()) return NOT_COPIED
  const copying = reused.busy ? new Copying() : reused
  copying.start(maxBytes)
  try {
    const copy = copyObject(value, 0, copying)
    if (copy === NOT_COPIED || copying.left < 0) return NOT_COPIED
    copying.finish()
    return copy
  } finally {
    copying.end()
  }
}
const reused = new Copying()

/** Whether a plain object inherits an enumerable key (Object.prototype polluted): `for…in` would list it. */
function inheritsEnumerable() {
  for (const _ in EMPTY) return true
  return false
}
const EMPTY = {}

function copyObject(value, depth, copying) {
  if (depth > MAX_DEPTH || copying.left < 0) return NOT_COPIED
  const toJSON = value.toJSON
  if (toJSON !== undefined) return toJSON === dateToJSON ? copyDate(value, copying) : NOT_COPIED
  if (isArray(value)) return copyArray(value, depth, copying)
  const proto = getPrototypeOf(value)
  if ((proto !== OBJECT && proto !== null) || getOwnPropertySymbols(value).length > 0) return NOT_COPIED
  // Own enumerable string keys, read once each (getters run here), in JSON's order.
  const out = { ...value }
  copying.left -= 2
  // `for…in` lists no inherited key (`jsonCopy` checked Object.prototype), and makes no array.
  for (const name in out) {
    // Assigned below, `__proto__` would set the copy's prototype, not a key.
    if (name === '__proto__') return NOT_COPIED
    copying.left -= BYTES_PER_CHAR * name.length + 4
    const member = out[name]
    switch (typeof member) {
      case 'boolean':
        copying.left -= WORD_BYTES
        break
      case 'number':
        copying.left -= NUMBER_BYTES
        if (member === 0) out[name] = 0
        else if (!finite(member)) out[name] = null
        break
      case 'string':
        copying.string(member, out, name)
        break
      case 'object': {
        if (member === null) {
          copying.left -= WORD_BYTES
          break
        }
        const copy = copyObject(member, depth + 1, copying)
        if (copy === NOT_COPIED) return NOT_COPIED
        out[name] = copy
        break
      }
      default:
        // Undefined, a function, a symbol: JSON leaves the key out.
        return NOT_COPIED
    }
  }
  return out
}

function copyArray(value, depth, copying) {
  const length = value.length
  // Every element is at least one byte and a comma: a huge sparse array is left to JSON.
  copying.left -= 2 * length + 2
  if (copying.left < 0) return NOT_COPIED
  // Its length at once, as JSON.parse sizes it: grown by `push`, a short
  // array kept up to 16 empty slots (bench/memory.js's nested record: +200
  // bytes an entry).
  const out = new Array(length)
  for (let i = 0; i < length; i++) {
    const element = value[i]
    switch (typeof element) {
      case 'boolean':
        copying.left -= WORD_BYTES
        out[i] = element
        break
      case 'number':
        copying.left -= NUMBER_BYTES
        out[i] = finite(element) ? element + 0 : null
        break
      case 'string':
        out[i] = element
        copying.string(element, out, i)
        break
      case 'object': {
        const copy = element === null ? null : copyObject(element, depth + 1, copying)
        if (copy === NOT_COPIED) return NOT_COPIED
        out[i] = copy
        break
      }
      default:
        // A hole, undefined, a function, a symbol: JSON writes null.
        copying.left -= WORD_BYTES
        out[i] = null
    }
  }
  return out
}

/** A Date's JSON: what its built-in `toJSON` gives (a new string), when nothing of it is overridden. */
function copyDate(date, copying) {
  if (
    getPrototypeOf(date) !== DATE ||
    date.toISOString !== dateToISOString ||
    date.valueOf !== dateValueOf ||
    date[Symbol.toPrimitive] !== dateToPrimitive
  ) {
    return NOT_COPIED
  }
  copying.left -= 2 * WORD_BYTES + 20
  return finite(dateValueOf.call(date)) ? dateToISOString.call(date) : null
}

module.exports = { jsonCopy, NOT_COPIED }
