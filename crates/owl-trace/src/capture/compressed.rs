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
//! Everything the decoder could produce before the cut is handed out first, as `zstd -dc` and
//! `gzip -dc` write it: for zstd, every complete block and the bytes of a cut raw block (a
//! compressed block decodes only whole, so the part of one that the cut leaves is lost).

use std::io::{self, Cursor, Read};

use flate2::read::MultiGzDecoder;
use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

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
                src: BlockTap {
                    src: raw,
                    block: Vec::new(),
                    recording: false,
                },
                frame: FrameDecoder::new(),
                in_frame: false,
                cut: None,
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
            Kind::Zstd(z) => z.src.src.count,
        }
    }

    fn raw_at_end(&self) -> bool {
        match &self.kind {
            Kind::Plain(c) => c.at_end,
            Kind::Gzip(g) => g.get_ref().at_end,
            Kind::Zstd(z) => z.src.src.at_end,
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
///
/// While a frame is being decoded, the decoder keeps its last window of output (up to
/// [`MAX_ZSTD_WINDOW`]) for back-references and hands out only what lies before it; at the end
/// of the frame it hands out the rest. A stream cut inside a frame has no end, so at the cut the
/// frame is ended with an empty last block ([`EMPTY_LAST_BLOCK`]) to make the decoder hand over
/// what it held, then the bytes of the cut raw block are handed out, then the truncation.
struct ZstdFrames<R: Read> {
    src: BlockTap<R>,
    frame: FrameDecoder,
    in_frame: bool,
    /// The stream was cut: the bytes of the raw block it cut, still to hand out.
    cut: Option<Cursor<Vec<u8>>>,
}

/// A last raw block of no bytes (block header: `Last_Block` 1, `Block_Type` 0, `Block_Size`
/// 0), then four bytes for the frame's checksum when it has one (read only then; never
/// checked, since the truncation is reported instead).
const EMPTY_LAST_BLOCK: [u8; 7] = [1, 0, 0, 0, 0, 0, 0];

/// The compressed input, keeping the bytes of the block being decoded when it is a raw block
/// (stored as is, so a cut one still gives the bytes before the cut, as libzstd's streaming
/// decoder gives them); only its 3-byte header of any other block.
struct BlockTap<R: Read> {
    src: Counted<R>,
    block: Vec<u8>,
    recording: bool,
}

impl<R: Read> BlockTap<R> {
    /// Keep the bytes read from here on as the next block's.
    fn start_block(&mut self) {
        self.block.clear();
        self.recording = true;
    }

    /// The content bytes of a raw block cut short (none if the block read is not raw, or was
    /// read whole).
    fn cut_raw_block(&mut self) -> Vec<u8> {
        self.recording = false;
        let Some(h) = self.block.get(..3) else {
            return Vec::new();
        };
        let header = u32::from_le_bytes([h[0], h[1], h[2], 0]);
        let (raw, size) = ((header >> 1) & 3 == 0, (header >> 3) as usize);
        let content = &self.block[3..];
        if raw && content.len() < size {
            content.to_vec()
        } else {
            Vec::new()
        }
    }
}

impl<R: Read> Read for BlockTap<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.src.read(buf)?;
        if self.recording {
            self.block.extend_from_slice(&buf[..n]);
            // Block_Type 0 is a raw block: any other is kept no further than its header
            if self.block.len() >= 3 && (self.block[0] >> 1) & 3 != 0 {
                self.block.truncate(3);
                self.recording = false;
            }
        }
        Ok(n)
    }
}

impl<R: Read> ZstdFrames<R> {
    /// Start the next frame; false at a clean end of the stream.
    fn next_frame(&mut self) -> io::Result<bool> {
        loop {
            let before = self.src.src.count;
            self.frame.set_max_window_size(MAX_ZSTD_WINDOW);
            match self.frame.reset(&mut self.src) {
                Ok(()) => return Ok(true),
                Err(FrameDecoderError::ReadFrameHeaderError(
                    ReadFrameHeaderError::MagicNumberReadError(_),
                )) if self.src.src.count == before && self.src.src.at_end => return Ok(false),
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
        if let Some(rest) = &mut self.cut {
            if self.frame.can_collect() > 0 {
                return self.frame.read(buf);
            }
            return match rest.read(buf)? {
                0 => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "zstd stream cut inside a frame",
                )),
                n => Ok(n),
            };
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
            self.src.start_block();
            let decoded = self
                .frame
                .decode_blocks(&mut self.src, BlockDecodingStrategy::UptoBlocks(1));
            self.src.recording = false;
            if let Err(e) = decoded {
                if !self.src.src.at_end {
                    return Err(io::Error::other(e));
                }
                // cut: a failed block leaves the decoder's output as it was, so ending the
                // frame there hands over every complete block
                self.cut = Some(Cursor::new(self.src.cut_raw_block()));
                if self
                    .frame
                    .decode_blocks(&EMPTY_LAST_BLOCK[..], BlockDecodingStrategy::UptoBlocks(1))
                    .is_err()
                {
                    return Err(io::Error::other(e));
                }
                return self.read(buf);
            }
        }
    }
}
