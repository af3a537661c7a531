'use strict'
// The cluster harness itself (__test__/redis-cluster.js): a Redis Cluster of
// the test's own, its slot map, moving a slot, a failover, and stopping.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { startCluster } = require('../redis-cluster')
const { connect } = require('../redis-server')

const T = { timeout: 30000 }
const SLOTS = 16384
const portOf = (url) => Number(new URL(url).port)

// Every slot in exactly one range of exactly one primary.
function assertCovered(primaries) {
  const seen = new Uint8Array(SLOTS)
  for (const p of primaries) {
    for (const [from, to] of p.slots) {
      for (let s = from; s <= to; s++) seen[s]++
    }
  }
  const wrong = seen.findIndex((n) => n !== 1)
  assert.equal(wrong, -1, `slot ${wrong} is served ${seen[wrong]} times`)
}

const alive = (pid) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return e.code !== 'ESRCH'
  }
}

test('3 primaries start, every slot is covered, the seed URLs are the primaries', T, async (t) => {
  const begin = Date.now()
  const cluster = await startCluster(t)
  if (!cluster) return
  t.diagnostic(`cluster of 3 started in ${Date.now() - begin} ms`)
  assert.equal(cluster.urls.length, 3)
  for (const url of cluster.urls) assert.match(url, /^redis:\/\/127\.0\.0\.1:\d+$/)
  assert.equal(cluster.nodes.length, 3)
  const primaries = await cluster.primaries()
  assert.deepEqual(primaries.map((p) => p.port).sort(), cluster.urls.map(portOf).sort())
  assertCovered(primaries)
  for (const node of cluster.nodes) {
    assert.equal(node.running, true)
    assert.ok(node.pid > 0)
    assert.equal(node.id, await cluster.cmd(node.port, 'CLUSTER', 'MYID'))
    assert.match(await cluster.cmd(node.port, 'CLUSTER', 'INFO'), /cluster_state:ok/)
  }
  // ownerOf agrees with the ranges primaries() reports
  for (const p of primaries) {
    for (const [from, to] of p.slots) {
      assert.equal(await cluster.ownerOf(from), p.port)
      assert.equal(await cluster.ownerOf(to), p.port)
    }
  }
})

test('a key written on the node owning its slot is read there; other primaries answer MOVED', T, async (t) => {
  const cluster = await startCluster(t)
  if (!cluster) return
  const ports = cluster.urls.map(portOf)
  const owners = new Map()
  for (let i = 0; i < 30; i++) {
    const key = `key:${i}`
    const slot = await cluster.slotOf(key)
    assert.ok(Number.isInteger(slot) && slot >= 0 && slot < SLOTS)
    const owner = await cluster.ownerOf(slot)
    assert.ok(ports.includes(owner))
    assert.equal(await cluster.cmd(owner, 'SET', key, `v${i}`), 'OK')
    owners.set(key, owner)
  }
  assert.ok(new Set(owners.values()).size > 1, '30 keys land on more than one primary')
  for (const [key, owner] of owners) {
    assert.equal(await cluster.cmd(owner, 'GET', key), `v${key.split(':')[1]}`)
    const other = ports.find((p) => p !== owner)
    await assert.rejects(cluster.cmd(other, 'GET', key), new RegExp(`^Error: MOVED \\d+ 127\\.0\\.0\\.1:${owner}$`))
  }
  for (const port of ports) {
    const mine = [...owners].filter(([, o]) => o === port).map(([k]) => k)
    assert.deepEqual(await cluster.keysOn(port), mine.sort())
  }
})

test('migrateSlot moves a slot with its keys: read on the new owner, MOVED on the old', T, async (t) => {
  const cluster = await startCluster(t)
  if (!cluster) return
  const keys = ['{user:7}:a', '{user:7}:b', '{user:7}:c']
  const slot = await cluster.slotOf(keys[0])
  for (const k of keys) assert.equal(await cluster.slotOf(k), slot)
  const from = await cluster.ownerOf(slot)
  const to = cluster.urls.map(portOf).find((p) => p !== from)
  for (const k of keys) await cluster.cmd(from, 'SET', k, k, 'PX', 60000)
  const staysOn = await cluster.ownerOf(await cluster.slotOf('stays')) // a key of another slot
  await cluster.cmd(staysOn, 'SET', 'stays', 'here')

  const begin = Date.now()
  await cluster.migrateSlot(slot, to)
  t.diagnostic(`slot ${slot} (3 keys) moved ${from} → ${to} in ${Date.now() - begin} ms`)

  assert.equal(await cluster.ownerOf(slot), to)
  for (const k of keys) {
    assert.equal(await cluster.cmd(to, 'GET', k), k)
    const pttl = await cluster.cmd(to, 'PTTL', k)
    assert.ok(pttl > 50000, `the TTL moves with the key (PTTL ${pttl})`)
    await assert.rejects(cluster.cmd(from, 'GET', k), new RegExp(`MOVED ${slot} 127\\.0\\.0\\.1:${to}$`))
  }
  assert.deepEqual(await cluster.cmd(from, 'CLUSTER', 'COUNTKEYSINSLOT', slot), 0)
  assert.equal(await cluster.cmd(staysOn, 'GET', 'stays'), 'here', 'keys of other slots stay')
  // every primary's map, and the slot ranges: the old owner lost exactly that slot
  const primaries = await cluster.primaries()
  assertCovered(primaries)
  for (const p of primaries) assert.equal(await cluster.ownerOf(slot, p.port), to, `as ${p.port} sees it`)
  const old = primaries.find((p) => p.port === from)
  assert.ok(!old.slots.some(([a, b]) => slot >= a && slot <= b))
  // moving it to where it is already is a no-op
  await cluster.migrateSlot(slot, to)
  assert.equal(await cluster.ownerOf(slot), to)
})

test('with a replica each, killPrimary + waitFailover: the replica serves the slots (and the data)', T, async (t) => {
  const begin = Date.now()
  const cluster = await startCluster(t, { primaries: 3, replicas: 1 })
  if (!cluster) return
  t.diagnostic(`cluster of 3 + 3 replicas started in ${Date.now() - begin} ms`)
  assert.equal(cluster.nodes.length, 6)
  assert.equal(cluster.urls.length, 3)
  const slot = await cluster.slotOf('survivor')
  const victim = await cluster.ownerOf(slot)
  await cluster.cmd(victim, 'SET', 'survivor', 'yes')
  assert.equal(await cluster.cmd(victim, 'WAIT', 1, 2000), 1, 'the replica has the key')
  const before = await cluster.primaries()
  const replicaPorts = cluster.nodes.map((n) => n.port).filter((p) => !before.some((b) => b.port === p))
  const victimSlots = before.find((p) => p.port === victim).slots

  await cluster.killPrimary(victim)
  const node = cluster.nodes.find((n) => n.port === victim)
  assert.equal(node.running, false)
  const { ms, promoted } = await cluster.waitFailover()
  t.diagnostic(`failover after SIGKILL: ${ms} ms (promoted ${promoted})`)
  assert.ok(ms < 15000)
  assert.equal(promoted.length, 1)
  assert.ok(replicaPorts.includes(promoted[0]), 'a replica took over')
  assert.equal(await cluster.ownerOf(slot), promoted[0])
  const after = await cluster.primaries()
  assert.deepEqual(after.find((p) => p.port === promoted[0]).slots, victimSlots)
  assert.ok(!after.some((p) => p.port === victim))
  assertCovered(after)
  assert.equal(await cluster.cmd(promoted[0], 'GET', 'survivor'), 'yes')
  await assert.rejects(cluster.cmd(victim, 'PING'), (e) => e.code === 'ECONNREFUSED')

  // the killed primary comes back as a replica of the one that replaced it
  const restartBegin = Date.now()
  await cluster.restartNode(victim)
  t.diagnostic(`restarted node rejoined in ${Date.now() - restartBegin} ms`)
  assert.equal(node.running, true)
  const repl = await cluster.cmd(victim, 'INFO', 'replication')
  assert.match(repl, /^role:slave\r?$/m)
  assert.match(repl, new RegExp(`^master_port:${promoted[0]}\\r?$`, 'm'))
  assert.match(repl, /^master_link_status:up\r?$/m)
  assert.equal(await cluster.ownerOf(slot), promoted[0])
})

test('waitFailover refuses a primary that had no replica', T, async (t) => {
  const cluster = await startCluster(t)
  if (!cluster) return
  const victim = portOf(cluster.urls[0])
  await cluster.killPrimary(victim)
  await assert.rejects(cluster.waitFailover(), /had no replica/)
  await assert.rejects(cluster.killPrimary(victim), /is not running/)
  await assert.rejects(cluster.killPrimary(1), /no node of this cluster on port 1/)
})

test('stop() leaves no process, no port and no directory behind', T, async (t) => {
  const cluster = await startCluster(t)
  if (!cluster) return
  const pids = cluster.nodes.map((n) => n.pid)
  assert.ok(pids.every(alive))
  assert.ok(fs.existsSync(cluster.dir))
  const begin = Date.now()
  await cluster.stop()
  t.diagnostic(`stopped in ${Date.now() - begin} ms`)
  for (const pid of pids) assert.equal(alive(pid), false, `node pid ${pid} is gone`)
  for (const node of cluster.nodes) {
    assert.equal(node.running, false)
    assert.equal(node.pid, undefined)
    await assert.rejects(connect(node.port), (e) => e.code === 'ECONNREFUSED')
  }
  assert.equal(fs.existsSync(cluster.dir), false)
  await cluster.stop() // twice is fine
})
