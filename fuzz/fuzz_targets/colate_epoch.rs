//! Hostile bytes through COLATE's counter-epoch decoder (what `owl query` reads from an epoch
//! store): errors are fine, panics, hangs and huge allocations are not. An epoch that decodes
//! must re-encode to the same bytes and be queryable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_core::FlowKey;
use owl_core::colate::{Epoch, Query, query};

fuzz_target!(|data: &[u8]| {
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
});
