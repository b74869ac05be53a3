//! Proofs over the policies: the shipped set proven with a real SMT solver (cvc5, which
//! `.ci/run` installs), every built-in policy shown to matter (removing a `forbid` breaks a
//! property; removing a `permit` changes decisions), and an operator policy that re-opens what
//! the built-ins keep closed refused at start with a counterexample — unless waived.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::dev::{Dev, Run};
use zodex::engine::policy::Policies;
use zodex::engine::properties::{NEVER_ERRORS, Properties};
use zodex::publisher::prove::{self, Outcome, SolverCommand};

const PRD: &str = env!("CARGO_BIN_EXE_zodex-prd");

/// The solver, or a failure that says how to get one: these tests must not pass by skipping.
fn solver() -> SolverCommand {
    SolverCommand::find()
        .expect("no SMT solver on PATH: install cvc5 (`apt-get install cvc5`), as .ci/run does")
}

fn prd(args: &[&str]) -> Run {
    Run::from(
        Command::new(PRD)
            .args(args)
            .env_remove("ZODEX_CONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap(),
    )
}

/// An operator policy directory holding `text` as `mine.cedar`.
fn operator_dir(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mine.cedar"), text).unwrap();
    dir
}

/// Lets the agent force-push without any grant or YOLO scope.
const FORCE_WITHOUT_GRANT: &str = "// The agent may force-push anything.\n@id(\"agent-force-push\")\npermit (principal is Zodex::Agent, action == Zodex::Action::\"Push\", resource)\nwhen { context.force };\n";

/// How long it takes (at most 5 s: every start proves) is `benches/prove.rs`'s figure.
#[test]
fn the_shipped_policies_are_proven() {
    solver();
    let run = prd(&["policy", "prove"]).ok();
    let schema = Policies::builtin().unwrap().schema;
    let ids = Properties::builtin(&schema).unwrap().ids();
    assert!(ids.len() >= 16, "{ids:?}");
    for id in &ids {
        let line = run
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id.as_str()))
            .unwrap_or_else(|| panic!("no line for {id}:\n{}", run.stdout));
        assert!(line.contains(" holds "), "{line}");
        assert!(line.trim_end().ends_with(" ms"), "{line}");
    }
    assert!(run.stdout.contains("All properties hold"), "{}", run.stdout);
}

/// Removing any built-in `forbid` breaks at least one property (with a counterexample the
/// ordinary authorizer reproduces); removing any built-in `permit` changes decisions. So no
/// property is vacuous and no built-in policy is dead.
#[tokio::test]
async fn every_builtin_policy_has_teeth() {
    let solver = solver();
    let full = Policies::builtin().unwrap();
    let properties = Properties::builtin(&full.schema).unwrap();
    let mut caught = Vec::new();
    for (id, _) in &full.origins {
        let policy = full.set.policy(&cedar_policy::PolicyId::new(id)).unwrap();
        if policy.effect() == cedar_policy::Effect::Permit {
            // A permit only ever adds what may happen: no bound can miss it, so its teeth are
            // that some request is allowed by it alone.
            assert!(
                prove::changes_decisions(&full, id, &solver).await.unwrap(),
                "permit `{id}` changes no decision: it is dead"
            );
            continue;
        }
        let mut less = Policies {
            schema: full.schema.clone(),
            set: full.set.clone(),
            origins: full.origins.clone(),
        };
        less.set
            .remove_static(cedar_policy::PolicyId::new(id))
            .unwrap();
        let report = prove::prove(&less, &properties, &[], &solver)
            .await
            .unwrap();
        let failing: Vec<_> = report.broken().collect();
        assert!(
            !failing.is_empty(),
            "removing forbid `{id}` breaks no property: add one that needs it"
        );
        for verdict in &failing {
            let Outcome::Fails { counterexample } = &verdict.outcome else {
                panic!("{}: {:?}", verdict.property, verdict.outcome);
            };
            assert!(
                counterexample.reproduced,
                "{}: {counterexample}",
                verdict.property
            );
            assert_eq!(counterexample.decision, "Allow", "{counterexample}");
        }
        caught.push(format!(
            "{id} -> {}",
            failing
                .iter()
                .map(|v| v.property.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    eprintln!("{}", caught.join("\n"));
    assert!(
        caught
            .iter()
            .any(|c| c.starts_with("protect-default-branch ->")
                && c.contains("default-branch-never-forced-or-deleted"))
    );
}

#[test]
fn an_operator_permit_that_opens_a_push_without_a_grant_fails_with_a_counterexample() {
    solver();
    let dir = operator_dir(FORCE_WITHOUT_GRANT);
    let run = prd(&["policy", "prove", "--dir", dir.path().to_str().unwrap()]).code(3);
    let out = &run.stdout;
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("push-needs-live-grant-or-yolo"))
        .unwrap();
    assert!(line.contains("FAILS"), "{out}");
    // The counterexample, in the operator's words, re-checked by the ordinary authorizer.
    assert!(out.contains("the agent may Push on repository \""), "{out}");
    assert!(out.contains("force = true"), "{out}");
    assert!(
        out.contains("decided Allow by agent-force-push (re-checked with the ordinary authorizer)"),
        "{out}"
    );
    assert!(
        out.contains("waive_properties = [\"push-needs-live-grant-or-yolo\"]"),
        "{out}"
    );
    // What the built-in forbids close stays closed: those properties still hold.
    for id in [
        "default-branch-never-forced-or-deleted",
        "nothing-over-the-ceiling",
    ] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(id))
            .unwrap();
        assert!(line.contains("holds"), "{line}");
    }
}

#[test]
fn a_permit_a_builtin_forbid_overrides_is_named_as_changing_nothing() {
    solver();
    let dir = operator_dir(
        "@id(\"force-main\")\npermit (principal is Zodex::Agent, action == Zodex::Action::\"Push\", resource)\nwhen { context.is_default_branch && context.force };\n",
    );
    let run = prd(&["policy", "prove", "--dir", dir.path().to_str().unwrap()]).ok();
    assert!(run.stdout.contains("All properties hold"), "{}", run.stdout);
    assert!(
        run.stdout.contains("force-main: changes no decision"),
        "{}",
        run.stdout
    );
}

#[test]
fn operator_properties_are_proven_and_their_assumptions_respected() {
    solver();
    let dir = tempfile::tempdir().unwrap();
    let properties = dir.path().join("properties");
    std::fs::create_dir(&properties).unwrap();
    // Holds: a push never carries more than 128 MiB.
    std::fs::write(
        properties.join("mine.cedar"),
        "// Pushes stay under 200 MiB.\n@id(\"under-200-mib\")\npermit (principal, action == Zodex::Action::\"Push\", resource) when { context.bundle_bytes < 209715200 };\n\
         // Fails: nothing in the policies refuses a negative size.\n@id(\"sizes-unassumed\")\npermit (principal, action == Zodex::Action::\"Push\", resource) when { context.bundle_bytes >= 0 };\n\
         // Holds: the same, with the publisher's guarantee stated.\n@id(\"sizes-assumed\")\n@assume(\"context.bundle_bytes >= 0\")\npermit (principal, action == Zodex::Action::\"Push\", resource) when { context.bundle_bytes >= 0 };\n\
         // Fails: pushes are bounded by 1 KiB.\n@id(\"tiny-pushes\")\npermit (principal, action == Zodex::Action::\"Push\", resource) when { context.bundle_bytes <= 1024 };\n",
    )
    .unwrap();
    let run = prd(&["policy", "prove", "--dir", dir.path().to_str().unwrap()]).code(3);
    let state = |id: &str| {
        run.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no {id}: {}", run.stdout))
            .to_string()
    };
    assert!(state("under-200-mib").contains("holds"), "{}", run.stdout);
    assert!(state("sizes-unassumed").contains("FAILS"), "{}", run.stdout);
    assert!(run.stdout.contains("bundle_bytes = -"), "{}", run.stdout);
    assert!(state("sizes-assumed").contains("holds"), "{}", run.stdout);
    assert!(state("tiny-pushes").contains("FAILS"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("properties fail: sizes-unassumed, tiny-pushes")
            && run.stdout.contains("\n2 of "),
        "{}",
        run.stdout
    );
}

#[test]
fn without_a_solver_prove_says_how_to_install_one() {
    let empty = tempfile::tempdir().unwrap();
    let run = Run::from(
        Command::new(PRD)
            .args(["policy", "prove"])
            .env("PATH", empty.path())
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("apt-get install cvc5"),
        "{}",
        run.stderr
    );
}

/// `zodex-prd serve` that is expected to refuse start: its whole output.
fn serve_to_end(config: &Path) -> Run {
    Run::from(
        Command::new(PRD)
            .args(["serve", "--config", config.to_str().unwrap()])
            .env_remove("ZODEX_CONFIG")
            .output()
            .unwrap(),
    )
}

fn serve(config: &Path, path_env: Option<&Path>) -> std::process::Child {
    let mut command = Command::new(PRD);
    command
        .args(["serve", "--config", config.to_str().unwrap()])
        .env_remove("ZODEX_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(path) = path_env {
        command.env("PATH", path);
    }
    command.spawn().unwrap()
}

/// Reads the daemon's log until a line contains `needle`; returns the log so far.
fn log_until(child: &mut std::process::Child, needle: &str) -> String {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            log.push_str(&line);
            log.push('\n');
            if line.contains(needle) {
                return log;
            }
        }
    }
    panic!("no `{needle}` in the log:\n{log}");
}

#[test]
fn serve_refuses_a_broken_invariant_starts_with_a_waiver_and_warns_without_a_solver() {
    solver();
    let dev = Dev::up();
    let policies = dev.dir.join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(policies.join("mine.cedar"), FORCE_WITHOUT_GRANT).unwrap();
    let policy_dir = format!("policy_dir = \"{}\"", policies.display());

    // Broken and not waived: start is refused with the counterexample, and nothing listens.
    let (broken, admin) = dev.second_config("broken", &policy_dir);
    let run = serve_to_end(&broken);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("push-needs-live-grant-or-yolo")
            && run.stderr.contains("force = true")
            && run.stderr.contains("decided Allow by agent-force-push")
            && run.stderr.contains("refusing to start")
            // The error line names what broke and where the counterexample is, on its own:
            // `restart` shows the error lines alone.
            && run.stderr.lines().any(|l| l.starts_with("error: refusing to start")
                && l.contains("(push-needs-live-grant-or-yolo)")
                && l.contains("`zodex sprite policy prove`")),
        "{}",
        run.stderr
    );
    assert!(!admin.exists(), "a refused start must not listen");

    // A waiver that names no property is a typo, not a waiver.
    let (typo, _) = dev.second_config(
        "typo",
        &format!("{policy_dir}\nwaive_properties = [\"push-needs-a-grant\"]"),
    );
    let run = serve_to_end(&typo);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("`push-needs-a-grant`, which is no property"),
        "{}",
        run.stderr
    );

    // Waived: it starts, says so at start, and status shows the waiver.
    let (waived, _) = dev.second_config(
        "waived",
        &format!("{policy_dir}\nwaive_properties = [\"push-needs-live-grant-or-yolo\"]"),
    );
    let mut child = serve(&waived, None);
    let log = log_until(&mut child, "zodex-prd serving");
    assert!(
        log.contains("push-needs-live-grant-or-yolo") && log.contains("waived"),
        "{log}"
    );
    assert!(log.contains("write invariants are proven"), "{log}");
    let _ = child.kill();
    let _ = child.wait();

    // No solver: the daemon starts, loudly unproven.
    let empty = tempfile::tempdir().unwrap();
    let (unproven, _) = dev.second_config("unproven", &policy_dir);
    let mut child = serve(&unproven, Some(empty.path()));
    let log = log_until(&mut child, "zodex-prd serving");
    assert!(log.contains("NOT PROVEN") && log.contains("cvc5"), "{log}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn the_operator_proves_a_sprites_policies_and_reads_them_in_status() {
    solver();
    let dev = Dev::up();
    let run = dev.zodex(&["sprite", "policy", "prove"]).ok();
    assert!(run.stdout.contains(NEVER_ERRORS), "{}", run.stdout);
    assert!(run.stdout.contains("All properties hold"), "{}", run.stdout);
    let status = dev.zodex(&["sprite", "github", "status"]).ok();
    assert!(
        status.stdout.contains("Policy proofs:"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("write invariants hold"),
        "{}",
        status.stdout
    );
    let json = dev.github_json(&["status"]);
    assert!(
        json["result"]["proofs"]["waived"].as_array().is_some(),
        "{json}"
    );
}

/// A broken property makes zodex-prd refuse to start, so no daemon answers; the operator still
/// reads the counterexample: `zodex sprite policy prove` proves through the transport.
#[test]
fn the_operator_proves_the_policies_of_a_sprite_whose_publisher_refused_to_start() {
    solver();
    let dev = Dev::up();
    let policies = dev.dir.join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(policies.join("mine.cedar"), FORCE_WITHOUT_GRANT).unwrap();
    let (broken, admin) = dev.second_config(
        "broken",
        &format!("policy_dir = \"{}\"", policies.display()),
    );
    assert_eq!(serve_to_end(&broken).code, 1, "the start must be refused");
    assert!(!admin.exists());
    dev.zodex(&[
        "sprite",
        "add",
        "broken",
        "--local",
        "--config",
        broken.to_str().unwrap(),
    ])
    .ok();
    let run = dev
        .zodex(&["sprite", "policy", "prove", "--sprite", "broken"])
        .code(3);
    assert!(
        run.stdout.contains("push-needs-live-grant-or-yolo")
            && run.stdout.contains("force = true")
            && run.stdout.contains("decided Allow by agent-force-push"),
        "{}{}",
        run.stdout,
        run.stderr
    );
    let json = dev.zodex(&["sprite", "policy", "prove", "--sprite", "broken", "--json"]);
    assert_eq!(json.code, 3, "{}", json.stderr);
    assert!(json.json()["result"]["verdicts"].as_array().is_some());
}

/// The shipped pace example, enabled as an operator's policies: every write invariant still
/// holds and no policy of the set can error on any request (`never-errors`).
#[test]
fn the_pace_example_keeps_every_invariant() {
    solver();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/policies/examples/pace.cedar"),
        dir.path().join("pace.cedar"),
    )
    .unwrap();
    let run = prd(&["policy", "prove", "--dir", dir.path().to_str().unwrap()]).ok();
    assert!(run.stdout.contains("All properties hold"), "{}", run.stdout);
}

/// `policy prove` with a shadow policy that would let the agent force-push without a grant:
/// the enforced set holds (exit 0), and the report names the property promotion would break.
#[test]
fn prove_names_what_promoting_a_shadow_policy_would_break() {
    solver();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("shadow")).unwrap();
    std::fs::write(dir.path().join("shadow/mine.cedar"), FORCE_WITHOUT_GRANT).unwrap();
    let run = prd(&["policy", "prove", "--dir", dir.path().to_str().unwrap()]).ok();
    assert!(run.stdout.contains("All properties hold"), "{}", run.stdout);
    assert!(run.stdout.contains("would break: "), "{}", run.stdout);
    assert!(
        run.stdout.contains("push-needs-live-grant-or-yolo"),
        "{}",
        run.stdout
    );
}

/// The set analysis, one verdict per operator policy against the set without it: never
/// applies, changes no decision, only refuses, or more permissive with the solver's request.
#[test]
fn each_operator_policy_is_analysed_against_the_set_without_it() {
    solver();
    let dir = operator_dir(&format!(
        "@id(\"contradiction\")\nforbid (principal, action == Zodex::Action::\"Push\", resource)\nwhen {{ context.force && !context.force }};\n\
         @id(\"force-main\")\npermit (principal is Zodex::Agent, action == Zodex::Action::\"Push\", resource)\nwhen {{ context.is_default_branch && context.force }};\n\
         @id(\"small-pushes\")\nforbid (principal, action == Zodex::Action::\"Push\", resource)\nwhen {{ context.bundle_bytes > 1048576 }};\n\
         {FORCE_WITHOUT_GRANT}"
    ));
    let run = prd(&["policy", "prove", "--dir", dir.path().to_str().unwrap()]).code(3);
    let out = &run.stdout;
    assert!(out.contains("contradiction: never applies"), "{out}");
    assert!(out.contains("force-main: changes no decision"), "{out}");
    assert!(out.contains("small-pushes: only refuses"), "{out}");
    let permissive = out
        .split("agent-force-push: MORE PERMISSIVE")
        .nth(1)
        .unwrap_or_else(|| panic!("no verdict for agent-force-push: {out}"));
    assert!(permissive.contains("Push"), "the example request: {out}");
}
