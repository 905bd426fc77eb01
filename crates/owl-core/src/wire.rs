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

/// Appends little-endian values to a payload: every method's `encode` and every file block
/// write through it, so one type decides the byte order and the length prefixes.
pub struct WireWriter<'a> {
    buf: &'a mut Vec<u8>,
}

impl<'a> WireWriter<'a> {
    /// A writer appending to `out` (what is already there stays).
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        WireWriter { buf: out }
    }
    /// Reserve room for `n` more bytes.
    pub fn reserve(&mut self, n: usize) {
        self.buf.reserve(n);
    }
    /// Everything in the output so far (including what was there before this writer).
    pub fn written(&self) -> &[u8] {
        self.buf
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
    pub fn u128(&mut self, v: u128) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// Append the xxh64 of everything in the output so far.
    pub fn checksum(&mut self) {
        let h = xxh64(self.buf, 0);
        self.u64(h);
    }
    /// LEB128: 7 bits a byte, least significant first.
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
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
    /// A LEB128 integer ([`WireWriter::varint`]); more than 64 bits is refused.
    pub fn varint(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8(what)?;
            if i == 9 && b > 1 {
                return Err(self.invalid(format!("{what}: varint longer than 64 bits")));
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.invalid(format!("{what}: varint longer than 64 bits")))
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
    /// Packets were identified on at most this many IP bytes (`None`: every captured byte).
    /// Both points must agree: a point that hashes fewer bytes of a long packet gives it
    /// another identity. Streamed files from version 3 on carry it; older ones had none.
    pub identity_bytes: Option<u32>,
    /// The method's configuration, by field name, in the method's order.
    pub config: Vec<(String, String)>,
    /// How both points cut intervals, by field name (`crate::cut::Cut::pairs`); empty: each
    /// point by its clock (files before version 4 were all recorded so).
    pub cut: Vec<(String, String)>,
    /// `(interval index, method payload)`, ascending.
    pub points: Vec<(u64, Vec<u8>)>,
}

impl SynopsisFile {
    /// Magic, `version`, method, role, intervals, identity seed (and from version 3 the
    /// identity byte limit) and configuration.
    fn write_header(&self, w: &mut WireWriter, version: u16) {
        w.bytes(MAGIC);
        w.u16(version);
        w.str(&self.method);
        w.u8(match self.role {
            Role::Sender => 0,
            Role::Receiver => 1,
        });
        w.u64(self.intervals.length_ns);
        w.u64(self.intervals.origin_ns);
        w.u64(self.identity_seed);
        if version >= 3 {
            w.u32(self.identity_bytes.unwrap_or(0));
        }
        w.u32(self.config.len() as u32);
        for (k, v) in &self.config {
            w.str(k);
            w.str(v);
        }
        if version >= 4 {
            w.u32(self.cut.len() as u32);
            for (k, v) in &self.cut {
                w.str(k);
                w.str(v);
            }
        }
    }

    /// The whole file in version 1 (one checksummed document), which has no identity byte
    /// limit and no packet counts: `owl record` writes streamed files.
    pub fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = WireWriter::new(&mut buf);
        self.write_header(&mut w, VERSION);
        w.u32(self.points.len() as u32);
        for (i, p) in &self.points {
            w.u64(*i);
            w.u32(p.len() as u32);
            w.bytes(p);
        }
        w.checksum();
        buf
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
        let mut file = SynopsisFile::read_header_fields(&mut r, VERSION)?;
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
        file.points = points;
        Ok(file)
    }

    /// Method, role, intervals, identity seed (and the identity byte limit) and configuration,
    /// after the magic and `version` ([`write_header`](Self::write_header)).
    fn read_header_fields(
        r: &mut WireReader<'_>,
        version: u16,
    ) -> Result<SynopsisFile, DecodeError> {
        let method = r.str("method name")?;
        let role = match r.u8("role")? {
            0 => Role::Sender,
            1 => Role::Receiver,
            x => return Err(r.invalid(format!("role {x} is neither sender (0) nor receiver (1)"))),
        };
        let length_ns = r.u64("interval length")?;
        let origin_ns = r.u64("interval origin")?;
        let identity_seed = r.u64("identity seed")?;
        let identity_bytes = if version >= 3 {
            Some(r.u32("identity bytes")?).filter(|&n| n != 0)
        } else {
            None
        };
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
        let mut cut = Vec::new();
        if version >= 4 {
            let n = r.u32("cut fields")? as usize;
            if n > 16 {
                return Err(r.invalid(format!("{n} cut fields is absurd")));
            }
            for _ in 0..n {
                let k = r.str("cut field")?;
                let v = r.str("cut value")?;
                cut.push((k, v));
            }
        }
        Ok(SynopsisFile {
            method,
            role,
            intervals: Intervals {
                length_ns,
                origin_ns,
            },
            identity_seed,
            identity_bytes,
            config,
            cut,
            points: Vec::new(),
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
        if sender.identity_bytes != receiver.identity_bytes {
            let says = |b: Option<u32>| match b {
                Some(n) => format!("{n} (--identity-bytes)"),
                None => "every captured byte (no --identity-bytes)".to_string(),
            };
            return mm(
                "identity bytes",
                says(sender.identity_bytes),
                says(receiver.identity_bytes),
            );
        }
        // the cut (an absent one is a clock cut)
        let cut = |f: &SynopsisFile| -> Vec<(String, String)> {
            if f.cut.is_empty() {
                vec![("cut".into(), "clock".into())]
            } else {
                f.cut.clone()
            }
        };
        let (sc, rc) = (cut(sender), cut(receiver));
        for (k, v) in &sc {
            match rc.iter().find(|(k2, _)| k2 == k) {
                Some((_, v2)) if v2 == v => {}
                Some((_, v2)) => return mm(k, v.clone(), v2.clone()),
                None => return mm(k, v.clone(), "absent".into()),
            }
        }
        if let Some((k, v)) = rc.iter().find(|(k, _)| !sc.iter().any(|(k2, _)| k2 == k)) {
            return mm(k, "absent".into(), v.clone());
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
            identity_bytes: None,
            config: vec![("rows".into(), "1024".into()), ("seed".into(), "1".into())],
            cut: Vec::new(),
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
        r.identity_bytes = Some(80);
        let e = SynopsisFile::check_pair(&s, &r).unwrap_err().to_string();
        assert!(
            e.contains(
                "identity bytes is every captured byte (no --identity-bytes) at the sender but 80 (--identity-bytes) at the receiver"
            ),
            "{e}"
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

/// Version of the streamed synopsis file `owl record` writes: 4 carries the interval cut and
/// each block's cut data; 3 carries the identity byte limit and each interval's packet count;
/// 3 and 2 (without them) are still read, as files recorded with clock cuts.
pub const STREAM_VERSION: u16 = 4;
/// The first streamed version, read without identity byte limit or packet counts.
const STREAM_VERSION_2: u16 = 2;
const TAG_BLOCK: u8 = 1;
const TAG_END: u8 = 2;

/// The streamed synopsis file: a header, then one block per interval appended as the interval
/// closes, then a closing block — so a recording cut short by a crash keeps every interval
/// written before it. Little-endian throughout:
///
/// ```text
/// magic "OWLSYN\r\n" | u16 version 4 | str method | u8 role | u64 interval length ns
/// | u64 interval origin ns | u64 identity seed | u32 identity bytes (0: every captured byte)
/// | u32 n, n × (str field, str value) | u32 c, c × (str field, str value) of the cut
/// | u64 xxh64 of the header so far
/// then per interval:  u8 1 | u64 interval index | u64 packets | u32 len
///                     | len bytes of method payload | u32 m | m bytes of cut data
///                     | u64 xxh64 of the block so far
/// closing block:      u8 2 | u64 number of interval blocks | u64 xxh64 of the block so far
/// ```
///
/// `packets` is how many packets the point's interval took (every method's synopsis of the
/// interval recorded them all): the sent and received counts `owl estimate` reports. The cut
/// data is `crate::cut::encode_point_cut`'s: S's delimiters, or the packets R held around the
/// interval's start (with a receiver's payload, its core, in the method's local form:
/// `PointSynopsis::encode_local`). Version 3 has no cut (each point cut by its clock);
/// version 2 has neither the identity bytes nor the packet counts.
///
/// A block whose length runs past the end of the file or whose checksum fails (a torn write)
/// ends the readable part: [`StreamReader::next_block`] reports it once, and every block before
/// it stays readable.
impl SynopsisFile {
    /// The header of a streamed file (this file's `points` are not written).
    pub fn encode_stream_header(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = WireWriter::new(&mut buf);
        self.write_header(&mut w, STREAM_VERSION);
        w.checksum();
        buf
    }

    /// One interval's block of a streamed file: the interval's index, the packets the point
    /// took in it, the method's payload and the point's cut data.
    pub fn encode_stream_block(index: u64, packets: u64, payload: &[u8], cut: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = WireWriter::new(&mut buf);
        w.u8(TAG_BLOCK);
        w.u64(index);
        w.u64(packets);
        w.u32(payload.len() as u32);
        w.bytes(payload);
        w.u32(cut.len() as u32);
        w.bytes(cut);
        w.checksum();
        buf
    }

    /// The closing block of a streamed file holding `blocks` interval blocks.
    pub fn encode_stream_end(blocks: u64) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = WireWriter::new(&mut buf);
        w.u8(TAG_END);
        w.u64(blocks);
        w.checksum();
        buf
    }
}

/// How a streamed file ended, when it did not end with its closing block.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum StreamEnd {
    #[error(
        "offset {offset}: the file ends without its closing block (the recording was cut short); {blocks} complete interval(s) before it"
    )]
    CutShort { offset: u64, blocks: u64 },
    #[error(
        "offset {offset}: torn interval block ({what}); {blocks} complete interval(s) before it"
    )]
    Torn {
        offset: u64,
        blocks: u64,
        what: String,
    },
}

/// One interval of a synopsis file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub index: u64,
    /// Packets the point took in the interval (`None` in files older than version 3).
    pub packets: Option<u64>,
    /// The method's payload.
    pub payload: Vec<u8>,
    /// The point's cut data (empty before version 4: a clock cut).
    pub cut: Vec<u8>,
}

/// Reads a synopsis file block by block: streamed files (versions 2 and 3) from any byte
/// stream, in memory of one block; files of version 1 (one checksummed document) whole.
pub struct StreamReader<R: std::io::Read> {
    src: R,
    /// Header as a [`SynopsisFile`] without points.
    pub header: SynopsisFile,
    /// Format version of the file.
    pub version: u16,
    /// Version 1: the intervals not yet handed out.
    v1: Option<std::vec::IntoIter<(u64, Vec<u8>)>>,
    offset: u64,
    blocks: u64,
    ended: bool,
}

fn read_exact_or_eof<R: std::io::Read>(src: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match src.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Why a synopsis file cannot be read at all.
#[derive(Debug, Error)]
pub enum StreamError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Decode(#[from] DecodeError),
}

impl<R: std::io::Read> StreamReader<R> {
    /// Read the header (a version 1 file is read whole).
    pub fn open(mut src: R) -> Result<StreamReader<R>, StreamError> {
        let mut head = [0u8; 10];
        let n = read_exact_or_eof(&mut src, &mut head)?;
        if n == 0 {
            return Err(DecodeError::Invalid {
                offset: 0,
                what: "empty file: not an owl synopsis file".into(),
            }
            .into());
        }
        if n < 10 || &head[..8] != MAGIC {
            return Err(DecodeError::Invalid {
                offset: 0,
                what: "not an owl synopsis file (no OWLSYN magic; was it written by `owl record`?)"
                    .into(),
            }
            .into());
        }
        let version = u16::from_le_bytes([head[8], head[9]]);
        if version == VERSION {
            let mut all = head.to_vec();
            src.read_to_end(&mut all)?;
            let mut f = SynopsisFile::decode(&all)?;
            let points = std::mem::take(&mut f.points);
            return Ok(StreamReader {
                src,
                header: f,
                version,
                v1: Some(points.into_iter()),
                offset: all.len() as u64,
                blocks: 0,
                ended: false,
            });
        }
        if !(STREAM_VERSION_2..=STREAM_VERSION).contains(&version) {
            return Err(DecodeError::Invalid {
                offset: 8,
                what: format!(
                    "synopsis format version {version}, this owl reads versions {VERSION} to {STREAM_VERSION}"
                ),
            }
            .into());
        }
        // The header: read field by field from the stream, checksummed as a whole.
        let mut buf = head.to_vec();
        fn need<R: std::io::Read>(
            src: &mut R,
            buf: &mut Vec<u8>,
            n: usize,
            what: &'static str,
        ) -> Result<usize, StreamError> {
            let at = buf.len();
            buf.resize(at + n, 0);
            let got = read_exact_or_eof(src, &mut buf[at..])?;
            if got < n {
                return Err(StreamError::Decode(DecodeError::Truncated {
                    offset: at + got,
                    what,
                    needed: n,
                    available: got,
                }));
            }
            Ok(at)
        }
        let str_len = |b: &[u8]| u16::from_le_bytes([b[0], b[1]]) as usize;
        let at = need(&mut src, &mut buf, 2, "method name")?;
        let l = str_len(&buf[at..]);
        need(&mut src, &mut buf, l, "method name")?;
        need(
            &mut src,
            &mut buf,
            1 + 24 + if version >= 3 { 4 } else { 0 },
            "role, intervals and identity",
        )?;
        let at = need(&mut src, &mut buf, 4, "configuration size")?;
        let k = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
        if k > 4096 {
            return Err(DecodeError::Invalid {
                offset: buf.len() - 4,
                what: format!("{k} configuration fields is absurd"),
            }
            .into());
        }
        for _ in 0..2 * k {
            let at = need(&mut src, &mut buf, 2, "configuration")?;
            let l = str_len(&buf[at..]);
            need(&mut src, &mut buf, l, "configuration")?;
        }
        if version >= 4 {
            let at = need(&mut src, &mut buf, 4, "cut size")?;
            let c = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
            if c > 16 {
                return Err(DecodeError::Invalid {
                    offset: buf.len() - 4,
                    what: format!("{c} cut fields is absurd"),
                }
                .into());
            }
            for _ in 0..2 * c {
                let at = need(&mut src, &mut buf, 2, "cut")?;
                let l = str_len(&buf[at..]);
                need(&mut src, &mut buf, l, "cut")?;
            }
        }
        let body = buf.len();
        let at = need(&mut src, &mut buf, 8, "header checksum")?;
        let h = u64::from_le_bytes(buf[at..at + 8].try_into().unwrap());
        if xxh64(&buf[..body], 0) != h {
            return Err(DecodeError::Invalid {
                offset: body,
                what: "header checksum mismatch: the file is corrupted".into(),
            }
            .into());
        }
        // Parse the checked header with the version 1 field reader.
        let mut r = WireReader::new(&buf[..body]);
        r.take(10, "magic and version")?;
        let header = SynopsisFile::read_header_fields(&mut r, version)?;
        Ok(StreamReader {
            src,
            header,
            version,
            v1: None,
            offset: buf.len() as u64,
            blocks: 0,
            ended: false,
        })
    }

    /// The next interval; `Ok(None)` after the closing block; `Err` once for a file that ends
    /// early or tears (every block before it was handed out), then `Ok(None)`.
    pub fn next_block(&mut self) -> Result<Option<Block>, StreamEnd> {
        if let Some(it) = self.v1.as_mut() {
            return Ok(it.next().map(|(index, payload)| Block {
                index,
                packets: None,
                payload,
                cut: Vec::new(),
            }));
        }
        if self.ended {
            return Ok(None);
        }
        let at = self.offset;
        let torn = |s: &mut Self, what: String| {
            s.ended = true;
            Err(StreamEnd::Torn {
                offset: at,
                blocks: s.blocks,
                what,
            })
        };
        let mut tag = [0u8; 1];
        match read_exact_or_eof(&mut self.src, &mut tag) {
            Ok(0) => {
                self.ended = true;
                return Err(StreamEnd::CutShort {
                    offset: at,
                    blocks: self.blocks,
                });
            }
            Ok(_) => {}
            Err(e) => return torn(self, e.to_string()),
        }
        match tag[0] {
            TAG_BLOCK => {
                // index, packets (from version 3), payload length
                let head = if self.version >= 3 { 20 } else { 12 };
                let mut hb = [0u8; 20];
                let h = &mut hb[..head];
                if read_exact_or_eof(&mut self.src, h).ok() != Some(head) {
                    return torn(self, "its header is cut".into());
                }
                let index = u64::from_le_bytes(h[..8].try_into().unwrap());
                let packets =
                    (head == 20).then(|| u64::from_le_bytes(h[8..16].try_into().unwrap()));
                let len = u32::from_le_bytes(h[head - 4..].try_into().unwrap()) as usize;
                // read in steps, so a hostile length cannot allocate before the bytes exist
                let read = |src: &mut R, len: usize| -> Option<Vec<u8>> {
                    let mut out = Vec::new();
                    let mut left = len;
                    let mut chunk = vec![0u8; len.min(1 << 20)];
                    while left > 0 {
                        let n = left.min(chunk.len());
                        match read_exact_or_eof(src, &mut chunk[..n]) {
                            Ok(got) if got == n => out.extend_from_slice(&chunk[..n]),
                            _ => return None,
                        }
                        left -= n;
                    }
                    Some(out)
                };
                let Some(payload) = read(&mut self.src, len) else {
                    return torn(self, format!("{len} bytes announced, the file ends first"));
                };
                // the cut data (from version 4)
                let mut cut_len = [0u8; 4];
                let cut = if self.version >= 4 {
                    if read_exact_or_eof(&mut self.src, &mut cut_len).ok() != Some(4) {
                        return torn(self, "its cut data is cut".into());
                    }
                    let m = u32::from_le_bytes(cut_len) as usize;
                    let Some(c) = read(&mut self.src, m) else {
                        return torn(
                            self,
                            format!("{m} bytes of cut data announced, the file ends first"),
                        );
                    };
                    c
                } else {
                    Vec::new()
                };
                let mut sum = [0u8; 8];
                if read_exact_or_eof(&mut self.src, &mut sum).ok() != Some(8) {
                    return torn(self, "its checksum is cut".into());
                }
                let mut whole = Vec::with_capacity(1 + head + len + 4 + cut.len());
                whole.push(TAG_BLOCK);
                whole.extend_from_slice(&hb[..head]);
                whole.extend_from_slice(&payload);
                if self.version >= 4 {
                    whole.extend_from_slice(&cut_len);
                    whole.extend_from_slice(&cut);
                }
                if xxh64(&whole, 0) != u64::from_le_bytes(sum) {
                    return torn(self, "checksum mismatch".into());
                }
                let cut_bytes = if self.version >= 4 { 4 + cut.len() } else { 0 };
                self.offset += (1 + head + 8 + len + cut_bytes) as u64;
                self.blocks += 1;
                Ok(Some(Block {
                    index,
                    packets,
                    payload,
                    cut,
                }))
            }
            TAG_END => {
                let mut b = [0u8; 16];
                if read_exact_or_eof(&mut self.src, &mut b).ok() != Some(16) {
                    return torn(self, "the closing block is cut".into());
                }
                let mut whole = vec![TAG_END];
                whole.extend_from_slice(&b[..8]);
                let count = u64::from_le_bytes(b[..8].try_into().unwrap());
                if xxh64(&whole, 0) != u64::from_le_bytes(b[8..].try_into().unwrap())
                    || count != self.blocks
                {
                    return torn(
                        self,
                        format!(
                            "closing block claims {count} intervals, {} read",
                            self.blocks
                        ),
                    );
                }
                self.ended = true;
                Ok(None)
            }
            x => torn(self, format!("unknown block tag {x}")),
        }
    }
}

#[cfg(test)]
mod stream_tests {
    use super::*;

    fn file() -> SynopsisFile {
        SynopsisFile {
            method: "lda".into(),
            role: Role::Sender,
            intervals: Intervals::aligned(1000),
            identity_seed: 7,
            identity_bytes: Some(80),
            config: vec![("rows".into(), "512".into())],
            cut: vec![("cut".into(), "delimiter".into())],
            points: Vec::new(),
        }
    }

    fn streamed(n: u64, close: bool) -> Vec<u8> {
        let f = file();
        let mut b = f.encode_stream_header();
        for i in 0..n {
            b.extend(SynopsisFile::encode_stream_block(
                10 + i,
                1000 + i,
                &vec![i as u8; 100 + i as usize],
                &[7, 7],
            ));
        }
        if close {
            b.extend(SynopsisFile::encode_stream_end(n));
        }
        b
    }

    fn read_all(b: &[u8]) -> (Vec<Block>, Option<StreamEnd>) {
        let mut r = StreamReader::open(b).unwrap();
        assert_eq!(r.header, file());
        let mut out = Vec::new();
        loop {
            match r.next_block() {
                Ok(Some(x)) => out.push(x),
                Ok(None) => return (out, None),
                Err(e) => {
                    assert_eq!(r.next_block(), Ok(None));
                    return (out, Some(e));
                }
            }
        }
    }

    #[test]
    fn roundtrip_and_every_cut() {
        let b = streamed(3, true);
        let (blocks, end) = read_all(&b);
        assert_eq!(blocks.len(), 3);
        assert_eq!(
            blocks[2],
            Block {
                index: 12,
                packets: Some(1002),
                payload: vec![2u8; 102],
                cut: vec![7, 7],
            }
        );
        assert_eq!(end, None);
        let header = file().encode_stream_header().len();
        // cut anywhere after the header: the complete blocks before the cut are read, and the
        // cut is reported once
        for cut in header..b.len() {
            let (blocks, end) = read_all(&b[..cut]);
            let whole = [header + 135, header + 135 + 136, header + 135 + 136 + 137];
            let want = whole.iter().filter(|&&e| e <= cut).count();
            assert_eq!(blocks.len(), want, "cut at {cut}");
            assert!(end.is_some(), "cut at {cut} reported");
        }
        // a flipped byte in the second block: the first stays readable
        let mut bad = b.clone();
        bad[header + 135 + 30] ^= 1;
        let (blocks, end) = read_all(&bad);
        assert_eq!(blocks.len(), 1);
        assert!(matches!(end, Some(StreamEnd::Torn { .. })));
        // a cut header is an error
        for cut in [0, 5, 12, header - 1] {
            assert!(StreamReader::open(&b[..cut]).is_err(), "{cut}");
        }
    }

    #[test]
    fn version_1_files_still_read() {
        let mut f = file();
        f.cut.clear();
        f.points = vec![(4, vec![1, 2, 3])];
        let b = f.encode();
        let mut r = StreamReader::open(&b[..]).unwrap();
        let want = Block {
            index: 4,
            packets: None,
            payload: vec![1, 2, 3],
            cut: Vec::new(),
        };
        assert_eq!(r.next_block(), Ok(Some(want)));
        assert_eq!(r.next_block(), Ok(None));
    }

    #[test]
    fn version_2_files_still_read_without_identity_bytes_or_counts() {
        // version 2 as owl wrote it: no identity bytes in the header, no packets in blocks
        let mut f = file();
        f.identity_bytes = None;
        f.cut.clear();
        let mut b = Vec::new();
        let mut w = WireWriter::new(&mut b);
        f.write_header(&mut w, 2);
        w.checksum();
        let mut block = Vec::new();
        let mut w = WireWriter::new(&mut block);
        w.u8(TAG_BLOCK);
        w.u64(4);
        w.u32(3);
        w.bytes(&[1, 2, 3]);
        w.checksum();
        b.extend(block);
        b.extend(SynopsisFile::encode_stream_end(1));
        let mut r = StreamReader::open(&b[..]).unwrap();
        assert_eq!((r.version, &r.header), (2, &f));
        let want = Block {
            index: 4,
            packets: None,
            payload: vec![1, 2, 3],
            cut: Vec::new(),
        };
        assert_eq!(r.next_block(), Ok(Some(want)));
        assert_eq!(r.next_block(), Ok(None));
        // and a version this owl does not know is refused, naming the versions it reads
        b[8] = 5;
        let e = StreamReader::open(&b[..]).err().unwrap().to_string();
        assert!(
            e.contains("version 5, this owl reads versions 1 to 4"),
            "{e}"
        );
    }
}
