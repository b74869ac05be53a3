//! Remote URL and credential `path` → repository (`engine::repo::repo_of_url`,
//! `agent::credential::repo_of_path`): never panic; a repository found is a valid `OWNER/NAME`
//! that the same URL shapes built from it find again; a path found, decorated again, is found
//! again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zodex::agent::credential::repo_of_path;
use zodex::engine::repo::repo_of_url;
use zodex::engine::RepoName;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(repo) = repo_of_url(text) {
        assert_eq!(RepoName::parse(&repo.to_string()).as_ref(), Ok(&repo));
        for url in [
            format!("https://github.com/{repo}.git"),
            format!("git@github.com:{repo}"),
        ] {
            assert_eq!(repo_of_url(&url).as_ref(), Some(&repo), "{url}");
        }
    }
    if let Some(path) = repo_of_path(text) {
        let (owner, name) = path.split_once('/').expect("owner/name");
        assert!(!owner.is_empty() && !name.is_empty() && !name.contains('/'));
        // The decorations it accepts (slashes around, one `.git`) give back the same path.
        assert_eq!(repo_of_path(&format!("/{path}.git/")).as_ref(), Some(&path));
    }
});
