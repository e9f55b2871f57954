//! The Java properties format, as `java.util.Properties.load` reads it, for the
//! `client.properties` files managed services hand out (Kafka's own tools load them with
//! `Utils.loadProps`, i.e. `Properties.load`): `#` and `!` comment lines, `key=value`,
//! `key: value` and `key value`, a trailing backslash continuing a line (the next line's
//! leading whitespace dropped), and the escapes `\t \n \r \f \uXXXX` and `\` before any other
//! character standing for that character.
//!
//! Java reads the file as ISO-8859-1; files today are UTF-8 (mostly ASCII, where both agree),
//! so the bytes are read as UTF-8 and, when they are not valid UTF-8, as ISO-8859-1 as Java
//! would.

use std::path::Path;

use crate::error::Error;

/// The `(key, value)` pairs of a Java properties file, in the file's order (a repeated key
/// appears twice; the clients' `from_properties` apply them in order, so the last wins, as in
/// Java).
///
/// ```no_run
/// # async fn run() -> exactly::Result<()> {
/// let properties = exactly::load_properties("client.properties")?;
/// let producer = exactly::Producer::from_properties(properties).await?;
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// [`Error::Config`] naming the file when it cannot be read, or a malformed `\u` escape (Java's
/// `Properties.load` refuses those too).
pub fn load_properties(path: impl AsRef<Path>) -> Result<Vec<(String, String)>, Error> {
    let path = path.as_ref();
    let setting = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| Error::Config {
        setting: setting.clone(),
        reason: format!("cannot read the properties file: {e}"),
    })?;
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        // ISO-8859-1: each byte is the code point of the same value.
        Err(e) => e.into_bytes().into_iter().map(char::from).collect(),
    };
    parse_properties(&text).map_err(|reason| Error::Config { setting, reason })
}

/// The `(key, value)` pairs of Java properties text (see [`load_properties`]).
///
/// # Errors
///
/// A malformed `\u` escape, with its line number.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        let line = line.trim_start_matches(is_blank);
        if line.is_empty() || line.starts_with(['#', '!']) {
            continue;
        }
        // The logical line: natural lines joined while one ends in an odd number of
        // backslashes (an even number is escaped backslashes).
        let mut logical = String::from(line);
        while ends_in_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches(is_blank)),
                None => break,
            }
        }
        let (key, value) = split_key(&logical);
        let unescape =
            |raw: &str| unescape(raw).map_err(|reason| format!("line {}: {reason}", index + 1));
        pairs.push((unescape(key)?, unescape(value)?));
    }
    Ok(pairs)
}

/// Java's whitespace in properties: space, tab and form feed.
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

fn ends_in_continuation(line: &str) -> bool {
    line.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// The raw key (up to the first unescaped `=`, `:` or blank) and the raw value (after the
/// separator: blanks, at most one `=` or `:`, blanks).
fn split_key(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut end = line.len();
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || is_blank(c) {
            end = i;
            break;
        }
    }
    let (key, rest) = line.split_at(end);
    let rest = rest.trim_start_matches(is_blank);
    let rest = rest
        .strip_prefix(['=', ':'])
        .unwrap_or(rest)
        .trim_start_matches(is_blank);
    (key, rest)
}

fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or_else(|| format!("malformed \\u escape \\u{hex}"))?;
                // A surrogate half (Java strings are UTF-16) is kept as the replacement
                // character rather than refused.
                out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse_properties(text).unwrap()
    }

    fn pair(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[test]
    fn separators_comments_and_blanks() {
        let text = "# comment\n! also a comment\n\n  a=1\nb : 2\nc 3\nd\te=4\nempty=\nbare\n";
        assert_eq!(
            pairs(text),
            [
                pair("a", "1"),
                pair("b", "2"),
                pair("c", "3"),
                pair("d", "e=4"),
                pair("empty", ""),
                pair("bare", ""),
            ]
        );
    }

    #[test]
    fn continuations_join_lines_and_drop_leading_blanks() {
        let text = "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\\n    required username='u' \\\n    password='p';\nnext=1\n";
        assert_eq!(
            pairs(text),
            [
                pair(
                    "sasl.jaas.config",
                    "org.apache.kafka.common.security.plain.PlainLoginModule required \
                     username='u' password='p';"
                ),
                pair("next", "1"),
            ]
        );
        // An escaped backslash at the end does not continue the line.
        assert_eq!(
            pairs("path=C:\\\\dir\\\\\nx=1"),
            [pair("path", "C:\\dir\\"), pair("x", "1")]
        );
        // A continuation on the last line ends the value.
        assert_eq!(pairs("a=b\\"), [pair("a", "b")]);
    }

    #[test]
    fn escapes_in_keys_and_values() {
        assert_eq!(
            pairs("my\\=key\\ x=tab\\there\\u00e9\\:\\#"),
            [pair("my=key x", "tab\there\u{e9}:#")]
        );
        assert!(parse_properties("a=\\u12").unwrap_err().contains("line 1"));
        assert!(parse_properties("a=\\uZZZZ").is_err());
    }

    #[test]
    fn windows_line_endings() {
        assert_eq!(
            pairs("a=1\r\nb=2\\\r\n  3\r\n"),
            [pair("a", "1"), pair("b", "23")]
        );
    }

    #[test]
    fn latin_1_files_are_read_as_java_reads_them() {
        let dir = std::env::temp_dir().join(format!("exactly-props-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("latin1.properties");
        std::fs::write(&path, b"client.id=caf\xe9\n").unwrap();
        assert_eq!(
            load_properties(&path).unwrap(),
            [pair("client.id", "caf\u{e9}")]
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let missing = load_properties(dir.join("none")).unwrap_err();
        assert!(missing.to_string().contains("cannot read"), "{missing}");
    }
}
