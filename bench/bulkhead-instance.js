'use strict'

// One instance of bench/bulkhead.js's fleet storm (not run by hand): forked by the bench, it makes one Cache per
// storm it is sent and reads every key with `callers` callers at once, its loader one query to the bench's
// "database" (a TCP server in the parent that counts the queries running at once and answers each after its
// fixed time). Messages: { op: 'prepare', options } (a Cache, ready) → { ready }; { op: 'go', keys, callers, first,
// share, laterMs } →
// { ms, errors, loads, stats } (the Cache closed); { op: 'exit' }.

const net = require('node:net')
const path = require('node:path')
const { Cache } = require(path.join(__dirname, '..'))
const { stormCalls } = require('./common')

const [, , dbPort] = process.argv
const socket = net.connect(Number(dbPort), '127.0.0.1')
socket.setNoDelay(true)
const pending = new Map()
let nextId = 1
let buffered = ''
socket.on('data', (chunk) => {
  buffered += chunk
  let nl
  while ((nl = buffered.indexOf('\n')) >= 0) {
    const id = Number(buffered.slice(0, nl))
    buffered = buffered.slice(nl + 1)
    pending.get(id)?.()
    pending.delete(id)
  }
})

/** One database query: answered after the server's fixed time. */
function query() {
  const id = nextId++
  return new Promise((resolve) => {
    pending.set(id, resolve)
    socket.write(`${id}\n`)
  })
}

let cache

async function prepare({ options }) {
  cache = new Cache(options)
  await cache.ready()
  return { ready: true }
}

/**
 * Every key, `callers` calls each: first the `share` keys from key `first` on (the requests a balancer sent
 * here first), then, after `laterMs`, the others (the same keys' requests arriving at every instance).
 */
async function storm({ keys, callers, first, share, laterMs }) {
  let loads = 0
  const counts = { errors: 0 }
  const started = performance.now()
  const calls = []
  const call = (k) => {
    const load = async () => {
      loads++
      await query()
      return { k }
    }
    stormCalls(cache, k, callers, load, calls, counts)
  }
  for (let n = 0; n < share; n++) call((first + n) % keys)
  await new Promise((resolve) => setTimeout(resolve, laterMs))
  for (let n = share; n < keys; n++) call((first + n) % keys)
  await Promise.all(calls)
  const ms = performance.now() - started
  const stats = cache.stats()
  await cache.close()
  return { ms, errors: counts.errors, loads, stats }
}

process.on('message', (message) => {
  if (message.op === 'exit') {
    socket.destroy()
    process.disconnect()
    return
  }
  const run = message.op === 'prepare' ? prepare : storm
  run(message).then(
    (result) => process.send(result),
    (error) => process.send({ failed: String(error?.stack ?? error) }),
  )
})
process.send({ ready: true })
