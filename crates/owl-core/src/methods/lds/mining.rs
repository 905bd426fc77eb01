//! Mining other estimates from the same cells (§4.3): per-flow packet count (Count-Min style,
//! never under the truth), per-flow loss, heavy hitters, and a rough per-flow delay variance.

use crate::method::FlowEstimate;
use crate::record::FlowKey;

use super::estimate::{FlowQuery, usable};
use super::sketch::Synopsis;

impl<'a> FlowQuery<'a> {
    /// Rows whose count estimates are exact upper bounds: those that sample every packet. If
    /// no row does, every row (each then inverted by its rate, an estimate but no bound).
    fn count_rows(&self) -> impl Iterator<Item = usize> + '_ {
        let s = &self.layout.cfg.sampling;
        let any_full = s.contains(&1.0);
        (0..s.len()).filter(move |&r| !any_full || s[r] == 1.0)
    }

    /// Sum of `n` over the flow's vLDA in row `r` of `sk`.
    fn row_count(&self, sk: &Synopsis, r: usize) -> u64 {
        let cells = sk.cells();
        (0..self.layout.cfg.k)
            .map(|o| cells[self.layout.cell_index(r, self.bases[r], o)].n as u64)
            .sum()
    }

    /// Packets of flow `f` at one point (§4.3): "for each row, aggregate all vLDA cells to
    /// obtain a packet count. Then, take the minimum." Counts are divided by the flow's weight
    /// and by the row's sampling rate. Over rows that sample every packet the result is never
    /// below the truth: other flows can only add to a cell.
    pub fn count_at(&mut self, f: &FlowKey, receiver: bool) -> f64 {
        self.locate(f);
        let w = self.layout.cfg.weights.weight_of(f) as f64;
        let sk = if receiver { self.r } else { self.s };
        self.count_rows()
            .map(|r| self.row_count(sk, r) as f64 / self.layout.cfg.sampling[r] / w)
            .fold(f64::INFINITY, f64::min)
    }

    /// Packets of flow `f` sent (at the sender's sketch).
    pub fn count(&mut self, f: &FlowKey) -> f64 {
        self.count_at(f, false)
    }

    /// Packets of flow `f` lost (§4.3: "comparing the n fields … in sender and receiver"): in
    /// each row, the flow's vLDA counts at S minus those at R, divided by weight and sampling
    /// rate; the smallest non-negative difference over the rows used for counting. Losses of
    /// colliding flows can only add (packets that cross an interval boundary can subtract).
    pub fn loss(&mut self, f: &FlowKey) -> f64 {
        self.locate(f);
        let w = self.layout.cfg.weights.weight_of(f) as f64;
        self.count_rows()
            .map(|r| {
                let d = self.row_count(self.s, r) as f64 - self.row_count(self.r, r) as f64;
                d.max(0.0) / self.layout.cfg.sampling[r] / w
            })
            .fold(f64::INFINITY, f64::min)
    }

    /// Rough standard deviation of flow `f`'s delay, given its mean (§4.3, after LDA §III-E).
    ///
    /// LDA squares the difference of two bucket sums whose packets were split by a random ±1
    /// hash, so that the cross terms vanish in expectation. Inside a vLDA the packet hash
    /// already splits a flow's packets at random between cells: for a pair of cells
    /// `(2i, 2i+1)` of a row, both usable and chosen (at most `(1 + α)·n_min` packets), with
    /// delay sums `D_a, D_b` and counts `n_a, n_b`,
    /// `E[(D_a − D_b)² | n_a, n_b] = (n_a + n_b)·σ² + (n_a − n_b)²·μ²`.
    /// So `σ̂² = Σ [(D_a − D_b)² − (n_a − n_b)²·μ̂²] / Σ (n_a + n_b)` over the pairs. This is
    /// LDA's `F − μ²` with the count term taken given the counts: the cell choice keeps only
    /// cells with similar counts, and `F − μ²` would then read low by the missing
    /// `E[(n_a − n_b)²]·μ²`. Weights scale both sums by the flow's weight `w` (`D² ∝ w²`,
    /// `n ∝ w`), undone by dividing by `w`. It is rough: colliding flows whose vLDA covers only
    /// one cell of a pair add their whole delay sum to one side. `None` with `k < 2` or no pair.
    pub fn std_dev(&mut self, f: &FlowKey, mean_ns: f64) -> Option<f64> {
        if self.layout.cfg.k < 2 {
            return None;
        }
        self.locate(f);
        self.collect_usable();
        let limit = self.threshold()?;
        let wf = self.layout.cfg.weights.weight_of(f) as f64;
        let (mut num, mut den) = (0f64, 0f64);
        // cells come row by row, offsets ascending
        for pair in self.cells.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a.row == b.row
                && a.offset % 2 == 0
                && b.offset == a.offset + 1
                && a.inverted <= limit
                && b.inverted <= limit
            {
                // D is w·Σdelay and n is w·count: bring both to plain packets
                let d = (a.delay_sum as f64 - b.delay_sum as f64) / wf;
                let dn = (a.n as f64 - b.n as f64) / wf;
                num += d * d - dn * dn * mean_ns * mean_ns;
                den += (a.n as f64 + b.n as f64) / wf;
            }
        }
        if den == 0.0 {
            return None;
        }
        Some((num / den).max(0.0).sqrt())
    }

    /// Everything the sketch says about one flow.
    pub fn flow(&mut self, f: &FlowKey) -> FlowEstimate {
        let d = self.delay(f);
        let packets = self.count(f);
        let lost = self.loss(f);
        let std_ns = d.mean_ns.and_then(|m| self.std_dev(f, m));
        FlowEstimate {
            mean_ns: d.mean_ns,
            std_ns,
            packets: packets.is_finite().then_some(packets),
            lost: lost.is_finite().then_some(lost),
            ..Default::default()
        }
    }
}

/// Heavy hitters among candidate flows (§4.3): the flows whose count estimate reaches
/// `threshold` packets, largest first, as `(index into candidates, estimated packets)`. A
/// sketch cannot list its flows, so the candidates come from elsewhere (a flow cache, the
/// previous interval, a sampled list); with full-rate rows the count never undercounts, so
/// no true heavy hitter among the candidates is missed.
pub fn heavy_hitters(
    sender: &Synopsis,
    candidates: &[FlowKey],
    threshold: f64,
) -> Vec<(usize, f64)> {
    let mut q = FlowQuery {
        layout: sender.layout(),
        s: sender,
        r: sender,
        bases: Vec::new(),
        cells: Vec::new(),
    };
    let mut out: Vec<(usize, f64)> = candidates
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let c = q.count(f);
            (c >= threshold).then_some((i, c))
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// Fraction of the sketch's non-empty cells both points agree on (a health figure).
pub fn usable_fraction(s: &Synopsis, r: &Synopsis) -> f64 {
    let (mut busy, mut ok) = (0usize, 0usize);
    for (a, b) in s.cells().iter().zip(r.cells()) {
        if a.n != 0 || b.n != 0 {
            busy += 1;
            ok += usable(a, b) as usize;
        }
    }
    if busy == 0 {
        1.0
    } else {
        ok as f64 / busy as f64
    }
}
