//! Deploying and looking after a sprite from the operator's machine, through its exec transport
//! only: `setup` (upload the sprite binaries, check the App keys against GitHub on the sprite
//! before anything there changes, run `zodex-prd install` with the keys over stdin, check both
//! Apps on every target, report whether the policies are proven), `doctor`, `status`, `logs`,
//! `start`, `stop`, `restart`, `targets`, `upgrade` and `uninstall`. The operator's `zodex` is never copied to the sprite.
//!
//! Nothing here decides: the sprite's `zodex-prd` does the work and reports; this side carries
//! the bytes and tells the operator what to do next.

mod answer;
mod fleet_sprite;
mod service_replica;

use super::registry::{Registry, SpriteEntry};
use super::remote::{Reach, Stdin};
pub use answer::SpriteAnswerError;
use answer::{envelope, expect_json, typed};
pub use fleet_sprite::{FleetSpriteInstall, FleetSpriteReport, enroll_and_install};
use serde::Serialize;
pub use service_replica::{ServiceReplicaAdd, add_service_replica, secrets_from};
use std::path::{Path, PathBuf};
use zodex_install::doctor::{DoctorReport, coverage_finding};
use zodex_install::layout::{Layout, SPRITE_BINARIES};
use zodex_install::services::{Action, ServiceState};
use zodex_install::solver::SolverOutcome;
use zodex_install::targets::TargetList;
use zodex_install::uninstall::UninstallReport;
use zodex_install::{Finding, Findings, InstallReport, KeyUpload};
use zodex_protocol::{AdminRequest, CoverageAnswer, Response};

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error(transparent)]
    Remote(#[from] super::remote::RemoteError),
    #[error(transparent)]
    Registry(#[from] super::registry::RegistryError),
    #[error(transparent)]
    Transport(#[from] super::transport::TransportError),
    #[error(
        "setup stopped at step {step} ({what}): {message}\nFix that and run the same `zodex sprite setup` again: the steps already done are checked and skipped."
    )]
    Setup {
        step: usize,
        what: &'static str,
        message: String,
    },
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    Answer(#[from] SpriteAnswerError),
    #[error(transparent)]
    Upload(#[from] super::remote::UploadError),
    /// A sprite-side command failed: what it said (the cause first), and the fix the operator
    /// can run from here when it gave one.
    #[error("{message}{}", next.as_ref().map(|n| format!("\nnext: {n}")).unwrap_or_default())]
    OnSprite {
        message: String,
        next: Option<String>,
    },
}

/// What `zodex sprite setup` is told.
#[derive(Debug, Clone)]
pub struct SetupOptions {
    pub writer_app_id: u64,
    pub writer_key: PathBuf,
    pub reader_app_id: u64,
    pub reader_key: PathBuf,
    pub github_url: Option<String>,
    pub api_url: Option<String>,
    pub targets: Vec<String>,
    /// Where the sprite's binaries come from (default: beside this `zodex`).
    pub binaries: Option<PathBuf>,
    /// Further `zodex-prd install` options, passed as they are (`--prefix`, user names…).
    pub install_args: Vec<String>,
}

/// What setup did.
#[derive(Debug, Clone, Serialize)]
pub struct SetupReport {
    pub sprite: String,
    pub uploaded: bool,
    pub install: InstallReport,
    pub coverage: Vec<Finding>,
    pub next: String,
}

fn setup_step(step: usize, what: &'static str) -> impl Fn(String) -> DeployError {
    move |message| DeployError::Setup {
        step,
        what,
        message,
    }
}

/// The directory the sprite binaries are taken from.
fn local_binaries(given: Option<&Path>) -> PathBuf {
    given.map(Path::to_path_buf).unwrap_or_else(|| {
        super::sibling_binary("zodex-prd")
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    })
}

/// The value of `--prefix` among the install options (else `/`).
fn prefix_of(install_args: &[String]) -> PathBuf {
    install_args
        .windows(2)
        .find(|w| w[0] == "--prefix")
        .map(|w| PathBuf::from(&w[1]))
        .or_else(|| {
            install_args
                .iter()
                .find_map(|a| a.strip_prefix("--prefix=").map(PathBuf::from))
        })
        .unwrap_or_else(|| PathBuf::from("/"))
}

pub fn setup(
    entry: &SpriteEntry,
    options: &SetupOptions,
    registry: &Registry,
) -> Result<SetupReport, DeployError> {
    let reach = Reach::of(entry)?;
    let keys = read_keys(options)?;
    let layout = Layout::under(&prefix_of(&options.install_args));
    let stage = upload_binaries(&reach, &layout, options.binaries.as_deref())
        .map_err(setup_step(2, "upload the binaries"))?;
    let argv = install_argv(&layout, options, stage.as_deref());
    // The uploaded directory is removed whatever happens.
    let installed = check_on_sprite(&reach, &argv, &keys)
        .and_then(|()| install_on_sprite(&reach, &argv, &keys));
    if let Some(dir) = &stage {
        reach.unstage(dir);
    }
    let install = installed?;
    if !install.all_ok() {
        return Err(setup_step(5, "self-check as the agent user")(
            failed_self_checks(&install),
        ));
    }
    let installed = register_installed(registry, entry, &reach, &layout, &install)?;
    let coverage = check_targets(&installed, &options.targets)?;
    if let Some(unproven) = install.proofs.as_ref().filter(|f| !f.ok) {
        let why = match &install.solver {
            Some(SolverOutcome::Missing { why }) => format!("{why}\n"),
            _ => String::new(),
        };
        return Err(setup_step(7, "prove the policies")(format!(
            "{why}{}\nEverything else is set up and running; `zodex sprite doctor` says the same until the proofs hold.",
            unproven.message
        )));
    }
    Ok(SetupReport {
        sprite: reach.sprite.clone(),
        uploaded: stage.is_some(),
        install,
        coverage,
        next: format!(
            "zodex sprite connect --sprite {} --host HOST   (HOST: the HTTPS name in front of the sprite's MCP listen address)",
            reach.sprite
        ),
    })
}

/// The messages of the self-check's failed findings, one a line.
fn failed_self_checks(install: &InstallReport) -> String {
    let failed: Vec<&str> = install
        .self_check
        .iter()
        .filter(|f| !f.ok)
        .map(|f| f.message.as_str())
        .collect();
    failed.join("\n")
}

/// Has the registry name the installed `zodex-prd` and its configuration by path (keeping the
/// sprite's edge Worker), so later commands reach the sprite as installed; that reach.
fn register_installed(
    registry: &Registry,
    entry: &SpriteEntry,
    reach: &Reach,
    layout: &Layout,
    install: &InstallReport,
) -> Result<Reach, DeployError> {
    let installed = Reach {
        sprite: reach.sprite.clone(),
        prefix: reach.prefix.clone(),
        prd: layout.binary("zodex-prd").display().to_string(),
        config: Some(install.config.display().to_string()),
    };
    registry.upsert(SpriteEntry {
        worker: entry.worker.clone(),
        fleet: None,
        ..installed.entry()
    })?;
    Ok(installed)
}

/// The `zodex-prd` an install runs and the directory it takes the binaries from: the uploaded
/// ones when there are (`stage`), else those installed.
fn install_from(layout: &Layout, stage: Option<&str>) -> (String, String) {
    match stage {
        Some(dir) => (format!("{dir}/zodex-prd"), dir.to_string()),
        None => (
            layout.binary("zodex-prd").display().to_string(),
            layout.bin_dir.display().to_string(),
        ),
    }
}

/// Step 1: the keys, read here (they go to the sprite on stdin only).
fn read_keys(options: &SetupOptions) -> Result<KeyUpload, DeployError> {
    let read_key = |path: &Path| {
        std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))
            .and_then(|pem| {
                if pem.contains("PRIVATE KEY-----") {
                    Ok(pem)
                } else {
                    Err(format!(
                        "{} is not a PEM private key; download one from the App's settings page",
                        path.display()
                    ))
                }
            })
    };
    let keys = KeyUpload {
        writer_key: read_key(&options.writer_key).map_err(setup_step(1, "read the App keys"))?,
        reader_key: read_key(&options.reader_key).map_err(setup_step(1, "read the App keys"))?,
    };
    Ok(keys)
}

/// Step 2: the sprite binaries (from `binaries`, default beside this `zodex`), uploaded into a
/// fresh directory on the sprite unless the sprite has these very files installed. Returns
/// that directory (`None`: nothing uploaded), or why not.
// String: the step's message, which the two flows (setup, fleet enrol) number as their own
// step (`setup_step`, `stopped`).
fn upload_binaries(
    reach: &Reach,
    layout: &Layout,
    binaries: Option<&Path>,
) -> Result<Option<String>, String> {
    let binaries = local_binaries(binaries);
    for name in SPRITE_BINARIES {
        if !binaries.join(name).is_file() {
            return Err(format!(
                "{} is missing; build with `cargo build --release` or pass --binaries DIR",
                binaries.join(name).display()
            ));
        }
    }
    if installed_match(reach, layout, &binaries) {
        return Ok(None);
    }
    let dir = reach.stage().map_err(|e| e.to_string())?;
    for name in SPRITE_BINARIES {
        if let Err(e) = reach.upload(&binaries.join(name), &format!("{dir}/{name}")) {
            reach.unstage(&dir);
            return Err(e.to_string());
        }
    }
    Ok(Some(dir))
}

/// The `zodex-prd install` command line for `options` (the keys go on stdin), run from the
/// uploaded directory when there is one.
fn install_argv(layout: &Layout, options: &SetupOptions, stage: Option<&str>) -> Vec<String> {
    let (prd, from) = install_from(layout, stage);
    let mut argv: Vec<String> = vec![
        prd,
        "install".into(),
        "--json".into(),
        "--keys-stdin".into(),
        "--binaries".into(),
        from,
        "--writer-app-id".into(),
        options.writer_app_id.to_string(),
        "--reader-app-id".into(),
        options.reader_app_id.to_string(),
    ];
    if let Some(url) = &options.github_url {
        argv.extend(["--github-url".into(), url.clone()]);
    }
    if let Some(url) = &options.api_url {
        argv.extend(["--api-url".into(), url.clone()]);
    }
    for target in &options.targets {
        argv.extend(["--target".into(), target.clone()]);
    }
    argv.extend(options.install_args.iter().cloned());
    argv
}

/// Step 3: the keys, App ids and API URL checked against GitHub on the sprite (`install
/// --check-only`), before anything there changes. Every problem is said, each with its fix.
fn check_on_sprite(reach: &Reach, argv: &[String], keys: &KeyUpload) -> Result<(), DeployError> {
    let failed = setup_step(3, "check the keys and Apps against GitHub");
    let mut argv = argv.to_vec();
    argv.push("--check-only".into());
    let key_json = serde_json::to_vec(keys).expect("keys serialise");
    let ran = reach
        .run(&argv, Stdin::Bytes(&key_json))
        .map_err(|e| failed(e.to_string()))?;
    let report: Findings = envelope(&ran.stdout).map_err(|e| {
        failed(if ran.stderr.is_empty() {
            e.to_string()
        } else {
            ran.stderr.clone()
        })
    })?;
    if report.all_ok {
        return Ok(());
    }
    let problems: Vec<String> = report
        .findings
        .into_iter()
        .filter(|f| !f.ok)
        .map(|f| f.message)
        .collect();
    Err(failed(format!(
        "{}\nNothing on the sprite was changed: its installed keys and configuration are as they were.",
        problems.join("\n")
    )))
}

/// Step 4: `zodex-prd install` on the sprite (idempotent), the keys on stdin.
fn install_on_sprite(
    reach: &Reach,
    argv: &[String],
    keys: &KeyUpload,
) -> Result<InstallReport, DeployError> {
    let key_json = serde_json::to_vec(keys).expect("keys serialise");
    run_install(reach, argv, Stdin::Bytes(&key_json)).map_err(setup_step(4, "install"))
}

/// `zodex-prd install --json` on the sprite: its report, or what it said (setup's and a fleet
/// sprite's enrolment's install alike).
// String: what the sprite said, numbered by each flow as its own step, as above.
fn run_install(reach: &Reach, argv: &[String], stdin: Stdin<'_>) -> Result<InstallReport, String> {
    let ran = reach.run(argv, stdin).map_err(|e| e.to_string())?;
    envelope(&ran.stdout).map_err(|e| {
        if ran.stderr.is_empty() {
            e.to_string()
        } else {
            ran.said().to_string()
        }
    })
}

/// Step 6: both Apps on every repository target, asked of GitHub now; every target they do
/// not cover is said, not only the first.
fn check_targets(installed: &Reach, targets: &[String]) -> Result<Vec<Finding>, DeployError> {
    let failed = setup_step(6, "check the Apps on the targets");
    let coverage = coverage_of(installed, targets).map_err(|e| failed(e.to_string()))?;
    let uncovered: Vec<&str> = coverage
        .iter()
        .filter(|f| !f.ok)
        .map(|f| f.message.as_str())
        .collect();
    if uncovered.is_empty() {
        Ok(coverage)
    } else {
        Err(failed(uncovered.join("\n")))
    }
}

/// One coverage finding per `OWNER/REPO` target (owners are checked when first used).
fn coverage_of(installed: &Reach, targets: &[String]) -> Result<Vec<Finding>, DeployError> {
    let mut coverage = Vec::new();
    for repo in targets.iter().filter(|t| !t.ends_with("/*")) {
        let answer = super::transport::call(
            &installed.entry(),
            &AdminRequest::CheckCoverage { repo: repo.clone() },
        )?;
        let check = format!("coverage {repo}");
        coverage.push(match typed::<CoverageAnswer>(&answer) {
            Ok(c) => coverage_finding(&check, &c),
            Err(e) => Finding::fail(check.clone(), e.to_string()),
        });
    }
    Ok(coverage)
}

/// True when the sprite's installed binaries are byte for byte the local ones (SHA-256).
fn installed_match(reach: &Reach, layout: &Layout, binaries: &Path) -> bool {
    use sha2::{Digest, Sha256};
    SPRITE_BINARIES.iter().all(|name| {
        let remote = layout.binary(name).display().to_string();
        let Ok(ran) = reach.run(&["sha256sum".into(), remote], Stdin::None) else {
            return false;
        };
        let theirs = String::from_utf8_lossy(&ran.stdout)
            .split_whitespace()
            .next()
            .map(str::to_string);
        let ours = std::fs::File::open(binaries.join(name))
            .ok()
            .and_then(|mut f| {
                use std::io::Read;
                let mut hasher = Sha256::new();
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    match f.read(&mut buf).ok()? {
                        0 => break,
                        n => hasher.update(&buf[..n]),
                    }
                }
                Some(hex::encode(hasher.finalize()))
            });
        ran.success && theirs.is_some() && theirs == ours
    })
}

/// `zodex sprite doctor`: the sprite's own checks, with the operator's MCP key (if any) on
/// stdin, plus whether the sprite runs this operator's version and, when the sprite has an
/// edge Worker, whether it runs this build for this sprite.
pub fn doctor(entry: &SpriteEntry) -> Result<DoctorReport, DeployError> {
    let reach = Reach::of(entry)?;
    let key = super::connect::stored_key(&entry.name);
    let ran = reach.prd(
        &["doctor", "--json", "--mcp-key-stdin"],
        Stdin::Bytes(key.as_deref().unwrap_or("").as_bytes()),
    )?;
    let mut report: DoctorReport = envelope(&ran.stdout).map_err(|e| {
        DeployError::Failed(format!(
            "the sprite's doctor did not run: {}",
            if ran.stderr.is_empty() {
                e.to_string()
            } else {
                ran.said().to_string()
            }
        ))
    })?;
    let ours = env!("CARGO_PKG_VERSION");
    report.findings.insert(
        0,
        if report.version == ours {
            Finding::ok("version", format!("the sprite runs zodex-prd {ours}, as this zodex"))
        } else {
            Finding::fail(
                "version",
                format!(
                    "the sprite runs zodex-prd {} but this zodex is {ours}: `zodex sprite upgrade --binaries DIR`",
                    report.version
                ),
            )
        },
    );
    if entry.worker.is_some()
        && let Ok(worker) = super::worker::status(entry)
    {
        report.findings.push(if worker.fresh() {
            Finding::ok(
                "worker",
                format!(
                    "the edge Worker at {} runs this zodex's build for this sprite",
                    worker.url
                ),
            )
        } else {
            Finding::fail("worker", worker.problems.join("; "))
        });
    }
    Ok(report)
}

pub fn status(entry: &SpriteEntry) -> Result<Vec<ServiceState>, DeployError> {
    let reach = Reach::of(entry)?;
    expect_json(reach.prd(&["service", "status", "--json"], Stdin::None)?)
}

pub fn logs(entry: &SpriteEntry, service: &str, lines: usize) -> Result<String, DeployError> {
    let reach = Reach::of(entry)?;
    let lines = lines.to_string();
    let ran = reach.prd(
        &["service", "logs", "--service", service, "--lines", &lines],
        Stdin::None,
    )?;
    if ran.success {
        Ok(String::from_utf8_lossy(&ran.stdout).into_owned())
    } else {
        Err(DeployError::Failed(ran.stderr))
    }
}

/// `zodex sprite start|stop|restart`: the sprite's services (both unless `service`), through
/// its `zodex-prd service`; start and restart wait until they answer. Their states after, or
/// why one did not come up — its errors, the cause first, and the fix from here.
pub fn control(
    entry: &SpriteEntry,
    action: Action,
    service: Option<&str>,
) -> Result<Vec<ServiceState>, DeployError> {
    let reach = Reach::of(entry)?;
    let mut args = vec!["service", action.word(), "--json"];
    if let Some(service) = service {
        args.extend(["--service", service]);
    }
    expect_json(reach.prd(&args, Stdin::None)?)
}

/// `zodex sprite policy prove`: the sprite's own `zodex-prd policy prove --json`, through the
/// transport. It proves the policies the configuration names, as the next start would, and
/// needs no running zodex-prd — which is down when a broken property made it refuse to start.
/// The answer's result is the proof report.
pub fn prove(entry: &SpriteEntry) -> Result<Response, DeployError> {
    let reach = Reach::of(entry)?;
    let ran = reach.prd(&["policy", "prove", "--json"], Stdin::None)?;
    serde_json::from_slice(&ran.stdout).map_err(|_| DeployError::OnSprite {
        message: if ran.stderr.is_empty() {
            "the sprite's `zodex-prd policy prove` printed no answer".into()
        } else {
            ran.said().to_string()
        },
        next: None,
    })
}

/// `zodex sprite uninstall`: the sprite's `zodex-prd uninstall` (the audit kept unless
/// `purge`), and this machine's connector URL of the sprite, which no longer works (a later
/// `connect` makes a new one); the sprite stays in this operator's registry.
pub fn uninstall(
    entry: &SpriteEntry,
    purge: bool,
    keep_oauth: bool,
) -> Result<UninstallReport, DeployError> {
    let reach = Reach::of(entry)?;
    let mut args = vec!["uninstall", "--json"];
    if purge {
        args.push("--purge");
    }
    if keep_oauth {
        args.push("--keep-oauth");
    }
    let mut report: UninstallReport = expect_json(reach.prd(&args, Stdin::None)?)?;
    let url = super::connect::url_file(&entry.name);
    if std::fs::remove_file(&url).is_ok() {
        report.removed.push(format!(
            "{} (on this machine: the key URL, which no longer works)",
            url.display()
        ));
    }
    Ok(report)
}

/// What `zodex sprite targets` did: the sprite's targets now, whether they changed, and
/// both Apps' coverage of every `OWNER/REPO` among them.
#[derive(Debug, Clone, Serialize)]
pub struct TargetsReport {
    pub sprite: String,
    pub targets: Vec<String>,
    pub changed: bool,
    pub coverage: Vec<Finding>,
}

impl TargetsReport {
    pub fn all_covered(&self) -> bool {
        self.coverage.iter().all(|f| f.ok)
    }
}

/// How `zodex sprite targets` changes the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetsChange {
    List,
    Add,
    Remove,
}

/// `zodex sprite targets list|add|remove`: the sprite's `zodex-prd targets` (which restarts
/// the publisher when the list changed), then both Apps' coverage of every repository target.
pub fn targets(
    entry: &SpriteEntry,
    change: TargetsChange,
    given: &[String],
) -> Result<TargetsReport, DeployError> {
    let reach = Reach::of(entry)?;
    let word = match change {
        TargetsChange::List => "list",
        TargetsChange::Add => "add",
        TargetsChange::Remove => "remove",
    };
    let mut args = vec!["targets", word, "--json"];
    args.extend(given.iter().map(String::as_str));
    let list: TargetList = expect_json(reach.prd(&args, Stdin::None)?)?;
    let coverage = coverage_of(&reach, &list.targets)?;
    Ok(TargetsReport {
        sprite: entry.name.clone(),
        targets: list.targets,
        changed: list.changed,
        coverage,
    })
}

/// The sprite's public URL, or after setting it to `set` (`zodex-prd public-url`).
pub fn public_url(
    entry: &SpriteEntry,
    set: Option<&str>,
) -> Result<zodex_install::PublicUrl, DeployError> {
    let reach = Reach::of(entry)?;
    let mut args = vec!["public-url", "--json"];
    if let Some(url) = set {
        // A value starting with `-` would read as an option; no URL does.
        if url.starts_with('-') {
            return Err(DeployError::OnSprite {
                message: format!("`{url}` is not a URL: give https://HOST/mcp"),
                next: None,
            });
        }
        args.push(url);
    }
    expect_json(reach.prd(&args, Stdin::None)?)
}

/// Uploads the binaries in `binaries` and has the uploaded `zodex-prd` put them in place.
pub fn upgrade(entry: &SpriteEntry, binaries: &Path) -> Result<Vec<ServiceState>, DeployError> {
    let reach = Reach::of(entry)?;
    for name in SPRITE_BINARIES {
        if !binaries.join(name).is_file() {
            return Err(DeployError::Failed(format!(
                "{} is missing; nothing was uploaded",
                binaries.join(name).display()
            )));
        }
    }
    let dir = reach.stage()?;
    let result = (|| {
        for name in SPRITE_BINARIES {
            reach.upload(&binaries.join(name), &format!("{dir}/{name}"))?;
        }
        let ran = reach.prd_at(
            &format!("{dir}/zodex-prd"),
            &["upgrade", "--json", "--binaries", &dir],
            Stdin::None,
        )?;
        expect_json(ran)
    })();
    reach.unstage(&dir);
    result
}
