// Type test of herdcache/nest: compiled by load.test.js with `tsc --noEmit --strict`.
import { Controller, Get, Injectable, Inject, Module } from '@nestjs/common'
import { APP_INTERCEPTOR } from '@nestjs/core'
import { ConfigModule, ConfigService } from '@nestjs/config'
import {
  Cache,
  Cached,
  CachedMethod,
  HERDCACHE,
  HerdcacheInterceptor,
  HerdcacheModule,
  InjectCache,
  evictCached,
  evictRoute,
  getCacheToken,
} from 'herdcache/nest'

@Injectable()
class Users {
  constructor(
    readonly cache: Cache,
    @Inject(HERDCACHE) readonly same: Cache,
    @InjectCache('reports') readonly reports: Cache,
  ) {}

  @CachedMethod({ ttl: 60_000, key: (id: number) => ['user', id] })
  async find(id: number): Promise<{ id: number }> {
    return { id }
  }

  @CachedMethod({ tags: (id: number) => [`user:${id}`] })
  async posts(id: number): Promise<number[]> {
    return [id]
  }

  @CachedMethod({ tags: ['settings'] })
  async settings(): Promise<{ dark: boolean }> {
    return { dark: true }
  }

  async rename(id: number): Promise<void> {
    await evictCached(this, 'find', id)
    await this.cache.deleteByTag(`user:${id}`)
  }
}

@Controller('users')
class UsersController {
  @Get(':id')
  @Cached({ ttl: 30_000, hardTtl: 300_000, scope: 'public', vary: ['accept-language'], query: ['page'] })
  get(): { ok: true } {
    return { ok: true }
  }

  @Get('me')
  @Cached({ key: (ctx) => `me:${ctx.getHandler().name}`, principal: (req) => req.user?.id })
  me(): string {
    return 'me'
  }

  @Get('maybe')
  @Cached({ key: (ctx) => (ctx.switchToHttp().getRequest().query.fresh ? undefined : 'maybe'), stale: false })
  maybe(): string {
    return 'maybe'
  }
}

// @ts-expect-error scope is 'auto' | 'user' | 'public'
Cached({ scope: 'everyone' })
// @ts-expect-error ttl is a number of ms
Cached({ ttl: '1m' })

@Module({
  imports: [
    HerdcacheModule.forRoot({
      ttl: 60_000,
      redis: process.env.REDIS_URL, // string | undefined: accepted under exactOptionalPropertyTypes
      http: { headers: 'both', cacheControl: true, principalSecret: 'a secret' },
      isGlobal: true,
    }),
    HerdcacheModule.forRootAsync({
      name: 'reports',
      imports: [ConfigModule],
      inject: [ConfigService],
      useFactory: (config: ConfigService) => ({ redis: config.getOrThrow<string>('REDIS_URL'), prefix: 'r:' }),
    }),
  ],
  controllers: [UsersController],
  providers: [Users, { provide: APP_INTERCEPTOR, useClass: HerdcacheInterceptor }],
})
class AppModule {}

const token: string = getCacheToken('reports')
void evictRoute(UsersController, 'get', { params: { id: 1 }, query: { page: '2' } })
void AppModule
void token
