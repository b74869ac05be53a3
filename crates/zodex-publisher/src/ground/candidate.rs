//! The App keys, App ids and API URL an install is about to put in place, checked against
//! GitHub before anything on the sprite changes (`zodex-prd install --check-only`, and the
//! first thing `install` does with new keys): the same `GET /app` as each App that the ground
//! of `serve` makes, from keys held in memory only. A key GitHub refuses as its App is tried
//! as the other App, so keys given the wrong way round are said to be swapped.
//!
//! It writes nothing and reads no installed file: what it is given is all it checks.

use super::{Finding, api_finding, app_findings, ask_both};
use crate::github::{AppFacts, AppKey, GitHub, GithubError, glimpse};
use std::path::PathBuf;
use zodex_config::GithubApp;
use zodex_engine::store::App;

/// What is about to be installed: both Apps' ids and private keys (PEM), and the URLs.
#[derive(Clone)]
pub struct Candidate {
    pub api_url: String,
    pub git_url: String,
    pub reader_id: u64,
    pub reader_pem: String,
    pub writer_id: u64,
    pub writer_pem: String,
}

impl std::fmt::Debug for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Candidate {{ api_url: {:?}, reader_id: {}, writer_id: {}, .. }}",
            self.api_url, self.reader_id, self.writer_id
        )
    }
}

impl Candidate {
    fn id(&self, app: App) -> u64 {
        match app {
            App::Reader => self.reader_id,
            App::Writer => self.writer_id,
        }
    }

    fn pem(&self, app: App) -> &str {
        match app {
            App::Reader => &self.reader_pem,
            App::Writer => &self.writer_pem,
        }
    }

    /// A client whose keys sign as the given Apps' ids (`swapped`: each key as the other App).
    fn client(&self, swapped: bool) -> Result<GitHub, Vec<Finding>> {
        let key = |app: App| {
            let as_id = if swapped {
                self.id(other(app))
            } else {
                self.id(app)
            };
            AppKey::from_pem(app, as_id, self.pem(app).as_bytes()).map_err(|e| {
                Finding::fail(
                    key_check(app),
                    format!(
                        "the {name} key is not an RSA private key in PEM ({e}): pass the .pem file GitHub gave you for App {id} with --{name}-key",
                        name = app.as_str(),
                        id = self.id(app)
                    ),
                )
            })
        };
        let (reader, writer) = (key(App::Reader), key(App::Writer));
        let (reader, writer) = match (reader, writer) {
            (Ok(reader), Ok(writer)) => (reader, writer),
            (reader, writer) => {
                return Err([reader.err(), writer.err()].into_iter().flatten().collect());
            }
        };
        GitHub::new(&self.api_url, &self.git_url, reader, writer)
            .map_err(|e| vec![Finding::fail("github-api", e.to_string())])
    }
}

fn other(app: App) -> App {
    match app {
        App::Reader => App::Writer,
        App::Writer => App::Reader,
    }
}

fn key_check(app: App) -> &'static str {
    match app {
        App::Reader => "reader-key",
        App::Writer => "writer-key",
    }
}

fn app_check(app: App) -> &'static str {
    match app {
        App::Reader => "reader-app",
        App::Writer => "writer-app",
    }
}

/// Every finding about `candidate`; all hold only when GitHub answered at `api_url`, each key
/// authenticates as its App, the reader is read-only and the writer can write.
pub async fn check_candidate(candidate: &Candidate) -> Vec<Finding> {
    let client = match candidate.client(false) {
        Ok(client) => client,
        Err(findings) => return findings,
    };
    let (reader, writer) = ask_both(&client).await;
    let api = api_finding(&client, &reader, &writer);
    if !api.ok {
        return vec![api];
    }
    let refused = |r: &Result<AppFacts, GithubError>| {
        matches!(
            r,
            Err(GithubError::Unauthorized { .. } | GithubError::NoSuchApp { .. })
        )
    };
    // Each refused key, asked of GitHub as the other App.
    let (mut reader_elsewhere, mut writer_elsewhere) = (None, None);
    if (refused(&reader) || refused(&writer))
        && let Ok(swapped) = candidate.client(true)
    {
        let (r, w) = ask_both(&swapped).await;
        reader_elsewhere = r.ok().filter(|_| refused(&reader));
        writer_elsewhere = w.ok().filter(|_| refused(&writer));
    }
    let mut findings = vec![api];
    if let (Some(r), Some(w)) = (&reader_elsewhere, &writer_elsewhere) {
        findings.push(Finding::fail(
            "app-keys",
            format!(
                "the writer key belongs to App {}{}, not {}, and the reader key to App {}{}, not {}: the keys look swapped (or the App ids are): give --writer-app-id and --writer-key of the App that writes, --reader-app-id and --reader-key of the read-only one",
                w.id,
                slug(w),
                candidate.writer_id,
                r.id,
                slug(r),
                candidate.reader_id,
            ),
        ));
        return findings;
    }
    for (app, answer, elsewhere) in [
        (App::Reader, reader, reader_elsewhere),
        (App::Writer, writer, writer_elsewhere),
    ] {
        findings.extend(app_answer(candidate, app, answer, elsewhere));
    }
    findings
}

/// The findings of one App: refused (and perhaps the other App's key), or its permissions.
fn app_answer(
    candidate: &Candidate,
    app: App,
    answer: Result<AppFacts, GithubError>,
    elsewhere: Option<AppFacts>,
) -> Vec<Finding> {
    let (name, id) = (app.as_str(), candidate.id(app));
    let other_name = other(app).as_str();
    match (answer, elsewhere) {
        (Err(GithubError::Unauthorized { .. } | GithubError::NoSuchApp { .. }), Some(facts)) => {
            vec![Finding::fail(
                app_check(app),
                format!(
                    "the {name} key belongs to App {}{} (the {other_name} App), not {id}: pass App {id}'s private key with --{name}-key",
                    facts.id,
                    slug(&facts)
                ),
            )]
        }
        (Err(GithubError::Unauthorized { message, .. }), None) => vec![Finding::fail(
            app_check(app),
            format!(
                "GitHub refused the {name} key as App {id} (401: {message}): the key is not App {id}'s, or --{name}-app-id is wrong; pass App {id}'s private key with --{name}-key, or the id its settings page shows with --{name}-app-id (and check the sprite's clock)"
            ),
        )],
        (Err(GithubError::NoSuchApp { .. }), None) => vec![Finding::fail(
            app_check(app),
            format!(
                "GitHub knows no App {id} (Integration not found): pass the id the {name} App's settings page shows with --{name}-app-id"
            ),
        )],
        (answer, _) => {
            let config = GithubApp {
                app_id: id,
                private_key_file: PathBuf::from(format!("(the {name} key given)")),
            };
            app_findings(app, &config, answer)
        }
    }
}

fn slug(facts: &AppFacts) -> String {
    facts
        .slug
        .as_deref()
        .map(|s| format!(" ({})", glimpse(s)))
        .unwrap_or_default()
}
