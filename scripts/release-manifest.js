'use strict'

// Writes the main package's optionalDependencies for a release: one platform
// package (npm/<platform>, one per `napi.targets` entry) at exactly the main
// package's version. The release workflow runs it right before `npm publish`,
// as `napi pre-publish` would; __test__/package.test.js packs what it writes.
//
// They are not kept in the committed package.json: until every platform
// package is on the registry, `npm ci` in a checkout fails on them
// ("Missing: herdcache-…@ from lock file"). Versions stay in lockstep through
// `npm version <new>`, whose "version" script (`napi version`) moves every
// npm/<platform>/package.json along; this script refuses a platform package
// at another version.
//
//   node scripts/release-manifest.js [--check-files] [packageDir]    (default: the repository root)
//
// --check-files (the release workflow) also refuses to go on when a file the
// main package ships (`files`) or a platform package's .node is missing: npm
// publish would publish without it.

const fs = require('node:fs')
const path = require('node:path')
const { parseTriple } = require('@napi-rs/cli')

/**
 * The platform packages of a main package.json: name, directory under npm/
 * and the napi target they hold.
 *
 * @param {{ name: string, napi: { targets: string[] } }} pkg the main package.json
 * @returns {{ name: string, dir: string, target: ReturnType<typeof parseTriple> }[]}
 */
function platformPackages(pkg) {
  return pkg.napi.targets.map((triple) => {
    const target = parseTriple(triple)
    return { name: `${pkg.name}-${target.platformArchABI}`, dir: target.platformArchABI, target }
  })
}

/**
 * The optionalDependencies a release declares: every platform package at the
 * main package's version, sorted by name (as npm writes dependency maps).
 *
 * @param {{ name: string, version: string, napi: { targets: string[] } }} pkg
 * @returns {Record<string, string>}
 */
function platformDependencies(pkg) {
  const names = platformPackages(pkg).map(({ name }) => name)
  return Object.fromEntries(names.sort().map((name) => [name, pkg.version]))
}

/**
 * Adds the optionalDependencies to `<packageDir>/package.json`, after checking
 * that every npm/<platform>/package.json there is at the main version.
 *
 * @param {string} packageDir
 */
function writeReleaseManifest(packageDir) {
  const pkgFile = path.join(packageDir, 'package.json')
  const pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8'))
  for (const { name, dir } of platformPackages(pkg)) {
    const platformFile = path.join(packageDir, 'npm', dir, 'package.json')
    const platform = JSON.parse(fs.readFileSync(platformFile, 'utf8'))
    if (platform.name !== name || platform.version !== pkg.version) {
      throw new Error(
        `${platformFile} is ${platform.name}@${platform.version}, not ${name}@${pkg.version}: ` +
          'bump versions with `npm version <new>` (its "version" script runs `napi version`)',
      )
    }
  }
  pkg.optionalDependencies = { ...pkg.optionalDependencies, ...platformDependencies(pkg) }
  fs.writeFileSync(pkgFile, `${JSON.stringify(pkg, null, 2)}\n`)
}

/**
 * The files a release needs that are not in `packageDir`: entries of the main
 * package's `files`, and each platform package's one .node.
 *
 * @param {string} packageDir
 * @returns {string[]} paths relative to packageDir
 */
function missingReleaseFiles(packageDir) {
  const pkg = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8'))
  const needed = [...pkg.files]
  for (const { dir } of platformPackages(pkg)) needed.push(path.join('npm', dir, `${pkg.napi.binaryName}.${dir}.node`))
  return needed.filter((file) => !fs.existsSync(path.join(packageDir, file)))
}

if (require.main === module) {
  const args = process.argv.slice(2)
  const packageDir = path.resolve(args.find((arg) => !arg.startsWith('--')) ?? path.join(__dirname, '..'))
  try {
    if (args.includes('--check-files')) {
      const missing = missingReleaseFiles(packageDir)
      if (missing.length > 0) throw new Error(`not in ${packageDir}: ${missing.join(', ')}`)
    }
    writeReleaseManifest(packageDir)
  } catch (error) {
    console.error(`release-manifest: ${error.message}`)
    process.exit(1)
  }
}

module.exports = { platformPackages, platformDependencies, writeReleaseManifest, missingReleaseFiles }
