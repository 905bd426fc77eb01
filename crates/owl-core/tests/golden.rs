//! Golden synopses: every registered method's sender and receiver synopsis of a fixed record
//! stream, compared byte for byte with the files committed in `tests/golden/`. A change of any
//! method's payload format (or of what it records) fails here; if it is deliberate, bump the
//! synopsis file version (`owl_core::wire`) so that old files are refused with a clear message,
//! and re-bless with `OWL_BLESS=1 cargo test -p owl-core --test golden`.

use std::path::PathBuf;

use owl_core::PacketRecord;
use owl_core::method::{BuildOptions, Role};
use owl_core::registry::METHODS;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

/// 2 000 packets of 50 flows at ~1 Mpps; 2 % lost, delays of 5–80 µs, one duplicate.
fn records() -> (Vec<PacketRecord>, Vec<PacketRecord>) {
    let mut rng = Pcg64::seed_from_u64(20261126);
    let (mut s, mut r) = (Vec::new(), Vec::new());
    let mut t = 1_764_000_000_000_000_000u64;
    for k in 0..2_000u32 {
        t += rng.random_range(1..2_000u64);
        let mut rec = PacketRecord {
            ts_ns: t,
            id: rng.random(),
            len: 40 + k % 1400,
            ..Default::default()
        };
        rec.flow.proto = 17;
        rec.flow.sport = (k % 50) as u16;
        rec.flow.dport = 53;
        s.push(rec);
        if !rng.random_bool(0.02) {
            r.push(PacketRecord {
                ts_ns: t + rng.random_range(5_000..80_000),
                ..rec
            });
        }
    }
    let dup = r[100];
    r.push(PacketRecord {
        ts_ns: dup.ts_ns + 7,
        ..dup
    });
    r.sort_by_key(|x| x.ts_ns);
    (s, r)
}

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

#[test]
fn every_method_payload_is_pinned() {
    let (s, r) = records();
    let bless = std::env::var_os("OWL_BLESS").is_some();
    let mut failed = Vec::new();
    for info in METHODS {
        // small where --memory sizes the method; its defaults otherwise
        let m = (info.build)(&BuildOptions {
            seed: 11,
            memory: Some(4096),
        })
        .or_else(|_| {
            (info.build)(&BuildOptions {
                seed: 11,
                memory: None,
            })
        })
        .unwrap();
        for (role, recs, tag) in [
            (Role::Sender, &s, "sender"),
            (Role::Receiver, &r, "receiver"),
        ] {
            let mut p = m.new_point(role);
            p.record_batch(recs);
            let mut bytes = Vec::new();
            p.encode(&mut bytes);
            assert_eq!(bytes.len(), p.encoded_len(), "{} {tag}", info.name);
            let path = golden(&format!("{}-{tag}.bin", info.name));
            if bless {
                std::fs::write(&path, &bytes).unwrap();
                continue;
            }
            let want = std::fs::read(&path).unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (a new method? bless its golden files, see the module doc)",
                    path.display()
                )
            });
            if want != bytes {
                failed.push(format!("{} {tag}", info.name));
            }
            // and what was pinned still decodes
            assert!(m.decode_point(role, &want).is_ok(), "{} {tag}", info.name);
        }
    }
    assert!(failed.is_empty(), "payload bytes changed: {failed:?}");
}
