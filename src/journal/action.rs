//! What every journal action shares: its error, the limits on its text fields and on the files
//! it reads, the checks of its fields, and the timestamp format it writes.

use chrono::{DateTime, Utc};

/// The most bytes one text field of an action (a problem, a file path, …) may have.
pub const TEXT_LIMIT: usize = 64 * 1024;

/// The most bytes the journal reads from one file; larger files are refused.
pub const FILE_LIMIT: u64 = 64 * 1024 * 1024;

/// A failed journal action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    /// The caller's parameters are missing, malformed or ask for an impossible move.
    #[error("{0}")]
    InvalidParams(String),
    /// The journal could not do its work: database, file system or attempts-file trouble.
    #[error("{0}")]
    Internal(String),
}

impl JournalError {
    /// The error message.
    pub fn message(&self) -> &str {
        match self {
            JournalError::InvalidParams(message) | JournalError::Internal(message) => message,
        }
    }
}

impl From<rusqlite::Error> for JournalError {
    fn from(err: rusqlite::Error) -> Self {
        JournalError::Internal(format!("Database error: {err}"))
    }
}

/// RFC 3339 UTC with `Z` and whole seconds.
pub(super) fn stamp(time: DateTime<Utc>) -> String {
    time.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A required string field of an action: present, not blank and within [`TEXT_LIMIT`].
pub(super) fn required<'a>(
    value: &'a Option<String>,
    field: &str,
    action: &str,
) -> Result<&'a str, JournalError> {
    match optional(value, field)? {
        Some(text) => Ok(text),
        None => Err(JournalError::InvalidParams(format!(
            "'{field}' required for {action} action"
        ))),
    }
}

/// An optional string field: absent when missing or blank, refused beyond [`TEXT_LIMIT`].
pub(super) fn optional<'a>(
    value: &'a Option<String>,
    field: &str,
) -> Result<Option<&'a str>, JournalError> {
    let Some(text) = value.as_deref() else {
        return Ok(None);
    };
    let text = limited(text, field)?.trim();
    Ok(Some(text).filter(|text| !text.is_empty()))
}

/// `text`, the value of `field`, when it has at most [`TEXT_LIMIT`] bytes.
pub(super) fn limited<'a>(text: &'a str, field: &str) -> Result<&'a str, JournalError> {
    if text.len() > TEXT_LIMIT {
        return Err(JournalError::InvalidParams(format!(
            "{field}: at most {TEXT_LIMIT} bytes, got {}",
            text.len()
        )));
    }
    Ok(text)
}
