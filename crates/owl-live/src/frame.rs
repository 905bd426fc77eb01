//! Frames: versioned, length-prefixed, authenticated one by one (HMAC-SHA256), with a hard cap
//! on their size.
//!
//! ```text
//! u32 body length (little-endian, ≤ the cap)
//! body: u8 version (1) | u8 kind | u64 sequence number | payload | 32-byte HMAC-SHA256 tag
//! tag = HMAC-SHA256(session key, u8 direction | version | kind | sequence | payload)
//! ```
//!
//! - **Size.** A length above the cap is refused before anything is allocated; a body is read
//!   into a buffer that grows only as its bytes arrive (never past the declared length, itself
//!   at most the cap), so a peer that announces a large frame and sends little costs little.
//!   Before the handshake has authenticated the peer the cap is [`MAX_HANDSHAKE_FRAME`]
//!   (64 KiB), after it [`MAX_FRAME`] (64 MiB: one method's synopsis or one RDA message of one
//!   interval must fit; a larger one is reported, not sent).
//! - **Integrity and origin.** Each frame's tag covers its direction, version, kind, sequence
//!   number and payload under a key only holders of the pre-shared key can derive
//!   ([`crate::link`]). A frame whose tag does not verify ends the connection.
//! - **Replay.** Each direction numbers its frames 0, 1, 2, … and a frame must carry exactly the
//!   next number: a replayed, dropped or reordered frame is refused. The session key is fresh
//!   for every connection (both ends contribute a random nonce), so a frame recorded from an
//!   earlier connection does not verify in a later one, and the direction byte stops a frame
//!   from being reflected back to its sender. Results carry their interval number, and the
//!   collector stores one result per (pair, method, interval).

use std::io::{Read, Write};

use hmac::Mac;

use crate::key::Key;

/// Protocol version in every frame (2: `Have` carries the sender's kernel drop count; 3: the
/// receiver's `Ping` and the sender's `Pong`, the clock-offset exchange; 4: the sender's
/// `Resume` after every accept, and `Have` says why a synopsis is lost; 5: the interval cut in
/// the configuration; 6: the configuration names its path, so one point serves many; 7: a
/// sender whose capture ended names its last packets for the end of its last interval).
pub const VERSION: u8 = 7;
/// Largest body of an authenticated connection, bytes.
pub const MAX_FRAME: usize = 64 << 20;
/// Largest body before the peer is authenticated, bytes.
pub const MAX_HANDSHAKE_FRAME: usize = 64 << 10;
/// Bytes of the tag.
pub const TAG_BYTES: usize = 32;
/// Bytes of version, kind and sequence number.
pub const HEADER_BYTES: usize = 1 + 1 + 8;
/// Smallest body: header and tag, no payload.
pub const MIN_BODY: usize = HEADER_BYTES + TAG_BYTES;
/// A body is read in steps of at most this many bytes.
const STEP: usize = 64 << 10;

/// Which way a frame travels (part of what the tag covers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the side that connected to the side that listened.
    ToListener = 0,
    /// From the side that listened to the side that connected.
    ToConnector = 1,
}

impl Direction {
    pub fn reverse(self) -> Direction {
        match self {
            Direction::ToListener => Direction::ToConnector,
            Direction::ToConnector => Direction::ToListener,
        }
    }
}

/// What can be wrong with a frame or the stream of them.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The stream ended cleanly between frames.
    #[error("the peer closed the connection")]
    Closed,
    #[error("the connection ended inside a frame ({got} of {want} bytes)")]
    Truncated { got: usize, want: usize },
    #[error(
        "a frame of {len} bytes exceeds the cap of {cap} bytes{}",
        first_bytes_hint(*.len)
    )]
    TooLarge { len: usize, cap: usize },
    #[error("a frame of {len} bytes is shorter than the smallest frame ({MIN_BODY} bytes)")]
    TooShort { len: usize },
    #[error("the peer speaks owl live protocol version {got}, this owl speaks version {VERSION}")]
    Version { got: u8 },
    #[error(
        "frame {seq} failed authentication: the peer does not hold the same key (wrong --key-file?) or the frame was altered"
    )]
    Tag { seq: u64 },
    #[error("frame {got} arrived where frame {want} was expected (replayed, dropped or reordered)")]
    Sequence { got: u64, want: u64 },
}

/// A hint when a "length" is really the start of another protocol's text.
fn first_bytes_hint(len: usize) -> String {
    let b = (len as u32).to_le_bytes();
    if b.iter().all(|c| c.is_ascii_graphic() || *c == b' ') {
        format!(
            " (its first bytes read \"{}\": is the peer an owl agent?)",
            String::from_utf8_lossy(&b)
        )
    } else {
        String::new()
    }
}

/// A frame's body split into its fields, not yet authenticated.
#[derive(Debug, PartialEq, Eq)]
pub struct RawFrame<'a> {
    pub version: u8,
    pub kind: u8,
    pub seq: u64,
    pub payload: &'a [u8],
    pub tag: &'a [u8],
    /// Everything the tag covers after the direction byte.
    pub covered: &'a [u8],
}

/// Split a body (the bytes after the length) into its fields.
pub fn parse_body(body: &[u8]) -> Result<RawFrame<'_>, FrameError> {
    if body.len() < MIN_BODY {
        return Err(FrameError::TooShort { len: body.len() });
    }
    let (covered, tag) = body.split_at(body.len() - TAG_BYTES);
    let seq = u64::from_le_bytes(covered[2..10].try_into().expect("10 header bytes"));
    Ok(RawFrame {
        version: covered[0],
        kind: covered[1],
        seq,
        payload: &covered[HEADER_BYTES..],
        tag,
        covered,
    })
}

/// Decode one length-prefixed frame from the front of `buf` (no I/O: the fuzz target's entry
/// point): `Ok(None)` if `buf` does not yet hold all of it, else the frame and the bytes it
/// took. The length is checked against `cap` before anything else.
pub fn decode(buf: &[u8], cap: usize) -> Result<Option<(RawFrame<'_>, usize)>, FrameError> {
    let Some(len) = buf.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
    check_len(len, cap)?;
    match buf.get(4..4 + len) {
        None => Ok(None),
        Some(body) => Ok(Some((parse_body(body)?, 4 + len))),
    }
}

fn check_len(len: usize, cap: usize) -> Result<(), FrameError> {
    if len > cap {
        return Err(FrameError::TooLarge { len, cap });
    }
    if len < MIN_BODY {
        return Err(FrameError::TooShort { len });
    }
    Ok(())
}

/// Reads frame bodies from a stream, within a cap.
pub struct FrameReader<R> {
    r: R,
    cap: usize,
}

impl<R: Read> FrameReader<R> {
    /// A reader with the handshake's cap ([`MAX_HANDSHAKE_FRAME`]).
    pub fn new(r: R) -> FrameReader<R> {
        FrameReader {
            r,
            cap: MAX_HANDSHAKE_FRAME,
        }
    }

    /// Set the cap (raised once the peer is authenticated).
    pub fn set_cap(&mut self, cap: usize) {
        self.cap = cap;
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    pub fn get_ref(&self) -> &R {
        &self.r
    }

    /// The next frame's body. Its buffer grows as bytes arrive, in steps, and never past the
    /// declared length (at most the cap).
    pub fn read_body(&mut self) -> Result<Vec<u8>, FrameError> {
        let mut len = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match self.r.read(&mut len[got..]) {
                Ok(0) if got == 0 => return Err(FrameError::Closed),
                Ok(0) => return Err(FrameError::Truncated { got, want: 4 }),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        let len = u32::from_le_bytes(len) as usize;
        check_len(len, self.cap)?;
        let mut body: Vec<u8> = Vec::new();
        while body.len() < len {
            if body.len() == body.capacity() {
                // grow geometrically with what arrived, never past the declared length
                let want = (body.capacity().max(STEP) * 2).min(len);
                body.reserve_exact(want - body.len());
            }
            let old = body.len();
            let room = (body.capacity() - old).min(len - old).min(STEP);
            body.resize(old + room, 0);
            match self.r.read(&mut body[old..]) {
                Ok(0) => {
                    return Err(FrameError::Truncated {
                        got: 4 + old,
                        want: 4 + len,
                    });
                }
                Ok(n) => body.truncate(old + n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => body.truncate(old),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(body)
    }
}

/// One direction's authenticated frames: the key, the direction, the next sequence number.
#[derive(Clone, Debug)]
pub struct Sealer {
    key: Key,
    dir: Direction,
    next: u64,
}

fn tag(key: &Key, dir: Direction, covered: &[u8]) -> hmac::Hmac<sha2::Sha256> {
    let mut m = key.mac();
    m.update(&[dir as u8]);
    m.update(covered);
    m
}

impl Sealer {
    pub fn new(key: Key, dir: Direction, next: u64) -> Sealer {
        Sealer { key, dir, next }
    }

    /// The next frame, length prefix included.
    pub fn seal(&mut self, kind: u8, payload: &[u8]) -> Vec<u8> {
        let seq = self.next;
        self.next += 1;
        seal_with(&self.key, self.dir, seq, kind, payload)
    }
}

/// A frame of `kind` and `seq` under `key` (length prefix included).
pub fn seal_with(key: &Key, dir: Direction, seq: u64, kind: u8, payload: &[u8]) -> Vec<u8> {
    let len = HEADER_BYTES + payload.len() + TAG_BYTES;
    let mut out = Vec::with_capacity(4 + len);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(payload);
    let t = tag(key, dir, &out[4..]).finalize().into_bytes();
    out.extend_from_slice(&t);
    out
}

/// A frame that carries no valid tag (refusals sent before a session key exists).
pub fn unauthenticated(kind: u8, payload: &[u8]) -> Vec<u8> {
    let len = HEADER_BYTES + payload.len() + TAG_BYTES;
    let mut out = Vec::with_capacity(4 + len);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&[0u8; TAG_BYTES]);
    out
}

/// Checks the other direction's frames: version, tag, sequence number.
#[derive(Clone, Debug)]
pub struct Opener {
    key: Key,
    dir: Direction,
    next: u64,
}

/// An authenticated frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub seq: u64,
    pub payload: Vec<u8>,
}

impl Opener {
    pub fn new(key: Key, dir: Direction, next: u64) -> Opener {
        Opener { key, dir, next }
    }

    /// Authenticate one body read by [`FrameReader::read_body`].
    pub fn open(&mut self, body: &[u8]) -> Result<Frame, FrameError> {
        let raw = parse_body(body)?;
        let f = verify(&self.key, self.dir, &raw, self.next)?;
        self.next += 1;
        Ok(f)
    }
}

/// Check a raw frame's version, tag and sequence number (`want`).
pub fn verify(key: &Key, dir: Direction, raw: &RawFrame, want: u64) -> Result<Frame, FrameError> {
    if raw.version != VERSION {
        return Err(FrameError::Version { got: raw.version });
    }
    tag(key, dir, raw.covered)
        .verify_slice(raw.tag)
        .map_err(|_| FrameError::Tag { seq: raw.seq })?;
    if raw.seq != want {
        return Err(FrameError::Sequence { got: raw.seq, want });
    }
    Ok(Frame {
        kind: raw.kind,
        seq: raw.seq,
        payload: raw.payload.to_vec(),
    })
}

/// Write a sealed frame and flush.
pub fn write_frame(w: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    w.write_all(bytes)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> Key {
        Key::from_bytes([b; 32])
    }

    #[test]
    fn frames_roundtrip_in_order() {
        let mut s = Sealer::new(key(1), Direction::ToListener, 0);
        let mut o = Opener::new(key(1), Direction::ToListener, 0);
        let mut stream = Vec::new();
        for (k, p) in [(3u8, &b"hello"[..]), (9, b""), (200, &[7u8; 100_000][..])] {
            stream.extend(s.seal(k, p));
        }
        let mut r = FrameReader::new(&stream[..]);
        r.set_cap(MAX_FRAME);
        for (k, p) in [(3u8, &b"hello"[..]), (9, b""), (200, &[7u8; 100_000][..])] {
            let f = o.open(&r.read_body().unwrap()).unwrap();
            assert_eq!((f.kind, &f.payload[..]), (k, p));
        }
        assert!(matches!(r.read_body(), Err(FrameError::Closed)));
        // the pure decoder agrees
        let (raw, used) = decode(&stream, MAX_FRAME).unwrap().unwrap();
        assert_eq!((raw.kind, raw.payload, used), (3, &b"hello"[..], 4 + 47));
        assert!(decode(&stream[..20], MAX_FRAME).unwrap().is_none());
    }

    #[test]
    fn wrong_key_direction_sequence_and_version_are_refused() {
        let f = Sealer::new(key(1), Direction::ToListener, 0).seal(5, b"x");
        let body = &f[4..];
        let open = |k, d, n| Opener::new(key(k), d, n).open(body);
        assert!(open(1, Direction::ToListener, 0).is_ok());
        let e = open(2, Direction::ToListener, 0).unwrap_err();
        assert!(e.to_string().contains("does not hold the same key"), "{e}");
        assert!(matches!(
            open(1, Direction::ToConnector, 0),
            Err(FrameError::Tag { .. })
        ));
        assert!(matches!(
            open(1, Direction::ToListener, 1),
            Err(FrameError::Sequence { got: 0, want: 1 })
        ));
        // replay: the same frame twice
        let mut o = Opener::new(key(1), Direction::ToListener, 0);
        o.open(body).unwrap();
        assert!(matches!(o.open(body), Err(FrameError::Sequence { .. })));
        // every flipped bit of the body is caught
        for i in 0..body.len() {
            for bit in 0..8 {
                let mut b = body.to_vec();
                b[i] ^= 1 << bit;
                assert!(
                    Opener::new(key(1), Direction::ToListener, 0)
                        .open(&b)
                        .is_err(),
                    "byte {i} bit {bit}"
                );
            }
        }
        let mut b = body.to_vec();
        b[0] = VERSION + 1;
        let e = Opener::new(key(1), Direction::ToListener, 0)
            .open(&b)
            .unwrap_err();
        assert!(
            e.to_string().contains(&format!("version {}", VERSION + 1)),
            "{e}"
        );
    }

    #[test]
    fn lengths_beyond_the_cap_or_below_a_frame_are_refused_before_reading() {
        let mut huge = u32::MAX.to_le_bytes().to_vec();
        huge.extend([0u8; 100]);
        let e = FrameReader::new(&huge[..]).read_body().unwrap_err();
        assert!(
            matches!(
                e,
                FrameError::TooLarge {
                    cap: MAX_HANDSHAKE_FRAME,
                    ..
                }
            ),
            "{e}"
        );
        let e = FrameReader::new(&b"GET / HTTP/1.1\r\n"[..])
            .read_body()
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("\"GET \": is the peer an owl agent?"),
            "{e}"
        );
        let e = FrameReader::new(&5u32.to_le_bytes()[..])
            .read_body()
            .unwrap_err();
        assert!(matches!(e, FrameError::TooShort { len: 5 }));
        // a frame cut short
        let f = Sealer::new(key(1), Direction::ToListener, 0).seal(1, &[0; 1000]);
        for cut in 1..f.len() {
            let e = FrameReader::new(&f[..cut]).read_body().unwrap_err();
            assert!(matches!(e, FrameError::Truncated { .. }), "cut {cut}: {e}");
            assert!(decode(&f[..cut], MAX_FRAME).unwrap().is_none());
        }
    }
}
