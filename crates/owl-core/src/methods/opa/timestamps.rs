//! The second layer (§V-A): the sender's timestamps of each group, in S order, compressed.
//!
//! The receiver pairs each recovered position with its sender timestamp (Algorithm 2), so the
//! sender sends every group's timestamps in the group's sending order. Two codecs:
//!
//! - **lossless** (`opa`, the default): per group, the first timestamp against the previous
//!   group's first, then deltas (order 1) or deltas of deltas (order 2), whichever has coded
//!   smaller so far — both points track the same decayed costs, so the choice costs no bit. A
//!   group's deltas are divided by their resolution (the greatest common divisor, sent when it
//!   changes: a microsecond capture's nanosecond timestamps end in three zeros, which carry no
//!   information). Every value is zigzag-mapped and coded by an adaptive binary range coder
//!   (LZMA's): its bit length through a binary tree of adaptive probabilities, the next three
//!   bits below the leading one through adaptive probabilities per length, the rest as they
//!   are. Delays are exact.
//! - **wavelet** (`opa-wavelet`, the paper's): per group, the offsets from the group's first
//!   timestamp (exact) go through a full CDF 5/3 lifting wavelet transform (the reversible
//!   integer wavelet of JPEG 2000; a constant rate is two non-zero coefficients), the
//!   `⌈θ·w⌉` largest coefficients are kept (θ the compression ratio, §VI-B) and coded as index
//!   gaps and values by the same adaptive coder; the rest are zero. The sender measures its own
//!   reconstruction error per packet (it holds the true timestamps) and sends the summary.
//!
//! [`entropy_bits`] is the zeroth-order empirical entropy a codec is judged against.

use crate::wire::DecodeError;

/// Which codec the sender's timestamps travel in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Codec {
    Lossless,
    /// Wavelet compression keeping a fraction `ratio` of the coefficients.
    Wavelet {
        ratio: f64,
    },
}

// ---------------------------------------------------------------------------------------------
// The binary range coder (the LZMA SDK's: 11-bit probabilities adapted by 1/32, carry by cache)

const PROB_BITS: u32 = 11;
const PROB_INIT: u16 = 1 << (PROB_BITS - 1);
const MOVE_BITS: u32 = 5;
const TOP: u32 = 1 << 24;

#[derive(Clone, Debug)]
struct RangeEncoder {
    low: u64,
    range: u32,
    cache: u8,
    cache_size: u64,
    out: Vec<u8>,
}

impl RangeEncoder {
    fn new() -> RangeEncoder {
        RangeEncoder {
            low: 0,
            range: u32::MAX,
            cache: 0,
            cache_size: 1,
            out: Vec::new(),
        }
    }

    fn shift_low(&mut self) {
        if (self.low as u32) < 0xff00_0000 || (self.low >> 32) != 0 {
            let carry = (self.low >> 32) as u8;
            let mut temp = self.cache;
            loop {
                self.out.push(temp.wrapping_add(carry));
                temp = 0xff;
                self.cache_size -= 1;
                if self.cache_size == 0 {
                    break;
                }
            }
            self.cache = ((self.low >> 24) & 0xff) as u8;
        }
        self.cache_size += 1;
        self.low = (self.low & 0x00ff_ffff) << 8;
    }

    fn bit(&mut self, p: &mut u16, bit: bool) {
        let bound = (self.range >> PROB_BITS) * *p as u32;
        if !bit {
            self.range = bound;
            *p += ((1 << PROB_BITS) - *p) >> MOVE_BITS;
        } else {
            self.low += bound as u64;
            self.range -= bound;
            *p -= *p >> MOVE_BITS;
        }
        while self.range < TOP {
            self.range <<= 8;
            self.shift_low();
        }
    }

    /// The low `bits` bits of `v`, each equally likely: eight at a time (the range keeps at
    /// least 16 bits of precision after an 8-bit split).
    fn direct(&mut self, v: u64, bits: u32) {
        let mut left = bits;
        while left > 0 {
            let n = left.min(8);
            left -= n;
            let chunk = (v >> left) & ((1u64 << n) - 1);
            self.range >>= n;
            self.low += chunk * self.range as u64;
            while self.range < TOP {
                self.range <<= 8;
                self.shift_low();
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        for _ in 0..5 {
            self.shift_low();
        }
        self.out
    }
}

struct RangeDecoder<'a> {
    b: &'a [u8],
    pos: usize,
    range: u32,
    code: u32,
}

impl<'a> RangeDecoder<'a> {
    fn new(b: &'a [u8]) -> Result<RangeDecoder<'a>, DecodeError> {
        if b.len() < 5 || b[0] != 0 {
            return Err(DecodeError::Invalid {
                offset: 0,
                what: "timestamp stream: not a range-coded stream".into(),
            });
        }
        let mut d = RangeDecoder {
            b,
            pos: 1,
            range: u32::MAX,
            code: 0,
        };
        for _ in 0..4 {
            d.code = (d.code << 8) | d.next() as u32;
        }
        Ok(d)
    }

    /// The next byte; past the end, zeros (the caller checks how far it read).
    fn next(&mut self) -> u8 {
        let v = self.b.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v
    }

    fn bit(&mut self, p: &mut u16) -> bool {
        let bound = (self.range >> PROB_BITS) * *p as u32;
        let bit = if self.code < bound {
            self.range = bound;
            *p += ((1 << PROB_BITS) - *p) >> MOVE_BITS;
            false
        } else {
            self.code -= bound;
            self.range -= bound;
            *p -= *p >> MOVE_BITS;
            true
        };
        while self.range < TOP {
            self.range <<= 8;
            self.code = (self.code << 8) | self.next() as u32;
        }
        bit
    }

    fn direct(&mut self, bits: u32) -> u64 {
        let mut v = 0u64;
        let mut left = bits;
        while left > 0 {
            let n = left.min(8);
            left -= n;
            self.range >>= n;
            // below 2ⁿ in a stream this encoder wrote; a forged one is cut to it
            let c = (self.code / self.range).min((1 << n) - 1);
            self.code -= c * self.range;
            v = (v << n) | c as u64;
            while self.range < TOP {
                self.range <<= 8;
                self.code = (self.code << 8) | self.next() as u32;
            }
        }
        v
    }

    /// Fail if the decoder read past the stream (the stream was cut or forged).
    fn check_end(&self) -> Result<(), DecodeError> {
        if self.pos > self.b.len() {
            return Err(DecodeError::Invalid {
                offset: self.b.len(),
                what: "timestamp stream ends before its last timestamp".into(),
            });
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Adaptive model of a 64-bit value: its bit length, then the three bits below its leading one

const MANTISSA_CTX_BITS: u32 = 3;

#[derive(Clone, Debug)]
struct ValueModel {
    sign: u16,
    length: [u16; 128],
    mantissa: [[u16; 1 << MANTISSA_CTX_BITS]; 65],
}

impl ValueModel {
    fn new() -> ValueModel {
        ValueModel {
            sign: PROB_INIT,
            length: [PROB_INIT; 128],
            mantissa: [[PROB_INIT; 1 << MANTISSA_CTX_BITS]; 65],
        }
    }

    fn encode(&mut self, e: &mut RangeEncoder, v: u64) {
        let n = 64 - v.leading_zeros();
        let mut node = 1usize;
        for i in (0..7).rev() {
            let b = (n >> i) & 1 == 1;
            e.bit(&mut self.length[node], b);
            node = 2 * node + b as usize;
        }
        if n < 2 {
            return;
        }
        let rest = n - 1;
        let ctx = rest.min(MANTISSA_CTX_BITS);
        let probs = &mut self.mantissa[n as usize];
        let mut node = 1usize;
        for i in (rest - ctx..rest).rev() {
            let b = (v >> i) & 1 == 1;
            e.bit(&mut probs[node], b);
            node = 2 * node + b as usize;
        }
        e.direct(v, rest - ctx);
    }

    /// A signed value: an adaptive sign, then the magnitude (`|v|`, or `|v| − 1` below zero),
    /// so one-signed values (the deltas of ordered timestamps) pay nearly nothing for a sign.
    fn encode_signed(&mut self, e: &mut RangeEncoder, v: i64) {
        e.bit(&mut self.sign, v < 0);
        let m = if v < 0 { !(v as u64) } else { v as u64 };
        self.encode(e, m);
    }

    fn decode_signed(&mut self, d: &mut RangeDecoder<'_>) -> i64 {
        let neg = d.bit(&mut self.sign);
        let m = self.decode(d);
        if neg { !m as i64 } else { m as i64 }
    }

    fn decode(&mut self, d: &mut RangeDecoder<'_>) -> u64 {
        let mut node = 1usize;
        for _ in 0..7 {
            node = 2 * node + d.bit(&mut self.length[node]) as usize;
        }
        let n = (node - 128) as u32;
        if n > 64 {
            // a forged length: any value will do, the stream is garbage and its check fails
            return 0;
        }
        if n < 2 {
            return n as u64;
        }
        let rest = n - 1;
        let ctx = rest.min(MANTISSA_CTX_BITS);
        let probs = &mut self.mantissa[n as usize];
        let mut node = 1usize;
        for _ in 0..ctx {
            node = 2 * node + d.bit(&mut probs[node]) as usize;
        }
        let top = (node - (1 << ctx)) as u64;
        let low = d.direct(rest - ctx);
        (1u64 << rest) | (top << (rest - ctx)) | low
    }
}

/// `16·log₂(1 + |v|)`, piecewise linear between powers of two, in integers (both points must
/// compute the same cost on any machine, so no floating-point logarithm).
#[inline]
fn log_cost(v: i64) -> u64 {
    let m = (if v < 0 { !(v as u64) } else { v as u64 }).saturating_add(1);
    let n = 63 - m.leading_zeros() as u64;
    16 * n + (((m - (1 << n)) << 4) >> n)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

// ---------------------------------------------------------------------------------------------
// The streaming encoder and the decoder, shared state

/// What both ends of the codec keep between groups.
#[derive(Clone, Debug)]
struct State {
    first: ValueModel,
    same_resolution: u16,
    resolution: ValueModel,
    delta: [ValueModel; 2],
    index: ValueModel,
    coef: ValueModel,
    prev_first: u64,
    prev_resolution: u64,
    /// Decayed coded-size proxies (sums of bit lengths) of order 1 and order 2.
    cost: [u64; 2],
}

impl State {
    fn new() -> State {
        State {
            first: ValueModel::new(),
            same_resolution: PROB_INIT,
            resolution: ValueModel::new(),
            delta: [ValueModel::new(), ValueModel::new()],
            index: ValueModel::new(),
            coef: ValueModel::new(),
            prev_first: 0,
            prev_resolution: 1,
            cost: [0, 0],
        }
    }

    fn order(&self) -> usize {
        if self.cost[1] < self.cost[0] { 1 } else { 0 }
    }

    /// Fold a group's residuals of both orders into the costs (both ends, after each group).
    fn learn(&mut self, scaled: &[i64]) {
        // magnitudes, plus about a bit per value of the rarer sign (twice its count)
        let (mut c, mut neg) = ([0u64; 2], [0u64; 2]);
        for i in 2..scaled.len() {
            let d = scaled[i].wrapping_sub(scaled[i - 1]);
            let dd = d.wrapping_sub(scaled[i - 1].wrapping_sub(scaled[i - 2]));
            for (o, v) in [d, dd].into_iter().enumerate() {
                c[o] += log_cost(v);
                neg[o] += (v < 0) as u64;
            }
        }
        let n = scaled.len().saturating_sub(2) as u64;
        let [c1, c2] = [0, 1].map(|o| c[o] + 32 * neg[o].min(n - neg[o]));
        for (c, new) in self.cost.iter_mut().zip([c1, c2]) {
            *c = *c - (*c >> 3) + new;
        }
    }
}

/// The sender's reconstruction error of its timestamps (wavelet; all zero for lossless).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CodecError {
    pub packets: u64,
    pub sum_abs_ns: f64,
    pub sum_ns: f64,
    pub max_abs_ns: u64,
}

impl CodecError {
    pub fn mean_abs_ns(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.sum_abs_ns / self.packets as f64
        }
    }
    pub fn mean_ns(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.sum_ns / self.packets as f64
        }
    }
}

/// Encodes the groups' timestamp sequences one after the other, as segments close.
#[derive(Clone, Debug)]
pub struct Encoder {
    codec: Codec,
    rc: RangeEncoder,
    st: State,
    err: CodecError,
}

impl Encoder {
    pub fn new(codec: Codec) -> Encoder {
        Encoder {
            codec,
            rc: RangeEncoder::new(),
            st: State::new(),
            err: CodecError::default(),
        }
    }

    /// Encode one group's timestamps, in sending order.
    pub fn sequence(&mut self, ts: &[u64]) {
        let Some(&first) = ts.first() else { return };
        let st = &mut self.st;
        st.first
            .encode_signed(&mut self.rc, first.wrapping_sub(st.prev_first) as i64);
        st.prev_first = first;
        if ts.len() == 1 {
            self.err.packets += 1;
            return;
        }
        let g = ts[1..]
            .iter()
            .fold(0, |g, &t| {
                gcd(g, (t.wrapping_sub(first) as i64).unsigned_abs())
            })
            .max(1);
        if g == st.prev_resolution {
            self.rc.bit(&mut st.same_resolution, false);
        } else {
            self.rc.bit(&mut st.same_resolution, true);
            st.resolution.encode(&mut self.rc, g);
            st.prev_resolution = g;
        }
        let r = st.prev_resolution;
        // offsets from the first, in units of the resolution (exact: r divides every one)
        let scaled: Vec<i64> = ts
            .iter()
            .map(|&t| (t.wrapping_sub(first) as i64) / r as i64)
            .collect();
        match self.codec {
            Codec::Lossless => {
                let order = st.order();
                st.delta[0].encode_signed(&mut self.rc, scaled[1]);
                for i in 2..scaled.len() {
                    let d = scaled[i].wrapping_sub(scaled[i - 1]);
                    let v = if order == 0 {
                        d
                    } else {
                        d.wrapping_sub(scaled[i - 1].wrapping_sub(scaled[i - 2]))
                    };
                    st.delta[order].encode_signed(&mut self.rc, v);
                }
                st.learn(&scaled);
                self.err.packets += ts.len() as u64;
            }
            Codec::Wavelet { ratio } => {
                let mut c = scaled.clone();
                forward_53(&mut c);
                let keep = kept(ratio, c.len());
                let mut by_size: Vec<(u64, u32)> = c
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (v.unsigned_abs(), i as u32))
                    .collect();
                if keep < by_size.len() {
                    by_size
                        .select_nth_unstable_by(keep - 1, |a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
                    by_size.truncate(keep);
                }
                let mut idx: Vec<u32> = by_size.into_iter().map(|x| x.1).collect();
                idx.sort_unstable();
                let mut rec = vec![0i64; c.len()];
                let mut prev: i64 = -1;
                for &i in &idx {
                    st.index.encode(&mut self.rc, (i as i64 - prev - 1) as u64);
                    st.coef.encode_signed(&mut self.rc, c[i as usize]);
                    rec[i as usize] = c[i as usize];
                    prev = i as i64;
                }
                inverse_53(&mut rec);
                for (t, &x) in ts.iter().zip(&rec) {
                    let back = first.wrapping_add((x as u64).wrapping_mul(r));
                    let e = back.wrapping_sub(*t) as i64;
                    self.err.packets += 1;
                    self.err.sum_abs_ns += e.unsigned_abs() as f64;
                    self.err.sum_ns += e as f64;
                    self.err.max_abs_ns = self.err.max_abs_ns.max(e.unsigned_abs());
                }
            }
        }
    }

    /// The reconstruction error so far.
    pub fn error(&self) -> CodecError {
        self.err
    }

    /// The stream so far, flushed (the encoder keeps going).
    pub fn bytes(&self) -> Vec<u8> {
        self.rc.clone().finish()
    }
}

/// Coefficients the wavelet codec keeps of `n`: `⌈ratio·n⌉`, at least one.
pub fn kept(ratio: f64, n: usize) -> usize {
    ((ratio * n as f64).ceil() as usize).clamp(1, n.max(1))
}

/// Decode the sequences of `lengths` timestamps each, written by an [`Encoder`] of `codec`.
/// The caller bounds the lengths (their sum is what gets allocated).
pub fn decode(codec: Codec, b: &[u8], lengths: &[usize]) -> Result<Vec<Vec<u64>>, DecodeError> {
    let mut out = Vec::with_capacity(lengths.len());
    if lengths.iter().all(|&n| n == 0) {
        if b != RangeEncoder::new().finish() {
            return Err(DecodeError::Invalid {
                offset: 0,
                what: "timestamp stream holds data for no packet".into(),
            });
        }
        return Ok(lengths.iter().map(|_| Vec::new()).collect());
    }
    let mut d = RangeDecoder::new(b)?;
    let mut st = State::new();
    for &n in lengths {
        if n == 0 {
            out.push(Vec::new());
            continue;
        }
        let first = st
            .prev_first
            .wrapping_add(st.first.decode_signed(&mut d) as u64);
        st.prev_first = first;
        if n == 1 {
            out.push(vec![first]);
            continue;
        }
        if d.bit(&mut st.same_resolution) {
            st.prev_resolution = st.resolution.decode(&mut d).max(1);
        }
        let r = st.prev_resolution;
        let mut scaled = vec![0i64; n];
        match codec {
            Codec::Lossless => {
                let order = st.order();
                scaled[1] = st.delta[0].decode_signed(&mut d);
                for i in 2..n {
                    let v = st.delta[order].decode_signed(&mut d);
                    let prev_d = scaled[i - 1].wrapping_sub(scaled[i - 2]);
                    let dlt = if order == 0 {
                        v
                    } else {
                        v.wrapping_add(prev_d)
                    };
                    scaled[i] = scaled[i - 1].wrapping_add(dlt);
                }
                st.learn(&scaled);
            }
            Codec::Wavelet { ratio } => {
                let keep = kept(ratio, n);
                let mut prev: i64 = -1;
                for _ in 0..keep {
                    let gap = st.index.decode(&mut d);
                    let i = (prev as u64).wrapping_add(1).wrapping_add(gap);
                    if i >= n as u64 {
                        return Err(DecodeError::Invalid {
                            offset: d.pos.min(b.len()),
                            what: format!("wavelet coefficient {i} of a group of {n}"),
                        });
                    }
                    scaled[i as usize] = st.coef.decode_signed(&mut d);
                    prev = i as i64;
                }
                inverse_53(&mut scaled);
            }
        }
        out.push(
            scaled
                .iter()
                .map(|&x| first.wrapping_add((x as u64).wrapping_mul(r)))
                .collect(),
        );
        d.check_end()?;
    }
    d.check_end()?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// CDF 5/3 lifting (LeGall), integer and reversible, symmetric extension at the ends

/// The predict step's guess of odd sample `i` from the evens: the midpoint of its neighbours,
/// or, past the last even, the line through the last two (so a constant rate leaves no detail at
/// the end either).
#[inline]
fn predict(even: impl Fn(usize) -> i64, i: usize, ne: usize) -> i64 {
    if i + 1 < ne {
        even(i).wrapping_add(even(i + 1)).div_euclid(2)
    } else if i >= 1 {
        let (a, b) = (even(i - 1), even(i));
        b.wrapping_add(b.wrapping_sub(a).div_euclid(2))
    } else {
        even(i)
    }
}

fn lift_forward(x: &mut [i64], tmp: &mut Vec<i64>) {
    let n = x.len();
    let (ne, no) = (n.div_ceil(2), n / 2);
    tmp.clear();
    tmp.resize(n, 0);
    let mut d = vec![0i64; no];
    for (i, di) in d.iter_mut().enumerate() {
        *di = x[2 * i + 1].wrapping_sub(predict(|j| x[2 * j], i, ne));
    }
    let even = |i: usize| x[2 * i];
    let dd = |i: isize| d[i.clamp(0, no as isize - 1) as usize];
    for (i, t) in tmp.iter_mut().enumerate().take(ne) {
        let u = dd(i as isize - 1)
            .wrapping_add(dd(i as isize))
            .wrapping_add(2)
            .div_euclid(4);
        *t = even(i).wrapping_add(u);
    }
    tmp[ne..].copy_from_slice(&d);
    x.copy_from_slice(tmp);
}

fn lift_inverse(x: &mut [i64], tmp: &mut Vec<i64>) {
    let n = x.len();
    let (ne, no) = (n.div_ceil(2), n / 2);
    tmp.clear();
    tmp.resize(n, 0);
    let (s, d) = x.split_at(ne);
    let dd = |i: isize| d[i.clamp(0, no as isize - 1) as usize];
    for i in 0..ne {
        let u = dd(i as isize - 1)
            .wrapping_add(dd(i as isize))
            .wrapping_add(2)
            .div_euclid(4);
        tmp[2 * i] = s[i].wrapping_sub(u);
    }
    for i in 0..no {
        tmp[2 * i + 1] = d[i].wrapping_add(predict(|j| tmp[2 * j], i, ne));
    }
    x.copy_from_slice(tmp);
}

/// The full multi-level transform, in place: approximation first, then details coarse to fine.
pub fn forward_53(x: &mut [i64]) {
    let mut tmp = Vec::new();
    let mut len = x.len();
    while len >= 2 {
        lift_forward(&mut x[..len], &mut tmp);
        len = len.div_ceil(2);
    }
}

/// The inverse of [`forward_53`].
pub fn inverse_53(x: &mut [i64]) {
    let mut lens = Vec::new();
    let mut len = x.len();
    while len >= 2 {
        lens.push(len);
        len = len.div_ceil(2);
    }
    let mut tmp = Vec::new();
    for &l in lens.iter().rev() {
        lift_inverse(&mut x[..l], &mut tmp);
    }
}

/// Zeroth-order empirical entropy of `values`, bits per value: `−Σ (c/n)·log₂(c/n)` over the
/// distinct values' counts `c`.
pub fn entropy_bits(values: impl IntoIterator<Item = i64>) -> f64 {
    let mut counts: hashbrown::HashMap<i64, u64> = hashbrown::HashMap::new();
    let mut n = 0u64;
    for v in values {
        *counts.entry(v).or_insert(0) += 1;
        n += 1;
    }
    if n == 0 {
        return 0.0;
    }
    let nf = n as f64;
    // summed in the values' order: the same figure on every run (a hash map's order is not)
    let mut counts: Vec<(i64, u64)> = counts.into_iter().collect();
    counts.sort_unstable();
    counts
        .iter()
        .map(|&(_, c)| {
            let p = c as f64 / nf;
            -p * p.log2()
        })
        .sum()
}
