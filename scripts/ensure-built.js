'use strict'

// Builds the native addon when it is missing or older than its sources, so
// `npm test`, `npm run demo` and `npm run bench` work on a fresh clone.
//
// Two builds of the same sources: `release` (one codegen unit and LTO: what
// ships, what the demo and the benchmarks measure) and, with `--for-tests`,
// the `tests` profile (Cargo.toml: no LTO, incremental), which shares every
// compiled dependency with the Rust tests, so a fresh clone's `npm test`
// compiles them once. A test run takes either build if it is fresh; a demo or
// a benchmark rebuilds a `tests` one in release. Which profile built the
// addon is kept in target/addon-profile.json, with the addon's mtime (an
// addon it does not describe, e.g. from `npm run build`, is a release one).

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const forTests = process.argv.includes('--for-tests')
const stampFile = path.join(root, 'target', 'addon-profile.json')

/** This machine's platform as `napi build --platform` names the addon: linux-x64-gnu, darwin-arm64, win32-x64-msvc. */
function platformName() {
  const name = `${process.platform}-${process.arch}`
  if (process.platform === 'win32') return `${name}-msvc`
  if (process.platform !== 'linux') return name
  let musl = false
  try {
    musl = fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl')
  } catch {
    musl = !process.report.getReport().header.glibcVersionRuntime
  }
  return `${name}-${musl ? 'musl' : 'gnu'}`
}

const addon = path.join(root, `herdcache.${platformName()}.node`)
const outputs = [addon, path.join(root, 'binding.js'), path.join(root, 'binding.d.ts')]
const sources = ['src', 'Cargo.toml', 'Cargo.lock', 'build.rs']

function newestMtime(entry) {
  const stat = fs.statSync(entry, { throwIfNoEntry: false })
  if (!stat) return 0
  if (!stat.isDirectory()) return stat.mtimeMs
  return fs
    .readdirSync(entry)
    .reduce((newest, name) => Math.max(newest, newestMtime(path.join(entry, name))), stat.mtimeMs)
}

const builtAt = Math.min(...outputs.map((file) => fs.statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0))
const changedAt = Math.max(...sources.map((entry) => newestMtime(path.join(root, entry))))

/** The profile that built the addon now in place: `release` unless the stamp says otherwise for this very file. */
function builtProfile() {
  try {
    const stamp = JSON.parse(fs.readFileSync(stampFile, 'utf8'))
    if (stamp.addonMtimeMs === fs.statSync(addon).mtimeMs) return stamp.profile
  } catch {}
  return 'release'
}

if (builtAt >= changedAt && (forTests || builtProfile() === 'release')) process.exit(0)
const profile = forTests ? 'tests' : 'release'

const napi = path.join(root, 'node_modules', '.bin', 'napi')
if (!fs.existsSync(napi)) {
  console.error(
    'herdcache: the native addon must be built, but @napi-rs/cli is not installed: run `npm install` first.',
  )
  process.exit(1)
}
const why =
  builtAt >= changedAt
    ? 'it was built for the tests, not in release'
    : builtAt
      ? 'sources changed'
      : 'it is not built yet; the first build compiles every dependency: a few minutes'
console.error(`herdcache: building the native addon (profile \`${profile}\`: ${why}; cargo shows its progress)…`)
const started = Date.now()
// The tests' addon is built with the features the Rust tests build with:
// tokio's `test-util` (a dev-dependency, for paused clocks). Without it, the
// first `cargo test` of a fresh clone compiles tokio and everything over it
// (redis, napi, the crate) a second time: 84 s against 47 s on 2 cores.
const features = forTests ? ['--features', 'tokio/test-util'] : []
const result = spawnSync(
  napi,
  ['build', '--platform', '--profile', profile, ...features, '--js', 'binding.js', '--dts', 'binding.d.ts'],
  {
    cwd: root,
    stdio: 'inherit',
  },
)
if (result.status !== 0) {
  console.error('herdcache: the native build failed (is a Rust toolchain installed? https://rustup.rs)')
  process.exit(result.status ?? 1)
}
fs.mkdirSync(path.dirname(stampFile), { recursive: true })
fs.writeFileSync(stampFile, `${JSON.stringify({ profile, addonMtimeMs: fs.statSync(addon).mtimeMs })}\n`)
console.error(`herdcache: the native addon was built in ${Math.round((Date.now() - started) / 1000)} s`)
