//! Real TLS 1.3 handshakes over loopback TCP between configurations this crate builds.

use super::*;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

const HOUR: Duration = Duration::from_secs(3600);

fn name(text: &str) -> Name {
    Name::parse(text).unwrap()
}

struct Fleet {
    ca: FleetCa,
    server_cert: String,
    server_key: String,
}

fn fleet(called: &str) -> Fleet {
    let ca = FleetCa::create(&name(called)).unwrap();
    let (server_cert, server_key) = ca
        .issue_service(
            &name("replica-a"),
            &["localhost".into(), "127.0.0.1".into()],
            HOUR,
        )
        .unwrap();
    Fleet {
        ca,
        server_cert,
        server_key,
    }
}

/// A member's key and the certificate `ca` issues it as `role` `who`.
fn member(ca: &FleetCa, role: Role, who: &str) -> (String, String) {
    let key = MemberKey::generate().unwrap();
    let identity = Identity::new(ca.fleet(), role, &name(who));
    let request = key.request_pem(&identity).unwrap();
    (ca.issue(&request, &identity, HOUR).unwrap(), key.key_pem())
}

/// One side's result, or its error's text (asserted on: what a refusal says).
type Said<T> = Result<T, String>;

/// One connection: the service (of `service`) accepts it and answers with the sprite it saw;
/// the member presents `cert`/`key` and trusts `trusted_ca`. The member's result, and what the
/// service saw (its error when the handshake failed).
async fn connect(
    service: &Fleet,
    trusted_ca: &str,
    cert: &str,
    key: &str,
) -> (Said<String>, Said<Identity>) {
    connect_as(service, tls::client_config(trusted_ca, cert, key).unwrap()).await
}

/// [`connect`] with the member's TLS client `client`.
async fn connect_as(
    service: &Fleet,
    client: std::sync::Arc<rustls::ClientConfig>,
) -> (Said<String>, Said<Identity>) {
    let server = server_config(service);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let fleet = service.ca.fleet().clone();
    let accepted = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut stream = TlsAcceptor::from(server)
            .accept(tcp)
            .await
            .map_err(|e| e.to_string())?;
        let peer = tls::peer_identity(stream.get_ref().1.peer_certificates(), &fleet, Role::Sprite)
            .map_err(|e| e.to_string())?;
        stream.write_all(peer.uri().as_bytes()).await.unwrap();
        stream.shutdown().await.unwrap();
        Ok(peer)
    });
    let member = async {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let server_name = "localhost".try_into().unwrap();
        let mut stream = TlsConnector::from(client)
            .connect(server_name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .await
            .map_err(|e| e.to_string())?;
        Ok(answer)
    }
    .await;
    (member, accepted.await.unwrap())
}

fn server_config(service: &Fleet) -> std::sync::Arc<rustls::ServerConfig> {
    tls::server_config(
        service.ca.cert_pem(),
        &service.server_cert,
        &service.server_key,
    )
    .unwrap()
}

#[tokio::test]
async fn a_sprite_with_its_fleets_certificate_is_named_on_the_service() {
    let acme = fleet("acme");
    let (cert, key) = member(&acme.ca, Role::Sprite, "s1");
    let (member, seen) = connect(&acme, acme.ca.cert_pem(), &cert, &key).await;
    assert_eq!(member.unwrap(), "spiffe://acme/sprite/s1");
    assert_eq!(seen.unwrap().name, name("s1"));
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_refused_in_the_handshake() {
    let acme = fleet("acme");
    // Another CA of the same fleet name: its certificate names "s1" too, and must not pass.
    let impostor = fleet("acme");
    let (cert, key) = member(&impostor.ca, Role::Sprite, "s1");
    let (member, seen) = connect(&acme, acme.ca.cert_pem(), &cert, &key).await;
    let refused = seen.unwrap_err();
    // Same issuer name, another key: the signature does not verify.
    assert!(
        refused.contains("invalid peer certificate: BadSignature"),
        "{refused}"
    );
    assert!(member.is_err(), "the member got an answer: {member:?}");
}

#[tokio::test]
async fn an_expired_certificate_is_refused_in_the_handshake() {
    let acme = fleet("acme");
    let key = MemberKey::generate().unwrap();
    let identity = Identity::new(acme.ca.fleet(), Role::Sprite, &name("s1"));
    let request = key.request_pem(&identity).unwrap();
    let yesterday = time::OffsetDateTime::now_utc() - Duration::from_secs(24 * 3600);
    let cert = acme
        .ca
        .issue_at(&request, &identity, yesterday, HOUR)
        .unwrap();
    let (member, seen) = connect(&acme, acme.ca.cert_pem(), &cert, &key.key_pem()).await;
    let refused = seen.unwrap_err();
    assert!(refused.contains("certificate expired"), "{refused}");
    assert!(member.is_err());
}

#[tokio::test]
async fn an_operators_certificate_does_not_pass_as_a_sprite() {
    let acme = fleet("acme");
    let (cert, key) = member(&acme.ca, Role::Operator, "alice");
    let (_, seen) = connect(&acme, acme.ca.cert_pem(), &cert, &key).await;
    let refused = seen.unwrap_err();
    assert!(
        refused.contains("operator alice") && refused.contains("sprite"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_member_refuses_a_service_its_ca_did_not_certify() {
    let acme = fleet("acme");
    let other = fleet("acme");
    let (cert, key) = member(&acme.ca, Role::Sprite, "s1");
    // The member trusts acme's CA; the service presents other's certificate.
    let (member, _) = connect(&other, acme.ca.cert_pem(), &cert, &key).await;
    let refused = member.unwrap_err();
    assert!(refused.contains("invalid peer certificate"), "{refused}");
}

#[tokio::test]
async fn a_joiner_reaches_only_the_service_of_the_ca_its_code_pins_and_is_named_as_no_one() {
    let acme = fleet("acme");
    let code = crate::JoinCode::new(acme.ca.fleet(), &name("bob"), acme.ca.cert_pem()).unwrap();
    let (member, seen) = connect_as(&acme, code.client_config().unwrap()).await;
    // The handshake holds without a client certificate, and names no member.
    assert!(
        !member.as_deref().unwrap_or_default().contains("spiffe"),
        "a joiner was answered as a member: {member:?}"
    );
    let seen = seen.unwrap_err();
    assert!(seen.contains("presented none"), "{seen}");
    // A service of another CA (same fleet name) never gets the code's secret: the joiner's
    // own handshake fails.
    let impostor = fleet("acme");
    let (member, _) = connect_as(&impostor, code.client_config().unwrap()).await;
    let refused = member.unwrap_err();
    assert!(refused.contains("pins"), "{refused}");
}

#[test]
fn a_request_for_another_identity_is_not_signed() {
    let acme = fleet("acme");
    let key = MemberKey::generate().unwrap();
    let asked = Identity::new(acme.ca.fleet(), Role::Sprite, &name("s2"));
    let registered = Identity::new(acme.ca.fleet(), Role::Sprite, &name("s1"));
    let request = key.request_pem(&asked).unwrap();
    let err = acme.ca.issue(&request, &registered, HOUR).unwrap_err();
    assert!(
        err.to_string()
            .contains("registered as spiffe://acme/sprite/s1"),
        "{err}"
    );
    // Nor for a member of another fleet.
    let elsewhere = Identity::new(&name("other"), Role::Sprite, &name("s1"));
    let request = key.request_pem(&elsewhere).unwrap();
    assert!(matches!(
        acme.ca.issue(&request, &elsewhere, HOUR),
        Err(FleetError::OtherFleet(_))
    ));
}

#[test]
fn a_tampered_request_is_not_signed() {
    let acme = fleet("acme");
    let key = MemberKey::generate().unwrap();
    let identity = Identity::new(acme.ca.fleet(), Role::Sprite, &name("s1"));
    let request = key.request_pem(&identity).unwrap();
    // Flip one character inside the base64 body: the signature no longer holds (or it no
    // longer parses); either way nothing is issued.
    let mut bytes = request.into_bytes();
    let at = bytes.len() / 2;
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(bytes).unwrap();
    assert!(matches!(
        acme.ca.issue(&tampered, &identity, HOUR),
        Err(FleetError::BadRequest(_))
    ));
}

#[test]
fn an_issued_member_certificate_is_a_client_leaf_naming_one_identity() {
    use x509_parser::prelude::*;
    let acme = fleet("acme");
    let (cert, _) = member(&acme.ca, Role::Sprite, "s1");
    let der = tls::certificates(&cert).unwrap().remove(0);
    let (_, parsed) = parse_x509_certificate(&der).unwrap();
    assert!(!parsed.is_ca());
    let eku = parsed.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth && !eku.any);
    let identity = Identity::of_certificate(&der).unwrap();
    assert_eq!(identity.uri(), "spiffe://acme/sprite/s1");
    // The CA reloads from what it wrote, and keeps issuing certificates members accept.
    let again = FleetCa::load(acme.ca.fleet(), acme.ca.cert_pem(), acme.ca.key_pem()).unwrap();
    let (cert, _) = member(&again, Role::Sprite, "s2");
    assert!(Identity::of_certificate(&tls::certificates(&cert).unwrap()[0]).is_ok());
}

#[test]
fn debug_output_never_shows_a_key() {
    let acme = fleet("acme");
    let shown = format!("{:?} {:?}", acme.ca, MemberKey::generate().unwrap());
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
}

/// A CA carried to another replica: taken when it is this fleet's and its key is the one its
/// certificate holds; refused for another fleet's CA or a key of another CA.
#[test]
fn an_imported_ca_must_be_this_fleets_with_its_own_key() {
    let acme = Name::parse("acme").unwrap();
    let ca = FleetCa::create(&acme).unwrap();
    let carried = FleetCa::import(&acme, ca.cert_pem(), ca.key_pem()).unwrap();
    assert!(carried.is_certificate(ca.cert_pem()));
    let other = FleetCa::create(&acme).unwrap();
    assert!(!carried.is_certificate(other.cert_pem()));
    let err = FleetCa::import(&acme, ca.cert_pem(), other.key_pem())
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("not the key it certifies"),
        "{err}"
    );
    let globex = Name::parse("globex").unwrap();
    let err = FleetCa::import(&globex, ca.cert_pem(), ca.key_pem())
        .err()
        .unwrap();
    assert!(
        matches!(err, FleetError::OtherFleet(ref f) if f == "acme"),
        "{err}"
    );
}

/// A relay's second connection to the same replica resumes the first's TLS session (no
/// certificate verified again on either side, one handshake's signatures saved), and the
/// service still knows the member from it: the resumed session carries the member's
/// certificate, which admission checks against the registry on every request as before.
#[tokio::test]
async fn a_members_next_connection_resumes_its_session_and_is_still_named() {
    let acme = fleet("acme");
    let (cert, key) = member(&acme.ca, Role::Sprite, "s1");
    let client = tls::client_config(acme.ca.cert_pem(), &cert, &key).unwrap();
    let acceptor = TlsAcceptor::from(server_config(&acme));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let fleet = acme.ca.fleet().clone();
    let service = tokio::spawn(async move {
        let mut seen = Vec::new();
        for _ in 0..2 {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut stream = acceptor.accept(tcp).await.unwrap();
            let (_, connection) = stream.get_ref();
            let kind = connection.handshake_kind();
            let peer =
                tls::peer_identity(connection.peer_certificates(), &fleet, Role::Sprite).unwrap();
            stream.write_all(b"ok").await.unwrap();
            stream.shutdown().await.unwrap();
            seen.push((kind, peer.name));
        }
        seen
    });
    for _ in 0..2 {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let mut stream = TlsConnector::from(client.clone())
            .connect("localhost".try_into().unwrap(), tcp)
            .await
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        assert_eq!(answer, "ok");
    }
    let seen = service.await.unwrap();
    assert_eq!(
        seen,
        [
            (Some(rustls::HandshakeKind::Full), name("s1")),
            (Some(rustls::HandshakeKind::Resumed), name("s1")),
        ]
    );
}
