'use strict'

// Builds the native addon when it is missing or older than its sources, so
// `npm test`, `npm run demo` and `npm run bench` work on a fresh clone.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')

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

if (builtAt >= changedAt) process.exit(0)

const napi = path.join(root, 'node_modules', '.bin', 'napi')
if (!fs.existsSync(napi)) {
  console.error(
    'herdcache: the native addon must be built, but @napi-rs/cli is not installed: run `npm install` first.',
  )
  process.exit(1)
}
console.error(
  builtAt
    ? 'herdcache: sources changed, rebuilding the native addon (cargo shows its progress)…'
    : 'herdcache: building the native addon. The first build compiles every dependency in release mode: several ' +
        'minutes, with cargo showing its progress…',
)
const started = Date.now()
const result = spawnSync(napi, ['build', '--platform', '--release', '--js', 'binding.js', '--dts', 'binding.d.ts'], {
  cwd: root,
  stdio: 'inherit',
})
if (result.status !== 0) {
  console.error('herdcache: the native build failed (is a Rust toolchain installed? https://rustup.rs)')
  process.exit(result.status ?? 1)
}
console.error(`herdcache: the native addon was built in ${Math.round((Date.now() - started) / 1000)} s`)
