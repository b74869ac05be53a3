//! Simulated fleet sprites for the load bench: each one a member of its own, with a key made
//! here and a certificate the service signed through `fleet_enroll` (as a real sprite is
//! enrolled; only the request travels), and the rustls client configuration its relay would
//! hold. No relay process and no shell: a request goes over a new mutual-TLS connection per
//! request, byte for byte what a relay forwards for one agent connection.

#![allow(dead_code)]

use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use tokio_rustls::rustls::{ClientConfig, ClientConnection, StreamOwned};
use zodex::protocol::{AgentRequest, Response, agent_roundtrip};
use zodex_fleet::{Identity, MemberKey, Name, Replica, Role};

/// One enrolled sprite: its name and its TLS client side (the fleet's CA trusted, its own
/// certificate and key presented).
pub struct SimSprite {
    pub name: String,
    tls: Arc<ClientConfig>,
}

impl SimSprite {
    /// Makes sprite `name`'s key, has the service behind `admin_socket` enrol it in `fleet`
    /// (admin request `fleet_enroll` with the certificate request) and keeps the answer.
    pub fn enrol(admin_socket: &Path, fleet: &str, name: &str) -> SimSprite {
        let identity = Identity::new(
            &Name::parse(fleet).unwrap(),
            Role::Sprite,
            &Name::parse(name).unwrap(),
        );
        let key = MemberKey::generate().unwrap();
        let request = serde_json::json!({
            "op": "fleet_enroll",
            "role": "sprite",
            "name": name,
            "labels": [],
            "request_pem": key.request_pem(&identity).unwrap(),
        });
        let answer =
            zodex::publisher::sockets::admin_call(admin_socket, None, &request.to_string())
                .unwrap_or_else(|e| panic!("enrolling {name}: {e}"));
        assert!(answer.ok, "enrolling {name}: {answer:?}");
        let result = answer.result.unwrap();
        let pem = |field: &str| result[field].as_str().unwrap().to_string();
        let tls = zodex_fleet::tls::client_config(
            &pem("ca_pem"),
            &pem("certificate_pem"),
            &key.key_pem(),
        )
        .unwrap();
        SimSprite {
            name: name.to_string(),
            tls,
        }
    }

    /// One agent request to `replica` over a new mutual-TLS connection; its answer.
    pub fn ask(&self, replica: &Replica, request: &AgentRequest) -> std::io::Result<Response> {
        let tcp = TcpStream::connect(&replica.address)?;
        tcp.set_nodelay(true)?;
        let connection = ClientConnection::new(self.tls.clone(), replica.server_name.clone())
            .map_err(std::io::Error::other)?;
        agent_roundtrip(&mut StreamOwned::new(connection, tcp), request)
    }
}

/// What one load run measured: requests answered by each replica, every request's latency
/// (microseconds) and the run's wall time.
pub struct LoadRun {
    pub per_replica: Vec<usize>,
    pub latencies_us: Vec<f64>,
    pub elapsed: Duration,
}

impl LoadRun {
    pub fn total(&self) -> usize {
        self.per_replica.iter().sum()
    }

    pub fn per_second(&self, answered: usize) -> f64 {
        answered as f64 / self.elapsed.as_secs_f64()
    }

    /// The `q`-quantile (0..=1) of the latencies, in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let mut sorted = self.latencies_us.clone();
        sorted.sort_by(f64::total_cmp);
        let at = ((sorted.len() as f64 - 1.0) * q).round() as usize;
        sorted[at] / 1e3
    }
}

/// Every sprite asking at once, one request after the other, for `length`: sprite `i` asks
/// `replicas[i % replicas.len()]` the request `request(sprite)` and `check` judges each
/// answer (`Err` says what was wrong: the run panics with the first one, so no figure is
/// ever made of errors).
pub fn run_load(
    sprites: &[SimSprite],
    replicas: &[Replica],
    length: Duration,
    request: &(dyn Fn(&SimSprite) -> AgentRequest + Sync),
    check: &(dyn Fn(&SimSprite, &Response) -> Result<(), String> + Sync),
) -> LoadRun {
    // Each thread's (replica index, latencies) — the start is shared so that no sprite runs
    // alone while the others are still being spawned.
    let start = Barrier::new(sprites.len() + 1);
    let mut per_replica = vec![0; replicas.len()];
    let mut latencies_us = Vec::new();
    let began = std::thread::scope(|scope| {
        let threads: Vec<_> = sprites
            .iter()
            .enumerate()
            .map(|(i, sprite)| {
                let replica = i % replicas.len();
                let start = &start;
                scope.spawn(move || {
                    let request = request(sprite);
                    start.wait();
                    let end = Instant::now() + length;
                    let mut times = Vec::new();
                    while Instant::now() < end {
                        let sent = Instant::now();
                        let answer = sprite
                            .ask(&replicas[replica], &request)
                            .unwrap_or_else(|e| panic!("{}: {e}", sprite.name));
                        times.push(sent.elapsed().as_secs_f64() * 1e6);
                        if let Err(wrong) = check(sprite, &answer) {
                            panic!("{}: unexpected answer: {wrong}", sprite.name);
                        }
                    }
                    (replica, times)
                })
            })
            .collect();
        start.wait();
        let began = Instant::now();
        for thread in threads {
            let (replica, times) = thread.join().expect("a simulated sprite failed");
            per_replica[replica] += times.len();
            latencies_us.extend(times);
        }
        began
    });
    LoadRun {
        per_replica,
        latencies_us,
        elapsed: began.elapsed(),
    }
}
