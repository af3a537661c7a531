'use strict'
// herdcache/nest loads through the package's exports map with require and
// with import (one module state for both), and its types check.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const fs = require('node:fs')
const { execFile } = require('node:child_process')

const { ROOT, tsc, tscStrict } = require('../helpers')
const NAMES = [
  'Cache',
  'Cached',
  'CachedMethod',
  'HERDCACHE',
  'HerdcacheInterceptor',
  'HerdcacheModule',
  'InjectCache',
  'cachedMethodKey',
  'evictCached',
  'evictRoute',
  'getCacheToken',
  'getOptionsToken',
]

function run(file, args, timeout = 30_000) {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: ROOT, timeout }, (error, stdout, stderr) => {
      resolve({ code: error ? (error.code ?? 1) : 0, stdout, stderr })
    })
  })
}

test("require('herdcache/nest') loads the CommonJS entry", async () => {
  const script = `
    const nest = require('herdcache/nest')
    const { Cache } = require('herdcache')
    console.log(JSON.stringify({ names: Object.keys(nest).sort(), same: nest.Cache === Cache,
      file: require.resolve('herdcache/nest'), module: typeof nest.HerdcacheModule.forRoot }))`
  const r = await run(process.execPath, ['-e', script])
  assert.equal(r.code, 0, r.stderr)
  const out = JSON.parse(r.stdout)
  assert.deepEqual(out.names, NAMES)
  assert.equal(out.same, true)
  assert.equal(out.file, path.join(ROOT, 'nest', 'index.js'))
  assert.equal(out.module, 'function')
})

test("import('herdcache/nest') loads the ESM entry, sharing the CommonJS module's state", async () => {
  const script = `
    import * as nest from 'herdcache/nest'
    import { createRequire } from 'node:module'
    import { Cache } from 'herdcache'
    const require = createRequire(import.meta.url)
    const names = Object.keys(nest).filter((n) => n !== 'default').sort()
    console.log(JSON.stringify({ names, same: nest.HerdcacheModule === require('herdcache/nest').HerdcacheModule,
      cache: nest.Cache === Cache, url: import.meta.resolve('herdcache/nest') }))`
  const r = await run(process.execPath, ['--input-type=module', '-e', script])
  assert.equal(r.code, 0, r.stderr)
  const out = JSON.parse(r.stdout)
  assert.deepEqual(out.names, NAMES)
  assert.equal(out.same, true)
  assert.equal(out.cache, true)
  assert.ok(out.url.endsWith('/nest/index.mjs'), out.url)
})

test('the package exports map and files list carry herdcache/nest', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
  assert.deepEqual(pkg.exports['./nest'], {
    import: { types: './nest/index.d.ts', default: './nest/index.mjs' },
    require: { types: './nest/index.d.ts', default: './nest/index.js' },
  })
  assert.ok(pkg.files.includes('nest/'))
  for (const peer of ['@nestjs/common', '@nestjs/core', 'rxjs', 'reflect-metadata']) {
    assert.ok(pkg.peerDependencies[peer], peer)
    assert.equal(pkg.peerDependenciesMeta[peer]?.optional, true, `${peer} is an optional peer`)
  }
})

const DECORATORS = ['--experimentalDecorators', '--emitDecoratorMetadata', '--exactOptionalPropertyTypes']
// With the .d.ts files checked too: an error in nest/index.d.ts must fail here, as in a user's build.
const LIB_CHECK = ['--skipLibCheck', 'false']
const TSC_ARGS = [...tscStrict('nodenext'), ...DECORATORS, ...LIB_CHECK]
const BUNDLER = tscStrict('esnext')
BUNDLER[BUNDLER.indexOf('--moduleResolution') + 1] = 'bundler'

// Every `moduleResolution` the README promises, and in node16/nodenext both
// an ES module consumer (.mts: Nest 12 is ESM-only, so a TypeScript app on
// it is one) and a CommonJS one. The files of one resolution are checked by
// one tsc run (a run is ~4 s here, most of it loading the libraries' types:
// issue 26's time bound); its errors name the file they are in.
const IMPORTS_ALONE =
  "import { Cached, HerdcacheModule } from 'herdcache/nest'\n" +
  'Cached({ ttl: 1000, stale: false })\n' +
  'HerdcacheModule.forRoot({ redis: process.env.REDIS_URL, http: { principalSecret: process.env.SECRET ?? "s" } })\n'
const TYPE_TEST = () => fs.readFileSync(path.join(__dirname, 'types.test-d.ts'), 'utf8')
const RESOLUTIONS = [
  [
    'node16: types.test-d.ts as an ES module, and a CommonJS file that imports herdcache/nest alone',
    [...tscStrict('node16'), ...DECORATORS, ...LIB_CHECK],
    [
      ['esm.mts', TYPE_TEST],
      ['cjs-alone.ts', () => IMPORTS_ALONE],
    ],
  ],
  [
    'nodenext: types.test-d.ts as an ES module and as CommonJS',
    TSC_ARGS,
    [
      ['esm.mts', TYPE_TEST],
      ['cjs.ts', TYPE_TEST],
    ],
  ],
  ['bundler: types.test-d.ts', [...BUNDLER, ...DECORATORS, ...LIB_CHECK], [['bundler.ts', TYPE_TEST]]],
]

for (const [name, args, sources] of RESOLUTIONS) {
  test(`nest/index.d.ts under ${name} type-checks (with every @ts-expect-error)`, {
    timeout: 60_000,
  }, async (t) => {
    const files = sources.map(([suffix, text]) => {
      const file = path.join(__dirname, `.nest-types-${name.split(':')[0]}-${suffix.replace('.', '.tmp.')}`)
      fs.writeFileSync(file, text())
      return file
    })
    t.after(() => {
      for (const file of files) fs.rmSync(file, { force: true })
    })
    const r = await tsc([...args, ...files], 55_000)
    assert.equal(r.code, 0, `tsc reported:\n${r.out}`)
  })
}

test('the type test is not vacuous: a wrong @Cached option fails to compile', { timeout: 60_000 }, async (t) => {
  const bad = path.join(__dirname, '.nest-types-negative.tmp.ts')
  t.after(() => fs.rmSync(bad, { force: true }))
  fs.writeFileSync(bad, "import { Cached } from 'herdcache/nest'\nCached({ scope: 'everyone' })\n")
  const r = await tsc([...TSC_ARGS, bad], 55_000)
  assert.notEqual(r.code, 0)
  assert.match(r.out, /error TS/)
  assert.doesNotMatch(r.out, /Cannot find module/, r.out)
})

test('examples/nest (TypeScript) type-checks against herdcache/nest', { timeout: 60_000 }, async () => {
  const r = await tsc(['-p', path.join(ROOT, 'examples', 'nest'), '--noEmit'], 55_000)
  assert.equal(r.code, 0, `tsc reported:\n${r.out}`)
})
