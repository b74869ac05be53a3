//! `git-credential-zodex`: the agent's git credential helper, as a small binary of its own.

fn main() {
    std::process::exit(zodex::cli::credential_helper::main());
}
