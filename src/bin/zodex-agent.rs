use clap::Parser;

#[derive(Parser)]
#[command(name = "zodex-agent", version, about = "Zodex agent-side commands")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Serve the three MCP tools over HTTP (or stdio).
    Serve(zodex::cli::serve::ServeArgs),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Serve(args) => zodex::cli::serve::run(args),
    };
    std::process::exit(code.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        1
    }));
}
