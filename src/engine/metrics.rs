//! Counters. Every `getOrLoad` lands in exactly one of `hits`,
//! `stale_served`, `negative_hits`, `misses` or `coalesced`.

macro_rules! counters {
  ($($field:ident => $camel:literal, $prom:literal, $help:literal;)*) => {
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Metrics {
      $(pub $field: u64,)*
    }

    impl Metrics {
      /// `(camelCase name, Prometheus name, help, value)` for every counter.
      pub fn counters(&self) -> Vec<(&'static str, &'static str, &'static str, u64)> {
        vec![$(($camel, $prom, $help, self.$field),)*]
      }
    }
  };
}

counters! {
  hits => "hits", "herdcache_hits_total", "Fresh values served.";
  stale_served => "staleServed", "herdcache_stale_served_total", "Stale values served while a refresh runs.";
  negative_hits => "negativeHits", "herdcache_negative_hits_total", "Cached not-found markers served.";
  misses => "misses", "herdcache_misses_total", "Calls that ran the loader themselves.";
  coalesced => "coalesced", "herdcache_coalesced_total", "Calls that joined a load in flight.";
  loads => "loads", "herdcache_loads_total", "Loader runs, foreground and background.";
  load_errors => "loadErrors", "herdcache_load_errors_total", "Loader runs that failed.";
  background_refreshes => "backgroundRefreshes", "herdcache_background_refreshes_total", "Background refreshes started.";
  early_refreshes => "earlyRefreshes", "herdcache_early_refreshes_total", "Background refreshes started early by XFetch.";
  background_errors => "backgroundErrors", "herdcache_background_errors_total", "Background refreshes that failed.";
  timeouts => "timeouts", "herdcache_timeouts_total", "Loads given up at hardTimeout.";
  evictions => "evictions", "herdcache_evictions_total", "Entries evicted by maxEntries.";
  expirations => "expirations", "herdcache_expirations_total", "Entries reclaimed past their hard TTL.";
  l1_hits => "l1Hits", "herdcache_l1_hits_total", "Calls answered from the in-process L1 without Redis.";
  redis_hits => "redisHits", "herdcache_redis_hits_total", "Loads answered by a value another instance wrote to Redis.";
  lock_acquired => "lockAcquired", "herdcache_lock_acquired_total", "Fleet locks won: recomputes this instance ran for the fleet.";
  lock_contended => "lockContended", "herdcache_lock_contended_total", "Loads that found the fleet lock taken.";
  lock_waits => "lockWaits", "herdcache_lock_waits_total", "Waits for another instance's fill notice.";
  fill_notices => "fillNotices", "herdcache_fill_notices_total", "Fill notices that ended a wait.";
  redis_errors => "redisErrors", "herdcache_redis_errors_total", "Redis commands that failed or timed out (served without Redis).";
  corrupt_values => "corruptValues", "herdcache_corrupt_values_total", "Values in Redis that were not herdcache entries (treated as misses).";
  recovered => "recovered", "herdcache_recovered_total", "Writes and invalidations that could not reach Redis, delivered later.";
  recovery_dropped => "recoveryDropped", "herdcache_recovery_dropped_total", "Writes and invalidations that could not reach Redis, given up (past the recovery bounds, or at close).";
  loads_queued => "loadsQueued", "herdcache_loads_queued_total", "Loads that waited in the maxConcurrentLoads queue for a slot.";
  load_queue_wait_ms => "loadQueueWaitMs", "herdcache_load_queue_wait_ms_total", "Milliseconds loads waited in that queue, all of them together.";
  loads_rejected => "loadsRejected", "herdcache_loads_rejected_total", "Loads refused because that queue was full (ERR_HERDCACHE_LOAD_QUEUE_FULL).";
  refreshes_skipped => "refreshesSkipped", "herdcache_refreshes_skipped_total", "Background refreshes not run because that queue was full.";
  fleet_cap_bypassed => "fleetCapBypassed", "herdcache_fleet_cap_bypassed_total", "Loads run without a slot of fleetMaxConcurrentLoads because Redis could not be asked (under the per-process cap alone).";
  value_bytes_written => "valueBytesWritten", "herdcache_value_bytes_written_total", "Bytes of the values written to Redis, before compression (JSON text or encoded bytes).";
  tracked_changes => "trackedChanges", "herdcache_tracked_changes_total", "Changes made outside herdcache (redis-cli, other services, EXPIRE, evictions, FLUSHDB) that Redis told this instance's L1 of (option tracking).";
  tracked_echoes => "trackedEchoes", "herdcache_tracked_echoes_total", "herdcache's own changes that Redis's tracking told again, not applied twice (the events channel had announced them).";
  value_bytes_stored => "valueBytesStored", "herdcache_value_bytes_stored_total", "Bytes of the values written to Redis, after compression (what Redis was sent).";
}

/// Gauges reported beside the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gauges {
  pub size: u64,
  pub l1_bytes: u64,
  pub in_flight: u64,
  pub circuit_open: u64,
  pub recovery_pending: u64,
  pub redis_connected: u64,
  pub redis_subscribed: u64,
  pub redis_tracking: u64,
  pub load_slots_used: u64,
  pub load_queue_length: u64,
  pub fleet_slots_held: u64,
}

impl Gauges {
  pub fn gauges(&self) -> [(&'static str, &'static str, &'static str, u64); 11] {
    [
      ("size", "herdcache_entries", "Entries held now.", self.size),
      (
        "l1Bytes",
        "herdcache_l1_bytes",
        "Bytes held in memory now, as l1MaxBytes counts them (the values' JSON text and their keys).",
        self.l1_bytes,
      ),
      (
        "inFlight",
        "herdcache_in_flight",
        "Loads running now.",
        self.in_flight,
      ),
      (
        "circuitOpen",
        "herdcache_circuit_open",
        "1 while Redis is skipped after a failure.",
        self.circuit_open,
      ),
      (
        "recoveryPending",
        "herdcache_recovery_pending",
        "Writes and invalidations waiting for Redis to be delivered.",
        self.recovery_pending,
      ),
      (
        "redisConnected",
        "herdcache_redis_connected",
        "1 while the last Redis command got an answer (the command connection is up).",
        self.redis_connected,
      ),
      (
        "redisSubscribed",
        "herdcache_redis_subscribed",
        "1 while the events subscription is live (fill notices and invalidations arrive).",
        self.redis_subscribed,
      ),
      (
        "redisTracking",
        "herdcache_redis_tracking",
        "1 while Redis tells this instance's L1 of changes made outside herdcache (option tracking).",
        self.redis_tracking,
      ),
      (
        "loadSlotsUsed",
        "herdcache_load_slots_used",
        "Loaders running now under maxConcurrentLoads.",
        self.load_slots_used,
      ),
      (
        "loadQueueLength",
        "herdcache_load_queue_length",
        "Loads waiting now for a slot of maxConcurrentLoads.",
        self.load_queue_length,
      ),
      (
        "fleetSlotsHeld",
        "herdcache_fleet_slots_held",
        "Slots of fleetMaxConcurrentLoads this instance holds now (its loaders running under the fleet's cap).",
        self.fleet_slots_held,
      ),
    ]
  }
}

/// The Prometheus text exposition format (version 0.0.4); `last_error`:
/// the code of the last Redis failure, as a labelled gauge.
pub fn prometheus(metrics: &Metrics, gauges: &Gauges, last_error: Option<&str>) -> String {
  let mut out = String::with_capacity(2048);
  for (_, name, help, value) in metrics.counters() {
    out.push_str(&format!(
      "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"
    ));
  }
  for (_, name, help, value) in gauges.gauges() {
    out.push_str(&format!(
      "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
    ));
  }
  if let Some(code) = last_error {
    out.push_str(&format!(
      "# HELP {LAST_ERROR} The code of the last Redis failure (stats().lastRedisError).\n# TYPE {LAST_ERROR} gauge\n{LAST_ERROR}{{code=\"{code}\"}} 1\n"
    ));
  }
  out
}

/// The `metrics()` name of `stats().lastRedisError`.
pub const LAST_ERROR: &str = "herdcache_redis_last_error";

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn prometheus_text_names_every_counter() {
    let m = Metrics {
      hits: 3,
      stale_served: 2,
      ..Default::default()
    };
    let g = Gauges {
      size: 7,
      in_flight: 1,
      circuit_open: 0,
      recovery_pending: 2,
      ..Default::default()
    };
    let text = prometheus(&m, &g, None);
    assert!(text.contains("# TYPE herdcache_hits_total counter\nherdcache_hits_total 3\n"));
    assert!(text.contains("herdcache_stale_served_total 2\n"));
    assert!(text.contains("# TYPE herdcache_entries gauge\nherdcache_entries 7\n"));
    assert!(text.contains("herdcache_recovery_pending 2\n"));
    assert_eq!(
      text.matches("# TYPE").count(),
      m.counters().len() + g.gauges().len()
    );
    let text = prometheus(&m, &g, Some("ERR_HERDCACHE_REDIS_AUTH"));
    assert!(text.contains("herdcache_redis_last_error{code=\"ERR_HERDCACHE_REDIS_AUTH\"} 1\n"));
  }
}
