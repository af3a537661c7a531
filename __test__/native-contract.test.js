'use strict'
// The native ⇄ JS contract is written down once, in lib/native-contract.d.ts: the addon installs exactly the raw
// functions it lists, the context holds exactly its fields, and index.js and lib/ use no name it does not list.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const native = require('../lib/native')
const { Cache } = require('..')
const h = require('./helpers')

const { T, ROOT } = h
const CONTRACT_FILE = path.join(ROOT, 'lib', 'native-contract.d.ts')
const CONTRACT = fs.readFileSync(CONTRACT_FILE, 'utf8')

/** The member names of `export interface <name> {` in the contract: `name(`, `name:` or `name?:` at two spaces. */
function members(name) {
  const match = new RegExp(`export interface ${name} \\{\\n([\\s\\S]*?)\\n\\}`).exec(CONTRACT)
  assert.ok(match, `lib/native-contract.d.ts declares interface ${name}`)
  return [...match[1].matchAll(/^ {2}(\w+)(?:\??:|\()/gm)].map((m) => m[1])
}

/** Asserts that `actual` and `expected` hold the same names, saying which is missing where. */
function sameNames(actual, actualWhere, expected, expectedWhere) {
  const problems = [
    ...expected
      .filter((n) => !actual.includes(n))
      .map((n) => `\`${n}\` is in ${expectedWhere} but missing in ${actualWhere}`),
    ...actual
      .filter((n) => !expected.includes(n))
      .map((n) => `\`${n}\` is in ${actualWhere} but missing in ${expectedWhere}`),
  ]
  assert.deepEqual(problems, [], problems.join('\n'))
}

const ENTRY_POINTS = members('EntryPoints')
const CONTEXT = members('Context')
const NATIVE_CACHE = members('NativeCache')
const CONTEXT_BODY = () => /export interface Context \{\n([\s\S]*?)\n\}/.exec(CONTRACT)[1]

/** Makes a Cache and returns what its constructor gave and got from `install`. */
function installed(t) {
  let seen
  const see = (fns, [ctx, lead, softWait, resume, scheduleReads, reportProblem, decode]) => {
    seen = { ctx, lead, softWait, resume, scheduleReads, reportProblem, decode, fns }
  }
  h.withInstall(see, () => h.track(t, new Cache()))
  assert.ok(seen, 'the Cache constructor called install')
  return seen
}

test('install() returns exactly the EntryPoints of lib/native-contract.d.ts', T, (t) => {
  const { fns } = installed(t)
  sameNames(Object.keys(fns), 'what install() returns', ENTRY_POINTS, 'lib/native-contract.d.ts EntryPoints')
  for (const name of ENTRY_POINTS) {
    if (name === 'outcomeBuffer') assert.ok(fns[name] instanceof ArrayBuffer && fns[name].byteLength === 24, name)
    else if (name === 'epochBuffer') assert.ok(fns[name] instanceof ArrayBuffer && fns[name].byteLength === 4, name)
    else if (name === 'clockBuffer') assert.ok(fns[name] instanceof ArrayBuffer && fns[name].byteLength === 8, name)
    else if (name === 'values') {
      assert.ok(Array.isArray(fns[name]), name)
      assert.equal(Object.getPrototypeOf(fns[name]), null, 'no setter on Array.prototype can reach it')
    } else assert.equal(typeof fns[name], 'function', name)
  }
  sameNames(
    native.names().entryPoints,
    'names().entryPoints',
    ENTRY_POINTS.filter((n) => !n.endsWith('Buffer') && n !== 'values'),
    'EntryPoints',
  )
})

test('the context holds exactly the Context fields, with the types the contract gives', T, (t) => {
  const { ctx, fns, lead, softWait, resume, scheduleReads, reportProblem, decode } = installed(t)
  sameNames(Object.keys(ctx), 'the ctx index.js makes', CONTEXT, 'lib/native-contract.d.ts Context')
  for (const [, field, entry] of CONTEXT_BODY().matchAll(/^ {2}(\w+): EntryPoints\['(\w+)'\]$/gm)) {
    assert.equal(field, entry, `Context.${field} is the entry point of the same name`)
    assert.equal(ctx[field], fns[entry], `ctx.${field} is install()'s ${entry}`)
  }
  // Written by install() from the validated options.
  assert.deepEqual(
    [ctx.hardTimeout, ctx.softTimeout, ctx.maxValueBytes, ctx.redis],
    [30000, 0, 8 << 20, false],
    'install wrote the defaults onto ctx',
  )
  assert.equal(lead, require('../lib/leader').lead)
  assert.equal(resume, require('../lib/leader').resume)
  assert.equal(scheduleReads, require('../lib/leader').scheduleReads)
  assert.equal(reportProblem, require('../lib/leader').reportProblem)
  assert.equal(softWait, require('../lib/callers').softWait)
  assert.equal(decode, require('../lib/values').decode)
  const params = (type) =>
    new RegExp(`export type ${type} = \\(([^)]*)\\)`)
      .exec(CONTRACT)[1]
      .split(',')
      .filter((p) => p.trim())
  assert.equal(lead.length, params('Lead').length, 'lead takes the arguments Lead lists')
  assert.equal(softWait.length, params('SoftWait').length, 'softWait takes the arguments SoftWait lists')
  assert.equal(resume.length, params('Resume').length, 'resume takes the arguments Resume lists')
  assert.equal(
    scheduleReads.length,
    params('ScheduleReads').length,
    'scheduleReads takes the arguments ScheduleReads lists',
  )
  assert.equal(
    reportProblem.length,
    params('ReportProblem').length,
    'reportProblem takes the arguments ReportProblem lists',
  )
  assert.equal(decode.length, params('Decode').length, 'decode takes the arguments Decode lists')
})

test('NativeCache has the methods the contract lists', T, () => {
  for (const name of NATIVE_CACHE) assert.equal(typeof native.NativeCache.prototype[name], 'function', name)
})

test('index.js and lib/ use only the entry points, context fields and NativeCache methods of the contract', T, () => {
  const files = [
    'index.js',
    ...fs
      .readdirSync(path.join(ROOT, 'lib'))
      .filter((f) => f.endsWith('.js'))
      .map((f) => `lib/${f}`),
  ]
  const uses = { ctx: 0, fns: 0, native: 0 }
  for (const file of files) {
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8')
    for (const [, name] of text.matchAll(/\bctx\.(\w+)/g)) {
      uses.ctx++
      assert.ok(
        CONTEXT.includes(name),
        `${file} uses ctx.${name}, which Context in lib/native-contract.d.ts does not list`,
      )
    }
    for (const [, name] of text.matchAll(/(?:#|\b)fns\.(\w+)/g)) {
      uses.fns++
      assert.ok(ENTRY_POINTS.includes(name), `${file} uses the entry point ${name}, which EntryPoints does not list`)
    }
    for (const [, name] of text.matchAll(file === 'index.js' ? /(?:#|\b)native\.(\w+)/g : /#native\.(\w+)/g)) {
      uses.native++
      assert.ok(NATIVE_CACHE.includes(name), `${file} calls NativeCache.${name}, which the contract does not list`)
    }
  }
  // The scan found the uses it checks (it is not vacuous).
  assert.ok(uses.ctx > 20 && uses.fns > 5 && uses.native >= 5, JSON.stringify(uses))
})

test('lib/native-contract.d.ts type-checks (tsc --strict)', { timeout: 30000 }, async () => {
  const { code, out } = await h.tsc([...h.tscStrict(), CONTRACT_FILE])
  assert.equal(code, 0, `tsc reported:\n${out}`)
})
