//! Segments, groups and the two points' synopses (§II, §IV-B), with their payloads.
//!
//! # Segments
//!
//! Both points cut their packets into the same segments without talking: each measurement
//! interval is cut again at every **delimiter packet**, a packet whose identity has its top `b`
//! bits zero (about one packet in `2^b`). A segment is keyed by the low 32 bits of the identity
//! of the delimiter that opens it (the delimiter is its first packet); the packets of an
//! interval before its first delimiter form the segment with no key. Within a segment a
//! packet's group is a hash of its identity into `g` groups, and its position `j` is its rank
//! in its group in the point's own order (sending order at S, arrival order at R).
//!
//! What §II leaves to the reader — a delimiter lost, or reordered across the boundary it makes:
//!
//! - **lost**: R never opens its segment, so R's segment before it holds the packets of both.
//!   The receiver finds S's key missing among its own and splits its merged segment group by
//!   group: the first part takes about as many packets as S's first tuple counts (within the
//!   error budget either way), and both parts must check against their tuples. The paper
//!   discards the segment instead (§II: "If a delimiter packet is lost, we discard the
//!   corresponding segment"); owl recovers it when the errors allow.
//! - **reordered**: a packet sent before the delimiter but arriving after it sits in the next
//!   segment at R (an insertion there, a loss in its own), and conversely. Both segments are
//!   recovered with one error each; the packet's solved augmented hash in the segment that lost
//!   it then matches it among the next segment's insertions (`Hash(id ++ q)` equal to the solved
//!   `h_q`), and it gets its delay back. The same holds for a packet delayed past several
//!   segments: the lost position it left is matched with the insertion it became.
//! - **not a delimiter at S**: a packet R sees that S did not (in flight from the previous
//!   interval, or traffic S never saw) and whose key S does not know opens no segment at R: its
//!   packets are merged back into the segment before it.
//!
//! A clock-delimited interval boundary is no such agreement: the packets in flight across it
//! are in S's last segment of interval `i` and R's first segment of interval `i + 1`. Those two
//! segments see them as losses and insertions, and are recovered only when they fit the error
//! budget; `--interval 0` (one interval over the whole capture, owl's default) or intervals long
//! against the delay keep the effect small, and every unrecovered group is reported.
//!
//! # Payloads
//!
//! Sender (what travels: the OPA tuples and the compressed timestamps), tag `OPA2`:
//!
//! ```text
//! "OPA2" | u8 codec (0 lossless, 1 wavelet) | u32 g | u8 k | u32 segments
//! | per segment: u8 keyed, [u32 key] | per group: varint w, k(w) × u64 B (each < 2⁶¹ − 1)
//! | u32 len, len bytes of timestamp stream (every group's w timestamps, segment by segment)
//! | wavelet only: u64 packets, f64 Σ|e|, f64 Σe, u64 max |e| (the sender's timestamp error)
//! | labels > 0 only: ⌈packets·labels/8⌉ bytes, each packet's label in the timestamps' order,
//!   least significant bit first
//! ```
//!
//! `k` is the configuration's least number of rows, `k(w) ≥ k` the rows of a group of `w`
//! packets at the design loss rate ([`Config::rows_for`]; `k` itself when it is 0). (`OPA1`, the
//! tag before groups were sized, had `k` rows in every group.)
//!
//! Receiver (its local state, kept for the estimate), tag `OPR1`:
//!
//! ```text
//! "OPR1" | u32 g | u32 segments | per segment: u8 keyed, [u32 key] | per group: varint n,
//! n × u64 identity | u32 len, len bytes of the groups' arrival times (lossless stream)
//! ```

use std::sync::{Arc, Mutex};

use crate::hash::{HashFamily, HashFn, reduce};
use crate::method::TypedSynopsis;
use crate::record::PacketRecord;
use crate::wire::{DecodeError, WireReader, WireWriter};

use super::cah::{self, Cah, MAX_ROWS, P};
use super::config::Config;
use super::method::PairRecovery;
use super::timestamps::{self, Codec, CodecError, Encoder};

pub const SENDER_TAG: &[u8; 4] = b"OPA2";
pub const RECEIVER_TAG: &[u8; 4] = b"OPR1";

/// Timestamps a sender payload may announce per byte of payload (a lossless stream of a
/// constant rate takes about a quarter of a bit per packet; the wavelet at its smallest ratio
/// a tenth of a byte): a larger count is forged, and is refused before anything is allocated.
pub const MAX_PACKETS_PER_BYTE: u64 = 128;

/// A segment's key: the low 32 bits of its delimiter's identity, `None` for the interval's
/// first segment.
pub type Key = Option<u32>;

/// The OPA of one group: `(B, w)` (§IV-B).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuple {
    pub w: u32,
    pub b: Cah,
}

/// One segment's tuples at the sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SenderSegment {
    pub key: Key,
    pub tuples: Vec<Tuple>,
}

/// What the sender sends: its segments' tuples and the timestamp stream.
#[derive(Clone, Debug, PartialEq)]
pub struct SenderWire {
    pub segments: Vec<SenderSegment>,
    pub stream: Vec<u8>,
    pub error: CodecError,
    /// Each packet's label, packed, in the order of the timestamps.
    pub labels: Vec<u8>,
}

impl SenderWire {
    /// Bytes of the OPA tuples (and segment keys), of the timestamp stream, of the labels.
    pub fn split_bytes(&self, cfg: &Config) -> (u64, u64, u64) {
        let mut t = 0u64;
        for s in &self.segments {
            t += 1 + 4 * s.key.is_some() as u64;
            for g in &s.tuples {
                t += varint_len(g.w as u64) as u64 + 8 * cfg.rows_for(g.w) as u64;
            }
        }
        (t, self.stream.len() as u64, self.labels.len() as u64)
    }

    /// Every group's labels (position order), segment by segment.
    pub fn labels(&self, cfg: &Config) -> Vec<Vec<u8>> {
        let mut bit = 0usize;
        let b = cfg.labels as usize;
        let mut out = Vec::new();
        for s in &self.segments {
            for t in &s.tuples {
                let mut v = Vec::with_capacity(if b == 0 { 0 } else { t.w as usize });
                for _ in 0..if b == 0 { 0 } else { t.w } {
                    let mut l = 0u8;
                    for k in 0..b {
                        let at = bit + k;
                        let byte = self.labels.get(at / 8).copied().unwrap_or(0);
                        l |= ((byte >> (at % 8)) & 1) << k;
                    }
                    bit += b;
                    v.push(l);
                }
                out.push(v);
            }
        }
        out
    }

    pub fn packets(&self) -> u64 {
        self.segments
            .iter()
            .flat_map(|s| &s.tuples)
            .map(|t| t.w as u64)
            .sum()
    }
}

/// The packet's hash every group and augmented hash derives from.
fn packet_hash(seed: u64) -> HashFn {
    HashFamily::new(seed).member(0x004f_5041)
}

/// The sender point: the count of every group of every segment (the last one open), and every
/// packet's hash and timestamp (and group) in sending order. When the synopsis is sent (`wire`,
/// kept until the next packet) each group's CAH is computed with the rows its final count
/// asks for, and the timestamps are compressed: recording is a count and two pushes.
#[derive(Clone, Debug)]
pub struct Sender {
    pub(crate) cfg: Arc<Config>,
    h: HashFn,
    /// Every segment's tuples; the last is open.
    segments: Vec<SenderSegment>,
    /// Index in `ts` of each segment's first packet.
    starts: Vec<usize>,
    ts: Vec<u64>,
    /// Each packet's hash (its augmented hashes derive from it).
    xs: Vec<u64>,
    /// Each packet's group (only with more than one group).
    grp: Vec<u32>,
    wire: std::sync::OnceLock<SenderWire>,
    /// A decoded payload: what travelled, as it travelled.
    decoded: Option<SenderWire>,
}

impl Sender {
    pub fn new(cfg: Arc<Config>) -> Sender {
        Sender {
            h: packet_hash(cfg.seed),
            segments: vec![Self::segment(&cfg, None)],
            starts: vec![0],
            ts: Vec::new(),
            xs: Vec::new(),
            grp: Vec::new(),
            wire: std::sync::OnceLock::new(),
            decoded: None,
            cfg,
        }
    }

    fn segment(cfg: &Config, key: Key) -> SenderSegment {
        SenderSegment {
            key,
            tuples: vec![
                Tuple {
                    w: 0,
                    b: [0; MAX_ROWS]
                };
                cfg.groups as usize
            ],
        }
    }

    /// Record one packet: its group's count, its hash, its timestamp.
    #[inline]
    pub fn record_packet(&mut self, id: u64, ts: u64) {
        if self.wire.get().is_some() {
            self.wire = std::sync::OnceLock::new();
        }
        if self.cfg.is_delimiter(id) {
            self.segments
                .push(Self::segment(&self.cfg, Some(id as u32)));
            self.starts.push(self.ts.len());
        }
        let x = self.h.hash(id);
        let seg = self.segments.last_mut().expect("a segment is open");
        let g = if seg.tuples.len() == 1 {
            0
        } else {
            let g = reduce(x, seg.tuples.len());
            self.grp.push(g as u32);
            g
        };
        let t = &mut seg.tuples[g];
        t.w = t.w.wrapping_add(1);
        self.xs.push(x);
        self.ts.push(ts);
    }

    /// What this point sends: the tuples, and every group's timestamps compressed.
    pub fn wire(&self) -> SenderWire {
        if let Some(w) = &self.decoded {
            return w.clone();
        }
        self.wire
            .get_or_init(|| {
                let mut enc = Encoder::new(self.cfg.codec);
                let g = self.cfg.groups as usize;
                let mut seq: Vec<Vec<u64>> = vec![Vec::new(); g];
                let lb = self.cfg.labels as usize;
                let mut labels = vec![0u8; (self.ts.len() * lb).div_ceil(8)];
                let mut bit = 0usize;
                let mut push_label = |x: u64| {
                    let l = self.cfg.label(x);
                    for k in 0..lb {
                        labels[(bit + k) / 8] |= ((l >> k) & 1) << ((bit + k) % 8);
                    }
                    bit += lb;
                };
                let mut lseq: Vec<Vec<u64>> = vec![Vec::new(); g];
                let mut segments = self.segments.clone();
                let mut pos = vec![0u64; g];
                for (k, seg) in segments.iter_mut().enumerate() {
                    let a = self.starts[k];
                    let b = self.starts.get(k + 1).copied().unwrap_or(self.ts.len());
                    // the CAH of each group (Eq. 1), with the rows its count asks for
                    let rows: Vec<usize> =
                        seg.tuples.iter().map(|t| self.cfg.rows_for(t.w)).collect();
                    pos.fill(0);
                    for i in a..b {
                        let gi = if g == 1 { 0 } else { self.grp[i] as usize };
                        pos[gi] += 1;
                        let j = pos[gi];
                        let x = self.xs[i];
                        cah::accumulate(&mut seg.tuples[gi].b, rows[gi], j, cah::augmented(x, j));
                    }
                    if g == 1 {
                        enc.sequence(&self.ts[a..b]);
                        if lb > 0 {
                            self.xs[a..b].iter().for_each(|&x| push_label(x));
                        }
                        continue;
                    }
                    for s in seq.iter_mut().chain(lseq.iter_mut()) {
                        s.clear();
                    }
                    for i in a..b {
                        seq[self.grp[i] as usize].push(self.ts[i]);
                        lseq[self.grp[i] as usize].push(self.xs[i]);
                    }
                    for s in &seq {
                        enc.sequence(s);
                    }
                    if lb > 0 {
                        lseq.iter().flatten().for_each(|&x| push_label(x));
                    }
                }
                SenderWire {
                    segments,
                    stream: enc.bytes(),
                    error: enc.error(),
                    labels,
                }
            })
            .clone()
    }

    pub fn decode(cfg: Arc<Config>, b: &[u8]) -> Result<Sender, DecodeError> {
        let mut r = WireReader::new(b);
        if r.take(4, "tag")? != SENDER_TAG {
            return Err(r.invalid("not an OPA sender payload (tag OPA2)"));
        }
        let codec = r.u8("codec")?;
        let want = match cfg.codec {
            Codec::Lossless => 0,
            Codec::Wavelet { .. } => 1,
        };
        if codec != want {
            return Err(r.invalid(format!(
                "timestamp codec {codec}, the configuration says {want}"
            )));
        }
        let g = r.u32("groups")?;
        if g != cfg.groups {
            return Err(r.invalid(format!("{g} groups, the configuration says {}", cfg.groups)));
        }
        let k = r.u8("rows")? as u32;
        if k != cfg.rows {
            return Err(r.invalid(format!("{k} rows, the configuration says {}", cfg.rows)));
        }
        let nseg = r.u32("segment count")? as usize;
        let per_seg = 1 + g as usize * (1 + 8 * k as usize);
        if nseg.saturating_mul(per_seg) > r.remaining() {
            return Err(r.invalid(format!(
                "{nseg} segments do not fit the {} bytes that follow",
                r.remaining()
            )));
        }
        let most = MAX_PACKETS_PER_BYTE * b.len() as u64 + 4096;
        let mut packets = 0u64;
        let mut segments = Vec::with_capacity(nseg);
        for _ in 0..nseg {
            let key = read_key(&mut r)?;
            let mut tuples = Vec::with_capacity(g as usize);
            for _ in 0..g {
                let w = read_varint(&mut r, "group size")?;
                let w = u32::try_from(w).map_err(|_| r.invalid(format!("group size {w}")))?;
                packets += w as u64;
                if packets > most {
                    return Err(r.invalid(format!(
                        "more than {most} packets announced in a {}-byte payload",
                        b.len()
                    )));
                }
                let mut bb = [0u64; MAX_ROWS];
                for v in bb.iter_mut().take(cfg.rows_for(w)) {
                    *v = r.u64("CAH")?;
                    if *v >= P {
                        return Err(r.invalid("CAH value outside the field"));
                    }
                }
                tuples.push(Tuple { w, b: bb });
            }
            segments.push(SenderSegment { key, tuples });
        }
        let n = r.u32("timestamp stream length")? as usize;
        let stream = r.take(n, "timestamp stream")?.to_vec();
        let mut error = CodecError::default();
        if let Codec::Wavelet { .. } = cfg.codec {
            error.packets = r.u64("error count")?;
            error.sum_abs_ns = r.f64("error sum")?;
            error.sum_ns = r.f64("error sum")?;
            error.max_abs_ns = r.u64("error max")?;
        }
        let nl = (packets as usize)
            .checked_mul(cfg.labels as usize)
            .map(|b| b.div_ceil(8))
            .ok_or_else(|| r.invalid("label count"))?;
        let labels = r.take(nl, "labels")?.to_vec();
        r.finish("OPA sender payload")?;
        let mut s = Sender::new(cfg);
        s.decoded = Some(SenderWire {
            segments,
            stream,
            error,
            labels,
        });
        Ok(s)
    }

    fn write(&self, out: &mut Vec<u8>) {
        let wire = self.wire();
        let mut w = WireWriter::new(out);
        w.bytes(SENDER_TAG);
        w.u8(matches!(self.cfg.codec, Codec::Wavelet { .. }) as u8);
        w.u32(self.cfg.groups);
        w.u8(self.cfg.rows as u8);
        w.u32(wire.segments.len() as u32);
        for s in &wire.segments {
            write_key(&mut w, s.key);
            for t in &s.tuples {
                write_varint(&mut w, t.w as u64);
                for &v in &t.b[..self.cfg.rows_for(t.w)] {
                    w.u64(v);
                }
            }
        }
        w.u32(wire.stream.len() as u32);
        w.bytes(&wire.stream);
        if let Codec::Wavelet { .. } = self.cfg.codec {
            w.u64(wire.error.packets);
            w.f64(wire.error.sum_abs_ns);
            w.f64(wire.error.sum_ns);
            w.u64(wire.error.max_abs_ns);
        }
        w.bytes(&wire.labels);
    }
}

impl TypedSynopsis for Sender {
    const METHOD: &'static str = "opa";
    fn record(&mut self, rec: &PacketRecord) {
        self.record_packet(rec.id, rec.ts_ns);
    }
    fn record_batch(&mut self, recs: &[PacketRecord]) {
        self.ts.reserve(recs.len());
        self.xs.reserve(recs.len());
        for r in recs {
            self.record_packet(r.id, r.ts_ns);
        }
    }
    fn encoded_len(&self) -> usize {
        let mut b = Vec::new();
        self.write(&mut b);
        b.len()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        self.write(out);
    }
    /// `later`'s packets appended to this point's, in sending order: its packets before its
    /// first delimiter continue this point's open segment (each group's count grows, and
    /// their positions follow this point's in the group), its delimiters open the same
    /// segments after it. The CAHs and the timestamp stream are computed from the packets
    /// when the payload is written, so the merged payload is the one of both streams, the
    /// codec's whatever it is.
    ///
    /// That needs the packets' hashes and exact timestamps, which only a recording point
    /// holds: a decoded payload carries CAHs whose augmented hashes are `Hash(identity ++ j)`
    /// for its own positions `j`, which shift when its first segment continues another's,
    /// and (wavelet) timestamps it no longer has exactly. So merging a decoded point is
    /// refused with an error saying so, unless one side holds no packet (an empty `later`
    /// changes nothing; an empty point becomes a recording `later`).
    fn merge(&mut self, later: Sender) -> Result<(), crate::method::MethodError> {
        Config::check_pair(&self.cfg, &later.cfg).map_err(crate::method::as_merge)?;
        let empty = |s: &Sender| match &s.decoded {
            Some(w) => w.packets() == 0,
            None => s.ts.is_empty(),
        };
        if empty(&later) {
            return Ok(());
        }
        if empty(self) && later.decoded.is_none() {
            *self = later;
            return Ok(());
        }
        if self.decoded.is_some() || later.decoded.is_some() {
            return Err(crate::method::MethodError::Invalid(
                "opa: a decoded sender payload holds its groups' CAHs at its own positions and its timestamps compressed, not its packets' hashes: it cannot continue another sender's segment (merge the recording points, or the receivers)".into(),
            ));
        }
        self.wire = std::sync::OnceLock::new();
        let base = self.ts.len();
        let mut segments = later.segments.into_iter();
        if let (Some(first), Some(open)) = (segments.next(), self.segments.last_mut()) {
            for (t, l) in open.tuples.iter_mut().zip(&first.tuples) {
                t.w = t.w.wrapping_add(l.w);
            }
        }
        self.segments.extend(segments);
        self.starts
            .extend(later.starts.iter().skip(1).map(|&s| s + base));
        self.ts.extend(later.ts);
        self.xs.extend(later.xs);
        self.grp.extend(later.grp);
        Ok(())
    }
}

/// One segment at the receiver: each group's packets `(identity, arrival time)` in arrival
/// order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceiverSegment {
    pub key: Key,
    pub groups: Vec<Vec<(u64, u64)>>,
}

/// The receiver point: every packet of the interval, by segment and group, in arrival order
/// (its local state: the receiving timestamps Algorithm 2 needs, §V-C).
#[derive(Clone, Debug)]
pub struct Receiver {
    pub(crate) cfg: Arc<Config>,
    h: HashFn,
    pub segments: Vec<ReceiverSegment>,
    pub(crate) cache: RecoveryCache,
}

/// The last recovery of this receiver, by a fingerprint of the sender payload it was paired
/// with (never written, never cloned).
#[derive(Default)]
pub(crate) struct RecoveryCache(Mutex<Option<(u64, Arc<PairRecovery>)>>);

impl RecoveryCache {
    pub(crate) fn get(&self, print: u64) -> Option<Arc<PairRecovery>> {
        let g = self.0.lock().ok()?;
        g.as_ref().filter(|c| c.0 == print).map(|c| c.1.clone())
    }
    pub(crate) fn put(&self, print: u64, rec: Arc<PairRecovery>) {
        if let Ok(mut g) = self.0.lock() {
            *g = Some((print, rec));
        }
    }
}

impl Clone for RecoveryCache {
    fn clone(&self) -> Self {
        RecoveryCache::default()
    }
}

impl std::fmt::Debug for RecoveryCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecoveryCache")
    }
}

impl Receiver {
    pub fn new(cfg: Arc<Config>) -> Receiver {
        Receiver {
            h: packet_hash(cfg.seed),
            segments: vec![ReceiverSegment {
                key: None,
                groups: vec![Vec::new(); cfg.groups as usize],
            }],
            cache: RecoveryCache::default(),
            cfg,
        }
    }

    /// The hash a packet's group and augmented hashes derive from (the sender's).
    pub fn packet_hash(&self, id: u64) -> u64 {
        self.h.hash(id)
    }

    #[inline]
    pub fn record_packet(&mut self, id: u64, ts: u64) {
        if self.cfg.is_delimiter(id) {
            self.segments.push(ReceiverSegment {
                key: Some(id as u32),
                groups: vec![Vec::new(); self.cfg.groups as usize],
            });
        }
        let g = reduce(self.h.hash(id), self.cfg.groups as usize);
        if let Some(s) = self.segments.last_mut() {
            s.groups[g].push((id, ts));
        }
    }

    pub fn packets(&self) -> u64 {
        self.segments
            .iter()
            .flat_map(|s| &s.groups)
            .map(|g| g.len() as u64)
            .sum()
    }

    pub fn decode(cfg: Arc<Config>, b: &[u8]) -> Result<Receiver, DecodeError> {
        let mut r = WireReader::new(b);
        if r.take(4, "tag")? != RECEIVER_TAG {
            return Err(r.invalid("not an OPA receiver payload (tag OPR1)"));
        }
        let g = r.u32("groups")?;
        if g != cfg.groups {
            return Err(r.invalid(format!("{g} groups, the configuration says {}", cfg.groups)));
        }
        let nseg = r.u32("segment count")? as usize;
        if nseg == 0 || nseg.saturating_mul(1 + g as usize) > r.remaining() {
            return Err(r.invalid(format!(
                "{nseg} segments do not fit the {} bytes that follow",
                r.remaining()
            )));
        }
        let mut segments = Vec::with_capacity(nseg);
        let mut lengths = Vec::with_capacity(nseg * g as usize);
        for _ in 0..nseg {
            let key = read_key(&mut r)?;
            let mut groups = Vec::with_capacity(g as usize);
            for _ in 0..g {
                let n = read_varint(&mut r, "group size")?;
                if n.saturating_mul(8) > r.remaining() as u64 {
                    return Err(r.invalid(format!("{n} identities do not fit")));
                }
                let mut v = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    v.push((r.u64("identity")?, 0));
                }
                lengths.push(n as usize);
                groups.push(v);
            }
            segments.push(ReceiverSegment { key, groups });
        }
        let n = r.u32("arrival stream length")? as usize;
        let off = r.offset();
        let stream = r.take(n, "arrival stream")?;
        r.finish("OPA receiver payload")?;
        let ts = timestamps::decode(Codec::Lossless, stream, &lengths).map_err(|e| match e {
            DecodeError::Invalid { offset, what } => DecodeError::Invalid {
                offset: off + offset,
                what,
            },
            e => e,
        })?;
        let mut it = ts.into_iter();
        for s in &mut segments {
            for grp in &mut s.groups {
                if let Some(t) = it.next() {
                    for (p, t) in grp.iter_mut().zip(t) {
                        p.1 = t;
                    }
                }
            }
        }
        let mut rc = Receiver::new(cfg);
        rc.segments = segments;
        Ok(rc)
    }

    fn write(&self, out: &mut Vec<u8>) {
        let mut w = WireWriter::new(out);
        w.bytes(RECEIVER_TAG);
        w.u32(self.cfg.groups);
        w.u32(self.segments.len() as u32);
        let mut enc = Encoder::new(Codec::Lossless);
        let mut ts = Vec::new();
        for s in &self.segments {
            write_key(&mut w, s.key);
            for grp in &s.groups {
                write_varint(&mut w, grp.len() as u64);
                ts.clear();
                for &(id, t) in grp {
                    w.u64(id);
                    ts.push(t);
                }
                enc.sequence(&ts);
            }
        }
        let stream = enc.bytes();
        w.u32(stream.len() as u32);
        w.bytes(&stream);
    }
}

impl TypedSynopsis for Receiver {
    const METHOD: &'static str = "opa";
    fn record(&mut self, rec: &PacketRecord) {
        self.record_packet(rec.id, rec.ts_ns);
    }
    fn record_batch(&mut self, recs: &[PacketRecord]) {
        for r in recs {
            self.record_packet(r.id, r.ts_ns);
        }
    }
    fn encoded_len(&self) -> usize {
        let mut b = Vec::new();
        self.write(&mut b);
        b.len()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        self.write(out);
    }
    /// Nothing: the receiver's packets are its local state (it computes its own OPA tuples and
    /// recovers against the sender's); they are in its file so that `owl estimate` can run.
    fn shipped_len(&self) -> Option<u64> {
        Some(0)
    }
    /// `later`'s packets appended in arrival order: those before its first delimiter to each
    /// group of this point's last segment (their positions follow this point's), its other
    /// segments after it. A decoded receiver holds every identity and exact arrival time, so
    /// either kind merges exactly.
    fn merge(&mut self, later: Receiver) -> Result<(), crate::method::MethodError> {
        Config::check_pair(&self.cfg, &later.cfg).map_err(crate::method::as_merge)?;
        for seg in later.segments {
            match self.segments.last_mut() {
                Some(open) if seg.key.is_none() => {
                    for (g, l) in open.groups.iter_mut().zip(seg.groups) {
                        g.extend(l);
                    }
                }
                _ => self.segments.push(seg),
            }
        }
        self.cache = RecoveryCache::default();
        Ok(())
    }
}

fn write_key(w: &mut WireWriter, k: Key) {
    match k {
        None => w.u8(0),
        Some(k) => {
            w.u8(1);
            w.u32(k);
        }
    }
}

fn read_key(r: &mut WireReader<'_>) -> Result<Key, DecodeError> {
    match r.u8("segment key flag")? {
        0 => Ok(None),
        1 => Ok(Some(r.u32("segment key")?)),
        x => Err(r.invalid(format!("segment key flag {x} is neither 0 nor 1"))),
    }
}

/// LEB128.
fn write_varint(w: &mut WireWriter, mut v: u64) {
    while v >= 0x80 {
        w.u8((v as u8) | 0x80);
        v >>= 7;
    }
    w.u8(v as u8);
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn read_varint(r: &mut WireReader<'_>, what: &'static str) -> Result<u64, DecodeError> {
    let mut v = 0u64;
    for i in 0..10 {
        let b = r.u8(what)?;
        if i == 9 && b > 1 {
            return Err(r.invalid(format!("{what}: varint longer than 64 bits")));
        }
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(r.invalid(format!("{what}: varint longer than 64 bits")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(p: &dyn crate::method::PointSynopsis) -> Vec<u8> {
        let mut b = Vec::new();
        p.encode(&mut b);
        b
    }

    /// Segments across the split: packets before the later part's first delimiter continue
    /// the open segment (positions in each group follow on), its delimiters open the same
    /// segments, the CAHs and timestamps come out of the packets as recording gives them —
    /// with several groups, at both points, whatever the codec; a receiver merges decoded
    /// too, a decoded sender is refused with an error.
    #[test]
    fn merged_segments_are_the_segments_of_both_streams() {
        let recs: Vec<PacketRecord> = (0..1_500u64)
            .map(|i| PacketRecord {
                ts_ns: 1_000_000 + i * 1_000 + (i % 5) * 300,
                id: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i >> 3),
                ..Default::default()
            })
            .collect();
        for codec in [Config::lossless(4), Config::wavelet(4)] {
            let cfg = Arc::new(Config {
                groups: 3,
                delimiter_bits: 5,
                ..codec
            });
            let delims = recs.iter().filter(|r| cfg.is_delimiter(r.id)).count();
            assert!(delims > 20, "{delims}");
            let sender =
                || -> Box<dyn crate::method::PointSynopsis> { Box::new(Sender::new(cfg.clone())) };
            let receiver = || -> Box<dyn crate::method::PointSynopsis> {
                Box::new(Receiver::new(cfg.clone()))
            };
            for (point, decodes) in [(&sender as &dyn Fn() -> _, false), (&receiver, true)] {
                let mut whole = point();
                whole.record_batch(&recs);
                for (x, y) in [(0, 700), (1, 2), (333, 1_200), (900, 900), (1_000, 1_500)] {
                    for decoded in [false, true] {
                        let mut head = point();
                        head.record_batch(&recs[..x]);
                        let mut mid = point();
                        mid.record_batch(&recs[x..y]);
                        if decoded {
                            let b = bytes(&*mid);
                            mid = match decodes {
                                true => Box::new(Receiver::decode(cfg.clone(), &b).unwrap()),
                                false => Box::new(Sender::decode(cfg.clone(), &b).unwrap()),
                            };
                        }
                        match head.merge(mid) {
                            Ok(()) => {}
                            // a decoded sender is refused unless its part is empty
                            Err(e) if decoded && !decodes => {
                                assert!(x < y && e.to_string().contains("decoded"), "{e}");
                                continue;
                            }
                            Err(e) => panic!("split {x}, {y}: {e}"),
                        }
                        head.record_batch(&recs[y..]);
                        assert!(
                            bytes(&*head) == bytes(&*whole),
                            "split {x}, {y} ({decoded})"
                        );
                    }
                }
            }
        }
    }
}
