'use strict'

// One Nest app for bench/nest.js (not run by itself): `node bench/nest-server.js
// <library> <ttl> <queryMs> [redisUrl] [prefix]`. Prints {"url"} once listening and
// closes on "close" from stdin.

const { startFeedApp } = require('../demo/nest-apps')

async function main() {
  const [library, ttl, queryMs, redisUrl, prefix] = process.argv.slice(2)
  const app = await startFeedApp({
    library,
    ttl: Number(ttl),
    queryMs: Number(queryMs),
    redisUrl: redisUrl || undefined,
    prefix,
  })
  process.stdout.write(JSON.stringify({ url: app.url }) + '\n')
  process.stdin.setEncoding('utf8')
  process.stdin.on('data', async (d) => {
    if (d.includes('close')) {
      process.stdin.destroy()
      await app.close()
      process.exit(0)
    }
  })
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
