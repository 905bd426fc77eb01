//! The method contract holds from outside the crate: a method defined here, in a test, and
//! nowhere else (its configuration declared by `method_config!`, its synopsis a
//! `TypedSynopsis`, itself a `TypedMethod`, its descriptor a `MethodInfo`), listed by one line
//! in a registry of its own, passes the registry's check of every listed descriptor, runs
//! through the streaming pipeline beside a registered method, is written to and read back from
//! a synopsis file, is rebuilt from its configuration fields through its descriptor, and gives
//! the same estimate both ways. Adding it to `owl` is this module and one line in
//! `registry::METHODS`, as ARCHITECTURE.md's "Adding a method" says (checked below).
//!
//! The method is the smallest sound one: one cell of timestamp sums and counts per point (a
//! one-bucket LDA, Kompella et al., SIGCOMM'09 §3), whose mean `(ΣT_R − ΣT_S) / n` is exact
//! when no packet is lost.

use std::sync::Arc;

use owl_core::interval::Intervals;
use owl_core::method::{
    BuildOptions, DeclaredConfig, Estimate, Method, MethodError, MethodInfo, PointSynopsis, Role,
    TypedMethod, TypedSynopsis,
};
use owl_core::pipeline::{NoHook, NoTimer, PairPipeline, PipelineConfig};
use owl_core::wire::{DecodeError, SynopsisFile, WireReader, WireWriter};
use owl_core::{FlowKey, PacketRecord};

/// Per point: the sum of the timestamps and the number of packets.
#[derive(Default)]
struct Synopsis {
    sum_ns: u128,
    packets: u64,
}

impl TypedSynopsis for Synopsis {
    const METHOD: &'static str = "one-cell";
    fn record(&mut self, rec: &PacketRecord) {
        self.sum_ns += rec.ts_ns as u128;
        self.packets += 1;
    }
    fn encoded_len(&self) -> usize {
        24
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let mut w = WireWriter::new(out);
        w.u128(self.sum_ns);
        w.u64(self.packets);
    }
    /// The sums and the counts added.
    fn merge(&mut self, later: Synopsis) -> Result<(), MethodError> {
        self.sum_ns = self.sum_ns.wrapping_add(later.sum_ns);
        self.packets = self.packets.wrapping_add(later.packets);
        Ok(())
    }
}

owl_core::method_config! {
    /// `scale` is a configuration field only so that the round trip through a synopsis file's
    /// configuration has something to carry and to refuse.
    #[derive(Clone)]
    struct Config for "one-cell" {
        scale: u64,
    }
}

struct OneCell {
    cfg: Config,
}

/// A point's cell from its payload.
fn decode(bytes: &[u8]) -> Result<Synopsis, DecodeError> {
    let mut r = WireReader::new(bytes);
    let lo = r.u64("sum (low)")? as u128;
    let hi = r.u64("sum (high)")? as u128;
    let packets = r.u64("packets")?;
    r.finish("one-cell synopsis")?;
    Ok(Synopsis {
        sum_ns: hi << 64 | lo,
        packets,
    })
}

impl TypedMethod for OneCell {
    type Config = Config;
    type Sender = Synopsis;
    type Receiver = Synopsis;
    fn name(&self) -> &str {
        "one-cell"
    }
    fn config(&self) -> &Config {
        &self.cfg
    }
    fn foreign(&self) -> owl_core::method::Foreign {
        owl_core::method::Foreign::AssumesNone("test: one sum")
    }
    fn new_sender(&self) -> Synopsis {
        Synopsis::default()
    }
    fn new_receiver(&self) -> Synopsis {
        Synopsis::default()
    }
    fn decode_sender(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        decode(bytes)
    }
    fn decode_receiver(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        decode(bytes)
    }
    fn estimate(&self, s: Synopsis, r: Synopsis) -> Result<Estimate, MethodError> {
        let mut e = Estimate {
            bytes: 24,
            samples: s.packets,
            lost: Some(s.packets.saturating_sub(r.packets)),
            ..Default::default()
        };
        if s.packets == r.packets && s.packets > 0 {
            let diff = r.sum_ns as f64 - s.sum_ns as f64;
            e.mean_ns = Some(diff / s.packets as f64 * self.cfg.scale as f64);
        } else {
            e.notes
                .push("a packet was lost: the one cell is unusable".into());
        }
        Ok(e)
    }
}

const INFO: MethodInfo = MethodInfo {
    name: "one-cell",
    summary: "one cell of timestamp sums (a one-bucket LDA), exact without loss",
    samples: "packets at the sender",
    per_flow: false,
    per_packet: false,
    recovers_delays: false,
    crosses: "each point's 24-byte cell, one way",
    build: |_o: &BuildOptions| {
        Ok(Box::new(OneCell {
            cfg: Config { scale: 1 },
        }))
    },
    from_config: |pairs| {
        let cfg = DeclaredConfig::over(Config { scale: 1 }, pairs)?;
        Ok(Box::new(OneCell { cfg }))
    },
};

/// The registry this test adds its method to: the one line `registry::METHODS` would get.
const LISTED: &[&MethodInfo] = &[&owl_core::exact::method::INFO, &INFO];

/// About 20 000 packets over 200 ms, delays 10–60 µs, none lost, none sent in the last 100 µs
/// of a 50 ms interval (so every packet arrives in the interval it was sent in); R in arrival
/// order.
fn pair() -> (Vec<PacketRecord>, Vec<PacketRecord>) {
    let mut s = Vec::new();
    let mut r = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..20_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let ts_ns = 1_000_000_000 + i * 10_000;
        if ts_ns % 50_000_000 > 49_900_000 {
            continue;
        }
        let rec = PacketRecord {
            ts_ns,
            id: x,
            len: 100,
            flow: FlowKey::default(),
        };
        s.push(rec);
        r.push(PacketRecord {
            ts_ns: rec.ts_ns + 10_000 + x % 50_000,
            ..rec
        });
    }
    r.sort_by_key(|p| p.ts_ns);
    (s, r)
}

#[test]
fn a_method_defined_outside_the_crate_follows_the_contract() {
    let (s, r) = pair();
    // 0. listed, it passes what the registry asks of every descriptor
    for info in LISTED {
        owl_core::registry::check(info).unwrap();
    }
    let methods: Vec<Arc<dyn Method>> = LISTED
        .iter()
        .map(|info| Arc::from((info.build)(&BuildOptions::default()).unwrap()))
        .collect();
    let ours = methods[1].clone();
    let intervals = Intervals {
        length_ns: 50_000_000,
        origin_ns: 0,
    };

    // 1. the streaming pipeline, beside the exact method, interval by interval
    let mut p = PairPipeline::new(
        PipelineConfig {
            intervals,
            disorder_ns: 0,
        },
        methods.clone(),
        None,
    );
    for (role, recs) in [(Role::Sender, &s), (Role::Receiver, &r)] {
        for batch in recs.chunks(1000) {
            p.push(role, batch, &mut NoTimer, &mut NoHook);
        }
        p.finish_point(role, &mut NoTimer, &mut NoHook);
    }
    let (outcomes, _, _) = p.finish();
    assert!(outcomes.len() >= 4, "{} intervals", outcomes.len());
    for o in &outcomes {
        let est = |k: usize| o.estimates[k].as_ref().unwrap().as_ref().unwrap().clone();
        let (exact, one) = (est(0), est(1));
        let (m, e) = (one.mean_ns.unwrap(), exact.mean_ns.unwrap());
        assert!((m - e).abs() < 1e-6 * e, "interval {}: {m} vs {e}", o.index);
        assert_eq!(one.samples, exact.samples);
    }

    // 2. one point's synopsis to a synopsis file and back, rebuilt from the descriptor
    let (mut a, mut b) = (ours.new_point(Role::Sender), ours.new_point(Role::Receiver));
    a.record_batch(&s);
    b.record_batch(&r);
    let file = |role, syn: &dyn PointSynopsis| {
        let mut payload = Vec::new();
        syn.encode(&mut payload);
        assert_eq!(payload.len(), syn.encoded_len());
        SynopsisFile {
            method: INFO.name.into(),
            role,
            intervals: Intervals::aligned(0),
            identity_seed: 0,
            identity_bytes: None,
            config: ours
                .config()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            cut: Vec::new(),
            points: vec![(0, payload)],
        }
        .encode()
    };
    let (fa, fb) = (
        SynopsisFile::decode(&file(Role::Sender, a.as_ref())).unwrap(),
        SynopsisFile::decode(&file(Role::Receiver, b.as_ref())).unwrap(),
    );
    SynopsisFile::check_pair(&fa, &fb).unwrap();
    let rebuilt = (INFO.from_config)(&fa.config).unwrap();
    let back = rebuilt
        .estimate(
            rebuilt.decode_point(Role::Sender, &fa.points[0].1).unwrap(),
            rebuilt
                .decode_point(Role::Receiver, &fb.points[0].1)
                .unwrap(),
        )
        .unwrap();
    let direct = ours.estimate(a, b).unwrap();
    assert_eq!(back, direct);
    let truth: f64 = s
        .iter()
        .map(|p| {
            let q = r.iter().find(|q| q.id == p.id).unwrap();
            (q.ts_ns - p.ts_ns) as f64
        })
        .sum::<f64>()
        / s.len() as f64;
    let m = direct.mean_ns.unwrap();
    assert!((m - truth).abs() < 1e-6 * truth, "{m} vs {truth}");

    // 3. a configuration this method does not know is refused, naming the field
    let bad = (INFO.from_config)(&[("banks".into(), "2".into())])
        .err()
        .unwrap();
    assert!(bad.to_string().contains("banks"), "{bad}");
}

/// ARCHITECTURE.md's "Adding a method" list is what the code asks: the method's module (one
/// `pub mod` line in `methods/mod.rs`, reached as `owl_core::NAME` through `lib.rs`'s glob
/// re-export) and one line in `registry::METHODS`, as the method above shows; the tables by
/// name that `owl` kept (what `samples` counts) are the descriptors' now.
#[test]
fn architecture_says_what_adding_a_method_touches() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let read = |p: &str| std::fs::read_to_string(format!("{root}/{p}")).unwrap();
    let arch = read("ARCHITECTURE.md");
    let list = arch
        .split("### Adding a method")
        .nth(1)
        .expect("ARCHITECTURE.md has an \"Adding a method\" section")
        .split("\n#")
        .next()
        .unwrap();
    for named in [
        "crates/owl-core/src/methods/",
        "`pub mod`",
        "`registry::METHODS`",
        "`tests/contract.rs`",
    ] {
        assert!(list.contains(named), "the list does not name {named}");
    }
    // a module is one line in methods/mod.rs (nothing else is there), lib.rs re-exports them
    // all, and a descriptor is one line in the registry
    let mods = read("crates/owl-core/src/methods/mod.rs");
    for line in mods
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
    {
        assert!(
            line.starts_with("pub mod ") && line.ends_with(';'),
            "methods/mod.rs: {line}"
        );
    }
    assert!(read("crates/owl-core/src/lib.rs").contains("pub use methods::*;"));
    let registry = read("crates/owl-core/src/registry.rs");
    let list = registry
        .split("pub const METHODS: &[&MethodInfo] = &[")
        .nth(1)
        .unwrap()
        .split("];")
        .next()
        .unwrap();
    let lines: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), owl_core::registry::METHODS.len(), "{lines:?}");
    assert!(lines.iter().all(|l| l.starts_with('&') && l.ends_with(',')));
    // owl's methods layer keeps no table by method name (`exact` is the truth's row)
    let owl = read("crates/owl/src/methods.rs");
    let code = owl.split("#[cfg(test)]").next().unwrap();
    for info in owl_core::registry::METHODS {
        if info.name != "exact" {
            assert!(
                !code.contains(&format!("\"{}\"", info.name)),
                "crates/owl/src/methods.rs names {}",
                info.name
            );
        }
    }
}
