'use strict'

// Where the time of a getOrLoad hit goes: the untagged hit of one warm key,
// nobody subscribed (bench/hitpath.js's first row), profiled two ways, and
// the section "Where a hit's time goes" of bench/HITPATH.md written from
// what the tools said (bench/hitpath.js keeps that section when it rewrites
// the file).
//
//   node bench/hitprofile.js [--seconds=8] [--calls=100000] [--baseline=DIR] [--out=FILE]
//
// --baseline=DIR: the same for another checkout (its addon built with its
// symbols too), in columns beside this one's: the profile before a change.
//
// - perf (`perf record -e cpu-clock`, a software clock: this needs no
//   hardware counters, which VMs often lack) samples a process doing hits
//   for --seconds, V8 naming its JIT code (`--perf-basic-prof`): the share
//   of the time of each part of the hit, JS and native. The ns/op column is
//   that share of the hit's time measured without the profiler.
// - callgrind (valgrind) counts the instructions executed inside the
//   native getOrLoad only (`--toggle-collect` on `entry::get_or_load`), per
//   call: exact and repeatable, so two builds compare without noise.
//
// Both need the addon's symbols, which the release profile strips; build
// the same code with them kept first:
//
//   CARGO_PROFILE_RELEASE_STRIP=none npx napi build --platform --profile release --js binding.js --dts binding.d.ts
//
// and `perf` and `valgrind` on PATH (apt-get install linux-perf valgrind).

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync, spawnSync } = require('node:child_process')
const { opt, rejectUnknownArgs, now, machine } = require('./common')

rejectUnknownArgs(
  /^--(seconds=\d+(\.\d+)?|calls=\d+|child=.+|root=.+|baseline=.+|out=.+)$/,
  'node bench/hitprofile.js [--seconds=8] [--calls=100000] [--baseline=DIR] [--out=FILE]',
)
const ROOT = path.join(__dirname, '..')
const OUT = path.resolve(opt('out') ?? path.join(__dirname, 'HITPATH.md'))
const SECONDS = Number(opt('seconds') ?? 8)
const CALLS = Number(opt('calls') ?? 100_000)
const NATIVE_ENTRY = 'herdcache::binding::entry::get_or_load'
const SECTION_START = '<!-- profile: written by bench/hitprofile.js -->'
const SECTION_END = '<!-- /profile -->'
const BATCH = 256
const WARM_CALLS = 200_000
const loader = () => ({ id: 42, items: [1, 2, 3] })

/**
 * The parts of a hit, each a pattern over the symbols perf and callgrind
 * name (C++ and Rust demangled, JS as `--perf-basic-prof` names it); the
 * first that matches takes the symbol.
 */
const PARTS = [
  [
    'index.js `getOrLoad`: the tracing check, a remembered hit (its epoch, its deadline), or the call',
    /^JS:[*~^+]?getOrLoad |^JS:[*~^+]?#now /,
  ],
  ["a remembered hit's lookup (`Map.prototype.get`)", /MapPrototypeGet|FindOrderedHashMapEntry|OrderedHashMap/],
  [
    'the caller: its loop and `await` (JS, V8 builtins; index.js `getOrLoad` too where V8 inlined it there)',
    /^JS:|^Builtins_(Await|AsyncFunction|Promise|RunMicrotasks|EnqueueMicrotask|PerformPromiseThen|ResumeGenerator|ResolvePromise|FulfillPromise|NewPromiseCapability|Call_|CallFunction|JSRunMicrotasksEntry|JSEntry)|MicrotaskQueue/,
  ],
  [
    'the crossing into the addon (V8 API call, napi callback wrapper)',
    /Builtins_CallApiCallback|FunctionCallbackWrapper|CallbackWrapper|CallIntoModule|napi_clear_last_error|v8impl::/,
  ],
  ['raw arguments (`napi_get_cb_info`)', /napi_get_cb_info/],
  [
    'reading the key (copied out of V8, UTF-8 made; its checks)',
    /napi_get_value_string|String::Write|WriteToFlat|CopyChars|Utf8::read|key::read|check_lossless|check_string_key|String::Flatten/,
  ],
  ['type checks (`napi_typeof`: the key, the loader)', /napi_typeof|v8::Value::Is/],
  [
    'the store lookup: hashing the key, the LRU touch',
    /MemoryStore<V>::(touch|sweep_if_due|find)|Slots<V>::|hashbrown|foldhash|Hasher|memcmp/,
  ],
  ['the clock', /clock_gettime|wall_clock|Clock::now/],
  [
    "the engine's decision (flights, tags, freshness, counters, invalidations)",
    /Engine<V,F>::decide|Cache<V,F,S>::decide|apply_invalidations|policy::/,
  ],
  ['the promise handle (`napi_get_reference_value`)', /Held::resolved|napi_get_reference_value|CreateHandle/],
  [
    "the binding's own code (`entry::get_or_load`: options, closed checks, outcome byte)",
    /binding::entry::get_or_load|EntryPolicy::with/,
  ],
  ['garbage collection', /Scaveng|Heap::|GarbageCollect|RootScavengeVisitor|IterateObjectCache|MarkCompact|Sweeper/],
  ['everything else (the kernel, V8 and Node otherwise)', /./],
]

const partOf = (symbol) => PARTS.findIndex(([, re]) => re.test(symbol))

/** One process's hits: for `time:S`, ns/op over S seconds; for `calls:N`, N hits after the warm-up, then how many getOrLoad calls it made. */
async function child(spec, root) {
  const [mode, arg] = spec.split(':')
  const { Cache } = require(root)
  const cache = new Cache()
  await cache.getOrLoad('hot', loader)
  let calls = 1
  for (let i = 0; i < WARM_CALLS; i++) await cache.getOrLoad('hot', loader)
  calls += WARM_CALLS
  let last
  if (mode === 'calls') {
    for (let i = 0; i < Number(arg); i++) last = await cache.getOrLoad('hot', loader)
    calls += Number(arg)
    process.stdout.write(String(calls))
  } else {
    let n = 0
    const started = now()
    const deadline = started + Number(arg) * 1000
    do {
      for (let i = 0; i < BATCH; i++) last = await cache.getOrLoad('hot', loader)
      n += BATCH
    } while (now() < deadline)
    process.stdout.write(String(((now() - started) * 1e6) / n))
  }
  if (last?.id !== 42) throw new Error('not the cached value')
  await cache.close()
}

function need(tool, args) {
  const probe = spawnSync(tool, args, { encoding: 'utf8' })
  if (probe.error) {
    console.error(`bench/hitprofile.js needs \`${tool}\` on PATH (apt-get install linux-perf valgrind)`)
    process.exit(2)
  }
}

function checkSymbols(root) {
  const addon = path.join(root, 'herdcache.linux-x64-gnu.node')
  const symbols = spawnSync('nm', ['-C', addon], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 })
  if (!symbols.stdout?.includes(NATIVE_ENTRY)) {
    console.error(
      `${addon} has no symbols (the release profile strips them). Build the same code with them:\n` +
        '  CARGO_PROFILE_RELEASE_STRIP=none npx napi build --platform --profile release --js binding.js --dts binding.d.ts',
    )
    process.exit(2)
  }
}

/** perf's samples of a hitting process, by part: { shares, samples }. */
function perfProfile(scratch, root) {
  const data = path.join(scratch, 'perf.data')
  const run = spawnSync(
    'perf',
    [
      'record',
      '-e',
      'cpu-clock',
      '-F',
      '999',
      '-o',
      data,
      '--',
      process.execPath,
      '--perf-basic-prof',
      __filename,
      `--child=time:${SECONDS}`,
      `--root=${root}`,
    ],
    { encoding: 'utf8' },
  )
  if (run.status !== 0) throw new Error(`perf record failed: ${run.stderr}`)
  const pid = /pid (\d+)/.exec(spawnSync('perf', ['report', '-i', data, '--header-only'], { encoding: 'utf8' }).stdout)
  const report = execFileSync(
    'perf',
    ['report', '-i', data, '--no-children', '--sort', 'sym', '--stdio', '-q', '--percent-limit', '0', '-n'],
    { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 },
  )
  const counts = new Array(PARTS.length).fill(0)
  let samples = 0
  for (const line of report.split('\n')) {
    const m = /^\s*[\d.]+%\s+(\d+)\s+\[[.k]\]\s+(.*?)\s*$/.exec(line)
    if (!m) continue
    const n = Number(m[1])
    samples += n
    counts[partOf(m[2])] += n
  }
  // V8 writes the names of its JIT code to the system's temporary directory, perf-<pid>.map.
  if (pid) fs.rmSync(path.join(path.sep, 'tmp', `perf-${pid[1]}.map`), { force: true })
  return { shares: counts.map((n) => n / samples), samples }
}

/** callgrind's instructions inside the native getOrLoad, per call, by part. */
function callgrindProfile(scratch, root) {
  const out = path.join(scratch, 'callgrind.out')
  const run = spawnSync(
    'valgrind',
    [
      '--tool=callgrind',
      '--smc-check=all-non-file',
      `--callgrind-out-file=${out}`,
      `--toggle-collect=${NATIVE_ENTRY}`,
      process.execPath,
      __filename,
      `--child=calls:${CALLS}`,
      `--root=${root}`,
    ],
    { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  )
  if (run.status !== 0) throw new Error(`valgrind failed: ${run.stderr}`)
  const calls = Number(run.stdout)
  const annotated = execFileSync('callgrind_annotate', ['--inclusive=no', '--threshold=100', out], {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  })
  const perCall = new Array(PARTS.length).fill(0)
  let total = 0
  for (const line of annotated.split('\n')) {
    const m = /^\s*([\d,]+)\s+\([\s\d.]+%\)\s+(.*?):(.*?)(?: \[.*\])?\s*$/.exec(line)
    if (!m || m[2] === 'PROGRAM TOTALS') continue
    const ir = Number(m[1].replaceAll(',', '')) / calls
    total += ir
    perCall[partOf(m[3])] += ir
  }
  return { perCall, total, calls }
}

/** ns per hit without a profiler: the median of three processes. */
/** ns per hit without a profiler, of each root: the median of three processes each, alternating. */
function unprofiledNs(roots) {
  const runs = roots.map(() => [])
  for (let i = 0; i < 3; i++) {
    roots.forEach((root, r) => {
      const args = [__filename, '--child=time:2', `--root=${root}`]
      runs[r].push(Number(execFileSync(process.execPath, args, { encoding: 'utf8' })))
    })
  }
  return runs.map((ns) => ns.sort((a, b) => a - b)[1])
}

/** One root's profile: its unprofiled ns/op, perf's shares, callgrind's instructions. */
function profile(scratch, root, ns) {
  return { ns, perf: perfProfile(scratch, root), grind: callgrindProfile(scratch, root) }
}

/** The checkout at `root` named by its commit (a results file names no path outside the repository). */
function commitOf(root) {
  try {
    return execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()
  } catch {
    return 'the baseline'
  }
}

/** The section: one column group per profile (this checkout's, then the baseline's). */
function section(profiles, info) {
  const [ours, base] = profiles
  const L = [SECTION_START, "## Where a hit's time goes", '']
  const unprofiled = profiles.map((p) => `${p.ns.toFixed(1)} ns/op (${p.name})`).join(', ')
  L.push(
    `Written by \`${info.command}\` on ${info.date} (node ${process.version}, ${info.cpu}, load ${info.load}), ` +
      "each checkout's addon built with its symbols (the same code). The hit: one warm key, nobody subscribed, " +
      `\`await cache.getOrLoad('hot', loader)\` in a loop; without a profiler ${unprofiled}, the median of 3 processes each, alternating.`,
  )
  L.push('')
  L.push(
    `- **time**: \`perf record -e cpu-clock -F 999\` of one such process for ${SECONDS} s (${profiles.map((p) => `${p.perf.samples} samples`).join(', ')}; ` +
      '`node --perf-basic-prof` names the JIT code), each sample counted to the part its function belongs to; ' +
      'ns/op is that share of the unprofiled time. A sample is charged to the instruction that was waiting, so a ' +
      'cache miss counts where the missing load is used.',
  )
  L.push(
    `- **instructions**: \`valgrind --tool=callgrind --toggle-collect=${NATIVE_ENTRY}\`, per call over ${ours.grind.calls} calls ` +
      `(${profiles.map((p) => `${p.grind.total.toFixed(0)} a call (${p.name})`).join(', ')}, inside the native getOrLoad; ` +
      'the JS parts run outside it, hence —).',
  )
  L.push('')
  const head = profiles.map((p) => `share, ${p.name} | ns/op, ${p.name} | instructions, ${p.name}`).join(' | ')
  L.push(`| part of the hit | ${head} |`)
  L.push(`|---|${profiles.map(() => '---:|---:|---:').join('|')}|`)
  PARTS.forEach(([title], i) => {
    if (profiles.every((p) => p.perf.shares[i] < 0.0005 && p.grind.perCall[i] < 0.5)) return
    const cells = profiles.map((p) => {
      const share = p.perf.shares[i]
      const ir = p.grind.perCall[i]
      return `${(share * 100).toFixed(1)} % | ${(share * p.ns).toFixed(1)} | ${ir >= 0.5 ? ir.toFixed(0) : '—'}`
    })
    L.push(`| ${title} | ${cells.join(' | ')} |`)
  })
  L.push('')
  L.push(
    'A call with options adds reading them (`read_call_options`, the entry policy) and, with a `status` object, ' +
      'filling it; a subscriber to `herdcache:getOrLoad` makes the call traced (the rows of the table above). ' +
      (base === undefined
        ? ''
        : `Against ${base.name}: ${(ours.ns / base.ns).toFixed(2)}× the time and ` +
          `${(ours.grind.total / base.grind.total).toFixed(2)}× the native instructions of a hit.`),
  )
  L.push(SECTION_END)
  return L.join('\n')
}

/** Replaces the profile section of `file` (or appends one), keeping the rest. */
function writeSection(file, text) {
  let current = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : ''
  const start = current.indexOf(SECTION_START)
  const end = current.indexOf(SECTION_END)
  if (start !== -1 && end > start) {
    current = current.slice(0, start) + text + current.slice(end + SECTION_END.length)
  } else {
    current = `${current.replace(/\n*$/, '')}\n\n${text}\n`
  }
  fs.writeFileSync(file, current)
}

async function main() {
  const spec = opt('child')
  if (spec !== undefined) return child(spec, path.resolve(opt('root') ?? ROOT))
  need('perf', ['--version'])
  need('valgrind', ['--version'])
  const baseline = opt('baseline') === undefined ? undefined : path.resolve(opt('baseline'))
  const roots = baseline === undefined ? [ROOT] : [ROOT, baseline]
  for (const root of roots) checkSymbols(root)
  const { cpu, load } = machine()
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'herdcache-hitprofile-'))
  try {
    const ns = unprofiledNs(roots)
    const profiles = roots.map((root, i) => ({
      name: i === 0 ? `this checkout, ${commitOf(root)}` : commitOf(root),
      ...profile(scratch, root, ns[i]),
    }))
    // The baseline is named by its commit below, not by its path.
    const args = process.argv
      .slice(2)
      .filter((a) => !a.startsWith('--out='))
      .map((a) => (a.startsWith('--baseline=') ? '--baseline=DIR' : a))
    const info = {
      command: `node bench/hitprofile.js${args.length ? ` ${args.join(' ')}` : ''}`,
      date: new Date().toISOString().slice(0, 19) + 'Z',
      cpu,
      load,
    }
    const text = section(profiles, info)
    console.log(text)
    writeSection(OUT, text)
    console.log(`written to ${path.relative(process.cwd(), OUT)}`)
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true })
  }
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
