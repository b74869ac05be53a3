//! Reading what a sprite-side command printed with `--json`: the envelope, its result as the
//! type the operator expects, or why there is none.

use super::DeployError;
use serde::de::DeserializeOwned;
use zodex_protocol::{AnswerError, Response};

/// Why a sprite-side command's `--json` answer gave no result.
#[derive(Debug, thiserror::Error)]
pub enum SpriteAnswerError {
    #[error("the sprite printed no JSON answer")]
    NoJson,
    /// The sprite's own words (its answer's `error.message`), when it gave any.
    #[error("{}", .0.as_deref().unwrap_or("the sprite refused without saying why"))]
    Refused(Option<String>),
    #[error(transparent)]
    Answer(#[from] AnswerError),
}

/// The `result` of a `--json` envelope printed by a sprite-side command.
pub(super) fn envelope<T: DeserializeOwned>(stdout: &[u8]) -> Result<T, SpriteAnswerError> {
    let response: Response =
        serde_json::from_slice(stdout).map_err(|_| SpriteAnswerError::NoJson)?;
    typed(&response)
}

pub(super) fn typed<T: DeserializeOwned>(response: &Response) -> Result<T, SpriteAnswerError> {
    if !response.ok {
        return Err(SpriteAnswerError::Refused(
            response.error.as_ref().map(|e| e.message.clone()),
        ));
    }
    Ok(response.answer()?)
}

/// The `result` of a sprite command's `--json` answer; its `error` (or, when it printed no
/// answer, its stderr) as [`DeployError::OnSprite`].
pub(super) fn expect_json<T: DeserializeOwned>(ran: crate::remote::Ran) -> Result<T, DeployError> {
    match serde_json::from_slice::<Response>(&ran.stdout) {
        Ok(response) if !response.ok => Err(DeployError::OnSprite {
            message: response
                .error
                .as_ref()
                .map(|e| e.message.clone())
                .unwrap_or_else(|| "the sprite refused without saying why".into()),
            next: response.error.and_then(|e| e.unblock),
        }),
        Ok(response) => Ok(typed(&response)?),
        Err(_) => Err(DeployError::OnSprite {
            message: if ran.stderr.is_empty() {
                SpriteAnswerError::NoJson.to_string()
            } else {
                ran.said().to_string()
            },
            next: None,
        }),
    }
}
