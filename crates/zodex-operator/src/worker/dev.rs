//! `zodex sprite proxy dev`: the embedded Worker on the local Workers runtime (`workerd`, the
//! open-source runtime Cloudflare runs Workers on) in front of a sprite, for trying the edge
//! without a Cloudflare account. Nothing is recorded: `connect` and `doctor` keep using what
//! `deploy` recorded, so stopping it leaves nothing behind that fails later.
//!
//! The runtime gets a generated `config.capnp` beside the sources in a private directory: the
//! same modules and variables `deploy` gives wrangler, a loopback (or chosen) listener, and an
//! outbound network that trusts the public CAs plus, when one is named, a private CA — the
//! origin behind a `tls internal` Caddy or a company CA. The CA comes from `--ca-file`, else
//! from `NODE_EXTRA_CA_CERTS`, the variable `wrangler dev` reads for the same purpose.

#![allow(unsafe_code)] // the parent-death signal before exec (pre_exec); the block says why it is sound

use super::deploy::{executable, on_path, write_private};
use super::{
    COMPATIBILITY_DATE, DEFAULT_OAUTH_RATE_LIMITS, SOURCES, WorkerError, build_id, origin_of,
    rate_limits, worker_dir,
};
use crate::registry::{SpriteEntry, WorkerRecord};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The variable naming a PEM file of extra CAs, as wrangler dev and Node read it.
pub const CA_ENV: &str = "NODE_EXTRA_CA_CERTS";

/// Where `proxy dev` listens unless told (wrangler dev's port).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";

/// How long the runtime may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// What `start` takes besides the sprite.
#[derive(Debug, Clone, Default)]
pub struct DevOptions {
    /// The sprite's origin; default: the one `deploy` recorded.
    pub origin: Option<String>,
    /// The address to listen on; default: [`DEFAULT_LISTEN`].
    pub listen: Option<SocketAddr>,
    /// The workerd binary; default: `workerd` on `PATH`.
    pub workerd: Option<PathBuf>,
    /// A PEM file of CAs to trust for the origin besides the public ones; default: the file
    /// `NODE_EXTRA_CA_CERTS` names, if set.
    pub ca_file: Option<PathBuf>,
    /// Per-address limits on the OAuth door; default: [`DEFAULT_OAUTH_RATE_LIMITS`].
    pub oauth_rate_limits: Option<String>,
}

/// A running local Worker: stop it by dropping it or let it run with [`DevWorker::wait`].
#[derive(Debug)]
pub struct DevWorker {
    /// What `proxy verify` needs to check it (its `name` is `dev`; never recorded).
    pub record: WorkerRecord,
    /// The private directory holding `config.capnp`, the sources and the CA.
    pub dir: PathBuf,
    /// The CA file trusted for the origin, when one was named.
    pub ca_file: Option<PathBuf>,
    child: Child,
}

impl DevWorker {
    /// Waits for the runtime to end (Ctrl-C reaches it too: it is in our process group).
    pub fn wait(mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait()
    }
}

impl Drop for DevWorker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Writes the runtime's files and starts it; returns once it listens.
pub fn start(entry: &SpriteEntry, options: &DevOptions) -> Result<DevWorker, WorkerError> {
    let origin = match (&options.origin, &entry.worker) {
        (Some(origin), _) => origin_of("--origin", origin)?,
        (None, Some(worker)) => worker.origin.clone(),
        (None, None) => {
            return Err(WorkerError::Missing(format!(
                "name the origin the Worker forwards to: `zodex sprite proxy dev --sprite {} --origin URL` (https://HOST[:PORT], or http://127.0.0.1:PORT for a sprite on this machine)",
                entry.name
            )));
        }
    };
    let limits = rate_limits(
        options
            .oauth_rate_limits
            .as_deref()
            .unwrap_or(DEFAULT_OAUTH_RATE_LIMITS),
    )?;
    let workerd = find_workerd(options.workerd.as_deref())?;
    let ca_file = options
        .ca_file
        .clone()
        .or_else(|| std::env::var_os(CA_ENV).map(PathBuf::from));
    let ca = ca_file.as_deref().map(read_ca).transpose()?;
    let listen = options
        .listen
        .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("a socket address"));
    if TcpStream::connect_timeout(&listen, Duration::from_millis(300)).is_ok() {
        return Err(WorkerError::Missing(format!(
            "{listen} is already in use (another `proxy dev`?): stop it or pass --listen ADDR:PORT"
        )));
    }

    let dir = worker_dir(&entry.name).join("dev");
    let build = build_id();
    let vars = [
        ("SPRITE_ORIGIN", origin.as_str()),
        ("SPRITE_NAME", entry.name.as_str()),
        ("ZODEX_BUILD", build.as_str()),
        ("ZODEX_VERSION", env!("CARGO_PKG_VERSION")),
        ("OAUTH_RATE_LIMITS", limits.as_str()),
    ];
    let config = config_capnp(listen, &vars, ca.is_some());
    let files = SOURCES
        .iter()
        .copied()
        .chain([("config.capnp", config.as_str())])
        .chain(ca.as_deref().map(|pem| ("ca.pem", pem)));
    write_private(&dir, files)?;

    // The Worker's log lines go to our stderr: stdout carries only the URL.
    let log = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|source| WorkerError::Io {
            what: "cannot pass stderr to workerd".into(),
            source,
        })?;
    let mut command = Command::new(&workerd);
    command
        .arg("serve")
        .arg(dir.join("config.capnp"))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(log);
    // The runtime must not outlive us when we are killed rather than interrupted.
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn().map_err(|source| WorkerError::Io {
        what: format!("cannot run {}", workerd.display()),
        source,
    })?;
    let mut worker = DevWorker {
        record: WorkerRecord {
            name: "dev".into(),
            url: format!("http://{listen}"),
            origin,
            build,
        },
        dir,
        ca_file,
        child,
    };
    wait_listening(&mut worker, listen)?;
    Ok(worker)
}

/// `workerd` as given, else on `PATH`; else what to install.
fn find_workerd(given: Option<&Path>) -> Result<PathBuf, WorkerError> {
    let missing = || {
        WorkerError::Missing(
            "workerd (the Workers runtime) is not installed: `npm install -g workerd` (its package ships the binary), or pass --workerd PATH".into(),
        )
    };
    match given {
        Some(path) => executable(path)
            .then(|| path.to_path_buf())
            .ok_or_else(missing),
        None => on_path("workerd").ok_or_else(missing),
    }
}

/// The CA file's text, when it holds at least one PEM certificate.
fn read_ca(path: &Path) -> Result<String, WorkerError> {
    let text = std::fs::read_to_string(path).map_err(|source| WorkerError::Io {
        what: format!(
            "cannot read the CA file {} (--ca-file or {CA_ENV})",
            path.display()
        ),
        source,
    })?;
    if !text.contains("-----BEGIN CERTIFICATE-----") {
        return Err(WorkerError::Missing(format!(
            "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----): give the CA that signed the origin's certificate",
            path.display()
        )));
    }
    Ok(text)
}

/// Polls until the runtime listens; its own error output is already on our stderr.
fn wait_listening(worker: &mut DevWorker, listen: SocketAddr) -> Result<(), WorkerError> {
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = worker.child.try_wait() {
            return Err(WorkerError::Missing(format!(
                "workerd exited ({status}) before listening on {listen}; its message is above"
            )));
        }
        if TcpStream::connect_timeout(&listen, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if started.elapsed() > START_TIMEOUT {
            return Err(WorkerError::Missing(format!(
                "workerd did not listen on {listen} within {}s",
                START_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Cap'n Proto text literal (the config's only strings are checked values; this keeps any
/// quote or backslash from ending one early).
fn capnp_text(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32 & 0xff)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The runtime's configuration: the Worker with its modules (entry first) and variables, one
/// HTTP listener, and an outbound network trusting the public CAs and, with `ca`, `ca.pem`.
pub fn config_capnp(listen: SocketAddr, vars: &[(&str, &str)], ca: bool) -> String {
    let modules = SOURCES
        .iter()
        .map(|(name, _)| format!("    (name = {0}, esModule = embed {0})", capnp_text(name)))
        .collect::<Vec<_>>()
        .join(",\n");
    let bindings = vars
        .iter()
        .map(|(name, value)| {
            format!(
                "    (name = {}, text = {})",
                capnp_text(name),
                capnp_text(value)
            )
        })
        .collect::<Vec<_>>()
        .join(",\n");
    let trusted = if ca {
        ", trustedCertificates = [embed \"ca.pem\"]"
    } else {
        ""
    };
    format!(
        r#"# Generated by `zodex sprite proxy dev`; rewritten on every start.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    (name = "outbound", network = (
      allow = ["public", "private", "local"],
      tlsOptions = (trustBrowserCas = true{trusted})
    )),
  ],
  sockets = [ (name = "http", address = {listen}, http = (), service = "main") ],
);

const worker :Workerd.Worker = (
  modules = [
{modules}
  ],
  compatibilityDate = {date},
  bindings = [
{bindings}
  ],
  globalOutbound = "outbound",
);
"#,
        listen = capnp_text(&listen.to_string()),
        date = capnp_text(COMPATIBILITY_DATE),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_embeds_every_module_entry_first_and_the_ca_only_when_named() {
        let listen: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let config = config_capnp(listen, &[("SPRITE_NAME", "s\"1\\")], false);
        assert!(config.contains("address = \"127.0.0.1:9\""));
        let entry = config.find("embed \"index.js\"").unwrap();
        for (name, _) in SOURCES {
            let at = config.find(&format!("embed \"{name}\"")).unwrap();
            assert!(at >= entry, "{name} comes after the entry module");
        }
        assert!(config.contains(r#"(name = "SPRITE_NAME", text = "s\"1\\")"#));
        assert!(!config.contains("ca.pem"));
        assert!(
            config_capnp(listen, &[], true).contains("trustedCertificates = [embed \"ca.pem\"]")
        );
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused_with_what_to_give() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate").unwrap();
        let message = read_ca(&path).unwrap_err().to_string();
        assert!(message.contains("holds no PEM certificate"), "{message}");
        let message = read_ca(&dir.path().join("absent.pem"))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("--ca-file or NODE_EXTRA_CA_CERTS"),
            "{message}"
        );
    }
}
