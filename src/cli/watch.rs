//! `zodex sprite watch` and `zodex local watch`: parse the board's options, start it
//! (`operator::board`), and print its URL — the only place the capability is shown.

use super::{EXIT_FAILURE, print_failure};
use crate::operator::board::{self, BoardOptions, Source, Started};
use crate::operator::registry::Registry;

/// How to show the board.
#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// Print the URL without opening it in the default browser.
    #[arg(long)]
    no_open: bool,
    /// The loopback port to listen on (default: any free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Show the board in this terminal instead (no page, no port).
    #[arg(long, conflicts_with_all = ["no_open", "port"])]
    tui: bool,
}

impl WatchArgs {
    fn options(&self) -> BoardOptions {
        BoardOptions {
            port: self.port,
            open: !self.no_open,
        }
    }
}

fn announce(started: &Started) {
    println!("The board is at {}", started.url);
    println!(
        "(anyone with this URL can approve on your behalf: keep it to yourself; Ctrl-C stops the board)"
    );
    if let Some(why) = &started.open_failed {
        eprintln!(
            "note: could not open a browser ({}); open the URL above",
            super::render::safe(&why.to_string())
        );
    }
}

/// `zodex sprite watch [--sprite NAME]`.
pub fn sprite(sprite: Option<String>, args: &WatchArgs, registry: &Registry) -> i32 {
    let entry = match registry.choose(sprite.as_deref()) {
        Ok(entry) => entry,
        Err(e) => return print_failure(&e, false),
    };
    if args.tui {
        return match board::tui::run(Source::Sprite(entry)) {
            Ok(()) => super::EXIT_OK,
            Err(e) => {
                eprintln!("error: {e}");
                EXIT_FAILURE
            }
        };
    }
    match board::run(Source::Sprite(entry), args.options(), announce) {
        Ok(()) => super::EXIT_OK,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    }
}

/// `zodex local watch`: this machine's tool calls.
pub fn local(args: &WatchArgs, history: std::path::PathBuf) -> i32 {
    if args.tui {
        return match board::tui::run(Source::Local { history }) {
            Ok(()) => super::EXIT_OK,
            Err(e) => {
                eprintln!("error: {e}");
                EXIT_FAILURE
            }
        };
    }
    match board::run(Source::Local { history }, args.options(), announce) {
        Ok(()) => super::EXIT_OK,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    }
}
