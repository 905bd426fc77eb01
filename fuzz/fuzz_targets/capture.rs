//! Hostile capture bytes through the reader, the dissector and the identity hash: every
//! outcome must be a packet, the end, or an error — never a panic, a hang or a huge allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_trace::capture::CaptureReader;
use owl_trace::dissect::dissect;
use owl_trace::identity::{DEFAULT_IDENTITY_SEED, frame_identity};

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = CaptureReader::new(data) else {
        return;
    };
    while let Ok(Some(p)) = r.next_packet() {
        if let Ok(d) = dissect(p.linktype, p.data) {
            assert!(d.ip_offset <= d.ip_end && d.ip_end <= p.data.len());
            let _ = frame_identity(p.data, &d, DEFAULT_IDENTITY_SEED);
        }
    }
});
