//! A redis-server of the test's own: started on a free port with no
//! persistence, stopped (killed) when dropped. Never touches another server.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
  child: Child,
  pub port: u16,
}

impl RedisServer {
  /// `None` when `redis-server` is not installed, outside CI (in CI a
  /// missing server fails the test: the Redis tests must run there).
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
    let child = match Command::new("redis-server")
      .args(args)
      .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
      .stdout(Stdio::null())
      .stderr(Stdio::null())
      .spawn()
    {
      Ok(child) => child,
      Err(e) if std::env::var_os("CI").is_none() => {
        eprintln!("skipping: redis-server is not installed ({e})");
        return None;
      }
      Err(e) => panic!("redis-server is needed in CI: {e}"),
    };
    let server = RedisServer { child, port };
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

  pub fn url(&self) -> String {
    format!("redis://127.0.0.1:{}/", self.port)
  }

  /// SIGSTOP: connections stay open, nothing answers (a silent partition).
  #[allow(dead_code)]
  pub fn pause(&self) {
    // SAFETY: kill(2) on the pid of a child this struct owns and has not reaped.
    unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGSTOP) };
  }

  #[allow(dead_code)]
  pub fn resume(&self) {
    // SAFETY: as in `pause`.
    unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGCONT) };
  }
}

impl Drop for RedisServer {
  fn drop(&mut self) {
    let _ = self.child.kill();
    let _ = self.child.wait();
  }
}
