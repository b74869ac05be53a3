//! The agent socket under a hostile agent: connections that drip their bundle body or stall in
//! their header, from several processes at once, must not delay an operator command or a
//! well-behaved agent request; a slow body is cut off by its deadline and leaves no spool file;
//! an exhausted spool budget and a process over its share are answered "busy" at once.
//!
//! Several hostile processes are this test binary run again as a child (`child_hostile_client`, which
//! does nothing unless the parent sets its environment variable).

use crate::support;

use std::io::{BufRead, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::devhub::commit_file;
use support::rig::Rig;
use support::rig::message;
use zodex::protocol::{
    AGENT_VERSION, AgentHeader, AgentRequest, ErrorKind, PushUpdate, Response, read_response,
};

const HOUR: Duration = Duration::from_secs(3600);
/// The largest bundle the default policy admits (so a drip holds as much budget as it can).
const CEILING: u64 = 134_217_728;
/// Set (to `socket|drips|stalls|seconds`) only in a child run by the availability test.
const CHILD_ENV: &str = "AGENT_SOCKET_TEST_HOSTILE_CHILD";
/// The hostile client's child entry (`support::child`).
const HOSTILE_CHILD: &str = "agent_socket::child_hostile_client";

fn socket(rig: &Rig) -> std::path::PathBuf {
    rig.dir.path().join("agent.sock")
}

/// A publish needs no grant: admitted on the declared request, then its body is awaited.
fn publish_request() -> AgentRequest {
    AgentRequest::PublishPr {
        repo: "demo/app".into(),
        title: "drip".into(),
        body: String::new(),
        base: None,
        draft: false,
        head: "1111111111111111111111111111111111111111".into(),
    }
}

/// The header and metadata of `request`, declaring `bundle_len` body bytes.
fn head(request: &AgentRequest, bundle_len: u64) -> Vec<u8> {
    let metadata = serde_json::to_vec(request).unwrap();
    let mut bytes = AgentHeader {
        version: AGENT_VERSION,
        metadata_len: metadata.len() as u32,
        bundle_len,
    }
    .encode()
    .to_vec();
    bytes.extend_from_slice(&metadata);
    bytes
}

fn answer(stream: &mut UnixStream, within: Duration) -> Response {
    stream.set_read_timeout(Some(within)).unwrap();
    read_response(stream).unwrap()
}

fn spool_files(rig: &Rig) -> Vec<String> {
    std::fs::read_dir(rig.dir.path().join("state/tmp"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("bundle-"))
                .collect()
        })
        .unwrap_or_default()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What one hostile process holds: the connections the daemon kept, and the answers of those it
/// turned away at once.
struct Hostile {
    held: Vec<UnixStream>,
    /// How many of `held` are drips (the others stalled in their header).
    held_drips: usize,
    turned_away: Vec<Response>,
}

/// Opens `drips` publishes declaring [`CEILING`] body bytes (one byte sent) and `stalls`
/// connections that send three header bytes and nothing more.
fn open_hostile(socket: &Path, drips: usize, stalls: usize) -> Hostile {
    let mut open = Vec::new();
    for i in 0..drips + stalls {
        let Ok(mut stream) = UnixStream::connect(socket) else {
            continue;
        };
        let bytes = if i < drips {
            let mut bytes = head(&publish_request(), CEILING);
            bytes.push(0);
            bytes
        } else {
            head(&publish_request(), CEILING)[..3].to_vec()
        };
        let _ = stream.write_all(&bytes);
        open.push((i < drips, stream));
    }
    // Turned-away connections were answered at once; give the daemon a moment to answer the
    // ones it refuses after reading their header.
    std::thread::sleep(Duration::from_secs(1));
    let mut hostile = Hostile {
        held: Vec::new(),
        held_drips: 0,
        turned_away: Vec::new(),
    };
    for (is_drip, mut stream) in open {
        stream.set_nonblocking(true).unwrap();
        let mut first = [0u8; 1];
        let probe = stream.read(&mut first);
        stream.set_nonblocking(false).unwrap();
        match probe {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                hostile.held.push(stream);
                hostile.held_drips += usize::from(is_drip);
            }
            _ => {
                stream
                    .set_read_timeout(Some(Duration::from_secs(1)))
                    .unwrap();
                let mut rest = (&first[..]).chain(&mut stream);
                hostile.turned_away.push(read_response(&mut rest).unwrap());
            }
        }
    }
    hostile
}

/// One byte every two seconds on every held connection, until `until`.
fn drip(held: &mut [UnixStream], until: Instant) {
    while Instant::now() < until {
        for stream in held.iter_mut() {
            let _ = stream.write_all(&[0]);
        }
        std::thread::sleep(Duration::from_secs(2).min(until - Instant::now().min(until)));
    }
}

#[test]
#[ignore = "child process entry: started by its parent test"]
fn child_hostile_client() {
    support::child::enter(HOSTILE_CHILD);
    let spec = std::env::var(CHILD_ENV).expect("the hostile client's orders");
    let parts: Vec<&str> = spec.split('|').collect();
    let [socket, drips, stalls, seconds] = parts[..] else {
        panic!("bad {CHILD_ENV}: {spec}");
    };
    let mut hostile = open_hostile(
        Path::new(socket),
        drips.parse().unwrap(),
        stalls.parse().unwrap(),
    );
    let busy = hostile
        .turned_away
        .iter()
        .filter(|r| message(r).contains("busy"))
        .count();
    println!(
        "ready held={} drips={} busy={busy}",
        hostile.held.len(),
        hostile.held_drips,
    );
    std::io::stdout().flush().unwrap();
    let until = Instant::now() + Duration::from_secs(seconds.parse().unwrap());
    drip(&mut hostile.held, until);
}

/// Starts this test binary as a hostile child process; returns it once its connections are
/// open, with what it printed.
fn spawn_hostile(
    rig: &Rig,
    drips: usize,
    stalls: usize,
    seconds: u64,
) -> (std::process::Child, String) {
    let mut child = support::child::command(HOSTILE_CHILD)
        .env(
            CHILD_ENV,
            format!("{}|{drips}|{stalls}|{seconds}", socket(rig).display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.starts_with("ready"))
        .expect("the hostile child reports ready");
    (child, ready)
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let out = f();
    (out, started.elapsed())
}

#[test]
fn dripping_and_stalled_connections_delay_neither_operators_nor_other_agent_requests() {
    let rig = Rig::start(HOUR);
    rig.grant_push("demo/app");
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    let push = |branch: &str| {
        commit_file(&app, &format!("{branch}.txt"), branch.as_bytes(), branch);
        let out = rig.agent_git(
            &app,
            &["push", "origin", &format!("HEAD:refs/heads/{branch}")],
        );
        assert!(
            out.status.success(),
            "{branch}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            rig.log()
        );
    };
    let ((), baseline_push) = timed(|| push("before"));

    // Three hostile processes (two children and this one), each trying 24 drips of a
    // 128 MiB body and 8 stalled headers: 96 connections.
    let children: Vec<_> = (0..2).map(|_| spawn_hostile(&rig, 24, 8, 20)).collect();
    let mut mine = open_hostile(&socket(&rig), 24, 8);
    // One process holds at most its share (8 connections, 2 of them bodies); the rest were
    // answered at once, saying why.
    for (_, ready) in &children {
        let field = |name: &str| -> usize {
            let value = ready.split(' ').find_map(|f| f.strip_prefix(name));
            value.unwrap().parse().unwrap()
        };
        assert!(field("held=") <= 8 && field("drips=") <= 2, "{ready}");
        assert!(field("held=") + field("busy=") == 32, "{ready}");
    }
    assert!(mine.held.len() <= 8 && mine.held_drips <= 2);
    assert!(
        mine.held_drips >= 1,
        "a drip is held: {:?}",
        mine.turned_away
    );
    assert_eq!(mine.held.len() + mine.turned_away.len(), 32);
    for refusal in &mine.turned_away {
        let error = refusal.error.as_ref().unwrap();
        assert_eq!(error.kind, ErrorKind::Conflict, "{error:?}");
        assert!(error.message.contains("busy"), "{error:?}");
        assert!(error.message.contains("try again"), "{error:?}");
    }
    let drip_until = Instant::now() + Duration::from_secs(15);
    let mut held = std::mem::take(&mut mine.held);
    let dripper = std::thread::spawn(move || {
        drip(&mut held, drip_until);
        held
    });

    for round in 0..2 {
        let (status, admin_took) = timed(|| rig.admin(r#"{"op":"status"}"#));
        assert_eq!(status["ok"], true, "{status}");
        let (out, status_took) = timed(|| rig.agent(work.path(), &["status"]));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ((answer, stderr), get_took) = timed(|| rig.get("app"));
        assert!(answer.contains("password="), "{stderr}");
        for (what, took) in [
            ("operator status", admin_took),
            ("agent status", status_took),
            ("credential get", get_took),
        ] {
            assert!(took < Duration::from_secs(1), "{what} took {took:?}");
        }

        let ((), took) = timed(|| push(&format!("during-{round}")));
        assert!(
            took < baseline_push + Duration::from_secs(2),
            "a small push took {took:?} under attack, {baseline_push:?} before"
        );
        eprintln!(
            "under attack, round {round}: operator status {admin_took:?}, agent status {status_took:?}, credential get {get_took:?}, small push {took:?} (before the attack: {baseline_push:?})"
        );
        std::thread::sleep(Duration::from_secs(2));
    }

    // The drips were cut off by their pace (the default grace is 10 s) and left no file.
    let held = dripper.join().unwrap();
    for mut stream in held {
        let cut = answer(&mut stream, Duration::from_secs(5));
        let text = message(&cut);
        assert!(
            text.contains("arrived too slowly") || text.contains("no complete request header"),
            "{cut:?}"
        );
    }
    for (mut child, _) in children {
        let _ = child.kill();
        let _ = child.wait();
    }
    wait_until("no spool file is left", || spool_files(&rig).is_empty());
}

#[test]
fn a_slow_body_is_cut_off_by_its_deadline_and_its_spool_removed() {
    let rig = Rig::start_with(
        HOUR,
        "[agent_limits]\nbody_grace_seconds = 1\nbody_min_kib_per_second = 64\n",
    );
    let mut stream = UnixStream::connect(socket(&rig)).unwrap();
    let mut bytes = head(&publish_request(), 100_000);
    bytes.extend_from_slice(&[0u8; 10]);
    stream.write_all(&bytes).unwrap();
    let started = Instant::now();
    wait_until("the body is being spooled", || {
        !spool_files(&rig).is_empty()
    });
    let mut writer = stream.try_clone().unwrap();
    let dripper = std::thread::spawn(move || {
        // One byte every 300 ms: far below 64 KiB/s.
        for _ in 0..40 {
            if writer.write_all(&[0]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    let cut = answer(&mut stream, Duration::from_secs(10));
    let took = started.elapsed();
    let error = cut.error.as_ref().expect("an error");
    assert_eq!(error.kind, ErrorKind::Usage);
    assert!(error.message.contains("arrived too slowly"), "{error:?}");
    assert!(error.message.contains("64 KiB/s"), "{error:?}");
    assert!(error.message.contains("push again"), "{error:?}");
    assert!(
        took < Duration::from_secs(4),
        "cut off after {took:?}, grace 1 s"
    );
    assert!(spool_files(&rig).is_empty(), "{:?}", spool_files(&rig));
    drop(stream);
    dripper.join().unwrap();
}

#[test]
fn an_exhausted_spool_budget_is_answered_busy_at_once() {
    let rig = Rig::start_with(HOUR, "[agent_limits]\nspool_mib = 1\n");
    // Holds 700 000 of the 1 048 576 bytes while it drips.
    let mut holder = UnixStream::connect(socket(&rig)).unwrap();
    let mut bytes = head(&publish_request(), 700_000);
    bytes.push(0);
    holder.write_all(&bytes).unwrap();
    wait_until("the first body is being spooled", || {
        !spool_files(&rig).is_empty()
    });

    let mut second = UnixStream::connect(socket(&rig)).unwrap();
    second
        .write_all(&head(&publish_request(), 700_000))
        .unwrap();
    let started = Instant::now();
    let busy = answer(&mut second, Duration::from_secs(5));
    let took = started.elapsed();
    let error = busy.error.as_ref().expect("busy");
    assert_eq!(error.kind, ErrorKind::Conflict, "{error:?}");
    assert!(error.message.contains("busy"), "{error:?}");
    assert!(error.message.contains("try again"), "{error:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(spool_files(&rig).len(), 1, "nothing spooled for the second");

    // A body larger than the whole budget can never be received: said so, not "busy".
    let mut huge = UnixStream::connect(socket(&rig)).unwrap();
    huge.write_all(&head(&publish_request(), 2 << 20)).unwrap();
    let refused = answer(&mut huge, Duration::from_secs(5));
    assert!(
        message(&refused).contains("over zodex-prd's spool budget"),
        "{refused:?}"
    );

    // Once the first ends, its share is back: a push of the same size is received in full
    // (and then refused as not being a bundle).
    drop(holder);
    wait_until("the first spool is removed", || {
        spool_files(&rig).is_empty()
    });
    rig.grant_push("demo/app");
    let push = AgentRequest::Push {
        repo: "demo/app".into(),
        updates: vec![PushUpdate {
            dst: "refs/heads/x".into(),
            new: Some("1111111111111111111111111111111111111111".into()),
            force: false,
            lease: None,
        }],
        atomic: false,
        dry_run: false,
    };
    let mut third = UnixStream::connect(socket(&rig)).unwrap();
    let mut bytes = head(&push, 700_000);
    bytes.extend(std::iter::repeat_n(0u8, 700_000));
    third.write_all(&bytes).unwrap();
    third.shutdown(std::net::Shutdown::Write).unwrap();
    let received = answer(&mut third, Duration::from_secs(30));
    assert!(
        !message(&received).contains("busy") && !received.ok,
        "{received:?}"
    );
    assert!(
        message(&received).contains("not a git bundle"),
        "{received:?}"
    );
}

#[test]
fn one_process_gets_its_share_of_connections_and_a_stalled_header_is_cut_off() {
    let rig = Rig::start_with(
        HOUR,
        "[agent_limits]\nconnections_per_process = 2\nrequest_seconds = 2\n",
    );
    // Two stalled connections the daemon holds. The rig's start-up probe (a connection from
    // this very process) may still hold a share for a moment, and then one of them is told
    // "busy": keep only those with no answer after the daemon has had time to accept them.
    let mut held: Vec<(UnixStream, Instant)> = Vec::new();
    while held.len() < 2 {
        assert!(
            held.is_empty() || held[0].1.elapsed() < Duration::from_secs(1),
            "could not hold two stalled connections"
        );
        held.push((UnixStream::connect(socket(&rig)).unwrap(), Instant::now()));
        if held.len() == 2 {
            std::thread::sleep(Duration::from_millis(200));
            held.retain(|(stream, _)| {
                stream.set_nonblocking(true).unwrap();
                let unanswered = matches!(
                    (&*stream).read(&mut [0u8; 1]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
                );
                stream.set_nonblocking(false).unwrap();
                unanswered
            });
        }
    }
    let started = held[0].1;
    let mut stalls: Vec<UnixStream> = held.into_iter().map(|(stream, _)| stream).collect();
    let mut third = UnixStream::connect(socket(&rig)).unwrap();
    // Answered at once, not queued: a queued connection would be served only after the stalls
    // are cut (2 s) and then be cut itself, never told "busy". The wait is generous for a
    // loaded machine; the message is what proves it.
    let busy = answer(&mut third, Duration::from_secs(5));
    let text = message(&busy);
    assert!(
        text.contains(&format!(
            "process {} already has 2 requests open",
            std::process::id()
        )),
        "{busy:?}\n{}",
        rig.log()
    );

    // Another process is served meanwhile.
    let work = tempfile::tempdir().unwrap();
    let (out, took) = timed(|| rig.agent(work.path(), &["status"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < Duration::from_secs(1), "{took:?}");

    // The stalled headers are cut off at the request deadline, which frees the share.
    for stream in &mut stalls {
        let cut = answer(stream, Duration::from_secs(10));
        assert!(
            message(&cut).contains("no complete request header and metadata within 2 seconds"),
            "{cut:?}"
        );
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let mut again = UnixStream::connect(socket(&rig)).unwrap();
    again.write_all(&head(&AgentRequest::Ping, 0)).unwrap();
    let pong = answer(&mut again, Duration::from_secs(5));
    assert!(pong.ok, "{pong:?}");
}
