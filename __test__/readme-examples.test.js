'use strict'
// The README's examples run as pasted. Every code block README.md marks with
// `<!-- runnable ... -->` (the convention is in CONTRIBUTING.md) runs in a
// child process, with a stub `db` preloaded, and must exit 0:
//
//   <!-- runnable -->                                   run the block as it is
//   <!-- runnable nest=AppModule get=/products/1 -->    then boot AppModule on 127.0.0.1, GET the path twice
//   <!-- runnable env=CACHE_TTL=30000 -->               with that environment variable set
//
// A block that mentions REDIS_URL runs twice: without it (the embedded
// store) and with REDIS_URL pointing at a redis-server this test starts.
// TypeScript blocks are type-checked (--strict, exactOptionalPropertyTypes),
// then transpiled to CommonJS and run.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { ROOT, tsc } = require('./helpers')
const { startRedis } = require('./redis-server')

const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
const MARKER = /^(\s*)<!-- runnable(?:\s+(.*?))?\s*-->\s*$/
const FENCE = /^(\s*)```(js|mjs|ts)\s*$/

/** The marked blocks: { line, lang, code, nest, gets, env }. */
function runnableBlocks(text) {
  const lines = text.split('\n')
  const blocks = []
  for (let i = 0; i < lines.length; i++) {
    const marker = MARKER.exec(lines[i])
    if (!marker) continue
    const fence = FENCE.exec(lines[i + 1] ?? '')
    assert.ok(fence, `README.md line ${i + 1}: a runnable marker must be followed by a js, mjs or ts fence`)
    const indent = fence[1]
    const end = lines.findIndex((line, j) => j > i + 1 && line === `${indent}\`\`\``)
    assert.ok(end > 0, `README.md line ${i + 2}: the fence is never closed`)
    const code = lines
      .slice(i + 2, end)
      .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
      .join('\n')
    const block = { line: i + 3, lang: fence[2], code, nest: undefined, gets: [], env: {} }
    for (const attribute of (marker[2] ?? '').split(/\s+/).filter(Boolean)) {
      const [name, ...rest] = attribute.split('=')
      const value = rest.join('=')
      if (name === 'nest') block.nest = value
      else if (name === 'get') block.gets.push(value)
      else if (name === 'env') block.env[value.split('=')[0]] = value.split('=').slice(1).join('=')
      else assert.fail(`README.md line ${i + 1}: unknown runnable attribute \`${name}\``)
    }
    blocks.push(block)
    i = end
  }
  return blocks
}

// A stand-in for the application's database: every method resolves to a
// small record, so the examples' loaders have something to return.
const DB_STUB = `'use strict'
function table(name) {
  const query = async (...args) => ({ from: name, args: args.filter((a) => !(a instanceof AbortSignal)) })
  return new Proxy(query, {
    get: (target, prop) => (typeof prop === 'symbol' || prop === 'then' ? target[prop] : table(name + '.' + prop)),
  })
}
globalThis.db = table('db')
`
const DB_TYPES = 'declare var db: any\n'

// Boots the block's Nest module on 127.0.0.1 and GETs each path twice: the
// second answer of a @Cached route is a hit.
function bootstrap(moduleName, gets) {
  return `
;(async () => {
  const { NestFactory } = require('@nestjs/core')
  const app = await NestFactory.create(${moduleName}, { logger: ['error', 'warn'] })
  await app.listen(0, '127.0.0.1')
  const url = await app.getUrl()
  for (const path of ${JSON.stringify(gets)}) {
    const answers = []
    for (let i = 0; i < 2; i++) {
      const response = await fetch(url + path)
      await response.text()
      if (response.status !== 200) throw new Error('GET ' + path + ': ' + response.status)
      answers.push(response.headers.get('x-cache'))
    }
    if (answers[1] !== 'HIT') throw new Error('GET ' + path + ' twice: X-Cache ' + answers.join(', '))
  }
  await app.close()
})().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
`
}

function run(file, env) {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--require', path.join(path.dirname(file), 'db-stub.js'), file],
      { cwd: ROOT, env, timeout: 30_000 },
      (error, stdout, stderr) => resolve({ code: error ? (error.code ?? error.signal ?? 1) : 0, stdout, stderr }),
    )
  })
}

const blocks = runnableBlocks(README)

test('README.md marks its examples runnable (at least the first one, the Nest module and kTesting)', () => {
  assert.ok(blocks.length >= 4, `${blocks.length} runnable blocks`)
  assert.ok(blocks[0].code.includes("require('herdcache')"), 'the first example is runnable')
  assert.ok(
    blocks.some((b) => b.code.includes('forRootAsync') && b.env.CACHE_TTL),
    'forRootAsync runs with CACHE_TTL set',
  )
  assert.ok(
    blocks.some((b) => b.code.includes('setRandom(null)')),
    'the kTesting example unpins with setRandom(null)',
  )
})

test('the runnable README examples exit 0 (with a stub db; with and without Redis)', async (t) => {
  // Inside the repository, so `require('herdcache')` resolves to this checkout.
  const dir = fs.mkdtempSync(path.join(ROOT, '.readme-examples-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.writeFileSync(path.join(dir, 'db-stub.js'), DB_STUB)
  fs.writeFileSync(path.join(dir, 'db.d.ts'), DB_TYPES)

  const files = blocks.map((block, i) => {
    const source = path.join(dir, `block-${i + 1}.${block.lang}`)
    fs.writeFileSync(source, block.code)
    return source
  })
  const tsFiles = files.filter((f) => f.endsWith('.ts'))
  if (tsFiles.length > 0) {
    const r = await tsc(
      [
        '--noEmit',
        '--strict',
        '--exactOptionalPropertyTypes',
        '--experimentalDecorators',
        '--emitDecoratorMetadata',
        '--target',
        'es2022',
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--types',
        'node',
        path.join(dir, 'db.d.ts'),
        ...tsFiles,
      ],
      60_000,
    )
    const where = (out) => out.replace(/block-(\d+)\.ts/g, (_, n) => `README.md block at line ${blocks[n - 1].line}`)
    assert.equal(r.code, 0, `the TypeScript examples do not type-check:\n${where(r.out)}`)
  }

  const ts = require('typescript')
  let redis
  for (const [i, block] of blocks.entries()) {
    let code = block.code
    if (block.lang === 'ts') {
      code = ts.transpileModule(code, {
        compilerOptions: {
          module: ts.ModuleKind.CommonJS,
          target: ts.ScriptTarget.ES2022,
          experimentalDecorators: true,
          emitDecoratorMetadata: true,
          esModuleInterop: true,
        },
      }).outputText
    }
    if (block.nest) code += bootstrap(block.nest, block.gets)
    const file = path.join(dir, `block-${i + 1}.run.${block.lang === 'mjs' ? 'mjs' : 'js'}`)
    fs.writeFileSync(file, code)

    const { REDIS_URL: _ignored, ...env } = process.env
    const variants = [{ ...env, ...block.env }]
    if (block.code.includes('REDIS_URL')) {
      redis ??= await startRedis(t)
      if (redis) variants.push({ ...env, ...block.env, REDIS_URL: redis.url })
    }
    for (const variant of variants) {
      const r = await run(file, variant)
      const how = variant.REDIS_URL ? 'with REDIS_URL' : 'without Redis'
      assert.equal(
        r.code,
        0,
        `README.md block at line ${block.line} (${how}) exited ${r.code}:\n${r.stderr}\n${r.stdout}\n--- code ---\n${block.code}`,
      )
    }
  }
})
