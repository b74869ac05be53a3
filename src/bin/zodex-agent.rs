//! The `zodex-agent` binary: see `zodex::cli::agent`.

fn main() {
    std::process::exit(zodex::cli::agent::main());
}
