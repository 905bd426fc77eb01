//! Two captures read concurrently and handed out in capture-time order.
//!
//! Each capture is read, dissected and identified by a thread of its own, which hands batches of
//! records through a bounded channel (so a fast reader never runs more than a few batches ahead:
//! memory does not follow the capture length). [`LockStep::next_event`] hands out the batch whose
//! newest record is older, so the two streams advance together in capture time, which is what
//! lets the pipeline close intervals and resolve packets as the streams pass them.
//!
//! **Ends are exact.** A batch is handed out only when every record in it is at most as new as
//! a record the other capture has handed out or holds ready — or once the other capture has
//! ended, and then after its end. So no record later than the shorter capture's end reaches the
//! consumer before that end is known: a consumer that trims what only one point could have seen
//! (the lead-out of a capture that ran longer) trims exactly, not up to a batch too late. For a
//! regular file the other reader is waited for as long as it takes (it always gets on); for a
//! FIFO or standard input only a moment (20 ms), since its writer may be blocked writing the
//! other pipe, which only this side's consumption frees.
//!
//! A source is a file path, a FIFO, or standard input (`-`): nothing here seeks.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use owl_core::PacketRecord;

use crate::capture::{CaptureError, CaptureReader, InterfaceInfo};
use crate::identity::{
    MIN_IDENTITY_BYTES, common_identity_bytes, identity_bytes, link_header_bytes,
};
use crate::records::{InputStats, ReadOptions, RecordReader};

/// Records per batch.
pub const BATCH: usize = 4096;
/// Batches a reader may run ahead of the consumer.
const AHEAD: usize = 4;

/// Where a capture comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Path(PathBuf),
    Stdin,
}

impl Source {
    /// `-` is standard input; anything else a path (a file or a FIFO).
    pub fn parse(s: &Path) -> Source {
        if s.as_os_str() == "-" {
            Source::Stdin
        } else {
            Source::Path(s.to_path_buf())
        }
    }

    pub fn name(&self) -> String {
        match self {
            Source::Path(p) => p.display().to_string(),
            Source::Stdin => "standard input".into(),
        }
    }

    /// Size in bytes for progress, when the source is a regular file.
    pub fn size(&self) -> Option<u64> {
        match self {
            Source::Path(p) => std::fs::metadata(p)
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len()),
            Source::Stdin => None,
        }
    }

    /// Open it as a byte stream (blocks on a FIFO until a writer opens it).
    pub fn open(&self) -> Result<Box<dyn Read + Send>, CaptureError> {
        match self {
            Source::Path(p) => {
                if p.is_dir() {
                    return Err(CaptureError::Io(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "is a directory, not a capture",
                    )));
                }
                Ok(Box::new(File::open(p)?))
            }
            Source::Stdin => Ok(Box::new(std::io::stdin())),
        }
    }
}

/// How one capture ended.
#[derive(Debug)]
pub struct End {
    pub stats: InputStats,
    pub bytes_read: u64,
    /// The truncation that ended the capture early, when it was allowed.
    pub truncated: Option<String>,
    /// The error that ended it (truncation included when not allowed).
    pub error: Option<CaptureError>,
}

// An end comes once per capture: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Msg {
    Batch(Vec<PacketRecord>, u64),
    End(End),
}

/// Something that happened on one of the two captures.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // (an end comes once per capture)
pub enum Event {
    /// A batch of side `0` (sender) or `1` (receiver), with the bytes read so far.
    Batch(usize, Vec<PacketRecord>, u64),
    /// Side `n` ended.
    End(usize, End),
}

/// How long a reader waits for the other capture's interface before it identifies on every
/// byte it captured (a FIFO whose writer has not started yet).
const SNAPLEN_PATIENCE: Duration = Duration::from_secs(2);

/// The two readers' agreement on the bytes of each IP packet both captures hold.
///
/// Each reader publishes the interface it measures (link type and snaplen) once it has read
/// its first packet; the first to decide (both known, or its patience over) fixes the decision
/// for both: when the two keep different numbers of IP bytes of a long packet (different
/// snaplens, or link headers of different lengths at the same snaplen), both identify every
/// packet on the IP bytes both keep ([`common_identity_bytes`]), so a packet longer than that
/// has the same identity at both points.
#[derive(Default)]
struct Agreement {
    /// Per side: `None` until published, then the interface (`None` inside: no packet).
    interfaces: Mutex<[Option<Option<InterfaceInfo>>; 2]>,
    published: Condvar,
    decision: std::sync::OnceLock<Option<u32>>,
}

impl Agreement {
    fn decide(&self, k: usize, interface: Option<InterfaceInfo>) -> Option<u32> {
        let mut st = self.interfaces.lock().unwrap_or_else(|e| e.into_inner());
        st[k] = Some(interface);
        self.published.notify_all();
        let deadline = Instant::now() + SNAPLEN_PATIENCE;
        while st[1 - k].is_none() && self.decision.get().is_none() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = self
                .published
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let d = *self.decision.get_or_init(|| match (st[0], st[1]) {
            (Some(Some(a)), Some(Some(b)))
                if identity_bytes(a.snaplen, a.linktype)
                    != identity_bytes(b.snaplen, b.linktype) =>
            {
                common_identity_bytes(a, b)
            }
            _ => None,
        });
        self.published.notify_all();
        d
    }
}

/// Read one source in a thread of its own.
fn spawn(
    src: Source,
    options: ReadOptions,
    allow_truncated: bool,
    agreement: Option<(usize, Arc<Agreement>)>,
    tx: SyncSender<Msg>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let end = |stats, bytes_read, truncated, error| End {
            stats,
            bytes_read,
            truncated,
            error,
        };
        let opened = src
            .open()
            .and_then(CaptureReader::new)
            .and_then(|r| RecordReader::with_options(r, &options));
        let mut rr = match opened {
            Ok(r) => r,
            Err(e) => {
                if let Some((k, a)) = &agreement {
                    a.decide(*k, None);
                }
                // a capture cut before its first record ends with no packets, like any other
                let m = if e.is_truncation() && allow_truncated {
                    end(InputStats::default(), 0, Some(e.to_string()), None)
                } else {
                    end(InputStats::default(), 0, None, Some(e))
                };
                let _ = tx.send(Msg::End(m));
                return;
            }
        };
        if let Some((k, a)) = &agreement {
            match rr.first_interface() {
                Ok(interface) => {
                    let d = a.decide(*k, interface);
                    // the capture that sets a limit too low to tell packets apart says so
                    if let (Some(n), Some(i)) = (d, interface)
                        && n < MIN_IDENTITY_BYTES
                        && identity_bytes(i.snaplen, i.linktype) == Some(n)
                    {
                        let e = CaptureError::TooFewIdentityBytes {
                            snaplen: i.snaplen,
                            linktype: crate::dissect::linktype_name(i.linktype),
                            header: link_header_bytes(i.linktype),
                            kept: n,
                            min: MIN_IDENTITY_BYTES,
                        };
                        let _ = tx.send(Msg::End(end(rr.stats(), rr.bytes_read(), None, Some(e))));
                        return;
                    }
                    rr.set_identity_bytes(d)
                }
                Err(e) => {
                    a.decide(*k, None);
                    let m = if e.is_truncation() && allow_truncated {
                        end(rr.stats(), rr.bytes_read(), Some(e.to_string()), None)
                    } else {
                        end(rr.stats(), rr.bytes_read(), None, Some(e))
                    };
                    let _ = tx.send(Msg::End(m));
                    return;
                }
            }
        }
        loop {
            let mut batch = Vec::with_capacity(BATCH);
            match rr.next_batch(&mut batch, BATCH) {
                Ok(0) => {
                    let _ = tx.send(Msg::End(end(rr.stats(), rr.bytes_read(), None, None)));
                    return;
                }
                Ok(_) => {
                    if tx.send(Msg::Batch(batch, rr.bytes_read())).is_err() {
                        return; // the consumer has gone
                    }
                }
                Err(e) => {
                    // the complete records before the error are in `batch`
                    if !batch.is_empty() && tx.send(Msg::Batch(batch, rr.bytes_read())).is_err() {
                        return;
                    }
                    let m = if e.is_truncation() && allow_truncated {
                        end(rr.stats(), rr.bytes_read(), Some(e.to_string()), None)
                    } else {
                        end(rr.stats(), rr.bytes_read(), None, Some(e))
                    };
                    let _ = tx.send(Msg::End(m));
                    return;
                }
            }
        }
    })
}

/// Two captures in lock-step; see the module doc.
pub struct LockStep {
    rx: [Option<Receiver<Msg>>; 2],
    peeked: [Option<Msg>; 2],
    /// Newest timestamp handed out per side.
    handed: [Option<u64>; 2],
    /// Per side: a regular file, whose reader can be waited for without limit.
    regular: [bool; 2],
    threads: Vec<JoinHandle<()>>,
    /// Per side: applied to each batch as it arrives, before any ordering.
    maps: [Option<RecordMap>; 2],
}

/// A rewrite of a side's records as they arrive ([`LockStep::map_side`]).
pub type RecordMap = Box<dyn FnMut(&mut [PacketRecord]) + Send>;

impl LockStep {
    /// Start reading `sources[0]` (the sender) and `sources[1]` (the receiver).
    pub fn start(sources: [Source; 2], identity_seed: u64, allow_truncated: bool) -> LockStep {
        let o = ReadOptions::with_seed(identity_seed);
        LockStep::start_with(sources, [o, o], allow_truncated, false)
    }

    /// [`start`](Self::start) with reading options for each side (the identity fields must be
    /// the same at both), and with `agree` identify both captures on the IP bytes both hold
    /// (the identity byte limit of the options is then replaced): when they keep different
    /// numbers of bytes of a long packet, every packet on the IP bytes both keep (each side's
    /// [`InputStats::identity_bytes`] says the limit taken; a reader waits up to two seconds
    /// for the other's first packet).
    pub fn start_with(
        sources: [Source; 2],
        options: [ReadOptions; 2],
        allow_truncated: bool,
        agree: bool,
    ) -> LockStep {
        let mut rx = [None, None];
        let regular = [sources[0].size().is_some(), sources[1].size().is_some()];
        let mut threads = Vec::new();
        let agreement = agree.then(|| Arc::new(Agreement::default()));
        for (k, (src, o)) in sources.into_iter().zip(options).enumerate() {
            let (tx, r) = sync_channel(AHEAD);
            let a = agreement.as_ref().map(|a| (k, Arc::clone(a)));
            threads.push(spawn(src, o, allow_truncated, a, tx));
            rx[k] = Some(r);
        }
        LockStep {
            rx,
            peeked: [None, None],
            handed: [None, None],
            regular,
            threads,
            maps: [None, None],
        }
    }

    /// Rewrite every record of side `k` as its batch arrives, before the batches are ordered
    /// (`owl compare --clock correct`: R's timestamps on S's clock); set before the first
    /// event.
    pub fn map_side(&mut self, k: usize, f: RecordMap) {
        self.maps[k] = Some(f);
    }

    fn arrived(&mut self, k: usize, mut m: Msg) -> Msg {
        if let (Msg::Batch(b, _), Some(f)) = (&mut m, self.maps[k].as_mut()) {
            f(b);
        }
        m
    }

    fn stopped() -> Msg {
        Msg::End(End {
            stats: InputStats::default(),
            bytes_read: 0,
            truncated: None,
            error: Some(CaptureError::Io(std::io::Error::other(
                "the reader thread stopped",
            ))),
        })
    }

    /// Take what side `k` has ready, without waiting.
    fn try_peek(&mut self, k: usize) {
        if self.peeked[k].is_none()
            && let Some(rx) = &self.rx[k]
        {
            match rx.try_recv() {
                Ok(m) => self.peeked[k] = Some(self.arrived(k, m)),
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => self.peeked[k] = Some(Self::stopped()),
            }
        }
    }

    /// Wait up to `d` for side `k`; true if something came.
    fn wait(&mut self, k: usize, d: Duration) -> bool {
        let Some(rx) = &self.rx[k] else { return false };
        match rx.recv_timeout(d) {
            Ok(m) => self.peeked[k] = Some(self.arrived(k, m)),
            Err(RecvTimeoutError::Timeout) => return false,
            Err(RecvTimeoutError::Disconnected) => self.peeked[k] = Some(Self::stopped()),
        }
        true
    }

    fn take(&mut self, k: usize) -> Option<Event> {
        match self.peeked[k].take()? {
            Msg::Batch(b, bytes) => {
                self.handed[k] = self.handed[k].max(newest(&b));
                Some(Event::Batch(k, b, bytes))
            }
            Msg::End(e) => {
                self.rx[k] = None;
                Some(Event::End(k, e))
            }
        }
    }

    /// Each capture's first batch, before any event is handed out (they stay first in line):
    /// where each capture starts, and which packets both start with. A side with nothing ready
    /// is waited for up to `patience` (a FIFO whose writer has not started): `None` for it
    /// then, and for a side that ended without a record.
    pub fn first_batches(&mut self, patience: Duration) -> [Option<&[PacketRecord]>; 2] {
        let deadline = Instant::now() + patience;
        for k in 0..2 {
            self.try_peek(k);
            if self.peeked[k].is_none() {
                self.wait(k, deadline.saturating_duration_since(Instant::now()));
            }
        }
        let [a, b] = &self.peeked;
        [a, b].map(|m| match m {
            Some(Msg::Batch(b, _)) if !b.is_empty() => Some(b.as_slice()),
            _ => None,
        })
    }

    /// The next event, the batch whose newest record is older first; `None` once both
    /// captures ended.
    ///
    /// A batch newer than anything the other side has handed out waits for the other side's
    /// next batch or end (see the module doc: ends are exact). A regular file is waited for as
    /// long as it takes; a FIFO or standard input a moment, then passed over: two FIFOs
    /// written in capture-time order must not deadlock because one side's reader still waits
    /// for a whole batch (a sparse receiver under heavy loss) while the other's pipe is full.
    /// Only there can a batch reach past the other capture's end before that end is known.
    pub fn next_event(&mut self) -> Option<Event> {
        const PATIENCE: Duration = Duration::from_millis(20);
        let newest_of = |m: &Option<Msg>| match m {
            Some(Msg::Batch(b, _)) => newest(b),
            _ => None,
        };
        loop {
            self.try_peek(0);
            self.try_peek(1);
            for k in 0..2 {
                if matches!(self.peeked[k], Some(Msg::End(_))) {
                    return self.take(k);
                }
            }
            let live = [self.rx[0].is_some(), self.rx[1].is_some()];
            if !live[0] && !live[1] {
                return None;
            }
            match (self.peeked[0].is_some(), self.peeked[1].is_some()) {
                (true, true) => {
                    let k = usize::from(newest_of(&self.peeked[1]) < newest_of(&self.peeked[0]));
                    return self.take(k);
                }
                (true, false) | (false, true) => {
                    let k = usize::from(self.peeked[1].is_some());
                    let o = 1 - k;
                    // no record newer than what the other side has shown, or it has ended
                    if !live[o] || self.handed[o] >= newest_of(&self.peeked[k]) {
                        return self.take(k);
                    }
                    if self.wait(o, PATIENCE) || self.regular[o] {
                        continue;
                    }
                    return self.take(k);
                }
                (false, false) => {
                    // wait on the side that is behind (the other if it has ended)
                    let mut k = usize::from(self.handed[1] < self.handed[0]);
                    if !live[k] {
                        k = 1 - k;
                    }
                    self.wait(k, PATIENCE);
                }
            }
        }
    }
}

/// The newest timestamp of a batch (captures are nearly, not exactly, in timestamp order).
fn newest(b: &[PacketRecord]) -> Option<u64> {
    b.iter().map(|r| r.ts_ns).max()
}

impl Drop for LockStep {
    fn drop(&mut self) {
        // Close the channels so that blocked readers stop, then wait for them. A reader still
        // blocked opening a FIFO nobody writes to is left to the process exit.
        self.rx = [None, None];
        self.peeked = [None, None];
        for t in self.threads.drain(..) {
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}
