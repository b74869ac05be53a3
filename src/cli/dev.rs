//! `zodex dev up|down`: the local installation on embedded defaults, and what it prints.

use super::{EXIT_OK, print_failure};
use crate::operator::dev;
use crate::operator::registry::Registry;
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum DevCommand {
    /// Start everything locally, as the current user.
    Up {
        /// Where to keep the installation (default: $ZODEX_HOME/dev, ZODEX_HOME defaulting to ~/.zodex).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Keep the publisher's state in a private PostgreSQL server (the machine's own
        /// install: initdb and pg_ctl in the installation directory, a Unix socket of its own)
        /// instead of SQLite.
        #[arg(long)]
        postgres: bool,
        #[arg(long)]
        json: bool,
    },
    /// A whole fleet locally: replicas of the service, sprites with their relays, the
    /// operator enrolled (docs/fleet.md).
    Fleet {
        #[command(subcommand)]
        command: DevFleetCommand,
    },
    /// Run the local GitHub stand-in in the foreground (what `dev up` starts in the background).
    #[command(hide = true)]
    Devhub {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value_t = 0)]
        api_port: u16,
        #[arg(long, default_value_t = 0)]
        git_port: u16,
    },
    /// Stop what `dev up` started.
    Down {
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum DevFleetCommand {
    /// Start a fleet on this machine, as the current user: devhub, a private PostgreSQL, the
    /// fleet's CA, replicas on loopback ports, sprites with their relays; the operator is
    /// enrolled and the fleet registered as `dev-fleet`, so `zodex fleet …` works at once.
    Up {
        /// Where to keep it (default: $ZODEX_HOME/dev-fleet).
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=16))]
        replicas: u16,
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(0..=64))]
        sprites: u16,
        /// The state in a Patroni cluster (two PostgreSQL nodes, etcd, synchronous mode)
        /// instead of one server: `zodex dev fleet failover` then loses its leader. Needs
        /// Debian's patroni and etcd-server packages.
        #[arg(long)]
        ha: bool,
        #[arg(long)]
        json: bool,
    },
    /// Lose the machine of the `--ha` cluster's leader (Patroni and PostgreSQL killed): Patroni
    /// promotes the synchronous standby and the replicas go on with it; the lost node rejoins
    /// as a standby.
    Failover {
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Stop what `dev fleet up` started (its files stay).
    Down {
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

pub fn dev_command(command: DevCommand, registry: &Registry) -> i32 {
    match command {
        DevCommand::Fleet { command } => dev_fleet(command, registry),
        DevCommand::Up {
            dir,
            postgres,
            json,
        } => {
            let dir = dir.unwrap_or_else(dev::default_dir);
            match dev::up(&dir, registry, postgres) {
                Ok(install) if json => super::print_json_ok(&install),
                Ok(install) => {
                    println!("{}", render_dev_up(&install));
                    EXIT_OK
                }
                Err(e) => print_failure(&e, json),
            }
        }
        DevCommand::Devhub {
            dir,
            api_port,
            git_port,
        } => match dev::serve_devhub(dir, api_port, git_port) {
            Ok(()) => EXIT_OK,
            Err(e) => print_failure(&e, false),
        },
        DevCommand::Down { dir, json } => {
            let dir = dir.unwrap_or_else(dev::default_dir);
            match dev::down(&dir, registry) {
                Ok(down) if json => super::print_json_ok(&down),
                Ok(down) => {
                    if down.stopped_pids.is_empty() && !down.stopped_postgres {
                        println!("Nothing was running in {}.", down.dir.display());
                    } else {
                        println!(
                            "Stopped zodex-prd and zodex-agent serve{} in {}.",
                            if down.stopped_postgres {
                                " and PostgreSQL"
                            } else {
                                ""
                            },
                            down.dir.display()
                        );
                    }
                    EXIT_OK
                }
                Err(e) => print_failure(&e, json),
            }
        }
    }
}

fn render_dev_up(install: &dev::DevInstall) -> String {
    let dir = install.dir.display();
    format!(
        "Zodex dev installation {state} in {dir} (sprite `{sprite}`, zodex-prd pid {pid}).\n\
         MCP server (zodex-agent serve, pid {agent_pid}): {mcp_url}\n\
         Local GitHub (devhub, pid {devhub_pid}): API {devhub_api}, git {devhub_git}\n\
         \x20 (a secret: whoever holds this URL runs commands here; also in {dir}/mcp-url)\n\
         State: {store}\n\
         \n\
         Walk through it (agent lines in a shell that ran `source {env}`):\n\
         \x20 agent:    git clone https://github.com/demo/app && cd app   # a read token from zodex-prd\n\
         \x20 agent:    echo hi > hi.txt && git add hi.txt && git commit -m 'Say hi'\n\
         \x20 agent:    zodex-agent github publish-pr --repo demo/app --title 'Say hi'   # review-first PR\n\
         \x20 operator: zodex sprite github grant-push --repo demo/app --ttl 30m\n\
         \x20 agent:    git push origin HEAD:refs/heads/hi          # through git-remote-zodex and zodex-prd\n\
         \x20 operator: zodex sprite github revoke-push --repo demo/app\n\
         \x20 agent:    git push origin HEAD:refs/heads/hi-again    # denied; the message names request-push\n\
         \n\
         More: zodex sprite github status | yolo --ttl 1h | default | requests | approve ID\n\
         \x20     zodex sprite policy explain --action push --repo demo/app --ref main --force\n\
         \x20     zodex-agent github request-push --repo demo/app --reason 'try it' --wait\n\
         \x20     git clone https://github.com/demo/other   # readable; the writer App is not installed there\n\
         Audit: zodex sprite github audit --since 1h    Log: {log}\n\
         Stop:  zodex dev down{dir_flag}",
        state = if install.started {
            "started"
        } else {
            "already running"
        },
        sprite = install.sprite,
        pid = install.publisher_pid,
        agent_pid = install.agent_pid,
        devhub_pid = install.devhub_pid,
        devhub_api = install.devhub_api_url,
        devhub_git = install.devhub_git_url,
        mcp_url = install.mcp_url,
        store = match (&install.store_url, &install.postgres_dir) {
            (Some(url), Some(cluster)) => format!(
                "PostgreSQL {url} (a private server, its data in {})",
                cluster.display()
            ),
            (Some(url), None) => format!("PostgreSQL {url}"),
            _ => "SQLite, in the state directory".to_string(),
        },
        env = install.env_file.display(),
        log = install.log.display(),
        dir_flag = if install.dir == dev::default_dir() {
            String::new()
        } else {
            format!(" --dir {dir}")
        },
    )
}

fn dev_fleet(command: DevFleetCommand, registry: &Registry) -> i32 {
    use crate::operator::dev::fleet;
    match command {
        DevFleetCommand::Up {
            dir,
            replicas,
            sprites,
            ha,
            json,
        } => {
            let dir = dir.unwrap_or_else(fleet::default_dir);
            let shape = fleet::Shape {
                replicas: replicas.into(),
                sprites: sprites.into(),
                ha,
            };
            match fleet::up(&dir, registry, shape) {
                Ok(up) if json => super::print_json_ok(&up),
                Ok(up) => {
                    println!("{}", render_dev_fleet_up(&up));
                    EXIT_OK
                }
                Err(e) => print_failure(&e, json),
            }
        }
        DevFleetCommand::Failover { dir, json } => {
            let dir = dir.unwrap_or_else(fleet::default_dir);
            match fleet::failover(&dir) {
                Ok(done) if json => super::print_json_ok(&done),
                Ok(done) => {
                    println!(
                        "Lost {}'s machine; Patroni promoted {} after {:.1} s, and {} rejoins as a standby.\nThe replicas reconnect on their own; see: {}",
                        done.lost,
                        done.promoted,
                        done.promoted_after_seconds,
                        done.lost,
                        done.patronictl
                    );
                    EXIT_OK
                }
                Err(e) => print_failure(&e, json),
            }
        }
        DevFleetCommand::Down { dir, json } => {
            let dir = dir.unwrap_or_else(fleet::default_dir);
            match fleet::down(&dir, registry) {
                Ok(down) if json => super::print_json_ok(&down),
                Ok(down) => {
                    println!(
                        "Stopped {} processes{} of the fleet in {}.",
                        down.stopped_pids.len(),
                        if down.stopped_postgres {
                            " and PostgreSQL"
                        } else {
                            ""
                        },
                        down.dir.display()
                    );
                    EXIT_OK
                }
                Err(e) => print_failure(&e, json),
            }
        }
    }
}

fn render_dev_fleet_up(up: &dev::fleet::DevFleet) -> String {
    let mut lines = vec![format!(
        "Local fleet `{}` in {} (state: PostgreSQL {}).",
        up.fleet,
        up.dir.display(),
        up.store_url
    )];
    for r in &up.replicas {
        lines.push(format!(
            "  replica {} at {} (pid {}), log {}{}",
            r.name,
            r.url,
            r.pid,
            r.log.display(),
            r.metrics_url
                .as_deref()
                .map(|m| format!(", metrics {m}"))
                .unwrap_or_default()
        ));
    }
    for s in &up.sprites {
        lines.push(format!(
            "  {}: relay pid {}, agent side: source {}\n    MCP (pid {}; OAuth through the service, or the key): {} (a secret)",
            s.name,
            s.relay_pid,
            s.env_file.display(),
            s.agent_pid,
            s.mcp_url
        ));
    }
    lines.push(format!(
        "  operator key: {} (a secret)\n  local GitHub: API {}, git {}",
        up.operator_key_file.display(),
        up.devhub_api_url,
        up.devhub_git_url
    ));
    lines.push(String::new());
    lines.push(
        "Try: zodex fleet status | sprites | grant-push --repo demo/app --for-sprite sprite-1"
            .into(),
    );
    lines.push("     (in a shell that sourced sprite-1's env.sh) git clone https://github.com/demo/app && cd app && git push".into());
    if up.store_ha {
        lines.push("     zodex dev fleet failover   (the database's leader lost; Patroni promotes its standby)".into());
    }
    lines.push(format!(
        "Stop: zodex dev fleet down{}",
        if up.dir == dev::fleet::default_dir() {
            String::new()
        } else {
            format!(" --dir {}", up.dir.display())
        }
    ));
    lines.join("\n")
}
