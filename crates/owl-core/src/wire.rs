//! Versioned, checked binary encoding of synopses, and the synopsis file that carries one
//! point's synopses of every interval from `owl record` to `owl estimate`.
//!
//! A synopsis file is, little-endian throughout:
//!
//! ```text
//! magic "OWLSYN\r\n" | u16 format version | str method | u8 role (0 = sender, 1 = receiver)
//! | u64 interval length ns | u64 interval origin ns | u64 identity seed
//! | u32 n, n × (str field, str value)          the method's configuration, by name
//! | u32 k, k × (u64 interval index, u32 len, len bytes of method payload)
//! | u64 xxh64 of everything before it
//! ```
//!
//! `str` is a u16 length and UTF-8 bytes. Decoding checks the magic, the version, every length
//! against what is left, and the checksum, so a truncated, foreign or corrupted file is one clear
//! error naming the byte offset. Configurations are compared field by field, so a mismatch
//! between the two points names the field that differs.

use thiserror::Error;
use xxhash_rust::xxh64::xxh64;

use crate::interval::Intervals;
use crate::method::{MethodError, Role};

pub const MAGIC: &[u8; 8] = b"OWLSYN\r\n";
pub const VERSION: u16 = 1;

/// Why bytes do not decode.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("offset {offset}: truncated: {what} needs {needed} bytes, {available} left")]
    Truncated {
        offset: usize,
        what: &'static str,
        needed: usize,
        available: usize,
    },
    #[error("offset {offset}: {what}")]
    Invalid { offset: usize, what: String },
}

/// Appends little-endian values.
#[derive(Default)]
pub struct WireWriter {
    pub buf: Vec<u8>,
}

impl WireWriter {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    pub fn str(&mut self, s: &str) {
        let b = s.as_bytes();
        let n = b.len().min(u16::MAX as usize);
        self.u16(n as u16);
        self.buf.extend_from_slice(&b[..n]);
    }
}

/// Reads little-endian values with bounds checks; every error names the offset.
pub struct WireReader<'a> {
    b: &'a [u8],
    pos: usize,
    /// Offset of `b[0]` in the enclosing file, for messages.
    base: usize,
}

impl<'a> WireReader<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        WireReader { b, pos: 0, base: 0 }
    }
    /// A reader whose offsets are reported relative to `base`.
    pub fn with_base(b: &'a [u8], base: usize) -> Self {
        WireReader { b, pos: 0, base }
    }
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }
    pub fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated {
                offset: self.offset(),
                what,
                needed: n,
                available: self.remaining(),
            });
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.take(2, what)?.try_into().unwrap()))
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }
    pub fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }
    pub fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }
    pub fn f64(&mut self, what: &'static str) -> Result<f64, DecodeError> {
        Ok(f64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }
    pub fn str(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let n = self.u16(what)? as usize;
        let off = self.offset();
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::Invalid {
            offset: off,
            what: format!("{what} is not UTF-8"),
        })
    }
    /// Fail unless every byte was consumed.
    pub fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        if self.remaining() != 0 {
            return Err(DecodeError::Invalid {
                offset: self.offset(),
                what: format!("{} unexpected bytes after the {what}", self.remaining()),
            });
        }
        Ok(())
    }
    pub fn invalid(&self, what: impl Into<String>) -> DecodeError {
        DecodeError::Invalid {
            offset: self.offset(),
            what: what.into(),
        }
    }
}

/// One point's synopses of every interval, as written by `owl record`.
#[derive(Clone, Debug, PartialEq)]
pub struct SynopsisFile {
    pub method: String,
    pub role: Role,
    pub intervals: Intervals,
    pub identity_seed: u64,
    /// The method's configuration, by field name, in the method's order.
    pub config: Vec<(String, String)>,
    /// `(interval index, method payload)`, ascending.
    pub points: Vec<(u64, Vec<u8>)>,
}

impl SynopsisFile {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = WireWriter::new();
        w.bytes(MAGIC);
        w.u16(VERSION);
        w.str(&self.method);
        w.u8(match self.role {
            Role::Sender => 0,
            Role::Receiver => 1,
        });
        w.u64(self.intervals.length_ns);
        w.u64(self.intervals.origin_ns);
        w.u64(self.identity_seed);
        w.u32(self.config.len() as u32);
        for (k, v) in &self.config {
            w.str(k);
            w.str(v);
        }
        w.u32(self.points.len() as u32);
        for (i, p) in &self.points {
            w.u64(*i);
            w.u32(p.len() as u32);
            w.bytes(p);
        }
        let h = xxh64(&w.buf, 0);
        w.u64(h);
        w.buf
    }

    pub fn decode(b: &[u8]) -> Result<SynopsisFile, DecodeError> {
        if b.is_empty() {
            return Err(DecodeError::Invalid {
                offset: 0,
                what: "empty file: not an owl synopsis file".into(),
            });
        }
        if b.len() < MAGIC.len() || &b[..MAGIC.len()] != MAGIC {
            return Err(DecodeError::Invalid {
                offset: 0,
                what: "not an owl synopsis file (no OWLSYN magic; was it written by `owl record`?)"
                    .into(),
            });
        }
        let mut r = WireReader::new(b);
        r.take(MAGIC.len(), "magic")?;
        let version = r.u16("format version")?;
        if version != VERSION {
            return Err(DecodeError::Invalid {
                offset: 8,
                what: format!(
                    "synopsis format version {version}, this owl reads version {VERSION}"
                ),
            });
        }
        let method = r.str("method name")?;
        let role = match r.u8("role")? {
            0 => Role::Sender,
            1 => Role::Receiver,
            x => return Err(r.invalid(format!("role {x} is neither sender (0) nor receiver (1)"))),
        };
        let length_ns = r.u64("interval length")?;
        let origin_ns = r.u64("interval origin")?;
        let identity_seed = r.u64("identity seed")?;
        let n = r.u32("configuration size")? as usize;
        if n > 4096 {
            return Err(r.invalid(format!("{n} configuration fields is absurd")));
        }
        let mut config = Vec::with_capacity(n);
        for _ in 0..n {
            let k = r.str("configuration field")?;
            let v = r.str("configuration value")?;
            config.push((k, v));
        }
        let k = r.u32("interval count")? as usize;
        let mut points = Vec::with_capacity(k.min(r.remaining() / 12));
        for _ in 0..k {
            let i = r.u64("interval index")?;
            let len = r.u32("synopsis length")? as usize;
            points.push((i, r.take(len, "synopsis")?.to_vec()));
        }
        let body_end = r.offset();
        let h = r.u64("checksum")?;
        r.finish("checksum")?;
        if xxh64(&b[..body_end], 0) != h {
            return Err(DecodeError::Invalid {
                offset: body_end,
                what: "checksum mismatch: the file is corrupted".into(),
            });
        }
        Ok(SynopsisFile {
            method,
            role,
            intervals: Intervals {
                length_ns,
                origin_ns,
            },
            identity_seed,
            config,
            points,
        })
    }

    /// Check that a sender file and a receiver file can be estimated together; the error names
    /// the first field that differs.
    pub fn check_pair(sender: &SynopsisFile, receiver: &SynopsisFile) -> Result<(), MethodError> {
        let mm = |field: &str, a: String, b: String| {
            Err(MethodError::ConfigMismatch {
                field: field.to_string(),
                sender: a,
                receiver: b,
            })
        };
        if sender.role != Role::Sender {
            return Err(MethodError::Invalid(
                "the first file was recorded at the receiver point: give the sender's file first"
                    .into(),
            ));
        }
        if receiver.role != Role::Receiver {
            return Err(MethodError::Invalid(
                "the second file was recorded at the sender point: give the receiver's file second"
                    .into(),
            ));
        }
        if sender.method != receiver.method {
            return mm("method", sender.method.clone(), receiver.method.clone());
        }
        if sender.intervals.length_ns != receiver.intervals.length_ns {
            return mm(
                "interval",
                format!("{} ns", sender.intervals.length_ns),
                format!("{} ns", receiver.intervals.length_ns),
            );
        }
        if sender.intervals.origin_ns != receiver.intervals.origin_ns {
            return mm(
                "interval origin",
                sender.intervals.origin_ns.to_string(),
                receiver.intervals.origin_ns.to_string(),
            );
        }
        if sender.identity_seed != receiver.identity_seed {
            return mm(
                "identity seed",
                sender.identity_seed.to_string(),
                receiver.identity_seed.to_string(),
            );
        }
        for (k, v) in &sender.config {
            match receiver.config.iter().find(|(k2, _)| k2 == k) {
                Some((_, v2)) if v2 == v => {}
                Some((_, v2)) => return mm(k, v.clone(), v2.clone()),
                None => return mm(k, v.clone(), "absent".into()),
            }
        }
        if let Some((k, v)) = receiver
            .config
            .iter()
            .find(|(k, _)| !sender.config.iter().any(|(k2, _)| k2 == k))
        {
            return mm(k, "absent".into(), v.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(role: Role) -> SynopsisFile {
        SynopsisFile {
            method: "lda".into(),
            role,
            intervals: Intervals::aligned(1_000_000_000),
            identity_seed: 7,
            config: vec![("rows".into(), "1024".into()), ("seed".into(), "1".into())],
            points: vec![(5, vec![1, 2, 3]), (6, vec![])],
        }
    }

    #[test]
    fn roundtrip() {
        let f = sample(Role::Sender);
        assert_eq!(SynopsisFile::decode(&f.encode()).unwrap(), f);
    }

    #[test]
    fn every_truncation_and_corruption_is_an_error() {
        let b = sample(Role::Receiver).encode();
        for cut in 0..b.len() {
            assert!(SynopsisFile::decode(&b[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x10;
            assert!(SynopsisFile::decode(&c).is_err(), "flip at {i}");
        }
        let e = SynopsisFile::decode(b"\x89PNG\r\n\x1a\nxxxxxxxx").unwrap_err();
        assert!(e.to_string().contains("not an owl synopsis file"));
    }

    #[test]
    fn mismatches_name_the_field() {
        let s = sample(Role::Sender);
        let mut r = sample(Role::Receiver);
        assert!(SynopsisFile::check_pair(&s, &r).is_ok());
        r.config[0].1 = "512".into();
        let e = SynopsisFile::check_pair(&s, &r).unwrap_err();
        assert!(
            e.to_string()
                .contains("rows is 1024 at the sender but 512 at the receiver"),
            "{e}"
        );
        let mut r = sample(Role::Receiver);
        r.intervals.length_ns = 5;
        assert!(
            SynopsisFile::check_pair(&s, &r)
                .unwrap_err()
                .to_string()
                .contains("interval")
        );
        let mut r = sample(Role::Receiver);
        r.identity_seed = 1;
        assert!(
            SynopsisFile::check_pair(&s, &r)
                .unwrap_err()
                .to_string()
                .contains("identity seed")
        );
        assert!(
            SynopsisFile::check_pair(&s, &s).is_err(),
            "two sender files"
        );
    }
}
