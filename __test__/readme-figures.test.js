'use strict'
// Every benchmark and demo figure in README.md is the one in the committed
// results files: the README's bench sections are rendered from bench/RESULTS.md,
// bench/FLEET.md, bench/CLUSTER.md, bench/NEST.md, bench/BULKHEAD.md, bench/VALUES.md, demo/OUTPUT.md
// and demo/NEST-OUTPUT.md by
// bench/readme.js, and must match.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { render, readResults, SECTIONS } = require('../bench/readme')
const { ROOT, T } = require('./helpers')

const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')

test('README.md bench sections are what bench/readme.js renders from the results files', T, () => {
  const rendered = render(README, readResults())
  if (rendered === README) return
  const ours = README.split('\n')
  const theirs = rendered.split('\n')
  const at = ours.findIndex((line, i) => line !== theirs[i])
  assert.fail(
    `README.md line ${at + 1} differs from the results files; run \`node bench/readme.js\`:\n` +
      `  README:  ${ours[at]}\n  results: ${theirs[at]}`,
  )
})

test('every bench section is in the README once, and not empty', T, () => {
  for (const name of Object.keys(SECTIONS)) {
    const start = `<!-- bench:${name}:start -->`
    const end = `<!-- bench:${name}:end -->`
    assert.equal(README.split(start).length, 2, `README.md has ${start} once`)
    const body = README.slice(README.indexOf(start) + start.length, README.indexOf(end)).trim()
    assert.match(body, /\d/, `the ${name} section holds figures`)
  }
})

test('the check is not vacuous: a figure changed in a results file changes the README', T, () => {
  const results = readResults()
  const changes = [
    ['results', /(\| 1\. hit, 1 in flight \| herdcache \| [^|]+\| )([\d.]+)/, '0.999'],
    ['fleet', /(\| herdcache \| \d+ \| )([\d.]+)( \|)/, '7.5'],
    ['cluster', /(\| herdcache \| [\d.]+ \| )([\d.]+)( \| [\d.]+ \/ )/, '8.25'],
    ['cluster', /(\| herdcache \| )([\d.]+ µs)( \| )/, '98.7 µs'],
    ['nest', /(\| herdcache\/nest \(memory\) \| )([\d.]+ k)/, '1.2 k'],
    ['results', /(### \(a\)[\s\S]*?\| herdcache \| )(\d[\d ]*)( \(\d)/, '9 999'],
    ['results', /(### \(b\)[\s\S]*?\| bentocache \| )(\d[\d ]*)( \(\d)/, '8 888'],
    ['results', /(### \(b\)[\s\S]*?\| cache-manager \| [^|]+\| )([\d.]+×)( \|)/, '7.77×'],
    ['demo', /(^expiry under load +)(300)( +\d)/m, '287'],
    ['demo', /(^traffic +3 phases × )(300)( requests)/m, '250'],
    ['demo', /(^expiry under load .*│ )(300)( stale)/m, '299'],
    ['demo-nest', /(^steady hits +\d+ +)([\d.]+)( )/m, '4321'],
    ['demo-nest', /(, )(200)( concurrent requests per phase)/, '150'],
    ['bulkhead', /(\| maxConcurrentLoads: \d+ \| \d+ \| )(\d+)( \| )/, '49'],
    ['values', /(\| herdcache json \| )([\d ]+)( \| )/, '7 777 777'],
    ['values', /(\| cache-manager \| [\d ]+ \| [\d ]+ \| [\d.]+× \| )([\d.]+)( \| )/, '4321.5'],
    ['values', /(this ÷ baseline )([\d.]+)(×)/, '0.42'],
  ]
  for (const [file, pattern, figure] of changes) {
    assert.match(results[file], pattern, `the ${file} file has the figure this test changes`)
    const changed = { ...results, [file]: results[file].replace(pattern, (_, a, _old, c = '') => `${a}${figure}${c}`) }
    const rendered = render(README, changed)
    assert.notEqual(rendered, README, `a changed ${file} figure must change the README`)
    assert.ok(rendered.includes(figure), `the README shows the new figure ${figure}`)
  }
})

test('every local link of the README points at a file of the repository', T, () => {
  const links = [...README.matchAll(/\]\(((?!https?:|#)[^)\s]+)\)/g)].map((m) => m[1].replace(/#.*$/, ''))
  assert.ok(links.includes('bench/fleet.svg'), 'the README links the plot FLEET.md embeds')
  for (const link of links) assert.ok(fs.existsSync(path.join(ROOT, link)), `README links ${link}, which is missing`)
  const fleet = fs.readFileSync(path.join(ROOT, 'bench', 'FLEET.md'), 'utf8')
  for (const [, image] of fleet.matchAll(/!\[[^\]]*\]\(([^)]+)\)/g)) {
    assert.ok(fs.existsSync(path.join(ROOT, 'bench', image)), `FLEET.md embeds ${image}, which is missing`)
  }
})

test('the bench and demo scripts and results name no path outside the repository', T, () => {
  for (const name of ['bench', 'demo']) {
    const dir = path.join(ROOT, name)
    for (const file of fs.readdirSync(dir).filter((f) => /\.(js|md)$/.test(f))) {
      const text = fs.readFileSync(path.join(dir, file), 'utf8')
      assert.doesNotMatch(
        text,
        /\/work\/|\/home\/|\/tmp\/|[A-Z]:\\\\/,
        `${name}/${file} names a path outside the repository`,
      )
    }
  }
})
