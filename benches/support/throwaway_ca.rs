//! A certificate authority that lives for one bench run, so that TLS in front of devhub costs
//! what it costs in front of GitHub: it signs one server certificate for the loopback address,
//! and its own certificate goes to a file the clients are told to trust (the publisher's rustls
//! native roots read `SSL_CERT_FILE`; git reads `GIT_SSL_CAINFO` or `http.sslCAInfo`). Its key
//! never leaves this process.

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring::default_provider;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

pub struct ThrowawayCa {
    /// The CA's certificate (PEM): the one certificate a client is told to trust.
    pub cert_file: PathBuf,
    /// The server side: the loopback certificate the CA signed, and its key.
    pub server: Arc<ServerConfig>,
}

impl ThrowawayCa {
    /// A new CA, its certificate written to `dir/ca.pem`, and a server certificate for
    /// `127.0.0.1` and `localhost`.
    pub fn create(dir: &Path) -> anyhow::Result<Self> {
        let ca_key = KeyPair::generate().context("cannot make the CA's key")?;
        let mut ca = CertificateParams::default();
        ca.distinguished_name
            .push(DnType::CommonName, "zodex bench throwaway CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).context("cannot sign the CA")?;
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate().context("cannot make the server's key")?;
        let mut server = CertificateParams::new(vec!["localhost".to_string()])
            .context("cannot describe the server certificate")?;
        server
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = server
            .signed_by(&key, &issuer)
            .context("cannot sign the server certificate")?;

        let cert_file = dir.join("ca.pem");
        std::fs::write(&cert_file, ca_cert.pem())
            .with_context(|| format!("cannot write {}", cert_file.display()))?;
        let key = PrivateKeyDer::from(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(Arc::new(default_provider()))
            .with_safe_default_protocol_versions()
            .context("rustls offers no protocol version")?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .context("rustls refuses the server certificate")?;
        // devhub speaks HTTP/1.1 only; saying so keeps clients from offering HTTP/2 to it.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            cert_file,
            server: Arc::new(config),
        })
    }
}
