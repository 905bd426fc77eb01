//! Hostile OPA payloads: the sender's tuples and timestamp stream, the receiver's identities
//! and arrival stream, through their decoders and — when one decodes — through recovery against
//! a synopsis that saw real packets, for the lossless and the wavelet codec, one group or
//! three. Also the timestamp decoder alone, with group lengths from the input. Errors are
//! fine; panics, hangs and huge allocations are not.
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_core::PacketRecord;
use owl_core::method::{Method, Role};
use owl_core::opa::timestamps::{self, Codec};
use owl_core::opa::{Config, OpaMethod};

fn method(which: u8) -> OpaMethod {
    let base = if which & 1 == 0 {
        Config::lossless(1)
    } else {
        Config::wavelet(1)
    };
    let groups = if which & 2 == 0 { 1 } else { 3 };
    OpaMethod::new(Config {
        groups,
        max_mappings: 1 << 12,
        ..base
    })
    .expect("a valid configuration")
}

/// A few packets, as both points would see them.
fn packets() -> Vec<PacketRecord> {
    (0..300u64)
        .map(|i| PacketRecord {
            ts_ns: 1_000_000 + 997 * i,
            id: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 3),
            ..Default::default()
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, payload)) = data.split_first() else {
        return;
    };
    let m = method(which);
    let role = if which & 4 == 0 {
        Role::Sender
    } else {
        Role::Receiver
    };
    if let Ok(p) = m.decode_point(role, payload) {
        let mut other = m.new_point(match role {
            Role::Sender => Role::Receiver,
            Role::Receiver => Role::Sender,
        });
        other.record_batch(&packets());
        let (s, r) = match role {
            Role::Sender => (p, other),
            Role::Receiver => (other, p),
        };
        let _ = m.estimate_packets(&*s, &*r);
        let _ = m.estimate(s, r);
    }
    // the timestamp stream alone: up to 8 groups of up to 255 packets
    let (lens, stream) = payload.split_at(payload.len().min(8));
    let lengths: Vec<usize> = lens.iter().map(|&b| b as usize).collect();
    let codec = if which & 8 == 0 {
        Codec::Lossless
    } else {
        Codec::Wavelet { ratio: 0.1 }
    };
    let _ = timestamps::decode(codec, stream, &lengths);
});
