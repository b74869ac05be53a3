//! `zodex sprite watch`, `zodex fleet watch` and `zodex local watch`: parse the board's options, start it
//! (`operator::board`), and print its URL — the only place the capability is shown.

use super::{EXIT_FAILURE, print_failure};
use crate::operator::board::{self, BoardOptions, Source, Started};
use crate::operator::registry::{Registry, SpriteEntry};

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
    match registry.choose(sprite.as_deref()) {
        Ok(entry) => show(Source::Sprite(entry), args),
        Err(e) => print_failure(&e, false),
    }
}

/// `zodex fleet watch`: the board over the fleet's registry entry (reached over mutual TLS).
pub fn fleet(entry: SpriteEntry, args: &WatchArgs) -> i32 {
    show(Source::Sprite(entry), args)
}

fn show(source: Source, args: &WatchArgs) -> i32 {
    let shown = if args.tui {
        board::tui::run(source).map_err(|e| e.to_string())
    } else {
        board::run(source, args.options(), announce).map_err(|e| e.to_string())
    };
    match shown {
        Ok(()) => super::EXIT_OK,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    }
}

/// `zodex local watch`: this machine's tool calls.
pub fn local(args: &WatchArgs, history: std::path::PathBuf) -> i32 {
    show(Source::Local { history }, args)
}
