//! The path facts of a `Push` or `PublishPr` context, and the allowance fields of a grant's or
//! YOLO scope's record (see [`crate::paths`] for why the engine matches the globs).

use super::{boolean, strings};
use crate::paths::{ChangedPaths, covered_paths, path_scopes};
use cedar_policy::RestrictedExpression;

/// `paths`, `path_scopes`, `too_many_paths` and `protected_paths` (`protected`: the changed
/// paths a protected pattern matches).
pub(super) fn push_paths(
    ctx: &mut Vec<(&'static str, RestrictedExpression)>,
    changed: &ChangedPaths,
    protected: &[String],
) {
    ctx.push(("paths", strings(&changed.paths)));
    ctx.push(("path_scopes", strings(&path_scopes(&changed.paths))));
    ctx.push(("too_many_paths", boolean(changed.too_many)));
    ctx.push(("protected_paths", strings(protected)));
}

/// A record's `allow_paths` (its patterns as given) and `covered_paths` (of the update's
/// `protected` paths, those the patterns cover — `.github/workflows/**` too with
/// `allow_workflows`).
pub(super) fn allowance_fields(
    fields: &mut Vec<(&'static str, RestrictedExpression)>,
    patterns: &[String],
    allow_workflows: bool,
    protected: &[String],
) {
    fields.push(("allow_paths", strings(patterns)));
    fields.push((
        "covered_paths",
        strings(&covered_paths(protected, patterns, allow_workflows)),
    ));
}
