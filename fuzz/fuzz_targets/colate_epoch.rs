//! Hostile bytes through COLATE's counter-epoch decoder and its in-place reader (what `owl
//! query` reads from an epoch store): errors are fine, panics, hangs and huge allocations are
//! not. Each input is tried as it is and with its header checksum and last 8 bytes replaced by
//! the right checksums, so the fuzzer also reaches the decoder behind them. An epoch that
//! decodes must re-encode to the same bytes, be queryable, and read the same cells in place.
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_core::FlowKey;
use owl_core::colate::epoch::HEADER_BYTES;
use owl_core::colate::{Epoch, EpochReader, Mapping, Query, query};

fn check(data: &[u8]) {
    // in place: any cell of an epoch whose header reads is an answer or an error
    let read = EpochReader::open(data).ok().map(|mut rd| {
        let h = rd.head().clone();
        let map = Mapping::new(h.seed, h.m, &[1.0]);
        let fh = map.flow_hash(&FlowKey::default());
        let _ = rd.cell(h.n as usize - 1);
        rd.flow(&map, fh).ok()
    });
    if let Ok(e) = Epoch::decode(data) {
        let mut b = Vec::new();
        e.encode(&mut b);
        assert_eq!(b, data, "decode then encode changes the bytes");
        let q = Query {
            flow: FlowKey::default(),
            from_ns: 0,
            to_ns: u64::MAX,
            horizon_ns: 0,
            gamma: 10,
            estimator: Default::default(),
        };
        let map = Mapping::new(e.seed, e.m, &[1.0]);
        let cells = e.flow(&map, map.flow_hash(&FlowKey::default()));
        assert_eq!(read, Some(Some(cells)), "a decoded epoch reads differently in place");
        let one = [e];
        let _ = query(&one, &one, &q);
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if data.len() >= HEADER_BYTES + 8 {
        let mut fixed = data.to_vec();
        let h = HEADER_BYTES - 8;
        let sum = xxhash_rust::xxh3::xxh3_64(&fixed[..h]);
        fixed[h..h + 8].copy_from_slice(&sum.to_le_bytes());
        let body = fixed.len() - 8;
        let sum = xxhash_rust::xxh3::xxh3_64(&fixed[..body]);
        fixed[body..].copy_from_slice(&sum.to_le_bytes());
        check(&fixed);
    }
});
