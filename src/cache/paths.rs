//! Path canonicalisation shared by the importer and the query layer.
//!
//! A canonical path uses `/`, has no empty or `.` segments, resolves `..` by popping, and has no
//! leading `./`. Absolute paths under the project root are made relative to it.

/// Canonicalises a path as written in a cache or given by a user.
///
/// `root` is the cache's `project.root` when it is absolute; a path beginning with it is made
/// relative. Trailing slashes are dropped.
pub fn canonical_path(raw: &str, root: Option<&str>) -> String {
    // Most paths are canonical already: relative, so no root (absolute) can begin them, and
    // with nothing to rewrite.
    let plain = !raw.contains(['\\', ':'])
        && raw
            .split('/')
            .all(|segment| !matches!(segment, "" | "." | ".."));
    if plain {
        return raw.to_owned();
    }
    let slashed = raw.replace('\\', "/");
    let mut rest = slashed.as_str();
    if let Some(root) = root.filter(|r| r.len() > 1 && (r.starts_with('/') || r.contains(':'))) {
        let root = root.replace('\\', "/");
        let root = root.trim_end_matches('/');
        if let Some(stripped) = rest.strip_prefix(root) {
            if stripped.starts_with('/') {
                rest = stripped;
                return normalize_segments(rest.trim_start_matches('/'), false);
            }
        }
    }
    let absolute = rest.starts_with('/');
    normalize_segments(rest, absolute)
}

fn normalize_segments(path: &str, absolute: bool) -> String {
    let mut out: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|s| *s != "..") {
                    out.pop();
                } else if !absolute {
                    out.push("..");
                }
            }
            s => out.push(s),
        }
    }
    let joined = out.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Splits a qualified name `path:member` into its path and member parts (cache-format §11.2):
/// when it starts with `file` followed by `:` split there, else at the first `:` not followed by
/// `/` or `\`.
pub fn split_qualified_name<'a>(
    qualified: &'a str,
    file: Option<&str>,
) -> Option<(&'a str, &'a str)> {
    if let Some(file) = file {
        if let Some(rest) = qualified.strip_prefix(file) {
            if let Some(member) = rest.strip_prefix(':') {
                return Some((&qualified[..file.len()], member));
            }
        }
    }
    let bytes = qualified.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b':' {
            let next = bytes.get(i + 1);
            if next != Some(&b'/') && next != Some(&b'\\') && next != Some(&b':') {
                if i > 0 && bytes[i - 1] == b':' {
                    continue;
                }
                return Some((&qualified[..i], &qualified[i + 1..]));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalises_relative_variants() {
        for raw in [
            "./src/a.ts",
            "src/a.ts",
            ".\\src\\a.ts",
            "src//a.ts",
            "src/./a.ts",
            "src/a.ts/",
            "src/x/../a.ts",
        ] {
            assert_eq!(canonical_path(raw, None), "src/a.ts", "{raw}");
        }
    }

    #[test]
    fn strips_absolute_root() {
        assert_eq!(
            canonical_path("/home/dev/shop/src/a.ts", Some("/home/dev/shop")),
            "src/a.ts"
        );
        assert_eq!(
            canonical_path("C:\\dev\\shop\\src\\a.ts", Some("C:\\dev\\shop")),
            "src/a.ts"
        );
        assert_eq!(
            canonical_path("/elsewhere/a.ts", Some("/home/dev/shop")),
            "/elsewhere/a.ts"
        );
        assert_eq!(canonical_path("./a.ts", Some(".")), "a.ts");
    }

    #[test]
    fn keeps_odd_names() {
        assert_eq!(
            canonical_path("./dir with space/a=b.ts", None),
            "dir with space/a=b.ts"
        );
        assert_eq!(canonical_path("../outside.ts", None), "../outside.ts");
        // Already canonical: kept as written, whatever the root.
        for raw in ["src/a.ts", "a", "dir with space/.hidden/a..b.ts"] {
            assert_eq!(canonical_path(raw, Some("/home/dev/shop")), raw);
        }
    }

    #[test]
    fn splits_qualified_names() {
        assert_eq!(
            split_qualified_name("src/a.ts:run", Some("src/a.ts")),
            Some(("src/a.ts", "run"))
        );
        assert_eq!(
            split_qualified_name("src/a.ts:C.m", None),
            Some(("src/a.ts", "C.m"))
        );
        assert_eq!(
            split_qualified_name("C:\\x\\a.rs:f", None),
            Some(("C:\\x\\a.rs", "f"))
        );
        assert_eq!(
            split_qualified_name("src/a.rs:ns::f", Some("src/a.rs")),
            Some(("src/a.rs", "ns::f"))
        );
        assert_eq!(split_qualified_name("plain", None), None);
    }
}
