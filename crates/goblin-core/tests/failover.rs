//! FAILOVER (replication/failover.rs): the primary role handed over on Redis's protocol, in
//! every pairing with redis-server (Debian's 7.0) and between goblin-core servers: the replica
//! takes over holding every write, the old primary follows it, writes wait while it happens
//! and run (or are refused) after; TIMEOUT, FORCE and ABORT; every error as redis-server gives
//! it; and clients blocked on a server that starts following a primary are let go, as Redis
//! lets them go.

mod common;

use common::redis_repl::{info_field, info_int, q, reply, wait_info, wait_same};
use common::{temp_path, RedisServer, Server};
use redis::Value;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// An OK reply, as [`reply`] shows it.
const OK: &str = "ok";

/// A fresh working directory for a redis-server (its RDB files stay its own).
fn new_dir(tag: &str) -> String {
    let dir = temp_path(tag);
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_str().unwrap().to_string()
}

/// A redis-server replica of the server on `port`, once its link is up and the primary
/// counts it online (its file delivered).
fn redis_replica(primary: &mut redis::Connection, port: u16) -> (RedisServer, redis::Connection) {
    let dir = new_dir("failover-redis");
    let port = port.to_string();
    let r =
        RedisServer::start_with(&["--dir", &dir, "--replicaof", "127.0.0.1", &port, "--repl-timeout", "5"]);
    let mut c = r.conn();
    wait_info(&mut c, "master_link_status", "up", "the redis-server replica");
    wait_online(primary);
    (r, c)
}

/// A goblin-core replica of the server on `port` (REPLICAOF), once its link is up and the
/// primary counts it online.
fn goblin_replica(primary: &mut redis::Connection, port: u16) -> (Server, redis::Connection) {
    let g = Server::start(&["--save", ""]);
    let mut c = g.conn();
    q(&mut c, &["REPLICAOF", "127.0.0.1", &port.to_string()]);
    wait_info(&mut c, "master_link_status", "up", "the goblin-core replica");
    wait_online(primary);
    (g, c)
}

/// Until the primary counts its replica online (its file delivered).
fn wait_online(primary: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !info_field(primary, "replication", "slave0").is_some_and(|s| s.contains("state=online")) {
        assert!(Instant::now() < deadline, "the primary never counted its replica online");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn fill(c: &mut redis::Connection, tag: &str) {
    for i in 0..100 {
        q(c, &["SET", &format!("{tag}:s:{i}"), &i.to_string()]);
        q(c, &["RPUSH", &format!("{tag}:list"), &i.to_string()]);
        q(c, &["HSET", &format!("{tag}:h"), &format!("f{i}"), &i.to_string()]);
    }
    q(c, &["INCRBY", &format!("{tag}:counter"), "7"]);
    q(c, &["ZADD", &format!("{tag}:z"), "1.5", "m"]);
    q(c, &["XADD", &format!("{tag}:x"), "*", "f", "v"]);
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig} {pid}");
}

/// After FAILOVER, the old primary is a replica of the new one, linked up.
fn wait_switched(old: &mut redis::Connection, new: &mut redis::Connection, new_port: u16) {
    wait_info(new, "role", "master", "the new primary");
    wait_info(old, "role", "slave", "the old primary");
    wait_info(old, "master_port", &new_port.to_string(), "the old primary");
    wait_info(old, "master_link_status", "up", "the old primary");
    wait_info(old, "master_failover_state", "no-failover", "the old primary");
}

#[test]
fn goblin_core_hands_the_primary_role_to_its_redis_server_replica() {
    let g = Server::start(&["--save", ""]);
    let mut gc = g.conn();
    fill(&mut gc, "before");
    let (r, mut rc) = redis_replica(&mut gc, g.port);
    fill(&mut gc, "attached");
    assert_eq!(reply(&mut gc, &["FAILOVER"]), OK);
    wait_switched(&mut gc, &mut rc, r.port);
    // Everything goblin-core acknowledged is on the new primary, and the old one continued
    // the same stream from it (no second full synchronization).
    wait_same(&mut rc, &mut gc, "after the failover");
    assert_eq!(info_int(&mut rc, "stats", "sync_full"), 0, "the new primary sent a whole file");
    assert_eq!(info_int(&mut rc, "stats", "sync_partial_ok"), 1);
    assert_eq!(info_int(&mut gc, "replication", "redis_primary_partial_syncs"), 1);
    assert_eq!(q(&mut rc, &["GET", "attached:counter"]), Value::BulkString(b"7".to_vec()));
    // The roles hold: writes go to redis-server and reach goblin-core.
    assert!(reply(&mut gc, &["SET", "k", "v"]).starts_with("READONLY"), "a write on the old primary");
    fill(&mut rc, "after");
    wait_same(&mut rc, &mut gc, "writes on the new primary");
    assert!(g.log().contains("Failover target 127.0.0.1:"), "{}", g.log());
}

#[test]
fn a_redis_server_primary_hands_over_to_its_goblin_core_replica() {
    let r = RedisServer::start_with(&["--dir", &new_dir("failover-rp")]);
    let mut rc = r.conn();
    fill(&mut rc, "before");
    let (g, mut gc) = goblin_replica(&mut rc, r.port);
    fill(&mut rc, "attached");
    // A replica refuses FAILOVER, as Redis's replica does.
    assert_eq!(reply(&mut gc, &["FAILOVER"]), "ERR FAILOVER is not valid when server is a replica.");
    assert_eq!(reply(&mut rc, &["FAILOVER", "TO", "127.0.0.1", &g.port.to_string()]), OK);
    wait_switched(&mut rc, &mut gc, g.port);
    assert!(g.log().contains("MASTER MODE enabled (failover request from"), "{}", g.log());
    wait_same(&mut gc, &mut rc, "after the failover");
    assert_eq!(q(&mut gc, &["GET", "attached:counter"]), Value::BulkString(b"7".to_vec()));
    fill(&mut gc, "after");
    wait_same(&mut gc, &mut rc, "writes on the new primary");
    // The new primary continued the old one's stream from where it stood (PSYNC2: a replica
    // passes on its primary's stream unchanged, and keeps its ID as the second one).
    assert_eq!(info_int(&mut gc, "replication", "connected_redis_replicas"), 1);
    assert_eq!(info_int(&mut gc, "stats", "sync_full"), 0, "the old primary loaded a whole file");
    assert_eq!(info_int(&mut gc, "stats", "sync_partial_ok"), 1);
}

/// Three goblin-core servers, as Redis's own failover test runs three redis-servers: the
/// primary hands over to one replica, the other replica is pointed at the new primary, and
/// both continue the stream there (PSYNC2), with no file sent; writes then reach both.
#[test]
fn goblin_core_hands_over_to_a_goblin_core_replica() {
    let g1 = Server::start(&["--save", ""]);
    let mut c1 = g1.conn();
    fill(&mut c1, "before");
    let (g2, mut c2) = goblin_replica(&mut c1, g1.port);
    let (_g3, mut c3) = goblin_replica(&mut c1, g1.port);
    fill(&mut c1, "attached");
    q(&mut c1, &["SELECT", "4"]);
    q(&mut c1, &["SET", "in-four", "4"]);
    q(&mut c1, &["MULTI"]);
    q(&mut c1, &["INCR", "tx"]);
    q(&mut c1, &["INCR", "tx"]);
    q(&mut c1, &["EXEC"]);
    q(&mut c1, &["SELECT", "0"]);
    let digest = |c: &mut redis::Connection| q(c, &["DEBUG", "DIGEST"]);
    let target = ["FAILOVER", "TO", "127.0.0.1", &g2.port.to_string(), "TIMEOUT", "30000"];
    assert_eq!(reply(&mut c1, &target), OK);
    wait_switched(&mut c1, &mut c2, g2.port);
    q(&mut c3, &["REPLICAOF", "127.0.0.1", &g2.port.to_string()]);
    wait_info(&mut c3, "master_link_status", "up", "the other replica");
    for c in [&mut c1, &mut c3] {
        wait_same(&mut c2, c, "after the failover");
    }
    assert_eq!(digest(&mut c1), digest(&mut c2));
    assert_eq!(info_int(&mut c2, "stats", "sync_full"), 0, "a whole file was sent");
    assert_eq!(info_int(&mut c2, "stats", "sync_partial_ok"), 2);
    fill(&mut c2, "after");
    q(&mut c2, &["SELECT", "4"]);
    q(&mut c2, &["INCR", "tx"]);
    for c in [&mut c1, &mut c3] {
        wait_same(&mut c2, c, "writes on the new primary");
        assert_eq!(digest(c), digest(&mut c2));
        wait_same_offset(&mut c2, c, "writes on the new primary");
    }
    // No server numbers the new primary's writes under the old primary's lineage: each went
    // on under a successor of it, from the offset where the old primary handed over.
    let old_id = info_field(&mut c2, "replication", "master_replid2").unwrap();
    let ids: Vec<_> = [&mut c1, &mut c2, &mut c3].into_iter().map(lineage).collect();
    for (id, _, second, second_at) in &ids {
        assert_ne!(id, &old_id);
        assert_eq!((second, *second_at), (&old_id, ids[1].3), "{ids:?}");
    }
}

/// Reads a reply from a raw connection if one is there within `wait`.
fn try_read(s: &mut std::net::TcpStream, wait: Duration) -> Option<String> {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 512];
    match s.read(&mut buf) {
        Ok(0) => Some(String::new()),
        Ok(n) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Err(_) => None,
    }
}

#[test]
fn writes_wait_while_a_failover_waits_and_run_when_it_ends() {
    let g = Server::start(&["--save", ""]);
    let mut gc = g.conn();
    fill(&mut gc, "before");
    let (r, _rc) = redis_replica(&mut gc, g.port);
    // A replica that is alive but silent never acknowledges the stream past this write.
    signal(r.pid(), "-STOP");
    q(&mut gc, &["SET", "unacknowledged", "1"]);
    assert_eq!(reply(&mut gc, &["FAILOVER", "TIMEOUT", "4000"]), OK);
    assert_eq!(
        info_field(&mut gc, "replication", "master_failover_state").as_deref(),
        Some("waiting-for-sync")
    );
    let mut w = g.raw();
    w.write_all(b"*3\r\n$3\r\nSET\r\n$4\r\nheld\r\n$1\r\n1\r\n").unwrap();
    let early = try_read(&mut w, Duration::from_millis(300));
    // Still waiting (the timeout has not passed), reads answered, the write not run.
    assert_eq!(
        info_field(&mut gc, "replication", "master_failover_state").as_deref(),
        Some("waiting-for-sync")
    );
    assert_eq!(early, None, "a write ran while the failover waited");
    assert_eq!(q(&mut gc, &["GET", "held"]), Value::Nil);
    assert_eq!(q(&mut gc, &["GET", "before:counter"]), Value::BulkString(b"7".to_vec()));
    assert_eq!(reply(&mut gc, &["FAILOVER"]), "ERR FAILOVER already in progress.");
    // TIMEOUT without FORCE: aborted, still a primary, the held write runs.
    wait_info(&mut gc, "master_failover_state", "no-failover", "the timed-out failover");
    assert_eq!(try_read(&mut w, Duration::from_secs(10)).as_deref(), Some("+OK\r\n"));
    assert_eq!(q(&mut gc, &["GET", "held"]), Value::BulkString(b"1".to_vec()));
    assert_eq!(info_field(&mut gc, "replication", "role").as_deref(), Some("master"));
    assert!(g.log().contains("aborted: Replica never caught up before timeout"), "{}", g.log());
    // FAILOVER ABORT while waiting: the same.
    assert_eq!(reply(&mut gc, &["FAILOVER"]), OK);
    w.write_all(b"*2\r\n$4\r\nINCR\r\n$4\r\nheld\r\n").unwrap();
    assert_eq!(try_read(&mut w, Duration::from_millis(300)), None, "a write ran while the failover waited");
    assert_eq!(reply(&mut gc, &["FAILOVER", "ABORT"]), OK);
    assert_eq!(try_read(&mut w, Duration::from_secs(10)).as_deref(), Some(":2\r\n"));
    assert_eq!(info_field(&mut gc, "replication", "master_failover_state").as_deref(), Some("no-failover"));
    signal(r.pid(), "-CONT");
}

#[test]
fn force_hands_over_to_a_replica_that_had_not_caught_up() {
    let g = Server::start(&["--save", ""]);
    let mut gc = g.conn();
    fill(&mut gc, "before");
    let (r, mut rc) = redis_replica(&mut gc, g.port);
    signal(r.pid(), "-STOP");
    q(&mut gc, &["SET", "late", "1"]);
    let target = ["FAILOVER", "TO", "127.0.0.1", &r.port.to_string(), "TIMEOUT", "500", "FORCE"];
    assert_eq!(reply(&mut gc, &target), OK);
    wait_info(&mut gc, "master_failover_state", "failover-in-progress", "the forced failover");
    // Writes are still held while this server asks the target to take over.
    let mut w = g.raw();
    w.write_all(b"*3\r\n$3\r\nSET\r\n$5\r\nafter\r\n$1\r\n1\r\n").unwrap();
    assert_eq!(try_read(&mut w, Duration::from_millis(300)), None, "a write ran during the failover");
    signal(r.pid(), "-CONT");
    wait_switched(&mut gc, &mut rc, r.port);
    // The held write meets the new role.
    let held = try_read(&mut w, Duration::from_secs(10)).unwrap();
    assert!(held.starts_with("-READONLY"), "{held:?}");
    wait_same(&mut rc, &mut gc, "after the forced failover");
}

/// Every FAILOVER error, and PSYNC FAILOVER's, against redis-server's in the same situation.
#[test]
fn errors_are_redis_servers() {
    let g = Server::start(&["--save", ""]);
    let r = RedisServer::start_with(&["--dir", &new_dir("failover-errors")]);
    let (mut gc, mut rc) = (g.conn(), r.conn());
    let both = |gc: &mut redis::Connection, rc: &mut redis::Connection, args: &[&str]| {
        let (got, want) = (reply(gc, args), reply(rc, args));
        assert_eq!(got, want, "{args:?}");
        got
    };
    // Without replicas.
    for args in [
        &["FAILOVER"][..],
        &["FAILOVER", "ABORT"],
        &["FAILOVER", "ABORT", "x"],
        &["FAILOVER", "bogus"],
        &["FAILOVER", "TO"],
        &["FAILOVER", "TO", "127.0.0.1"],
        &["FAILOVER", "TO", "127.0.0.1", "abc"],
        &["FAILOVER", "TIMEOUT"],
        &["FAILOVER", "TIMEOUT", "x"],
        &["FAILOVER", "TIMEOUT", "0"],
        &["FAILOVER", "TIMEOUT", "-5"],
        &["FAILOVER", "TIMEOUT", "5", "TIMEOUT", "6"],
        &["FAILOVER", "FORCE", "FORCE"],
        &["FAILOVER", "TO", "a", "1", "TO", "b", "2"],
        &["FAILOVER", "FORCE"],
        &["PSYNC", "0123456789012345678901234567890123456789", "1", "FAILOVER"],
    ] {
        both(&mut gc, &mut rc, args);
    }
    // With a redis-server replica each (stopped, so that a failover keeps waiting).
    let (gr, mut grc) = redis_replica(&mut gc, g.port);
    let (rr, mut rrc) = redis_replica(&mut rc, r.port);
    let port_of = |c: &mut redis::Connection| info_field(c, "server", "tcp_port").unwrap();
    let (gr_port, rr_port) = (port_of(&mut grc), port_of(&mut rrc));
    for args in [
        &["FAILOVER", "FORCE"][..],
        &["FAILOVER", "TIMEOUT", "100", "FORCE"],
        &["FAILOVER", "TO", "127.0.0.1", "1", "FORCE"],
        &["FAILOVER", "TO", "127.0.0.1", "1"],
        &["FAILOVER", "TO", "10.9.9.9", "1", "TIMEOUT", "10"],
        &["FAILOVER", "ABORT"],
    ] {
        both(&mut gc, &mut rc, args);
    }
    // PSYNC FAILOVER to a replica with another replication ID.
    both(&mut grc, &mut rrc, &["PSYNC", "0123456789012345678901234567890123456789", "1", "FAILOVER"]);
    // A replica refuses FAILOVER.
    both(&mut grc, &mut rrc, &["FAILOVER"]);
    signal(gr.pid(), "-STOP");
    signal(rr.pid(), "-STOP");
    // A write the stopped replicas cannot acknowledge: the failovers wait.
    q(&mut gc, &["SET", "unacknowledged", "1"]);
    q(&mut rc, &["SET", "unacknowledged", "1"]);
    let ok_g = reply(&mut gc, &["FAILOVER", "TO", "127.0.0.1", &gr_port, "TIMEOUT", "60000"]);
    let ok_r = reply(&mut rc, &["FAILOVER", "TO", "127.0.0.1", &rr_port, "TIMEOUT", "60000"]);
    assert_eq!((ok_g.as_str(), ok_r.as_str()), (OK, OK));
    for args in [
        &["FAILOVER"][..],
        &["FAILOVER", "TO", "127.0.0.1", "1"],
        &["REPLICAOF", "NO", "ONE"],
        &["REPLICAOF", "127.0.0.1", "1"],
        &["PSYNC", "?", "-1"],
        &["INFO", "nonexistent-section"],
    ] {
        both(&mut gc, &mut rc, args);
    }
    assert_eq!(
        info_field(&mut gc, "replication", "master_failover_state").as_deref(),
        Some("waiting-for-sync")
    );
    assert_eq!(
        info_field(&mut rc, "replication", "master_failover_state").as_deref(),
        Some("waiting-for-sync")
    );
    both(&mut gc, &mut rc, &["FAILOVER", "ABORT"]);
    both(&mut gc, &mut rc, &["FAILOVER", "ABORT"]);
    assert_eq!(info_field(&mut gc, "replication", "master_failover_state").as_deref(), Some("no-failover"));
    signal(gr.pid(), "-CONT");
    signal(rr.pid(), "-CONT");
}

/// A server that starts following a primary lets its blocked clients go with Redis's error
/// and closes them; left parked, the primary's pushes would serve them on the replica.
#[test]
fn replicaof_lets_blocked_clients_go() {
    let g = Server::start(&["--save", ""]);
    let mut gc = g.conn();
    let r = RedisServer::start_with(&["--dir", &new_dir("failover-blocked")]);
    let mut rc = r.conn();
    q(&mut gc, &["XADD", "s", "1-1", "f", "v"]);
    let mut blpop = g.raw();
    blpop.write_all(b"*3\r\n$5\r\nBLPOP\r\n$4\r\nlist\r\n$1\r\n0\r\n").unwrap();
    let mut xread = g.raw();
    xread
        .write_all(b"*6\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n$1\r\n0\r\n$7\r\nSTREAMS\r\n$1\r\ns\r\n$1\r\n$\r\n")
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_int(&mut gc, "clients", "blocked_clients") < 2 {
        assert!(Instant::now() < deadline, "the clients never blocked");
        std::thread::sleep(Duration::from_millis(20));
    }
    q(&mut gc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]);
    let want =
        "-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n";
    for (what, s) in [("BLPOP", &mut blpop), ("XREAD", &mut xread)] {
        let mut got = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.read_to_end(&mut got).unwrap_or_else(|e| panic!("{what}: the connection stayed open: {e}"));
        assert_eq!(String::from_utf8_lossy(&got), want, "{what}");
    }
    wait_info(&mut gc, "master_link_status", "up", "the replica");
    q(&mut rc, &["RPUSH", "list", "a", "b"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while q(&mut gc, &["LLEN", "list"]) != Value::Int(2) {
        assert!(Instant::now() < deadline, "the primary's push never arrived whole");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info_int(&mut gc, "clients", "blocked_clients"), 0);
    assert_eq!(q(&mut gc, &["PING"]), Value::SimpleString("PONG".into()));
}

/// A primary cut off while its redis-server replica was promoted (Sentinel's failover), then
/// pointed at it: with nothing written since, it continues its own stream from the promoted
/// server's backlog instead of loading a whole file; with writes of its own since, those are
/// not in the promoted server's history, and it loads the file (losing them, as Redis does).
#[test]
fn a_demoted_primary_continues_its_stream_from_the_promoted_replica() {
    for write_after in [false, true] {
        let g = Server::start(&["--save", ""]);
        let mut gc = g.conn();
        fill(&mut gc, "before");
        let (r, mut rc) = redis_replica(&mut gc, g.port);
        fill(&mut gc, "attached");
        wait_same(&mut gc, &mut rc, "before the promotion");
        q(&mut rc, &["REPLICAOF", "NO", "ONE"]);
        if write_after {
            q(&mut gc, &["SET", "lost", "1"]);
        }
        q(&mut gc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]);
        wait_info(&mut gc, "master_link_status", "up", "the demoted primary");
        fill(&mut rc, "after");
        wait_same(&mut rc, &mut gc, "after the demotion");
        let (full, partial) =
            (info_int(&mut rc, "stats", "sync_full"), info_int(&mut rc, "stats", "sync_partial_ok"));
        if write_after {
            assert_eq!(
                (full, partial),
                (1, 0),
                "a primary that wrote more continued a stream it diverged from"
            );
            assert_eq!(q(&mut gc, &["GET", "lost"]), Value::Nil);
        } else {
            assert_eq!((full, partial), (0, 1), "the demoted primary loaded a whole file");
            assert_eq!(info_int(&mut gc, "replication", "redis_primary_partial_syncs"), 1);
        }
    }
}

/// A chain redis-server -> goblin-core -> redis-server: the middle server passes the stream
/// on unchanged (the last replica holds the first one's ID and offset), and when it is
/// promoted its replica continues under the new ID without a file.
#[test]
fn a_chain_through_goblin_core_keeps_the_primarys_stream() {
    let r = RedisServer::start_with(&["--dir", &new_dir("failover-chain")]);
    let mut rc = r.conn();
    fill(&mut rc, "before");
    let (g, mut gc) = goblin_replica(&mut rc, r.port);
    q(&mut rc, &["SELECT", "3"]);
    q(&mut rc, &["SET", "in-three", "3"]);
    let (_s, mut sc) = redis_replica(&mut gc, g.port);
    fill(&mut rc, "chained");
    q(&mut rc, &["SELECT", "3"]);
    q(&mut rc, &["INCR", "in-three"]);
    wait_same(&mut rc, &mut sc, "through the chain");
    let id = |c: &mut redis::Connection| info_field(c, "replication", "master_replid").unwrap();
    assert_eq!(id(&mut sc), id(&mut rc), "the last replica's stream is the primary's");
    wait_same_offset(&mut rc, &mut sc, "through the chain");
    let full = info_int(&mut gc, "stats", "sync_full");
    q(&mut gc, &["REPLICAOF", "NO", "ONE"]);
    wait_info(&mut sc, "master_link_status", "up", "the last replica after the promotion");
    fill(&mut gc, "promoted");
    wait_same(&mut gc, &mut sc, "after the promotion");
    assert_eq!(info_int(&mut gc, "stats", "sync_full"), full, "the promoted server sent a file");
    assert_eq!(info_int(&mut gc, "stats", "sync_partial_ok"), 1);
    assert_eq!(info_field(&mut sc, "replication", "master_replid2").as_deref(), Some(id(&mut rc).as_str()));
}

/// CLIENT KILL reaches the link to the primary, as it reaches Redis's master client (by its
/// address in the old form, by TYPE master in the new): the link drops and is continued from
/// the primary's backlog.
#[test]
fn client_kill_drops_the_link_to_the_primary() {
    let r = RedisServer::start_with(&["--dir", &new_dir("failover-kill")]);
    let mut rc = r.conn();
    fill(&mut rc, "before");
    let (_g, mut gc) = goblin_replica(&mut rc, r.port);
    let primary = format!("127.0.0.1:{}", r.port);
    assert_eq!(reply(&mut gc, &["CLIENT", "KILL", "127.0.0.1:1"]), "ERR No such client");
    assert_eq!(reply(&mut gc, &["CLIENT", "KILL", &primary]), OK);
    fill(&mut rc, "after-one");
    wait_same(&mut rc, &mut gc, "after the first kill");
    assert_eq!(reply(&mut gc, &["CLIENT", "KILL", "TYPE", "master"]), "int(1)");
    fill(&mut rc, "after-two");
    wait_same(&mut rc, &mut gc, "after the second kill");
    assert_eq!(info_int(&mut rc, "stats", "sync_partial_ok"), 2, "each kill continued the stream");
    assert_eq!(info_int(&mut rc, "stats", "sync_full"), 1);
    assert_eq!(info_int(&mut gc, "replication", "redis_primary_partial_syncs"), 2);
}

/// The (replication ID, offset) pair a server's INFO names as its own, and its second one.
fn lineage(c: &mut redis::Connection) -> (String, i64, String, i64) {
    (
        info_field(c, "replication", "master_replid").unwrap(),
        info_int(c, "replication", "master_repl_offset"),
        info_field(c, "replication", "master_replid2").unwrap(),
        info_int(c, "replication", "second_repl_offset"),
    )
}

/// Until the two servers name the same offset (their INFO `master_repl_offset`), as Redis's
/// own tests wait for a replica (`wait_for_ofs_sync`).
fn wait_same_offset(primary: &mut redis::Connection, replica: &mut redis::Connection, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (p, r) = (lineage(primary), lineage(replica));
        if p.1 == r.1 {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: the offsets never met: primary {p:?}, replica {r:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A goblin-core replica of a goblin-core primary (REPLICAOF) takes the primary's lineage from
/// the file of its full synchronization and numbers every mutation of the stream as the
/// primary does, so both name the same replication ID and offset, as a Redis replica and its
/// primary do (Redis's `wait_for_ofs_sync` works on them). A key past its deadline in the file
/// is kept until the primary's DEL, which then counts as there. Promoted, the replica goes on
/// under a successor (the primary's ID kept as the second); a replica that cannot apply a
/// command as the primary did (a database it lacks) leaves the primary's lineage for one of its
/// own instead of numbering another history under it.
#[test]
fn a_goblin_core_replica_numbers_its_goblin_core_primarys_writes_as_its_primary_does() {
    let g1 = Server::start(&["--save", "", "--enable-debug-command", "yes"]);
    let mut c1 = g1.conn();
    fill(&mut c1, "before");
    // A key past its deadline goes into the file: the replica keeps it until the DEL.
    q(&mut c1, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    q(&mut c1, &["SET", "short", "v", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    let (g2, mut c2) = goblin_replica(&mut c1, g1.port);
    assert!(g2.log().contains("(the primary's)"), "{}", g2.log());
    let (id1, ..) = lineage(&mut c1);
    assert_eq!(lineage(&mut c2).0, id1, "the replica's lineage is its primary's");
    q(&mut c1, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    fill(&mut c1, "attached");
    q(&mut c1, &["SELECT", "4"]);
    q(&mut c1, &["SET", "in-four", "4"]);
    q(&mut c1, &["MULTI"]);
    q(&mut c1, &["INCR", "tx"]);
    q(&mut c1, &["RPUSH", "l", "a", "b"]);
    q(&mut c1, &["EXEC"]);
    q(&mut c1, &["SELECT", "0"]);
    q(&mut c1, &["FLUSHDB"]);
    fill(&mut c1, "flushed");
    wait_same(&mut c1, &mut c2, "after the writes");
    wait_same_offset(&mut c1, &mut c2, "after the writes");
    assert_eq!(lineage(&mut c2), lineage(&mut c1));
    assert_eq!(q(&mut c2, &["EXISTS", "short"]), Value::Int(0));
    assert!(!g2.log().contains("does not number writes as its primary"), "{}", g2.log());

    // A replica without database 9: the primary's write there is refused, and from it on
    // this replica's offsets are not its primary's.
    let g3 = Server::start(&["--save", "", "--databases", "8"]);
    let mut c3 = g3.conn();
    q(&mut c3, &["REPLICAOF", "127.0.0.1", &g1.port.to_string()]);
    wait_info(&mut c3, "master_link_status", "up", "the replica with 8 databases");
    assert_eq!(lineage(&mut c3).0, id1);
    q(&mut c1, &["SELECT", "9"]);
    q(&mut c1, &["SET", "in-nine", "9"]);
    q(&mut c1, &["SELECT", "0"]);
    q(&mut c1, &["SET", "after-nine", "1"]);
    // (The SELECT and the SET.)
    wait_info(&mut c3, "redis_primary_rejected_commands", "2", "the replica with 8 databases");
    wait_same(&mut c1, &mut c2, "the replica with every database");
    let deadline = Instant::now() + Duration::from_secs(10);
    while q(&mut c3, &["EXISTS", "after-nine"]) != Value::Int(1) {
        assert!(Instant::now() < deadline, "the replica with 8 databases stopped following");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (id3, offset3, ..) = lineage(&mut c3);
    assert_ne!(id3, id1, "a replica that skipped a write kept numbering under its primary's lineage");
    assert_eq!(offset3 + 1, lineage(&mut c1).1, "the refused write is the one mutation fewer");
    assert!(g3.log().contains("does not number writes as its primary any more"), "{}", g3.log());
    assert_eq!(lineage(&mut c2).0, id1, "the replica with every database left the lineage");

    // Promoted, the replica numbers its own writes under a successor of the lineage.
    wait_same_offset(&mut c1, &mut c2, "before the promotion");
    let (_, at, ..) = lineage(&mut c2);
    q(&mut c2, &["REPLICAOF", "NO", "ONE"]);
    let (id2, offset2, second, second_at) = lineage(&mut c2);
    assert_ne!(id2, id1);
    assert_eq!((offset2, second.as_str(), second_at), (at, id1.as_str(), at + 1));
    q(&mut c2, &["SET", "own", "1"]);
    assert_eq!(lineage(&mut c2).1, at + 1);
}

/// A chain redis-server -> goblin-core -> goblin-core: the middle server applies Redis's
/// commands, not canonical mutations, so it does not number them one mutation per command (an
/// MSET of two keys is two mutations here), and the file it sends its own replica names no
/// lineage: the last server starts one of its own rather than take a numbering its stream does
/// not follow.
#[test]
fn a_replica_below_a_replica_of_redis_starts_its_own_lineage() {
    let r = RedisServer::start_with(&["--dir", &new_dir("failover-chain-goblin")]);
    let mut rc = r.conn();
    fill(&mut rc, "before");
    let (g, mut gc) = goblin_replica(&mut rc, r.port);
    let (last, mut lc) = goblin_replica(&mut gc, g.port);
    q(&mut rc, &["MSET", "m1", "1", "m2", "2"]);
    fill(&mut rc, "chained");
    wait_same(&mut rc, &mut lc, "through the chain");
    assert!(!last.log().contains("(the primary's)"), "{}", last.log());
    assert!(!last.log().contains("does not number writes"), "{}", last.log());
    let id = |c: &mut redis::Connection| info_field(c, "replication", "master_replid").unwrap();
    assert_ne!(id(&mut lc), id(&mut gc));
}

/// A goblin-core replica of a goblin-core primary restarted from its own dump.rdb continues the
/// primary's stream (PSYNC) and goes on numbering its writes as the primary does: its file said
/// it was in step (`goblin-in-step`), and the load resumed the primary's lineage.
#[test]
fn a_replica_restarted_from_its_file_stays_in_step_with_its_goblin_core_primary() {
    let g1 = Server::start(&["--save", ""]);
    let mut c1 = g1.conn();
    fill(&mut c1, "before");
    let dir = temp_path("in-step-restart");
    std::fs::create_dir_all(&dir).unwrap();
    let primary = g1.port.to_string();
    let args = ["--save", "3600 1", "--replicaof", "127.0.0.1", &primary];
    let mut g2 = Server::start_in(Some(&dir), &args);
    let port = g2.port.to_string();
    let mut c2 = g2.conn();
    wait_info(&mut c2, "master_link_status", "up", "the first sync");
    fill(&mut c1, "attached");
    wait_same(&mut c1, &mut c2, "before the restart");
    wait_same_offset(&mut c1, &mut c2, "before the restart");
    let _ = redis::cmd("SHUTDOWN").query::<()>(&mut c2);
    assert!(g2.wait_exit(Duration::from_secs(20)).expect("SHUTDOWN must exit").success());
    fill(&mut c1, "while-down");
    let g2 = Server::start_in(Some(&dir), &[&args[..], &["--port", &port, "--bind", "127.0.0.1"]].concat());
    let mut c2 = g2.conn();
    wait_info(&mut c2, "master_link_status", "up", "the continuation");
    assert_eq!(info_int(&mut c2, "replication", "redis_primary_partial_syncs"), 1, "{}", g2.log());
    fill(&mut c1, "after");
    wait_same(&mut c1, &mut c2, "after the restart");
    wait_same_offset(&mut c1, &mut c2, "after the restart");
    assert_eq!(lineage(&mut c2), lineage(&mut c1), "{}", g2.log());
    assert!(!g2.log().contains("does not number writes"), "{}", g2.log());
}
