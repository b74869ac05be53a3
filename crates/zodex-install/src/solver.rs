//! The SMT solver the publisher proves its policies' write invariants with at every start
//! (`publisher::prove`, cvc5 or z3 on its `PATH`). Install makes sure of one: found where the
//! service will look, or Debian's `cvc5` installed with `apt-get` (as root, non-interactive)
//! where the sprite has it. Where neither works, proofs are off, and the outcome says so
//! plainly with how to turn them on; setup and doctor then say the same thing.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The directories the services' `PATH` holds (the units' and the supervisor script's).
pub fn service_path(bin_dir: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![bin_dir.to_path_buf()];
    dirs.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(PathBuf::from));
    dirs
}

/// How install makes sure of a solver.
#[derive(Debug, Clone)]
pub struct SolverPlan {
    /// Where the publisher will look (see [`service_path`]).
    pub search: Vec<PathBuf>,
    /// `apt-get`, when the sprite has it and install may use it.
    pub apt_get: Option<PathBuf>,
}

impl SolverPlan {
    /// The plan on this machine: the services' `PATH`, and `apt-get` from the usual place.
    pub fn here(bin_dir: &Path) -> Self {
        let apt_get = ["/usr/bin/apt-get", "/bin/apt-get"]
            .map(PathBuf::from)
            .into_iter()
            .find(|p| is_executable(p));
        Self {
            search: service_path(bin_dir),
            apt_get,
        }
    }
}

/// What install found or did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "solver")]
pub enum SolverOutcome {
    /// A solver was there already.
    Found { path: PathBuf },
    /// `apt-get install cvc5` put one there.
    Installed { path: PathBuf },
    /// No solver: the publisher runs with its policies unproven. `why` says what was tried
    /// and how to turn proofs on.
    Missing { why: String },
}

impl SolverOutcome {
    pub fn is_missing(&self) -> bool {
        matches!(self, Self::Missing { .. })
    }
}

/// How proofs are turned on where install could not do it.
pub const TURN_PROOFS_ON: &str = "install cvc5 (Debian/Ubuntu: `apt-get install cvc5`) or z3 on the sprite, in /usr/bin or /usr/local/bin, then `zodex sprite restart` (or rerun `zodex sprite setup`, which installs cvc5 where the sprite has apt-get)";

fn find(search: &[PathBuf]) -> Option<PathBuf> {
    ["cvc5", "z3"].iter().find_map(|name| {
        search
            .iter()
            .map(|dir| dir.join(name))
            .find(|p| is_executable(p))
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A solver where the publisher looks: found, else installed with `apt-get`, else missing
/// (with what was tried).
pub fn ensure(plan: &SolverPlan) -> SolverOutcome {
    if let Some(path) = find(&plan.search) {
        return SolverOutcome::Found { path };
    }
    let Some(apt_get) = &plan.apt_get else {
        return SolverOutcome::Missing {
            why: format!(
                "no SMT solver (cvc5 or z3) on the sprite and no apt-get to install one, so the policies' write invariants are NOT PROVEN at start: {TURN_PROOFS_ON}"
            ),
        };
    };
    let install = |args: &[&str]| {
        Command::new(apt_get)
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(std::process::Stdio::null())
            .output()
    };
    let mut tried = install(&["install", "-y", "-q", "--no-install-recommends", "cvc5"]);
    // A fresh machine may not know the package yet: read the package lists once, try again.
    if !tried.as_ref().is_ok_and(|o| o.status.success()) {
        let _ = install(&["update", "-q"]);
        tried = install(&["install", "-y", "-q", "--no-install-recommends", "cvc5"]);
    }
    let said = match tried {
        Ok(out) if out.status.success() => match find(&plan.search) {
            Some(path) => return SolverOutcome::Installed { path },
            None => "it succeeded, but no cvc5 is on the services' PATH".to_string(),
        },
        Ok(out) => String::from_utf8_lossy(&out.stderr)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("it failed without saying why")
            .trim()
            .to_string(),
        Err(e) => format!("cannot run it: {e}"),
    };
    SolverOutcome::Missing {
        why: format!(
            "`{} install cvc5` did not give the sprite an SMT solver ({said}), so the policies' write invariants are NOT PROVEN at start: {TURN_PROOFS_ON}",
            apt_get.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(path: &Path, body: &str) {
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_solver_on_the_services_path_is_used_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        script(&dir.path().join("z3"), "exit 0");
        let plan = SolverPlan {
            search: vec![dir.path().to_path_buf()],
            apt_get: None,
        };
        assert_eq!(
            ensure(&plan),
            SolverOutcome::Found {
                path: dir.path().join("z3")
            }
        );
    }

    #[test]
    fn apt_get_installs_cvc5_where_the_sprite_has_it() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let apt = dir.path().join("apt-get");
        // A stand-in for apt-get: it must be told to install cvc5 without asking.
        script(
            &apt,
            &format!(
                "[ \"$DEBIAN_FRONTEND\" = noninteractive ] && [ \"$1 $2\" = 'install -y' ] && printf '#!/bin/sh\\n' > {bin}/cvc5 && chmod 755 {bin}/cvc5",
                bin = bin.display()
            ),
        );
        let plan = SolverPlan {
            search: vec![bin.clone()],
            apt_get: Some(apt),
        };
        assert_eq!(
            ensure(&plan),
            SolverOutcome::Installed {
                path: bin.join("cvc5")
            }
        );
    }

    #[test]
    fn without_a_solver_proofs_are_said_to_be_off_and_how_to_turn_them_on() {
        let dir = tempfile::tempdir().unwrap();
        let plan = SolverPlan {
            search: vec![dir.path().to_path_buf()],
            apt_get: None,
        };
        let SolverOutcome::Missing { why } = ensure(&plan) else {
            panic!("a solver was found in an empty directory");
        };
        assert!(
            why.contains("NOT PROVEN") && why.contains("apt-get install cvc5"),
            "{why}"
        );
        let apt = dir.path().join("apt-get");
        script(
            &apt,
            "echo 'E: Unable to locate package cvc5' >&2; exit 100",
        );
        let plan = SolverPlan {
            search: vec![dir.path().join("bin")],
            apt_get: Some(apt),
        };
        let SolverOutcome::Missing { why } = ensure(&plan) else {
            panic!("a failed apt-get gave a solver");
        };
        assert!(
            why.contains("Unable to locate package cvc5") && why.contains("zodex sprite restart"),
            "{why}"
        );
    }
}
