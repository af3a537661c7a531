//! A Redis Cluster of the test's own (the Rust side of
//! `__test__/redis-cluster.js`): `primaries` primaries and `replicas`
//! replicas each of [`server_binary`] on free loopback ports, joined with
//! `redis-cli --cluster create` (`HERDCACHE_TEST_CLI` names another
//! redis-cli; it drives valkey-server too), every node killed when dropped.
//! Each node keeps its nodes-P.conf and log in a directory of its own; the
//! logs are printed when the test fails, then removed. Admin commands go
//! over the `redis` crate's blocking connection, one per command.
//!
//! Every node runs with `--cluster-node-timeout 1000`: a killed primary's
//! replica takes over 1.5–3 s later.
#![allow(dead_code)]

use super::{server_binary, server_dir, tail, LOG_TAIL_LINES};
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How many slots a Redis Cluster has.
pub const SLOTS: u16 = 16384;
const START_TIMEOUT: Duration = Duration::from_secs(10);
const CREATE_TIMEOUT: Duration = Duration::from_secs(20);
const SETTLE_TIMEOUT: Duration = Duration::from_secs(15);
const COMMAND_TIMEOUT: Duration = Duration::from_secs(3);

/// The redis-cli that creates the cluster: `HERDCACHE_TEST_CLI`, else redis-cli.
pub fn cli_binary() -> String {
  std::env::var("HERDCACHE_TEST_CLI").unwrap_or_else(|_| "redis-cli".to_string())
}

/// One node as another node sees it (a line of CLUSTER NODES).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeView {
  pub port: u16,
  pub id: String,
  pub master: bool,
  /// Flagged `fail` or `fail?`.
  pub failed: bool,
  /// The primary's id, for a replica.
  pub master_id: Option<String>,
  /// Slot ranges, inclusive (slots being imported or migrated left out).
  pub slots: Vec<(u16, u16)>,
}

/// A current primary: its port, id and slot ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Primary {
  pub port: u16,
  pub id: String,
  pub slots: Vec<(u16, u16)>,
}

fn parse_nodes(text: &str) -> Vec<NodeView> {
  let mut nodes: Vec<NodeView> = text
    .lines()
    .filter(|l| !l.trim().is_empty())
    .map(|line| {
      let fields: Vec<&str> = line.split_whitespace().collect();
      let flags: Vec<&str> = fields[2].split(',').collect();
      let addr = fields[1].split('@').next().unwrap_or_default();
      let port = addr.rsplit(':').next().unwrap_or_default();
      let mut slots: Vec<(u16, u16)> = fields[8..]
        .iter()
        .filter(|s| !s.starts_with('['))
        .map(|s| match s.split_once('-') {
          Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
          None => (s.parse().unwrap(), s.parse().unwrap()),
        })
        .collect();
      slots.sort_unstable();
      NodeView {
        port: port.parse().unwrap_or(0),
        id: fields[0].to_string(),
        master: flags.contains(&"master"),
        failed: flags.contains(&"fail") || flags.contains(&"fail?"),
        master_id: (fields[3] != "-").then(|| fields[3].to_string()),
        slots,
      }
    })
    .collect();
  nodes.sort();
  nodes
}

/// A field of INFO or CLUSTER INFO (`name:value` lines).
fn info_field(info: &str, name: &str) -> Option<String> {
  info
    .lines()
    .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
    .map(|v| v.trim().to_string())
}

/// One command on the node at `port`, on a connection of its own.
pub fn query<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> redis::RedisResult<T> {
  let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
  let mut con = client.get_connection_with_timeout(COMMAND_TIMEOUT)?;
  con.set_read_timeout(Some(COMMAND_TIMEOUT))?;
  con.set_write_timeout(Some(COMMAND_TIMEOUT))?;
  cmd.query(&mut con)
}

/// Two free ports, told apart (the node's and its cluster bus port: the
/// default, port + 10000, is past 65535 for half the ephemeral range).
fn two_free_ports() -> Option<(u16, u16)> {
  let a = TcpListener::bind("127.0.0.1:0").ok()?;
  let b = TcpListener::bind("127.0.0.1:0").ok()?;
  Some((a.local_addr().ok()?.port(), b.local_addr().ok()?.port()))
}

fn missing(what: &str, e: impl std::fmt::Display) -> Option<RedisCluster> {
  if std::env::var_os("CI").is_some() {
    panic!("{what} is needed in CI: {e}");
  }
  eprintln!("skipping: {what} is not installed ({e})");
  None
}

struct Node {
  port: u16,
  bus_port: u16,
  /// nodes-P.conf, `redis.log` (`--logfile`) and `stderr.log`.
  dir: PathBuf,
  child: Option<Child>,
  id: String,
}

impl Node {
  fn spawn(&mut self) -> std::io::Result<()> {
    let stderr = File::create(self.dir.join("stderr.log"))?;
    let child = Command::new(server_binary())
      .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
      .args([
        "--cluster-enabled",
        "yes",
        "--cluster-port",
        &self.bus_port.to_string(),
      ])
      .args([
        "--cluster-config-file",
        &format!("nodes-{}.conf", self.port),
      ])
      .args([
        "--cluster-node-timeout",
        "1000",
        "--save",
        "",
        "--appendonly",
        "no",
      ])
      // A replica's first sync waits 5 s by default (for more replicas).
      .args(["--repl-diskless-sync-delay", "0"])
      .arg("--dir")
      .arg(&self.dir)
      .arg("--logfile")
      .arg(self.dir.join("redis.log"))
      .stdout(Stdio::null())
      .stderr(stderr)
      .spawn()?;
    self.child = Some(child);
    Ok(())
  }

  /// Waits until our process answers on the port: false if it exited first
  /// (a port was taken).
  fn wait_up(&mut self) -> bool {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
      let child = self.child.as_mut().expect("a spawned node");
      if child.try_wait().ok().flatten().is_some() {
        self.child = None;
        return false;
      }
      let pid = child.id();
      if let Ok(info) = query::<String>(self.port, redis::cmd("INFO").arg("server")) {
        if info_field(&info, "process_id") == Some(pid.to_string()) {
          return true;
        }
      }
      assert!(
        Instant::now() < deadline,
        "{} did not start on port {}",
        server_binary(),
        self.port
      );
      std::thread::sleep(Duration::from_millis(20));
    }
  }

  fn running(&mut self) -> bool {
    matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
  }

  fn kill(&mut self) {
    if let Some(mut child) = self.child.take() {
      let _ = child.kill();
      let _ = child.wait();
    }
  }
}

/// A primary killed since the last `wait_failover`.
struct Killed {
  port: u16,
  slots: Vec<(u16, u16)>,
}

pub struct RedisCluster {
  nodes: Vec<Node>,
  /// The cluster's directory: one subdirectory per node, and `cli.log`.
  dir: PathBuf,
  /// The primaries at start, in port order.
  seeds: Vec<u16>,
  killed: Vec<Killed>,
  /// How long `start` took.
  pub started_in: Duration,
}

impl RedisCluster {
  /// `None` when the server or redis-cli is not installed, outside CI (in
  /// CI it fails the test). Returns once the cluster has settled: every
  /// node says cluster_state:ok and knows every other, every replica's link
  /// is up, and all agree on who serves which slots.
  pub fn start(primaries: usize, replicas: usize) -> Option<RedisCluster> {
    assert!(primaries >= 3, "redis-cli needs at least 3 primaries");
    let begin = Instant::now();
    let cli = cli_binary();
    if let Err(e) = Command::new(&cli)
      .arg("--version")
      .stdout(Stdio::null())
      .stderr(Stdio::null())
      .status()
    {
      return missing(&cli, e);
    }
    let dir = server_dir().expect("a directory for the cluster");
    // Made before anything is started, so whatever fails is killed, and its
    // log printed, by `drop`.
    let mut cluster = RedisCluster {
      nodes: Vec::new(),
      dir,
      seeds: Vec::new(),
      killed: Vec::new(),
      started_in: Duration::ZERO,
    };
    for i in 0..primaries * (1 + replicas) {
      let dir = cluster.dir.join(format!("node-{i}"));
      fs::create_dir_all(&dir).expect("a node's directory");
      let mut up = None;
      for _ in 0..5 {
        let (port, bus_port) = two_free_ports()?;
        let mut node = Node {
          port,
          bus_port,
          dir: dir.clone(),
          child: None,
          id: String::new(),
        };
        if let Err(e) = node.spawn() {
          return missing(&server_binary(), e);
        }
        // Pushed first: a node that never answers is killed by `drop`.
        cluster.nodes.push(node);
        if cluster.nodes.last_mut().unwrap().wait_up() {
          up = Some(());
          break;
        }
        cluster.nodes.pop();
      }
      assert!(
        up.is_some(),
        "{} did not start on free ports (5 attempts):\n{}",
        server_binary(),
        tail(&dir.join("stderr.log"), LOG_TAIL_LINES)
      );
    }

    let cli_log = cluster.dir.join("cli.log");
    let out = File::create(&cli_log).expect("the redis-cli log");
    let mut create = Command::new(&cli)
      .args(["--cluster", "create"])
      .args(
        cluster
          .nodes
          .iter()
          .map(|n| format!("127.0.0.1:{}", n.port)),
      )
      .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
      .stdout(out.try_clone().unwrap())
      .stderr(out)
      .spawn()
      .expect("redis-cli --cluster create");
    let deadline = Instant::now() + CREATE_TIMEOUT;
    let status = loop {
      if let Some(status) = create.try_wait().unwrap() {
        break status;
      }
      if Instant::now() > deadline {
        let _ = create.kill();
        let _ = create.wait();
        panic!(
          "{cli} --cluster create did not finish within {CREATE_TIMEOUT:?}:\n{}",
          tail(&cli_log, LOG_TAIL_LINES)
        );
      }
      std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
      status.success(),
      "{cli} --cluster create failed ({status}):\n{}",
      tail(&cli_log, LOG_TAIL_LINES)
    );

    cluster.wait_for("the cluster settling", SETTLE_TIMEOUT, |c| c.settled());
    for node in &mut cluster.nodes {
      node.id = query(node.port, redis::cmd("CLUSTER").arg("MYID")).expect("CLUSTER MYID");
    }
    let primaries = cluster.primaries();
    let covered: u32 = primaries
      .iter()
      .flat_map(|p| &p.slots)
      .map(|&(a, b)| u32::from(b - a) + 1)
      .sum();
    assert_eq!(covered, u32::from(SLOTS), "the new cluster's slots");
    cluster.seeds = primaries.iter().map(|p| p.port).collect();
    cluster.started_in = begin.elapsed();
    Some(cluster)
  }

  /// Seed URLs: `redis://127.0.0.1:P/` of the primaries at start.
  pub fn urls(&self) -> Vec<String> {
    self
      .seeds
      .iter()
      .map(|p| format!("redis://127.0.0.1:{p}/"))
      .collect()
  }

  /// Every node's port (primaries and replicas), in start order.
  pub fn ports(&self) -> Vec<u16> {
    self.nodes.iter().map(|n| n.port).collect()
  }

  /// The ports of the nodes running now.
  fn live_ports(&mut self) -> Vec<u16> {
    self
      .nodes
      .iter_mut()
      .filter_map(|n| n.running().then_some(n.port))
      .collect()
  }

  fn any_live(&self) -> u16 {
    // `running` needs `&mut`; a node we killed has no child left.
    self
      .nodes
      .iter()
      .find(|n| n.child.is_some())
      .map(|n| n.port)
      .expect("a running node")
  }

  /// CLUSTER NODES as the node at `port` sees it.
  pub fn view(&self, port: u16) -> Vec<NodeView> {
    parse_nodes(
      &query::<String>(port, redis::cmd("CLUSTER").arg("NODES"))
        .unwrap_or_else(|e| panic!("CLUSTER NODES on {port}: {e}")),
    )
  }

  /// The current primaries (failed ones left out), as a live node sees
  /// them, in port order.
  pub fn primaries(&self) -> Vec<Primary> {
    self
      .view(self.any_live())
      .into_iter()
      .filter(|n| n.master && !n.failed)
      .map(|n| Primary {
        port: n.port,
        id: n.id,
        slots: n.slots,
      })
      .collect()
  }

  /// The slot of `key` (CLUSTER KEYSLOT).
  pub fn slot_of(&self, key: &str) -> u16 {
    query(
      self.any_live(),
      redis::cmd("CLUSTER").arg("KEYSLOT").arg(key),
    )
    .expect("CLUSTER KEYSLOT")
  }

  /// The port of the live primary serving `slot` as the node at `port`
  /// sees it.
  fn owner_seen_by(&self, slot: u16, port: u16) -> Option<u16> {
    self
      .view(port)
      .into_iter()
      .find(|n| n.master && !n.failed && n.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
      .map(|n| n.port)
  }

  /// The port of the primary serving `slot` now; `None` while nobody does
  /// (its primary failed and no replica took over yet).
  pub fn owner_of(&self, slot: u16) -> Option<u16> {
    self.owner_seen_by(slot, self.any_live())
  }

  /// SIGKILLs the primary serving `slot`; returns its port.
  /// `wait_failover` then waits for its replica to take over.
  pub fn kill_primary_of_slot(&mut self, slot: u16) -> u16 {
    let port = self
      .owner_of(slot)
      .unwrap_or_else(|| panic!("no primary serves slot {slot}"));
    let me = self
      .view(port)
      .into_iter()
      .find(|n| n.port == port)
      .unwrap();
    let node = self.nodes.iter_mut().find(|n| n.port == port).unwrap();
    node.kill();
    self.killed.push(Killed {
      port,
      slots: me.slots,
    });
    port
  }

  /// Waits until every primary killed since the last call is replaced: each
  /// of its slots served by a live primary in the view of every live node,
  /// and every live node says cluster_state:ok. Panics after 15 s with what
  /// the nodes say. Returns how long it took.
  pub fn wait_failover(&mut self) -> Duration {
    let gone = std::mem::take(&mut self.killed);
    assert!(!gone.is_empty(), "wait_failover: no primary was killed");
    let begin = Instant::now();
    self.wait_for("the failover", Duration::from_secs(15), |c| {
      for port in c.live_ports() {
        let state = c.cluster_state(port)?;
        if state != "ok" {
          return Err(format!("{port} says cluster_state:{state}"));
        }
        for g in &gone {
          for &(from, _) in &g.slots {
            match c.owner_seen_by(from, port) {
              Some(owner) if owner != g.port => {}
              owner => return Err(format!("{port} sees slot {from} on {owner:?}")),
            }
          }
        }
      }
      Ok(())
    });
    begin.elapsed()
  }

  /// Moves `slot`, with its keys, to the primary at `to_port`: IMPORTING on
  /// the target, MIGRATING on the source, MIGRATE of its keys 100 at a
  /// time, then SETSLOT NODE on the target, the source and the other
  /// primaries. Returns when every live primary says `to_port` serves it.
  pub fn migrate_slot(&mut self, slot: u16, to_port: u16) {
    let view = self.view(self.any_live());
    let primaries: Vec<&NodeView> = view.iter().filter(|n| n.master && !n.failed).collect();
    let dst = primaries
      .iter()
      .find(|n| n.port == to_port)
      .unwrap_or_else(|| panic!("migrate_slot: {to_port} is not a live primary"));
    let src_port = self
      .owner_of(slot)
      .unwrap_or_else(|| panic!("migrate_slot: no primary serves slot {slot}"));
    if src_port != to_port {
      let src = primaries.iter().find(|n| n.port == src_port).unwrap();
      let setslot = |port: u16, how: &str, id: &str| {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SETSLOT").arg(slot).arg(how).arg(id);
        query::<()>(port, &cmd).unwrap_or_else(|e| panic!("SETSLOT {slot} {how} on {port}: {e}"));
      };
      setslot(to_port, "IMPORTING", &src.id);
      setslot(src_port, "MIGRATING", &dst.id);
      loop {
        let keys: Vec<String> = query(
          src_port,
          redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100),
        )
        .expect("CLUSTER GETKEYSINSLOT");
        if keys.is_empty() {
          break;
        }
        let mut migrate = redis::cmd("MIGRATE");
        migrate
          .arg("127.0.0.1")
          .arg(to_port)
          .arg("")
          .arg(0)
          .arg(5000)
          .arg("KEYS")
          .arg(&keys);
        query::<()>(src_port, &migrate).unwrap_or_else(|e| panic!("MIGRATE on {src_port}: {e}"));
      }
      setslot(to_port, "NODE", &dst.id);
      setslot(src_port, "NODE", &dst.id);
      for p in &primaries {
        if p.port != to_port && p.port != src_port {
          setslot(p.port, "NODE", &dst.id);
        }
      }
    }
    // Every live node, replicas too: a replica promoted before it learned
    // that its primary took the slot would not serve it (seen once in CI).
    let live: Vec<u16> = view.iter().filter(|n| !n.failed).map(|n| n.port).collect();
    self.wait_for(
      &format!("slot {slot} moving to {to_port}"),
      SETTLE_TIMEOUT,
      |c| {
        for &p in &live {
          match c.owner_seen_by(slot, p) {
            Some(owner) if owner == to_port => {}
            owner => return Err(format!("{p} sees slot {slot} on {owner:?}")),
          }
        }
        Ok(())
      },
    );
  }

  fn cluster_state(&self, port: u16) -> Result<String, String> {
    let info: String =
      query(port, redis::cmd("CLUSTER").arg("INFO")).map_err(|e| format!("{port}: {e}"))?;
    Ok(info_field(&info, "cluster_state").unwrap_or_default())
  }

  /// Every live node says cluster_state:ok, knows every node, has its
  /// replication link up (replicas), and they all see the same topology.
  fn settled(&mut self) -> Result<(), String> {
    let total = self.nodes.len().to_string();
    let mut views = BTreeSet::new();
    for port in self.live_ports() {
      let info: String =
        query(port, redis::cmd("CLUSTER").arg("INFO")).map_err(|e| format!("{port}: {e}"))?;
      let state = info_field(&info, "cluster_state").unwrap_or_default();
      if state != "ok" {
        return Err(format!("{port} says cluster_state:{state}"));
      }
      let known = info_field(&info, "cluster_known_nodes").unwrap_or_default();
      if known != total {
        return Err(format!("{port} knows {known} of {total} nodes"));
      }
      let repl: String =
        query(port, redis::cmd("INFO").arg("replication")).map_err(|e| format!("{port}: {e}"))?;
      if info_field(&repl, "role").as_deref() == Some("slave") {
        let link = info_field(&repl, "master_link_status").unwrap_or_default();
        if link != "up" {
          return Err(format!("replica {port}: master_link_status:{link}"));
        }
      }
      views.insert(self.view(port));
    }
    if views.len() != 1 {
      return Err(format!(
        "the nodes see {} different topologies",
        views.len()
      ));
    }
    Ok(())
  }

  /// Polls `check` until Ok; panics after `timeout` with its last word and
  /// what the nodes say (the logs follow, from `drop`).
  fn wait_for(
    &mut self,
    what: &str,
    timeout: Duration,
    mut check: impl FnMut(&mut Self) -> Result<(), String>,
  ) {
    let deadline = Instant::now() + timeout;
    loop {
      let last = match check(self) {
        Ok(()) => return,
        Err(e) => e,
      };
      if Instant::now() > deadline {
        panic!(
          "{what}: not within {timeout:?} ({last})\n{}",
          self.describe()
        );
      }
      std::thread::sleep(Duration::from_millis(50));
    }
  }

  /// Each node's cluster state, and one live node's CLUSTER NODES.
  fn describe(&mut self) -> String {
    let mut out = String::new();
    let mut shown = false;
    for port in self.ports() {
      if !self.live_ports().contains(&port) {
        out += &format!("  {port}: not running\n");
        continue;
      }
      match self.cluster_state(port) {
        Ok(state) => out += &format!("  {port}: cluster_state:{state}\n"),
        Err(e) => out += &format!("  {e}\n"),
      }
      if !shown {
        if let Ok(nodes) = query::<String>(port, redis::cmd("CLUSTER").arg("NODES")) {
          out += &format!("  CLUSTER NODES on {port}:\n{nodes}");
          shown = true;
        }
      }
    }
    out
  }
}

impl Drop for RedisCluster {
  fn drop(&mut self) {
    for node in &mut self.nodes {
      node.kill();
    }
    if std::thread::panicking() {
      let cli = tail(&self.dir.join("cli.log"), LOG_TAIL_LINES);
      if !cli.is_empty() {
        eprintln!("--- {}: last lines of cli.log ---\n{cli}", cli_binary());
      }
      for node in &self.nodes {
        for name in ["stderr.log", "redis.log"] {
          let lines = tail(&node.dir.join(name), LOG_TAIL_LINES);
          if !lines.is_empty() {
            eprintln!(
              "--- {} (cluster node) on port {}: last lines of {name} ---\n{lines}",
              server_binary(),
              node.port
            );
          }
        }
      }
    }
    let _ = fs::remove_dir_all(&self.dir);
  }
}
