//! Hostile `sample` payloads (SMP2: Elias–Fano cells and packed timestamps) through the decoder
//! at four configurations (capacity, cell bits, resolution) chosen by the first byte: what
//! decodes must re-encode to the same bytes, and goes through the pair estimator against a
//! synopsis that saw real packets, at either role. Errors are fine; panics, hangs, huge
//! allocations and a decoded payload that re-encodes differently are not.
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_core::PacketRecord;
use owl_core::sample::{Config, Synopsis, estimate};

fn config(which: u8) -> Config {
    let base = match which & 3 {
        0 => Config::new(64, 1),
        1 => Config::new(1, 1),
        2 => Config::new(1 << 20, 1),
        _ => Config::new(300, 1),
    }
    .expect("a valid capacity");
    let bits = [8, 1, 40, 3][(which >> 2 & 3) as usize];
    let q = [1, 1000][(which >> 4 & 1) as usize];
    base.with_cell_bits(bits)
        .and_then(|c| c.with_resolution_ns(q))
        .expect("a valid configuration")
}

/// A few packets, as a point would see them.
fn packets() -> Vec<PacketRecord> {
    (0..500u64)
        .map(|i| PacketRecord {
            ts_ns: 1_000_000 + 997 * i,
            id: i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            ..Default::default()
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, payload)) = data.split_first() else {
        return;
    };
    let cfg = config(which);
    let Ok(d) = Synopsis::decode(cfg, payload) else {
        return;
    };
    let mut again = Vec::new();
    d.encode(&mut again);
    assert_eq!(again, payload, "a decoded payload re-encodes to its bytes");
    assert_eq!(d.encoded_len(), payload.len());
    let mut other = Synopsis::new(cfg);
    other.record_batch(&packets());
    let _ = estimate(&d, &other);
    let _ = estimate(&other, &d);
    let _ = estimate(&d, &d);
});
