import { Module } from '@nestjs/common'
import { ConfigModule, ConfigService } from '@nestjs/config'
import { HerdcacheModule } from 'herdcache/nest'
import { BearerGuard, UsersController } from './users.controller'
import { UsersService } from './users.service'

@Module({
  imports: [
    ConfigModule.forRoot({ isGlobal: true }),
    HerdcacheModule.forRootAsync({
      isGlobal: true,
      inject: [ConfigService],
      useFactory: (config: ConfigService) => ({
        redis: config.get<string>('REDIS_URL'), // unset: the embedded in-process store
        prefix: 'example:',
        ttl: 60_000,
        http: { headers: 'both' },
      }),
    }),
  ],
  controllers: [UsersController],
  providers: [UsersService, BearerGuard],
})
export class AppModule {}
