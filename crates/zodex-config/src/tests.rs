//! The configuration's own tests: unknown keys, limits, `[agent_limits]`, `[github]`.

use super::*;

#[test]
fn unknown_keys_and_bad_targets_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zodex.toml");
    let base = "state_dir = \"/s\"\nadmin_socket = \"/a\"\nagent_socket = \"/g\"\nagent_uid = 5\n";
    std::fs::write(&path, format!("{base}agent_uuid = 6\n")).unwrap();
    let err = Config::load(&path).unwrap_err().to_string();
    assert!(err.contains("agent_uuid"), "{err}");
    std::fs::write(&path, format!("{base}[[targets]]\nrepo = \"a/b/c\"\n")).unwrap();
    let err = Config::load(&path).unwrap_err().to_string();
    assert!(err.contains("OWNER/NAME"), "{err}");
    std::fs::write(
        &path,
        format!("{base}[[targets]]\nowner = \"demo\"\ndefault_branch = \"main\"\n"),
    )
    .unwrap();
    let config = Config::load(&path).unwrap();
    assert_eq!(config.agent_uid, Some(5));
    assert!(!config.targets().unwrap().is_empty());
    let round = toml::from_str::<Config>(&config.to_toml()).unwrap();
    assert_eq!(round, config);
}

#[test]
fn agent_limits_default_per_key_and_refuse_zero_and_unknown_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zodex.toml");
    let base = "state_dir = \"/s\"\nadmin_socket = \"/a\"\nagent_socket = \"/g\"\nagent_uid = 5\n";
    std::fs::write(&path, base).unwrap();
    assert_eq!(
        Config::load(&path).unwrap().agent_limits().unwrap(),
        AgentLimits::default()
    );
    std::fs::write(&path, format!("{base}[agent_limits]\nspool_mib = 8\n")).unwrap();
    let limits = Config::load(&path).unwrap().agent_limits().unwrap();
    assert_eq!(limits.spool_mib, 8);
    assert_eq!(limits.connections, AgentLimits::default().connections);
    std::fs::write(&path, format!("{base}[agent_limits]\nbundles = 0\n")).unwrap();
    let err = Config::load(&path).unwrap_err().to_string();
    assert!(err.contains("bundles must be at least 1"), "{err}");
    std::fs::write(&path, format!("{base}[agent_limits]\nbundle = 3\n")).unwrap();
    let err = Config::load(&path).unwrap_err().to_string();
    assert!(err.contains("bundle"), "{err}");
}

#[test]
fn github_table_has_defaults_and_refuses_unknown_keys() {
    let base = "state_dir = \"/s\"\nadmin_socket = \"/a\"\nagent_socket = \"/g\"\nagent_uid = 5\n";
    let apps = "[github.reader]\napp_id = 1\nprivate_key_file = \"/k/r.pem\"\n[github.writer]\napp_id = 2\nprivate_key_file = \"/k/w.pem\"\n";
    let config: Config = toml::from_str(&format!("{base}[github]\n{apps}")).unwrap();
    let github = config.github.clone().unwrap();
    assert_eq!(github.api_url, DEFAULT_API_URL);
    assert_eq!(github.git_url, DEFAULT_GIT_URL);
    assert_eq!(github.writer.app_id, 2);
    let round = toml::from_str::<Config>(&config.to_toml()).unwrap();
    assert_eq!(round, config);
    let err = toml::from_str::<Config>(&format!("{base}[github]\napi_uri = \"x\"\n{apps}"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("api_uri"), "{err}");
    let err = toml::from_str::<Config>(&format!("{base}[github]\n{apps}key_file = \"/k\"\n"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("key_file"), "{err}");
}

#[test]
fn limits_have_defaults_and_refuse_unusable_values() {
    let base = "state_dir = \"/s\"\nadmin_socket = \"/a\"\nagent_socket = \"/g\"\nagent_uid = 5\n";
    let config: Config = toml::from_str(base).unwrap();
    assert_eq!(
        config.limits().unwrap(),
        Limits {
            max_pending_requests: 20,
            audit_retention_seconds: 90 * 24 * 3600,
            audit_max_rows: 200_000,
            max_request_ttl_seconds: 4 * 3600,
        }
    );
    let config: Config = toml::from_str(&format!(
        "{base}publisher_uid = 7\nmax_pending_requests = 300\naudit_retention_days = 7\naudit_max_rows = 5000\nmax_request_ttl = \"1d\"\n"
    ))
    .unwrap();
    assert_eq!(config.limits().unwrap().max_request_ttl_seconds, 86_400);
    assert_eq!(config.publisher_uid, Some(7));
    assert_eq!(config.limits().unwrap().max_pending_requests, 300);
    assert_eq!(config.limits().unwrap().audit_retention_seconds, 7 * 86400);
    for bad in [
        "max_pending_requests = 0",
        "audit_retention_days = 0",
        "audit_max_rows = 10",
        "max_request_ttl = \"31d\"",
        "max_request_ttl = \"soon\"",
    ] {
        let config: Config = toml::from_str(&format!("{base}{bad}\n")).unwrap();
        let err = config.limits().unwrap_err().to_string();
        assert!(err.contains(bad.split(' ').next().unwrap()), "{err}");
    }
}

/// A refused key is named with its table, not pointed at "line 1, column 1": a key unknown
/// (with its line) or missing, at the top level, in a table and in an array of tables.
#[test]
fn an_unknown_or_missing_key_is_named_with_its_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zodex.toml");
    let paths = "state_dir = \"/s\"\nadmin_socket = \"/a\"\nagent_socket = \"/g\"\n";
    let fleet = "[fleet]\nname = \"acme\"\nca_dir = \"/ca\"\n";
    let refused = |text: String| {
        std::fs::write(&path, text).unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(!err.contains("column"), "{err}");
        err
    };
    let err = refused(format!("{paths}agent_uid = 5\nagent_uuid = 6\n"));
    assert!(
        err.contains("the top level: unknown field `agent_uuid`") && err.contains("(line 5)"),
        "{err}"
    );
    let err = refused(format!("{paths}{fleet}replicas = \"r1\"\n"));
    assert!(
        err.contains("[fleet]: unknown field `replicas`") && err.contains("(line 7)"),
        "{err}"
    );
    let err = refused(format!("{paths}[fleet]\nca_dir = \"/ca\"\n"));
    assert!(err.contains("[fleet]: missing field `name`"), "{err}");
    let err = refused(format!(
        "admin_socket = \"/a\"\nagent_socket = \"/g\"\n{fleet}"
    ));
    assert!(
        err.contains("the top level: missing field `state_dir`"),
        "{err}"
    );
    let err = refused(format!(
        "{paths}agent_uid = 5\n[github.reader]\napp_id = 1\n[github.writer]\napp_id = 2\nprivate_key_file = \"/w\"\n"
    ));
    assert!(
        err.contains("[github.reader]: missing field `private_key_file`"),
        "{err}"
    );
    let err = refused(format!(
        "{paths}agent_uid = 5\n[[targets]]\nowner = \"a\"\n[[targets]]\nowner = \"b\"\nbranch = \"x\"\n"
    ));
    assert!(
        err.contains("[[targets]] #2: unknown field `branch`") && err.contains("(line 9)"),
        "{err}"
    );
}

/// `agent_uid` is a sprite's: required without `[fleet]`, left out by a fleet's service (whose
/// agent socket then admits no one), and not written back when absent.
#[test]
fn agent_uid_is_required_except_on_a_fleets_service() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zodex.toml");
    let paths = "state_dir = \"/s\"\nadmin_socket = \"/a\"\nagent_socket = \"/g\"\n";
    std::fs::write(&path, paths).unwrap();
    let err = Config::load(&path).unwrap_err().to_string();
    assert!(err.contains("agent_uid is missing"), "{err}");
    assert!(err.contains("[fleet]"), "{err}");
    std::fs::write(
        &path,
        format!("{paths}[relay]\nservices = [\"https://s:7443\"]\ndir = \"/k\"\n"),
    )
    .unwrap();
    let err = Config::load(&path).unwrap_err().to_string();
    assert!(err.contains("agent_uid is missing"), "{err}");
    std::fs::write(
        &path,
        format!("{paths}[fleet]\nname = \"acme\"\nca_dir = \"/ca\"\n"),
    )
    .unwrap();
    let config = Config::load(&path).unwrap();
    assert_eq!(config.agent_uid(), None);
    assert!(
        !config.to_toml().contains("agent_uid"),
        "{}",
        config.to_toml()
    );
    assert_eq!(Config::parse(&config.to_toml()).unwrap(), config);
}
