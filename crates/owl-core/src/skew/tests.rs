use super::*;

/// Packets at `rate` per second for `secs`, each delayed 50 µs plus a Weibull(shape 0.7) wait
/// of mean `wait_ns`, seen through R's clock with `skew_ppm` and `steps` (relative time,
/// size): `(send, observed delay, true delay, R's reading)`.
fn trace(
    seed: u64,
    secs: f64,
    rate: f64,
    wait_ns: f64,
    skew_ppm: f64,
    steps: &[(u64, i64)],
) -> Vec<(u64, i64, i64, u64)> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let t0 = 1_767_225_600_000_000_000u64;
    let n = (secs * rate) as usize;
    let scale = wait_ns / 1.2658; // Γ(1 + 1/0.7)
    let mut s = t0;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let u: f64 = rng.random::<f64>().max(1e-300);
        s += (-u.ln() * 1e9 / rate) as u64 + 1;
        let v: f64 = rng.random::<f64>().max(1e-300);
        let d = 50_000 + (scale * (-v.ln()).powf(1.0 / 0.7)) as i64;
        let a = s + d as u64;
        let theta = skew_ppm * 1e-6 * (a - t0) as f64
            + steps
                .iter()
                .filter(|(at, _)| a - t0 >= *at)
                .map(|(_, z)| *z as f64)
                .sum::<f64>();
        let r = (a as i128 + theta.round() as i128) as u64;
        out.push((s, r as i64 - s as i64, d, r));
    }
    out
}

fn floor_of(tr: &[(u64, i64, i64, u64)]) -> DelayFloor {
    let mut f = DelayFloor::new();
    for &(s, d, _, _) in tr {
        f.push(s, d);
    }
    f
}

#[test]
fn hull_is_lower_and_convex() {
    let pts = [(0, 5), (1, 1), (2, 3), (3, 0), (4, 4), (4, 2), (5, 5)].map(|(t, d)| Pt { t, d });
    let mut sorted = pts.to_vec();
    sorted.sort_by_key(|p| (p.t, p.d));
    let h = lower_hull(sorted);
    let ts: Vec<i64> = h.iter().map(|p| p.t).collect();
    assert_eq!(ts, [0, 1, 3, 4, 5]);
    assert_eq!(h[3].d, 2);
}

#[test]
fn out_of_order_points_keep_the_hull() {
    let mut b = Bucket::default();
    for (t, d) in [(0, 5), (3, 0), (1, 1), (5, 5), (2, 3)] {
        b.insert(Pt { t, d });
    }
    let ts: Vec<i64> = b.hull.iter().map(|p| p.t).collect();
    assert_eq!(ts, [0, 1, 3, 5]);
    assert_eq!(b.n, 5);
    assert_eq!(b.sum_t, 11);
}

#[test]
fn no_skew_no_step() {
    for seed in 0..10 {
        let tr = trace(seed, 10.0, 10_000.0, 100_000.0, 0.0, &[]);
        let fit = floor_of(&tr).fit().unwrap();
        assert!(fit.skew_ppm.abs() < 0.1, "seed {seed}: {fit:?}");
        assert!(fit.steps.is_empty(), "seed {seed}: {fit:?}");
        assert!(fit.drift_ns().abs() < 1_000.0, "seed {seed}: {fit:?}");
    }
}

#[test]
fn skew_is_found() {
    for (seed, ppm) in [(1, 20.0), (2, -35.0), (3, 100.0), (4, 1.0)] {
        let tr = trace(seed, 10.0, 10_000.0, 100_000.0, ppm, &[]);
        let fit = floor_of(&tr).fit().unwrap();
        assert!((fit.skew_ppm - ppm).abs() < 0.1, "{ppm}: {fit:?}");
        assert!(fit.steps.is_empty(), "{ppm}: {fit:?}");
        assert!(fit.skew_uncertainty_ppm > 0.0 && fit.skew_uncertainty_ppm < 0.1);
    }
}

#[test]
fn steps_are_found_placed_and_sized() {
    for (seed, size) in [
        (5, 2_000_000i64),
        (6, -2_000_000),
        (7, 50_000),
        (8, -30_000),
    ] {
        let at = 4_000_000_000u64;
        let tr = trace(seed, 10.0, 10_000.0, 100_000.0, 20.0, &[(at, size)]);
        let fit = floor_of(&tr).fit().unwrap();
        assert_eq!(fit.steps.len(), 1, "{size}: {fit:?}");
        let st = fit.steps[0];
        // the step on S's axis: a packet at the floor (50 µs) sent 50 µs before R's clock
        // steps is the first to see it
        let t0 = 1_767_225_600_000_000_000i64;
        let truth = t0 + at as i64 - 50_000;
        let packets_off = (st.at_ns as i64 - truth).abs() as f64 * 10_000.0 / 1e9;
        assert!(
            packets_off < 5.0,
            "{size}: off by {packets_off} packets: {fit:?}"
        );
        assert!((st.size_ns - size).abs() < 1_000, "{size}: {fit:?}");
        assert!((fit.skew_ppm - 20.0).abs() < 0.2, "{size}: {fit:?}");
    }
}

#[test]
fn correction_takes_r_back_to_its_first_clock() {
    for (seed, steps) in [
        (9, vec![(3_000_000_000u64, 2_000_000i64)]),
        (
            10,
            vec![(3_000_000_000, -1_000_000), (7_000_000_000, 500_000)],
        ),
    ] {
        let tr = trace(seed, 10.0, 10_000.0, 100_000.0, 50.0, &steps);
        let fit = floor_of(&tr).fit().unwrap();
        assert_eq!(fit.steps.len(), steps.len(), "{fit:?}");
        let mut c = fit.correction();
        // R's capture order: by true arrival
        let mut order: Vec<usize> = (0..tr.len()).collect();
        order.sort_by_key(|&i| tr[i].0 + tr[i].2 as u64);
        let mut worst = 0i64;
        let mut wrong_side = 0;
        let offset0 = tr[0].1 - tr[0].2; // R's offset at the first packet: ~0
        for i in order {
            let (s, _, d, r) = tr[i];
            let fixed = c.correct(r) as i64 - s as i64 - offset0;
            let e = (fixed - d).abs();
            if e > 100_000 {
                wrong_side += 1;
            } else {
                worst = worst.max(e);
            }
        }
        assert!(worst < 1_000, "{steps:?}: worst {worst} ns: {fit:?}");
        assert!(
            wrong_side < 10,
            "{steps:?}: {wrong_side} on the wrong side: {fit:?}"
        );
    }
}

#[test]
fn memory_is_bounded() {
    // two minutes at 20k packets/s: the buckets double until they fit
    let tr = trace(11, 120.0, 20_000.0, 100_000.0, 10.0, &[]);
    let f = floor_of(&tr);
    assert!(f.buckets.len() <= MAX_BUCKETS);
    assert!(f.memory_bytes() < 4 << 20, "{}", f.memory_bytes());
    let fit = f.fit().unwrap();
    assert!((fit.skew_ppm - 10.0).abs() < 0.05, "{fit:?}");
}

/// A minute with a step in the middle: a run of noise above the threshold just before the
/// step's plateau must not take its place.
#[test]
fn a_step_in_a_minute() {
    let tr = trace(
        1,
        60.0,
        10_000.0,
        100_000.0,
        20.0,
        &[(30_000_000_000, 2_000_000)],
    );
    let fit = floor_of(&tr).fit().unwrap();
    assert!((fit.skew_ppm - 20.0).abs() < 0.01, "{fit:?}");
    assert_eq!(fit.steps.len(), 1, "{fit:?}");
    assert!((fit.steps[0].size_ns - 2_000_000).abs() < 100, "{fit:?}");
    let at = fit.steps[0].at_ns - 1_767_225_600_000_000_000;
    assert!(at.abs_diff(30_000_000_000) < 1_000_000, "{fit:?}");
}

/// What the fit costs: a million points (1 s at 1M packets/s) pushed and fitted.
/// `cargo test -p owl-core --release skew::tests::cost -- --ignored --nocapture`
#[test]
#[ignore]
fn cost_of_a_million_points() {
    let tr = trace(12, 1.0, 1_000_000.0, 100_000.0, 20.0, &[]);
    let t = std::time::Instant::now();
    let f = floor_of(&tr);
    let pushed = t.elapsed();
    let fit = f.fit().unwrap();
    eprintln!(
        "push {:?} ({:.1} ns a point), fit {:?}, {} bytes held, {} buckets of {} ns, skew {:.4} ± {:.4} ppm",
        pushed,
        pushed.as_nanos() as f64 / tr.len() as f64,
        t.elapsed() - pushed,
        f.memory_bytes(),
        fit.buckets,
        fit.bucket_ns,
        fit.skew_ppm,
        fit.skew_uncertainty_ppm
    );
}
