'use strict'
// A TCP proxy between a client (the cache) and a server (a test's own
// redis-server), on a free loopback port, to make the network slow or broken
// on demand. Not a test file.
//
//   const proxy = await startProxy(t, redis.port)   // t: TestContext (closed in t.after) or null
//   proxy.url                  // 'redis://127.0.0.1:PORT'
//   proxy.delay(400)           // every chunk, each direction, arrives 400 ms late (order kept)
//   proxy.delay(400, { match: /NX/ }) // only client→server chunks matching; later ones wait behind them
//   proxy.blackhole()          // accepts and reads, forwards nothing, holds every connection open
//   proxy.cut()                // destroys every current connection (new ones are accepted)
//   proxy.cut({ refuse: true }) // ...and resets new ones at once, until heal()
//   proxy.heal()               // back to passing bytes at once; what a blackhole held is delivered
//   proxy.dropIdle(1500)       // closes a connection once no byte crossed it for 1500 ms (a NAT, a cloud LB)
//   proxy.stats                // { accepted, open, refused, cut, bytesUp, bytesDown }
//   await proxy.close()
//
// A blackhole keeps what it read and delivers it on heal(), as TCP would once
// a partition ends: connections stay open, bytes are late, none are lost.

const net = require('node:net')

const MODES = new Set(['pass', 'delay', 'blackhole', 'refuse'])

/**
 * Starts a proxy to 127.0.0.1:`targetPort`.
 * @param {import('node:test').TestContext | null} t closes the proxy when the test ends
 * @param {number} targetPort
 */
async function startProxy(t, targetPort, targetHost = '127.0.0.1') {
  let mode = 'pass'
  let delayMs = 0
  let delayMatch = null
  const links = new Set()
  const stats = { accepted: 0, open: 0, refused: 0, cut: 0, idleDropped: 0, bytesUp: 0, bytesDown: 0 }
  let idleTimer = null

  // One direction of one link: chunks queued with the time they may leave.
  function pipe(link, to, counter, upstream) {
    const queue = []
    let timer = null
    const pump = () => {
      timer = null
      if (link.dead) return
      if (mode === 'blackhole' || !to.ready) return // held until heal() / the upstream connects
      const now = Date.now()
      while (queue.length && queue[0].at <= now) {
        const { data } = queue.shift()
        stats[counter] += data.length
        to.socket.write(data)
      }
      if (queue.length) timer = setTimeout(pump, queue[0].at - now)
    }
    return {
      push(data) {
        link.lastActive = Date.now()
        const delayed = mode === 'delay' && (!delayMatch || (upstream && delayMatch.test(data.toString('latin1'))))
        queue.push({ data, at: Date.now() + (delayed ? delayMs : 0) })
        if (!timer) pump()
      },
      kick() {
        if (timer) clearTimeout(timer)
        pump()
      },
      stop() {
        if (timer) clearTimeout(timer)
        timer = null
        queue.length = 0
      },
    }
  }

  function openUpstream(link) {
    const socket = net.connect({ port: targetPort, host: targetHost })
    socket.setNoDelay(true)
    link.server = { socket, ready: false }
    socket.on('connect', () => {
      link.server.ready = true
      link.up.kick()
    })
    socket.on('data', (d) => link.down.push(d))
    socket.on('error', () => destroyLink(link))
    socket.on('close', () => destroyLink(link))
  }

  function destroyLink(link) {
    if (link.dead) return
    link.dead = true
    links.delete(link)
    stats.open = links.size
    link.up.stop()
    link.down.stop()
    link.client.socket.destroy()
    if (link.server) link.server.socket.destroy()
  }

  const server = net.createServer((socket) => {
    if (mode === 'refuse') {
      stats.refused++
      socket.on('error', () => {})
      socket.resetAndDestroy()
      return
    }
    stats.accepted++
    socket.setNoDelay(true)
    const link = { dead: false, client: { socket, ready: true }, server: null, lastActive: Date.now() }
    link.up = pipe(
      link,
      {
        get socket() {
          return link.server.socket
        },
        get ready() {
          return !!link.server && link.server.ready
        },
      },
      'bytesUp',
      true,
    )
    link.down = pipe(link, link.client, 'bytesDown', false)
    links.add(link)
    stats.open = links.size
    socket.on('data', (d) => link.up.push(d))
    socket.on('error', () => destroyLink(link))
    socket.on('close', () => destroyLink(link))
    // In a blackhole the connection is accepted but leads nowhere until heal().
    if (mode !== 'blackhole') openUpstream(link)
  })
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const { port } = server.address()

  const setMode = (next) => {
    if (!MODES.has(next)) throw new Error(`unknown proxy mode ${next}`)
    mode = next
  }

  const proxy = {
    port,
    url: `redis://127.0.0.1:${port}`,
    stats,
    get mode() {
      return mode
    },
    /** Passes bytes at once again; delivers what a blackhole held. */
    heal() {
      setMode('pass')
      delayMs = 0
      delayMatch = null
      for (const link of [...links]) {
        if (!link.server) openUpstream(link)
        link.up.kick()
        link.down.kick()
      }
    },
    /**
     * Every chunk, each direction, is forwarded `ms` after it was read; with
     * `match`, only client→server chunks whose text matches (those after one
     * wait behind it, as on one TCP stream).
     */
    delay(ms, { match = null } = {}) {
      setMode('delay')
      delayMs = ms
      delayMatch = match
    },
    /** Reads and holds everything, forwards nothing; connections stay open. */
    blackhole() {
      setMode('blackhole')
    },
    /** Destroys every current connection; with `refuse`, resets new ones until heal(). */
    cut({ refuse = false } = {}) {
      if (refuse) setMode('refuse')
      for (const link of [...links]) {
        stats.cut++
        destroyLink(link)
      }
    },
    /** From now on, a connection no byte crossed for `ms` is closed (both ends), as a NAT or a load balancer does. */
    dropIdle(ms) {
      if (idleTimer) clearInterval(idleTimer)
      idleTimer = setInterval(
        () => {
          const now = Date.now()
          for (const link of [...links]) {
            if (now - link.lastActive >= ms) {
              stats.idleDropped++
              destroyLink(link)
            }
          }
        },
        Math.max(10, ms / 10),
      )
      idleTimer.unref()
    },
    /** Closes every connection and the listener. */
    close() {
      if (idleTimer) clearInterval(idleTimer)
      for (const link of [...links]) destroyLink(link)
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
  if (t) t.after(() => proxy.close())
  return proxy
}

/**
 * A TCP server on a free loopback port that accepts every connection and
 * never answers (a hung Redis, a proxy with no backend).
 * @param {import('node:test').TestContext | null} t closes it when the test ends
 */
async function startSilentServer(t) {
  const sockets = new Set()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => {})
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const silent = {
    port: server.address().port,
    close: () => {
      for (const s of sockets) s.destroy()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
  if (t) t.after(() => silent.close())
  return silent
}

module.exports = { startProxy, startSilentServer }
