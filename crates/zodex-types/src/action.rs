//! The actions of the Cedar schema, by name: what a decision is about and what an audit row
//! records. The engine builds Cedar's entities from them; everything else only names them.

/// The actions of `policies/zodex.cedarschema`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Read,
    RequestPush,
    GrantPush,
    RevokePush,
    SetYolo,
    ClearYolo,
    PublishPr,
    Push,
    IssueWriteToken,
    ViewStatus,
    ViewAudit,
}

impl Action {
    /// Every action, in the schema's order.
    pub const ALL: [Action; 11] = [
        Self::Read,
        Self::RequestPush,
        Self::GrantPush,
        Self::RevokePush,
        Self::SetYolo,
        Self::ClearYolo,
        Self::PublishPr,
        Self::Push,
        Self::IssueWriteToken,
        Self::ViewStatus,
        Self::ViewAudit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "Read",
            Self::RequestPush => "RequestPush",
            Self::GrantPush => "GrantPush",
            Self::RevokePush => "RevokePush",
            Self::SetYolo => "SetYolo",
            Self::ClearYolo => "ClearYolo",
            Self::PublishPr => "PublishPr",
            Self::Push => "Push",
            Self::IssueWriteToken => "IssueWriteToken",
            Self::ViewStatus => "ViewStatus",
            Self::ViewAudit => "ViewAudit",
        }
    }
}
