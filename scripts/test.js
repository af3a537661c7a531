'use strict'

// The whole test suite: the Rust core and engine (cargo test, same release
// profile as the addon so nothing is rebuilt twice), then the node:test
// suites in __test__/ (the addon, the type test, child processes).
//
// Under CI=true the run cannot go green with the Redis or TLS tests skipped:
// redis-server and openssl must be on PATH (checked first, with the reason),
// and any node test that skips fails the run. Outside CI, skipped tests are
// listed at the end with their reasons.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.join(__dirname, '..')
// The same test as __test__/redis-server.js and tests/support/mod.rs: CI is set.
const inCI = Boolean(process.env.CI)

function run(command, args) {
  console.log(`\n$ ${command} ${args.join(' ')}`)
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' })
  if (result.status !== 0) process.exit(result.status ?? 1)
}

function installed(command, args) {
  const r = spawnSync(command, args, { stdio: 'ignore' })
  return !r.error && r.status === 0
}

// `ok 3 - name # SKIP reason` lines of a TAP report (subtests are indented).
function skippedTests(tap) {
  const skipped = []
  for (const line of tap.split('\n')) {
    const m = /^\s*ok \d+ - (.*?) # SKIP\b ?(.*)$/.exec(line)
    if (m) skipped.push({ name: m[1], reason: m[2] || '(no reason given)' })
  }
  return skipped
}

if (inCI) {
  const tools = { 'redis-server': ['--version'], openssl: ['version'] }
  const missing = Object.keys(tools).filter((c) => !installed(c, tools[c]))
  if (missing.length) {
    console.error(
      `error: CI=true and ${missing.join(' and ')} not installed: the Redis and TLS tests cannot be skipped in CI`,
    )
    process.exit(1)
  }
}

// `--quiet` hides cargo's compile progress too, and the first build of the
// test binaries takes minutes: compile them first, with progress shown,
// then run them quietly (nothing is compiled twice).
console.log(
  '\nherdcache: compiling the Rust tests (release profile). The first run in a fresh clone builds every dependency:' +
    ' several minutes; later runs rebuild only what changed.',
)
const compileStart = Date.now()
run('cargo', ['test', '--release', '--no-run'])
console.log(`herdcache: the Rust tests compiled in ${Math.round((Date.now() - compileStart) / 1000)} s`)
run('cargo', ['test', '--release', '--quiet'])

// The usual report on stdout, and a TAP copy in a file to find skipped tests.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herdcache-test-'))
const tapFile = path.join(dir, 'report.tap')
const shown = process.stdout.isTTY ? 'spec' : 'tap'
const node = spawnSync(
  process.execPath,
  [
    '--test',
    '--test-concurrency=2',
    `--test-reporter=${shown}`,
    '--test-reporter-destination=stdout',
    '--test-reporter=tap',
    `--test-reporter-destination=${tapFile}`,
    '__test__/',
  ],
  { cwd: root, stdio: 'inherit' },
)
let skipped = []
try {
  skipped = skippedTests(fs.readFileSync(tapFile, 'utf8'))
} catch {}
fs.rmSync(dir, { recursive: true, force: true })

if (skipped.length) {
  console.log(`\n${skipped.length} node test(s) skipped:`)
  for (const s of skipped) console.log(`  - ${s.name}: ${s.reason}`)
}
if (node.status !== 0) process.exit(node.status ?? 1)
if (inCI && skipped.length) {
  console.error('error: CI=true and tests were skipped; every test must run in CI')
  process.exit(1)
}
