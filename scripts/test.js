'use strict'

// The whole test suite: the Rust core and engine (cargo test, same release
// profile as the addon so nothing is rebuilt twice), then the node:test
// suites in __test__/ (the addon, the type test, child processes).

const { spawnSync } = require('node:child_process')
const path = require('node:path')

const root = path.join(__dirname, '..')

function run(command, args) {
  console.log(`\n$ ${command} ${args.join(' ')}`)
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' })
  if (result.status !== 0) process.exit(result.status ?? 1)
}

run('cargo', ['test', '--release', '--quiet'])
run(process.execPath, ['--test', '--test-concurrency=2', '__test__/'])
