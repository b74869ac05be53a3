//! What the publisher learns of the two GitHub Apps on a repository: which App, and whether
//! it is installed there, until when that knowledge holds. The engine stores it; the GitHub
//! client finds it out.

/// One of the two GitHub Apps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum App {
    Reader,
    Writer,
}

impl App {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reader => "reader",
            Self::Writer => "writer",
        }
    }
}

/// What the publisher learned of one App on one repository, and until when it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoverageFact {
    pub installed: bool,
    pub installation_id: Option<i64>,
    pub default_branch: Option<String>,
    pub checked_at: i64,
    pub expires_at: i64,
}
