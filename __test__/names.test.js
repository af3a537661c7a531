'use strict'
// Each public name is declared once (options, error codes and outcomes in Rust, the JS-made codes in
// lib/errors.js); the README tables and the .d.ts files are checked against those declarations here.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Cache } = require('..')
const { names } = require('../lib/native')
const { JS_CODES, NEST_CODES } = require('../lib/errors')
const libNames = require('../lib/names')
const h = require('./helpers')

const { T, ROOT } = h
const read = (file) => fs.readFileSync(path.join(ROOT, file), 'utf8')
const README = read('README.md')
const INDEX_DTS = read('index.d.ts')
const BINDING_DTS = read('binding.d.ts')
const declared = names()

/** Asserts that two lists of names hold the same names, saying which name is missing where. */
function sameNames(actual, actualWhere, expected, expectedWhere) {
  const missingHere = [...new Set(expected)].filter((name) => !actual.includes(name))
  const extraHere = [...new Set(actual)].filter((name) => !expected.includes(name))
  const problems = [
    ...missingHere.map((name) => `\`${name}\` is in ${expectedWhere} but missing in ${actualWhere}`),
    ...extraHere.map((name) => `\`${name}\` is in ${actualWhere} but missing in ${expectedWhere}`),
  ]
  assert.deepEqual(problems, [], problems.join('\n'))
  assert.equal(new Set(actual).size, actual.length, `${actualWhere} lists a name twice: ${actual.join(', ')}`)
}

/** The text of the README section under `heading` (a whole line, e.g. '### Errors'), up to the next heading. */
function section(heading) {
  const lines = README.split('\n')
  const start = lines.indexOf(heading)
  assert.notEqual(start, -1, `README.md has a section "${heading}"`)
  const level = heading.indexOf(' ')
  const end = lines.findIndex((line, i) => i > start && /^#+ /.test(line) && line.indexOf(' ') <= level)
  return lines.slice(start + 1, end === -1 ? undefined : end).join('\n')
}

/** The rows of the first Markdown table in `text`, as arrays of trimmed cells (header and rule left out). */
function tableRows(text) {
  const lines = text.split('\n')
  const start = lines.findIndex((line) => line.startsWith('|'))
  const end = lines.findIndex((line, i) => i > start && !line.startsWith('|'))
  const rows = start === -1 ? [] : lines.slice(start, end === -1 ? undefined : end)
  assert.ok(rows.length > 2, `a table in:\n${text.slice(0, 200)}`)
  return rows.slice(2).map((row) =>
    row
      .slice(1, -1)
      .split(' | ')
      .map((cell) => cell.trim()),
  )
}

/** The `code spans` of a Markdown cell. */
const codeSpans = (cell) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1])

/** The members of `export interface <name> ... {` in a .d.ts text, as [name, type] pairs. */
function interfaceMembers(dts, name, where) {
  const match = new RegExp(`export interface ${name}\\b[^{]*\\{\\n([\\s\\S]*?)\\n\\}`).exec(dts)
  assert.ok(match, `${where} declares interface ${name}`)
  return [...match[1].matchAll(/^ {2}(\w+)\??: (.+)$/gm)].map((m) => [m[1], m[2]])
}

/** The string-literal members of a union (`'a' | 'b'`) starting at `start` in `dts`. */
function unionMembers(dts, start, where) {
  const at = dts.indexOf(start)
  assert.notEqual(at, -1, `${where} has \`${start}\``)
  const union = /^[\s|]*('[^']*'[\s|]*)+/.exec(dts.slice(at + start.length))
  assert.ok(union, `${where}: \`${start}\` is followed by a union of string literals`)
  return [...union[0].matchAll(/'([^']*)'/g)].map((m) => m[1])
}

const NATIVE_OPTIONS = declared.options.map((option) => option.name)
const OPTION_TABLES = [
  ['README "new Cache(options?)" table', tableRows(section('### `new Cache(options?)`'))],
  ['README "With Redis" table', tableRows(section('## With Redis: one recompute for the whole fleet'))],
]

test(
  'the addon declares options, codes, outcomes, counters and entry points, and lib/names.js passes them on',
  T,
  () => {
    for (const list of ['options', 'codes', 'outcomes', 'counters', 'entryPoints']) {
      assert.ok(Array.isArray(declared[list]) && declared[list].length > 0, `names().${list} is a non-empty array`)
    }
    for (const option of declared.options) {
      assert.ok(['number', 'string', 'boolean'].includes(option.jsType), `${option.name}: ${option.jsType}`)
    }
    sameNames([...libNames.NATIVE_OPTIONS.keys()], 'lib/names.js NATIVE_OPTIONS', NATIVE_OPTIONS, 'names().options')
    assert.deepEqual(libNames.OUTCOMES, [undefined, ...declared.outcomes])
    assert.deepEqual(libNames.COUNTERS, declared.counters, 'lib/names.js COUNTERS (herdcache/prometheus reads them)')
    for (const code of [...declared.codes, ...Object.values(JS_CODES)]) {
      assert.equal(libNames.codes[code.slice('ERR_HERDCACHE_'.length)], code, `codes has ${code}`)
    }
    for (const code of Object.values(JS_CODES)) {
      assert.ok(!declared.codes.includes(code), `${code} is declared once: in lib/errors.js or in Rust, not both`)
    }
  },
)

test(
  'every native option has one row in the README option tables, with the default the Rust declaration gives',
  T,
  () => {
    const rows = new Map()
    const pointers = []
    for (const [where, table] of OPTION_TABLES) {
      for (const [names, defaultCell] of table) {
        const spans = codeSpans(names)
        if (spans.length > 1) {
          pointers.push(...spans)
          continue
        }
        assert.ok(!rows.has(spans[0]), `\`${spans[0]}\` has two rows in the README option tables`)
        rows.set(spans[0], { where, defaultCell })
      }
    }
    const jsOptions = interfaceMembers(INDEX_DTS, 'CacheOptions', 'index.d.ts').map(([name]) => name)
    sameNames(
      [...rows.keys()],
      'the README option tables',
      [...NATIVE_OPTIONS, ...jsOptions],
      'names().options + index.d.ts CacheOptions',
    )
    // A row naming several options points at the section that has them.
    sameNames(
      pointers,
      'the README row pointing at "With Redis"',
      OPTION_TABLES[1][1].map(([n]) => codeSpans(n)[0]),
      'the "With Redis" table',
    )
    for (const option of declared.options) {
      const { where, defaultCell } = rows.get(option.name)
      const written = defaultCell === '—' ? undefined : codeSpans(defaultCell)[0]
      assert.equal(
        written,
        option.default,
        `the default of \`${option.name}\` in ${where} (${defaultCell}) is the declared one`,
      )
    }
  },
)

test('binding.d.ts declares CacheOptions from the Rust declaration: names, types and docs', T, () => {
  const members = interfaceMembers(BINDING_DTS, 'CacheOptions', 'binding.d.ts')
  sameNames(
    members.map(([name]) => name),
    'binding.d.ts CacheOptions',
    NATIVE_OPTIONS,
    'names().options',
  )
  for (const [name, type] of members) {
    assert.equal(type, declared.options.find((option) => option.name === name).jsType, `the type of ${name}`)
  }
  const body = /export interface CacheOptions \{([\s\S]*?)\n\}/.exec(BINDING_DTS)[1]
  assert.equal(body.match(/\/\*\*/g)?.length, members.length, 'every option has its doc comment in binding.d.ts')
  assert.doesNotMatch(body, /r#?"/, 'the docs are plain text, not raw string tokens')
  assert.match(INDEX_DTS, /import type \{ CacheOptions as NativeCacheOptions \} from '\.\/binding'/)
  // Each native option, with `undefined` allowed as "absent" (exactOptionalPropertyTypes);
  // `redis` is retyped there (a URL, or { cluster: [...] }, which index.js passes as JSON text),
  // `serializer` ('json', or an object of the application's, which index.js passes as its name) and
  // `compress` (an object, passed as JSON text).
  assert.match(
    INDEX_DTS,
    /export interface CacheOptions\s+extends AbsentAsUndefined<Omit<NativeCacheOptions, 'redis' \| 'serializer' \| 'compress'>> \{[\s\S]*?\n {2}compress\?: CompressOptions \| undefined\n[\s\S]*?\n {2}serializer\?: 'json' \| Serializer \| undefined\n[\s\S]*?\n {2}redis\?: string \| RedisClusterOptions \| undefined\n/,
  )
})

test('the counters: stats(), names().counters, the README table and index.d.ts CacheStats agree', T, (t) => {
  const cache = h.track(t, new Cache())
  // Besides the declared counters and gauges, stats() has one string: the
  // last Redis failure's code (README, under the counters table).
  assert.equal(cache.stats().lastRedisError, null)
  const stats = Object.keys(cache.stats()).filter((k) => k !== 'lastRedisError')
  const counters = declared.counters.map((counter) => counter.name)
  assert.deepEqual(stats, counters, 'stats() has the declared keys, in order')
  const rows = tableRows(section('### Counters (`stats()`; `metrics()` names in brackets)'))
  const readme = rows.map(([cell]) => codeSpans(cell))
  sameNames(
    readme.map(([name]) => name),
    'the README counters table',
    counters,
    'names().counters',
  )
  for (const [name, metric] of readme) {
    const counter = declared.counters.find((c) => c.name === name)
    assert.equal(metric, counter.metric, `the README's metrics() name of ${name}`)
  }
  const metrics = cache.metrics()
  for (const { metric, gauge } of declared.counters) {
    assert.match(metrics, new RegExp(`^# TYPE ${metric} ${gauge ? 'gauge' : 'counter'}$`, 'm'), metric)
  }
  const dts = interfaceMembers(INDEX_DTS, 'CacheStats', 'index.d.ts').filter(([name]) => name !== 'lastRedisError')
  sameNames(
    dts.map(([name]) => name),
    'index.d.ts CacheStats',
    counters,
    'names().counters',
  )
  for (const [name, type] of dts) assert.equal(type, 'number', `CacheStats.${name}`)
})

test('the error codes: the README table, index.d.ts HerdcacheError and the declared codes agree', T, () => {
  const codes = [...declared.codes, ...Object.values(JS_CODES)]
  const readme = tableRows(section('### Errors')).map(([cell]) => codeSpans(cell)[0])
  sameNames(readme, 'the README error table', codes, 'names().codes + lib/errors.js JS_CODES')
  const dts = unionMembers(INDEX_DTS, 'export interface HerdcacheError extends Error {\n  code:', 'index.d.ts')
  sameNames(dts, 'index.d.ts HerdcacheError code', codes, 'names().codes + lib/errors.js JS_CODES')
  const nest = [...section('## NestJS: `herdcache/nest`').matchAll(/ERR_HERDCACHE_NEST_\w+/g)].map((m) => m[0])
  sameNames([...new Set(nest)], 'the README NestJS section', Object.values(NEST_CODES), 'lib/errors.js NEST_CODES')
})

/** The product's JavaScript files: index.js, prometheus.js (and their .mjs), every file under lib/ and nest/. */
function productSources() {
  const walk = (dir) =>
    fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
      const rel = `${dir}/${entry.name}`
      return entry.isDirectory() ? walk(rel) : [rel]
    })
  const files = ['index.js', 'index.mjs', 'prometheus.js', 'prometheus.mjs', ...walk('lib'), ...walk('nest')]
  return files.filter((f) => f.endsWith('.js') || f.endsWith('.mjs')).sort()
}

/** A file's text without its comments (block comments, and `//` to the end of a line outside a string). */
function withoutComments(text) {
  return text.replace(
    /\/\*[\s\S]*?\*\/|'(?:\\.|[^\\'\n])*'|"(?:\\.|[^\\"\n])*"|`(?:\\[\s\S]|[^\\`])*`|\/\/[^\n]*/g,
    (m) => (m.startsWith('/') ? '' : m),
  )
}

test('index.js, prometheus.js, lib/ and nest/ make only declared codes, and spell none out', T, () => {
  const known = new Set([...declared.codes, ...Object.values(JS_CODES), ...Object.values(NEST_CODES)])
  const sources = productSources()
  assert.ok(sources.includes('lib/keys.js') && sources.includes('nest/interceptor.js'), 'the walk finds the files')
  for (const file of sources) {
    const text = read(file)
    for (const [literal] of text.matchAll(/ERR_HERDCACHE_[A-Z_]+/g)) {
      assert.ok(
        known.has(literal),
        `${file} uses ${literal}, which is declared nowhere (core::error::Code or lib/errors.js)`,
      )
    }
    if (file !== 'lib/errors.js') {
      // Any string that starts as a code does (the prefix alone too): the codes are spelled in lib/errors.js only.
      const spelled = [...withoutComments(text).matchAll(/['"`](ERR_HERDCACHE_[A-Z_]*)/g)].map((m) => m[1])
      assert.deepEqual(
        spelled,
        [],
        `${file} takes its codes from lib/names.js (codes.X) or lib/errors.js (NEST_CODES.X), not string literals`,
      )
    }
    for (const [, name] of text.matchAll(/\bcodes\.([A-Z_]+)/g)) {
      assert.ok(name in libNames.codes, `${file} uses codes.${name}, which lib/names.js does not have`)
    }
    for (const [, name] of text.matchAll(/\bNEST_CODES\.([A-Z_]+)/g)) {
      assert.ok(name in NEST_CODES, `${file} uses NEST_CODES.${name}, which lib/errors.js does not have`)
    }
  }
})

test('the code-literal check sees a literal code, not one in a comment', () => {
  const spelled = (text) => [...withoutComments(text).matchAll(/['"`](ERR_HERDCACHE_[A-Z_]*)/g)].map((m) => m[1])
  assert.deepEqual(spelled("throw nestError('ERR_HERDCACHE_NEST_NO_CACHE', m)"), ['ERR_HERDCACHE_NEST_NO_CACHE'])
  assert.deepEqual(spelled('const p = `ERR_HERDCACHE_${name}`'), ['ERR_HERDCACHE_'])
  assert.deepEqual(spelled('// throws \'ERR_HERDCACHE_X\'\n/* or "ERR_HERDCACHE_Y" */ f()'), [])
  assert.deepEqual(spelled("const url = 'http://x' // 'ERR_HERDCACHE_X'"), [])
})

test('every NEST_CODES code is made somewhere in nest/ (as NEST_CODES.X)', T, () => {
  const used = new Set(
    productSources()
      .filter((file) => file.startsWith('nest/'))
      .flatMap((file) => [...withoutComments(read(file)).matchAll(/\bNEST_CODES\.([A-Z_]+)/g)].map((m) => m[1])),
  )
  const unused = Object.keys(NEST_CODES).filter((name) => !used.has(name))
  assert.deepEqual(unused, [], `NEST_CODES that nest/ never makes (remove them, or use them): ${unused.join(', ')}`)
})

test('LIMITS is names().limits, frozen, and lib/ reads each limit from it', T, () => {
  assert.deepEqual({ ...libNames.LIMITS }, { ...declared.limits })
  assert.ok(Object.isFrozen(libNames.LIMITS))
  const taken = new Set(
    productSources()
      .filter((file) => file.startsWith('lib/'))
      .flatMap((file) => [...withoutComments(read(file)).matchAll(/\bLIMITS\.(\w+)/g)].map((m) => m[1])),
  )
  const unread = Object.keys(declared.limits).filter((name) => !taken.has(name))
  assert.deepEqual(unread, [], `limits lib/ does not take from LIMITS (a JS copy of them?): ${unread.join(', ')}`)
})

test('the tiers: names().tiers are TIERS bits, getOrLoad options in index.d.ts, the README, index.js', T, () => {
  assert.deepEqual(Object.keys(libNames.TIERS), declared.tiers)
  assert.deepEqual(
    Object.values(libNames.TIERS),
    declared.tiers.map((_, bit) => 1 << bit),
  )
  assert.ok(Object.isFrozen(libNames.TIERS))
  const readme = section('### `cache.getOrLoad(key, loader, callOptions?)` → `Promise<value>`')
  const dts = read('index.d.ts')
  const options = dts.slice(dts.indexOf('export interface GetOrLoadOptions'))
  const index = withoutComments(read('index.js'))
  for (const name of declared.tiers) {
    assert.ok(libNames.CALL_OPTIONS.includes(name), `CALL_OPTIONS has ${name}`)
    assert.match(options, new RegExp(`\\b${name}\\?: boolean`), `index.d.ts GetOrLoadOptions has ${name}`)
    assert.ok(readme.includes(`\`${name}: `), `the README's getOrLoad section names ${name}`)
    assert.ok(index.includes(`TIERS.${name}`), `index.js passes ${name} as its bit (TIERS.${name})`)
  }
})

test('the outcomes: names().outcomes, index.d.ts Outcome, the README and status.outcome agree', T, async (t) => {
  const dts = unionMembers(INDEX_DTS, 'export type Outcome =', 'index.d.ts')
  assert.deepEqual(dts, declared.outcomes, 'index.d.ts Outcome lists names().outcomes, in the same order')
  const readme = section('### `cache.getOrLoad(key, loader, callOptions?)` → `Promise<value>`')
  for (const outcome of declared.outcomes) {
    assert.ok(readme.includes(`'${outcome}'`), `the README's getOrLoad section names the outcome '${outcome}'`)
  }
  // The byte order: a miss, then a hit of the same key.
  const cache = h.track(t, new Cache())
  const miss = {}
  await cache.getOrLoad('k', () => 1, { status: miss })
  const hit = {}
  await cache.getOrLoad('k', () => 1, { status: hit })
  assert.deepEqual([miss.outcome, hit.outcome], ['miss', 'hit'])
})

test('the status fields: names().status, index.d.ts, lib/names.js and the README agree', T, () => {
  const fields = { source: 'StatusSource', lock: 'StatusLock', stale: 'StatusStale' }
  const readme = section('### `cache.getOrLoad(key, loader, callOptions?)` → `Promise<value>`')
  for (const [field, type] of Object.entries(fields)) {
    const values = declared.status[field]
    assert.ok(values.length > 0, field)
    assert.deepEqual(unionMembers(INDEX_DTS, `export type ${type} =`, 'index.d.ts'), values, `index.d.ts ${type}`)
    assert.deepEqual(Object.keys(libNames.STATUS[field]), values, `lib/names.js STATUS.${field}`)
    for (const value of values) assert.ok(readme.includes(`'${value}'`), `the README names status.${field} '${value}'`)
  }
  assert.deepEqual(Object.keys(libNames.OUTCOME), declared.outcomes)
})

test('the diagnostics channels: lib/names.js, the exports, index.d.ts and the README agree', T, () => {
  const { channels } = require('..')
  assert.equal(channels, libNames.channels, 'the entry exports the names lib/names.js declares')
  assert.ok(Object.isFrozen(channels))
  const names = Object.values(channels)
  for (const name of names) assert.match(name, /^herdcache:[a-zA-Z:]+$/)
  const body = /export declare const channels: \{\n([\s\S]*?)\n\}/.exec(INDEX_DTS)
  assert.ok(body, 'index.d.ts declares `channels`')
  const typed = [...body[1].matchAll(/^ {2}readonly (\w+): '([^']+)'$/gm)].map((m) => [m[1], m[2]])
  assert.deepEqual(Object.fromEntries(typed), { ...channels }, 'index.d.ts types each name as its literal')
  // ChannelMessages maps each name to its message interface; the README table gives each message's fields.
  const map = /export interface ChannelMessages \{\n([\s\S]*?)\n\}/.exec(INDEX_DTS)
  assert.ok(map, 'index.d.ts declares ChannelMessages')
  const messageOf = new Map([...map[1].matchAll(/^ {2}'([^']+)': (\w+)$/gm)].map((m) => [m[1], m[2]]))
  sameNames([...messageOf.keys()], 'index.d.ts ChannelMessages', names, 'lib/names.js channels')
  const rows = tableRows(section('## Tracing: `node:diagnostics_channel`'))
  sameNames(
    rows.map(([cell]) => codeSpans(cell)[0]),
    'the README tracing table',
    names,
    'lib/names.js channels',
  )
  for (const [cell, kind, message] of rows) {
    const name = codeSpans(cell)[0]
    const tracing = [channels.getOrLoad, channels.refresh].includes(name)
    assert.equal(kind, tracing ? '`tracingChannel`' : 'channel', `the README's kind of ${name}`)
    const fields = codeSpans(message).flatMap((span) => span.match(/\w+/g))
    const members = interfaceMembers(INDEX_DTS, messageOf.get(name), 'index.d.ts').map(([member]) => member)
    sameNames(fields, `the README's fields of ${name}`, members, `index.d.ts ${messageOf.get(name)}`)
  }
  // Declared once: the code takes the names from lib/names.js.
  for (const file of ['index.js', ...fs.readdirSync(path.join(ROOT, 'lib')).map((f) => `lib/${f}`)]) {
    if (file === 'lib/names.js' || !file.endsWith('.js')) continue
    const code = read(file)
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/^\s*\/\/.*$/gm, '')
    const spelled = code.match(/['"`]herdcache:\w[^'"`]*/g)
    assert.equal(spelled, null, `${file} takes the channel names from lib/names.js (channels.x), not literals`)
  }
})

test('new Cache checks the option types the addon declares', T, (t) => {
  const wrong = { number: 'x', string: 1, boolean: 'yes' }
  for (const { name, jsType } of declared.options) {
    const err = h.throwsWith(() => new Cache({ [name]: wrong[jsType] }), 'ERR_HERDCACHE_INVALID_OPTION', TypeError)
    assert.match(err.message, new RegExp(`option \`${name}\` must be a ${jsType}`))
  }
  const err = h.throwsWith(() => new Cache({ tll: 1 }), 'ERR_HERDCACHE_INVALID_OPTION', TypeError)
  for (const name of [...NATIVE_OPTIONS, 'waitUntil', 'onError']) assert.ok(err.message.includes(name), name)
  h.track(t, new Cache({ ttl: 1000, prefix: 'p:', waitUntil: () => {}, onError: () => {} }))
})

test('herdcache/nest options: nest/options.js, nest/index.d.ts and the README NestJS section agree', T, () => {
  const { MODULE_HTTP, ROUTE, METHOD } = require('../nest/options')
  const NEST_DTS = read('nest/index.d.ts')
  const members = (name) => interfaceMembers(NEST_DTS, name, 'nest/index.d.ts').map(([member]) => member)
  const shared = members('SharedHttpOptions')
  const cases = [
    [Object.keys(MODULE_HTTP), 'MODULE_HTTP', [...shared, ...members('HerdcacheHttpOptions')], 'HerdcacheHttpOptions'],
    [Object.keys(ROUTE), 'ROUTE', [...shared, ...members('CachedOptions')], 'CachedOptions'],
    [Object.keys(METHOD), 'METHOD', members('CachedMethodOptions'), 'CachedMethodOptions'],
  ]
  for (const [checked, checkedWhere, typed, typedWhere] of cases) {
    sameNames(checked, `nest/options.js ${checkedWhere}`, typed, `nest/index.d.ts ${typedWhere}`)
  }
  const prose = section('## NestJS: `herdcache/nest`').replace(/^\s*```[\s\S]*?^\s*```$/gm, '')
  const spans = [...prose.matchAll(/`([^`]+)`/g)].map((m) => m[1])
  for (const name of new Set(cases.flatMap(([checked]) => checked))) {
    assert.ok(
      spans.some((span) => new RegExp(`\\b${name}\\b`).test(span)),
      `the README NestJS section documents the option \`${name}\``,
    )
  }
})
