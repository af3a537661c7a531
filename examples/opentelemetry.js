// examples/opentelemetry.js: herdcache's getOrLoad calls and background
// refreshes as OpenTelemetry spans (README, "Tracing").
const diagnostics_channel = require('node:diagnostics_channel')
const { trace, SpanStatusCode } = require('@opentelemetry/api')
const { channels } = require('herdcache')

/** A key as one attribute value: a string as it is, an array key as its JSON text. */
const keyAttribute = (key) => (typeof key === 'string' ? key : JSON.stringify(key))

/** Span handlers for one tracing channel: a span from `start` to `asyncEnd`. */
function spansOf(tracer, name) {
  const spans = new WeakMap()
  return {
    start(message) {
      spans.set(message, tracer.startSpan(name, { attributes: { 'herdcache.key': keyAttribute(message.key) } }))
    },
    error(message) {
      const span = spans.get(message)
      span?.recordException(message.error instanceof Error ? message.error : String(message.error))
      span?.setStatus({ code: SpanStatusCode.ERROR, message: message.error?.message })
    },
    asyncEnd(message) {
      const span = spans.get(message)
      if (message.outcome !== undefined) span?.setAttribute('herdcache.outcome', message.outcome)
      span?.setAttribute('herdcache.loaded', message.loaded)
      span?.end()
    },
  }
}

/**
 * Every getOrLoad becomes a `herdcache.getOrLoad` span, every background
 * refresh a `herdcache.refresh` span (children of the span active where the
 * call was made). Returns the function that stops it.
 */
function traceHerdcache(tracer = trace.getTracer('herdcache')) {
  const subscriptions = [
    [diagnostics_channel.tracingChannel(channels.getOrLoad), spansOf(tracer, 'herdcache.getOrLoad')],
    [diagnostics_channel.tracingChannel(channels.refresh), spansOf(tracer, 'herdcache.refresh')],
  ]
  for (const [channel, handlers] of subscriptions) channel.subscribe(handlers)
  return () => {
    for (const [channel, handlers] of subscriptions) channel.unsubscribe(handlers)
  }
}

module.exports = { traceHerdcache }
