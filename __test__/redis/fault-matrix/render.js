'use strict'
// Renders the README's fault-matrix table from cells.js. `node
// __test__/redis/fault-matrix/render.js --write` rewrites it in README.md,
// between <!-- fault-matrix --> and <!-- /fault-matrix -->; without --write it
// prints it. The fault-matrix test checks the README holds this rendering.
const fs = require('node:fs')
const path = require('node:path')
const { OPTIONS, LOAD_MS, COLUMNS, ROWS, cell, cellText } = require('./cells')

const README = path.join(__dirname, '..', '..', '..', 'README.md')
const START = '<!-- fault-matrix -->'
const END = '<!-- /fault-matrix -->'

function render() {
  const lines = [
    `| operation | ${COLUMNS.map((c) => c.title).join(' | ')} |`,
    `|---|${COLUMNS.map(() => '---').join('|')}|`,
    ...ROWS.map((row) => `| ${row.title} | ${COLUMNS.map((col) => cellText(cell(col, row), col)).join(' | ')} |`),
    '',
    `T is \`redisTimeout\`, L the loader's time, the rest ms (the test runs it with T = ${OPTIONS.redisTimeout}, ` +
      `\`circuitBreakerDuration\` ${OPTIONS.circuitBreakerDuration}, L = ${LOAD_MS}). "kept, delivered": ` +
      '`recoveryPending` counts it at once and it is in Redis once Redis answers again; "reported": `onError` got ' +
      "the fault's `ERR_HERDCACHE_REDIS_*` code. The faults:",
    '',
    ...COLUMNS.map((c) => `- **${c.title}**: ${c.how}.`),
  ]
  return `${lines.join('\n')}\n`
}

/** The README's text between the markers, or null when they are missing. */
function inReadme(text = fs.readFileSync(README, 'utf8')) {
  const a = text.indexOf(START)
  const b = text.indexOf(END)
  if (a < 0 || b < a) return null
  return text.slice(a + START.length, b).replace(/^\n/, '')
}

function write() {
  const text = fs.readFileSync(README, 'utf8')
  const a = text.indexOf(START)
  const b = text.indexOf(END)
  if (a < 0 || b < a) throw new Error(`README.md has no ${START} … ${END} markers`)
  fs.writeFileSync(README, `${text.slice(0, a + START.length)}\n${render()}${text.slice(b)}`)
}

if (require.main === module) {
  if (process.argv.includes('--write')) write()
  else process.stdout.write(render())
}

module.exports = { render, inReadme, write, START, END }
