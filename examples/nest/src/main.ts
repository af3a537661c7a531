import 'reflect-metadata'
import { NestFactory } from '@nestjs/core'
import { AppModule } from './app.module'

async function main(): Promise<void> {
  const app = await NestFactory.create(AppModule)
  app.enableShutdownHooks() // SIGTERM closes the cache (and its Redis connections)
  await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1')
  console.log(`listening on ${await app.getUrl()}`)
}

void main()
