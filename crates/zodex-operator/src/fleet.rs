//! `zodex fleet …` as operations. An operator's identity is made on the operator's machine (the
//! key stays there) and enrolled with the fleet's service: the first operator's through the
//! service host's admin command, every later one's with a one-time join code another operator
//! asked for. The fleet is then a registry entry reached over mutual TLS, so every
//! `zodex sprite github …` verb reaches it as `zodex fleet …`.
//! A sprite is enrolled through its own exec transport: its key is made on the sprite, only
//! its certificate request travels, and the certificate goes back to it.

pub use super::fleet_transport::renew as renew_certificate;
use super::registry::{FleetReach, Registry, RegistryError, SpriteEntry};
use super::remote::{CommandFailure, Reach, RemoteError, Stdin};
use super::transport::{self, TransportError};
use std::path::{Path, PathBuf};
pub use zodex_fleet::JoinCode;
use zodex_fleet::{FleetError, Identity, Name, Replica, Role};
use zodex_protocol::{
    AdminRequest, FleetEnrolled, FleetJoinCodeIssued, FleetJoinRequest, FleetMember, FleetRole,
    Response,
};

/// Why a fleet operation did not complete. Messages say what to do next.
#[derive(Debug, thiserror::Error)]
pub enum FleetOpError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Files(#[from] zodex_fleet::FilesError),
    #[error(transparent)]
    Name(#[from] FleetError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error("the fleet's service refused: {0}")]
    Refused(String),
    #[error("on sprite `{sprite}`, `zodex-prd fleet {step}` failed: {failure}")]
    OnSprite {
        sprite: String,
        step: &'static str,
        failure: CommandFailure,
    },
    #[error("name at least one replica of the fleet's service with --service https://HOST:PORT")]
    NoService,
    /// Said here, before any service is asked.
    #[error("{0}")]
    Choose(String),
    #[error(
        "`{fleet}` is a fleet, and an operator's key is made on their own machine: `zodex fleet --fleet {fleet} operator add {operator}` (without --via) prints a join code, and {operator} runs `zodex fleet join --service URL` with it"
    )]
    ViaFleet { fleet: String, operator: String },
    #[error(
        "`{0}` is a sprite in this registry, not a fleet; `zodex sprite list` shows which is which"
    )]
    NotAFleet(String),
}

/// Where an operator's identity for `fleet` lives by default: `$ZODEX_HOME/fleets/FLEET/NAME`.
pub fn identity_dir(fleet: &str, operator: &str) -> PathBuf {
    super::zodex_home()
        .join("fleets")
        .join(fleet)
        .join(operator)
}

/// `zodex fleet operator add NAME --fleet FLEET --service URL… --via ENTRY`: the fleet's
/// first operator, on their own machine: makes their key in `dir`, has the service sign it
/// through `via` (a registry entry whose admin command runs on the service's host), installs
/// the certificate, registers the fleet as `fleet` and proves the round trip over mutual TLS.
/// Every later operator joins with a code instead ([`issue_join_code`], [`join`]), so no
/// operator's key is ever made on another's machine. Returns the registered entry.
pub fn add_operator(
    registry: &Registry,
    via: &SpriteEntry,
    (fleet, operator): (&str, &str),
    services: &[String],
    dir: &Path,
) -> Result<SpriteEntry, FleetOpError> {
    if via.fleet.is_some() {
        return Err(FleetOpError::ViaFleet {
            fleet: via.name.clone(),
            operator: operator.to_string(),
        });
    }
    let entry = fleet_entry_at(fleet, services, dir)?;
    registry.check_fleet_free(&entry)?;
    let identity = Identity::new(
        &Name::parse(fleet)?,
        Role::Operator,
        &Name::parse(operator)?,
    );
    let request_pem = zodex_fleet::files::request(dir, &identity)?;
    let enrolled = enrol(via, FleetRole::Operator, operator, Vec::new(), request_pem)?;
    zodex_fleet::files::install(dir, &enrolled.certificate_pem, &enrolled.ca_pem)?;
    registry.register_fleet(entry.clone())?;
    answered(transport::call(&entry, &AdminRequest::Ping)?)?;
    Ok(entry)
}

/// The registry entry of `fleet` reached at `services` with the identity in `dir`.
fn fleet_entry_at(
    fleet: &str,
    services: &[String],
    dir: &Path,
) -> Result<SpriteEntry, FleetOpError> {
    if services.is_empty() {
        return Err(FleetOpError::NoService);
    }
    for url in services {
        Replica::parse(url)?;
    }
    Name::parse(fleet)?;
    Ok(SpriteEntry {
        name: fleet.to_string(),
        admin_command: Vec::new(),
        worker: None,
        fleet: Some(FleetReach {
            services: services.to_vec(),
            dir: dir.to_path_buf(),
        }),
    })
}

/// A join code the service issued for operator `operator`, and when it expires.
pub struct IssuedCode {
    pub code: JoinCode,
    pub expires_at: i64,
}

/// `zodex fleet operator add NAME`: a one-time code admitting operator `operator` to the
/// fleet this operator reaches through `fleet_entry`. The code is made here (its secret from
/// the OS's randomness, pinning the CA in this operator's files); the service keeps only the
/// secret's hash, for 15 minutes, and audits the issue. Nothing of this
/// operator's own files or registry entry changes.
pub fn issue_join_code(
    fleet_entry: &SpriteEntry,
    operator: &str,
) -> Result<IssuedCode, FleetOpError> {
    let Some(reach) = &fleet_entry.fleet else {
        return Err(FleetOpError::NotAFleet(fleet_entry.name.clone()));
    };
    let files = zodex_fleet::MemberFiles::read(&reach.dir)?;
    let mine = zodex_fleet::tls::certificates(&files.cert_pem)?;
    let me = Identity::of_certificate(&mine[0])?;
    let code = JoinCode::new(&me.fleet, &Name::parse(operator)?, &files.ca_pem)?;
    let request = AdminRequest::FleetJoinCode {
        name: operator.to_string(),
        code_sha256: zodex_fleet::join::secret_sha256(code.secret()),
    };
    let issued: FleetJoinCodeIssued =
        serde_json::from_value(answered(transport::call(fleet_entry, &request)?)?)
            .map_err(|e| FleetOpError::Refused(format!("an answer zodex cannot read: {e}")))?;
    Ok(IssuedCode {
        code,
        expires_at: issued.expires_at,
    })
}

/// `zodex fleet join --service URL…` on the new operator's own machine: makes their key in
/// `dir`, sends the code's secret and a certificate request to the service (over TLS that
/// accepts only the service of the CA the code pins), installs the certificate, registers the
/// fleet and proves the round trip over mutual TLS. Returns the registered entry.
pub fn join(
    registry: &Registry,
    code: &JoinCode,
    services: &[String],
    dir: &Path,
) -> Result<(SpriteEntry, FleetEnrolled), FleetOpError> {
    let fleet = code.fleet.as_str();
    let entry = fleet_entry_at(fleet, services, dir)?;
    registry.check_fleet_free(&entry)?;
    let identity = Identity::new(&code.fleet, Role::Operator, &code.operator);
    let request = FleetJoinRequest {
        code: code.secret().to_string(),
        request_pem: zodex_fleet::files::request(dir, &identity)?,
    };
    let result = answered(super::fleet_transport::join(
        fleet, services, code, &request,
    )?)?;
    let enrolled: FleetEnrolled = serde_json::from_value(result)
        .map_err(|e| FleetOpError::Refused(format!("an answer zodex cannot read: {e}")))?;
    if !code.pins(&enrolled.ca_pem) {
        return Err(FleetOpError::Refused(
            "the service answered with another CA than the join code pins; nothing was installed"
                .into(),
        ));
    }
    zodex_fleet::files::install(dir, &enrolled.certificate_pem, &enrolled.ca_pem)?;
    registry.register_fleet(entry.clone())?;
    answered(transport::call(&entry, &AdminRequest::Ping)?)?;
    Ok((entry, enrolled))
}

/// `zodex fleet enroll SPRITE`: through the sprite's exec transport (`sprite`), makes its key
/// in `dir` on the sprite and a request for `name` in `fleet`; the service (`fleet_entry`)
/// signs it with `labels`; the certificate is installed on the sprite. Returns the enrolment.
pub fn enroll_sprite(
    fleet_entry: &SpriteEntry,
    sprite: &SpriteEntry,
    (fleet, name): (&str, &str),
    labels: Vec<String>,
    dir: &str,
) -> Result<FleetEnrolled, FleetOpError> {
    let reach = Reach::of(sprite)?;
    let on_sprite = |step: &'static str, args: &[&str], stdin: Stdin<'_>| {
        let mut argv = vec![reach.prd.clone(), "fleet".to_string(), step.to_string()];
        argv.extend(args.iter().map(|a| a.to_string()));
        let ran = reach.run(&argv, stdin)?;
        if ran.success {
            Ok(ran.stdout)
        } else {
            Err(FleetOpError::OnSprite {
                sprite: sprite.name.clone(),
                step,
                failure: CommandFailure::Said(ran.said().to_string()),
            })
        }
    };
    let request = on_sprite(
        "request",
        &["--fleet", fleet, "--sprite", name, "--dir", dir],
        Stdin::None,
    )?;
    let request_pem = String::from_utf8_lossy(&request).into_owned();
    let enrolled = enrol(fleet_entry, FleetRole::Sprite, name, labels, request_pem)?;
    let answer = serde_json::to_vec(&enrolled).expect("an enrolment serialises");
    on_sprite("install", &["--dir", dir], Stdin::Bytes(&answer))?;
    Ok(enrolled)
}

/// Enrols sprite `name` of `fleet` whose files are here, in `dir` (a local fleet's sprite:
/// `zodex dev fleet up`): its key made in `dir`, the request signed by the service through
/// `fleet_entry` (the operator, over mutual TLS), the certificate installed.
pub fn enroll_here(
    fleet_entry: &SpriteEntry,
    (fleet, name): (&str, &str),
    labels: Vec<String>,
    dir: &Path,
) -> Result<FleetEnrolled, FleetOpError> {
    let identity = Identity::new(&Name::parse(fleet)?, Role::Sprite, &Name::parse(name)?);
    let request_pem = zodex_fleet::files::request(dir, &identity)?;
    let enrolled = enrol(fleet_entry, FleetRole::Sprite, name, labels, request_pem)?;
    zodex_fleet::files::install(dir, &enrolled.certificate_pem, &enrolled.ca_pem)?;
    Ok(enrolled)
}

/// Sprite `name` as the fleet's registry holds it now (enrolled or removed), if at all.
pub(crate) fn sprite_member(
    fleet_entry: &SpriteEntry,
    name: &str,
) -> Result<Option<FleetMember>, FleetOpError> {
    let result = answered(transport::call(fleet_entry, &AdminRequest::FleetMembers)?)?;
    let members: Vec<FleetMember> = serde_json::from_value(result)
        .map_err(|e| FleetOpError::Refused(format!("an answer zodex cannot read: {e}")))?;
    Ok(members
        .into_iter()
        .find(|m| m.role == FleetRole::Sprite && m.name == name))
}

/// The admin request `fleet_enroll` through `via`, and its answer.
pub(crate) fn enrol(
    via: &SpriteEntry,
    role: FleetRole,
    name: &str,
    labels: Vec<String>,
    request_pem: String,
) -> Result<FleetEnrolled, FleetOpError> {
    let request = AdminRequest::FleetEnroll {
        role,
        name: name.to_string(),
        labels,
        request_pem,
    };
    let result = answered(transport::call(via, &request)?)?;
    serde_json::from_value(result)
        .map_err(|e| FleetOpError::Refused(format!("an answer zodex cannot read: {e}")))
}

/// The result of an answer that succeeded, or why it did not.
pub(crate) fn answered(response: Response) -> Result<serde_json::Value, FleetOpError> {
    match (response.ok, response.result, response.error) {
        (true, result, _) => Ok(result.unwrap_or_default()),
        (false, _, Some(error)) => Err(FleetOpError::Refused(error.message)),
        (false, _, None) => Err(FleetOpError::Refused("no reason given".into())),
    }
}
