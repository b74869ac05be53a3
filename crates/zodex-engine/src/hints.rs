//! What to do next after a denial: each built-in policy's denial maps to the command that would
//! unblock it. A rule about *what is allowed* never lives here — only advice.

use super::decide::{Action, Decision, Principal};

/// One line telling the user how to get unblocked, or `None` when nothing would help. A fleet
/// sprite's agent is told the fleet's command, for that sprite.
/// The protected paths a denial names (at most five) and the `--allow-path` options that would
/// cover them; none named: the update changes more paths than the publisher names.
fn protected_named(paths: &[String]) -> (String, String) {
    if paths.is_empty() {
        return (
            "an update changing more than 1000 paths (each may be protected)".to_string(),
            "--allow-path '**'".to_string(),
        );
    }
    let shown: Vec<&String> = paths.iter().take(5).collect();
    let mut what = shown
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > shown.len() {
        what.push_str(&format!(" and {} more", paths.len() - shown.len()));
    }
    let what = format!(
        "the protected path{} {what}",
        if paths.len() == 1 { "" } else { "s" }
    );
    let allow = shown
        .iter()
        .map(|p| {
            let pattern = crate::paths::literal_pattern(p).replace('\'', r"'\''");
            format!("--allow-path '{pattern}'")
        })
        .collect::<Vec<_>>()
        .join(" ");
    (what, allow)
}

pub fn unblock_hint(decision: &Decision, repo: Option<&str>, principal: &Principal) -> String {
    let repo = repo.unwrap_or("OWNER/NAME");
    let principal_is_agent = principal.is_agent();
    let grant = match principal.sprite() {
        Some(sprite) => format!(
            "zodex fleet grant-push --repo {repo} --for-sprite {}",
            sprite.name
        ),
        None => format!("zodex sprite github grant-push --repo {repo}"),
    };
    let request = if principal_is_agent {
        format!(
            "ask for access with `zodex-agent github request-push --repo {repo}` (an operator approves it), or ask an operator to run `{grant}`"
        )
    } else {
        format!("grant it with `{grant}`")
    };
    if !decision.errors.is_empty() {
        return "a policy failed to evaluate, so the request was denied (fail closed); check the operator policies with `zodex-prd policy check`".to_string();
    }
    let Some(first) = decision.policies.first() else {
        return match decision.action {
            Action::Push | Action::IssueWriteToken => {
                if decision.action == Action::IssueWriteToken {
                    format!(
                        "a write token needs a grant made with `--via token`: an operator runs `{grant} --via token`"
                    )
                } else if let (Some(ref_name), false) =
                    (&decision.ref_name, decision.passed_over_refs.is_empty())
                {
                    // Only when a grant or YOLO scope exists that covers other refs: with
                    // none at all, `--ref` is no part of the answer.
                    format!(
                        "{request} (the grants and YOLO scopes on {repo} cover only {}; a grant made with `--ref {}` covers this one)",
                        decision.passed_over_refs.join(", "),
                        ref_name.strip_prefix("refs/heads/").unwrap_or(ref_name)
                    )
                } else {
                    request
                }
            }
            Action::GrantPush | Action::SetYolo | Action::ClearYolo | Action::ViewAudit => {
                "only an operator may do this, through `zodex sprite …`".to_string()
            }
            Action::Read
                if decision
                    .repository
                    .as_ref()
                    .is_some_and(|r| !r.coverage_known) =>
            {
                format!(
                    "whether the reader GitHub App is installed on {repo} is unknown (not checked yet, or the last check is stale); asking again checks it"
                )
            }
            Action::Read => format!("install the reader GitHub App on {repo}"),
            _ => "no policy permits this request".to_string(),
        };
    };
    let coverage_unknown = decision
        .repository
        .as_ref()
        .is_some_and(|r| !r.coverage_known);
    match first.as_str() {
        "require-writer-installed" if coverage_unknown => format!(
            "whether the writer GitHub App is installed on {repo} is unknown (not checked yet, or the last check is stale); `zodex sprite policy explain --action push --repo {repo} --ref BRANCH` checks it, as does the agent's next push"
        ),
        "require-configured-target" if principal_is_agent => format!(
            "{repo} is not a configured target of this sprite; ask an operator to run `zodex sprite targets add {repo}` (it adds the repository to [[targets]] of the sprite's configuration)"
        ),
        "require-configured-target" => format!(
            "{repo} is not a configured target of this sprite; add it with `zodex sprite targets add {repo}` (it adds the repository to [[targets]] of the sprite's configuration)"
        ),
        "require-writer-installed" => format!(
            "the writer GitHub App is not installed on {repo}; install it there (or ask the repository's owner to)"
        ),
        "bundle-ceiling" => {
            "the bundle is over the ceiling; push fewer commits at a time, or drop large files from history".to_string()
        }
        "protect-default-branch"
            if decision
                .repository
                .as_ref()
                .is_some_and(|r| r.default_branch.is_none()) =>
        {
            format!(
                "GitHub's default branch of {repo} is not known (the last coverage check could not read it), so no branch may be force-updated or deleted; try again in a minute, when zodex-prd checks again"
            )
        }
        "protect-default-branch" => {
            "push to a new branch instead and open a pull request (`zodex-agent github publish-pr`)".to_string()
        }
        "immutable-tags" => "tags are never moved or deleted; create a new tag instead".to_string(),
        "only-branches-and-tags" => "push only under refs/heads/ or refs/tags/".to_string(),
        "workflow-allowance" => format!(
            "changes under .github/workflows/ need an allowance: an operator runs `zodex sprite github grant-push --repo {repo} --allow-workflows`"
        ),
        "pr-workflow-change" => format!(
            "a pull request may not change .github/workflows/; drop that change, or an operator runs `zodex sprite github grant-push --repo {repo} --allow-workflows` and you push the branch directly"
        ),
        "protected-paths" => {
            let (what, allow) = protected_named(&decision.protected_paths);
            format!(
                "{what} may change only under an allowance: an operator runs `{grant} {allow}` (or sets YOLO with it); or leave it out of the push"
            )
        }
        "pr-protected-paths" => {
            let (what, allow) = protected_named(&decision.protected_paths);
            format!(
                "a pull request may not change {what}; drop that change, or an operator runs `{grant} {allow}` and you push the branch directly"
            )
        }
        "no-secrets" | "pr-no-secrets" => {
            let allow: Vec<String> = decision
                .secrets
                .iter()
                .filter(|f| f.as_str() != crate::decide::SECRETS_UNLISTED)
                .map(|f| format!("--allow-secret {f}"))
                .collect();
            format!(
                "the commits carry a secret (each finding above names its rule, path, line and fingerprint): remove it from the commits (rewrite them; a later commit deleting it does not unpublish it) and revoke the secret if it was real; if it is no secret, an operator runs `{grant} {}`",
                allow.join(" ")
            )
        }
        "agent-terms-within-max-request-ttl" => {
            let cap = decision
                .max_request_ttl_seconds
                .map(|s| super::ttl::format_duration(std::time::Duration::from_secs(s.max(0) as u64)))
                .unwrap_or_else(|| "max_request_ttl".to_string());
            if principal_is_agent {
                format!(
                    "ask for at most {cap} (`--ttl {cap}` or less; this sprite's max_request_ttl); a longer grant, or one without a TTL, is an operator's to give with `zodex sprite github grant-push --repo {repo} --ttl …`"
                )
            } else {
                format!(
                    "the request asks for longer than this sprite's max_request_ttl ({cap}), or for no TTL: approve it with `--ttl {cap}` or shorter, or give your own `--ttl`/`--no-ttl` to grant it as asked"
                )
            }
        }
        "pr-title-length" => "shorten the title to 256 characters or fewer".to_string(),
        "pr-body-size" => "shorten the body to 64 KiB or less (link to a file instead)".to_string(),
        other => format!(
            "denied by the operator's policy `{other}`; see the policy directory of the zodex-prd configuration"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::RepoFacts;

    fn writer_missing(coverage_known: bool) -> Decision {
        Decision {
            action: Action::Push,
            allowed: false,
            policies: vec!["require-writer-installed".into()],
            errors: vec![],
            grant_id: None,
            yolo_id: None,
            ref_name: None,
            passed_over_refs: Vec::new(),
            max_request_ttl_seconds: None,
            shadow: None,
            repository: Some(RepoFacts {
                key: "demo/app".into(),
                default_branch: None,
                configured_target: true,
                writer_installed: false,
                reader_installed: false,
                coverage_known,
                pace: Default::default(),
            }),
            protected_paths: Vec::new(),
            secrets: Vec::new(),
        }
    }

    fn operator() -> Principal {
        Principal::Operator("uid:0".parse().unwrap())
    }

    #[test]
    fn a_fleet_sprite_is_told_the_fleets_command_for_itself() {
        let sprite = Principal::Sprite(crate::fleet::FleetSprite::enrolled(
            crate::fleet::MemberName::parse("s2").unwrap(),
            Vec::new(),
        ));
        let hint = unblock_hint(
            &push_without_grant("refs/heads/f", &[]),
            Some("demo/app"),
            &sprite,
        );
        assert!(
            hint.contains("`zodex fleet grant-push --repo demo/app --for-sprite s2`"),
            "{hint}"
        );
        assert!(hint.contains("zodex-agent github request-push"), "{hint}");
    }

    #[test]
    fn not_checked_yet_is_unknown_never_not_installed() {
        let unknown = unblock_hint(&writer_missing(false), Some("demo/app"), &operator());
        assert!(unknown.contains("unknown"), "{unknown}");
        assert!(!unknown.contains("not installed"), "{unknown}");
        assert!(
            unknown.contains("zodex sprite policy explain --action push --repo demo/app"),
            "{unknown}"
        );
        let known = unblock_hint(&writer_missing(true), Some("demo/app"), &operator());
        assert!(known.contains("is not installed on demo/app"), "{known}");
    }

    fn push_without_grant(ref_name: &str, passed_over_refs: &[&str]) -> Decision {
        Decision {
            policies: vec![],
            ref_name: Some(ref_name.into()),
            passed_over_refs: passed_over_refs.iter().map(|r| r.to_string()).collect(),
            ..writer_missing(true)
        }
    }

    /// With no grant or YOLO scope at all, the advice is to get one; `--ref` comes in only when
    /// one exists that covers other refs.
    #[test]
    fn a_push_with_no_grant_at_all_is_not_told_to_add_a_ref() {
        for agent in [Principal::Agent, operator()] {
            let none = unblock_hint(
                &push_without_grant("refs/heads/feat", &[]),
                Some("demo/app"),
                &agent,
            );
            assert!(!none.contains("--ref"), "{none}");
            assert!(none.contains("grant-push --repo demo/app"), "{none}");
            let limited = unblock_hint(
                &push_without_grant("refs/heads/feat", &["refs/heads/fix/*"]),
                Some("demo/app"),
                &agent,
            );
            assert!(
                limited.contains("cover only refs/heads/fix/*") && limited.contains("`--ref feat`"),
                "{limited}"
            );
        }
    }

    /// A repository that is not a target: the command that adds it, for whoever asks.
    #[test]
    fn a_repository_that_is_not_a_target_names_the_command_that_adds_it() {
        let decision = Decision {
            policies: vec!["require-configured-target".into()],
            ..writer_missing(true)
        };
        let operator = unblock_hint(&decision, Some("elsewhere/app"), &operator());
        assert!(
            operator.contains("add it with `zodex sprite targets add elsewhere/app`"),
            "{operator}"
        );
        let agent = unblock_hint(&decision, Some("elsewhere/app"), &Principal::Agent);
        assert!(
            agent.contains("ask an operator to run `zodex sprite targets add elsewhere/app`"),
            "{agent}"
        );
    }
}
