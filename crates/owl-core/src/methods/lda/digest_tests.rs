//! The identity digest (`lda:digest=on`, the module doc): foreign rows found and left out,
//! the paper's LDA (`digest=off`) kept byte for byte, both payloads' round trips and errors,
//! merging, and a seeded statistical check on a stream whose receiver holds foreign packets.

use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Weibull};
use rand_pcg::Pcg64Mcg;

use super::tests::{T0, ids_for_rows, mean_se, one_bank_all};
use super::*;
use crate::method::{Method, Role};

const FOREIGN_NOTE: &str =
    "rows hold packets the other point did not see with equal counters: left out (identity digest)";

fn owned(c: &Config) -> Vec<(String, String)> {
    c.pairs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// One bank of 4 rows, every packet sampled: two common packets in every row, and in row 1
/// one more packet `x` that S records and R loses, while R records a foreign packet `y` (of the
/// same row) that S never saw in the interval. Row 1's counters agree (3 = 3).
fn lost_and_foreign(c: &Config) -> (Synopsis, Synopsis, i128, u64, [u64; 2]) {
    let (mut s, mut r) = (Synopsis::new(c), Synopsis::new(c));
    let ids = ids_for_rows(&s, &[0, 0, 1, 1, 2, 2, 3, 3, 1, 1]);
    let delays = [100u64, 120, 90, 95, 130, 150, 80, 85];
    let mut exact_others = 0i128; // delays of the common packets outside row 1
    for (k, (&id, &d)) in ids[..8].iter().zip(&delays).enumerate() {
        let t = T0 + 1_000 * k as u64;
        s.record(id, t);
        r.record(id, t + d);
        if !(2..4).contains(&k) {
            exact_others += d as i128;
        }
    }
    let (x, y) = (ids[8], ids[9]);
    s.record(x, T0 + 500); // lost at R
    r.record(y, T0 + 40_000_000); // recorded by R, sent by S in the next interval
    let offset = 40_000_000 - 500;
    (s, r, exact_others, offset, [x, y])
}

/// A row that lost one packet and received a foreign one keeps equal counters: the paper's
/// LDA uses it and its mean is off by the foreign packet's timestamp difference; with the
/// digest the row is left out and named, and the mean over the other rows is exact. The
/// collapsed pair holding it is left out of every std estimator too.
#[test]
fn foreign_row_is_left_out_with_the_digest() {
    let common: i128 = [100, 120, 90, 95, 130, 150, 80, 85].iter().sum();

    let off = one_bank_all(4).with_digest(false);
    let (s, r, _, offset, _) = lost_and_foreign(&off);
    assert_eq!(s.bucket(0, 1).count, r.bucket(0, 1).count);
    assert!(s.bank(0).iter().chain(r.bank(0)).all(|b| b.digest == 0));
    let e = estimate(&s, &r).unwrap();
    assert!(!e.digest_used);
    assert_eq!((e.banks[0].usable_rows, e.banks[0].foreign_rows), (4, 0));
    assert_eq!(e.effective_samples, 9);
    // the foreign row adds ts_R(y) − ts_S(x) instead of a delay
    assert_eq!(e.delay_sum_ns, common + offset as i128);
    let exact_all = common as f64 / 8.0;
    let m = e.mean_ns.unwrap();
    assert!((m - (common + offset as i128) as f64 / 9.0).abs() < 1e-6);
    assert!(m > 1000.0 * exact_all, "off by the interval: {m}");
    assert_eq!(e.collapsed_usable, 2);
    assert_eq!(e.rows.units, 4);
    let est = method::to_estimate(&e, 0);
    assert!(!est.notes.iter().any(|n| n.contains(FOREIGN_NOTE)));

    let on = one_bank_all(4);
    let (s, r, exact_others, _, [x, y]) = lost_and_foreign(&on);
    // the digests differ by exactly δ(x) − δ(y): the low 32 bits of the row hash values
    let (dx, dy) = (s.identity_value(x), s.identity_value(y));
    assert_ne!(dx, dy);
    assert_eq!(
        s.bucket(0, 1).digest.wrapping_sub(r.bucket(0, 1).digest),
        dx.wrapping_sub(dy)
    );

    for i in [0, 2, 3] {
        assert_eq!(s.bucket(0, i).digest, r.bucket(0, i).digest, "row {i}");
    }
    let e = estimate(&s, &r).unwrap();
    assert!(e.digest_used);
    let b = &e.banks[0];
    assert_eq!(
        (b.usable_rows, b.foreign_rows, b.excess_rows),
        (3, 1, 0),
        "{b:?}"
    );
    assert_eq!(e.effective_samples, 6);
    assert_eq!(e.delay_sum_ns, exact_others);
    assert_eq!(e.mean_ns, Some(exact_others as f64 / 6.0));
    // pair (0, 1) holds the foreign row: out under both collapse rules; rows: 3 units
    assert_eq!(e.collapsed_usable, 1);
    assert_eq!(e.collapsed_samples, 4);
    assert_eq!(e.rows.units, 3);
    assert_eq!((e.paper.units, e.centred.units), (1, 1));
    let paper = estimate_with(&s, &r, CollapseRule::Paper).unwrap();
    assert_eq!(paper.collapsed_usable, 1);
    assert_eq!(paper.second_moment_ns2, e.second_moment_ns2);
    let est = method::to_estimate(&e, 0);
    assert!(
        est.notes.iter().any(|n| n == &format!("1 {FOREIGN_NOTE}")),
        "{est:?}"
    );
    assert!(
        est.notes.iter().any(|n| n.contains("1 foreign")),
        "the bank's note counts it: {est:?}"
    );
}

/// When every row with packets is foreign, there is no mean and the advice says the points did
/// not see the same packets (not that a bank should be tuned toward more loss).
#[test]
fn only_foreign_rows_is_advice_about_the_packets() {
    let c = one_bank_all(2);
    let (mut s, mut r) = (Synopsis::new(&c), Synopsis::new(&c));
    let ids = ids_for_rows(&s, &[0, 0, 1, 1]);
    s.record(ids[0], T0);
    r.record(ids[1], T0 + 10);
    s.record(ids[2], T0);
    r.record(ids[3], T0 + 10);
    let e = estimate(&s, &r).unwrap();
    assert_eq!(e.mean_ns, None);
    assert_eq!(e.banks[0].foreign_rows, 2);
    let est = method::to_estimate(&e, 0);
    assert!(
        est.notes.iter().any(|n| n.starts_with("no usable row")
            && n.contains("2 other packets than the sender's with equal counters")),
        "{est:?}"
    );
    assert!(est.notes.iter().any(|n| n == &format!("2 {FOREIGN_NOTE}")));
}

/// Both payloads round-trip; every truncation is an error; an `LDA1` payload reads under a
/// configuration recorded before the field (digest absent: `on`) as a synopsis without digests,
/// which re-encodes byte for byte and which the estimator does not check by digest; an `LDA2`
/// payload under `digest=off` is refused naming the field.
#[test]
fn payloads_round_trip_and_old_payloads_read() {
    let base = Config::tuned(8, &[0.01, 0.1], 1000, 3).unwrap();
    for digest in [true, false] {
        let c = base.clone().with_digest(digest);
        let mut a = Synopsis::new(&c);
        for id in 0..5000u64 {
            a.record(id.wrapping_mul(0x9e37_79b9_7f4a_7c15), T0 + id);
        }
        assert_eq!(a.has_digests(), digest);
        let mut b = Vec::new();
        a.encode(&mut b);
        let row = if digest { 16 } else { 12 };
        assert_eq!(b.len(), 10 + row * 16);
        assert_eq!(b.len(), c.encoded_len());
        assert_eq!(&b[..4], if digest { b"LDA2" } else { b"LDA1" });
        let d = Synopsis::decode(&c, &b).unwrap();
        assert_eq!(d.has_digests(), digest);
        for j in 0..2 {
            assert_eq!(d.bank(j), a.bank(j));
        }
        assert!(a.bank(0).iter().any(|x| x.digest != 0) == digest);
        for cut in 0..b.len() {
            assert!(
                Synopsis::decode(&c, &b[..cut]).is_err(),
                "{digest} cut {cut}"
            );
        }
        let mut long = b.clone();
        long.push(0);
        assert!(Synopsis::decode(&c, &long).is_err());
        if digest {
            let e = Synopsis::decode(&base.clone().with_digest(false), &b).unwrap_err();
            assert!(e.to_string().contains("digest=off"), "{e}");
            // an LDA2 tag on an LDA1 body (12-byte rows) is a length error, not a panic
            let mut plain = Vec::new();
            let mut p = Synopsis::new(&base.clone().with_digest(false));
            p.record(1, T0);
            p.encode(&mut plain);
            plain[..4].copy_from_slice(b"LDA2");
            assert!(Synopsis::decode(&c, &plain).is_err());
        } else {
            // a file recorded before the field: its configuration has no `digest`, read as on
            let old: Vec<(String, String)> = owned(&c)
                .into_iter()
                .filter(|(k, _)| k != "digest")
                .collect();
            let cfg = Config::from_pairs(&old).unwrap();
            assert!(cfg.digest());
            let m = LdaMethod::new(cfg.clone());
            let p = m.decode_point(Role::Sender, &b).unwrap();
            assert_eq!(p.encoded_len(), b.len());
            let mut again = Vec::new();
            p.encode(&mut again);
            assert_eq!(again, b, "an LDA1 payload re-encodes byte for byte");
            let d = Synopsis::decode(&cfg, &b).unwrap();
            assert!(!d.has_digests());
            // the estimator does not use digests unless both points kept them
            let fresh = Synopsis::new(&cfg);
            assert!(fresh.has_digests());
            assert!(!estimate(&d, &d).unwrap().digest_used);
            assert!(!estimate(&d, &fresh).unwrap().digest_used);
            assert!(!estimate(&fresh, &d).unwrap().digest_used);
            assert!(estimate(&fresh, &fresh).unwrap().digest_used);
            // and says so through the method
            let est = m
                .estimate(
                    m.decode_point(Role::Sender, &b).unwrap(),
                    m.decode_point(Role::Receiver, &b).unwrap(),
                )
                .unwrap();
            assert!(
                est.notes
                    .iter()
                    .any(|n| n.starts_with("identity digest not used: neither synopsis")),
                "{est:?}"
            );
        }
    }
}

proptest::proptest! {
    /// Hostile payloads under either configuration: an error or a synopsis, never a panic.
    #[test]
    fn hostile_payloads_never_panic(
        tag in 0usize..3,
        head in proptest::collection::vec(proptest::num::u8::ANY, 0..12),
        body in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
    ) {
        let c = Config::new(4, Sampling::Probabilities(vec![0.5]), 1).unwrap();
        let mut b = [b"LDA1".as_slice(), b"LDA2", b"LDA3"][tag].to_vec();
        b.extend_from_slice(&head);
        b.extend_from_slice(&body);
        for digest in [true, false] {
            let _ = Synopsis::decode(&c.clone().with_digest(digest), &b);
        }
        // a well-formed header with any body: only the exact length decodes
        let mut w = b"LDA2\x01\x00\x04\x00\x00\x00".to_vec();
        w.extend_from_slice(&body);
        proptest::prop_assert_eq!(Synopsis::decode(&c, &w).is_ok(), body.len() == 64);
    }
}

/// The digest configuration field: printed, parsed, compared between the points; `off` is
/// the paper's LDA; the std estimator and the digest are independent fields.
#[test]
fn digest_is_a_config_field() {
    let d = Config::paper_default(1);
    assert!(d.digest());
    assert!(d.pairs().contains(&("digest", "on".into())));
    let off = d.clone().with_digest(false);
    assert!(off.pairs().contains(&("digest", "off".into())));
    assert_eq!(Config::from_pairs(&owned(&off)).unwrap(), off);
    let p = vec![("digest".to_string(), "off".to_string())];
    assert_eq!(Config::from_pairs(&p).unwrap(), off);
    let e = estimate(&Synopsis::new(&d), &Synopsis::new(&off)).unwrap_err();
    assert!(
        e.to_string()
            .contains("digest is on at the sender but off at the receiver"),
        "{e}"
    );
    assert_eq!(
        LdaMethod::new(off.clone())
            .new_point(Role::Sender)
            .encoded_len(),
        12_298
    );
    assert_eq!(
        LdaMethod::new(d).new_point(Role::Sender).encoded_len(),
        16_394
    );
}

/// Merging adds digests (wrapping) as recording does: the merge of two halves is the synopsis
/// of the whole stream, digest for digest. Merging a synopsis with digests and one without is
/// refused either way.
#[test]
fn merge_adds_digests_and_refuses_mixed_layouts() {
    let c = Config::tuned(64, &[0.01, 0.1], 10_000, 4).unwrap();
    let m = LdaMethod::new(c.clone());
    let (mut whole, mut first, mut later) = (
        m.new_point(Role::Receiver),
        m.new_point(Role::Receiver),
        m.new_point(Role::Receiver),
    );
    let recs: Vec<crate::PacketRecord> = (0..20_000u64)
        .map(|i| crate::PacketRecord {
            ts_ns: T0 + 100 * i,
            id: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x55,
            ..Default::default()
        })
        .collect();
    whole.record_batch(&recs);
    first.record_batch(&recs[..7_000]);
    later.record_batch(&recs[7_000..]);
    // through bytes, as a receiver's point merges what it held at a cut
    let mut lb = Vec::new();
    later.encode(&mut lb);
    first
        .merge(m.decode_point(Role::Receiver, &lb).unwrap())
        .unwrap();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    whole.encode(&mut a);
    first.encode(&mut b);
    assert_eq!(a, b);
    let s = Synopsis::decode(&c, &a).unwrap();
    assert!(s.bank(0).iter().any(|x| x.digest != 0));

    // an LDA1 payload of the same configuration (recorded before the field) carries none
    let mut plain = Vec::new();
    Synopsis::new(&c.clone().with_digest(false)).encode(&mut plain);
    let no_digests = || m.decode_point(Role::Receiver, &plain).unwrap();
    let mut with = m.new_point(Role::Receiver);
    let e = with.merge(no_digests()).unwrap_err().to_string();
    assert!(
        e.contains("without identity digests (LDA1) into one with identity digests (LDA2)"),
        "{e}"
    );
    let mut without = no_digests();
    let e = without
        .merge(m.new_point(Role::Receiver))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("with identity digests (LDA2) into one without identity digests (LDA1)"),
        "{e}"
    );
    // two without: fine, and still without
    let mut without = no_digests();
    without.merge(no_digests()).unwrap();
    let mut again = Vec::new();
    without.encode(&mut again);
    assert_eq!(again, plain);
    // another configuration: the field that differs
    let other = LdaMethod::new(c.clone().with_digest(false));
    let e = m
        .new_point(Role::Receiver)
        .merge(other.new_point(Role::Receiver))
        .unwrap_err()
        .to_string();
    assert!(e.contains("digest is on"), "{e}");
}

/// A FIFO stream of `n + k` packets (Weibull delays): S's interval holds packets `0..n`, R's
/// holds packets `k..n + k` — R's cut fell `k` packets late (a cut that fell back to a clock,
/// or packets reordered across it): the first `k` packets of S's interval are missing at R and
/// replaced by `k` foreign packets from S's next interval, so both points count `n` packets.
/// The truth is the mean delay of the packets both saw (`k..n`).
struct Shifted {
    ids: Vec<u64>,
    send: Vec<u64>,
    recv: Vec<u64>,
    n: usize,
    k: usize,
    mean: f64,
    std: f64,
}

fn shifted_trace(n: usize, k: usize, seed: u64) -> Shifted {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let w = Weibull::new(133.0f64, 0.7).unwrap();
    let (mut ids, mut send, mut recv) = (vec![], vec![], vec![]);
    let mut t = T0;
    for _ in 0..n + k {
        let d = w.sample(&mut rng).round() as u64;
        ids.push(rng.random::<u64>());
        send.push(t);
        recv.push(t + d);
        t += d + 134; // one packet in flight at a time: FIFO
    }
    let both = k..n;
    let w = |i: usize| (recv[i] - send[i]) as f64;
    let mean = both.clone().map(w).sum::<f64>() / both.len() as f64;
    let var = both.clone().map(|i| (w(i) - mean).powi(2)).sum::<f64>() / both.len() as f64;
    Shifted {
        std: var.sqrt(),
        ids,
        send,
        recv,
        n,
        k,
        mean,
    }
}

fn run_shifted(c: &Config, t: &Shifted) -> LdaEstimate {
    let (mut s, mut r) = (Synopsis::new(c), Synopsis::new(c));
    s.record_all(&t.ids[..t.n], &t.send[..t.n]);
    r.record_all(&t.ids[t.k..], &t.recv[t.k..]);
    estimate(&s, &r).unwrap()
}

/// The seeded check: 200 runs (5 traces × 40 LDA seeds) of the default two banks tuned for the
/// trace, on a lossless stream of 200 000 packets where 1 % of R's packets are foreign (same
/// count at both points). With the digest the mean is inside its own 98 % interval in at least
/// 97 % of the runs, its average over the runs is within 4 standard errors (from the spread
/// over runs) of the truth, and no foreign row is used. Without it the foreign rows' timestamp
/// differences (about an interval each) put the mean outside its own interval in most runs, and
/// its average error is hundreds of standard errors. The std (owl's default rows estimator):
/// within the paper's 10 % on average with the digest (§IV-A, Fig. 4(c)), off by orders of
/// magnitude without it.
#[test]
fn foreign_packets_break_the_paper_lda_but_not_the_digest() {
    let (n, k) = (200_000usize, 2_000usize);
    let (traces, seeds) = (5u64, 40u64);
    let runs = (traces * seeds) as f64;
    let (mut inside_on, mut inside_off) = (0u32, 0u32);
    let (mut err_on, mut err_off) = (Vec::new(), Vec::new());
    let (mut std_on, mut std_off) = (0f64, 0f64);
    let mut foreign = 0usize;
    for tr in 0..traces {
        let t = shifted_trace(n, k, 700 + tr);
        for seed in 0..seeds {
            let c =
                Config::tuned(512, &DEFAULT_TARGETS, n as u64, 40_000 + 100 * tr + seed).unwrap();
            for (digest, inside, err, std_err) in [
                (true, &mut inside_on, &mut err_on, &mut std_on),
                (false, &mut inside_off, &mut err_off, &mut std_off),
            ] {
                let e = run_shifted(&c.clone().with_digest(digest), &t);
                assert_eq!(e.digest_used, digest);
                let d = e.mean_ns.unwrap();
                let [lo, hi] = e.mean_ci98_ns.unwrap();
                *inside += (lo <= t.mean && t.mean <= hi) as u32;
                err.push(d - t.mean);
                *std_err += (e.std_ns.unwrap() - t.std).abs() / t.std / runs;
                if digest {
                    foreign += e.banks.iter().map(|b| b.foreign_rows).sum::<usize>();
                }
            }
        }
    }
    assert!(
        foreign as f64 > 10.0 * runs,
        "foreign rows found: {foreign}"
    );
    assert!(
        inside_on as f64 >= 0.97 * runs,
        "with the digest, inside its 98 % interval: {inside_on}/{runs}"
    );
    let (m, se) = mean_se(&err_on);
    assert!(m.abs() < 4.0 * se, "digest: mean error {m} (se {se})");
    assert!(std_on < 0.10, "digest: std relative error {std_on}");
    assert!(
        (inside_off as f64) < 0.1 * runs,
        "without the digest, inside its 98 % interval: {inside_off}/{runs}"
    );
    let (m, se) = mean_se(&err_off);
    assert!(m > 50.0 * se, "no digest: mean error {m} (se {se})");
    assert!(std_off > 100.0, "no digest: std relative error {std_off}");
}

/// What the digest costs and buys, printed for the record (`cargo test -p owl-core --lib
/// digest_cost -- --ignored --nocapture`): usable rows and samples of the default two banks on
/// a lossless stream, one with 1 % loss, and one with 1 % foreign packets at R, both variants.
#[test]
#[ignore]
fn digest_cost() {
    let (n, k) = (200_000usize, 2_000usize);
    let seeds = 50u64;
    let shifted = shifted_trace(n, k, 1);
    // the same stream without the shift, and with 1 % uniform loss instead
    let clean = shifted_trace(n, 0, 1);
    let mut rng = Pcg64Mcg::seed_from_u64(2);
    let kept: Vec<usize> = (0..n).filter(|_| !rng.random_bool(0.01)).collect();
    for (name, digest) in [("digest=on ", true), ("digest=off", false)] {
        for case in ["clean", "1 % loss", "1 % foreign"] {
            let (mut usable, mut foreign, mut samples, mut abs_err) = (0usize, 0usize, 0u64, 0f64);
            for seed in 0..seeds {
                let c = Config::tuned(512, &DEFAULT_TARGETS, n as u64, 90 + seed)
                    .unwrap()
                    .with_digest(digest);
                let (e, truth) = match case {
                    "clean" => (run_shifted(&c, &clean), clean.mean),
                    "1 % foreign" => (run_shifted(&c, &shifted), shifted.mean),
                    _ => {
                        let (mut s, mut r) = (Synopsis::new(&c), Synopsis::new(&c));
                        s.record_all(&clean.ids[..n], &clean.send[..n]);
                        let mut sum = 0.0;
                        for &i in &kept {
                            r.record(clean.ids[i], clean.recv[i]);
                            sum += (clean.recv[i] - clean.send[i]) as f64;
                        }
                        (estimate(&s, &r).unwrap(), sum / kept.len() as f64)
                    }
                };
                usable += e.banks.iter().map(|b| b.usable_rows).sum::<usize>();
                foreign += e.banks.iter().map(|b| b.foreign_rows).sum::<usize>();
                samples += e.effective_samples;
                abs_err += (e.mean_ns.unwrap() - truth).abs() / truth;
            }
            let s = seeds as f64;
            eprintln!(
                "{name} {case:>12}: usable rows {:7.1}/1024, foreign rows {:5.1}, samples {:8.1}, mean relative error {:.2e}",
                usable as f64 / s,
                foreign as f64 / s,
                samples as f64 / s,
                abs_err / s
            );
        }
    }
}
