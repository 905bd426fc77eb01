//! Golden synopses: every registered method's sender and receiver synopsis of a fixed record
//! stream, compared byte for byte with the files committed in `tests/golden/`. A change of any
//! method's payload format (or of what it records) fails here; if it is deliberate, bump the
//! synopsis file version (`owl_core::wire`) so that old files are refused with a clear message,
//! and re-bless with `OWL_BLESS=1 cargo test -p owl-core --test golden`.
//!
//! Beside each registered method's defaults, [`variants`] pins configurations whose payload
//! format differs from the default's: `lda-digest-off` is the paper's LDA (`lda:digest=off`,
//! tag `LDA1`), byte for byte the `lda` payload from before the identity digest existed.

use std::path::PathBuf;

use owl_core::PacketRecord;
use owl_core::lda::{self, LdaMethod};
use owl_core::method::{BuildOptions, Method, Role};
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

/// `--memory` of the pinned synopses (where the method is sized by it) and their seed.
const MEMORY: u64 = 4096;
const SEED: u64 = 11;

/// Pinned configurations beside the registry's defaults, by golden file name.
fn variants() -> Vec<(String, Box<dyn Method>)> {
    // the paper's LDA at the same --memory: 170 rows of 12 bytes a bank, tag LDA1
    let paper = lda::Config::for_memory_layout(
        MEMORY,
        &lda::DEFAULT_TARGETS,
        lda::PAPER_PACKETS,
        SEED,
        false,
    )
    .unwrap();
    vec![("lda-digest-off".into(), Box::new(LdaMethod::new(paper)))]
}

#[test]
fn every_method_payload_is_pinned() {
    let (s, r) = records();
    let bless = std::env::var_os("OWL_BLESS").is_some();
    let mut failed = Vec::new();
    let mut methods: Vec<(String, Box<dyn Method>)> = METHODS
        .iter()
        .map(|info| {
            // small where --memory sizes the method; its defaults otherwise
            let m = (info.build)(&BuildOptions {
                seed: SEED,
                memory: Some(MEMORY),
            })
            .or_else(|_| {
                (info.build)(&BuildOptions {
                    seed: SEED,
                    memory: None,
                })
            })
            .unwrap();
            (info.name.to_string(), m)
        })
        .collect();
    methods.extend(variants());
    for (name, m) in &methods {
        for (role, recs, tag) in [
            (Role::Sender, &s, "sender"),
            (Role::Receiver, &r, "receiver"),
        ] {
            let mut p = m.new_point(role);
            p.record_batch(recs);
            let mut bytes = Vec::new();
            p.encode(&mut bytes);
            assert_eq!(bytes.len(), p.encoded_len(), "{name} {tag}");
            let path = golden(&format!("{name}-{tag}.bin"));
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
                failed.push(format!("{name} {tag}"));
            }
            // and what was pinned still decodes
            assert!(m.decode_point(role, &want).is_ok(), "{name} {tag}");
        }
    }
    assert!(failed.is_empty(), "payload bytes changed: {failed:?}");
}

/// A synopsis file recorded before LDA's identity digest existed: its configuration has no
/// `digest` field (read as `on`) and its payload is `LDA1` (the pinned `lda-digest-off` files).
/// It decodes as a synopsis without digests, re-encodes byte for byte, and estimates with the
/// counters only, saying so.
#[test]
fn lda_payload_from_before_the_digest_still_reads() {
    let (_, paper) = variants().into_iter().next().unwrap();
    let old: Vec<(String, String)> = paper
        .config()
        .into_iter()
        .filter(|(k, _)| *k != "digest")
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let m = (lda::INFO.from_config)(&old).unwrap();
    assert!(m.config().contains(&("digest", "on".to_string())));
    let mut points = Vec::new();
    for (role, tag) in [(Role::Sender, "sender"), (Role::Receiver, "receiver")] {
        let want = std::fs::read(golden(&format!("lda-digest-off-{tag}.bin"))).unwrap();
        assert_eq!(&want[..4], b"LDA1");
        let p = m.decode_point(role, &want).unwrap();
        let mut again = Vec::new();
        p.encode(&mut again);
        assert_eq!(again, want, "{tag}");
        points.push(p);
    }
    let r = points.pop().unwrap();
    let s = points.pop().unwrap();
    let e = m.estimate(s, r).unwrap();
    assert!(e.mean_ns.is_some());
    assert!(
        e.notes
            .iter()
            .any(|n| n.starts_with("identity digest not used")),
        "{:?}",
        e.notes
    );
}

/// COLATE epochs from before the folded flow hash (`CLE2`: counters placed by xxh3 of the
/// 37-byte canonical key; `colate-cle2-*.bin`, written by that version): a recorder placing
/// flows by that hash still writes them byte for byte, they decode and re-encode as they
/// were, and every flow's estimate from them is the one that recorder gives — read by the
/// folded hash instead, the flows' counters would be other flows'.
#[test]
fn colate_epochs_from_before_the_folded_flow_hash_still_read() {
    use owl_core::colate::{ColateMethod, Config, Level, Placement, Recorder};
    use owl_core::method::PointSynopsis;
    let (s, r) = records();
    let m = ColateMethod::new(Config::for_level(Level::Medium, MEMORY, SEED).unwrap()).unwrap();
    let mut old = Vec::new();
    let mut again = Vec::new();
    for (role, recs, tag) in [
        (Role::Sender, &s, "sender"),
        (Role::Receiver, &r, "receiver"),
    ] {
        let want = std::fs::read(golden(&format!("colate-cle2-{tag}.bin"))).unwrap();
        assert_eq!(&want[12..16], b"CLE2", "{tag}");
        let p = m.decode_point(role, &want).unwrap();
        let mut bytes = Vec::new();
        p.encode(&mut bytes);
        assert_eq!(bytes, want, "{tag}: re-encoded");
        let mut canonical =
            Recorder::new(m.recorder().layout().with_placement(Placement::Canonical));
        canonical.record_batch(recs);
        let mut bytes = Vec::new();
        canonical.encode(&mut bytes);
        assert_eq!(bytes, want, "{tag}: recorded by the canonical hash");
        // the default recorder writes CLP3 (the paper's placement, Huffman-coded in packed
        // blocks), a blocked one CLP4
        for (p, want) in [(Placement::Blocked, b"CLP4"), (Placement::Folded, b"CLP3")] {
            let mut r = Recorder::new(m.recorder().layout().with_placement(p));
            r.record_batch(recs);
            let mut bytes = Vec::new();
            r.encode(&mut bytes);
            assert_eq!(&bytes[12..16], want, "{tag}");
        }
        assert_eq!(m.recorder().layout().map.placement, Placement::Folded);
        old.push(p);
        again.push(Box::new(canonical) as Box<dyn PointSynopsis>);
    }
    let flows = flows_of(&s);
    let from_file = m
        .estimate_flows(&*old[0], &*old[1], &flows)
        .unwrap()
        .unwrap();
    let recorded = m
        .estimate_flows(&*again[0], &*again[1], &flows)
        .unwrap()
        .unwrap();
    assert_eq!(from_file, recorded);
    assert!(from_file.iter().filter(|e| e.mean_ns.is_some()).count() > flows.len() / 2);
}

/// What [`pinned_epochs`] found of one older COLATE coding.
struct Pinned {
    /// Each point's pinned epoch (sender, receiver).
    pinned: [Vec<u8>; 2],
    /// Each point's epoch as today's default recorder writes it.
    default: [Vec<u8>; 2],
    /// Every flow's estimate from the pinned epochs, and from the default's.
    from_file: Vec<owl_core::method::FlowEstimate>,
    from_default: Vec<owl_core::method::FlowEstimate>,
}

/// The pinned epochs `colate-{file}-*.bin`, tagged `magic`, written by an older default: they
/// decode and re-encode as they were, and a recorder asked for `coding` still writes them byte
/// for byte. Returns them beside the default's epochs of the same records, and every flow's
/// estimate from each.
fn pinned_epochs(file: &str, magic: &[u8; 4], coding: owl_core::colate::Coding) -> Pinned {
    use owl_core::colate::{ColateMethod, Config, Level};
    let (s, r) = records();
    let cfg = Config::for_level(Level::Medium, MEMORY, SEED).unwrap();
    let m = ColateMethod::new(cfg.clone()).unwrap();
    let older = ColateMethod::new(cfg.with_coding(coding)).unwrap();
    let (mut pinned, mut default) = (Vec::new(), Vec::new());
    let (mut old, mut new) = (Vec::new(), Vec::new());
    for (role, recs, tag) in [
        (Role::Sender, &s, "sender"),
        (Role::Receiver, &r, "receiver"),
    ] {
        let want = std::fs::read(golden(&format!("colate-{file}-{tag}.bin"))).unwrap();
        assert_eq!(&want[12..16], magic, "{tag}");
        let p = m.decode_point(role, &want).unwrap();
        let mut bytes = Vec::new();
        p.encode(&mut bytes);
        assert_eq!(bytes, want, "{tag}: re-encoded");
        let mut f = older.new_point(role);
        f.record_batch(recs);
        let mut bytes = Vec::new();
        f.encode(&mut bytes);
        assert_eq!(bytes, want, "{tag}: recorded with {coding:?}");
        let mut d = m.new_point(role);
        d.record_batch(recs);
        let mut bytes = Vec::new();
        d.encode(&mut bytes);
        pinned.push(want);
        default.push(bytes);
        old.push(p);
        new.push(d);
    }
    let flows = flows_of(&s);
    let estimate = |pts: &[Box<dyn owl_core::method::PointSynopsis>]| {
        m.estimate_flows(&*pts[0], &*pts[1], &flows)
            .unwrap()
            .unwrap()
    };
    Pinned {
        from_file: estimate(&old),
        from_default: estimate(&new),
        pinned: pinned.try_into().unwrap(),
        default: default.try_into().unwrap(),
    }
}

/// COLATE epochs from before the Rice coding (`CLE3`: fixed cells, the paper's placement;
/// `colate-cle3-*.bin`, written by that version): they decode and re-encode as they were, a
/// recorder asked for fixed cells (`colate:coding=fixed`) still writes them byte for byte, and
/// the default recorder's packed Huffman-coded epochs hold the same counters: every flow's
/// estimate is the same from either.
#[test]
fn colate_epochs_in_fixed_cells_still_read() {
    let p = pinned_epochs("cle3", b"CLE3", owl_core::colate::Coding::Fixed);
    for ((tag, want), bytes) in ["sender", "receiver"].iter().zip(&p.pinned).zip(&p.default) {
        assert_eq!(&bytes[12..16], b"CLP3", "{tag}");
        assert!(
            bytes.len() < want.len(),
            "{tag}: {} ≥ {}",
            bytes.len(),
            want.len()
        );
    }
    assert_eq!(p.from_file, p.from_default);
    assert!(p.from_file.iter().filter(|e| e.mean_ns.is_some()).count() > p.from_file.len() / 2);
}

/// COLATE epochs from before the Huffman coding (`CLR3`: Rice codes, the paper's placement;
/// `colate-clr3-*.bin`, written by that version, the default then): they decode and re-encode
/// as they were, a recorder asked for them (`colate:coding=rice`) still writes them byte for
/// byte, and the default's packed Huffman-coded epochs give every flow the same estimate.
#[test]
fn colate_rice_coded_epochs_still_read() {
    let p = pinned_epochs("clr3", b"CLR3", owl_core::colate::Coding::Rice);
    // (not smaller here: these epochs of ~1 200 counters are too small for their code tables
    // to pay)
    for bytes in &p.default {
        assert_eq!(&bytes[12..16], b"CLP3");
    }
    assert_eq!(p.from_file, p.from_default);
}

/// Huffman-coded COLATE epochs with byte-aligned blocks and a u16 block index (`CLH3`, the
/// default before the packed index; `colate-clh3-*.bin`, written by that version): they decode
/// and re-encode as they were, a recorder asked for them (`colate:coding=huffman`) still writes
/// them byte for byte, and the default's epochs give every flow the same estimate.
#[test]
fn colate_huffman_coded_epochs_still_read() {
    let p = pinned_epochs("clh3", b"CLH3", owl_core::colate::Coding::Huffman);
    assert_eq!(p.from_file, p.from_default);
}

/// The flows of `recs`, sorted, each once.
fn flows_of(recs: &[PacketRecord]) -> Vec<owl_core::FlowKey> {
    let mut f: Vec<_> = recs.iter().map(|x| x.flow).collect();
    f.sort();
    f.dedup();
    f
}
