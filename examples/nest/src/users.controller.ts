import {
  Body,
  CanActivate,
  Controller,
  ExecutionContext,
  Get,
  Injectable,
  Param,
  ParseIntPipe,
  Put,
  Req,
  UnauthorizedException,
  UseGuards,
} from '@nestjs/common'
import { Cached, evictRoute } from 'herdcache/nest'
import { UsersService } from './users.service'

/** A toy bearer-token guard: `Authorization: Bearer <user id>`. */
@Injectable()
export class BearerGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest()
    const token = /^Bearer (\d+)$/.exec(request.headers.authorization ?? '')?.[1]
    if (!token) throw new UnauthorizedException()
    request.user = { id: Number(token) }
    return true
  }
}

@Controller('users')
export class UsersController {
  constructor(private readonly users: UsersService) {}

  // Per user: the key carries the hashed req.user.id; the guard runs on hits too.
  @Get('me')
  @UseGuards(BearerGuard)
  @Cached({ ttl: 10_000 })
  me(@Req() request: { user: { id: number } }) {
    return this.users.findOne(request.user.id)
  }

  // Everybody sees the same data: one shared entry per id.
  @Get(':id')
  @Cached({ ttl: 10_000, scope: 'public' })
  findOne(@Param('id', ParseIntPipe) id: number) {
    return this.users.findOne(id)
  }

  @Put(':id')
  async rename(@Param('id', ParseIntPipe) id: number, @Body('name') name: string) {
    const user = await this.users.rename(id, name)
    await evictRoute(UsersController, 'findOne', { params: { id } })
    return user
  }
}
