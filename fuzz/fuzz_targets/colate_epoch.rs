//! Hostile bytes through COLATE's counter-epoch decoder (what `owl query` reads from an epoch
//! store): errors are fine, panics, hangs and huge allocations are not. Each input is tried as
//! it is and with its last 8 bytes replaced by the right checksum, so the fuzzer also reaches
//! the decoder behind the checksum. An epoch that decodes must re-encode to the same bytes and
//! be queryable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_core::FlowKey;
use owl_core::colate::{Epoch, Query, query};

fn check(data: &[u8]) {
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
        let one = [e];
        let _ = query(&one, &one, &q);
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if data.len() >= 12 {
        let mut fixed = data.to_vec();
        let body = fixed.len() - 8;
        let sum = xxhash_rust::xxh3::xxh3_64(&fixed[..body]);
        fixed[body..].copy_from_slice(&sum.to_le_bytes());
        check(&fixed);
    }
});
