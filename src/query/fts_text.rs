//! The text of FTS5 queries: a string quoted so that its syntax characters are literal, and
//! the trigram query of a substring search. A leaf of `query`: the searches, the suggestions
//! of names a few typos away and the resolution of names all build their `MATCH` text here.

/// Quotes text as one FTS5 string, so syntax characters in it are taken literally.
pub fn fts_quote(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// The FTS5 query that selects, from a trigram index without positions (`detail = none`), the
/// rows whose text may contain every one of `texts`: each distinct trigram (3 characters) of
/// each text, quoted, joined by AND. An empty string when no text has 3 characters. It gives
/// candidates only: a row holding the trigrams out of order matches too, so callers check the
/// text itself (`instr(acpdb_fold(column), acpdb_fold(?))`, see [`crate::db::configure_query_connection`]).
pub fn trigram_query<'a>(texts: impl IntoIterator<Item = &'a str>) -> String {
    let mut trigrams: Vec<String> = Vec::new();
    for text in texts {
        let chars: Vec<char> = text.chars().collect();
        for window in chars.windows(3) {
            let trigram = fts_quote(&window.iter().collect::<String>());
            if !trigrams.contains(&trigram) {
                trigrams.push(trigram);
            }
        }
    }
    trigrams.join(" AND ")
}

/// [`trigram_query`] of `texts`, narrowed to the rows of a trigram index of names (migration
/// V25) whose text ends with `end` (when given): the one trigram of the ending column that such
/// a text holds ([`crate::db::trigram_text_end`]).
pub fn trigram_query_ending<'a>(
    texts: impl IntoIterator<Item = &'a str>,
    end: Option<&str>,
) -> String {
    let query = trigram_query(texts);
    match end {
        Some(end) if query.is_empty() => fts_quote(&crate::db::trigram_text_end(end)),
        Some(end) => format!(
            "{query} AND {}",
            fts_quote(&crate::db::trigram_text_end(end))
        ),
        None => query,
    }
}
