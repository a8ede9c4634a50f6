//! [`Secret`]: a cluster token that never shows itself in `Debug`, `Display` or a log line.

use std::fmt;

/// A shared secret (the cluster token). Its `Debug` and `Display` print `Secret(<redacted>)`,
/// so a config or settings struct that holds one can derive `Debug` safely; the bytes are read
/// only through [`Secret::expose`], by the handshake.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps `token`.
    pub fn new(token: impl Into<String>) -> Secret {
        Secret(token.into())
    }

    /// The secret itself, for the code that must use it (key derivation).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether it is empty (an empty token is refused before anything is sent).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<String> for Secret {
    fn from(token: String) -> Secret {
        Secret(token)
    }
}

impl From<&str> for Secret {
    fn from(token: &str) -> Secret {
        Secret(token.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_shows_itself() {
        let s = Secret::new("hunter2-very-secret");
        assert_eq!(s.expose(), "hunter2-very-secret");
        for shown in [format!("{s:?}"), format!("{s}"), format!("{s:#?}"), format!("{:?}", Some(&s))] {
            assert!(!shown.contains("hunter2"), "{shown}");
        }
    }
}
