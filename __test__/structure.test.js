'use strict'
// The shape of the product code, checked so it does not drift back: no import circle between the
// Rust modules of src/, and no function over MAX_FUNCTION_LINES lines in src/, lib/, nest/ and
// index.js (CONTRIBUTING, "The shape of the code"). A circle or a long function that has to stay a
// while is listed in KNOWN with its reason (none is now); the test fails when one of them is gone
// too, so the list only shrinks.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { ROOT } = require('./helpers')

const MAX_FUNCTION_LINES = 80

const KNOWN = { circles: [], long: [] }

/** Every file under `dir` (relative to the root) whose name ends with `ext`. */
function files(dir, ext) {
  const found = []
  const walk = (rel) => {
    for (const entry of fs.readdirSync(path.join(ROOT, rel), { withFileTypes: true })) {
      const child = path.join(rel, entry.name)
      if (entry.isDirectory()) walk(child)
      else if (entry.name.endsWith(ext)) found.push(child)
    }
  }
  walk(dir)
  return found.sort()
}

/**
 * `text` with its comments, strings and character literals blanked (newlines kept), so braces and
 * paths are only the code's. `rust`: raw strings and lifetimes; else JS template literals.
 */
function codeOnly(text, rust) {
  const blank = (s) => s.replace(/[^\n]/g, ' ')
  const pattern = rust
    ? /\/\/[^\n]*|\/\*[\s\S]*?\*\/|r(#*)"[\s\S]*?"\1|b?"(?:\\[\s\S]|[^\\"])*"|b?'(?:\\.|[^\\'\n])'/g
    : /\/\/[^\n]*|\/\*[\s\S]*?\*\/|`(?:\\[\s\S]|[^\\`])*`|"(?:\\.|[^\\"\n])*"|'(?:\\.|[^\\'\n])*'/g
  return text.replace(pattern, blank)
}

/** The text before a Rust file's unit tests (`#[cfg(test)] mod tests`), which are not product code. */
function withoutTests(code) {
  const at = code.search(/#\[cfg\(test\)\]\s*mod tests\b/)
  return at === -1 ? code : code.slice(0, at)
}

/** `src/engine/fleet/mod.rs` → `engine::fleet`; `src/engine/fleet/acquire.rs` → `engine::fleet::acquire`. */
function moduleOf(file) {
  const parts = file
    .replace(/^src\//, '')
    .replace(/\.rs$/, '')
    .split('/')
  if (['mod', 'lib'].includes(parts.at(-1))) parts.pop()
  return parts.join('::')
}

/** The module paths a `use` tree names: `a::{b::{self, C}, d}` → a::b, a::b::C, a::d. */
function expandUse(tree) {
  const brace = tree.indexOf('{')
  if (brace === -1) return [tree.replace(/::self$/, '')]
  const base = tree.slice(0, brace)
  const inner = tree.slice(brace + 1, tree.lastIndexOf('}'))
  const items = []
  let depth = 0
  let start = 0
  for (let i = 0; i <= inner.length; i++) {
    const c = inner[i]
    if (c === '{') depth++
    else if (c === '}') depth--
    else if ((c === ',' && depth === 0) || i === inner.length) {
      const item = inner.slice(start, i).trim()
      if (item) items.push(item === 'self' ? base.replace(/::$/, '') : base + item)
      start = i + 1
    }
  }
  return items.flatMap(expandUse)
}

/** The modules of src/ and, for each, the other modules of src/ it uses (its ancestors left out). */
function moduleGraph() {
  const sources = files('src', '.rs')
  const modules = new Set(sources.map(moduleOf))
  const graph = new Map()
  for (const file of sources) {
    const self = moduleOf(file)
    // `super` is the module's parent, in a mod.rs as in any file.
    const parent = self.split('::').slice(0, -1)
    const code = withoutTests(codeOnly(fs.readFileSync(path.join(ROOT, file), 'utf8'), true))
    const paths = [
      ...[...code.matchAll(/\buse\s+([^;]+);/g)].flatMap((m) => expandUse(m[1].replace(/\s+/g, ''))),
      ...[...code.matchAll(/\b(?:crate|super)(?:::[A-Za-z_]\w*)+/g)].map((m) => m[0]),
    ]
    const used = new Set()
    for (const raw of paths) {
      let parts = raw.split('::')
      if (parts[0] === 'crate') parts = parts.slice(1)
      else if (parts[0] === 'super') {
        let up = 0
        while (parts[up] === 'super') up++
        parts = [...parent.slice(0, parent.length - (up - 1)), ...parts.slice(up)]
      } else continue
      // The longest prefix that is a module of src/ (the rest names an item of it).
      while (parts.length && !modules.has(parts.join('::'))) parts.pop()
      const target = parts.join('::')
      const isAncestor = target === '' || self === target || self.startsWith(`${target}::`)
      if (!isAncestor) used.add(target)
    }
    graph.set(self, used)
  }
  return graph
}

/** Each elementary circle of `graph`, once, as `a -> b -> a` starting at its smallest module. */
function circles(graph) {
  const found = new Set()
  const walk = (start, at, trail) => {
    for (const next of graph.get(at) ?? []) {
      if (next === start) found.add([...trail, start].join(' -> '))
      else if (next > start && !trail.includes(next)) walk(start, next, [...trail, next])
    }
  }
  for (const start of [...graph.keys()].sort()) walk(start, start, [start])
  return [...found].sort()
}

/** The functions of a file longer than `max` lines, as `file name (lines)`. */
function longFunctions(file, max) {
  const rust = file.endsWith('.rs')
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8')
  const code = rust ? withoutTests(codeOnly(text, true)) : codeOnly(text, false)
  const starts = rust
    ? /^[ \t]*(?:pub(?:\([\w:]+\))? )?(?:const )?(?:async )?(?:unsafe )?(?:extern\s+)?fn (\w+)/gm
    : /^[ \t]*(?:async )?(?:function\*? (\w+)\s*\(|(?:static )?(?:get |set )?(\w+)\s*\([^)]*\)\s*\{$|(?:const|let) (\w+) = (?:async )?(?:function\b|\([^)]*\)\s*=>\s*\{|\w+\s*=>\s*\{))/gm
  const long = []
  for (const match of code.matchAll(starts)) {
    const name = match[1] ?? match[2] ?? match[3]
    if (['if', 'for', 'while', 'switch', 'catch', 'return'].includes(name)) continue
    // The body: from the first `{` outside the signature's brackets (a `;` there first: a
    // declaration, no body) to its match.
    let open = match.index + match[0].indexOf(name) + name.length
    for (let nested = 0; open < code.length; open++) {
      const c = code[open]
      if ('([<'.includes(c)) nested++
      else if (')]'.includes(c) || (c === '>' && code[open - 1] !== '-' && code[open - 1] !== '=')) nested--
      else if (nested <= 0 && (c === '{' || c === ';')) break
    }
    if (code[open] !== '{') continue
    let depth = 0
    let end = open
    for (; end < code.length; end++) {
      if (code[end] === '{') depth++
      else if (code[end] === '}' && --depth === 0) break
    }
    const lines = code.slice(match.index, end).split('\n').length
    if (lines > max) long.push(`${file} ${name} (${lines})`)
  }
  return long
}

test('no import circle between the Rust modules of src/ (but the known ones)', () => {
  const graph = moduleGraph()
  assert.ok(graph.get('engine::cache')?.has('core::options'), 'the graph sees a `use crate::…` path')
  assert.ok(graph.get('engine::slots')?.has('engine::shared'), 'the graph sees a `use super::…` path')
  const found = circles(graph)
  const unknown = found.filter((circle) => !KNOWN.circles.includes(circle))
  assert.deepEqual(unknown, [], `new import circles (break them; see CONTRIBUTING):\n${unknown.join('\n')}`)
  const gone = KNOWN.circles.filter((circle) => !found.includes(circle))
  assert.deepEqual(gone, [], `no longer circles: remove them from KNOWN.circles:\n${gone.join('\n')}`)
})

test('the circle finder finds a circle', () => {
  const graph = new Map([
    ['a', new Set(['b'])],
    ['b', new Set(['c'])],
    ['c', new Set(['a'])],
    ['d', new Set(['a'])],
  ])
  assert.deepEqual(circles(graph), ['a -> b -> c -> a'])
})

test(`no function of the product code is over ${MAX_FUNCTION_LINES} lines (but the known ones)`, () => {
  const product = [...files('src', '.rs'), ...files('lib', '.js'), ...files('nest', '.js'), 'index.js']
  const found = product.flatMap((file) => longFunctions(file, MAX_FUNCTION_LINES))
  const named = (entry) => entry.replace(/ \(\d+\)$/, '')
  const unknown = found.filter((entry) => !KNOWN.long.includes(named(entry)))
  assert.deepEqual(unknown, [], `functions over ${MAX_FUNCTION_LINES} lines (split them):\n${unknown.join('\n')}`)
  const gone = KNOWN.long.filter((known) => !found.some((entry) => named(entry) === known))
  assert.deepEqual(gone, [], `no longer long: remove them from KNOWN.long:\n${gone.join('\n')}`)
})

test('the function measure counts a long function, and only its body', () => {
  const dir = fs.mkdtempSync(path.join(ROOT, 'target', 'structure-'))
  try {
    const body = Array.from({ length: 90 }, (_, i) => `  let x${i} = "{";`).join('\n')
    fs.writeFileSync(path.join(dir, 'a.rs'), `fn long() {\n${body}\n}\n\nfn short() {\n  // }\n}\n`)
    fs.writeFileSync(path.join(dir, 'b.js'), `function long() {\n${body}\n}\nconst short = () => {\n  return '}'\n}\n`)
    const rel = path.relative(ROOT, dir)
    assert.deepEqual(longFunctions(path.join(rel, 'a.rs'), MAX_FUNCTION_LINES), [`${rel}/a.rs long (92)`])
    assert.deepEqual(longFunctions(path.join(rel, 'b.js'), MAX_FUNCTION_LINES), [`${rel}/b.js long (92)`])
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
