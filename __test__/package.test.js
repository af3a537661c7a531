'use strict'
// The package as a user meets it: the main package (as the release workflow
// prepares it) and this platform's binary package are packed with `npm pack`,
// installed offline into a new project, and used there with no Rust toolchain
// on PATH: require, import, a stampede, and the types under tsc --strict.
// Also: every platform package moves in lockstep with the main version.
// Builds nothing: `npm test` has built the addon (scripts/ensure-built.js).
const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { ROOT } = require('./helpers')
const {
  platformPackages,
  platformDependencies,
  writeReleaseManifest,
  missingReleaseFiles,
} = require('../scripts/release-manifest')

const PKG = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
const TYPE_ROOTS = path.join(ROOT, 'node_modules', '@types')
const NPM_CLI = findNpmCli()
const PLATFORMS = [
  'linux-x64-gnu',
  'linux-arm64-gnu',
  'linux-x64-musl',
  'linux-arm64-musl',
  'darwin-x64',
  'darwin-arm64',
  'win32-x64-msvc',
]

function findNpmCli() {
  const candidates = [
    process.env.npm_execpath,
    path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js'),
    path.join(path.dirname(process.execPath), 'node_modules', 'npm', 'bin', 'npm-cli.js'),
  ]
  return candidates.find((file) => file && /npm-cli\.js$/.test(file) && fs.existsSync(file))
}

function readJson(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'))
}

/** This host's platform package (linux-x64-gnu here), found by what napi's binding.js checks. */
function hostPlatform() {
  const musl = process.platform === 'linux' && !process.report.getReport().header.glibcVersionRuntime
  return platformPackages(PKG).find(({ target }) => {
    if (target.platform !== process.platform || target.arch !== process.arch) return false
    return process.platform !== 'linux' || target.abi === (musl ? 'musl' : 'gnu')
  })
}

/**
 * An environment without the Rust toolchain and without the npm settings of
 * an enclosing `npm test` (its cache, its registry): PATH is node's own
 * directory and the system's.
 */
function userEnv(extra = {}) {
  const env = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^(npm_|PATH$|CARGO|RUSTUP|NODE_OPTIONS$|NODE_PATH$|HERDCACHE_)/i.test(name)) env[name] = value
  }
  const dirs =
    process.platform === 'win32'
      ? [path.dirname(process.execPath), path.join(process.env.SystemRoot ?? 'C:\\Windows', 'System32')]
      : [path.dirname(process.execPath), '/usr/bin', '/bin']
  env.PATH = dirs.join(path.delimiter)
  return { ...env, ...extra }
}

function run(command, args, { cwd, env = userEnv(), timeout = 120000 } = {}) {
  const result = spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout, maxBuffer: 64 * 1024 * 1024 })
  if (result.error) throw result.error
  return result
}

function npm(args, options) {
  assert.ok(NPM_CLI, 'npm-cli.js not found next to node (or in npm_execpath)')
  const result = run(process.execPath, [NPM_CLI, ...args], options)
  assert.equal(result.status, 0, `npm ${args.join(' ')} failed:\n${result.stdout}\n${result.stderr}`)
  return result
}

describe('the platform packages', () => {
  it('npm/<platform> holds one package per napi target, at the main version, with os/cpu/libc', () => {
    const packages = platformPackages(PKG)
    assert.deepEqual(packages.map(({ dir }) => dir).sort(), [...PLATFORMS].sort(), 'napi.targets')
    assert.deepEqual(fs.readdirSync(path.join(ROOT, 'npm')).sort(), [...PLATFORMS].sort(), 'no stray npm/ directory')
    for (const { name, dir, target } of packages) {
      const platform = readJson(path.join(ROOT, 'npm', dir, 'package.json'))
      const binary = `${PKG.napi.binaryName}.${dir}.node`
      assert.equal(platform.name, name)
      assert.equal(platform.version, PKG.version, `${name} is in lockstep with herdcache`)
      assert.equal(platform.main, binary)
      assert.deepEqual(platform.files, [binary], `${name} ships its one .node`)
      assert.deepEqual(platform.os, [target.platform])
      assert.deepEqual(platform.cpu, [target.arch])
      if (target.platform === 'linux') {
        assert.deepEqual(platform.libc, [target.abi === 'musl' ? 'musl' : 'glibc'])
      } else {
        assert.equal(platform.libc, undefined)
      }
      assert.equal(platform.license, PKG.license)
      assert.deepEqual(platform.engines, PKG.engines)
    }
  })

  it('a release declares every platform package as an optional dependency at the main version', () => {
    assert.deepEqual(
      platformDependencies(PKG),
      Object.fromEntries([...PLATFORMS].sort().map((platform) => [`herdcache-${platform}`, PKG.version])),
    )
  })

  it('`npm version <new>` moves every platform package along, in the same commit', { timeout: 60000 }, (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herdcache-version-'))
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    for (const entry of ['package.json', 'package-lock.json', 'npm']) {
      fs.cpSync(path.join(ROOT, entry), path.join(dir, entry), { recursive: true })
    }
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'junction')
    fs.writeFileSync(path.join(dir, '.gitignore'), 'node_modules\n')
    const gitEnv = userEnv({
      PATH: process.env.PATH,
      GIT_AUTHOR_NAME: 'test',
      GIT_AUTHOR_EMAIL: 'test@example.invalid',
      GIT_COMMITTER_NAME: 'test',
      GIT_COMMITTER_EMAIL: 'test@example.invalid',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: path.join(dir, 'no-gitconfig'),
    })
    const git = (...args) => {
      const result = run('git', args, { cwd: dir, env: gitEnv })
      assert.equal(result.status, 0, `git ${args.join(' ')}: ${result.stderr}`)
      return result.stdout
    }
    git('init', '-q')
    git('add', '.')
    git('commit', '-qm', 'start')

    npm(['version', '0.2.0-test.1', '--no-audit', '--no-fund'], { cwd: dir, env: gitEnv })

    const bumped = readJson(path.join(dir, 'package.json'))
    assert.equal(bumped.version, '0.2.0-test.1')
    for (const platform of PLATFORMS) {
      assert.equal(readJson(path.join(dir, 'npm', platform, 'package.json')).version, '0.2.0-test.1', platform)
    }
    const committed = git('show', '--name-only', '--format=%s', 'HEAD').trim().split('\n')
    assert.equal(committed[0], '0.2.0-test.1')
    for (const platform of PLATFORMS) assert.ok(committed.includes(`npm/${platform}/package.json`), committed.join(' '))
    assert.equal(git('status', '--porcelain'), '', 'nothing left out of the version commit')
    assert.equal(git('tag', '--list').trim(), 'v0.2.0-test.1')

    writeReleaseManifest(dir)
    const released = readJson(path.join(dir, 'package.json'))
    assert.deepEqual(
      Object.values(released.optionalDependencies),
      PLATFORMS.map(() => '0.2.0-test.1'),
    )

    // A platform package left behind stops the release.
    const stale = path.join(dir, 'npm', 'darwin-x64', 'package.json')
    fs.writeFileSync(stale, JSON.stringify({ ...readJson(stale), version: '0.1.9' }))
    assert.throws(() => writeReleaseManifest(dir), /darwin-x64.*0\.1\.9.*npm version/)
  })
})

describe('installed from the packed tarballs, with no Rust toolchain', () => {
  const host = hostPlatform()
  let scratch
  let project
  let mainPack
  let platformPack
  let installed

  before(
    () => {
      assert.ok(host, `no platform package for ${process.platform}-${process.arch} in napi.targets`)
      const binary = path.join(ROOT, `${PKG.napi.binaryName}.${host.dir}.node`)
      for (const [file, what] of [
        [binary, 'the built addon'],
        [path.join(ROOT, 'binding.js'), "napi's generated loader"],
        [path.join(ROOT, 'binding.d.ts'), "napi's generated types"],
      ]) {
        assert.ok(
          fs.existsSync(file),
          `${what} (${path.basename(file)}) is missing: build it with \`npm run build\` (npm test does it first)`,
        )
      }
      scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'herdcache-package-'))
      const tarballs = path.join(scratch, 'tarballs')
      fs.mkdirSync(tarballs)

      // The main package as the release workflow publishes it: the checkout,
      // plus the optionalDependencies scripts/release-manifest.js writes.
      const mainStage = path.join(scratch, 'main')
      const skip = new Set(['node_modules', 'target', '.git'].map((name) => path.join(ROOT, name)))
      fs.cpSync(ROOT, mainStage, { recursive: true, filter: (source) => !skip.has(source) && !source.endsWith('.tgz') })
      writeReleaseManifest(mainStage)
      // The release workflow's --check-files refuses a release missing a
      // platform binary (here, all but this host's) or a file of `files`.
      const binaries = platformPackages(PKG).map(({ dir }) =>
        path.join('npm', dir, `${PKG.napi.binaryName}.${dir}.node`),
      )
      for (const file of binaries) fs.rmSync(path.join(mainStage, file), { force: true })
      fs.copyFileSync(binary, path.join(mainStage, 'npm', host.dir, path.basename(binary)))
      fs.renameSync(path.join(mainStage, 'CHANGELOG.md'), path.join(scratch, 'CHANGELOG.md'))
      const others = binaries.filter((file) => !file.includes(host.dir))
      assert.deepEqual(missingReleaseFiles(mainStage).sort(), ['CHANGELOG.md', ...others].sort())
      fs.renameSync(path.join(scratch, 'CHANGELOG.md'), path.join(mainStage, 'CHANGELOG.md'))
      // The platform package as `napi artifacts` fills it.
      const platformStage = path.join(scratch, 'platform')
      fs.cpSync(path.join(ROOT, 'npm', host.dir), platformStage, { recursive: true })
      fs.copyFileSync(binary, path.join(platformStage, path.basename(binary)))

      const pack = (dir) => JSON.parse(npm(['pack', '--pack-destination', tarballs, '--json'], { cwd: dir }).stdout)[0]
      mainPack = pack(mainStage)
      platformPack = pack(platformStage)

      project = path.join(scratch, 'project')
      fs.mkdirSync(project)
      fs.writeFileSync(
        path.join(project, 'package.json'),
        JSON.stringify({ name: 'herdcache-user', version: '1.0.0', private: true }, null, 2),
      )
      // Offline, with an empty cache and an unreachable registry: whatever
      // npm would fetch fails, so the platform package can only come from its tarball.
      installed = npm(
        [
          'install',
          '--offline',
          '--no-audit',
          '--no-fund',
          '--cache',
          path.join(scratch, 'npm-cache'),
          '--registry',
          'http://127.0.0.1:9/',
          path.join(tarballs, mainPack.filename),
          path.join(tarballs, platformPack.filename),
        ],
        { cwd: project },
      )
    },
    { timeout: 180000 },
  )

  after(() => {
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true })
  })

  /** Runs a file in the installed project, as its user would: node on PATH, no cargo. */
  function node(file, source, { env } = {}) {
    fs.writeFileSync(path.join(project, file), source)
    const result = run(process.execPath, [file], { cwd: project, env: userEnv(env), timeout: 30000 })
    assert.equal(result.status, 0, `${file} failed:\n${result.stdout}\n${result.stderr}`)
    return result.stdout.trim()
  }

  it('the PATH used has no cargo or rustc', { skip: process.platform === 'win32' && 'POSIX shell check' }, () => {
    for (const tool of ['cargo', 'rustc']) {
      const found = run('/bin/sh', ['-c', `command -v ${tool}`], { cwd: project })
      assert.notEqual(found.status, 0, `${tool} is reachable at ${found.stdout.trim()}`)
    }
  })

  it('the main tarball holds what a user needs and no source, test, bench or build output', () => {
    const files = mainPack.files.map(({ path: file }) => file.replaceAll('\\', '/'))
    for (const needed of [
      'package.json',
      'README.md',
      'LICENSE',
      'CHANGELOG.md',
      'index.js',
      'index.mjs',
      'index.d.ts',
      'index.d.mts',
      'binding.js',
      'binding.d.ts',
      'prometheus.js',
      'prometheus.mjs',
      'prometheus.d.ts',
      // Every module of lib/ and nest/ (what index.js and herdcache/nest require), a new one too.
      ...['lib', 'nest'].flatMap((dir) =>
        fs
          .readdirSync(path.join(ROOT, dir), { recursive: true })
          .map((file) => `${dir}/${file.replaceAll('\\', '/')}`)
          .filter((file) => fs.statSync(path.join(ROOT, file)).isFile()),
      ),
    ]) {
      assert.ok(files.includes(needed), `${needed} is in the tarball: ${files.join(' ')}`)
    }
    const forbidden =
      /^(src|target|tests|__test__|bench|demo|scripts|npm|node_modules|\.ci|\.github)\/|^Cargo\.|\.(node|log|tgz|rs)$/
    assert.deepEqual(
      files.filter((file) => forbidden.test(file)),
      [],
      'no source, test, bench, build output or binary in the main tarball',
    )
    const shipped = readJson(path.join(project, 'node_modules', 'herdcache', 'package.json'))
    assert.deepEqual(shipped.optionalDependencies, platformDependencies(PKG))
  })

  it('the platform tarball holds its one binary', () => {
    const files = platformPack.files.map(({ path: file }) => file).sort()
    assert.deepEqual(files, [`${PKG.napi.binaryName}.${host.dir}.node`, 'README.md', 'package.json'].sort())
  })

  it("herdcache's optional dependency is the platform tarball, installed once, not fetched", () => {
    assert.doesNotMatch(`${installed.stdout}${installed.stderr}`, /ENOTCACHED|ECONNREFUSED/)
    const lock = readJson(path.join(project, 'package-lock.json'))
    const entry = lock.packages[`node_modules/${host.name}`]
    assert.ok(entry, `${host.name} is installed`)
    assert.match(entry.resolved, /^file:/, 'from the local tarball')
    assert.equal(entry.version, PKG.version)
    const nested = Object.keys(lock.packages).filter((key) => key.startsWith('node_modules/herdcache/node_modules/'))
    assert.deepEqual(nested, [], 'no second copy under herdcache')
    const others = Object.keys(lock.packages).filter(
      (key) => /^node_modules\/herdcache-/.test(key) && !key.endsWith(host.name),
    )
    for (const key of others) {
      assert.ok(!fs.existsSync(path.join(project, key)), `${key} (another platform) is not installed`)
    }
  })

  it('require("herdcache") works and loads the binary from the platform package', () => {
    const out = node(
      'require-check.js',
      `const { Cache, kTesting } = require('herdcache')
const cache = new Cache()
cache.getOrLoad('k', () => ({ from: 'loader' })).then(async (value) => {
  const loaded = Object.keys(require.cache).filter((file) => file.endsWith('.node'))
  console.log(JSON.stringify({ value, kTesting: typeof kTesting, entry: require.resolve('herdcache'), loaded }))
  await cache.close()
})
`,
    )
    const { value, kTesting, entry, loaded } = JSON.parse(out)
    assert.deepEqual(value, { from: 'loader' })
    assert.equal(kTesting, 'symbol')
    // Compared by their ends: a temp path may be spelled differently (symlinks, 8.3 names).
    assert.ok(entry.endsWith(path.join('project', 'node_modules', 'herdcache', 'index.js')), entry)
    assert.equal(loaded.length, 1, `one addon loaded: ${loaded.join(' ')}`)
    const binary = path.join('project', 'node_modules', host.name, `${PKG.napi.binaryName}.${host.dir}.node`)
    assert.ok(loaded[0].endsWith(binary), `the addon comes from the platform package: ${loaded[0]}`)
  })

  it('herdcache/nest ships, and without NestJS installed says what to install', () => {
    const out = node(
      'nest-check.js',
      `try {
  require('herdcache/nest')
  console.log(JSON.stringify({ loaded: true }))
} catch (error) {
  console.log(JSON.stringify({ code: error.code, message: error.message, file: require.resolve('herdcache/nest') }))
}
`,
    )
    const { code, message, file } = JSON.parse(out)
    assert.equal(code, 'ERR_HERDCACHE_NEST_PEER_MISSING')
    assert.match(message, /npm install @nestjs\/common @nestjs\/core rxjs reflect-metadata/)
    assert.ok(file.endsWith(path.join('herdcache', 'nest', 'index.js')), file)
  })

  it('herdcache/prometheus ships; without prom-client it says what to install, with it it collects', () => {
    const missing = node(
      'prometheus-missing.js',
      `try {
  require('herdcache/prometheus')
  console.log(JSON.stringify({ loaded: true }))
} catch (error) {
  console.log(JSON.stringify({ code: error.code, message: error.message, file: require.resolve('herdcache/prometheus') }))
}
`,
    )
    const { code, message, file } = JSON.parse(missing)
    assert.equal(code, 'MODULE_NOT_FOUND')
    assert.match(message, /herdcache\/prometheus needs prom-client.*npm install prom-client/)
    assert.ok(file.endsWith(path.join('herdcache', 'prometheus.js')), file)

    // The user installs prom-client (here: this checkout's, linked in; the install is offline).
    fs.symlinkSync(
      path.join(ROOT, 'node_modules', 'prom-client'),
      path.join(project, 'node_modules', 'prom-client'),
      'junction',
    )
    const out = node(
      'prometheus-check.mjs',
      `import { Registry } from 'prom-client'
import { Cache } from 'herdcache'
import { collectInto } from 'herdcache/prometheus'
import { createRequire } from 'node:module'
const required = createRequire(import.meta.url)('herdcache/prometheus')
const registry = new Registry()
const cache = new Cache()
collectInto(registry, cache, { name: 'users' })
await cache.getOrLoad('k', () => 1)
await cache.getOrLoad('k', () => 1)
const text = await registry.metrics()
await cache.close()
const hits = /^herdcache_hits_total\\{cache="users"\\} (\\d+)$/m.exec(text)?.[1]
console.log(JSON.stringify({ hits, same: collectInto === required.collectInto }))
`,
    )
    assert.deepEqual(JSON.parse(out), { hits: '1', same: true })
  })

  it("import { Cache } from 'herdcache' works, sharing the CommonJS instance", () => {
    const out = node(
      'import-check.mjs',
      `import herdcache, { Cache, kTesting } from 'herdcache'
import { createRequire } from 'node:module'
const required = createRequire(import.meta.url)('herdcache')
const cache = new Cache()
const value = await cache.getOrLoad(['k', 1], () => 42)
await cache.close()
const same = Cache === required.Cache && kTesting === required.kTesting && herdcache === required
console.log(JSON.stringify({ value, same }))
`,
    )
    assert.deepEqual(JSON.parse(out), { value: 42, same: true })
  })

  it('a stampede of 200 callers runs the loader once', () => {
    const out = node(
      'stampede.js',
      `const { Cache } = require('herdcache')
const cache = new Cache({ ttl: 60000 })
let runs = 0
const loader = () => new Promise((resolve) => setTimeout(() => resolve({ run: ++runs }), 50))
const statuses = Array.from({ length: 200 }, () => ({}))
Promise.all(statuses.map((status) => cache.getOrLoad('hot', loader, { status }))).then(async (values) => {
  const outcomes = {}
  for (const { outcome } of statuses) outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
  const { misses, coalesced, loads } = cache.stats()
  const distinct = new Set(values.map((v) => JSON.stringify(v))).size
  console.log(JSON.stringify({ runs, distinct, outcomes, misses, coalesced, loads }))
  await cache.close()
})
`,
    )
    assert.deepEqual(JSON.parse(out), {
      runs: 1,
      distinct: 1,
      outcomes: { miss: 1, coalesced: 199 },
      misses: 1,
      coalesced: 199,
      loads: 1,
    })
  })

  const USAGE = `import herdcache, { Cache, kTesting, type CacheStats, type HerdcacheError, type Outcome } from 'herdcache'

const cache: Cache = new Cache({ ttl: 60_000, hardTtl: 600_000, onError: (error: unknown) => void error })
const status: { outcome?: Outcome } = {}
const feed: Promise<{ items: string[] }> = cache.getOrLoad(
  ['feed', 'tenant-1', 42],
  async ({ key, signal }) => ({ items: [String(key[0]), String(signal.aborted)] }),
  { ttl: 5_000, stale: false, status },
)
const stats: CacheStats = cache.stats()
const counted: number = stats.hits + stats.coalesced + stats.misses
const code: HerdcacheError['code'] = 'ERR_HERDCACHE_NO_BINARY'
const same: typeof Cache = herdcache.Cache
cache[kTesting].advanceClock(1)
// @ts-expect-error a number is not a key
cache.getOrLoad(42, () => 1)
// @ts-expect-error stale is a boolean
cache.getOrLoad('k', () => 1, { stale: 'no' })
// @ts-expect-error an unknown call option
cache.getOrLoad('k', () => 1, { sttale: false })
export { feed, counted, code, same }
`

  function tsc(args, files) {
    const result = run(
      process.execPath,
      [TSC, '--strict', '--noEmit', '--target', 'es2022', '--typeRoots', TYPE_ROOTS, '--types', 'node', ...args].concat(
        files,
      ),
      { cwd: project, timeout: 60000 },
    )
    const out = `${result.stdout}${result.stderr}`
    assert.doesNotMatch(out, /Cannot find module|TS2307|TS7016/, `the package's types must resolve:\n${out}`)
    assert.equal(result.status, 0, `tsc ${args.join(' ')} reported:\n${out}`)
  }

  it('a TypeScript user type-checks under --moduleResolution node16 (.mts and .cts)', { timeout: 60000 }, () => {
    fs.writeFileSync(path.join(project, 'usage.mts'), USAGE)
    fs.writeFileSync(path.join(project, 'usage.cts'), USAGE)
    tsc(['--module', 'node16', '--moduleResolution', 'node16'], ['usage.mts', 'usage.cts'])
  })

  it('a TypeScript user type-checks under --moduleResolution bundler', { timeout: 60000 }, () => {
    fs.writeFileSync(path.join(project, 'usage.ts'), USAGE)
    tsc(['--module', 'esnext', '--moduleResolution', 'bundler'], ['usage.ts'])
  })
})
