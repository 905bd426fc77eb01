//! Compressed captures, recognised by their magic number (not their name) and decompressed as a
//! stream: gzip (RFC 1952, concatenated members included, via `flate2`'s pure-Rust backend) and
//! Zstandard (RFC 8878, concatenated and skippable frames included, via the pure-Rust `ruzstd`).
//!
//! Memory stays bounded: gzip keeps a 32 KiB window; zstd keeps the window its frame header
//! declares, which is refused above [`MAX_ZSTD_WINDOW`] (the `zstd` tool's own default limit),
//! so a hostile header cannot make owl reserve more.
//!
//! A compressed stream that ends early (a capture piped through `gzip` and killed) is reported
//! as a truncation, like a pcap that ends inside a record: the packets before it are intact.

use std::io::{self, Cursor, Read};

use flate2::read::MultiGzDecoder;
use ruzstd::decoding::FrameDecoder;
use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};

/// Largest zstd window owl accepts (2^27 bytes, `zstd -d`'s default `--memory` limit).
pub const MAX_ZSTD_WINDOW: u64 = 1 << 27;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const ZSTD_SKIPPABLE: std::ops::RangeInclusive<u32> = 0x184d_2a50..=0x184d_2a5f;

/// How a capture file is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    /// What the first bytes of a file say.
    pub fn detect(head: &[u8]) -> Compression {
        if head.starts_with(&GZIP_MAGIC) {
            Compression::Gzip
        } else if head.starts_with(&ZSTD_MAGIC)
            || head.get(..4).is_some_and(|m| {
                ZSTD_SKIPPABLE.contains(&u32::from_le_bytes([m[0], m[1], m[2], m[3]]))
            })
        {
            Compression::Zstd
        } else {
            Compression::None
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "uncompressed",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// Compressors owl does not read, by magic, for a clear refusal.
pub(crate) fn unsupported_compression(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Some("xz (decompress it with `xz -d`)")
    } else if head.starts_with(b"BZh") {
        Some("bzip2 (decompress it with `bzip2 -d`)")
    } else if head.starts_with(&[0x04, 0x22, 0x4d, 0x18]) {
        Some("lz4 (decompress it with `lz4 -d`)")
    } else {
        None
    }
}

/// The raw input with the bytes already read to sniff the magic put back, counting what it
/// hands out and remembering whether it reached its end.
pub(crate) struct Counted<R: Read> {
    inner: io::Chain<Cursor<Vec<u8>>, R>,
    pub count: u64,
    pub at_end: bool,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.at_end = true;
        }
        self.count += n as u64;
        Ok(n)
    }
}

/// The capture byte stream: the input itself, or its decompression.
pub(crate) struct Input<R: Read> {
    kind: Kind<R>,
    compression: Compression,
    /// The compressed stream ended early (set instead of returning the decoder's error, so the
    /// capture reader can report a truncation at the right place).
    pub truncated: bool,
}

enum Kind<R: Read> {
    Plain(Counted<R>),
    Gzip(Box<MultiGzDecoder<Counted<R>>>),
    Zstd(Box<ZstdFrames<R>>),
}

impl<R: Read> Input<R> {
    /// Sniff the first bytes of `reader` and wrap it accordingly.
    pub fn new(mut reader: R) -> io::Result<(Input<R>, Compression)> {
        let mut head = vec![0u8; 6];
        let mut have = 0;
        while have < head.len() {
            match reader.read(&mut head[have..]) {
                Ok(0) => break,
                Ok(n) => have += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        head.truncate(have);
        let compression = Compression::detect(&head);
        let raw = Counted {
            inner: Cursor::new(head).chain(reader),
            count: 0,
            at_end: false,
        };
        let kind = match compression {
            Compression::None => Kind::Plain(raw),
            Compression::Gzip => Kind::Gzip(Box::new(MultiGzDecoder::new(raw))),
            Compression::Zstd => Kind::Zstd(Box::new(ZstdFrames {
                src: raw,
                frame: FrameDecoder::new(),
                in_frame: false,
            })),
        };
        Ok((
            Input {
                kind,
                compression,
                truncated: false,
            },
            compression,
        ))
    }

    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Bytes taken from the underlying reader so far (compressed bytes for a compressed input).
    pub fn raw_bytes(&self) -> u64 {
        match &self.kind {
            Kind::Plain(c) => c.count,
            Kind::Gzip(g) => g.get_ref().count,
            Kind::Zstd(z) => z.src.count,
        }
    }

    fn raw_at_end(&self) -> bool {
        match &self.kind {
            Kind::Plain(c) => c.at_end,
            Kind::Gzip(g) => g.get_ref().at_end,
            Kind::Zstd(z) => z.src.at_end,
        }
    }
}

impl<R: Read> Read for Input<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.truncated {
            return Ok(0);
        }
        let (r, what) = match &mut self.kind {
            Kind::Plain(c) => return c.read(buf),
            Kind::Gzip(g) => (g.read(buf), "gzip"),
            Kind::Zstd(z) => (z.read(buf), "zstd"),
        };
        match r {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            // a decoder that fails once its input has ended saw a cut stream, not a corrupt one
            Err(_) if self.raw_at_end() => {
                self.truncated = true;
                Ok(0)
            }
            Err(e) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "corrupt {what} stream near compressed byte {}: {e}",
                    self.raw_bytes()
                ),
            )),
        }
    }
}

/// A sequence of zstd frames (RFC 8878 section 3.1: a stream may hold several, and skippable
/// frames anywhere), decoded one block at a time.
struct ZstdFrames<R: Read> {
    src: Counted<R>,
    frame: FrameDecoder,
    in_frame: bool,
}

impl<R: Read> ZstdFrames<R> {
    /// Start the next frame; false at a clean end of the stream.
    fn next_frame(&mut self) -> io::Result<bool> {
        loop {
            let before = self.src.count;
            self.frame.set_max_window_size(MAX_ZSTD_WINDOW);
            match self.frame.reset(&mut self.src) {
                Ok(()) => return Ok(true),
                Err(FrameDecoderError::ReadFrameHeaderError(
                    ReadFrameHeaderError::MagicNumberReadError(_),
                )) if self.src.count == before && self.src.at_end => return Ok(false),
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let skipped = io::copy(
                        &mut (&mut self.src).take(u64::from(length)),
                        &mut io::sink(),
                    )?;
                    if skipped < u64::from(length) {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "skippable frame cut short",
                        ));
                    }
                }
                Err(e) => return Err(io::Error::other(e)),
            }
        }
    }
}

impl<R: Read> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if !self.in_frame {
                if !self.next_frame()? {
                    return Ok(0);
                }
                self.in_frame = true;
            }
            if self.frame.can_collect() > 0 {
                return self.frame.read(buf);
            }
            if self.frame.is_finished() {
                if let (Some(stored), Some(computed)) = (
                    self.frame.get_checksum_from_data(),
                    self.frame.get_calculated_checksum(),
                ) && stored != computed
                {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "zstd frame checksum 0x{stored:08x} differs from its content's 0x{computed:08x}"
                        ),
                    ));
                }
                self.in_frame = false;
                continue;
            }
            self.frame
                .decode_blocks(
                    &mut self.src,
                    ruzstd::decoding::BlockDecodingStrategy::UptoBlocks(1),
                )
                .map_err(io::Error::other)?;
        }
    }
}
