//! Running `zodex-prd` subcommands on a sprite through its exec transport, beyond the one admin
//! request of `transport`: with bytes on stdin (keys, binaries, the MCP key — never argv), and
//! the sprite-side paths read back from the registered admin command.

use super::registry::SpriteEntry;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error(
        "sprite `{0}` is registered without a recognisable `zodex-prd admin` command; remove it and add it again with `zodex sprite add NAME --exec '…'`"
    )]
    Unrecognised(String),
    #[error("cannot run `{command}` for sprite `{sprite}`: {source}")]
    Spawn {
        sprite: String,
        command: String,
        source: std::io::Error,
    },
}

/// Why a binary could not be put on the sprite.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error(transparent)]
    Run(#[from] RemoteError),
    /// `mktemp -d` failed; what it said on stderr.
    #[error("cannot make an upload directory on the sprite: {0}")]
    Stage(String),
    #[error("cannot upload {} to {remote} on the sprite: {failure}", local.display())]
    Copy {
        local: PathBuf,
        remote: String,
        failure: CommandFailure,
    },
}

/// A command on the sprite that could not be run, or ran and failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandFailure {
    #[error(transparent)]
    Run(RemoteError),
    /// What it said on stderr.
    #[error("{0}")]
    Said(String),
}

/// How a sprite is reached, taken apart: the exec prefix, its `zodex-prd` and its configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    pub sprite: String,
    /// The words before `zodex-prd` (empty for a local sprite).
    pub prefix: Vec<String>,
    /// `zodex-prd`, or its path on the sprite.
    pub prd: String,
    pub config: Option<String>,
}

/// What a remote command did.
#[derive(Debug)]
pub struct Ran {
    pub success: bool,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Ran {
    /// What the command said on stderr, its own leading `error: ` taken off (the operator's
    /// `zodex` says `error: ` itself, once).
    pub fn said(&self) -> &str {
        self.stderr.strip_prefix("error: ").unwrap_or(&self.stderr)
    }
}

impl Reach {
    pub fn of(entry: &SpriteEntry) -> Result<Self, RemoteError> {
        let argv = &entry.admin_command;
        let at = (0..argv.len().saturating_sub(1))
            .rev()
            .find(|&i| {
                (argv[i] == "zodex-prd" || argv[i].ends_with("/zodex-prd"))
                    && argv[i + 1] == "admin"
            })
            .ok_or_else(|| RemoteError::Unrecognised(entry.name.clone()))?;
        let config = argv[at + 2..]
            .windows(2)
            .find(|w| w[0] == "--config")
            .map(|w| w[1].clone());
        Ok(Self {
            sprite: entry.name.clone(),
            prefix: argv[..at].to_vec(),
            prd: argv[at].clone(),
            config,
        })
    }

    /// The registry entry for a sprite reached this way, with this `zodex-prd` and config.
    pub fn entry(&self) -> SpriteEntry {
        let mut admin_command = self.prefix.clone();
        admin_command.extend([self.prd.clone(), "admin".into()]);
        if let Some(config) = &self.config {
            admin_command.extend(["--config".into(), config.clone()]);
        }
        SpriteEntry {
            name: self.sprite.clone(),
            admin_command,
            worker: None,
            fleet: None,
        }
    }

    /// Runs `argv` on the sprite with `stdin`.
    pub fn run(&self, argv: &[String], stdin: Stdin<'_>) -> Result<Ran, RemoteError> {
        let mut full = self.prefix.clone();
        full.extend(argv.iter().cloned());
        if full.first().map(String::as_str) == Some("zodex-prd") {
            full[0] = super::sibling_binary("zodex-prd").display().to_string();
        }
        let command_text = full.join(" ");
        let spawn_err = |source| RemoteError::Spawn {
            sprite: self.sprite.clone(),
            command: command_text.clone(),
            source,
        };
        let mut child = Command::new(&full[0])
            .args(&full[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_err)?;
        let mut pipe = child.stdin.take().expect("stdin is piped");
        // Written from a thread: the command may answer (and fill its stdout) before it has
        // read all of a large upload.
        let writer = match stdin {
            Stdin::None => None,
            Stdin::Bytes(bytes) => {
                let bytes = bytes.to_vec();
                Some(std::thread::spawn(move || pipe.write_all(&bytes)))
            }
            Stdin::File(path) => {
                let mut file = std::fs::File::open(path).map_err(spawn_err)?;
                Some(std::thread::spawn(move || {
                    std::io::copy(&mut file, &mut pipe).map(|_| ())
                }))
            }
        };
        let output = child.wait_with_output().map_err(spawn_err)?;
        let wrote = writer.map(|w| w.join());
        let upload_failed = matches!(wrote, Some(Ok(Err(_))) | Some(Err(_)));
        Ok(Ran {
            success: output.status.success() && !upload_failed,
            stdout: output.stdout,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }

    /// `zodex-prd ARGS… --config C` on the sprite.
    pub fn prd(&self, args: &[&str], stdin: Stdin<'_>) -> Result<Ran, RemoteError> {
        self.prd_at(&self.prd, args, stdin)
    }

    /// Like [`Reach::prd`] with another `zodex-prd` (a staged upload).
    pub fn prd_at(&self, prd: &str, args: &[&str], stdin: Stdin<'_>) -> Result<Ran, RemoteError> {
        let mut argv = vec![prd.to_string()];
        argv.extend(args.iter().map(|a| a.to_string()));
        if let Some(config) = &self.config {
            argv.extend(["--config".into(), config.clone()]);
        }
        self.run(&argv, stdin)
    }

    /// A private directory on the sprite for an upload (`mktemp -d`, mode 0700).
    pub fn stage(&self) -> Result<String, UploadError> {
        let ran = self.run(
            &[
                "mktemp".into(),
                "-d".into(),
                "/tmp/zodex-upload.XXXXXXXX".into(),
            ],
            Stdin::None,
        )?;
        let dir = String::from_utf8_lossy(&ran.stdout).trim().to_string();
        if ran.success && dir.starts_with('/') {
            Ok(dir)
        } else {
            Err(UploadError::Stage(ran.stderr))
        }
    }

    /// Copies a local file to `remote` (inside a [`Reach::stage`] directory) on the sprite,
    /// through stdin, and makes it executable. No argument holds a space or a quote, so a
    /// transport that joins words into one remote shell line (`ssh HOST`) carries it unchanged.
    pub fn upload(&self, local: &Path, remote: &str) -> Result<(), UploadError> {
        let failed = |failure: CommandFailure| UploadError::Copy {
            local: local.to_path_buf(),
            remote: remote.to_string(),
            failure,
        };
        let ran = self
            .run(
                &[
                    "dd".into(),
                    format!("of={remote}"),
                    "bs=1M".into(),
                    "status=none".into(),
                ],
                Stdin::File(local),
            )
            .map_err(|e| failed(CommandFailure::Run(e)))?;
        if !ran.success {
            return Err(failed(CommandFailure::Said(ran.stderr)));
        }
        let ran = self
            .run(&["chmod".into(), "700".into(), remote.into()], Stdin::None)
            .map_err(|e| failed(CommandFailure::Run(e)))?;
        if ran.success {
            Ok(())
        } else {
            Err(failed(CommandFailure::Said(ran.stderr)))
        }
    }

    /// Removes an upload directory (best effort).
    pub fn unstage(&self, dir: &str) {
        if dir.starts_with("/tmp/zodex-upload.") {
            let _ = self.run(&["rm".into(), "-rf".into(), dir.into()], Stdin::None);
        }
    }
}

/// What a remote command reads on stdin.
pub enum Stdin<'a> {
    None,
    Bytes(&'a [u8]),
    File(&'a Path),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_command_is_taken_apart_and_put_back() {
        let entry = SpriteEntry {
            name: "s".into(),
            admin_command: [
                "sprite",
                "exec",
                "-s",
                "s",
                "--",
                "/opt/bin/zodex-prd",
                "admin",
                "--config",
                "/etc/z.toml",
            ]
            .map(String::from)
            .to_vec(),
            worker: None,
            fleet: None,
        };
        let reach = Reach::of(&entry).unwrap();
        assert_eq!(reach.prefix, ["sprite", "exec", "-s", "s", "--"]);
        assert_eq!(reach.prd, "/opt/bin/zodex-prd");
        assert_eq!(reach.config.as_deref(), Some("/etc/z.toml"));
        assert_eq!(reach.entry(), entry);
        let local = SpriteEntry {
            name: "l".into(),
            admin_command: vec!["zodex-prd".into(), "admin".into()],
            worker: None,
            fleet: None,
        };
        let reach = Reach::of(&local).unwrap();
        assert!(reach.prefix.is_empty() && reach.config.is_none());
        let ran = |stderr: &str| Ran {
            success: false,
            stdout: Vec::new(),
            stderr: stderr.into(),
        };
        assert_eq!(ran("error: no key\nmore").said(), "no key\nmore");
        assert_eq!(ran("warning: x").said(), "warning: x");
        let odd = SpriteEntry {
            name: "x".into(),
            admin_command: vec!["ssh".into(), "host".into()],
            worker: None,
            fleet: None,
        };
        assert!(Reach::of(&odd).is_err());
    }
}
