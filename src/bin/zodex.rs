//! The `zodex` binary: see `zodex::cli::zodex`.

fn main() {
    std::process::exit(zodex::cli::zodex::main());
}
