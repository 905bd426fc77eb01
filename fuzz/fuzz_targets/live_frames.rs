//! Hostile bytes from a peer: the frame decoder (pure and streaming, at both caps), the
//! authentication of what it parsed, and the payloads a frame carries before and after the
//! handshake (agent configuration, RDA exchange messages).
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_core::rda::Config as RdaConfig;
use owl_core::rda::session::Message;
use owl_live::config::AgentConfig;
use owl_live::frame::{
    self, Direction, FrameReader, MAX_FRAME, MAX_HANDSHAKE_FRAME, Opener,
};
use owl_live::key::Key;

fuzz_target!(|data: &[u8]| {
    let key = Key::from_bytes([7; 32]);
    // the pure decoder: frames one after the other
    let mut rest = data;
    while let Ok(Some((raw, used))) = frame::decode(rest, MAX_FRAME) {
        assert!(used <= rest.len() && raw.payload.len() < used);
        let _ = frame::verify(&key, Direction::ToListener, &raw, raw.seq);
        rest = &rest[used..];
    }
    // the streaming reader, before and after authentication
    for cap in [MAX_HANDSHAKE_FRAME, MAX_FRAME] {
        let mut r = FrameReader::new(data);
        r.set_cap(cap);
        let mut o = Opener::new(key.clone(), Direction::ToConnector, 0);
        while let Ok(body) = r.read_body() {
            assert!(body.len() <= cap);
            let _ = o.open(&body);
        }
    }
    let _ = AgentConfig::decode(data);
    for cfg in [RdaConfig::default(), RdaConfig::fixed(64)] {
        let _ = Message::decode(&cfg, data);
    }
});
