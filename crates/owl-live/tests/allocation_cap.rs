//! A hostile peer cannot make the frame decoder allocate beyond its cap: the length is checked
//! before anything is allocated, and a body's buffer grows only with the bytes that actually
//! arrive, never past the declared length (itself at most the cap). Measured with a counting
//! allocator (per thread: each scenario runs on the test's own thread).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Read;

use owl_live::frame::{FrameError, FrameReader, MAX_FRAME, MAX_HANDSHAKE_FRAME, MIN_BODY};

struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn add(n: usize) {
    let _ = LIVE.try_with(|l| {
        let v = l.get() + n;
        l.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}
fn sub(n: usize) {
    let _ = LIVE.try_with(|l| l.set(l.get().saturating_sub(n)));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        add(l.size());
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        sub(l.size());
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        sub(l.size());
        add(new);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Peak bytes allocated (above what was live before) while `f` runs.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    (out, PEAK.with(Cell::get) - base)
}

/// A peer that sends `head`, then `n` zero bytes, then closes — without building them in memory.
struct Hostile {
    head: Vec<u8>,
    pos: usize,
    zeros: usize,
}

impl Read for Hostile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos < self.head.len() {
            let n = buf.len().min(self.head.len() - self.pos);
            buf[..n].copy_from_slice(&self.head[self.pos..self.pos + n]);
            self.pos += n;
            return Ok(n);
        }
        let n = buf.len().min(self.zeros).min(8192);
        buf[..n].fill(0);
        self.zeros -= n;
        Ok(n)
    }
}

fn hostile(len: u32, zeros: usize) -> Hostile {
    Hostile {
        head: len.to_le_bytes().to_vec(),
        pos: 0,
        zeros,
    }
}

#[test]
fn a_hostile_length_allocates_nothing_and_a_lying_one_only_what_arrived() {
    const KIB: usize = 1 << 10;
    // 4 GiB announced: refused before any allocation, at either cap
    for cap in [MAX_HANDSHAKE_FRAME, MAX_FRAME] {
        let (r, peak) = peak_of(|| {
            let mut r = FrameReader::new(hostile(u32::MAX, 1 << 20));
            r.set_cap(cap);
            r.read_body()
        });
        assert!(matches!(r, Err(FrameError::TooLarge { .. })));
        assert!(peak < KIB, "{peak} bytes for a refused length");
    }
    // before authentication, a frame just above the handshake cap is refused too
    let (r, peak) =
        peak_of(|| FrameReader::new(hostile(MAX_HANDSHAKE_FRAME as u32 + 1, 1 << 20)).read_body());
    assert!(matches!(r, Err(FrameError::TooLarge { .. })));
    assert!(peak < KIB);
    // the largest frame announced, 1 MiB sent, then the connection closes: what is held is
    // about what arrived (the buffer at most doubles ahead of the bytes), not the 64 MiB
    let (r, peak) = peak_of(|| {
        let mut r = FrameReader::new(hostile(MAX_FRAME as u32, 1 << 20));
        r.set_cap(MAX_FRAME);
        r.read_body()
    });
    assert!(matches!(r, Err(FrameError::Truncated { .. })));
    assert!(
        peak <= 2 * (1 << 20) + 128 * KIB,
        "{peak} bytes for 1 MiB received"
    );
    // a frame of exactly the cap, all sent: never more than the cap (plus the reader's
    // bookkeeping)
    let (r, peak) = peak_of(|| {
        let mut r = FrameReader::new(hostile(MAX_FRAME as u32, MAX_FRAME));
        r.set_cap(MAX_FRAME);
        r.read_body().map(|b| b.len())
    });
    assert_eq!(r.unwrap(), MAX_FRAME);
    assert!(
        peak <= MAX_FRAME + KIB,
        "{peak} bytes for a frame of {MAX_FRAME}"
    );
    // a length below the smallest frame is refused, nothing allocated
    let (r, peak) = peak_of(|| FrameReader::new(hostile(MIN_BODY as u32 - 1, 100)).read_body());
    assert!(matches!(r, Err(FrameError::TooShort { .. })));
    assert!(peak < KIB);
}
