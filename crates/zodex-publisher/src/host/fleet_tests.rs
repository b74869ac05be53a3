//! The fleet registry through the admin requests: enrolment signs the member's own request
//! and registers its key; a request for another identity enrols nothing; removal is recorded.

use super::*;
use zodex_config::Config;
use zodex_engine::Principal;
use zodex_protocol::{AdminRequest, FleetRole};

fn fleet_host(dir: &std::path::Path) -> Arc<Host> {
    crate::fleet::FleetService::init(&dir.join("ca"), "acme").unwrap();
    let config: Config = toml::from_str(&format!(
        "state_dir = \"{d}/state\"\nadmin_socket = \"{d}/a.sock\"\nagent_socket = \"{d}/g.sock\"\nagent_uid = 1\n[fleet]\nname = \"acme\"\nca_dir = \"{d}/ca\"\n",
        d = dir.display()
    ))
    .unwrap();
    Arc::new(Host::open(&Checked::of(config).unwrap()).unwrap())
}

fn enroll(name: &str, request_pem: &str, labels: &[&str]) -> AdminRequest {
    AdminRequest::FleetEnroll {
        role: FleetRole::Sprite,
        name: name.into(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        request_pem: request_pem.into(),
    }
}

#[tokio::test]
async fn enrolment_signs_the_members_own_request_and_registers_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let host = fleet_host(dir.path());
    let operator = Principal::Operator("uid:0".parse().unwrap());
    let fleet = zodex_fleet::Name::parse("acme").unwrap();
    let s1 = zodex_fleet::Identity::new(
        &fleet,
        zodex_fleet::Role::Sprite,
        &zodex_fleet::Name::parse("s1").unwrap(),
    );
    let key = zodex_fleet::MemberKey::generate().unwrap();
    let request = key.request_pem(&s1).unwrap();

    // A request that asks to be s1, presented as s2: nothing is enrolled.
    let refused = host
        .admin(operator.clone(), enroll("s2", &request, &[]))
        .await;
    assert!(!refused.ok, "{refused:?}");
    let members = host
        .admin(operator.clone(), AdminRequest::FleetMembers)
        .await;
    assert_eq!(members.result.unwrap(), serde_json::json!([]));

    let enrolled = host
        .admin(operator.clone(), enroll("s1", &request, &["team=web"]))
        .await;
    assert!(enrolled.ok, "{enrolled:?}");
    let answer = enrolled.result.unwrap();
    assert_eq!(answer["identity"], "spiffe://acme/sprite/s1");
    assert_eq!(answer["member"]["labels"], serde_json::json!(["team=web"]));
    let pem = answer["certificate_pem"].as_str().unwrap();
    let der = zodex_fleet::tls::certificates(pem).unwrap().remove(0);
    // The registered key is the key the certificate certifies, and the private key never
    // travelled: the answer and the request hold no private key.
    assert_eq!(
        answer["member"]["key_sha256"].as_str().unwrap(),
        zodex_fleet::certificate_key_sha256(&der).unwrap()
    );
    assert!(!answer.to_string().contains("PRIVATE KEY"));

    // Its own key asking again (an enrolment whose answer was lost) is signed again; another
    // key for it while it is enrolled is refused: a key is never replaced silently. Removed,
    // it is listed as removed.
    let again = host
        .admin(operator.clone(), enroll("s1", &request, &[]))
        .await;
    assert!(again.ok, "{again:?}");
    assert_eq!(
        again.result.unwrap()["member"]["key_sha256"],
        answer["member"]["key_sha256"]
    );
    let other_key = zodex_fleet::MemberKey::generate().unwrap();
    let rekeyed = host
        .admin(
            operator.clone(),
            enroll("s1", &other_key.request_pem(&s1).unwrap(), &[]),
        )
        .await;
    assert!(!rekeyed.ok, "{rekeyed:?}");
    assert!(
        rekeyed.error.unwrap().message.contains("remove it first"),
        "the refusal says what to do"
    );
    let removed = host
        .admin(
            operator.clone(),
            AdminRequest::FleetRemove {
                role: FleetRole::Sprite,
                name: "s1".into(),
            },
        )
        .await;
    assert!(removed.ok, "{removed:?}");
    let members = host.admin(operator, AdminRequest::FleetMembers).await;
    let members = members.result.unwrap();
    assert_eq!(members[0]["name"], "s1");
    assert!(members[0]["removed_at"].is_i64(), "{members}");
}

#[tokio::test]
async fn a_publisher_without_fleet_says_how_to_serve_one() {
    let dir = tempfile::tempdir().unwrap();
    let config: Config = toml::from_str(&format!(
        "state_dir = \"{d}/state\"\nadmin_socket = \"{d}/a.sock\"\nagent_socket = \"{d}/g.sock\"\nagent_uid = 1\n",
        d = dir.path().display()
    ))
    .unwrap();
    let host = Arc::new(Host::open(&Checked::of(config).unwrap()).unwrap());
    let answer = host
        .admin(
            Principal::Operator("uid:0".parse().unwrap()),
            AdminRequest::FleetMembers,
        )
        .await;
    assert!(!answer.ok);
    assert!(
        answer.error.unwrap().message.contains("[fleet]"),
        "names the table to add"
    );
}
