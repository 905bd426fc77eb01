//! Delay estimation from the sender's and the receiver's sketches (§2.3.1, §2.3.2, Fig. 6).

use crate::method::{Estimate, MethodError};
use crate::record::FlowKey;

use super::config::{CELL_BYTES, Selection};
use super::sketch::{Cell, Layout, Synopsis};

/// A cell of a flow that both points agree on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Usable {
    /// Row of the cell.
    pub row: usize,
    /// Offset inside the flow's vLDA.
    pub offset: usize,
    /// Receiver sum minus sender sum: the (weighted) delay sum of the cell's packets.
    pub delay_sum: i64,
    /// (Weighted) packet count, equal at both points.
    pub n: u32,
    /// `n` inverted by the row's sampling rate (§4.2): what decides the cell choice.
    pub inverted: f64,
}

/// What the estimator of Fig. 6 found for one flow.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlowDelay {
    /// Estimated mean delay, ns; `None` when no cell of the flow is usable.
    pub mean_ns: Option<f64>,
    /// `N_sum`: (weighted) packets in the chosen cells (a packet may count once per row).
    pub packets_used: u64,
    /// Cells of the flow (R·k).
    pub cells: usize,
    /// Cells whose count and digest agree at both points and that hold packets.
    pub usable: usize,
    /// Cells chosen (at most `(1 + α)·n_min` packets).
    pub chosen: usize,
}

/// Whether a cell pair can carry a delay: same count, same digest, not overflowed, not empty.
///
/// Empty cells agree trivially but say nothing: with sampling (§4.2) a flow may leave some of
/// its cells empty, and an `n_min` of 0 would choose only empty cells.
#[inline]
pub(crate) fn usable(s: &Cell, r: &Cell) -> bool {
    s.n == r.n && s.d == r.d && s.n != 0 && s.n != Cell::OVERFLOW
}

/// The delay sum of a usable cell pair: `s_R − s_S` modulo 2⁶⁴, read as signed (exact while
/// the true weighted delay sum of the cell stays within ±2⁶³ ns).
#[inline]
pub(crate) fn delay_sum(s: &Cell, r: &Cell) -> i64 {
    r.s.wrapping_sub(s.s) as i64
}

/// Check that two sketches were built with the same configuration.
pub fn check_pair(s: &Synopsis, r: &Synopsis) -> Result<(), MethodError> {
    let (a, b) = (s.config().pairs(), r.config().pairs());
    for ((k, x), (_, y)) in a.iter().zip(b.iter()) {
        if x != y {
            return Err(MethodError::ConfigMismatch {
                field: k.to_string(),
                sender: x.clone(),
                receiver: y.clone(),
            });
        }
    }
    Ok(())
}

/// Per-flow queries over one interval's pair of sketches (reuses its scratch space, so a
/// query of every flow allocates nothing per flow).
pub struct FlowQuery<'a> {
    pub(crate) layout: &'a Layout,
    pub(crate) s: &'a Synopsis,
    pub(crate) r: &'a Synopsis,
    pub(crate) bases: Vec<usize>,
    pub(crate) cells: Vec<Usable>,
}

impl<'a> FlowQuery<'a> {
    /// A query over the sender's and the receiver's sketches of one interval.
    pub fn new(sender: &'a Synopsis, receiver: &'a Synopsis) -> Result<FlowQuery<'a>, MethodError> {
        check_pair(sender, receiver)?;
        let layout = &**sender.layout();
        Ok(FlowQuery {
            layout,
            s: sender,
            r: receiver,
            bases: Vec::with_capacity(layout.cfg.rows),
            cells: Vec::with_capacity(layout.cfg.rows * layout.cfg.k),
        })
    }

    /// Base columns of `f` into `self.bases`.
    pub(crate) fn locate(&mut self, f: &FlowKey) {
        let fh = self.layout.flow_hash(f);
        self.layout.bases(fh, &mut self.bases);
    }

    /// Collect the usable cells of the flow located last (with [`Selection::Densest`], only
    /// those of the rows with the highest sampling rate among them).
    pub(crate) fn collect_usable(&mut self) {
        self.cells.clear();
        let cfg = &self.layout.cfg;
        let (sc, rc) = (self.s.cells(), self.r.cells());
        for row in 0..cfg.rows {
            let p = cfg.sampling[row];
            for o in 0..cfg.k {
                let i = self.layout.cell_index(row, self.bases[row], o);
                let (a, b) = (&sc[i], &rc[i]);
                if usable(a, b) {
                    self.cells.push(Usable {
                        row,
                        offset: o,
                        delay_sum: delay_sum(a, b),
                        n: a.n,
                        inverted: a.n as f64 / p,
                    });
                }
            }
        }
        if cfg.selection == Selection::Densest && !self.cells.is_empty() {
            let top = self
                .cells
                .iter()
                .map(|c| cfg.sampling[c.row])
                .fold(0.0, f64::max);
            self.cells.retain(|c| cfg.sampling[c.row] == top);
        }
    }

    /// The smallest inverted count among the usable cells, and the choice threshold
    /// `(1 + α)·n_min`.
    pub(crate) fn threshold(&self) -> Option<f64> {
        let min = self
            .cells
            .iter()
            .map(|c| c.inverted)
            .fold(f64::INFINITY, f64::min);
        min.is_finite()
            .then_some((1.0 + self.layout.cfg.alpha) * min)
    }

    /// DELAY ESTIMATION (Fig. 6): among the flow's usable cells (count and digest equal at
    /// both points), find the one with the fewest packets — the least interference — and
    /// aggregate every usable cell with at most `(1 + α)` times as many, `S_sum / N_sum`.
    ///
    /// Deviations from the pseudocode, both forced by its text: the comparison is `≤` (the
    /// text says "at most n(1 + α)"; with `<` and α = 0 not even the minimum cell would be
    /// chosen), and counts are compared after inversion by the row's sampling rate (§4.2).
    pub fn delay(&mut self, f: &FlowKey) -> FlowDelay {
        self.locate(f);
        self.collect_usable();
        let cfg = &self.layout.cfg;
        let mut out = FlowDelay {
            cells: cfg.rows * cfg.k,
            usable: self.cells.len(),
            ..Default::default()
        };
        let Some(limit) = self.threshold() else {
            return out;
        };
        let (mut s_sum, mut n_sum) = (0i128, 0u64);
        for c in &self.cells {
            if c.inverted <= limit {
                s_sum += c.delay_sum as i128;
                n_sum += c.n as u64;
                out.chosen += 1;
            }
        }
        out.packets_used = n_sum;
        out.mean_ns = Some(s_sum as f64 / n_sum as f64);
        out
    }
}

/// The aggregate delay over every packet both sketches agree on (LDA's estimator on the
/// LDS's cells): the mean over every usable cell of every row, each row covering the sampled
/// packets once. With weight rules the mean is weighted by the flows' weights (a note says so).
pub fn aggregate(s: &Synopsis, r: &Synopsis) -> Result<Estimate, MethodError> {
    check_pair(s, r)?;
    let cfg = s.config();
    let c = cfg.columns;
    let (sc, rc) = (s.cells(), r.cells());
    let (mut s_sum, mut n_sum) = (0i128, 0u64);
    let mut best_row = 0u64;
    let mut notes = Vec::new();
    let mut lost: Option<u64> = None;
    let mut overflowed = 0usize;
    for row in 0..cfg.rows {
        let (mut row_n, mut usable_cells, mut busy) = (0u64, 0usize, 0usize);
        let (mut sent, mut recv) = (0u64, 0u64);
        for i in row * c..(row + 1) * c {
            let (a, b) = (&sc[i], &rc[i]);
            sent += a.n as u64;
            recv += b.n as u64;
            overflowed += (a.n == Cell::OVERFLOW || b.n == Cell::OVERFLOW) as usize;
            if a.n != 0 || b.n != 0 {
                busy += 1;
            }
            if usable(a, b) {
                s_sum += delay_sum(a, b) as i128;
                row_n += a.n as u64;
                usable_cells += 1;
            }
        }
        n_sum += row_n;
        best_row = best_row.max(row_n);
        if busy > 0 && usable_cells * 2 < busy {
            notes.push(format!(
                "row {row}: only {usable_cells} of {busy} non-empty cells usable (loss or reordering)"
            ));
        }
        if lost.is_none() && cfg.sampling[row] == 1.0 && cfg.weights.is_empty() {
            lost = Some(sent.saturating_sub(recv));
        }
    }
    if !cfg.weights.is_empty() {
        notes.push("weight rules in force: the aggregate mean and counts are flow-weighted".into());
    }
    if overflowed > 0 {
        notes.push(format!(
            "{overflowed} cells overflowed their count and were left out"
        ));
    }
    let reason = (n_sum == 0).then(|| {
        if sc.iter().all(|a| a.n == 0) && rc.iter().all(|b| b.n == 0) {
            "no estimate: no packet sampled at either point".to_string()
        } else {
            "no estimate: no usable cell (every cell holding packets saw a loss, a reordering or packets only one point had)".to_string()
        }
    });
    Ok(Estimate {
        reason,
        quantiles: None,
        recovered: None,
        mean_ns: (n_sum > 0).then(|| s_sum as f64 / n_sum as f64),
        std_ns: None,
        samples: best_row,
        bytes: (cfg.rows * cfg.columns * CELL_BYTES) as u64,
        lost,
        mean_ci98_ns: None,
        std_ci95_ns: None,
        notes,
    })
}
