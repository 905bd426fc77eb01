//! Hostile synopsis files through the container decoder and the exact method's payload decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_core::exact::method::ExactMethod;
use owl_core::method::{Method, Role};
use owl_core::wire::SynopsisFile;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = SynopsisFile::decode(data) {
        for (_, p) in &f.points {
            let _ = ExactMethod.decode_point(Role::Sender, p);
        }
    }
    let _ = ExactMethod.decode_point(Role::Receiver, data);
});
