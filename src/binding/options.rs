//! The options the native cache takes, as napi-rs reads them from JS. They
//! are declared once, in `core::options::cache_options!`; this module only
//! gives that list the `#[napi(object)]` form (whose docs napi-rs copies
//! into `binding.d.ts`). The JS wrapper checks types and unknown names
//! first, from `names().options` (so a wrong type is a `TypeError` with our
//! code); ranges are checked by `core::options`.

use crate::core::options::{cache_options, RawCacheOptions};
use napi_derive::napi;

macro_rules! napi_cache_options {
  ($($(#[doc = $doc:tt])* $field:ident: $ty:tt => $js:literal, default = $default:expr;)*) => {
    /// Options of `new Cache(options)`. Durations are milliseconds.
    #[napi(object)]
    #[derive(Debug, Default)]
    pub struct CacheOptions {
      $($(#[doc = $doc])* pub $field: Option<$ty>,)*
    }

    impl CacheOptions {
      pub fn into_raw(self) -> RawCacheOptions {
        RawCacheOptions {
          $($field: self.$field,)*
        }
      }
    }
  };
}

cache_options!(napi_cache_options);
