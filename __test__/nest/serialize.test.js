'use strict'
// What is stored is what goes on the wire: class-transformer's @Exclude()
// fields never appear, on a MISS or a HIT, with ClassSerializerInterceptor
// bound globally (before or after HerdcacheInterceptor) or not at all.

const test = require('node:test')
const assert = require('node:assert/strict')
const { Controller, Get, ClassSerializerInterceptor, SerializeOptions } = require('@nestjs/common')
const { APP_INTERCEPTOR, Reflector } = require('@nestjs/core')
const { Exclude, Expose } = require('class-transformer')
const { HerdcacheModule, HerdcacheInterceptor, Cached } = require('herdcache/nest')
const { PLATFORMS, decorate, startApp } = require('./apps')

class User {
  constructor(fields) {
    Object.assign(this, fields)
  }
}
Exclude()(User.prototype, 'password')
Expose({ groups: ['admin'] })(User.prototype, 'role')

function makeController() {
  const runs = { n: 0 }
  class UsersController {
    one() {
      runs.n++
      return new User({ id: 1, name: 'Ann', password: 'secret', email: 'ann@example.com', role: 'admin' })
    }
    many() {
      return { items: [new User({ id: 2, password: 'x' })], total: 1 }
    }
    grouped() {
      return new User({ id: 3, password: 'y', email: 'e@example.com', role: 'r' })
    }
  }
  Controller('users')(UsersController)
  decorate(UsersController, 'one', Get('one'), Cached())
  decorate(UsersController, 'many', Get('many'), Cached())
  decorate(UsersController, 'grouped', Get('grouped'), Cached(), SerializeOptions({ groups: ['admin'] }))
  return { UsersController, runs }
}

const serializer = {
  provide: APP_INTERCEPTOR,
  useFactory: (r) => new ClassSerializerInterceptor(r),
  inject: [Reflector],
}
const herd = { provide: APP_INTERCEPTOR, useClass: HerdcacheInterceptor }
const setups = {
  'ClassSerializerInterceptor outside herdcache': [serializer, herd],
  'ClassSerializerInterceptor inside herdcache': [herd, serializer],
  'no ClassSerializerInterceptor (route-bound only)': [],
}

for (const platform of PLATFORMS) {
  for (const [name, providers] of Object.entries(setups)) {
    test(`@Exclude() fields stay out of the cache: ${name}, ${platform}`, async (t) => {
      const { UsersController, runs } = makeController()
      const { get } = await startApp(t, {
        platform,
        imports: [HerdcacheModule.forRoot()],
        controllers: [UsersController],
        providers,
      })
      for (const expected of ['MISS', 'HIT']) {
        const r = await get('/users/one')
        assert.equal(r.headers.get('x-cache'), expected)
        assert.deepEqual(r.body, { id: 1, name: 'Ann', email: 'ann@example.com' })
        const m = await get('/users/many')
        assert.equal(m.headers.get('x-cache'), expected)
        assert.deepEqual(m.body, { items: [{ id: 2 }], total: 1 })
        const g = await get('/users/grouped')
        assert.deepEqual(
          g.body,
          { id: 3, email: 'e@example.com', role: 'r' },
          '@SerializeOptions groups apply to what is stored',
        )
      }
      assert.equal(runs.n, 1)
    })
  }
}
