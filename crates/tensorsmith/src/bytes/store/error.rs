//! What an `object_store` failure was, read out of its error (the status and body of the
//! store's response, a connection that failed, the credential that could not be had), for
//! each store's wording (`azure_store.rs`, `s3_store.rs`), with any URL it quotes shown without its query:
//! a SAS signature is never printed.

use crate::bytes::redact_url;

/// One failed call, as far as the error tells.
#[derive(Debug, Default)]
pub(crate) struct Failure {
    /// The store's HTTP status, when it answered.
    pub status: Option<u16>,
    /// The store's error code (`BlobNotFound`, `ContainerNotFound`, `AuthenticationFailed`).
    pub code: String,
    /// No connection could be made (refused, unknown host, timed out).
    pub unreachable: bool,
    /// The server did not answer within the `timeout` storage option.
    pub timed_out: bool,
    /// A credential could not be had (a token endpoint, a file, a command failed).
    pub credential: bool,
    /// The message, URLs without query or userinfo.
    pub text: String,
}

/// What an unreachable endpoint's error says: the endpoint, why (no answer in time, named
/// by the storage option that sets it), and the client's own text.
pub(crate) fn unreachable(endpoint: &str, f: &Failure) -> String {
    match f.timed_out {
        true => format!(
            "{endpoint}: no answer within the timeout (the timeout storage option) ({})",
            f.text
        ),
        false => format!("{endpoint} ({})", f.text),
    }
}

/// `e` examined: its chain of sources walked for the response and the connection.
pub(crate) fn classify(e: &object_store::Error) -> Failure {
    use object_store::client::HttpErrorKind;
    let mut f = Failure {
        text: scrub(&e.to_string()),
        ..Failure::default()
    };
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        // The retry layer's error is private: its message carries the status and the body
        // ("Server returned non-2xx status code: 404 Not Found: <?xml …").
        let text = err.to_string();
        if f.status.is_none() {
            if let Some(at) = text.find("status code: ") {
                let digits: String = text[at + 13..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                f.status = digits.parse().ok();
                f.code = error_code(&text[at..]).unwrap_or_default().to_owned();
            }
        }
        if let Some(h) = err.downcast_ref::<object_store::client::HttpError>() {
            if matches!(h.kind(), HttpErrorKind::Connect | HttpErrorKind::Timeout) {
                f.unreachable = true;
            }
            f.timed_out |= matches!(h.kind(), HttpErrorKind::Timeout);
        }
        if text.contains("Error performing token request")
            || text.contains("Error getting token")
            || text.contains("federated token file")
            || text.contains("az account get-access-token")
            || text.contains("azure cli response")
        {
            f.credential = true;
        }
        cur = err.source();
    }
    f
}

/// The `<Code>` of an S3 or Azure error body.
pub(crate) fn error_code(body: &str) -> Option<&str> {
    let start = body.find("<Code>")? + "<Code>".len();
    let len = body[start..].find("</Code>")?;
    Some(body[start..start + len].trim())
}

/// Whether `e` is a conditional write refused: the name taken (`PutMode::Create`) or the
/// version replaced (`PutMode::Update`), however the store's client reports it (Azure's put
/// reports a 409 `BlobAlreadyExists` as a generic error).
pub(crate) fn refused_condition(e: &object_store::Error) -> bool {
    use object_store::Error::{AlreadyExists, Precondition};
    if matches!(e, AlreadyExists { .. } | Precondition { .. }) {
        return true;
    }
    let f = classify(e);
    f.status == Some(412)
        || f.status == Some(409)
            && matches!(f.code.as_str(), "BlobAlreadyExists" | "ConditionNotMet")
}

/// `text` with every word holding `://` shown by `redact_url` (no query, no userinfo) and
/// any `sig=`/`token=` value cut.
pub(crate) fn scrub(text: &str) -> String {
    text.split(' ')
        .map(|w| match w.contains("://") {
            true => redact_url(w),
            false if w.contains("sig=") || w.contains("token=") => "<redacted>".to_owned(),
            false => w.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn urls_lose_their_query() {
        let s = super::scrub("Error performing GET http://h:1/c/b?sv=1&sig=abc in 1s sig=x");
        assert!(!s.contains("sig=") && s.contains("http://h:1/c/b"), "{s}");
    }
}
