//! `git-remote-zodex`: git's remote helper that carries pushes to `zodex-prd` as bundles.

fn main() {
    std::process::exit(zodex::cli::remote_helper::main());
}
