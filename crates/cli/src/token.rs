//! The cluster token on the command line's side: where it comes from (`--token-file PATH`, the
//! `UBERSHUFFLE_TOKEN` variable, or `--token T`, which warns), whether it is strong enough,
//! whether links are sealed, and `ubershuffle token`, which makes a fresh one.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use ubershuffle_transport::Secret;
use ubershuffle_transport::tcp::TcpConfig;

/// The environment variable that holds the token.
pub const TOKEN_VAR: &str = "UBERSHUFFLE_TOKEN";
/// The least entropy a token must have by [`entropy_bits`], unless `--weak-token-ok`.
pub const MIN_TOKEN_BITS: f64 = 128.0;
/// The largest token file read.
const MAX_TOKEN_FILE: u64 = 64 * 1024;

/// How a TCP command gets its token and whether it seals its links.
#[derive(Clone, Debug, Default, Args)]
pub struct TokenArgs {
    /// tcp: read the cluster's shared secret from this file (readable by its owner only, e.g.
    /// made by `ubershuffle token --out PATH`); or set UBERSHUFFLE_TOKEN.
    #[arg(long, value_name = "PATH", conflicts_with = "token", help_heading = "Cluster")]
    pub token_file: Option<PathBuf>,
    /// tcp: the shared secret on the command line (shows in `ps` and shell history: prefer
    /// --token-file or UBERSHUFFLE_TOKEN).
    #[arg(long, value_name = "T", value_parser = parse_secret, help_heading = "Cluster")]
    pub token: Option<Secret>,
    /// tcp: accept a token under 128 bits of entropy (length times log2 of its character set).
    #[arg(long, help_heading = "Cluster")]
    pub weak_token_ok: bool,
    /// tcp: do not seal the links after the handshake (no encryption, no integrity): only on a
    /// network you trust. Every side of a cluster must agree.
    #[arg(long, help_heading = "Cluster")]
    pub insecure_plaintext: bool,
}

fn parse_secret(s: &str) -> Result<Secret, String> {
    Ok(Secret::new(s))
}

/// A resolved token and sealing choice (its `Debug` shows no token).
#[derive(Clone, Debug)]
pub struct ClusterKey {
    /// The token.
    pub token: Secret,
    /// Whether links are sealed.
    pub sealed: bool,
}

impl ClusterKey {
    /// A TCP configuration with this key (other fields at their defaults).
    pub fn config(&self) -> TcpConfig {
        TcpConfig::new(self.token.clone()).with_sealed(self.sealed)
    }
}

impl TokenArgs {
    /// Whether any of these flags was given (they apply only to TCP).
    pub fn given(&self) -> bool {
        self.token.is_some() || self.token_file.is_some() || self.weak_token_ok || self.insecure_plaintext
    }

    /// The token from `--token-file`, `--token` (with a warning) or `UBERSHUFFLE_TOKEN`, in
    /// that order, checked for strength; `None` when none gives one.
    pub fn resolve(&self) -> anyhow::Result<Option<ClusterKey>> {
        let token = if let Some(path) = &self.token_file {
            read_token_file(path)?
        } else if let Some(t) = &self.token {
            eprintln!(
                "warning: --token shows the secret in the process list and shell history; use --token-file PATH or {TOKEN_VAR}"
            );
            t.clone()
        } else {
            match std::env::var(TOKEN_VAR) {
                Ok(t) => Secret::new(t.trim()),
                Err(std::env::VarError::NotPresent) => return Ok(None),
                Err(std::env::VarError::NotUnicode(_)) => bail!("{TOKEN_VAR} is not valid UTF-8"),
            }
        };
        check_strength(&token, self.weak_token_ok)?;
        if self.insecure_plaintext {
            eprintln!(
                "warning: --insecure-plaintext: links carry plain text after the handshake (anyone on the path can read and change them)"
            );
        }
        Ok(Some(ClusterKey { token, sealed: !self.insecure_plaintext }))
    }

    /// [`TokenArgs::resolve`], failing when no token is given.
    pub fn require(&self) -> anyhow::Result<ClusterKey> {
        self.resolve()?.ok_or_else(|| {
            anyhow::anyhow!(
                "no token: give --token-file PATH or set {TOKEN_VAR} (`ubershuffle token --out PATH` makes one)"
            )
        })
    }
}

/// Reads a token file, refused unless only its owner may read or write it; surrounding
/// whitespace (a trailing newline) is dropped.
fn read_token_file(path: &Path) -> anyhow::Result<Secret> {
    let shown = path.display();
    let file = std::fs::File::open(path).with_context(|| format!("cannot read --token-file {shown}"))?;
    let meta = file.metadata().with_context(|| format!("cannot read --token-file {shown}"))?;
    if !meta.is_file() {
        bail!("--token-file {shown} is not a regular file");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            bail!(
                "--token-file {shown} is open to other users (mode {mode:03o}); make it readable by its owner only: chmod 600 {shown}"
            );
        }
    }
    let mut text = String::new();
    file.take(MAX_TOKEN_FILE + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("--token-file {shown} is not a UTF-8 text file"))?;
    if text.len() as u64 > MAX_TOKEN_FILE {
        bail!("--token-file {shown} is longer than {MAX_TOKEN_FILE} bytes");
    }
    Ok(Secret::new(text.trim()))
}

/// A simple entropy measure: length times log2 of the size of the character classes present
/// (digits 10, lower case 26, upper case 26, other ASCII symbols 33, anything else 128).
pub fn entropy_bits(token: &str) -> f64 {
    type Class = (fn(char) -> bool, u32);
    let classes: [Class; 5] = [
        (|c| c.is_ascii_digit(), 10),
        (|c| c.is_ascii_lowercase(), 26),
        (|c| c.is_ascii_uppercase(), 26),
        (|c| c.is_ascii_graphic() && !c.is_ascii_alphanumeric(), 33),
        (|c| !c.is_ascii_graphic(), 128),
    ];
    let set: u32 = classes.iter().filter(|(is, _)| token.chars().any(is)).map(|(_, n)| n).sum();
    token.chars().count() as f64 * f64::from(set.max(1)).log2()
}

fn check_strength(token: &Secret, weak_ok: bool) -> anyhow::Result<()> {
    if token.is_empty() {
        bail!("the token is empty (`ubershuffle token` prints a fresh one)");
    }
    let bits = entropy_bits(token.expose());
    if bits < MIN_TOKEN_BITS && !weak_ok {
        bail!(
            "the token is weak (about {bits:.0} bits by length and character set, under {MIN_TOKEN_BITS:.0}): use `ubershuffle token`, or pass --weak-token-ok"
        );
    }
    Ok(())
}

/// A fresh token: 32 bytes from the operating system's generator, in hex (256 bits).
pub fn fresh_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("the operating system gave no random bytes: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Flags of `ubershuffle token`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  ubershuffle token --out cluster.token\n  \
                        ubershuffle run --transport tcp --listen 0.0.0.0:7070 --token-file cluster.token --workers 4\n  \
                        UBERSHUFFLE_TOKEN=$(cat cluster.token) ubershuffle worker --connect HOST:7070")]
pub struct TokenCommandArgs {
    /// Write the token to this new file (created readable by its owner only; an existing file
    /// is refused) instead of printing it.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
}

/// `ubershuffle token`: prints a fresh token, or writes it to a new owner-only file.
pub fn token_command(args: &TokenCommandArgs) -> anyhow::Result<()> {
    let token = fresh_token()?;
    let Some(path) = &args.out else {
        println!("{token}");
        return Ok(());
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let shown = path.display();
    let mut file = options.open(path).with_context(|| format!("cannot create {shown}"))?;
    let written = file.write_all(format!("{token}\n").as_bytes()).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(path);
        return Err(e).with_context(|| format!("cannot write {shown}"));
    }
    eprintln!("wrote a fresh token to {shown} (readable by you only)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_tokens_are_measured_and_refused() {
        assert!(entropy_bits("s3cret") < 40.0);
        assert!(check_strength(&Secret::new("s3cret"), false).is_err());
        assert!(check_strength(&Secret::new("s3cret"), true).is_ok());
        assert!(check_strength(&Secret::new(""), true).is_err());
        let fresh = fresh_token().unwrap();
        assert_eq!(fresh.len(), 64);
        assert!(entropy_bits(&fresh) >= MIN_TOKEN_BITS && check_strength(&Secret::new(fresh), false).is_ok());
        // 32 hex digits (128 bits of randomness) pass; 20 do not.
        assert!(entropy_bits(&"0123456789abcdef".repeat(2)) >= MIN_TOKEN_BITS);
        assert!(entropy_bits(&"0123456789abcdef".repeat(2)[..20]) < MIN_TOKEN_BITS);
    }

    #[test]
    fn token_files_must_be_private_and_debug_never_shows_a_token() {
        let dir = std::env::temp_dir().join(format!("ubershuffle-token-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t");
        let _ = std::fs::remove_file(&path);
        token_command(&TokenCommandArgs { out: Some(path.clone()) }).unwrap();
        assert!(token_command(&TokenCommandArgs { out: Some(path.clone()) }).is_err(), "never overwrites");
        let args = TokenArgs { token_file: Some(path.clone()), ..TokenArgs::default() };
        let key = args.require().unwrap();
        let token = key.token.expose().to_string();
        assert_eq!(token.len(), 64);
        for shown in [format!("{key:?}"), format!("{:?}", key.config()), format!("{args:?}")] {
            assert!(!shown.contains(&token), "{shown}");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let e = args.require().unwrap_err().to_string();
            assert!(e.contains("open to other users (mode 644)") && e.contains("chmod 600"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
