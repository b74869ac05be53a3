//! The `zodex-prd` binary: see `zodex::cli::prd`.

fn main() {
    std::process::exit(zodex::cli::prd::main());
}
