//! Why a question could not be put to Cedar.

/// Why the Cedar request for a question could not be built (the decision is then a deny
/// carrying this text): Cedar's own message, unchanged, names the attribute or entity at fault.
#[derive(Debug, thiserror::Error)]
pub enum CedarRequestError {
    #[error(transparent)]
    Entity(Box<cedar_policy::EntityAttrEvaluationError>),
    #[error(transparent)]
    Context(Box<cedar_policy::ContextCreationError>),
    #[error(transparent)]
    Request(Box<cedar_policy::RequestValidationError>),
    #[error(transparent)]
    Entities(Box<cedar_policy::entities_errors::EntitiesError>),
}
