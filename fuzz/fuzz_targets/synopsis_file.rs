//! Hostile synopsis files through the container decoders — the whole-document one (version 1)
//! and the streamed one (versions 2 to 4, block by block) — and each block's payload through
//! the decoder of the method its header names (the exact method's for a version 1 file), and
//! its cut data.
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_core::exact::method::ExactMethod;
use owl_core::method::{Method, Role};
use owl_core::wire::{StreamReader, SynopsisFile, WireReader};

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = SynopsisFile::decode(data) {
        for (_, p) in &f.points {
            let _ = ExactMethod.decode_point(Role::Sender, p);
        }
    }
    let _ = ExactMethod.decode_point(Role::Receiver, data);
    if let Ok(mut r) = StreamReader::open(data) {
        let method = owl_core::registry::find(&r.header.method)
            .and_then(|info| (info.from_config)(&r.header.config).ok());
        let role = r.header.role;
        // a torn block ends the readable part: next_block says so once, then None
        for _ in 0..1_000 {
            match r.next_block() {
                Ok(Some(b)) => {
                    if let Some(m) = &method {
                        let _ = m.decode_point(role, &b.payload);
                    }
                    let _ = owl_core::cut::decode_point_cut(&mut WireReader::new(&b.cut));
                }
                Ok(None) => break,
                Err(_) => assert!(matches!(r.next_block(), Ok(None))),
            }
        }
    }
});
