'use strict'
// A Redis Cluster of the test's own (not a test file itself): N primaries
// (and R replicas each) of HERDCACHE_TEST_SERVER on free loopback ports,
// joined with `redis-cli --cluster create`. Works the same with valkey-server.
// Never touches a server it did not start.
//
//   const cluster = await startCluster(t, { primaries: 3, replicas: 1 })  // null (t skipped) when a binary is missing outside CI
//   if (!cluster) return
//   cluster.urls                                // seed nodes: 'redis://127.0.0.1:P' of the primaries at start
//   const slot = await cluster.slotOf('k')     // CLUSTER KEYSLOT
//   const port = await cluster.ownerOf(slot)   // the primary serving it now
//   await cluster.cmd(port, 'SET', 'k', 'v')    // one command on one node
//   await cluster.migrateSlot(slot, other)      // the slot, with its keys, moves to `other`
//   await cluster.killPrimary(port); await cluster.waitFailover()   // SIGKILL; a replica takes over
//   await cluster.restartNode(port)             // it rejoins, as a replica
//
// Every node runs with --cluster-node-timeout 1000: a killed primary's
// replica takes over 1.5–3 s later. The cluster is stopped when the test
// ends (t.after) and, failing that, when this process exits.
// HERDCACHE_TEST_CLI names the redis-cli binary (default redis-cli; it
// drives valkey-server too).

const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { connect, freePort, redisInstalled, SERVER } = require('./redis-server')

/** The redis-cli binary that creates the cluster (HERDCACHE_TEST_CLI overrides it). */
const CLI = process.env.HERDCACHE_TEST_CLI || 'redis-cli'
const NODE_TIMEOUT = 1000
const START_TIMEOUT = 5000
const CREATE_TIMEOUT = 20000
const SETTLE_TIMEOUT = 15000
const FAILOVER_TIMEOUT = 15000
const STOP_TIMEOUT = 3000
const SLOTS = 16384

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// ---- processes --------------------------------------------------------------

const live = new Set()
const dirs = new Set()
process.on('exit', () => {
  for (const child of live) {
    try {
      child.kill('SIGCONT')
      child.kill('SIGKILL')
    } catch {}
  }
  for (const dir of dirs) {
    try {
      fs.rmSync(dir, { recursive: true, force: true })
    } catch {}
  }
})

let cliInstalled
function cliFound() {
  if (cliInstalled === undefined) {
    const r = spawnSync(CLI, ['--version'], { stdio: 'ignore' })
    cliInstalled = !r.error && r.status === 0
  }
  return cliInstalled
}

// The node's server process, its output kept (the last 4000 characters) for errors.
function spawnNode(node, args) {
  const child = spawn(
    SERVER,
    [
      '--port',
      String(node.port),
      '--bind',
      '127.0.0.1',
      '--cluster-enabled',
      'yes',
      // The bus port is a free port of its own: the default, port + 10000,
      // is past 65535 for half of the ephemeral range freePort draws from.
      '--cluster-port',
      String(node.busPort),
      '--cluster-config-file',
      `nodes-${node.port}.conf`,
      '--cluster-node-timeout',
      String(NODE_TIMEOUT),
      '--save',
      '',
      '--appendonly',
      'no',
      // A replica's first sync waits 5 s by default (for more replicas to join it).
      '--repl-diskless-sync-delay',
      '0',
      '--dir',
      node.dir,
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  live.add(child)
  let output = ''
  child.stdout.on('data', (d) => (output = (output + d).slice(-4000)))
  child.stderr.on('data', (d) => (output = (output + d).slice(-4000)))
  child.exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      live.delete(child)
      child.exitInfo = { code, signal }
      resolve(child.exitInfo)
    })
    child.on('error', (e) => {
      live.delete(child)
      child.exitInfo = { error: e }
      resolve(child.exitInfo)
    })
  })
  child.output = () => output
  return child
}

// True when the server answering on `port` is the process `pid` (ours).
async function answers(port, pid) {
  let c
  try {
    c = await connect(port)
    const info = await c.cmd('INFO', 'server')
    return new RegExp(`\\bprocess_id:${pid}\\b`).test(info)
  } catch {
    return false
  } finally {
    if (c) c.close()
  }
}

// Spawns the node and waits until it answers; returns the child, exited
// (exitInfo set) when it could not start (a port was taken, a bad option).
async function launch(node, args) {
  const child = spawnNode(node, args)
  const end = Date.now() + START_TIMEOUT
  for (;;) {
    if (child.exitInfo) return child
    if (await answers(node.port, child.pid)) return child
    if (Date.now() > end) {
      await kill(child, 'SIGKILL')
      throw new Error(`${SERVER} did not answer on port ${node.port} within ${START_TIMEOUT} ms:\n${child.output()}`)
    }
    await sleep(15)
  }
}

// `signal`, then waits for the exit (SIGKILL after STOP_TIMEOUT).
async function kill(child, signal = 'SIGTERM') {
  if (!child || child.exitInfo) return
  try {
    child.kill('SIGCONT')
    child.kill(signal)
  } catch {}
  let timer
  const timedOut = await Promise.race([
    child.exited.then(() => false),
    new Promise((r) => (timer = setTimeout(() => r(true), STOP_TIMEOUT))),
  ])
  clearTimeout(timer)
  if (timedOut) {
    try {
      child.kill('SIGKILL')
    } catch {}
    await child.exited
  }
}

// Runs redis-cli with `args`: resolves to its output, rejects (with it) on failure.
function runCli(args, timeout) {
  return new Promise((resolve, reject) => {
    const child = spawn(CLI, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d) => (output += d))
    child.stderr.on('data', (d) => (output += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout)
    child.on('error', (e) => {
      clearTimeout(timer)
      reject(e)
    })
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      if (code === 0) resolve(output)
      else reject(new Error(`${CLI} ${args.join(' ')} failed (${signal || `exit ${code}`}):\n${output.slice(-3000)}`))
    })
  })
}

// ---- what the nodes say -----------------------------------------------------

/**
 * CLUSTER NODES → [{ id, port, master (boolean), failed, masterId, slots: [[from, to], …] }].
 * Slots being imported or migrated (`[s->-id]`) are left out.
 */
function parseNodes(text) {
  return text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id, addr, flags, masterId, , , , , ...slotFields] = line.trim().split(' ')
      const flagSet = new Set(flags.split(','))
      const slots = slotFields
        .filter((s) => !s.startsWith('['))
        .map((s) => {
          const [from, to = from] = s.split('-').map(Number)
          return [from, to]
        })
      return {
        id,
        port: Number(addr.split('@')[0].split(':').pop()),
        master: flagSet.has('master'),
        failed: flagSet.has('fail') || flagSet.has('fail?'),
        masterId: masterId === '-' ? null : masterId,
        slots: slots.sort((a, b) => a[0] - b[0]),
      }
    })
}

/** CLUSTER SLOTS → one string for comparing views: each range, its primary's port and its replicas' ports. */
function slotMapKey(slots, withReplicas) {
  return slots
    .map(([from, to, primary, ...replicas]) => {
      const reps = withReplicas ? `+${replicas.map((r) => r[1]).sort((a, b) => a - b)}` : ''
      return `${from}-${to}@${primary[1]}${reps}`
    })
    .sort()
    .join(' ')
}

const infoField = (info, name) => (new RegExp(`^${name}:(.*?)\\r?$`, 'm').exec(info) || [])[1]

/**
 * Starts a Redis Cluster of the test's own: `primaries` primaries (at least
 * 3, as redis-cli requires) and `replicas` replicas of each, and waits until
 * it is settled: every node says cluster_state:ok, every replica's link to
 * its primary is up, every node knows every other and all agree on the slot
 * map. Returns null after skipping the test when the server or redis-cli is
 * not installed (outside CI); fails in CI. `t` may be a TestContext (stopped
 * in t.after) or null (call stop() yourself). `args`: more server arguments
 * for every node, kept across restarts.
 */
async function startCluster(t, { primaries = 3, replicas = 0, args = [] } = {}) {
  const missing = [!redisInstalled() && SERVER, !cliFound() && CLI].filter(Boolean)
  if (missing.length) {
    const msg = `${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not installed (apt-get install redis-server redis-tools): the Redis Cluster tests need them`
    if (process.env.CI) throw new Error(`${msg}; in CI they must be present`)
    if (t) t.skip(msg)
    return null
  }
  if (primaries < 3) throw new Error(`startCluster: redis-cli needs at least 3 primaries, not ${primaries}`)

  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'herdcache-cluster-'))
  dirs.add(root)
  const nodes = []
  const clients = new Map()

  const dropClient = (port) => {
    const c = clients.get(port)
    if (c) c.close()
    clients.delete(port)
  }
  const nodeAt = (port) => {
    const node = nodes.find((n) => n.port === port)
    if (!node) throw new Error(`no node of this cluster on port ${port}`)
    return node
  }
  const isRunning = (n) => !!n.child && !n.child.exitInfo
  const liveNodes = () => nodes.filter(isRunning)

  /** One command on the node at `port`; its connection is cached and reopened as needed. Error replies reject. */
  async function cmd(port, ...args) {
    nodeAt(port)
    let c = clients.get(port)
    if (!c || c.closed) {
      dropClient(port)
      c = await connect(port)
      clients.set(port, c)
    }
    return c.cmd(...args)
  }

  // What the nodes say, for an error's message: each node's state and one CLUSTER NODES.
  async function describe() {
    const lines = []
    let shown = false
    for (const n of nodes) {
      if (!isRunning(n)) {
        lines.push(`  ${n.port}: not running`)
        continue
      }
      try {
        const info = await cmd(n.port, 'CLUSTER', 'INFO')
        const repl = await cmd(n.port, 'INFO', 'replication')
        lines.push(
          `  ${n.port}: cluster_state:${infoField(info, 'cluster_state')} known_nodes:${infoField(info, 'cluster_known_nodes')} role:${infoField(repl, 'role')}`,
        )
        if (!shown) {
          lines.push(
            `  CLUSTER NODES on ${n.port}:\n    ${(await cmd(n.port, 'CLUSTER', 'NODES')).trim().replace(/\n/g, '\n    ')}`,
          )
          shown = true
        }
      } catch (e) {
        lines.push(`  ${n.port}: ${e.message}`)
      }
    }
    return lines.join('\n')
  }

  // Polls `check` (→ true, or a string saying what is not there yet) until true; throws after `timeout`.
  async function waitFor(what, timeout, check) {
    const end = Date.now() + timeout
    let last
    for (;;) {
      try {
        last = await check()
      } catch (e) {
        last = e.message
      }
      if (last === true) return
      if (Date.now() > end) throw new Error(`${what}: not within ${timeout} ms (${last})\n${await describe()}`)
      await sleep(50)
    }
  }

  // True when every live node is settled: cluster_state:ok, knows every
  // node, its replication link is up (replicas), and all agree on the map;
  // with `replicasAttached`, that many nodes are replicas already (a node
  // `--cluster create` has yet to make a replica answers role:master with
  // no slots, and would pass for a primary).
  async function settled({ withReplicas = true, replicasAttached } = {}) {
    const views = new Set()
    let attached = 0
    for (const n of liveNodes()) {
      const info = await cmd(n.port, 'CLUSTER', 'INFO')
      if (infoField(info, 'cluster_state') !== 'ok')
        return `${n.port} says cluster_state:${infoField(info, 'cluster_state')}`
      if (Number(infoField(info, 'cluster_known_nodes')) !== nodes.length)
        return `${n.port} knows ${infoField(info, 'cluster_known_nodes')} of ${nodes.length} nodes`
      const repl = await cmd(n.port, 'INFO', 'replication')
      if (infoField(repl, 'role') === 'slave' && infoField(repl, 'master_link_status') !== 'up')
        return `replica ${n.port}: master_link_status:${infoField(repl, 'master_link_status')}`
      if (infoField(repl, 'role') === 'slave') attached++
      views.add(slotMapKey(await cmd(n.port, 'CLUSTER', 'SLOTS'), withReplicas))
    }
    if (views.size !== 1) return `the nodes see ${views.size} different slot maps`
    if (replicasAttached !== undefined && attached !== replicasAttached)
      return `${attached} of ${replicasAttached} replicas attached`
    return true
  }

  /** Any live node: the one to ask about the whole cluster. */
  function anyLive() {
    const n = liveNodes()[0]
    if (!n) throw new Error('no node of this cluster is running')
    return n.port
  }

  async function nodesView(port = anyLive()) {
    return parseNodes(await cmd(port, 'CLUSTER', 'NODES'))
  }

  /** The current primaries, as a live node sees them (failed ones left out): [{ port, id, slots: [[from, to], …] }]. */
  async function currentPrimaries() {
    return (await nodesView())
      .filter((n) => n.master && !n.failed)
      .map(({ port, id, slots }) => ({ port, id, slots }))
      .sort((a, b) => a.port - b.port)
  }

  /** The port of the primary serving `slot` now, as node `port` (default: any live node) sees it in CLUSTER SLOTS; null when no node serves it. */
  async function ownerOf(slot, port = anyLive()) {
    for (const [from, to, primary] of await cmd(port, 'CLUSTER', 'SLOTS')) {
      if (slot >= from && slot <= to) return primary[1]
    }
    return null
  }

  // ---- start every node, then join them ----
  const started = Date.now()
  const total = primaries * (1 + replicas)
  // allSettled: when one node cannot start, the others are still killed.
  const launched = await Promise.allSettled(
    Array.from({ length: total }, async (_, i) => {
      const dir = path.join(root, `node-${i}`)
      fs.mkdirSync(dir)
      let output = ''
      for (let attempt = 0; attempt < 5; attempt++) {
        const [port, busPort] = [await freePort(), await freePort()]
        if (port === busPort) continue
        const node = { port, busPort, dir, child: null, id: null }
        const child = await launch(node, args)
        if (!child.exitInfo) {
          node.child = child
          nodes[i] = node
          return
        }
        output = child.output()
      }
      throw new Error(`could not start ${SERVER} on free ports (5 attempts); it said:\n${output}`)
    }),
  )
  const failed = launched.find((r) => r.status === 'rejected')
  if (failed) {
    for (const n of nodes) if (n) await kill(n.child, 'SIGKILL')
    fs.rmSync(root, { recursive: true, force: true })
    dirs.delete(root)
    throw failed.reason
  }

  let stopped = false
  // Primaries killed since the last waitFailover(): { port, id, slots, replicas }.
  const killed = []
  const cluster = {
    /** Seed URLs: 'redis://127.0.0.1:P' of the primaries at start. */
    urls: [],
    /** Every node, in start order: { port, pid, id, running } (pid and running follow kills and restarts). */
    nodes: nodes.map((n) => ({
      port: n.port,
      id: null,
      get pid() {
        return n.child && !n.child.exitInfo ? n.child.pid : undefined
      },
      get running() {
        return !!n.child && !n.child.exitInfo
      },
    })),
    /** Where the nodes live: one directory each (nodes-P.conf), removed by stop(). */
    dir: root,
    /** How long startCluster took, in ms (set once it has settled). */
    startMs: 0,
    cmd,
    /** The slot of `key` (CLUSTER KEYSLOT on a live node). */
    async slotOf(key) {
      return cmd(anyLive(), 'CLUSTER', 'KEYSLOT', key)
    },
    primaries: currentPrimaries,
    ownerOf,
    /** The keys on one node (KEYS *, sorted): what a test wrote there and what moved. */
    async keysOn(port) {
      return (await cmd(port, 'KEYS', '*')).sort()
    },
    /**
     * SIGKILLs the primary at `port` (the port of a current primary) and
     * waits for its exit. waitFailover() then waits for a replica to take
     * over its slots.
     */
    async killPrimary(port) {
      const node = nodeAt(port)
      if (!isRunning(node)) throw new Error(`killPrimary: ${port} is not running`)
      const view = await nodesView(liveNodes().find((n) => n.port !== port)?.port ?? anyLive())
      const me = view.find((n) => n.port === port)
      if (!me || !me.master) throw new Error(`killPrimary: ${port} is not a primary`)
      dropClient(port)
      await kill(node.child, 'SIGKILL')
      killed.push({ port, id: me.id, slots: me.slots, replicas: view.filter((n) => n.masterId === me.id && !n.failed) })
    },
    /**
     * Resolves when every primary killed since the last call has been
     * replaced: each of its slots is served by a live node in the view of
     * every live node, and every live node says cluster_state:ok.
     * Throws at once when a killed primary had no replica, and with what
     * the nodes say after 15 s. Resolves to { ms, promoted: [port, …] }.
     */
    async waitFailover() {
      const gone = killed.splice(0)
      if (!gone.length) throw new Error('waitFailover: no primary was killed')
      for (const g of gone) {
        if (!g.replicas.length) throw new Error(`waitFailover: primary ${g.port} had no replica to take over`)
      }
      const begin = Date.now()
      const promoted = new Set()
      await waitFor(`failover of ${gone.map((g) => g.port).join(', ')}`, FAILOVER_TIMEOUT, async () => {
        promoted.clear()
        for (const n of liveNodes()) {
          const info = await cmd(n.port, 'CLUSTER', 'INFO')
          if (infoField(info, 'cluster_state') !== 'ok')
            return `${n.port} says cluster_state:${infoField(info, 'cluster_state')}`
          for (const g of gone) {
            for (const [from] of g.slots) {
              const owner = await ownerOf(from, n.port)
              if (owner === null || owner === g.port) return `${n.port} sees slot ${from} on ${owner}`
              promoted.add(owner)
            }
          }
        }
        return true
      })
      return { ms: Date.now() - begin, promoted: [...promoted].sort((a, b) => a - b) }
    },
    /**
     * Starts a killed node again on the same ports, directory and
     * nodes-P.conf (so the same id), and waits until it has rejoined: a
     * replica whose link is up, with the whole cluster settled.
     */
    async restartNode(port) {
      const node = nodeAt(port)
      if (isRunning(node)) throw new Error(`restartNode: ${port} is running`)
      const end = Date.now() + START_TIMEOUT
      for (;;) {
        const child = await launch(node, args)
        if (!child.exitInfo) {
          node.child = child
          break
        }
        if (Date.now() > end) throw new Error(`could not restart ${SERVER} on port ${port}:\n${child.output()}`)
        await sleep(50)
      }
      await waitFor(`node ${port} rejoining`, SETTLE_TIMEOUT, async () => {
        const repl = await cmd(port, 'INFO', 'replication')
        if (infoField(repl, 'role') !== 'slave') return `${port} is role:${infoField(repl, 'role')}`
        return settled({ withReplicas: false })
      })
    },
    /**
     * Moves `slot`, with its keys, to the primary at `toPort`: IMPORTING on
     * the target, MIGRATING on the source, MIGRATE of its keys 100 at a
     * time, then SETSLOT NODE on the target, the source and the other
     * primaries. Resolves when every live primary says toPort serves it
     * (replicas learn it by gossip soon after).
     */
    async migrateSlot(slot, toPort) {
      const view = await nodesView()
      const dst = view.find((n) => n.port === toPort && n.master && !n.failed)
      if (!dst) throw new Error(`migrateSlot: ${toPort} is not a live primary`)
      const srcPort = await ownerOf(slot)
      if (srcPort === null) throw new Error(`migrateSlot: no node serves slot ${slot}`)
      if (srcPort !== toPort) {
        const src = view.find((n) => n.port === srcPort)
        await cmd(toPort, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', src.id)
        await cmd(srcPort, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', dst.id)
        for (;;) {
          const keys = await cmd(srcPort, 'CLUSTER', 'GETKEYSINSLOT', slot, 100)
          if (!keys.length) break
          await cmd(srcPort, 'MIGRATE', '127.0.0.1', toPort, '', 0, 5000, 'KEYS', ...keys)
        }
        await cmd(toPort, 'CLUSTER', 'SETSLOT', slot, 'NODE', dst.id)
        await cmd(srcPort, 'CLUSTER', 'SETSLOT', slot, 'NODE', dst.id)
        for (const p of view) {
          if (p.master && !p.failed && p.port !== toPort && p.port !== srcPort) {
            await cmd(p.port, 'CLUSTER', 'SETSLOT', slot, 'NODE', dst.id)
          }
        }
      }
      // Every live node, replicas too: a replica promoted before it learned
      // that its primary took the slot would not serve it.
      const live = view.filter((n) => !n.failed).map((n) => n.port)
      await waitFor(`slot ${slot} moving to ${toPort}`, SETTLE_TIMEOUT, async () => {
        for (const p of live) {
          const owner = await ownerOf(slot, p)
          if (owner !== toPort) return `${p} sees slot ${slot} on ${owner}`
        }
        return true
      })
    },
    /** Stops every node (SIGTERM, SIGKILL after a bound) and removes their directories. */
    async stop() {
      if (stopped) return
      stopped = true
      for (const port of [...clients.keys()]) dropClient(port)
      await Promise.all(nodes.map((n) => kill(n.child)))
      fs.rmSync(root, { recursive: true, force: true })
      dirs.delete(root)
    },
  }
  if (t) t.after(() => cluster.stop())

  try {
    await runCli(
      [
        '--cluster',
        'create',
        ...nodes.map((n) => `127.0.0.1:${n.port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      CREATE_TIMEOUT,
    )
    await waitFor('the cluster settling', SETTLE_TIMEOUT, () => settled({ replicasAttached: primaries * replicas }))
    for (const [i, n] of nodes.entries()) {
      n.id = await cmd(n.port, 'CLUSTER', 'MYID')
      cluster.nodes[i].id = n.id
    }
    // Masters without slots are replicas not yet attached as such (a node's
    // view can lag the settling just seen): the seeds are the slots' primaries.
    const first = (await currentPrimaries()).filter((p) => p.slots.length > 0)
    const covered = first.reduce((sum, p) => sum + p.slots.reduce((s, [a, b]) => s + b - a + 1, 0), 0)
    if (covered !== SLOTS) throw new Error(`the new cluster covers ${covered} of ${SLOTS} slots`)
    cluster.urls = first.map((p) => `redis://127.0.0.1:${p.port}`)
    cluster.startMs = Date.now() - started
  } catch (e) {
    const logs = nodes.map((n) => `--- ${SERVER} on ${n.port}:\n${n.child.output().slice(-1500)}`).join('\n')
    await cluster.stop()
    e.message += `\n${logs}`
    throw e
  }
  return cluster
}

module.exports = { startCluster, parseNodes, CLI }
