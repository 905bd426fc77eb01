//! Repairing a pair of RDAs after decoding (§V-C, §VIII-A "Latency Aggregation").
//!
//! - The sender deletes its decoded **lost** packets from its own RDA with the timestamps in its
//!   own interval cache: nothing crosses the network.
//! - The sender asks the receiver for the timestamps of the decoded **reordered** packets (a
//!   [`TimestampRequest`]); the receiver answers from its cache (a [`TimestampResponse`]); the
//!   sender deletes them from the receiver's RDA. Both messages cross the network and are
//!   counted in bytes; an identity the receiver does not hold is answered as absent (it was a
//!   false pure bucket, see [`super::decode`]) and is not deleted.

use super::bank::Rda;
use super::cache::IntervalCache;
use crate::wire::{DecodeError, WireReader, WireWriter};

/// Most identities one request may carry (a hostile count is refused before allocating).
pub const MAX_REQUEST: usize = 1 << 26;

/// Sender → receiver: "send me the timestamps of these identities".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimestampRequest {
    pub ids: Vec<u64>,
}

/// Receiver → sender: the timestamp of each requested identity, in request order, `None` for
/// an identity the receiver did not record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimestampResponse {
    pub timestamps: Vec<Option<u64>>,
}

impl TimestampRequest {
    /// `u32` count and 8 bytes an identity.
    pub fn wire_bytes(&self) -> u64 {
        4 + 8 * self.ids.len() as u64
    }
    pub fn encode(&self, w: &mut WireWriter) {
        w.u32(self.ids.len() as u32);
        for &i in &self.ids {
            w.u64(i);
        }
    }
    pub fn decode(r: &mut WireReader<'_>) -> Result<TimestampRequest, DecodeError> {
        let n = r.u32("request count")? as usize;
        if n > MAX_REQUEST || n * 8 > r.remaining() {
            return Err(r.invalid(format!(
                "a request for {n} timestamps does not fit in {} bytes",
                r.remaining()
            )));
        }
        let ids = (0..n)
            .map(|_| r.u64("requested identity"))
            .collect::<Result<_, _>>()?;
        Ok(TimestampRequest { ids })
    }
}

impl TimestampResponse {
    /// `u32` count, a presence bitmap, and 8 bytes a present timestamp (the identities are the
    /// request's, in its order, and are not repeated).
    pub fn wire_bytes(&self) -> u64 {
        let n = self.timestamps.len() as u64;
        4 + n.div_ceil(8) + 8 * self.timestamps.iter().flatten().count() as u64
    }
    pub fn encode(&self, w: &mut WireWriter) {
        let n = self.timestamps.len();
        w.u32(n as u32);
        let mut bits = vec![0u8; n.div_ceil(8)];
        for (i, t) in self.timestamps.iter().enumerate() {
            if t.is_some() {
                bits[i / 8] |= 1 << (i % 8);
            }
        }
        w.bytes(&bits);
        for t in self.timestamps.iter().flatten() {
            w.u64(*t);
        }
    }
    pub fn decode(r: &mut WireReader<'_>) -> Result<TimestampResponse, DecodeError> {
        let n = r.u32("response count")? as usize;
        if n > MAX_REQUEST || n.div_ceil(8) > r.remaining() {
            return Err(r.invalid(format!(
                "a response for {n} identities does not fit in {} bytes",
                r.remaining()
            )));
        }
        let bits = r.take(n.div_ceil(8), "presence bitmap")?.to_vec();
        let mut timestamps = Vec::with_capacity(n);
        for i in 0..n {
            timestamps.push(if bits[i / 8] >> (i % 8) & 1 == 1 {
                Some(r.u64("timestamp")?)
            } else {
                None
            });
        }
        Ok(TimestampResponse { timestamps })
    }
}

/// The receiver's side: answer a request from the interval cache.
pub fn answer(cache: &IntervalCache, req: &TimestampRequest) -> TimestampResponse {
    TimestampResponse {
        timestamps: req.ids.iter().map(|&id| cache.get(id)).collect(),
    }
}

/// The sender deletes its decoded lost packets from its own RDA; returns how many it held
/// (an identity absent from the cache is not deleted).
pub fn repair_sender(rda: &mut Rda, cache: &IntervalCache, lost: &[u64]) -> usize {
    let mut n = 0;
    for &id in lost {
        if let Some(ts) = cache.get(id) {
            rda.delete(id, ts);
            n += 1;
        }
    }
    n
}

/// The sender deletes the receiver's reordered packets from the receiver's RDA with the
/// timestamps of the response; returns how many were deleted.
pub fn repair_receiver(rda: &mut Rda, req: &TimestampRequest, resp: &TimestampResponse) -> usize {
    let mut n = 0;
    for (&id, ts) in req.ids.iter().zip(&resp.timestamps) {
        if let Some(ts) = ts {
            rda.delete(id, *ts);
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_response_roundtrip_and_count_their_bytes() {
        let req = TimestampRequest {
            ids: vec![1, 2, 3, 0xffff_ffff_ffff],
        };
        let resp = TimestampResponse {
            timestamps: vec![Some(10), None, Some(30), Some(40)],
        };
        for (bytes, enc) in [
            (req.wire_bytes(), {
                let mut buf = Vec::new();
                req.encode(&mut WireWriter::new(&mut buf));
                buf
            }),
            (resp.wire_bytes(), {
                let mut buf = Vec::new();
                resp.encode(&mut WireWriter::new(&mut buf));
                buf
            }),
        ] {
            assert_eq!(bytes, enc.len() as u64);
        }
        let mut buf = Vec::new();
        req.encode(&mut WireWriter::new(&mut buf));
        assert_eq!(
            TimestampRequest::decode(&mut WireReader::new(&buf)).unwrap(),
            req
        );
        for cut in 0..buf.len() {
            assert!(TimestampRequest::decode(&mut WireReader::new(&buf[..cut])).is_err());
        }
        let mut buf = Vec::new();
        resp.encode(&mut WireWriter::new(&mut buf));
        assert_eq!(
            TimestampResponse::decode(&mut WireReader::new(&buf)).unwrap(),
            resp
        );
        for cut in 0..buf.len() {
            assert!(TimestampResponse::decode(&mut WireReader::new(&buf[..cut])).is_err());
        }
        // a hostile count does not allocate
        let hostile = u32::MAX.to_le_bytes();
        assert!(TimestampRequest::decode(&mut WireReader::new(&hostile)).is_err());
        assert!(TimestampResponse::decode(&mut WireReader::new(&hostile)).is_err());
    }

    #[test]
    fn repair_removes_exactly_the_decoded_packets() {
        let mut s_cache = IntervalCache::new(100, 1);
        let mut r_cache = IntervalCache::new(100, 1);
        let mut s = Rda::new(2, 8, 1).unwrap();
        let mut r = Rda::new(2, 8, 1).unwrap();
        let mut ev = |_: u64, _: u64| {};
        for (id, ts) in [(1u64, 100u64), (2, 200), (3, 300)] {
            s_cache.record(id, ts, &mut ev);
            s.insert(id, ts);
        }
        for (id, ts) in [(1u64, 150u64), (2, 260), (9, 999)] {
            r_cache.record(id, ts, &mut ev);
            r.insert(id, ts);
        }
        s_cache.seal(&mut ev);
        r_cache.seal(&mut ev);
        assert_eq!(repair_sender(&mut s, &s_cache, &[3, 77]), 1);
        let req = TimestampRequest { ids: vec![9, 55] };
        let resp = answer(&r_cache, &req);
        assert_eq!(resp.timestamps, vec![Some(999), None]);
        assert_eq!(repair_receiver(&mut r, &req, &resp), 1);
        for (a, b) in s.buckets().iter().zip(r.buckets()) {
            assert_eq!((a.id, a.delta), (b.id, b.delta));
        }
    }
}
