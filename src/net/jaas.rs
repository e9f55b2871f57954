//! `sasl.jaas.config`: the one-line JAAS entry Java clients carry their SASL credentials in,
//! e.g. `org.apache.kafka.common.security.plain.PlainLoginModule required username="u"
//! password="p";` — parsed so a user's existing properties work as they are.
//!
//! The grammar is the one Kafka's `JaasConfig` reads with Java's `StreamTokenizer`: a login
//! module class, a control flag (`required`, `requisite`, `sufficient`, `optional`), then
//! `name=value` options, ended by `;`. Values are bare words or quoted with `"` or `'`, where
//! a backslash escapes the next character. A client has exactly one login module. Errors name
//! the position and never echo a value (it may be a password).

use std::collections::BTreeMap;
use std::fmt;

use super::secret::Secret;

/// One parsed JAAS entry: the login module and its options.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct JaasEntry {
    /// The login module class, e.g. `org.apache.kafka.common.security.scram.ScramLoginModule`.
    pub login_module: String,
    /// The options; values are kept as secrets since any of them may be a credential.
    pub options: BTreeMap<String, Secret>,
}

impl fmt::Debug for JaasEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JaasEntry")
            .field("login_module", &self.login_module)
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl JaasEntry {
    /// The login module's class name without its package (`PlainLoginModule`).
    pub fn module_name(&self) -> &str {
        self.login_module
            .rsplit('.')
            .next()
            .unwrap_or(&self.login_module)
    }

    /// An option's value.
    pub fn option(&self, name: &str) -> Option<&Secret> {
        self.options.get(name)
    }
}

/// Parses a `sasl.jaas.config` value. The error says what is wrong and where (a character
/// offset), never what the value was.
pub(crate) fn parse(text: &str) -> Result<JaasEntry, String> {
    let mut tokens = Tokenizer::new(text);
    let login_module = match tokens.next()? {
        Some(Token::Word(word)) => word,
        Some(_) => return Err(format!("expected a login module class at {}", tokens.at)),
        None => return Err("is empty".into()),
    };
    match tokens.next()? {
        Some(Token::Word(flag))
            if ["required", "requisite", "sufficient", "optional"]
                .iter()
                .any(|known| flag.eq_ignore_ascii_case(known)) => {}
        _ => {
            return Err(format!(
                "expected a control flag (required, requisite, sufficient or optional) after \
                 the login module, at {}",
                tokens.at
            ));
        }
    }
    let mut options = BTreeMap::new();
    loop {
        match tokens.next()? {
            Some(Token::Semicolon) => break,
            Some(Token::Word(name)) => {
                if tokens.next()? != Some(Token::Equals) {
                    return Err(format!("expected '=' after option {name:?}"));
                }
                match tokens.next()? {
                    Some(Token::Word(value) | Token::Quoted(value)) => {
                        options.insert(name, Secret::new(value));
                    }
                    _ => return Err(format!("expected a value for option {name:?}")),
                }
            }
            Some(_) => return Err(format!("expected an option name at {}", tokens.at)),
            None => return Err("must end with ';'".into()),
        }
    }
    if tokens.next()?.is_some() {
        return Err("must hold exactly one login module (text follows the first ';')".to_owned());
    }
    Ok(JaasEntry {
        login_module,
        options,
    })
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

struct Tokenizer<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    /// The offset of the last token read, for error messages.
    at: usize,
}

impl<'a> Tokenizer<'a> {
    fn new(text: &'a str) -> Self {
        Tokenizer {
            chars: text.char_indices().peekable(),
            at: 0,
        }
    }

    fn next(&mut self) -> Result<Option<Token>, String> {
        while self.chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some((at, c)) = self.chars.next() else {
            return Ok(None);
        };
        self.at = at;
        Ok(Some(match c {
            '=' => Token::Equals,
            ';' => Token::Semicolon,
            '"' | '\'' => Token::Quoted(self.quoted(c, at)?),
            _ => {
                let mut word = String::from(c);
                while let Some((_, c)) = self
                    .chars
                    .next_if(|(_, c)| !c.is_whitespace() && !matches!(c, '=' | ';' | '"' | '\''))
                {
                    word.push(c);
                }
                Token::Word(word)
            }
        }))
    }

    fn quoted(&mut self, quote: char, start: usize) -> Result<String, String> {
        let mut value = String::new();
        loop {
            match self.chars.next() {
                Some((_, c)) if c == quote => return Ok(value),
                Some((_, '\\')) => match self.chars.next() {
                    Some((_, c)) => value.push(c),
                    None => break,
                },
                Some((_, c)) => value.push(c),
                None => break,
            }
        }
        Err(format!("the quoted value opened at {start} is not closed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option<'a>(entry: &'a JaasEntry, name: &str) -> &'a str {
        entry
            .option(name)
            .map(Secret::expose)
            .unwrap_or("<missing>")
    }

    #[test]
    fn plain_and_scram_forms() {
        let entry = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";"#,
        )
        .unwrap();
        assert_eq!(entry.module_name(), "PlainLoginModule");
        assert_eq!(option(&entry, "username"), "alice");
        assert_eq!(option(&entry, "password"), "alice-secret");

        // Confluent Cloud's Java snippet uses single quotes; spread over lines is fine too.
        let entry = parse(
            "org.apache.kafka.common.security.scram.ScramLoginModule   REQUIRED\n  username='KEY'\n  password='p=a;s\"s';",
        )
        .unwrap();
        assert_eq!(entry.module_name(), "ScramLoginModule");
        assert_eq!(option(&entry, "username"), "KEY");
        assert_eq!(option(&entry, "password"), "p=a;s\"s");
    }

    #[test]
    fn escapes_bare_words_and_empty_values() {
        let entry = parse(r#"M optional user=bob password="a\"b\\c" empty="";"#).unwrap();
        assert_eq!(option(&entry, "user"), "bob");
        assert_eq!(option(&entry, "password"), r#"a"b\c"#);
        assert_eq!(option(&entry, "empty"), "");
        let entry = parse("M required;").unwrap();
        assert!(entry.options.is_empty());
    }

    #[test]
    fn malformed_entries_are_errors_that_do_not_echo_values() {
        for (text, expected) in [
            ("", "is empty"),
            ("M", "control flag"),
            ("M mandatory user=x;", "control flag"),
            ("M required user=x", "must end with ';'"),
            ("M required user x;", "expected '='"),
            ("M required user=;", "expected a value"),
            ("M required password=\"s3cret;", "not closed"),
            ("M required a=b; N required;", "exactly one login module"),
            ("M required =b;", "option name"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(expected), "{text:?}: {error}");
            assert!(!error.contains("s3cret"), "{error}");
        }
    }

    #[test]
    fn debug_lists_option_names_only() {
        let entry = parse(r#"M required username="u" password="hunter2";"#).unwrap();
        let shown = format!("{entry:?}");
        assert!(shown.contains("password"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
