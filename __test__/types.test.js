'use strict'
// Type-checks __test__/types.test-d.ts against the package's index.d.ts with the local TypeScript.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { ROOT, tscStrict, tsc } = require('./helpers')

const TSC = path.join(ROOT, 'node_modules', '.bin', 'tsc')
const FILE = path.join(__dirname, 'types.test-d.ts')
const COMMON = tscStrict()

test('index.d.ts exists and the package points at it', { timeout: 10000 }, () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
  assert.equal(pkg.types, 'index.d.ts')
  assert.ok(fs.existsSync(path.join(ROOT, 'index.d.ts')), 'index.d.ts is missing')
})

const BUNDLER = tscStrict('esnext')
BUNDLER[BUNDLER.indexOf('--moduleResolution') + 1] = 'bundler'
// The resolutions the README promises, with the .d.ts files checked and exact optional properties.
const RESOLUTIONS = [
  ['node16', COMMON],
  ['nodenext', tscStrict('nodenext')],
  ['bundler', BUNDLER],
]

for (const [name, args] of RESOLUTIONS) {
  test(`types.test-d.ts type-checks with tsc --noEmit --strict under ${name} (including every @ts-expect-error)`, {
    timeout: 30000,
  }, async () => {
    assert.ok(fs.existsSync(TSC), 'the local typescript is installed')
    const r = await tsc([...args, '--skipLibCheck', 'false', '--exactOptionalPropertyTypes', FILE])
    assert.equal(r.code, 0, `tsc reported:\n${r.out}`)
  })
}

test('the type test is not vacuous: a wrong use outside @ts-expect-error fails to compile', {
  timeout: 30000,
}, async (t) => {
  const bad = path.join(__dirname, '.types-negative.tmp.ts')
  t.after(() => fs.rmSync(bad, { force: true }))
  fs.writeFileSync(bad, "import { Cache } from '..'\nconst c = new Cache()\nc.getOrLoad(42, () => 1)\n")
  const r = await tsc([...COMMON, bad])
  assert.notEqual(r.code, 0, 'a number key must not type-check')
  assert.match(r.out, /error TS/)
  assert.doesNotMatch(r.out, /Cannot find module/, `the package types must resolve:\n${r.out}`)
})
