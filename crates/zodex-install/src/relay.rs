//! A fleet sprite's install (`install --fleet NAME --sprite NAME --service URL…`): the same
//! two users and layout, but the publisher user runs `zodex-prd relay` with the sprite's own
//! fleet key, and no App key or state is on the sprite (docs/fleet.md). Its key is made *by
//! the publisher user* (`zodex-prd fleet request`, run as that user), so root never holds it
//! and it is the relay's from its first byte; the certificate the service signed is installed
//! the same way (`zodex-prd fleet install`). Until it is installed the services stay stopped:
//! the install's report carries the certificate request for the operator to enrol. `doctor`
//! checks such a sprite with [`doctor_findings`] where a sprite of its own has its
//! publisher's checks (keys, Apps, proofs: the service's, not the sprite's).

use super::layout::Layout;
use super::system::{self, Steps};
use super::{Finding, InstallError, InstallOptions};
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use zodex_config::RelayConfig;
use zodex_fleet::{Identity, MemberFiles, Name, Role};

/// What makes an install a fleet sprite's.
#[derive(Debug, Clone)]
pub struct RelayInstall {
    pub fleet: String,
    pub sprite: String,
    /// The service's replicas (`https://HOST:PORT`), tried in turn by the relay.
    pub services: Vec<String>,
    /// The service's answer to this sprite's enrolment (`fleet_enroll`, JSON), to install.
    pub enrolment: Option<String>,
    /// The service does not hold the sprite as enrolled: the key and certificate here are
    /// discarded and a new key made (a removed sprite enrolled again never reuses its key).
    pub new_key: bool,
}

impl RelayInstall {
    fn identity(&self) -> Result<Identity, InstallError> {
        let name = |what: &str, text: &str| {
            Name::parse(text).map_err(|e| InstallError::Failed(format!("{what}: {e}")))
        };
        Ok(Identity::new(
            &name("--fleet", &self.fleet)?,
            Role::Sprite,
            &name("--sprite", &self.sprite)?,
        ))
    }
}

/// Refuses what a fleet sprite must not have, before anything changes: App ids or keys (the
/// service holds them), no replica, and a sprite that already has App keys of its own.
pub(super) fn check(
    options: &InstallOptions,
    relay: &RelayInstall,
    layout: &Layout,
    has_keys: bool,
) -> Result<(), InstallError> {
    relay.identity()?;
    if has_keys || options.reader_app_id.is_some() || options.writer_app_id.is_some() {
        return Err(InstallError::Failed(
            "a fleet sprite holds no App keys (the fleet's service does): leave out --writer-app-id, --reader-app-id and --keys-stdin".into(),
        ));
    }
    if relay.services.is_empty() {
        return Err(InstallError::Failed(
            "name the fleet's service with --service https://HOST:PORT (repeatable: one per replica)".into(),
        ));
    }
    for url in &relay.services {
        zodex_fleet::Replica::parse(url)
            .map_err(|e| InstallError::Failed(format!("--service {url}: {e}")))?;
    }
    if let Some(key) = ["writer", "reader"]
        .map(|app| layout.key(app))
        .into_iter()
        .find(|key| key.exists())
    {
        return Err(InstallError::Failed(format!(
            "this sprite has App keys of its own ({}): it runs its own publisher. To join a fleet keeping its history: copy its state.db to the service's host, `zodex sprite uninstall` it (its App keys go), enrol it, then carry its history with `zodex-prd store migrate --as-sprite NAME` (docs/fleet.md)",
            key.display()
        )));
    }
    Ok(())
}

/// The `[relay]` table: the replicas, the key directory, the GitHub the service writes to.
pub(super) fn relay_config(
    relay: &RelayInstall,
    layout: &Layout,
    git_url: Option<&str>,
) -> RelayConfig {
    RelayConfig {
        services: relay.services.clone(),
        dir: layout.keys_dir.clone(),
        git_url: Some(
            git_url
                .unwrap_or(zodex_config::DEFAULT_GIT_URL)
                .trim_end_matches('/')
                .to_string(),
        ),
    }
}

/// The sprite's fleet files in the key directory, as the publisher user makes them: the
/// enrolment's certificate installed when one was given; then `None` when the sprite holds a
/// valid certificate for its identity, else the certificate request to enrol (its key made
/// now when there was none).
pub(super) fn member_files(
    relay: &RelayInstall,
    layout: &Layout,
    publisher: &nix::unistd::User,
    steps: &mut Steps,
) -> Result<Option<String>, InstallError> {
    let identity = relay.identity()?;
    let dir = layout.keys_dir.display().to_string();
    if let Some(answer) = &relay.enrolment {
        let args = ["fleet", "install", "--dir", &dir];
        as_publisher(layout, publisher, &args, Some(answer.as_bytes()))?;
        steps.record(format!("fleet certificate of {}", identity.uri()), true);
    }
    if relay.new_key && relay.enrolment.is_none() {
        // Root removes the files without reading them: the key stays unread by anyone but
        // the publisher user, even on its way out.
        let mut discarded = false;
        for file in [MemberFiles::CERT, MemberFiles::KEY] {
            let path = layout.keys_dir.join(file);
            match std::fs::remove_file(&path) {
                Ok(()) => discarded = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(InstallError::step(
                        format!("cannot discard the old fleet file {}", path.display()),
                        e,
                    ));
                }
            }
        }
        steps.record(
            format!("old fleet key and certificate in {dir} discarded"),
            discarded,
        );
    }
    if enrolled(&layout.keys_dir, &identity) {
        steps.record(format!("enrolled as {}", identity.uri()), false);
        return Ok(None);
    }
    let had_key = layout.keys_dir.join(MemberFiles::KEY).exists();
    let args = [
        "fleet",
        "request",
        "--dir",
        &dir,
        "--fleet",
        &relay.fleet,
        "--sprite",
        &relay.sprite,
    ];
    let request = as_publisher(layout, publisher, &args, None)?;
    steps.record(format!("fleet key {}/{}", dir, MemberFiles::KEY), !had_key);
    Ok(Some(request))
}

/// Whether `dir` holds a certificate naming `identity`, issued by the CA beside it and valid
/// now (its key is the relay's to check: root never reads it).
fn enrolled(dir: &Path, identity: &Identity) -> bool {
    matches!(installed_certificate(dir), Installed::Valid { identity: named, .. } if named == *identity)
}

/// The certificate in a key directory, as read without its key.
enum Installed {
    /// No certificate, or no CA, there.
    Missing,
    /// The CA beside it does not vouch for it now (expired, another CA, damaged): why.
    Unusable(zodex_fleet::FleetError),
    /// Vouched for, but it names no fleet member.
    Nameless,
    /// Vouched for and naming `identity`, valid until `until` (Unix seconds).
    Valid { identity: Identity, until: i64 },
}

fn installed_certificate(dir: &Path) -> Installed {
    let read = |file| std::fs::read_to_string(dir.join(file)).ok();
    let (Some(cert), Some(ca)) = (read(MemberFiles::CERT), read(MemberFiles::CA)) else {
        return Installed::Missing;
    };
    if let Err(e) = zodex_fleet::tls::verify_member(&ca, &cert) {
        return Installed::Unusable(e);
    }
    let named = zodex_fleet::tls::certificates(&cert)
        .ok()
        .and_then(|chain| Identity::of_certificate(&chain[0]).ok());
    match named {
        Some(identity) => Installed::Valid {
            identity,
            // An end it cannot read counts as now: no time said to be left.
            until: zodex_fleet::tls::validity(&cert)
                .map(|(_, until)| until)
                .unwrap_or_else(|_| chrono::Utc::now().timestamp()),
        },
        None => Installed::Nameless,
    }
}

/// `zodex-prd ARGS` run as the publisher user (the installed binary), its stdout on success.
pub(super) fn as_publisher(
    layout: &Layout,
    publisher: &nix::unistd::User,
    args: &[&str],
    stdin: Option<&[u8]>,
) -> Result<String, InstallError> {
    let what = format!("zodex-prd {}", args[..2].join(" "));
    let mut command = Command::new(layout.binary("zodex-prd"));
    command.args(args);
    system::as_user(&mut command, publisher);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| InstallError::step(format!("cannot run {what} as {}", publisher.name), e))?;
    let mut input = child.stdin.take().expect("piped stdin");
    input
        .write_all(stdin.unwrap_or_default())
        .map_err(|e| InstallError::step(format!("{what}: writing its stdin"), e))?;
    drop(input);
    let out = child
        .wait_with_output()
        .map_err(|e| InstallError::step(format!("{what}: waiting for it"), e))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = said.trim().trim_start_matches("error: ");
        return Err(InstallError::Failed(format!(
            "{what} as {}: {said}",
            publisher.name
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `doctor` on a fleet sprite, beside the checks every sprite has: its certificate (from its
/// CA, valid, for how long) and its MCP endpoint as the fleet serves it (OAuth through the
/// service once an operator set its public URL).
pub(super) fn doctor_findings(config: &zodex_config::Config, listen: &str) -> Vec<Finding> {
    let Some(relay) = &config.relay else {
        return vec![Finding::fail(
            "relay",
            "the install record says this sprite runs a relay, but its configuration has no [relay]: rerun `zodex fleet enroll`",
        )];
    };
    vec![certificate(&relay.dir), mcp_door(config, listen)]
}

/// The sprite's certificate: issued by the CA beside it, valid now, and how long it has left
/// (the relay renews it once two thirds of its life have passed).
fn certificate(dir: &Path) -> Finding {
    match installed_certificate(dir) {
        Installed::Valid { identity, until } => Finding::ok(
            "fleet-certificate",
            format!(
                "the sprite's certificate names {} and is valid for {} h more (the relay renews it)",
                identity.uri(),
                (until - chrono::Utc::now().timestamp()) / 3600
            ),
        ),
        Installed::Missing => Finding::fail(
            "fleet-certificate",
            format!(
                "no fleet certificate in {}: enrol the sprite (`zodex fleet enroll`)",
                dir.display()
            ),
        ),
        Installed::Unusable(e) => Finding::fail(
            "fleet-certificate",
            format!(
                "the sprite's certificate is not usable ({e}); if it expired while the relay could not reach the service, `zodex fleet remove` and `zodex fleet enroll` the sprite again"
            ),
        ),
        Installed::Nameless => Finding::fail(
            "fleet-certificate",
            "the sprite's certificate names no fleet member: enrol the sprite again",
        ),
    }
}

/// The MCP endpoint of a fleet sprite: OAuth served by the service once an operator set the
/// sprite's public URL (the relay publishes its keys); the key URL is a single sprite's.
fn mcp_door(config: &zodex_config::Config, listen: &str) -> Finding {
    let published = config
        .mcp
        .as_ref()
        .and_then(|m| m.oauth_file.as_ref())
        .and_then(|file| std::fs::read(file).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    match published {
        Some(published) => super::mcp_door::oauth_door(listen, &published),
        None => Finding::fail(
            "mcp-oauth",
            "the fleet's service publishes no OAuth for this sprite's MCP endpoint yet: set its public URL with `zodex fleet mcp public-url SPRITE https://HOST/mcp` (and `[mcp] public_url`, `oauth_file` here: `zodex fleet enroll … -- --public-url URL`)",
        ),
    }
}
