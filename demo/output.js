'use strict'

// The demos' results files. After a complete run of its default traffic (the
// embedded store: no REDIS_URL), demo/stampede.js writes what it printed to
// demo/OUTPUT.md and demo/nest.js to demo/NEST-OUTPUT.md; bench/readme.js then
// renders README.md's demo sections from those files. Nothing is typed by hand.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { stripVTControlCharacters } = require('node:util')

/** Writes demo/<file> with `output` (what the demo printed) in a fence, then updates the README from it. */
function writeOutput(file, { title, command, output }) {
  const lines = stripVTControlCharacters(output)
    .split('\n')
    .map((line) => line.trimEnd())
  const text = [
    `# ${title}`,
    '',
    `- date: ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}`,
    `- machine: ${os.cpus().length} cores, ${os.type()} ${os.arch()}; node ${process.version}`,
    `- command: \`${command}\` (the default run: embedded store, no \`REDIS_URL\`)`,
    '',
    "What it printed. README.md's demo figures are rendered from this file by bench/readme.js.",
    '',
    '```',
    lines.join('\n').trim(),
    '```',
    '',
  ].join('\n')
  fs.writeFileSync(path.join(__dirname, file), text)
  console.log(`demo/${file} written`)
  require('../bench/readme').updateReadmeAfterBench()
}

module.exports = { writeOutput }
