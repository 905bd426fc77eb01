//! Hostile method payloads (what a synopsis file carries per interval) through every method's
//! decoder, at both roles, and — when one decodes — through the pair estimator against a fresh
//! synopsis: errors are fine, panics, hangs and huge allocations are not.
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_core::method::{BuildOptions, Method, Role};
use owl_core::registry::METHODS;

/// Every registered method, small where `--memory` sizes it (a budget too small for a method
/// falls back to its defaults).
fn methods() -> Vec<Box<dyn Method>> {
    METHODS
        .iter()
        .map(|m| {
            (m.build)(&BuildOptions {
                seed: 1,
                memory: Some(4096),
            })
            .or_else(|_| {
                (m.build)(&BuildOptions {
                    seed: 1,
                    memory: None,
                })
            })
            .expect("every registered method builds from its defaults")
        })
        .collect()
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
