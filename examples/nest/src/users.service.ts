import { Injectable, NotFoundException } from '@nestjs/common'
import { CachedMethod, evictCached } from 'herdcache/nest'

export interface User {
  id: number
  name: string
}

/** Stands in for a database: every query takes 100 ms and is counted. */
@Injectable()
export class UsersService {
  queries = 0
  private readonly rows = new Map<number, User>([
    [1, { id: 1, name: 'Ann' }],
    [2, { id: 2, name: 'Bob' }],
  ])

  // Concurrent calls with the same id share one query (one per fleet with Redis).
  @CachedMethod({ ttl: 30_000 })
  async findOne(id: number): Promise<User> {
    this.queries++
    await new Promise((resolve) => setTimeout(resolve, 100))
    const user = this.rows.get(id)
    if (!user) throw new NotFoundException(`no user ${id}`)
    return user
  }

  async rename(id: number, name: string): Promise<User> {
    const user = await this.findOne(id)
    this.rows.set(id, { ...user, name })
    await evictCached(this, 'findOne', id) // the next read loads the new name, on every instance
    return this.findOne(id)
  }
}
