//! What a Redis store's failures say: the cause, coded, with the server's
//! own words and what to check. Where redis-rs's error hides the cause (a
//! refused password, a TLS URL on a plain-text port), a second look finds
//! it ([`explain`]).

use crate::core::error::Code;
use crate::engine::shared::Problem;
use redis::{Client, ConnectionAddr, ErrorKind, RedisError};

/// Where a store connects, for what its failures say.
#[derive(Debug, Clone)]
pub(super) struct Target {
  /// One node's `host:port` (a cluster's first seed), for probes.
  addr: String,
  /// What messages call it: `Redis at host:port`, or the cluster and its seeds.
  name: String,
  tls: bool,
  timeout_ms: u64,
}

impl Target {
  /// `seed` is the node probed when a failure is explained; `name`, what
  /// the messages call the store.
  pub(super) fn new(seed: &Client, name: String, timeout_ms: u64) -> Target {
    let addr = seed.get_connection_info().addr();
    Target {
      tls: matches!(addr, ConnectionAddr::TcpTls { .. }),
      addr: addr.to_string(),
      name,
      timeout_ms,
    }
  }

  /// What messages call the store.
  pub(super) fn name(&self) -> &str {
    &self.name
  }

  /// A failure's cause (`core::error::Code`'s Redis codes), with the
  /// server's text and what to check.
  pub(super) fn describe(&self, e: &RedisError) -> Problem {
    let text = e.to_string();
    let at = &self.name;
    // A password the server does not expect (it has none) is the URL's
    // mistake too: one code, whether or not the failure was explained.
    let (code, hint) = if matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
      || e.kind() == ErrorKind::AuthenticationFailed
      || text.contains(NO_PASSWORD_CONFIGURED)
    {
      (
        Code::RedisAuth,
        "check the user and password of the `redis` URL (redis://user:password@host:port)",
      )
    } else if e.code() == Some("NOPERM") {
      (
        Code::RedisNoPerm,
        "the ACL user lacks a command or key herdcache needs (README, \"Production's everyday events\")",
      )
    } else if text.contains("DB index is out of range") {
      (
        Code::RedisDb,
        "the db of the URL (redis://host:port/N) must be below the server's `databases`",
      )
    } else if self.tls && text.contains(PLAIN_PORT) {
      (
        Code::RedisTls,
        "this port is not TLS: use redis:// for it, or the server's TLS port with rediss://",
      )
    } else if e.is_timeout() {
      return self.timed_out();
    } else if e.is_connection_refusal() {
      (
        Code::RedisUnreachable,
        "is Redis running there, and is the URL's host and port right?",
      )
    } else if self.tls && e.is_io_error() {
      (
        Code::RedisTls,
        "rediss:// needs the server's TLS port and a certificate the system trusts; a plain port wants redis://",
      )
    } else if e.is_io_error() {
      (
        Code::RedisUnreachable,
        "is Redis running there, and is the URL's host and port right?",
      )
    } else {
      (
        Code::RedisFailed,
        "herdcache serves without Redis meanwhile",
      )
    };
    Problem {
      code,
      message: format!("{at} failed: {text}; {hint}"),
    }
  }

  pub(super) fn timed_out(&self) -> Problem {
    Problem {
      code: Code::RedisTimeout,
      message: format!(
        "{} did not answer within redisTimeout ({} ms); herdcache serves without it meanwhile",
        self.name, self.timeout_ms
      ),
    }
  }

  /// Whether [`explain`] may say more of `e` than `e` does.
  pub(super) fn needs_explaining(&self, e: &RedisError) -> bool {
    e.kind() == ErrorKind::AuthenticationFailed || (self.tls && (e.is_timeout() || e.is_io_error()))
  }

  /// Why a connection could not be made, as [`explain`] finds it or else
  /// as `e` says.
  pub(super) async fn connect_failure(&self, seed: &Client, e: &RedisError) -> Problem {
    match explain(seed, self, e).await {
      Some(explained) => self.describe(&explained),
      None if e.is_timeout() => self.timed_out(),
      None => self.describe(e),
    }
  }
}

/// Explains a connection that could not be made where redis-rs's error
/// hides the cause: a refused password is asked again by hand for the
/// server's own words (WRONGPASS …), and a TLS handshake that got no answer
/// (it timed out) is checked for a plain-text Redis on that port.
pub(super) async fn explain(seed: &Client, target: &Target, e: &RedisError) -> Option<RedisError> {
  if e.kind() == ErrorKind::AuthenticationFailed {
    return auth_reply(seed).await;
  }
  if target.tls && (e.is_timeout() || e.is_io_error()) && plain_redis(&target.addr).await {
    return Some(RedisError::from((
      ErrorKind::Client,
      "TLS handshake failed",
      PLAIN_PORT.to_string(),
    )));
  }
  None
}

/// The server's answer to the client's credentials, on a connection made
/// without them.
async fn auth_reply(client: &Client) -> Option<RedisError> {
  let info = client.get_connection_info();
  let settings = info.redis_settings();
  let password = settings.password()?;
  let bare = info
    .clone()
    .set_redis_settings(redis::RedisConnectionInfo::default());
  let mut c = Client::open(bare)
    .ok()?
    .get_multiplexed_async_connection()
    .await
    .ok()?;
  let mut auth = redis::cmd("AUTH");
  if let Some(user) = settings.username() {
    auth.arg(user);
  }
  auth.arg(password).query_async::<()>(&mut c).await.err()
}

/// What a TLS store's failure says when its port speaks plain Redis.
const PLAIN_PORT: &str = "the server at this address answers plain-text Redis, not TLS";

/// The server's reply to a password it has none for (Redis and Valkey).
const NO_PASSWORD_CONFIGURED: &str = "called without any password configured";

/// Whether `addr` answers a plain-text PING as Redis does (`+PONG`, or an
/// error such as `-NOAUTH`).
async fn plain_redis(addr: &str) -> bool {
  use tokio::io::{AsyncReadExt, AsyncWriteExt};
  let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
    return false;
  };
  if stream.write_all(b"PING\r\n").await.is_err() {
    return false;
  }
  let mut reply = [0u8; 16];
  match stream.read(&mut reply).await {
    Ok(n) if n > 0 => matches!(reply[0], b'+' | b'-'),
    _ => false,
  }
}

/// The subscription's answer when the ACL forbids the channel.
pub(super) fn subscribe_refused(channel: &str, e: &RedisError) -> Problem {
  Problem {
    code: Code::RedisNoPerm,
    message: format!(
      "Redis refused SUBSCRIBE to the events channel `{channel}` ({e}): this instance is not told of other instances' fills and invalidations, so its memory may serve values changed elsewhere until their TTL, and its waiting loads wait out the lock's lease. Allow the channel (`&herdcache:events:*`, or `allchannels`) and `+publish +subscribe` for this user"
    ),
  }
}

/// The ACL refused `CLIENT TRACKING` on the events connection: the L1 hears
/// of herdcache's own changes only, as without the `tracking` option.
pub(super) fn tracking_refused(e: &RedisError) -> Problem {
  Problem {
    code: Code::RedisNoPerm,
    message: format!(
      "Redis refused CLIENT TRACKING on the events connection ({e}): this instance's memory is not told of changes made outside herdcache (redis-cli, other services, evictions), only of herdcache's own, and serves what it holds until its TTL. Allow `+client|tracking` for this user, or pass `tracking: false`"
    ),
  }
}
