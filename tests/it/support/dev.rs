//! Shared harness for end-to-end tests: a `zodex dev up` installation in a temporary
//! directory, and helpers to run the real binaries against it.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const ZODEX: &str = env!("CARGO_BIN_EXE_zodex");
pub const AGENT: &str = env!("CARGO_BIN_EXE_zodex-agent");
pub const PRD: &str = env!("CARGO_BIN_EXE_zodex-prd");
/// Read by a test build of `zodex dev up` only (`operator::dev`).
const TEST_CLOCK_ENV: &str = "ZODEX_TEST_CLOCK_FILE";

/// A running local installation, stopped (`zodex dev down`) when dropped.
pub struct Dev {
    pub home: tempfile::TempDir,
    pub dir: PathBuf,
    pub info: Value,
}

/// The output of one command, with its exit code and text.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from(output: Output) -> Self {
        Self {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }

    #[track_caller]
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn code(self, code: i32) -> Self {
        assert_eq!(
            self.code, code,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
}

impl Dev {
    /// `zodex dev up --json` in a fresh `ZODEX_HOME`; `info` is its `result`.
    pub fn up() -> Self {
        Self::up_with(&[])
    }

    /// `zodex dev up --json ARGS` (e.g. `&["--postgres"]`) in a fresh `ZODEX_HOME`.
    pub fn up_with(args: &[&str]) -> Self {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("dev");
        if args.contains(&"--postgres") && is_root() {
            // As root the server runs as `postgres`, which must reach `dir/postgres` (else
            // `dev up` puts the cluster under /tmp).
            std::fs::create_dir_all(&dir).unwrap();
            open_path_to(&dir.join("postgres"));
        }
        let mut dev = Self {
            dir: dir.clone(),
            home,
            info: Value::Null,
        };
        // A test build of `zodex dev up` names this file as the publisher's test clock.
        let mut full = vec!["dev", "up", "--json", "--dir", dir.to_str().unwrap()];
        full.extend_from_slice(args);
        let mut up = dev.command(ZODEX, &full);
        up.env(TEST_CLOCK_ENV, dev.clock_file());
        let run = Run::from(up.output().unwrap()).ok();
        // The `--json` envelope's result (docs/json.md).
        dev.info = run.json()["result"].clone();
        dev
    }

    fn clock_file(&self) -> PathBuf {
        self.dir.join("clock-offset")
    }

    /// Moves the installation's publisher clock `seconds` ahead: what a TTL test does instead
    /// of sleeping through the TTL.
    pub fn advance(&self, seconds: i64) {
        super::clock::advance(&self.clock_file(), seconds);
    }

    pub fn config(&self) -> PathBuf {
        PathBuf::from(self.info["config"].as_str().unwrap())
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut command = Command::new(program);
        super::devhub::without_git_env(&mut command);
        command
            .args(args)
            .env("ZODEX_HOME", self.home.path())
            .env("HOME", self.home.path())
            .env_remove("ZODEX_SPRITE")
            .env("ZODEX_CONFIG", self.config_or_default())
            .stdin(Stdio::null());
        command
    }

    fn config_or_default(&self) -> PathBuf {
        self.info["config"]
            .as_str()
            .map(PathBuf::from)
            .unwrap_or_else(|| self.dir.join("zodex.toml"))
    }

    /// `zodex ARGS` as the operator, not started (for long-lived commands such as the board).
    pub fn zodex_command(&self, args: &[&str]) -> Command {
        self.command(ZODEX, args)
    }

    /// Runs `zodex ARGS` as the operator.
    pub fn zodex(&self, args: &[&str]) -> Run {
        Run::from(self.command(ZODEX, args).output().unwrap())
    }

    /// Runs `zodex ARGS` as the operator with `$ZODEX_SPRITE` set to `sprite`.
    pub fn zodex_for_sprite(&self, sprite: &str, args: &[&str]) -> Run {
        let mut command = self.command(ZODEX, args);
        command.env("ZODEX_SPRITE", sprite);
        Run::from(command.output().unwrap())
    }

    /// Runs `zodex-agent ARGS` as the agent (same user here; the sockets tell them apart).
    pub fn agent(&self, args: &[&str]) -> Run {
        Run::from(self.command(AGENT, args).output().unwrap())
    }

    pub fn agent_command(&self, args: &[&str]) -> Command {
        self.command(AGENT, args)
    }

    pub fn prd(&self, args: &[&str]) -> Run {
        Run::from(self.command(PRD, args).output().unwrap())
    }

    /// `zodex sprite github ARGS --json`, parsed.
    pub fn github_json(&self, args: &[&str]) -> Value {
        let mut full = vec!["sprite", "github"];
        full.extend_from_slice(args);
        full.push("--json");
        self.zodex(&full).json()
    }

    /// A copy of this installation's configuration with its own state directory and sockets
    /// (named after `name`) and `extra` top-level settings: for a second `zodex-prd serve`
    /// beside the running one. Returns the file and the copy's admin socket.
    pub fn second_config(&self, name: &str, extra: &str) -> (PathBuf, PathBuf) {
        let config = std::fs::read_to_string(self.config()).unwrap();
        let state = self.dir.join(format!("state-{name}"));
        let admin = self.dir.join(format!("run/admin-{name}.sock"));
        let config = config
            .replace(
                self.dir.join("state").to_str().unwrap(),
                state.to_str().unwrap(),
            )
            .replace("run/admin.sock", &format!("run/admin-{name}.sock"))
            .replace("run/agent.sock", &format!("run/agent-{name}.sock"));
        let path = self.dir.join(format!("{name}.toml"));
        std::fs::write(&path, format!("{extra}\n{config}")).unwrap();
        (path, admin)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("logs/zodex-prd.log")).unwrap_or_default()
    }

    /// Runs `sql` on the installation's state as a person with full access to it would: with
    /// `sqlite3` on the SQLite file, or as the database's owner on PostgreSQL (`--postgres`;
    /// the publisher's own role could not change the audit).
    pub fn change_state_by_hand(&self, sql: &str) {
        use zodex_sql::Backend;
        match self.info["store_url"].as_str() {
            Some(publisher_url) => {
                // The private server's owner is the role its cluster was made with.
                let owner = super::replicas::as_role(publisher_url, "zodex");
                let store =
                    zodex_store_pg::PgStore::connect(&zodex_store_pg::PgSettings::new(owner))
                        .unwrap();
                store
                    .backend()
                    .batch(sql)
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
            None => {
                let db = self.dir.join("state/state.db");
                let out = Command::new("sqlite3").arg(&db).arg(sql).output().expect(
                    "sqlite3 (Debian's sqlite3 package) changes the state by hand; install it",
                );
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.zodex(&["dev", "down", "--dir", self.dir.to_str().unwrap()]);
    }
}

/// True when the tests run as root (needed to act as another uid for peer-credential tests).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Makes every directory from `path` up to `/` traversable, so another uid can reach a socket.
pub fn open_path_to(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == Path::new("/") {
            break;
        }
        if let Ok(meta) = std::fs::metadata(d) {
            let mode = meta.permissions().mode();
            let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode | 0o055));
        }
        dir = d.parent();
    }
}
