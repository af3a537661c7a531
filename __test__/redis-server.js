'use strict'
// A redis-server of the test's own, and a tiny RESP client over node:net
// (not a test file itself). Never touches a server it did not start.
//
//   const redis = await startRedis(t)      // null (and t skipped) when redis-server is missing outside CI
//   if (!redis) return
//   redis.url                               // 'redis://127.0.0.1:PORT'
//   await redis.cmd('GET', 'k')             // one command on a lazily (re)opened connection
//   await redis.stop(); await redis.restart()
//   redis.pause(); redis.resume()           // SIGSTOP / SIGCONT: a Redis that accepts but never answers
//
// The server is stopped when the test ends (t.after) and, failing that, when
// this process exits. HERDCACHE_TEST_SERVER names the server binary
// (default redis-server; `valkey-server` for the Valkey pass of npm test).

const { spawn, spawnSync } = require('node:child_process')
const net = require('node:net')

/** The server binary the tests start: redis-server, or (the Valkey pass) valkey-server. */
const SERVER = process.env.HERDCACHE_TEST_SERVER || 'redis-server'
const START_TIMEOUT = 5000
const STOP_TIMEOUT = 3000
const COMMAND_TIMEOUT = 3000

// ---- RESP client ------------------------------------------------------------

class RedisReplyError extends Error {}

// Parses one reply from buf at pos: { value, pos } or null when incomplete.
function parseReply(buf, pos) {
  if (pos >= buf.length) return null
  const eol = buf.indexOf('\r\n', pos)
  if (eol < 0) return null
  const type = String.fromCharCode(buf[pos])
  const line = buf.toString('utf8', pos + 1, eol)
  const next = eol + 2
  switch (type) {
    case '+':
      return { value: line, pos: next }
    case '-':
      return { value: new RedisReplyError(line), pos: next }
    case ':':
      return { value: Number(line), pos: next }
    case '$': {
      const len = Number(line)
      if (len < 0) return { value: null, pos: next }
      if (buf.length < next + len + 2) return null
      return { value: buf.toString('utf8', next, next + len), pos: next + len + 2 }
    }
    case '*': {
      const n = Number(line)
      if (n < 0) return { value: null, pos: next }
      const items = []
      let p = next
      for (let i = 0; i < n; i++) {
        const r = parseReply(buf, p)
        if (!r) return null
        items.push(r.value)
        p = r.pos
      }
      return { value: items, pos: p }
    }
    default:
      throw new Error(`RESP: unexpected reply type ${JSON.stringify(type)}`)
  }
}

function encodeCommand(args) {
  const parts = [Buffer.from(`*${args.length}\r\n`)]
  for (const a of args) {
    const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a))
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'))
  }
  return Buffer.concat(parts)
}

// connect(port) → { cmd(...args) → Promise<reply>, close() }. Error replies reject.
function connect(port, host = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host })
    const pending = []
    let buf = Buffer.alloc(0)
    let dead = null
    const fail = (err) => {
      if (!dead) dead = err
      for (const p of pending.splice(0)) p.reject(err)
    }
    socket.setNoDelay(true)
    socket.on('data', (d) => {
      buf = buf.length ? Buffer.concat([buf, d]) : d
      let r
      try {
        while (pending.length && (r = parseReply(buf, 0))) {
          buf = buf.subarray(r.pos)
          const p = pending.shift()
          clearTimeout(p.timer)
          if (r.value instanceof RedisReplyError) p.reject(r.value)
          else p.resolve(r.value)
        }
      } catch (e) {
        socket.destroy(e)
      }
    })
    socket.on('error', (e) => {
      fail(e)
      reject(e)
    })
    socket.on('close', () => fail(new Error('connection closed')))
    socket.on('connect', () => {
      resolve({
        cmd(...args) {
          if (dead) return Promise.reject(dead)
          return new Promise((res, rej) => {
            const p = { resolve: res, reject: rej }
            p.timer = setTimeout(() => {
              const err = new Error(`redis ${args[0]} got no reply within ${COMMAND_TIMEOUT} ms`)
              socket.destroy(err)
              fail(err)
            }, COMMAND_TIMEOUT)
            pending.push(p)
            socket.write(encodeCommand(args))
          })
        },
        close() {
          socket.destroy()
        },
        get closed() {
          return dead !== null
        },
      })
    })
  })
}

// ---- the server -------------------------------------------------------------

const live = new Set()
process.on('exit', () => {
  for (const child of live) {
    try {
      child.kill('SIGCONT')
      child.kill('SIGKILL')
    } catch {}
  }
})

let installed
function redisInstalled() {
  if (installed === undefined) {
    const r = spawnSync(SERVER, ['--version'], { stdio: 'ignore' })
    installed = !r.error && r.status === 0
  }
  return installed
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.unref()
    srv.on('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

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

function spawnServer(port, args = []) {
  const child = spawn(
    SERVER,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args],
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

// Spawns on `port` and waits for PONG; returns the child, or null if it exited (port taken).
async function launch(port, args) {
  const child = spawnServer(port, args)
  const end = Date.now() + START_TIMEOUT
  for (;;) {
    if (child.exitInfo) return null
    if (await answers(port, child.pid)) return child
    if (Date.now() > end) {
      await kill(child)
      throw new Error(`redis-server did not answer on port ${port} within ${START_TIMEOUT} ms:\n${child.output()}`)
    }
    await sleep(15)
  }
}

async function kill(child) {
  if (!child || child.exitInfo) return
  try {
    child.kill('SIGCONT')
    child.kill('SIGTERM')
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

/**
 * Starts a redis-server of the test's own. Returns null after skipping the
 * test when redis-server is not installed (outside CI); fails in CI.
 * `t` may be a TestContext (stopped in t.after) or null (call stop() yourself).
 * `args`: more redis-server arguments (e.g. ['--timeout', '1']), kept across restarts.
 */
async function startRedis(t, { args = [] } = {}) {
  if (!redisInstalled()) {
    const msg = `${SERVER} is not installed (apt-get install redis-server): the Redis tests need it`
    if (process.env.CI) throw new Error(`${msg}; in CI it must be present`)
    if (t) t.skip(msg)
    return null
  }
  let child = null
  let port
  for (let attempt = 0; attempt < 5 && !child; attempt++) {
    port = await freePort()
    child = await launch(port, args)
  }
  if (!child) throw new Error('could not start redis-server on a free port (5 attempts)')

  let client = null
  const dropClient = () => {
    if (client) client.close()
    client = null
  }
  const server = {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return child ? child.pid : undefined
    },
    get running() {
      return !!child && !child.exitInfo
    },
    /** One command; the connection is (re)opened as needed. */
    async cmd(...args) {
      if (!client || client.closed) {
        dropClient()
        client = await connect(port)
      }
      return client.cmd(...args)
    },
    /** A connection of its own (for commands that must not share one). */
    connect: () => connect(port),
    /** SIGTERM, then waits for the exit (SIGKILL after a bound). */
    async stop() {
      dropClient()
      const c = child
      child = null
      await kill(c)
    },
    /** Starts it again on the same port (empty: no persistence). */
    async restart() {
      await server.stop()
      const end = Date.now() + START_TIMEOUT
      for (;;) {
        const c = await launch(port, args)
        if (c) {
          child = c
          return
        }
        if (Date.now() > end) throw new Error(`could not restart redis-server on port ${port}`)
        await sleep(50)
      }
    },
    /** SIGSTOP: connections are accepted by the kernel but nothing answers. */
    pause() {
      if (child) child.kill('SIGSTOP')
    },
    resume() {
      if (child) child.kill('SIGCONT')
    },
  }
  if (t) t.after(() => server.stop())
  return server
}

module.exports = { startRedis, connect, freePort, redisInstalled, RedisReplyError, SERVER }
