//! A member's own files (a sprite's relay, an operator's CLI): its private key (made where
//! the member runs, never sent), its certificate and the fleet's CA, in one directory.

use crate::identity::Identity;
use crate::{FleetError, MemberKey};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a member's files cannot be used. Messages say what to do next.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error(
        "cannot read {path}: {source}; enrol first (`zodex fleet enroll` for a sprite, `zodex fleet operator add` for an operator)"
    )]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the fleet key {path} is readable by others (mode {mode:o}); whoever reads it can act as this member: `chmod 600 {path}`"
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error(
        "the fleet key {path} belongs to uid {owner}, not to this user (uid {me}); `chown` it to the user that runs this"
    )]
    Owner { path: PathBuf, owner: u32, me: u32 },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the fleet files in {dir}: {source}")]
    Fleet { dir: PathBuf, source: FleetError },
}

/// A member's fleet files, read and checked: its key is its own (0600, this user's).
pub struct MemberFiles {
    pub key_pem: String,
    pub cert_pem: String,
    pub ca_pem: String,
}

impl std::fmt::Debug for MemberFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemberFiles(..)")
    }
}

impl MemberFiles {
    pub const KEY: &'static str = "key.pem";
    pub const CERT: &'static str = "cert.pem";
    pub const CA: &'static str = "ca.pem";

    pub fn read(dir: &Path) -> Result<MemberFiles, FilesError> {
        let read = |file: &str| {
            let path = dir.join(file);
            std::fs::read_to_string(&path).map_err(|source| FilesError::Read { path, source })
        };
        check_private(&dir.join(Self::KEY))?;
        Ok(MemberFiles {
            key_pem: read(Self::KEY)?,
            cert_pem: read(Self::CERT)?,
            ca_pem: read(Self::CA)?,
        })
    }

    /// The TLS client configuration these files make (the fleet's CA trusted, this member's
    /// certificate presented).
    pub fn client_config(&self) -> Result<std::sync::Arc<rustls::ClientConfig>, FleetError> {
        crate::tls::client_config(&self.ca_pem, &self.cert_pem, &self.key_pem)
    }
}

/// Makes the member's key in `dir` (mode 0600, the directory 0700) unless one is there, and
/// returns a certificate request for `identity` signed with it: what enrolment sends to the
/// service. The key itself never leaves `dir`.
pub fn request(dir: &Path, identity: &Identity) -> Result<String, FilesError> {
    let fleet_err = |source| FilesError::Fleet {
        dir: dir.to_path_buf(),
        source,
    };
    let write_err = |source| FilesError::Write {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(write_err)?;
    let key_path = dir.join(MemberFiles::KEY);
    let key = match std::fs::read_to_string(&key_path) {
        Ok(pem) => {
            check_private(&key_path)?;
            MemberKey::from_pem(&pem).map_err(fleet_err)?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = MemberKey::generate().map_err(fleet_err)?;
            use std::io::Write as _;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&key_path)
                .and_then(|mut f| f.write_all(key.key_pem().as_bytes()))
                .map_err(write_err)?;
            key
        }
        Err(source) => {
            return Err(FilesError::Read {
                path: key_path,
                source,
            });
        }
    };
    key.request_pem(identity).map_err(fleet_err)
}

/// When a member certificate valid from `not_before` to `not_after` is due for renewal: once
/// two thirds of its life have passed, so a day's certificate is renewed with eight hours to
/// spare (a relay retries each minute; an operator's `zodex` at its next command).
pub fn renewal_due_at(not_before: i64, not_after: i64) -> i64 {
    not_before + (not_after - not_before) * 2 / 3
}

/// A new certificate request for the identity the certificate `cert_pem` names, signed with
/// the key in `dir` (renewal: same key, same identity).
pub fn request_for(dir: &Path, cert_pem: &str) -> Result<String, FilesError> {
    let fleet_err = |source| FilesError::Fleet {
        dir: dir.to_path_buf(),
        source,
    };
    let leaf = crate::tls::certificates(cert_pem).map_err(fleet_err)?;
    let identity = Identity::of_certificate(&leaf[0]).map_err(fleet_err)?;
    request(dir, &identity)
}

/// Installs the certificate the service signed (and the fleet's CA) in `dir`, after checking
/// that it certifies the key there: a certificate for another key is refused and nothing is
/// written. Each file is replaced whole (written beside it, then renamed). Returns the
/// identity it names.
pub fn install(dir: &Path, certificate_pem: &str, ca_pem: &str) -> Result<Identity, FilesError> {
    let fleet_err = |source| FilesError::Fleet {
        dir: dir.to_path_buf(),
        source,
    };
    let key_path = dir.join(MemberFiles::KEY);
    check_private(&key_path)?;
    let key_pem = std::fs::read_to_string(&key_path).map_err(|source| FilesError::Read {
        path: key_path.clone(),
        source,
    })?;
    let leaf = crate::tls::certificates(certificate_pem).map_err(fleet_err)?;
    let identity = Identity::of_certificate(&leaf[0]).map_err(fleet_err)?;
    let certified = crate::certificate_key_sha256(&leaf[0]).map_err(fleet_err)?;
    let key = MemberKey::from_pem(&key_pem).map_err(fleet_err)?;
    let own = crate::request_key_sha256(&key.request_pem(&identity).map_err(fleet_err)?)
        .map_err(fleet_err)?;
    if certified != own {
        return Err(fleet_err(FleetError::BadCertificate(format!(
            "it certifies another key than {}; enrol again with this sprite's own request",
            key_path.display()
        ))));
    }
    // Issued by the CA it came with, valid now, and usable with this key.
    crate::tls::verify_member(ca_pem, certificate_pem).map_err(fleet_err)?;
    crate::tls::client_config(ca_pem, certificate_pem, &key_pem).map_err(fleet_err)?;
    replace(&dir.join(MemberFiles::CA), ca_pem)?;
    replace(&dir.join(MemberFiles::CERT), certificate_pem)?;
    Ok(identity)
}

/// Writes `text` beside `path`, then renames it over `path` (readers see the old file or the
/// new one, never half of one).
fn replace(path: &Path, text: &str) -> Result<(), FilesError> {
    let write_err = |source| FilesError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut staged = tempfile::Builder::new()
        .prefix(".zodex-")
        .tempfile_in(dir)
        .map_err(write_err)?;
    use std::io::Write as _;
    staged.write_all(text.as_bytes()).map_err(write_err)?;
    staged
        .as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .map_err(write_err)?;
    staged.persist(path).map_err(|e| write_err(e.error))?;
    Ok(())
}

/// The key file is this user's and nobody else may read it.
fn check_private(key_path: &Path) -> Result<(), FilesError> {
    let meta = std::fs::metadata(key_path).map_err(|source| FilesError::Read {
        path: key_path.to_path_buf(),
        source,
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(FilesError::Exposed {
            path: key_path.to_path_buf(),
            mode,
        });
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(FilesError::Owner {
            path: key_path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{Name, Role};

    #[test]
    fn the_key_is_made_once_and_only_its_own_certificate_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        let sprite_dir = dir.path().join("fleet");
        let fleet = Name::parse("acme").unwrap();
        let ca = crate::FleetCa::create(&fleet).unwrap();
        let who = Identity::new(&fleet, Role::Sprite, &Name::parse("s1").unwrap());
        let request_pem = request(&sprite_dir, &who).unwrap();
        let key = std::fs::read_to_string(sprite_dir.join("key.pem")).unwrap();
        let mode = std::fs::metadata(sprite_dir.join("key.pem"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!request_pem.contains("PRIVATE"));
        // Asked again, the same key signs the new request.
        request(&sprite_dir, &who).unwrap();
        assert_eq!(
            std::fs::read_to_string(sprite_dir.join("key.pem")).unwrap(),
            key
        );

        // A certificate for another key is refused and nothing is written.
        let other = MemberKey::generate().unwrap();
        let day = std::time::Duration::from_secs(86400);
        let foreign = ca
            .issue(&other.request_pem(&who).unwrap(), &who, day)
            .unwrap();
        let err = install(&sprite_dir, &foreign, ca.cert_pem()).unwrap_err();
        assert!(err.to_string().contains("another key"), "{err}");
        assert!(!sprite_dir.join("cert.pem").exists());

        let own = ca.issue(&request_pem, &who, day).unwrap();
        assert_eq!(install(&sprite_dir, &own, ca.cert_pem()).unwrap(), who);
        let files = MemberFiles::read(&sprite_dir).unwrap();
        assert_eq!(files.cert_pem, own);
        // Another CA than the one the certificate chains to is refused.
        let stranger = crate::FleetCa::create(&fleet).unwrap();
        assert!(install(&sprite_dir, &own, stranger.cert_pem()).is_err());
        assert_eq!(
            std::fs::read_to_string(sprite_dir.join("ca.pem")).unwrap(),
            ca.cert_pem()
        );
    }

    #[test]
    fn a_key_others_can_read_refuses_start() {
        let dir = tempfile::tempdir().unwrap();
        for (file, text) in [("key.pem", "k"), ("cert.pem", "c"), ("ca.pem", "a")] {
            std::fs::write(dir.path().join(file), text).unwrap();
        }
        let key = dir.path().join("key.pem");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = MemberFiles::read(dir.path()).unwrap_err();
        assert!(err.to_string().contains("chmod 600"), "{err}");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(MemberFiles::read(dir.path()).unwrap().cert_pem, "c");
    }
}
