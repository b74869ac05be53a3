//! `git-remote-zodex <remote> <url>`: git runs it for `zodex::` URLs; it speaks the
//! remote-helper protocol on stdin/stdout and reports problems on stderr.

use crate::agent::client;
use crate::agent::remote_helper::Helper;

pub fn main() -> i32 {
    super::pipe::end_quietly_when_stdout_closes();
    let args: Vec<String> = std::env::args().collect();
    let Some(url) = args.get(2).or(args.get(1)) else {
        eprintln!(
            "usage: git-remote-zodex <remote> <url>; git runs this for zodex:: URLs (git push zodex::https://github.com/OWNER/NAME)"
        );
        return super::EXIT_USAGE;
    };
    let url = url.strip_prefix("zodex::").unwrap_or(url);
    let run = || -> Result<(), crate::agent::remote_helper::HelperError> {
        let socket = client::agent_socket(None)?;
        // git runs helpers in the repository's top level (or its git dir when bare).
        let workdir = std::env::current_dir()?;
        let mut helper = Helper::new(url, socket, workdir)?;
        let stdin = std::io::stdin();
        let stdout = std::io::stdout();
        helper.run(&mut stdin.lock(), &mut stdout.lock())
    };
    match run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("zodex: {e}");
            super::EXIT_FAILURE
        }
    }
}
