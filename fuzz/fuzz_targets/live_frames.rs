//! Hostile bytes from a peer: the frame decoder (pure and streaming, at both caps), the
//! authentication of what it parsed, and the payloads a frame carries before and after the
//! handshake (agent configuration, every agent message — `Resume`, `Have`, estimates … —, RDA
//! exchange messages).
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_core::rda::Config as RdaConfig;
use owl_core::rda::session::Message;
use owl_live::config::AgentConfig;
use owl_live::frame::{
    self, Direction, FrameReader, MAX_FRAME, MAX_HANDSHAKE_FRAME, Opener,
};
use owl_live::key::Key;
use owl_live::protocol::Msg;

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
    // every message kind, and a few beyond; what decodes re-encodes stably (bytes, not
    // values: an estimate may carry NaN)
    for kind in 14..=30u8 {
        if let Ok(m) = Msg::decode(kind, data) {
            let (k, p) = m.encode();
            assert_eq!(k, kind);
            let again = Msg::decode(k, &p).expect("an encoded message decodes");
            assert_eq!(again.encode().1, p);
        }
    }
    for cfg in [RdaConfig::default(), RdaConfig::fixed(64)] {
        let _ = Message::decode(&cfg, data);
    }
});
