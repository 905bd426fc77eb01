//! What both points of an LDS must agree on.

use crate::method::MethodError;

use super::weights::Weights;

/// Bytes of one cell on the wire and in memory: timestamp sum `s` (u64), count `n` (u32),
/// digest `d` (u32). 70 000 cells are 1.12 MB, the paper's "70,000 counters, which take about
/// 1MB" (§5.1) and "40,000 counters … 625KB" (§5.3).
pub const CELL_BYTES: usize = 16;

/// Most cells one sketch may hold (4 GiB): anything above is a typo, not a configuration.
pub const MAX_CELLS: usize = 1 << 28;
/// Most rows.
pub const MAX_ROWS: usize = 64;
/// Longest virtual LDA (the offset hash has 16 bits per row).
pub const MAX_K: usize = 4096;

/// How the estimator chooses among a flow's usable cells when rows sample at different rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// §4.2 as written: counts inverted by each row's sampling rate, then Fig. 6 over every
    /// usable cell. The sparsest cell of a low-rate row often wins by sampling noise alone
    /// (a 1 % row keeps 2 of a flow's 200 packets in a cell, ±1.4), and the estimate then rests
    /// on a handful of packets.
    Paper,
    /// owl's variant: Fig. 6 over the usable cells of the densest rows only — the highest
    /// sampling rate among the rows where the flow kept a usable cell ("at least one of the
    /// banks will suit the actual loss rate of each flow", §4.2; COLATE picks its counter
    /// vectors the same way). Identical to `Paper` when every row has the same rate.
    Densest,
}

impl Selection {
    pub fn as_str(&self) -> &'static str {
        match self {
            Selection::Paper => "paper",
            Selection::Densest => "densest",
        }
    }
}

impl std::str::FromStr for Selection {
    type Err = MethodError;
    fn from_str(s: &str) -> Result<Selection, MethodError> {
        match s.trim() {
            "paper" => Ok(Selection::Paper),
            "densest" => Ok(Selection::Densest),
            x => Err(MethodError::Invalid(format!(
                "lds selection '{x}' is neither paper nor densest"
            ))),
        }
    }
}

/// Configuration of a Lossy Difference Sketch (§2.3.4, §4).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// R: rows, each with its own flow hash `h_r` and packet hash `h'_r`.
    pub(super) rows: usize,
    /// C: cells per row.
    pub(super) columns: usize,
    /// k: length of the virtual LDA — the packets of a flow spread over `k` consecutive cells
    /// of every row (`k = 1` is the SDS layout with timestamp sums).
    pub(super) k: usize,
    /// α: cells with at most `(1 + α)·n_min` packets join the estimate (Fig. 6; the paper
    /// uses 0.1).
    pub(super) alpha: f64,
    /// Packet sampling rate of each row (§2.3.3, multi-bank §4.2); one entry per row.
    pub(super) sampling: Vec<f64>,
    /// How cells are chosen when rows sample at different rates.
    pub(super) selection: Selection,
    /// Operator flow weights (§4.1).
    pub(super) weights: Weights,
    /// Seed of the hash family (both points must use the same).
    pub(super) seed: u64,
}

impl Config {
    /// R: rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// C: cells per row.
    pub fn columns(&self) -> usize {
        self.columns
    }
    /// k: the vLDA length.
    pub fn k(&self) -> usize {
        self.k
    }
    /// α: the cell-selection slack of Fig. 6.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
    /// Packet sampling rate of each row.
    pub fn sampling(&self) -> &[f64] {
        &self.sampling
    }
    /// How cells are chosen when rows sample at different rates.
    pub fn selection(&self) -> Selection {
        self.selection
    }
    /// Operator flow weights.
    pub fn weights(&self) -> &Weights {
        &self.weights
    }
    /// Seed of the hash family.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The same configuration with other operator weights (§4.1), validated.
    pub fn with_weights(self, weights: Weights) -> Result<Config, MethodError> {
        let c = Config { weights, ..self };
        c.validate()?;
        Ok(c)
    }
    /// The same configuration with every row sampling at `rate`, validated.
    pub fn with_uniform_sampling(self, rate: f64) -> Result<Config, MethodError> {
        let c = Config {
            sampling: vec![rate; self.rows],
            ..self
        };
        c.validate()?;
        Ok(c)
    }
    /// The same configuration with another cell selection.
    pub fn with_selection(self, selection: Selection) -> Config {
        Config { selection, ..self }
    }
    /// The same configuration with another seed (any seed is sound).
    pub fn with_seed(self, seed: u64) -> Config {
        Config { seed, ..self }
    }

    /// The single-bank LDS of §5.1: `rows × columns`, `k = 1`, every packet sampled, α = 0.1
    /// ("Given that loss is negligible in our scenario, we set the vLDA length k=1, and the
    /// sampling rate p=1"; the reference size is 17 500 × 4).
    pub fn single_bank(rows: usize, columns: usize, seed: u64) -> Config {
        Config {
            rows,
            columns,
            k: 1,
            alpha: 0.1,
            sampling: vec![1.0; rows],
            selection: Selection::Paper,
            weights: Weights::none(),
            seed,
        }
    }

    /// The multi-bank LDS of §5.2: 4 rows with `k = 5` and sampling rates 0.01, 0.1, 0.5 and 1
    /// (one row per worst-case loss level: "With k = 5, each vLDA cell needs to support 100
    /// losses … the sampling rate should be set to 0.01 … increasing sampling rates of 0.1, 0.5
    /// and 1 to tolerate up to 50, 10 and 5 losses"), α = 0.1.
    pub fn multi_bank(columns: usize, seed: u64) -> Config {
        Config {
            rows: 4,
            columns,
            k: 5,
            alpha: 0.1,
            sampling: vec![0.01, 0.1, 0.5, 1.0],
            selection: Selection::Paper,
            weights: Weights::none(),
            seed,
        }
    }

    /// Bytes one point's sketch takes on the wire (and in memory).
    pub fn encoded_len(&self) -> usize {
        self.rows * self.columns * CELL_BYTES
    }

    /// Columns that fit `bytes` with this config's rows (at least `k`).
    pub fn columns_for_memory(bytes: u64, rows: usize, k: usize) -> Result<usize, MethodError> {
        let c = bytes / (rows as u64 * CELL_BYTES as u64).max(1);
        if (c as usize) < k.max(1) {
            return Err(MethodError::Invalid(format!(
                "a memory budget of {bytes} bytes holds {c} columns of {rows} rows × {CELL_BYTES} B, fewer than the vLDA length k = {k}: give at least {} bytes",
                rows * k.max(1) * CELL_BYTES
            )));
        }
        Ok(c.min((MAX_CELLS / rows.max(1)) as u64) as usize)
    }

    /// Check every parameter; the error names the parameter and the allowed range.
    pub fn validate(&self) -> Result<(), MethodError> {
        let bad = |s: String| Err(MethodError::Invalid(format!("lds: {s}")));
        if self.rows == 0 {
            return bad("rows is 0: an LDS needs at least one row".into());
        }
        if self.rows > MAX_ROWS {
            return bad(format!("{} rows is absurd (at most {MAX_ROWS})", self.rows));
        }
        if self.k == 0 {
            return bad("the vLDA length k is 0: it must be at least 1".into());
        }
        if self.k > MAX_K {
            return bad(format!("vLDA length k = {} is above {MAX_K}", self.k));
        }
        if self.columns < self.k {
            return bad(format!(
                "{} columns is fewer than the vLDA length k = {}: a flow's k cells must be distinct (C ≥ k)",
                self.columns, self.k
            ));
        }
        if self.rows.saturating_mul(self.columns) > MAX_CELLS {
            return bad(format!(
                "{} × {} cells is absurd (at most {MAX_CELLS} cells, 4 GiB)",
                self.rows, self.columns
            ));
        }
        if !(self.alpha.is_finite() && self.alpha >= 0.0) {
            return bad(format!("alpha {} must be a finite number ≥ 0", self.alpha));
        }
        if self.sampling.len() != self.rows {
            return bad(format!(
                "{} sampling rates for {} rows: give one rate per row",
                self.sampling.len(),
                self.rows
            ));
        }
        for &p in &self.sampling {
            if !(p > 0.0 && p <= 1.0) {
                return bad(format!("sampling rate {p} must be in (0, 1]"));
            }
        }
        for r in &self.weights.rules {
            if r.weight == 0 {
                return bad("a weight rule gives weight 0: weights must be ≥ 1".into());
            }
        }
        Ok(())
    }

    /// Every field both points must agree on, by name (see [`Config::from_pairs`]).
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("rows", self.rows.to_string()),
            ("columns", self.columns.to_string()),
            ("k", self.k.to_string()),
            ("alpha", self.alpha.to_string()),
            (
                "sampling",
                self.sampling
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            ("selection", self.selection.as_str().to_string()),
            ("weights", self.weights.to_string()),
            ("seed", self.seed.to_string()),
        ]
    }

    /// Rebuild a configuration from the pairs of [`Config::pairs`] over the §5.1 defaults
    /// (see [`Config::from_pairs_over`]).
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Config, MethodError> {
        Config::from_pairs_over(Config::single_bank(4, 17_500, 1), pairs)
    }

    /// `base` with the fields named in `pairs` replaced (`--method-config`, synopsis files);
    /// an unknown field is an error that names it. Changing `rows` without `sampling` keeps a
    /// uniform rate; a multi-bank base needs `sampling` with `rows`.
    pub fn from_pairs_over(
        base: Config,
        pairs: &[(String, String)],
    ) -> Result<Config, MethodError> {
        let mut c = base;
        let mut sampling_given = false;
        for (k, v) in pairs {
            let bad = |what: &str| MethodError::Invalid(format!("lds {k} '{v}': {what}"));
            let whole = |x: &str| -> Result<usize, MethodError> {
                x.trim()
                    .parse::<usize>()
                    .map_err(|_| bad("not a whole number"))
            };
            match k.as_str() {
                "rows" => c.rows = whole(v)?,
                "columns" => c.columns = whole(v)?,
                "k" => c.k = whole(v)?,
                "alpha" => c.alpha = v.trim().parse().map_err(|_| bad("not a number"))?,
                "sampling" => {
                    sampling_given = true;
                    c.sampling = v
                        .split(',')
                        .map(|p| p.trim().parse::<f64>())
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|_| bad("not a comma list of rates"))?;
                }
                "selection" => c.selection = v.parse()?,
                "weights" => c.weights = v.parse()?,
                "seed" => c.seed = v.trim().parse().map_err(|_| bad("not a 64-bit seed"))?,
                _ => {
                    return Err(MethodError::Invalid(format!(
                        "unknown lds config field '{k}' (known: rows, columns, k, alpha, sampling, selection, weights, seed)"
                    )));
                }
            }
        }
        if !sampling_given && c.sampling.len() != c.rows {
            let first = c.sampling.first().copied().unwrap_or(1.0);
            if c.sampling.iter().all(|&p| p == first) {
                c.sampling = vec![first; c.rows];
            }
        }
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(p: Vec<(&'static str, String)>) -> Vec<(String, String)> {
        p.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    #[test]
    fn pairs_roundtrip() {
        let mut c = Config::multi_bank(87_500, 9);
        c.weights = "sport:1024-1669=2500,port:443=10".parse().unwrap();
        c.alpha = 0.25;
        c.selection = Selection::Densest;
        assert_eq!(Config::from_pairs(&owned(c.pairs())).unwrap(), c);
        let s = Config::single_bank(4, 17_500, 1);
        assert_eq!(Config::from_pairs(&owned(s.pairs())).unwrap(), s);
        assert_eq!(s.encoded_len(), 1_120_000);
    }

    #[test]
    fn bad_configs_are_clear_errors() {
        let base = Config::single_bank(4, 100, 1);
        let cases: Vec<(Config, &str)> = vec![
            (
                Config {
                    k: 8,
                    columns: 5,
                    ..base.clone()
                },
                "fewer than the vLDA length",
            ),
            (
                Config {
                    rows: 0,
                    sampling: vec![],
                    ..base.clone()
                },
                "rows is 0",
            ),
            (
                Config {
                    k: 0,
                    ..base.clone()
                },
                "k is 0",
            ),
            (
                Config {
                    alpha: -1.0,
                    ..base.clone()
                },
                "alpha",
            ),
            (
                Config {
                    sampling: vec![1.0, 0.0, 1.0, 1.0],
                    ..base.clone()
                },
                "sampling rate 0",
            ),
            (
                Config {
                    sampling: vec![1.0],
                    ..base.clone()
                },
                "one rate per row",
            ),
            (
                Config {
                    columns: 1 << 30,
                    ..base.clone()
                },
                "absurd",
            ),
        ];
        for (c, needle) in cases {
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(needle), "{c:?}: {e}");
        }
        // weights ≤ 0 through the configuration pairs
        let mut p = owned(base.pairs());
        p.iter_mut().find(|(k, _)| k == "weights").unwrap().1 = "port:53=0".into();
        let e = Config::from_pairs(&p).unwrap_err().to_string();
        assert!(e.contains("must be > 0"), "{e}");
        let e = Config::from_pairs(&[("colour".into(), "blue".into())]).unwrap_err();
        assert!(
            e.to_string().contains("unknown lds config field 'colour'"),
            "{e}"
        );
        // partial settings over the defaults; rows without sampling keeps a uniform rate
        let c = Config::from_pairs(&[("rows".into(), "3".into())]).unwrap();
        assert_eq!((c.rows, c.sampling.len(), c.columns), (3, 3, 17_500));
        let e = Config::from_pairs_over(Config::multi_bank(100, 1), &[("rows".into(), "2".into())])
            .unwrap_err();
        assert!(e.to_string().contains("one rate per row"), "{e}");
        assert!(
            Config::columns_for_memory(100, 4, 5)
                .unwrap_err()
                .to_string()
                .contains("fewer than the vLDA length")
        );
        assert_eq!(Config::columns_for_memory(1_120_000, 4, 1).unwrap(), 17_500);
    }
}
