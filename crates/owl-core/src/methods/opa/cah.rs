//! The Combined Augmented Hash of a group (§IV-B, Eq. 1–2; §IV-E, Eq. 7), in the prime field
//! `F_p`, `p = 2⁶¹ − 1`.
//!
//! # Why a prime field
//!
//! The paper writes `B = A·H` over the integers. With 64-bit augmented hashes and a Vandermonde
//! `A` whose row `x` holds `j^x`, the integers overflow any machine word after a few packets,
//! and exact big-integer sums would cost far more than the few multiplications a packet may
//! take. Arithmetic modulo `2⁶⁴` is no cure: that ring has zero divisors, so a Vandermonde
//! minor whose positions differ by an even number has an even determinant and is *not*
//! invertible — Eq. 5 would have no unique solution exactly when it is needed. In a prime field
//! every minor of a Vandermonde matrix with distinct nodes is invertible (its determinant is
//! `∏(a_j − a_i) ≠ 0`), which is the property §IV-E asks of `A`, for every position up to
//! `p − 1`. The Mersenne prime `2⁶¹ − 1` keeps reduction to a shift and an add, a product in
//! one 64×64→128 multiplication, and a wrong mapping passes one checking row (Eq. 6) with
//! probability `1/p ≈ 4.3·10⁻¹⁹`.
//!
//! # The matrix
//!
//! `A` is the Vandermonde matrix of Eq. 7 with nodes `a_j = j`, the packet's 1-based position
//! in its group: row `x` (0-based) is `(1^x, 2^x, …, w^x)`. Its first two rows are the
//! `[[1,1,1],[1,2,3]]` of the §IV-E example. The columns extend to any group size (§V-C).

/// The field's modulus, `2⁶¹ − 1`.
pub const P: u64 = (1 << 61) - 1;

/// Most CAH rows a group may carry (a group sized for its design loss rate takes more rows the
/// more packets it holds, see [`super::config::Config::rows_for`]).
pub const MAX_ROWS: usize = 32;

/// One group's CAH (only the first `k` entries are used).
pub type Cah = [u64; MAX_ROWS];

/// `x mod p` for any 64-bit `x`.
#[inline]
pub fn reduce(x: u64) -> u64 {
    let v = (x & P) + (x >> 61);
    if v >= P { v - P } else { v }
}

#[inline]
pub fn add(a: u64, b: u64) -> u64 {
    let s = a + b;
    if s >= P { s - P } else { s }
}

#[inline]
pub fn sub(a: u64, b: u64) -> u64 {
    if a >= b { a - b } else { a + P - b }
}

#[inline]
pub fn mul(a: u64, b: u64) -> u64 {
    let p = a as u128 * b as u128;
    let v = (p as u64 & P) + (p >> 61) as u64;
    if v >= P { v - P } else { v }
}

pub fn pow(mut a: u64, mut e: u64) -> u64 {
    let mut r = 1;
    while e > 0 {
        if e & 1 == 1 {
            r = mul(r, a);
        }
        a = mul(a, a);
        e >>= 1;
    }
    r
}

/// The inverse of a non-zero element (Fermat).
pub fn inv(a: u64) -> u64 {
    debug_assert!(a != 0);
    pow(a, P - 2)
}

/// The murmur3 64-bit finaliser: a bijection with full avalanche.
#[inline]
fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The augmented hash `h_ij = Hash(s_ij ++ j)` (§IV-B) of a packet at 1-based position `j` of
/// its group, from the packet's seeded hash `x` (one hash of its identity per packet; the
/// position is mixed in by a bijective finaliser, so distinct `(x, j)` give independent-looking
/// values), as a field element.
#[inline]
pub fn augmented(x: u64, j: u64) -> u64 {
    reduce(fmix64(x ^ j.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
}

/// Add the column of position `j` times `h` to `b` (rows `0..k`): `b_x += j^x · h`.
#[inline]
pub fn accumulate(b: &mut Cah, k: usize, j: u64, h: u64) {
    let j = reduce(j);
    let mut t = h;
    for bx in b.iter_mut().take(k) {
        *bx = add(*bx, t);
        t = mul(t, j);
    }
}

/// The column of position `j` times `h` (rows `0..k`).
#[inline]
pub fn column(k: usize, j: u64, h: u64) -> Cah {
    let mut c = [0; MAX_ROWS];
    accumulate(&mut c, k, j, h);
    c
}

/// Solve the α×α mapping equation (Eq. 5): find `u` with `Σ_i q_i^x · u_i = r_x` for rows
/// `x < α`, the `q_i` distinct positions. `None` if the positions are not distinct (the
/// Vandermonde minor is then singular).
pub fn solve_vandermonde(q: &[u64], r: &[u64]) -> Option<Vec<u64>> {
    let n = q.len();
    debug_assert!(r.len() >= n);
    // augmented matrix, row x: q_0^x … q_{n-1}^x | r_x
    let mut m: Vec<Vec<u64>> = (0..n)
        .map(|x| {
            let mut row: Vec<u64> = q.iter().map(|&qi| pow(reduce(qi), x as u64)).collect();
            row.push(r[x]);
            row
        })
        .collect();
    for c in 0..n {
        let piv = (c..n).find(|&x| m[x][c] != 0)?;
        m.swap(c, piv);
        let iv = inv(m[c][c]);
        for v in m[c].iter_mut() {
            *v = mul(*v, iv);
        }
        for x in 0..n {
            if x != c && m[x][c] != 0 {
                let f = m[x][c];
                let pivot = m[c].clone();
                for (v, &p) in m[x].iter_mut().zip(&pivot).skip(c) {
                    *v = sub(*v, mul(f, p));
                }
            }
        }
    }
    Some(m.into_iter().map(|row| row[n]).collect())
}

/// The unknown hashes at the distinct positions `q` from the residual `res = B − A_σ·H_σ` of
/// all `k = res.len()` rows, if `res` is a combination of the columns of `q` at all: the first
/// `α = |q|` rows solve (Eq. 5), the other `k − α` check (Eq. 6). `None` when a checking row
/// fails or `α ≥ k`.
///
/// The check needs no solving: with `P(z) = ∏(z − q_i) = Σ p_m z^m`, a residual
/// `res_x = Σ_i u_i q_i^x` satisfies `Σ_m p_m res_{m+s} = 0` for every `s < k − α` (each term is
/// `u_i q_i^s P(q_i) = 0`), and only such residuals do (the sequences `P` annihilates are
/// spanned by the `q_i^x`). That is `O(α·(k − α))` after `P` in `O(α²)`; a mapping that checks
/// is then solved in `O(α²)` (Eq. 5 is a transposed Vandermonde system: with
/// `P_i(z) = P(z)/(z − q_i) = Σ c_{i,x} z^x`, `u_i = Σ_x c_{i,x} res_x / P_i(q_i)`).
pub fn solve_checked(q: &[u64], res: &[u64]) -> Option<Vec<u64>> {
    let (a, k) = (q.len(), res.len());
    if a >= k {
        return None;
    }
    // P(z), lowest coefficient first, degree a
    let mut p = vec![0u64; a + 1];
    p[0] = 1;
    for (deg, &qi) in q.iter().enumerate() {
        let qi = reduce(qi);
        // p ← p·(z − qi)
        for m in (0..=deg + 1).rev() {
            let hi = if m > 0 { p[m - 1] } else { 0 };
            p[m] = sub(hi, mul(qi, p[m]));
        }
    }
    for s in 0..k - a {
        let mut acc = 0;
        for (m, &pm) in p.iter().enumerate() {
            acc = add(acc, mul(pm, res[m + s]));
        }
        if acc != 0 {
            return None;
        }
    }
    // the solution: P_i by synthetic division, P_i(q_i) = P'(q_i) ≠ 0 for distinct q
    let mut num = Vec::with_capacity(a);
    let mut den = Vec::with_capacity(a);
    let mut c = vec![0u64; a];
    for &qi in q {
        let qi = reduce(qi);
        // P(z) = (z − qi)·C(z): c_{a−1} = p_a, c_{m−1} = p_m + qi·c_m
        c[a - 1] = p[a];
        for m in (1..a).rev() {
            c[m - 1] = add(p[m], mul(qi, c[m]));
        }
        let (mut n, mut d, mut z) = (0, 0, 1);
        for (x, &cx) in c.iter().enumerate() {
            n = add(n, mul(cx, res[x]));
            d = add(d, mul(cx, z));
            z = mul(z, qi);
        }
        if d == 0 {
            return None; // repeated position
        }
        num.push(n);
        den.push(d);
    }
    // one inversion for all denominators
    let mut prefix = Vec::with_capacity(a);
    let mut acc = 1;
    for &d in &den {
        prefix.push(acc);
        acc = mul(acc, d);
    }
    let mut inv_acc = inv(acc);
    let mut u = vec![0u64; a];
    for i in (0..a).rev() {
        let inv_d = mul(inv_acc, prefix[i]);
        inv_acc = mul(inv_acc, den[i]);
        u[i] = mul(num[i], inv_d);
    }
    Some(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_laws() {
        let xs = [0, 1, 2, P - 1, P - 2, 1 << 60, 0x1234_5678_9abc_def0 % P];
        for &a in &xs {
            assert_eq!(add(a, 0), a);
            assert_eq!(sub(a, a), 0);
            assert_eq!(mul(a, 1), a);
            if a != 0 {
                assert_eq!(mul(a, inv(a)), 1);
            }
            for &b in &xs {
                assert_eq!(
                    mul(a, b) as u128,
                    (a as u128 * b as u128) % P as u128,
                    "{a} {b}"
                );
                assert_eq!(add(sub(a, b), b), a);
            }
        }
        assert_eq!(reduce(u64::MAX), (u64::MAX as u128 % P as u128) as u64);
        assert_eq!(reduce(P), 0);
    }

    #[test]
    fn vandermonde_solves_and_refuses_repeated_nodes() {
        let q = [3u64, 17, 250];
        let u = [11u64, P - 5, 1 << 59];
        let r: Vec<u64> = (0..3)
            .map(|x| {
                q.iter()
                    .zip(&u)
                    .fold(0, |acc, (&qi, &ui)| add(acc, mul(pow(qi, x), ui)))
            })
            .collect();
        assert_eq!(solve_vandermonde(&q, &r).unwrap(), u.to_vec());
        assert!(solve_vandermonde(&[4, 4], &[1, 2]).is_none());
        // all rows: the three solve, a fourth and fifth check
        let r5: Vec<u64> = (0..5)
            .map(|x| {
                q.iter()
                    .zip(&u)
                    .fold(0, |acc, (&qi, &ui)| add(acc, mul(pow(qi, x), ui)))
            })
            .collect();
        assert_eq!(solve_checked(&q, &r5).unwrap(), u.to_vec());
        let mut bad = r5.clone();
        bad[4] = add(bad[4], 1);
        assert!(solve_checked(&q, &bad).is_none());
        assert!(solve_checked(&q, &r5[..3]).is_none(), "no checking row");
        assert!(solve_checked(&[7, 7], &r5).is_none());
        assert_eq!(solve_checked(&[], &[0, 0]).unwrap(), Vec::<u64>::new());
        assert!(solve_checked(&[], &[0, 1]).is_none());
        // many unknowns
        let q: Vec<u64> = (1..=20).map(|i| 7 * i + 3).collect();
        let u: Vec<u64> = (0..20)
            .map(|i| reduce(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i + 1)))
            .collect();
        let r: Vec<u64> = (0..24)
            .map(|x| {
                q.iter()
                    .zip(&u)
                    .fold(0, |acc, (&qi, &ui)| add(acc, mul(pow(qi, x), ui)))
            })
            .collect();
        assert_eq!(solve_checked(&q, &r).unwrap(), u);
        assert_eq!(solve_vandermonde(&[], &[]).unwrap(), Vec::<u64>::new());
    }
}
