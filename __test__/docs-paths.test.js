'use strict'

// The docs about the structure name real files: every repository path that
// ARCHITECTURE.md and CONTRIBUTING.md spell in backticks exists, so a file
// moved or split without its doc fails here.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const DOCS = ['ARCHITECTURE.md', 'CONTRIBUTING.md']
const PATH = /^(?:src|lib|nest|tests|__test__|scripts|bench)\/[\w./-]*$/

/** The repository paths a doc spells in backticks (a trailing `/` names a directory). */
function pathsIn(text) {
  const spelled = [...text.matchAll(/`([^`\s]+)`/g)].map((m) => m[1])
  return [...new Set(spelled.filter((p) => PATH.test(p) && !p.includes('*')))]
}

for (const doc of DOCS) {
  test(`every path ${doc} names exists`, () => {
    const paths = pathsIn(fs.readFileSync(path.join(ROOT, doc), 'utf8'))
    assert.ok(paths.length >= 20, `${doc} names the files it describes (${paths.length} found)`)
    const missing = paths.filter((p) => !fs.existsSync(path.join(ROOT, p)))
    assert.deepEqual(missing, [], `${doc} names files that do not exist`)
  })
}

test('the path finder finds a path that does not exist', () => {
  const paths = pathsIn('see `src/engine/nowhere.rs` and `lib/leader.js`, not `a.b`')
  assert.deepEqual(paths, ['src/engine/nowhere.rs', 'lib/leader.js'])
  assert.equal(fs.existsSync(path.join(ROOT, paths[0])), false)
})
