'use strict'
// Loading the addon where there is no binary for the platform (faked with a
// preload that overrides process.platform/arch): one ERR_HERDCACHE_NO_BINARY
// naming the platform and the ways out; HERDCACHE_NATIVE_PATH as the way out.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { ROOT } = require('./helpers')

const T = { timeout: 20000 }
const ADDON = fs.readdirSync(ROOT).find((name) => /^herdcache\..+\.node$/.test(name))

// Prints, as JSON, what loading the package entry (`require` or `import`) threw.
const PROBE = `
const describe = (e) => ({ thrown: true, isError: e instanceof Error, name: e?.name, code: e?.code,
  message: e?.message, cause: e?.cause?.message })
async function main() {
  const out = {}
  try {
    const { Cache } = require(process.env.PROBE_ENTRY)
    const cache = new Cache()
    out.require = { thrown: false, value: await cache.getOrLoad('k', () => 'loaded') }
    await cache.close()
  } catch (e) { out.require = describe(e) }
  try {
    const esm = process.env.PROBE_ENTRY.replace(/index\\.js$/, 'index.mjs')
    await import(require('node:url').pathToFileURL(esm))
    out.import = { thrown: false }
  } catch (e) { out.import = describe(e) }
  console.log(JSON.stringify(out))
}
main()
`

let scratch
test.before(() => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'herdcache-native-'))
  fs.writeFileSync(
    path.join(scratch, 'fake-platform.js'),
    [
      "const [platform, arch] = process.env.FAKE_PLATFORM.split('-')",
      "Object.defineProperty(process, 'platform', { value: platform })",
      "Object.defineProperty(process, 'arch', { value: arch })",
    ].join('\n'),
  )
})
test.after(() => fs.rmSync(scratch, { recursive: true, force: true }))

/** Runs PROBE on `entry` with the platform faked as `platform` (or real when undefined). */
function probe({ platform, entry = path.join(ROOT, 'index.js'), env = {} }) {
  const args = platform ? ['-r', path.join(scratch, 'fake-platform.js'), '-e', PROBE] : ['-e', PROBE]
  const result = spawnSync(process.execPath, args, {
    cwd: scratch,
    encoding: 'utf8',
    timeout: 15000,
    env: { ...process.env, HERDCACHE_NATIVE_PATH: '', FAKE_PLATFORM: platform, PROBE_ENTRY: entry, ...env },
  })
  assert.equal(result.status, 0, `the probe crashed:\n${result.stderr}`)
  assert.equal(result.stderr, '', 'nothing but the one error: no warning, no second error')
  return JSON.parse(result.stdout)
}

function assertNoBinary(outcome, ...mentions) {
  assert.equal(outcome.thrown, true, 'loading must fail')
  assert.equal(outcome.isError, true)
  assert.equal(outcome.code, 'ERR_HERDCACHE_NO_BINARY', `not the coded error: ${outcome.message}`)
  for (const mention of mentions) {
    assert.ok(outcome.message.includes(mention), `the message names ${mention}:\n${outcome.message}`)
  }
  assert.doesNotMatch(outcome.message, /Cannot find native binding/, "napi's text is the cause, not the message")
}

test('the real platform loads (the faked runs below are not failing for another reason)', T, () => {
  assert.ok(ADDON, 'the addon is built (npm test builds it with scripts/ensure-built.js)')
  const out = probe({})
  assert.deepEqual(out.require, { thrown: false, value: 'loaded' })
  assert.deepEqual(out.import, { thrown: false })
})

test('an unsupported platform: ERR_HERDCACHE_NO_BINARY names it, the supported ones and how to build', T, () => {
  const out = probe({ platform: 'freebsd-x64' })
  assertNoBinary(
    out.require,
    'freebsd-x64',
    'linux-x64-gnu, linux-arm64-gnu, linux-x64-musl, linux-arm64-musl, darwin-x64, darwin-arm64, win32-x64-msvc',
    'npm install && npm run build',
    'HERDCACHE_NATIVE_PATH=<that checkout>/herdcache.freebsd-x64.node',
  )
  assert.match(out.require.cause, /Cannot find native binding/, "napi's error is kept as cause")
  // The ESM entry fails the same way, with the same code.
  assertNoBinary(out.import, 'freebsd-x64')
})

test('a supported platform whose optional package is not installed: names the package', T, () => {
  const out = probe({ platform: 'linux-arm64' })
  assertNoBinary(out.require, 'herdcache-linux-arm64-', 'optional dependency', 'npm run build')
  assert.match(out.require.message, /for linux-arm64-(gnu|musl) is missing/)
})

test('an installed platform package whose binary does not load: says why', T, () => {
  const modules = path.join(scratch, 'broken', 'node_modules')
  for (const abi of ['gnu', 'musl']) {
    const dir = path.join(modules, `herdcache-linux-arm64-${abi}`)
    fs.mkdirSync(dir, { recursive: true })
    const binary = `herdcache.linux-arm64-${abi}.node`
    const manifest = { name: path.basename(dir), version: '0.1.0', main: binary }
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(manifest))
    fs.writeFileSync(path.join(dir, binary), 'not an ELF file')
  }
  const out = probe({ platform: 'linux-arm64', env: { NODE_PATH: modules } })
  assertNoBinary(out.require, 'is installed but failed to load', '.node')
})

test('HERDCACHE_NATIVE_PATH loads a binary built from source, whatever the platform says', T, () => {
  const out = probe({ platform: 'freebsd-x64', env: { HERDCACHE_NATIVE_PATH: path.join(ROOT, ADDON) } })
  assert.deepEqual(out.require, { thrown: false, value: 'loaded' })
})

test('HERDCACHE_NATIVE_PATH naming a missing file: ERR_HERDCACHE_NO_BINARY naming the path', T, () => {
  const missing = path.join(scratch, 'no-such.node')
  const out = probe({ env: { HERDCACHE_NATIVE_PATH: missing } })
  assertNoBinary(out.require, `HERDCACHE_NATIVE_PATH=${missing}`)
})

test('a checkout without binding.js: ERR_HERDCACHE_NO_BINARY says to build', T, () => {
  const copy = path.join(scratch, 'unbuilt')
  fs.mkdirSync(copy)
  for (const entry of ['index.js', 'index.mjs', 'package.json', 'lib']) {
    fs.cpSync(path.join(ROOT, entry), path.join(copy, entry), { recursive: true })
  }
  const out = probe({ entry: path.join(copy, 'index.js') })
  assertNoBinary(out.require, 'binding.js is missing', 'npm run build')
})
