//! `git-remote-zodex`: git's remote helper that carries pushes to `zodex-prd` as bundles.
//! Not built yet: it refuses, so a push never appears to succeed.

fn main() {
    std::process::exit(zodex::cli::not_built(
        "`git-remote-zodex` (direct push through zodex-prd)",
    ));
}
