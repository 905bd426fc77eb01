//! Hostile method payloads (what a synopsis file carries per interval) through every method's
//! decoder, at both roles, and — when one decodes — through the pair estimator against a fresh
//! synopsis: errors are fine, panics, hangs and huge allocations are not.
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_core::method::{Method, Role};
use owl_core::{countmin, finecomb, lda, lds, mpe, probe, rda, rli, sds};

fn methods() -> Vec<Box<dyn Method>> {
    let small = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    vec![
        Box::new(owl_core::exact::method::ExactMethod),
        Box::new(lda::LdaMethod::new(
            lda::Config::from_pairs(&small(&[("rows", "16")])).unwrap(),
        )),
        Box::new(probe::ProbeMethod::new(probe::Config::new(144.0, 1).unwrap())),
        Box::new(
            rda::RdaMethod::new("rda-fixed", rda::Config::fixed(16)).unwrap(),
        ),
        Box::new(rda::RdaMethod::new("rda", rda::Config::default()).unwrap()),
        Box::new(
            finecomb::FineCombMethod::new(
                finecomb::Config::from_pairs(&small(&[("buckets", "16")]))
                    .unwrap_or_default(),
            )
            .unwrap(),
        ),
        Box::new(
            lds::LdsMethod::new(
                "lds",
                lds::Config::from_pairs(&small(&[("rows", "2"), ("columns", "16")])).unwrap(),
            )
            .unwrap(),
        ),
        Box::new(
            sds::SdsMethod::new(sds::Config {
                rows: 2,
                columns: 16,
                seed: 1,
            })
            .unwrap(),
        ),
        Box::new(rli::RliMethod::new(rli::Config::paper(1)).unwrap()),
        Box::new(mpe::MpeMethod::new("mpe", mpe::Config::from_pairs(&[]).unwrap()).unwrap()),
        Box::new(
            countmin::CountMinMethod::new(countmin::Config {
                rows: 2,
                width: 16,
                seed: 1,
            })
            .unwrap(),
        ),
    ]
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, payload)) = data.split_first() else {
        return;
    };
    let ms = methods();
    let m = &ms[which as usize % ms.len()];
    for role in [Role::Sender, Role::Receiver] {
        if let Ok(p) = m.decode_point(role, payload) {
            let other = match role {
                Role::Sender => m.new_point(Role::Receiver),
                Role::Receiver => m.new_point(Role::Sender),
            };
            let (s, r) = match role {
                Role::Sender => (p, other),
                Role::Receiver => (other, p),
            };
            let _ = m.estimate(s, r);
        }
    }
});
