//! A redis-server of the test's own: started on a free port with no
//! persistence, stopped (killed) when dropped. Never touches another server.
//! Its log is kept in a directory of its own and printed when the test
//! fails (as redis-test's `RedisServer` does), then removed.

use std::fs::{self, File};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A Redis Cluster of the test's own (`RedisCluster`).
pub mod cluster;

/// How much of the server's log a failing test prints.
const LOG_TAIL_LINES: usize = 40;

pub struct RedisServer {
  child: Child,
  pub port: u16,
  /// This server's directory: `redis.log` (`--logfile`) and `stderr.log`
  /// (what it says before the log is open, e.g. a bad option).
  dir: PathBuf,
}

/// A fresh directory under the system temp dir, unique per server: the
/// process id tells test binaries apart, the counter servers within one.
fn server_dir() -> std::io::Result<PathBuf> {
  static NEXT: AtomicUsize = AtomicUsize::new(0);
  let n = NEXT.fetch_add(1, Ordering::Relaxed);
  let dir = std::env::temp_dir().join(format!("herdcache-redis-{}-{n}", std::process::id()));
  // A directory left by a killed run whose pid came back.
  let _ = fs::remove_dir_all(&dir);
  fs::create_dir_all(&dir)?;
  Ok(dir)
}

/// The last `n` lines of `path` (empty when it cannot be read).
fn tail(path: &Path, n: usize) -> String {
  let text = fs::read_to_string(path).unwrap_or_default();
  let lines: Vec<&str> = text.lines().collect();
  lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The server binary the tests start: `HERDCACHE_TEST_SERVER` (the Valkey
/// pass of `npm test` sets `valkey-server`), else redis-server.
pub fn server_binary() -> String {
  std::env::var("HERDCACHE_TEST_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

impl RedisServer {
  /// `None` when `redis-server` is not installed, outside CI (in CI a
  /// missing server fails the test: the Redis tests must run there).
  #[allow(dead_code)]
  pub fn start() -> Option<RedisServer> {
    let port = TcpListener::bind("127.0.0.1:0")
      .ok()?
      .local_addr()
      .ok()?
      .port();
    Self::spawn(port, &["--port", &port.to_string()])
  }

  /// A server that speaks TLS only, with a self-signed certificate made
  /// here (connect with `rediss://…/#insecure`).
  #[allow(dead_code)]
  pub fn start_tls(dir: &std::path::Path) -> Option<RedisServer> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
      .args([
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=127.0.0.1",
      ])
      .arg("-keyout")
      .arg(&key)
      .arg("-out")
      .arg(&cert)
      .stdout(Stdio::null())
      .stderr(Stdio::null())
      .status();
    if !made.is_ok_and(|s| s.success()) {
      assert!(std::env::var_os("CI").is_none(), "openssl is needed in CI");
      eprintln!("skipping: openssl could not make a certificate");
      return None;
    }
    let port = TcpListener::bind("127.0.0.1:0")
      .ok()?
      .local_addr()
      .ok()?
      .port();
    let (cert, key) = (
      cert.to_string_lossy().to_string(),
      key.to_string_lossy().to_string(),
    );
    let tls_port = port.to_string();
    let args = [
      "--port",
      "0",
      "--tls-port",
      &tls_port,
      "--tls-cert-file",
      &cert,
      "--tls-key-file",
      &key,
      "--tls-ca-cert-file",
      &cert,
      "--tls-auth-clients",
      "no",
    ];
    Self::spawn(port, &args)
  }

  fn spawn(port: u16, args: &[&str]) -> Option<RedisServer> {
    let dir = server_dir().expect("a directory for the redis-server log");
    let stderr = File::create(dir.join("stderr.log")).expect("the redis-server stderr file");
    let child = match Command::new(server_binary())
      .args(args)
      .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
      .arg("--logfile")
      .arg(dir.join("redis.log"))
      .stdout(Stdio::null())
      .stderr(stderr)
      .spawn()
    {
      Ok(child) => child,
      Err(e) => {
        let _ = fs::remove_dir_all(&dir);
        if std::env::var_os("CI").is_some() {
          panic!("{} is needed in CI: {e}", server_binary());
        }
        eprintln!("skipping: {} is not installed ({e})", server_binary());
        return None;
      }
    };
    // Made before the wait, so a server that never listens is killed, and
    // its log printed, by `drop`.
    let server = RedisServer { child, port, dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
      assert!(
        Instant::now() < deadline,
        "redis-server did not start on port {port}"
      );
      std::thread::sleep(Duration::from_millis(20));
    }
    Some(server)
  }

  #[allow(dead_code)]
  pub fn url(&self) -> String {
    format!("redis://127.0.0.1:{}/", self.port)
  }

  /// The server's process id (its log names it).
  #[allow(dead_code)]
  pub fn pid(&self) -> u32 {
    self.child.id()
  }

  /// Where the server logs (`--logfile`); removed when it is dropped.
  #[allow(dead_code)]
  pub fn log_path(&self) -> PathBuf {
    self.dir.join("redis.log")
  }

  /// SIGSTOP: connections stay open, nothing answers (a silent partition).
  #[allow(dead_code)]
  pub fn pause(&self) {
    // SAFETY: kill(2) takes no pointers, so nothing is unsound whatever the
    // pid. The pid is our own child's: it is reaped only by `drop` (`wait`
    // needs `&mut self`), so until then it cannot have been reused by
    // another process, and a signal cannot hit a server we did not start.
    unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGSTOP) };
  }

  #[allow(dead_code)]
  pub fn resume(&self) {
    // SAFETY: as in `pause`: no pointers, and the pid is our unreaped child.
    unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGCONT) };
  }
}

impl Drop for RedisServer {
  fn drop(&mut self) {
    let _ = self.child.kill();
    let _ = self.child.wait();
    if std::thread::panicking() {
      for name in ["stderr.log", "redis.log"] {
        let lines = tail(&self.dir.join(name), LOG_TAIL_LINES);
        if !lines.is_empty() {
          eprintln!(
            "--- redis-server on port {}: last lines of {name} ---\n{lines}",
            self.port
          );
        }
      }
    }
    let _ = fs::remove_dir_all(&self.dir);
  }
}

/// Epoch milliseconds, as the tests' envelopes use them.
#[allow(dead_code)]
pub fn wall_ms() -> u64 {
  std::time::SystemTime::now()
    .duration_since(std::time::UNIX_EPOCH)
    .unwrap()
    .as_millis() as u64
}

/// A value stamped `stamp` whose deadlines follow from it (fresh for 1 s,
/// servable for 10 s, refreshed early from 900 ms): the store tests judge
/// stamps, not time.
#[allow(dead_code)]
pub fn envelope_at(stamp: u64, json: &str) -> herdcache::core::envelope::Envelope {
  herdcache::core::envelope::Envelope {
    meta: herdcache::core::envelope::Meta {
      fresh_until: stamp + 1_000,
      hard_until: stamp + 10_000,
      compute_ms: 12,
      stamp,
      refresh_at: Some(stamp + 900),
      negative: false,
    },
    body: herdcache::core::body::Body::Json(json.into()),
    tags: Default::default(),
    etag: Default::default(),
  }
}

/// A value fresh for a minute, from a load that started at `stamp`.
#[allow(dead_code)]
pub fn envelope(stamp: u64, json: &str) -> herdcache::core::envelope::Envelope {
  let now = wall_ms();
  herdcache::core::envelope::Envelope {
    meta: herdcache::core::envelope::Meta {
      fresh_until: now + 60_000,
      hard_until: now + 120_000,
      compute_ms: 5,
      stamp,
      refresh_at: Some(now + 59_000),
      negative: false,
    },
    body: herdcache::core::body::Body::Json(json.into()),
    tags: Default::default(),
    etag: Default::default(),
  }
}

/// What the tests look at in a store besides what the fleet calls (the
/// `SharedStore` trait holds only that): a lock's remaining lease, the
/// back-off marker, and two shorthands. Every store under the contract
/// suite implements it.
#[allow(dead_code)]
pub trait Inspect: herdcache::engine::shared::SharedStore {
  /// The lock's remaining lease in ms, `None` if nobody holds it.
  fn lock_lease(
    &self,
    keys: &Self::Keys,
  ) -> impl std::future::Future<Output = Result<Option<u64>, Self::Error>> + Send;

  /// The key's back-off marker: `(failures, ms left)`, `None` if there is
  /// none (or it is not one an instance left).
  fn backoff(
    &self,
    keys: &Self::Keys,
  ) -> impl std::future::Future<Output = Result<Option<(u32, u64)>, Self::Error>> + Send;

  /// True if this caller now holds the lock.
  fn try_lock(
    &self,
    keys: &Self::Keys,
    token: &str,
    ttl: u64,
  ) -> impl std::future::Future<Output = Result<bool, Self::Error>> + Send {
    async move { Ok(self.lock(keys, token, ttl).await? == herdcache::engine::shared::LockAttempt::Won) }
  }

  /// `write_over` with no corrupt value to replace.
  fn write(
    &self,
    key: &str,
    keys: &Self::Keys,
    envelope: &herdcache::core::envelope::Envelope,
    px: u64,
    token: Option<&str>,
  ) -> impl std::future::Future<Output = Result<bool, Self::Error>> + Send {
    self.write_over(key, keys, envelope, px, token, None)
  }
}

impl Inspect for herdcache::engine::shared::RedisStore {
  async fn lock_lease(&self, keys: &Self::Keys) -> redis::RedisResult<Option<u64>> {
    herdcache::engine::shared::RedisStore::lock_lease(self, keys).await
  }

  async fn backoff(&self, keys: &Self::Keys) -> redis::RedisResult<Option<(u32, u64)>> {
    herdcache::engine::shared::RedisStore::backoff(self, keys).await
  }
}

impl Inspect for herdcache::engine::shared::MemoryStore {
  async fn lock_lease(
    &self,
    keys: &Self::Keys,
  ) -> Result<Option<u64>, herdcache::engine::shared::MemoryError> {
    herdcache::engine::shared::MemoryStore::lock_lease(self, keys).await
  }

  async fn backoff(
    &self,
    keys: &Self::Keys,
  ) -> Result<Option<(u32, u64)>, herdcache::engine::shared::MemoryError> {
    herdcache::engine::shared::MemoryStore::backoff(self, keys).await
  }
}

/// Where a fleet test's instances meet: one redis-server, or with
/// `HERDCACHE_TEST_TOPOLOGY=cluster` (the cluster pass of `npm test`) a
/// Redis Cluster of three primaries. The same tests run on both.
#[allow(dead_code)]
pub enum Backend {
  Server(RedisServer),
  Cluster(cluster::RedisCluster),
}

#[allow(dead_code)]
impl Backend {
  /// `None` as [`RedisServer::start`] (a missing server, outside CI).
  pub fn start() -> Option<Backend> {
    match std::env::var("HERDCACHE_TEST_TOPOLOGY").as_deref() {
      Ok("cluster") => cluster::RedisCluster::start(3, 0).map(Backend::Cluster),
      _ => RedisServer::start().map(Backend::Server),
    }
  }

  /// A store of its own (an instance of the fleet) under `prefix`.
  pub fn store(
    &self,
    prefix: &str,
    timeouts: herdcache::engine::shared::RedisTimeouts,
  ) -> herdcache::engine::shared::RedisStore {
    use herdcache::engine::shared::RedisStore;
    match self {
      Backend::Server(server) => RedisStore::open(&server.url(), prefix, timeouts).unwrap(),
      Backend::Cluster(cluster) => {
        RedisStore::open_cluster(&cluster.urls(), prefix, timeouts).unwrap()
      }
    }
  }
}

/// Where a test's instances meet, whatever the store: each instance
/// opens a store of its own (its own origin) under a prefix.
#[allow(dead_code)]
pub trait Meeting {
  type Store: herdcache::engine::shared::SharedStore + Inspect;
  fn open(&self, prefix: &str) -> Self::Store;
}

impl Meeting for Backend {
  type Store = herdcache::engine::shared::RedisStore;
  fn open(&self, prefix: &str) -> Self::Store {
    self.store(prefix, herdcache::engine::shared::RedisTimeouts::default())
  }
}

/// The in-process store's server: the same cases without a server to
/// start (the unit tier runs them).
#[allow(dead_code)]
pub struct InMemory(pub std::sync::Arc<herdcache::engine::shared::MemoryServer>);

#[allow(dead_code)]
impl InMemory {
  pub fn new() -> InMemory {
    InMemory(herdcache::engine::shared::MemoryServer::new())
  }
}

impl Meeting for InMemory {
  type Store = herdcache::engine::shared::MemoryStore;
  fn open(&self, prefix: &str) -> Self::Store {
    self
      .0
      .store(prefix, herdcache::engine::shared::Faults::default())
  }
}
