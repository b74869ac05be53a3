//! Errors as one line an operator can act on: the publisher's HTTP clients (octocrab, hyper,
//! reqwest) wrap the cause ("Connection refused", a DNS or TLS failure) in a generic text
//! ("client error (Connect)"), so the chain is spelled out.

/// `error` and each of its causes, joined by `: `; a cause whose text the line already holds
/// is not repeated.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Layer {
        text: &'static str,
        #[source]
        cause: Option<Box<Layer>>,
    }

    fn layers(texts: &[&'static str]) -> Layer {
        texts
            .iter()
            .rev()
            .fold(None, |cause, text| {
                Some(Layer {
                    text,
                    cause: cause.map(Box::new),
                })
            })
            .expect("at least one layer")
    }

    #[test]
    fn every_cause_is_named_once() {
        let error = layers(&[
            "client error (Connect)",
            "tcp connect error",
            "Connection refused",
        ]);
        assert_eq!(
            error_chain(&error),
            "client error (Connect): tcp connect error: Connection refused"
        );
        let repeated = layers(&[
            "error sending request: Connection refused",
            "Connection refused",
        ]);
        assert_eq!(
            error_chain(&repeated),
            "error sending request: Connection refused"
        );
    }
}
