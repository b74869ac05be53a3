//! The devhub a sprite's publisher (or its fleet's service) writes to: the demo world plus
//! `demo/trunk`.

use super::super::devhub::{Demo, git_ok, keys};
use std::path::Path;
use zodex::devhub::{DemoSeed, DevHubConfig, Level, Permissions, Setup, start_in_background};

/// The demo world plus `demo/trunk`, whose default branch on GitHub is `trunk`.
pub fn world(dir: &Path) -> DemoSeed {
    let [reader, writer, _] = keys();
    let mut setup = Setup::open(dir).unwrap();
    let read = || Permissions::new().with("contents", Level::Read);
    let write = || {
        Permissions::new()
            .with("contents", Level::Write)
            .with("pull_requests", Level::Write)
            .with("workflows", Level::Write)
    };
    let reader_app_id = setup
        .add_app("zodex-reader", &reader.public_pem, read())
        .unwrap();
    let writer_app_id = setup
        .add_app("zodex-writer", &writer.public_pem, write())
        .unwrap();
    let app_repo_id = setup.add_repo("demo", "app", "main", true).unwrap();
    let lib_repo_id = setup.add_repo("demo", "lib", "main", true).unwrap();
    setup.add_repo("demo", "trunk", "trunk", true).unwrap();
    let other_repo_id = setup.add_repo("demo", "other", "main", true).unwrap();
    for (name, branch) in [("app", "main"), ("lib", "main"), ("trunk", "trunk")] {
        let scratch = tempfile::tempdir().unwrap();
        let work = scratch.path();
        git_ok(work, &["init", "--quiet", "-b", branch]);
        super::super::devhub::commit_file(
            work,
            "README.md",
            format!("# demo/{name}\n").as_bytes(),
            "Initial commit",
        );
        super::super::devhub::commit_file(work, "src/hello.txt", b"hello\n", "Add a greeting");
        let bare = setup.repo_path("demo", name);
        git_ok(
            work,
            &[
                "push",
                "--quiet",
                bare.to_str().unwrap(),
                &format!("{branch}:refs/heads/{branch}"),
            ],
        );
    }
    let covered = ["app", "lib", "trunk"];
    let reader_installation_id = setup
        .install(
            reader_app_id,
            "demo",
            Some(&["app", "lib", "trunk", "other"]),
            read(),
        )
        .unwrap();
    let writer_installation_id = setup
        .install(writer_app_id, "demo", Some(&covered), write())
        .unwrap();
    setup.save().unwrap();
    DemoSeed {
        reader_app_id,
        writer_app_id,
        reader_installation_id,
        writer_installation_id,
        app_repo_id,
        other_repo_id,
        lib_repo_id,
    }
}

/// The devhub of [`world`], started on loopback.
pub(super) fn start_world() -> Demo {
    let seed_dir = tempfile::tempdir().unwrap();
    let seed = world(seed_dir.path());
    let hub = start_in_background(DevHubConfig::new(seed_dir.path())).unwrap();
    Demo {
        hub,
        seed,
        dir: seed_dir,
        client: reqwest::blocking::Client::builder().build().unwrap(),
    }
}
