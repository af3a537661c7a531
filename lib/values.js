'use strict'

// Values as the store keeps them. A value JSON carries is its JSON text
// (an `hc2`/`hc3` entry, src/core/envelope.rs), as before binary values
// existed: one `JSON.stringify`, and nothing else on that path but a scan
// of the text for what a binary leaves in it. A value with binary parts
// (a `Buffer`, `Uint8Array` or `ArrayBuffer`, at the top or nested) is
// bytes in the `json` format (an `hc4` entry, src/core/body.rs): the JSON
// text of the value with `null` where each part was, then the parts' raw
// bytes; its layout says how long the text is and, for each part, its
// type, length and path. Paths, not placeholders in the text, so that no
// string or object of the application's can be taken for a part.

const { types } = require('node:util')
const { herdError, typeName, JS_CODES } = require('./errors')
const { jsonCopy, NOT_COPIED } = require('./json-copy')

const { parse, stringify } = JSON

/** The built-in serializer's name (src/core/body.rs `JSON_FORMAT`). */
const JSON_FORMAT = 'json'

/**
 * Whether `json` holds what `JSON.stringify` writes for a binary: a
 * `Buffer` `{"type":"Buffer"` (its `toJSON`), a `Uint8Array` its indices
 * (`{"0":`), an empty one or an `ArrayBuffer` `{}`. A text without any of
 * them has no binary in it, and is stored as it is. Each `{` is found with
 * `indexOf` (a memchr) and only what follows it is compared: against the
 * regular expression `/\{(?:\}|"0":|"type":"Buffer")/` it took 249 ns
 * instead of 536 on bench/run.js's 1 KB value, 35 instead of 493 on a flat
 * record, and 23 µs instead of 41 on a 92 KB document (three `includes`
 * were slower still on that one).
 */
function hasBinaryTrace(json) {
  for (let at = json.indexOf('{'); at !== -1; at = json.indexOf('{', at + 1)) {
    const next = json.charCodeAt(at + 1)
    if (next === CLOSE_BRACE) return true
    if (next === QUOTE && (json.startsWith('0":', at + 2) || json.startsWith('type":"Buffer"', at + 2))) return true
  }
  return false
}
const CLOSE_BRACE = 0x7d
const QUOTE = 0x22

/** The binary type of `value` kept across the store, or undefined. */
function binaryKind(value) {
  if (Buffer.isBuffer(value)) return 'Buffer'
  if (types.isUint8Array(value)) return 'Uint8Array'
  if (types.isArrayBuffer(value)) return 'ArrayBuffer'
  return undefined
}

/**
 * Whether `value` may be a binary, or an object with one among its
 * members: what a look at the top level finds, for a few keys' reads (an
 * array is not looked into: its length is the application's). A yes is
 * checked by `encodeParts`, which finds the parts or says there are none.
 */
function holdsBinary(value) {
  if (typeof value !== 'object' || value === null) return false
  if (binaryKind(value) !== undefined) return true
  if (Array.isArray(value)) return false
  // `for…in`, not `Object.keys`: no array made on the plain JSON path.
  for (const key in value) {
    const member = value[key]
    if (typeof member === 'object' && member !== null && (ArrayBuffer.isView(member) || types.isArrayBuffer(member))) {
      return true
    }
  }
  return false
}

/** The bytes of a binary of `kind`, not copied. */
function bytesOf(value, kind) {
  return kind === 'ArrayBuffer'
    ? new Uint8Array(value)
    : new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
}

/**
 * A copy of `value` for `JSON.stringify`, with `null` where each binary was;
 * the binaries go to `parts` with their paths. What `JSON.stringify` treats
 * itself (an object with `toJSON`, a primitive) is left as it is.
 *
 * @param {unknown} value
 * @param {Array<string | number>} path
 * @param {Array<{ kind: string, path: Array<string | number>, bytes: Uint8Array }>} parts
 */
function strip(value, path, parts) {
  if (value === null || typeof value !== 'object') return value
  const kind = binaryKind(value)
  if (kind !== undefined) {
    parts.push({ kind, path: [...path], bytes: bytesOf(value, kind) })
    return null
  }
  if (Array.isArray(value)) {
    const out = new Array(value.length)
    for (let i = 0; i < value.length; i++) {
      path.push(i)
      out[i] = strip(value[i], path, parts)
      path.pop()
    }
    return out
  }
  if (typeof value.toJSON === 'function') return value
  // No prototype: a key named `__proto__` stays a key.
  const out = Object.create(null)
  for (const key of Object.keys(value)) {
    path.push(key)
    out[key] = strip(value[key], path, parts)
    path.pop()
  }
  return out
}

/**
 * `value` in the `json` format with its binary parts, or undefined when it
 * has none (its JSON text is all there is).
 *
 * @param {unknown} value
 * @returns {{ format: string, bytes: Buffer } | undefined}
 */
function encodeParts(value) {
  const parts = []
  const text = stringify(strip(value, [], parts))
  if (parts.length === 0) return undefined
  const head = Buffer.from(text === undefined ? 'null' : text)
  const layout = [head.length]
  const chunks = [head]
  for (const part of parts) {
    layout.push([part.kind, part.bytes.byteLength, ...part.path])
    chunks.push(part.bytes)
  }
  return { format: `${JSON_FORMAT} ${stringify(layout)}`, bytes: Buffer.concat(chunks) }
}

/** A new binary of `kind` holding a copy of `length` bytes of `bytes` from `offset`. */
function copyOf(kind, bytes, offset, length) {
  const view = bytes.subarray(offset, offset + length)
  if (kind === 'Buffer') return Buffer.from(view)
  const copy = new Uint8Array(view)
  return kind === 'Uint8Array' ? copy : copy.buffer
}

/** Puts `part` at `path` in `root`; the new root. */
function place(root, path, part) {
  if (path.length === 0) return part
  let holder = root
  for (let i = 0; i < path.length - 1; i++) holder = holder[path[i]]
  // Defined, not assigned: a key named `__proto__` is an own key here too.
  Object.defineProperty(holder, path[path.length - 1], {
    value: part,
    writable: true,
    enumerable: true,
    configurable: true,
  })
  return root
}

/**
 * The value of bytes in the `json` format with binary parts (`layout` as
 * `encodeParts` wrote it). The store checked that the lengths fit the bytes
 * (src/engine/shared/values.rs `layout_fits`).
 *
 * @param {string} layout
 * @param {Buffer} bytes
 */
function decodeParts(layout, bytes) {
  const [textLength, ...parts] = parse(layout)
  let root = parse(bytes.toString('utf8', 0, textLength))
  let offset = textLength
  for (const [kind, length, ...path] of parts) {
    root = place(root, path, copyOf(kind, bytes, offset, length))
    offset += length
  }
  return root
}

// An application's serializer (the `serializer` option): its format is its
// name and what `serialize` returned, `s` a string or `b` bytes, so that
// `deserialize` gets the same kind back (superjson's `parse` takes a
// string, msgpackr's `unpack` a Buffer).
const AS_STRING = 's'
const AS_BYTES = 'b'

/** What `serializer.serialize(value)` made, as stored bytes (a copy: msgpackr reuses its buffer). */
function serializeWith(serializer, value) {
  let out
  try {
    out = serializer.serialize(value)
  } catch (cause) {
    throw herdError(
      Error,
      JS_CODES.SERIALIZE,
      `the serializer ${stringify(serializer.name)} threw in serialize() (${cause?.message ?? cause}); nothing was stored`,
      cause,
    )
  }
  if (typeof out === 'string') return { as: AS_STRING, bytes: Buffer.from(out), text: out }
  if (out instanceof Uint8Array) return { as: AS_BYTES, bytes: Buffer.from(out) }
  throw herdError(
    TypeError,
    JS_CODES.SERIALIZE,
    `the serializer ${stringify(serializer.name)} returned ${typeName(out)} from serialize(); it must return a Buffer, a Uint8Array or a string. Nothing was stored`,
  )
}

/** `serializer.deserialize(stored)`, its exception a coded error. */
function deserializeWith(serializer, stored) {
  try {
    return serializer.deserialize(stored)
  } catch (cause) {
    throw herdError(
      Error,
      JS_CODES.DESERIALIZE,
      `the serializer ${stringify(serializer.name)} threw in deserialize() (${cause?.message ?? cause})`,
      cause,
    )
  }
}

/**
 * A stored value in a format of its own (an `hc4` entry), as the addon
 * hands it over: its format line's format and its bytes. Called by the
 * addon (values another instance wrote) and by `get` (`peek`'s answer).
 * The addon hands over only values of this cache's serializer
 * (src/engine/fleet/reads.rs `judge_serializer`).
 *
 * @param {import('./native-contract').Context} ctx the cache's context
 * @param {string} format
 * @param {Buffer} bytes
 */
function decode(ctx, format, bytes) {
  const space = format.indexOf(' ')
  const name = space < 0 ? format : format.slice(0, space)
  const layout = format.slice(space + 1)
  const { serializer } = ctx
  if (serializer !== undefined && name === serializer.name) {
    return deserializeWith(serializer, layout === AS_STRING ? bytes.toString() : bytes)
  }
  if (serializer === undefined && name === JSON_FORMAT && space >= 0) return decodeParts(layout, bytes)
  throw herdError(
    Error,
    JS_CODES.DESERIALIZE,
    `a stored value of serializer ${stringify(name)} reached a cache whose serializer is ${stringify(serializer?.name ?? JSON_FORMAT)}`,
  )
}

/** `encode` with the application's serializer: the callers get what a reader will, `deserialize` of the bytes. */
function encodeWith(serializer, value) {
  const out = serializeWith(serializer, value)
  const copy = deserializeWith(serializer, out.as === AS_STRING ? out.text : Buffer.from(out.bytes))
  return { value: copy, body: out.bytes, format: `${serializer.name} ${out.as}` }
}

/**
 * What `value` is stored as: `body` its JSON text, or with `format` its
 * bytes; `value` the copy the callers and the L1 get (what a reader of the
 * store gets). No `body` when the store needs no text (`ctx.needsText`)
 * and lib/json-copy.js made the copy, within `maxValueBytes`. Undefined
 * when JSON cannot represent it (a function, a symbol, undefined); throws
 * what `JSON.stringify` throws (a cycle, a BigInt), or with the
 * application's serializer an error coded `ERR_HERDCACHE_SERIALIZE` or
 * `ERR_HERDCACHE_DESERIALIZE` (`isSerializerError`).
 *
 * @param {import('./native-contract').Context} ctx the cache's context
 * @param {unknown} value not null or undefined
 * @returns {{ value: unknown, body: string | Buffer | undefined, format: string | undefined } | undefined}
 */
function encode(ctx, value) {
  if (ctx.serializer !== undefined) return encodeWith(ctx.serializer, value)
  if (!ctx.needsText && typeof value === 'object') {
    const copy = jsonCopy(value, ctx.maxValueBytes)
    if (copy !== NOT_COPIED) return { value: copy, body: undefined, format: undefined }
  }
  // A binary at the top, or a record's binary member (its thumbnail), is
  // never stringified: its JSON is a number per byte (40 ms a MB here).
  const early = holdsBinary(value) ? encodeParts(value) : undefined
  if (early !== undefined) return formatted(early)
  const json = stringify(value)
  if (json === undefined) return undefined
  const encoded = hasBinaryTrace(json) ? encodeParts(value) : undefined
  if (encoded === undefined) return { value: parse(json), body: json, format: undefined }
  return formatted(encoded)
}

/** `encode`'s answer for bytes in the `json` format with binary parts: the callers get what a reader will. */
function formatted(encoded) {
  const copy = decodeParts(encoded.format.slice(JSON_FORMAT.length + 1), encoded.bytes)
  return { value: copy, body: encoded.bytes, format: encoded.format }
}

/** Whether `error` is one the application's serializer caused (it goes to the callers as it is). */
function isSerializerError(error) {
  return error?.code === JS_CODES.SERIALIZE || error?.code === JS_CODES.DESERIALIZE
}

/**
 * The problem with the `serializer` option, or undefined: `'json'`, or an
 * object with a `name` and the two functions (the addon checks the name's
 * characters, src/core/options.rs).
 */
function serializerProblem(serializer) {
  if (serializer === JSON_FORMAT) return undefined
  const shape = "must be a string ('json') or an object { name, serialize(value), deserialize(stored) }"
  if (typeof serializer !== 'object' || serializer === null)
    return `option \`serializer\` ${shape}; got ${stringify(serializer) ?? typeName(serializer)}`
  const { name, serialize, deserialize } = serializer
  if (typeof name !== 'string') return `option \`serializer\` ${shape}; its name is ${typeName(name)}`
  if (name === JSON_FORMAT)
    return "option `serializer`: the name 'json' is the built-in serializer's; give yours another"
  for (const [what, fn] of [
    ['serialize', serialize],
    ['deserialize', deserialize],
  ]) {
    if (typeof fn !== 'function') return `option \`serializer\` ${shape}; its ${what} is ${typeName(fn)}`
  }
  return undefined
}

module.exports = { encode, decode, isSerializerError, serializerProblem, JSON_FORMAT }
