use clap::Parser;

#[derive(Parser)]
#[command(name = "zodex", version, about = "Zodex operator CLI")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Run the MCP server on this machine.
    #[command(subcommand)]
    Local(zodex::cli::local::LocalCommand),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Local(command) => zodex::cli::local::run(command),
    };
    std::process::exit(code.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        1
    }));
}
