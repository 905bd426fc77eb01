//! OPA's tests: the paper's worked example, random recovery, the enumeration cap.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::cah::{self, Cah, MAX_ROWS};
use super::recovery::{Limits, Unrecovered, check_mapping, recover};

/// The example's "very simple augmented hash": `h_ij = s_ij ++ j`, decimal concatenation.
fn concat(s: u64, j: u64) -> u64 {
    10 * s + j
}

fn cah_of(k: usize, xs: &[u64], aug: &dyn Fn(u64, u64) -> u64) -> Cah {
    let mut b = [0; MAX_ROWS];
    for (i, &x) in xs.iter().enumerate() {
        cah::accumulate(&mut b, k, i as u64 + 1, aug(x, i as u64 + 1));
    }
    b
}

/// §IV-E: packets (2, 5, 7), A = [[1,1,1],[1,2,3]] give OPA ((146, 344), 3); receiving
/// (2, 7), the first packet lost fails the checking equation (314 ≠ 344) and the second one
/// passes it: σ = (1, 3).
#[test]
fn paper_worked_example() {
    let sent = [2u64, 5, 7];
    let b = cah_of(2, &sent, &concat);
    assert_eq!((b[0], b[1], sent.len()), (146, 344, 3));
    // no loss: B′ = B
    assert_eq!(cah_of(2, &sent, &concat)[..2], b[..2]);
    let got = [2u64, 7];
    // "assume that the first packet is lost, i.e. (x, 2, 7)": h′11 = 51, and the check gives 314
    let (solved, checks) = check_mapping(&b, 2, 3, &got, &[2, 3], &concat).unwrap();
    assert_eq!(solved, vec![(1, 51)]);
    assert_eq!(checks, vec![(314, 344)]);
    // the second packet lost: the check holds
    let (solved, checks) = check_mapping(&b, 2, 3, &got, &[1, 3], &concat).unwrap();
    assert_eq!(solved, vec![(2, 52)]);
    assert_eq!(checks, vec![(344, 344)]);
    // Algorithm 1 finds it
    let lim = Limits {
        max_errors: 1,
        shift: 0,
        max_mappings: 100,
    };
    let r = recover(&b, 2, 3, &got, &concat, &lim);
    let m = r.result.unwrap();
    assert_eq!(m.sigma, vec![1, 3]);
    assert_eq!(m.lost, vec![(2, 52)]);
    assert_eq!(r.tested, 2, "position 1, then position 2");
    // everything received: exact at level 0
    let r = recover(&b, 2, 3, &sent, &concat, &lim);
    assert_eq!((r.result.unwrap().sigma, r.tested), (vec![1, 2, 3], 1));
}

/// One random group at S and what R receives of it.
struct Case {
    sent: Vec<u64>,
    /// received hashes, and each one's true 1-based position at S (0 = inserted)
    got: Vec<(u64, u32)>,
}

fn case(
    rng: &mut Pcg64Mcg,
    w: usize,
    losses: usize,
    moves: usize,
    inserts: usize,
    d: usize,
) -> Case {
    let sent: Vec<u64> = (0..w).map(|_| rng.random::<u64>()).collect();
    let mut got: Vec<(u64, u32)> = sent
        .iter()
        .enumerate()
        .map(|(i, &x)| (x, i as u32 + 1))
        .collect();
    for _ in 0..losses {
        let i = rng.random_range(0..got.len());
        got.remove(i);
    }
    for _ in 0..moves {
        if got.len() < 2 {
            break;
        }
        let i = rng.random_range(0..got.len());
        let p = got.remove(i);
        let lo = i.saturating_sub(d);
        let hi = (i + d).min(got.len());
        got.insert(rng.random_range(lo..=hi), p);
    }
    for _ in 0..inserts {
        let i = rng.random_range(0..=got.len());
        got.insert(i, (rng.random::<u64>(), 0));
    }
    Case { sent, got }
}

/// The found mapping places every received packet where S had it and solves every lost hash.
fn check_exact(c: &Case, k: usize, lim: &Limits) -> u64 {
    let b = cah_of(k, &c.sent, &cah::augmented);
    let xs: Vec<u64> = c.got.iter().map(|g| g.0).collect();
    let r = recover(&b, k, c.sent.len(), &xs, &cah::augmented, lim);
    let m = r
        .result
        .unwrap_or_else(|e| panic!("{e:?} after {} mappings", r.tested));
    let want: Vec<u32> = c.got.iter().map(|g| g.1).collect();
    // a move by zero positions is no error, so compare positions, not error counts
    assert_eq!(m.sigma, want);
    let mut lost: Vec<u32> = (1..=c.sent.len() as u32)
        .filter(|q| !want.contains(q))
        .collect();
    lost.sort_unstable();
    assert_eq!(m.lost.iter().map(|l| l.0).collect::<Vec<_>>(), lost);
    for &(q, h) in &m.lost {
        assert_eq!(h, cah::augmented(c.sent[q as usize - 1], q as u64));
    }
    r.tested
}

/// Random groups with up to k − 1 losses, with bounded reordering and insertions within the
/// error budget, are recovered exactly: every position, every lost hash.
#[test]
fn random_groups_recover_exactly() {
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    let lim = Limits {
        max_errors: 2,
        shift: 4,
        max_mappings: u64::MAX,
    };
    for round in 0..210 {
        let w = rng.random_range(1..150usize);
        let (losses, moves, inserts) = match round % 7 {
            0 => (0, 0, 0),
            1 => (1, 0, 0),
            2 => (2.min(w), 0, 0),
            3 => (0, 1, 0),
            4 => (1.min(w), 1, 0),
            5 => (0, 0, 1),
            _ => (1.min(w), 0, 1),
        };
        // a moved packet's received index is off its position by the move and the other errors
        let c = case(&mut rng, w, losses, moves, inserts, 2);
        check_exact(&c, 3, &lim);
    }
    // k = 5 rows: four losses, and two losses with two moves
    let lim4 = Limits {
        max_errors: 4,
        ..lim
    };
    for _ in 0..20 {
        let w = rng.random_range(4..16usize);
        check_exact(&case(&mut rng, w, 4, 0, 0, 0), 5, &lim4);
        check_exact(&case(&mut rng, w, 2, 2, 0, 1), 5, &lim4);
    }
}

/// Hostile input: a group whose received packets have nothing to do with its CAH is searched
/// up to the cap and no further, and one beyond the error budget is refused without a search.
#[test]
fn enumeration_respects_its_cap() {
    let mut rng = Pcg64Mcg::seed_from_u64(9);
    let b: Cah = std::array::from_fn(|_| rng.random::<u64>() % cah::P);
    let xs: Vec<u64> = (0..500).map(|_| rng.random()).collect();
    let lim = Limits {
        max_errors: 2,
        shift: 64,
        max_mappings: 10_000,
    };
    for w in [499, 500, 501, 502] {
        let r = recover(&b, 3, w, &xs, &cah::augmented, &lim);
        assert_eq!(r.result, Err(Unrecovered::Cap), "w = {w}");
        assert_eq!(r.tested, 10_000);
    }
    let r = recover(&b, 3, 503, &xs, &cah::augmented, &lim);
    assert_eq!((r.result, r.tested), (Err(Unrecovered::TooManyErrors), 0));
    let r = recover(&b, 3, 1_000_000, &xs, &cah::augmented, &lim);
    assert_eq!(r.result, Err(Unrecovered::TooManyErrors));
    // a small group is searched to the end of its budget and found wanting
    let r = recover(
        &b,
        3,
        9,
        &xs[..8],
        &cah::augmented,
        &Limits {
            max_mappings: u64::MAX,
            ..lim
        },
    );
    assert_eq!(r.result, Err(Unrecovered::NoMapping));
    assert!(r.tested > 8);
}

/// Three losses with k = 3 rows leave no checking row: the budget refuses them rather than
/// accept an unchecked mapping.
#[test]
fn unknowns_always_leave_a_checking_row() {
    let mut rng = Pcg64Mcg::seed_from_u64(3);
    let c = case(&mut rng, 30, 3, 0, 0, 0);
    let b = cah_of(3, &c.sent, &cah::augmented);
    let xs: Vec<u64> = c.got.iter().map(|g| g.0).collect();
    let lim = Limits {
        max_errors: 3,
        shift: 0,
        max_mappings: u64::MAX,
    };
    let r = recover(&b, 3, 30, &xs, &cah::augmented, &lim);
    assert_eq!(r.result, Err(Unrecovered::NoMapping));
}

mod codecs {
    use super::super::timestamps::{
        Codec, Encoder, decode, entropy_bits, forward_53, inverse_53, kept,
    };
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    /// Timestamp sequences of every awkward shape.
    fn sequences(rng: &mut Pcg64Mcg) -> Vec<Vec<u64>> {
        let mut v = vec![
            vec![],
            vec![5],
            vec![0, u64::MAX, 0, 1 << 63],
            vec![1_000_000; 10],
            (0..100)
                .map(|i| 1_767_225_600_000_000_000 + i * 1_000)
                .collect(),
            (0..100).map(|i| 9_000 - i * 7).collect(),
        ];
        let mut t = 1_767_225_600_000_000_000u64;
        for len in [2usize, 3, 17, 300] {
            let s: Vec<u64> = (0..len)
                .map(|_| {
                    t += rng.random_range(1..20_000);
                    t
                })
                .collect();
            v.push(s);
            // microsecond captures: nanoseconds ending in 000
            let s: Vec<u64> = (0..len)
                .map(|_| {
                    t += 1_000 * rng.random_range(1..50);
                    t
                })
                .collect();
            v.push(s);
        }
        v
    }

    #[test]
    fn lossless_round_trips() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let seqs = sequences(&mut rng);
        let mut e = Encoder::new(Codec::Lossless);
        for s in &seqs {
            e.sequence(s);
        }
        let b = e.bytes();
        let lens: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
        assert_eq!(decode(Codec::Lossless, &b, &lens).unwrap(), seqs);
        assert_eq!(e.error().max_abs_ns, 0);
        // a cut stream is an error, never a panic or a wrong answer passed as right
        for cut in 0..b.len() - 1 {
            if let Ok(d) = decode(Codec::Lossless, &b[..cut], &lens) {
                assert_ne!(d, seqs, "cut at {cut}");
            }
        }
        // nothing to code
        let empty = Encoder::new(Codec::Lossless).bytes();
        assert_eq!(
            decode(Codec::Lossless, &empty, &[0, 0]).unwrap(),
            vec![vec![]; 2]
        );
        assert!(decode(Codec::Lossless, &b, &[0]).is_err());
    }

    #[test]
    fn wavelet_transform_is_reversible() {
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        for n in 0..70usize {
            let x: Vec<i64> = (0..n)
                .map(|_| rng.random_range(-1_000_000..1_000_000))
                .collect();
            let mut c = x.clone();
            forward_53(&mut c);
            inverse_53(&mut c);
            assert_eq!(c, x, "n = {n}");
        }
        // a constant rate is two coefficients
        let mut ramp: Vec<i64> = (0..64).map(|i| 5 * i).collect();
        forward_53(&mut ramp);
        assert!(ramp.iter().filter(|&&c| c != 0).count() <= 2, "{ramp:?}");
    }

    #[test]
    fn wavelet_codec_keeps_its_ratio_and_reports_its_error() {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let seqs = sequences(&mut rng);
        let lens: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
        // every coefficient kept: exact
        let mut e = Encoder::new(Codec::Wavelet { ratio: 1.0 });
        for s in &seqs {
            e.sequence(s);
        }
        assert_eq!(
            decode(Codec::Wavelet { ratio: 1.0 }, &e.bytes(), &lens).unwrap(),
            seqs
        );
        assert_eq!(e.error().max_abs_ns, 0);
        // a tenth: the reported error is the decoder's
        let c = Codec::Wavelet { ratio: 0.1 };
        let mut e = Encoder::new(c);
        for s in &seqs {
            e.sequence(s);
        }
        let d = decode(c, &e.bytes(), &lens).unwrap();
        let (mut sum, mut max, mut n) = (0.0, 0u64, 0u64);
        for (a, b) in d.iter().flatten().zip(seqs.iter().flatten()) {
            let err = a.wrapping_sub(*b) as i64;
            sum += err.unsigned_abs() as f64;
            max = max.max(err.unsigned_abs());
            n += 1;
        }
        let r = e.error();
        assert_eq!((r.packets, r.max_abs_ns), (n, max));
        assert!((r.sum_abs_ns - sum).abs() < 1e-6 * sum.max(1.0));
        assert!(max > 0);
        assert_eq!(kept(0.1, 300), 30);
        assert_eq!(kept(0.1, 1), 1);
    }

    /// On Poisson traffic, the lossless codec is within 10 % of the zeroth-order empirical
    /// entropy of the gaps it codes when the sample pins that entropy down (many more gaps than
    /// distinct gap values); when it does not, the empirical entropy is below the source's (at
    /// most log₂ n for n gaps), and the codec is within 2 % of the source's, `log₂(e·μ)` for
    /// exponential gaps of mean μ in units of the resolution.
    #[test]
    fn lossless_is_near_the_entropy_of_the_gaps() {
        let mut rng = Pcg64Mcg::seed_from_u64(4);
        for (mean_gap, unit) in [(10_000.0f64, 1u64), (3_000.0, 1_000), (200_000.0, 1)] {
            let mut t = 1_767_225_600_000_000_000u64;
            let mut gaps = Vec::new();
            let seq: Vec<u64> = (0..100_000)
                .map(|_| {
                    let u: f64 = rng.random();
                    let g = ((-u.ln() * mean_gap) as u64 / unit).max(1) * unit;
                    gaps.push(g as i64);
                    t += g;
                    t
                })
                .collect();
            let mut e = Encoder::new(Codec::Lossless);
            for chunk in seq.chunks(512) {
                e.sequence(chunk);
            }
            let bits = 8.0 * e.bytes().len() as f64 / seq.len() as f64;
            let h0 = entropy_bits(gaps);
            let source = (std::f64::consts::E * mean_gap / unit as f64).log2();
            if mean_gap / (unit as f64) < 20_000.0 {
                assert!(bits < 1.1 * h0, "{bits} vs H0 {h0}");
            } else {
                assert!(h0 < (seq.len() as f64).log2());
                assert!(bits < 1.02 * source, "{bits} vs {source}");
            }
        }
    }
}
