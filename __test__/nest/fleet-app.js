'use strict'
// One fleet member for redis.test.js (not a test file itself): a Nest app
// with a herdcache on REDIS_URL. Prints {"url"} once listening; "close" on
// stdin closes the app (the process must then exit by itself); SIGTERM goes
// through enableShutdownHooks.

const { Controller, Get } = require('@nestjs/common')
const { HerdcacheModule, Cached } = require('herdcache/nest')
const { decorate, startApp, sleep } = require('./apps')

async function main() {
  const runs = { n: 0 }
  class FleetController {
    async slow() {
      runs.n++
      await sleep(Number(process.env.HANDLER_MS ?? 300))
      return { value: 'computed once', pid: process.pid }
    }
    runs() {
      return runs
    }
  }
  Controller()(FleetController)
  decorate(FleetController, 'slow', Get('slow'), Cached())
  decorate(FleetController, 'runs', Get('runs'))
  const { app, url } = await startApp(null, {
    platform: process.env.PLATFORM,
    imports: [HerdcacheModule.forRoot({ redis: process.env.REDIS_URL, prefix: process.env.PREFIX })],
    controllers: [FleetController],
    configure: (a) => a.enableShutdownHooks(),
  })
  process.stdout.write(`${JSON.stringify({ url })}\n`)
  process.stdin.setEncoding('utf8')
  process.stdin.on('data', async (line) => {
    if (line.trim() === 'close') {
      process.stdin.destroy()
      await app.close()
      process.stdout.write('closed\n')
    }
  })
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
