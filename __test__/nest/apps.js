'use strict'
// Test apps for the herdcache/nest suites (not a test file itself): Nest
// controllers and modules written in plain JS with Nest's decorator
// functions applied by hand, so the suite needs no TypeScript build.

require('reflect-metadata')
const { Module } = require('@nestjs/common')
const { NestFactory } = require('@nestjs/core')
const { FastifyAdapter } = require('@nestjs/platform-fastify')

const PLATFORMS = ['express', 'fastify']

/** Applies method decorators to Cls.prototype[name], bottom-up like `@A @B m() {}`. */
function decorate(Cls, name, ...decorators) {
  const descriptor = Object.getOwnPropertyDescriptor(Cls.prototype, name)
  const decorated = Reflect.decorate(decorators, Cls.prototype, name, descriptor)
  Object.defineProperty(Cls.prototype, name, decorated ?? descriptor)
}

/** Constructor injection without TypeScript: the types Nest reads from design:paramtypes. */
function inject(Cls, ...types) {
  Reflect.defineMetadata('design:paramtypes', types, Cls)
}

/**
 * A listening Nest app on 127.0.0.1 (port 0). `t.after` closes it.
 * @returns {Promise<{ app: import('@nestjs/common').INestApplication, url: string, get: (path: string, init?: RequestInit) => Promise<{ status: number, headers: Headers, body: any }> }>}
 */
async function startApp(t, { platform = 'express', imports = [], controllers = [], providers = [], configure } = {}) {
  class TestModule {}
  Module({ imports, controllers, providers })(TestModule)
  const app =
    platform === 'fastify'
      ? await NestFactory.create(TestModule, new FastifyAdapter(), { logger: false })
      : await NestFactory.create(TestModule, { logger: false })
  if (t) t.after(() => app.close())
  if (configure) configure(app)
  await app.listen(0, '127.0.0.1')
  const url = await app.getUrl()
  const get = async (path, init) => {
    const res = await fetch(url + path, init)
    const text = await res.text()
    let body = text
    try {
      body = JSON.parse(text)
    } catch {}
    return { status: res.status, headers: res.headers, body }
  }
  return { app, url, get }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Waits until `predicate()` is true; rejects after `timeout` ms. */
async function until(predicate, timeout = 5000, what = 'condition') {
  const end = Date.now() + timeout
  while (!predicate()) {
    if (Date.now() > end) throw new Error(`timed out after ${timeout} ms waiting for ${what}`)
    await sleep(5)
  }
}

/** Counts of each X-Cache value in a list of responses. */
function tally(responses) {
  const counts = {}
  for (const r of responses) {
    const v = r.headers.get('x-cache') ?? 'none'
    counts[v] = (counts[v] ?? 0) + 1
  }
  return counts
}

module.exports = { PLATFORMS, decorate, inject, startApp, sleep, until, tally }
