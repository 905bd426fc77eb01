//! The pre-shared key both agents and the collector hold (`owl keygen`), and the keys derived
//! from it.
//!
//! A key file is one line, `owl-key-v1 ` followed by 64 hexadecimal digits (32 random bytes from
//! the operating system), so a file of another kind is recognised and refused instead of being
//! used as a key.

use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Bytes of the pre-shared key.
pub const KEY_BYTES: usize = 32;
/// First word of a key file.
pub const KEY_PREFIX: &str = "owl-key-v1";

/// HMAC-SHA256.
pub type HmacSha256 = Hmac<Sha256>;

/// A 32-byte secret (pre-shared, or derived for one session).
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; KEY_BYTES]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

/// Why a key could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}: cannot read: {1}")]
    Io(String, std::io::Error),
    #[error(
        "{0}: not an owl key file (expected one line `{KEY_PREFIX} <64 hex digits>`, as `owl keygen` writes)"
    )]
    Format(String),
    #[error("no randomness from the operating system: {0}")]
    Random(String),
}

/// `n` random bytes from the operating system.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], KeyError> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| KeyError::Random(e.to_string()))?;
    Ok(b)
}

impl Key {
    pub fn from_bytes(b: [u8; KEY_BYTES]) -> Key {
        Key(b)
    }

    /// A fresh random key.
    pub fn generate() -> Result<Key, KeyError> {
        Ok(Key(random_bytes()?))
    }

    /// The key file's line (with its newline).
    pub fn to_file_text(&self) -> String {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        format!("{KEY_PREFIX} {hex}\n")
    }

    /// Parse a key file's text; `what` names the file in errors.
    pub fn parse(text: &str, what: &str) -> Result<Key, KeyError> {
        let bad = || KeyError::Format(what.to_string());
        let line = text.trim();
        let hex = line.strip_prefix(KEY_PREFIX).ok_or_else(bad)?.trim();
        if hex.len() != 2 * KEY_BYTES || line.lines().count() != 1 {
            return Err(bad());
        }
        let mut b = [0u8; KEY_BYTES];
        for (i, out) in b.iter_mut().enumerate() {
            *out = u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
                .map_err(|_| bad())?;
        }
        Ok(Key(b))
    }

    /// Read a key file (at most 4 KiB are read: a key file is one short line).
    pub fn read(path: &Path) -> Result<Key, KeyError> {
        use std::io::Read;
        let what = path.display().to_string();
        let f = std::fs::File::open(path).map_err(|e| KeyError::Io(what.clone(), e))?;
        let mut bytes = Vec::new();
        f.take(4096)
            .read_to_end(&mut bytes)
            .map_err(|e| KeyError::Io(what.clone(), e))?;
        let text = String::from_utf8(bytes).map_err(|_| KeyError::Format(what.clone()))?;
        Key::parse(&text, &what)
    }

    /// Whether others than the owner may read the key file (unix permissions; `false`
    /// elsewhere or when unknown).
    pub fn readable_by_others(path: &Path) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0)
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            false
        }
    }

    /// `HMAC-SHA256(key, parts…)` as a new key (the derivation of [`crate::frame`]).
    pub fn derive(&self, parts: &[&[u8]]) -> Key {
        let mut m = self.mac();
        for p in parts {
            m.update(p);
        }
        Key(m.finalize().into_bytes().into())
    }

    /// A MAC keyed with this key.
    pub fn mac(&self) -> HmacSha256 {
        // HMAC takes a key of any length: this cannot fail
        <HmacSha256 as KeyInit>::new_from_slice(&self.0).expect("HMAC accepts any key length")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_roundtrip_and_others_are_refused() {
        let k = Key::generate().unwrap();
        let text = k.to_file_text();
        assert!(text.starts_with("owl-key-v1 ") && text.ends_with('\n'));
        assert_eq!(Key::parse(&text, "k").unwrap(), k);
        assert_ne!(Key::generate().unwrap(), k, "two keys from the OS differ");
        for bad in [
            "",
            "owl-key-v1",
            "owl-key-v1 00",
            &text[..text.len() - 2],
            &text.replace("owl-key-v1", "owl-key-v2"),
            &format!("{text}{text}"),
            &text.replace(&text[11..13], "zz"),
            "-----BEGIN OPENSSH PRIVATE KEY-----",
        ] {
            let e = Key::parse(bad, "f.key").unwrap_err().to_string();
            assert!(e.contains("f.key: not an owl key file"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn derivation_depends_on_every_part_and_the_key() {
        let a = Key::from_bytes([1; 32]);
        let b = Key::from_bytes([2; 32]);
        assert_ne!(a.derive(&[b"x"]), b.derive(&[b"x"]));
        assert_ne!(a.derive(&[b"x"]), a.derive(&[b"y"]));
        assert_eq!(a.derive(&[b"x", b"y"]), a.derive(&[b"x", b"y"]));
        // RFC 4231 test case 2: HMAC-SHA256("Jefe", "what do ya want for nothing?")
        let mut m = <HmacSha256 as KeyInit>::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        let hex: String = m
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
