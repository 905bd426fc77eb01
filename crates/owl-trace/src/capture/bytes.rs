//! A refillable window over a byte stream: the reader's only buffer.

use std::io::{self, Read};

use super::MAX_BLOCK;

pub(crate) struct ByteSource<R: Read> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// File offset of `buf[0]`.
    base: u64,
    eof: bool,
}

const INITIAL: usize = 1 << 20;

impl<R: Read> ByteSource<R> {
    pub fn new(inner: R) -> Self {
        ByteSource {
            inner,
            buf: vec![0; INITIAL],
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
        }
    }

    /// File offset of the next unconsumed byte.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The stream being read.
    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// Unconsumed bytes in the buffer.
    pub fn peek(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Try to make `n` bytes available (`n ≤ MAX_BLOCK`); returns how many are (fewer only at
    /// the end of the stream).
    pub fn ensure(&mut self, n: usize) -> io::Result<usize> {
        if n > MAX_BLOCK {
            // callers validate lengths first; this is the last line against a huge allocation
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a record of {n} bytes is larger than the {MAX_BLOCK}-byte limit"),
            ));
        }
        if self.end - self.pos >= n {
            return Ok(n);
        }
        if self.pos + n > self.buf.len() {
            // compact, then grow if one block is larger than the buffer
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
            if n > self.buf.len() {
                self.buf
                    .resize(n.next_power_of_two().min(MAX_BLOCK.max(n)), 0);
            }
        }
        while self.end - self.pos < n && !self.eof {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok((self.end - self.pos).min(n))
    }

    /// Consume `n` bytes (which must be available) and return them.
    pub fn take(&mut self, n: usize) -> &[u8] {
        let start = self.pos;
        self.pos += n;
        debug_assert!(self.pos <= self.end);
        &self.buf[start..self.pos]
    }
}
