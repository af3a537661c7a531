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
}

/// Gauges reported beside the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gauges {
  pub size: u64,
  pub in_flight: u64,
}

impl Gauges {
  pub fn gauges(&self) -> [(&'static str, &'static str, &'static str, u64); 2] {
    [
      ("size", "herdcache_entries", "Entries held now.", self.size),
      (
        "inFlight",
        "herdcache_in_flight",
        "Loads running now.",
        self.in_flight,
      ),
    ]
  }
}

/// The Prometheus text exposition format (version 0.0.4).
pub fn prometheus(metrics: &Metrics, gauges: &Gauges) -> String {
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
  out
}

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
    };
    let text = prometheus(&m, &g);
    assert!(text.contains("# TYPE herdcache_hits_total counter\nherdcache_hits_total 3\n"));
    assert!(text.contains("herdcache_stale_served_total 2\n"));
    assert!(text.contains("# TYPE herdcache_entries gauge\nherdcache_entries 7\n"));
    assert_eq!(text.matches("# TYPE").count(), m.counters().len() + 2);
  }
}
