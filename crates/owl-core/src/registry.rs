//! Every method owl knows, in the order reports list them: one descriptor
//! ([`MethodInfo`]) per method, exported by the method's own module. Adding a method is its
//! module and one line here; help texts, name lookup, `owl estimate`'s rebuilding from a file,
//! the fuzz target and the README check all iterate this list.
//!
//! A method that is not finished is not listed.
//!
//! Not listed on purpose: the "ideal" FineComb of RDA §VII, which repairs with the ground truth
//! and cannot exist in a deployment (the `rda-set-difference` experiment runs it directly,
//! `finecomb::estimate_ideal`).

use crate::method::{BuildOptions, MethodInfo, Role};
use crate::{colate, countmin, exact, finecomb, lda, lds, mpe, opa, probe, rda, rli, sample, sds};

pub const METHODS: &[&MethodInfo] = &[
    &exact::method::INFO,
    &lda::INFO,
    &probe::INFO,
    &rda::method::LATE,
    &rda::method::FIXED,
    &finecomb::INFO,
    &lds::SINGLE_BANK,
    &lds::MULTI_BANK,
    &lds::MULTI_BANK_DENSE,
    &sds::INFO,
    &rli::INFO,
    &mpe::TEN_PERCENT,
    &mpe::ONE_PERCENT,
    &countmin::INFO,
    &opa::LOSSLESS,
    &opa::WAVELET,
    &sample::INFO,
    &colate::INFO,
];

/// The descriptor of `name`.
pub fn find(name: &str) -> Option<&'static MethodInfo> {
    METHODS.iter().copied().find(|m| m.name == name)
}

/// Every name, comma-separated (for error messages).
pub fn names() -> String {
    METHODS
        .iter()
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a descriptor must give to be listed, checked: it builds a method of its own name at
/// its defaults, which rebuilds from its own configuration fields and decodes its own empty
/// synopses; it answers per flow, per packet and with recovered packets as the descriptor
/// says; its help texts are there. The registry's tests run it over [`METHODS`]; a method
/// defined outside the crate runs it on its own descriptor (`tests/contract.rs`).
pub fn check(info: &MethodInfo) -> Result<(), String> {
    let name = info.name;
    let m = (info.build)(&BuildOptions {
        seed: 5,
        memory: None,
    })
    .map_err(|e| format!("{name}: does not build at its defaults: {e}"))?;
    if m.name() != name {
        return Err(format!("{name}: builds a method named {}", m.name()));
    }
    let pairs: Vec<(String, String)> = m
        .config()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let again = (info.from_config)(&pairs)
        .map_err(|e| format!("{name}: does not rebuild from its configuration: {e}"))?;
    if again.config() != m.config() {
        return Err(format!(
            "{name}: rebuilt from its configuration, it has another"
        ));
    }
    for role in [Role::Sender, Role::Receiver] {
        let mut b = Vec::new();
        m.new_point(role).encode(&mut b);
        if let Err(e) = again.decode_point(role, &b) {
            return Err(format!(
                "{name}: its empty {role:?} synopsis does not decode: {e}"
            ));
        }
    }
    let (s, r) = (m.new_point(Role::Sender), m.new_point(Role::Receiver));
    for (what, promised, answers) in [
        (
            "per_flow",
            info.per_flow,
            m.estimate_flows(&*s, &*r, &[]).is_some(),
        ),
        (
            "per_packet",
            info.per_packet,
            m.estimate_packets(&*s, &*r).is_some(),
        ),
        (
            "recovers_delays",
            info.recovers_delays,
            m.recovered_packets(&*s, &*r).is_some(),
        ),
    ] {
        if promised != answers {
            return Err(format!(
                "{name}: {what} is {promised} but it answers {answers}"
            ));
        }
    }
    if [info.summary, info.samples, info.crosses].contains(&"") {
        return Err(format!(
            "{name}: a help text (summary, samples, crosses) is empty"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `info`'s method at its defaults, and its two points having recorded `sent` and
    /// `received`.
    fn recorded(
        info: &MethodInfo,
        sent: &[crate::record::PacketRecord],
        received: &[crate::record::PacketRecord],
    ) -> (
        Box<dyn crate::method::Method>,
        Box<dyn crate::method::PointSynopsis>,
        Box<dyn crate::method::PointSynopsis>,
    ) {
        let m = (info.build)(&BuildOptions {
            seed: 5,
            memory: None,
        })
        .unwrap();
        let mut s = m.new_point(Role::Sender);
        let mut r = m.new_point(Role::Receiver);
        s.record_batch(sent);
        r.record_batch(received);
        (m, s, r)
    }

    /// Every descriptor passes [`check`]; names are unique.
    #[test]
    fn every_descriptor_builds_and_rebuilds() {
        let mut seen = std::collections::HashSet::new();
        for info in METHODS {
            assert!(seen.insert(info.name), "{} listed twice", info.name);
            check(info).unwrap();
        }
        assert!(find("lda").is_some() && find("nope").is_none());
    }

    /// Every method's synopsis merges as the contract says (`PointSynopsis::merge`): at a
    /// receiver, recording `a`, merging a synopsis of `b` (kept, or decoded from what its file
    /// holds, `encode_local`, as `owl estimate` reads it) and recording `c` gives, byte for
    /// byte, the synopsis of `a ++ b ++ c` — for splits anywhere, empty parts included, over
    /// traffic with several flows, duplicated packets and timestamps out of order. A sender
    /// (whose cut needs no merge) merges the same way or refuses with an error.
    #[test]
    fn merging_is_recording_in_order() {
        use crate::record::{FlowKey, PacketRecord};
        let mut all: Vec<PacketRecord> = (0..6_000u64)
            .map(|i| PacketRecord {
                ts_ns: 1_000_000_000 + i * 10_000 + (i % 13) * 3_000,
                id: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i >> 7),
                len: 60 + (i % 1400) as u32,
                flow: FlowKey {
                    proto: 17,
                    sport: (i % 11) as u16,
                    dport: 53,
                    ..FlowKey::default()
                },
            })
            .collect();
        // duplicates, one of them across a split
        for k in [17usize, 2_999, 3_001, 5_500] {
            let mut d = all[k];
            d.ts_ns += 7;
            all.insert(k + 3, d);
        }
        let received: Vec<PacketRecord> = all
            .iter()
            .filter(|r| r.id % 40 != 0)
            .map(|r| PacketRecord {
                ts_ns: r.ts_ns + 1_000_000 + (r.id % 17) * 1_000,
                ..*r
            })
            .collect();
        let splits = [
            (0, 0),
            (0, 3_000),
            (1, 2),
            (1_000, 3_000),
            (3_000, 3_000),
            (2_500, 6_004),
        ];
        let mut refused = Vec::new();
        for info in METHODS {
            let m = (info.build)(&BuildOptions {
                seed: 5,
                memory: None,
            })
            .unwrap();
            let mut whole_pair = Vec::new();
            for (role, recs) in [(Role::Sender, &all), (Role::Receiver, &received)] {
                let mut whole = m.new_point(role);
                whole.record_batch(recs);
                let mut want = Vec::new();
                whole.encode(&mut want);
                for &(x, y) in &splits {
                    let (x, y) = (x.min(recs.len()), y.min(recs.len()));
                    for decoded in [false, true] {
                        let mut head = m.new_point(role);
                        head.record_batch(&recs[..x]);
                        let mut mid = m.new_point(role);
                        mid.record_batch(&recs[x..y]);
                        if decoded {
                            let mut b = Vec::new();
                            mid.encode_local(&mut b);
                            mid = m.decode_point(role, &b).unwrap();
                        }
                        if let Err(e) = head.merge(mid) {
                            assert_eq!(
                                role,
                                Role::Sender,
                                "{}: a receiver refused to merge ({x}, {y}, decoded {decoded}): {e}",
                                info.name
                            );
                            refused.push(info.name);
                            continue;
                        }
                        head.record_batch(&recs[y..]);
                        let mut got = Vec::new();
                        head.encode(&mut got);
                        assert!(
                            got == want,
                            "{} {role:?}: split at {x}, {y} (decoded {decoded}): the merged synopsis differs from the whole",
                            info.name
                        );
                    }
                }
                whole_pair.push(whole);
            }
            // a synopsis of another point, or of another method, is refused
            let mut s = m.new_point(Role::Sender);
            let other = (crate::registry::METHODS
                [(METHODS.iter().position(|i| i.name == info.name).unwrap() + 1) % METHODS.len()]
            .build)(&BuildOptions {
                seed: 5,
                memory: None,
            })
            .unwrap();
            assert!(
                s.merge(other.new_point(Role::Sender)).is_err(),
                "{}: merged another method's synopsis",
                info.name
            );
            let r = whole_pair.pop().unwrap();
            let s = whole_pair.pop().unwrap();
            assert!(m.estimate(s, r).is_ok(), "{}", info.name);
        }
        // senders that keep state chosen from their own stream refuse (probing, RLI's
        // references, OPA's group hashes)
        refused.dedup();
        assert_eq!(refused, ["probe", "rli", "opa", "opa-wavelet"]);
    }

    /// What `owl record` says crosses the network is what the pair estimate counts: where both
    /// points keep a synopsis, one sends it to the other, so a pair's `bytes` is the larger
    /// point's; methods whose traffic depends on the exchange (RDA) say so with `None` at both.
    #[test]
    fn shipped_bytes_are_the_estimates_bytes() {
        use crate::record::{FlowKey, PacketRecord};
        let sent: Vec<PacketRecord> = (0..20_000u64)
            .map(|i| PacketRecord {
                ts_ns: i * 10_000,
                id: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i >> 7),
                len: 100,
                flow: FlowKey {
                    sport: (i % 7) as u16,
                    ..FlowKey::default()
                },
            })
            .collect();
        let received: Vec<PacketRecord> = sent
            .iter()
            .filter(|r| r.id % 50 != 0)
            .map(|r| PacketRecord {
                ts_ns: r.ts_ns + 1_000_000,
                ..*r
            })
            .collect();
        for info in METHODS {
            let (m, s, r) = recorded(info, &sent, &received);
            let shipped = (s.shipped_len(), r.shipped_len());
            let e = m.estimate(s, r).unwrap();
            match shipped {
                (Some(a), Some(b)) => assert_eq!(a.max(b), e.bytes, "{}", info.name),
                (None, None) => assert!(e.bytes > 0, "{}", info.name),
                other => panic!("{}: {other:?}", info.name),
            }
        }
    }

    /// A method's recovered packets are the delays of its estimate's histogram, on the same
    /// basis, each the delay of the packet it names; methods without recovered delays have
    /// none. (The traffic is lost 1 in 50, and delayed by 1 ms plus up to 9.6 µs by identity,
    /// under the 10 µs between packets so that nothing is reordered, and so that a delay put
    /// on the wrong packet shows.)
    #[test]
    fn recovered_packets_are_the_estimates_recovered_delays() {
        use crate::method::RecoveredDelays;
        use crate::record::{FlowKey, PacketRecord};
        let delay = |id: u64| 1_000_000 + (id % 97) * 100;
        let sent: Vec<PacketRecord> = (0..20_000u64)
            .map(|i| PacketRecord {
                ts_ns: 1_000_000_000 + i * 10_000,
                id: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i >> 7),
                len: 100,
                flow: FlowKey::default(),
            })
            .collect();
        let mut received: Vec<PacketRecord> = sent
            .iter()
            .filter(|r| r.id % 50 != 0)
            .map(|r| PacketRecord {
                ts_ns: r.ts_ns + delay(r.id),
                ..*r
            })
            .collect();
        received.sort_by_key(|r| r.ts_ns);
        let mut answered = Vec::new();
        for info in METHODS {
            let (m, s, r) = recorded(info, &sent, &received);
            let packets = m.recovered_packets(&*s, &*r).map(Result::unwrap);
            let e = m.estimate(s, r).unwrap();
            let (Some(p), Some(rec)) = (&packets, &e.recovered) else {
                assert!(
                    packets.is_none() && e.recovered.is_none(),
                    "{}: recovered packets {} but recovered delays {}",
                    info.name,
                    packets.is_some(),
                    e.recovered.is_some()
                );
                continue;
            };
            answered.push(info.name);
            assert!(
                p.packets.len() > 1_000,
                "{}: {}",
                info.name,
                p.packets.len()
            );
            let delays: Vec<i64> = p.packets.iter().map(|p| p.delay_ns).collect();
            assert_eq!(&RecoveredDelays::of(&delays, p.basis), rec, "{}", info.name);
            let exact = info.name != "opa-wavelet";
            for q in &p.packets {
                let want = delay(q.id) as i64;
                assert!(q.id % 50 != 0, "{}: a lost packet recovered", info.name);
                if exact {
                    assert_eq!(q.delay_ns, want, "{}: packet {:#x}", info.name, q.id);
                } else {
                    assert!((q.delay_ns - want).abs() < 10_000, "{}", info.name);
                }
            }
        }
        assert_eq!(answered, ["opa", "opa-wavelet", "sample"]);
    }
}
