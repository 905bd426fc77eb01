//! `owl compare --filter`: the packets measured at both points, and the filter's mirror image
//! (the same conversations the other way, R→S) matched on their own, for the clocks' offset
//! from the two directions ([`owl_core::pipeline::truth::directions`]).

use owl_core::PacketRecord;
use owl_core::interval::Intervals;
use owl_core::pipeline::{StreamingTruth, TruthConfig};
use owl_trace::filter::Filter;

/// What `--filter` kept, and what its mirror image measured.
#[derive(Clone, Debug, Default)]
pub(crate) struct Selected {
    /// Packets the filter kept and left out, at S and at R.
    pub kept: [u64; 2],
    pub left_out: [u64; 2],
    /// Reverse packets (left out, their mirror image kept by the filter) seen first at R, then
    /// at S within the horizon, and the smallest of their delays (S's time minus R's).
    pub reverse_matched: u64,
    pub reverse_min_ns: Option<i64>,
}

/// The filter, its counts, and the truth of the reverse direction (R as its sender).
pub(crate) struct Selection {
    pub filter: Filter,
    counts: Selected,
    reverse: StreamingTruth,
    mirrored: Vec<PacketRecord>,
}

impl Selection {
    pub fn new(filter: Filter, horizon_ns: u64, disorder_ns: u64) -> Selection {
        let cfg = TruthConfig {
            disorder_ns,
            exact_quantiles: 0,
            // the reverse traffic's lead-in and lead-out are only one point's: unmatched,
            // which is all trimming would say of them
            trim: false,
            ..TruthConfig::new(Intervals::WHOLE, horizon_ns)
        };
        Selection {
            filter,
            counts: Selected::default(),
            reverse: StreamingTruth::new(cfg),
            mirrored: Vec::new(),
        }
    }

    /// Keep side `k`'s measured packets in `batch`; the reverse direction's go to its truth.
    pub fn select(&mut self, k: usize, batch: &mut Vec<PacketRecord>) {
        let before = batch.len();
        self.mirrored.clear();
        batch.retain(|r| {
            if self.filter.matches(&r.flow) {
                return true;
            }
            if self.filter.matches(&r.flow.reversed()) {
                self.mirrored.push(*r);
            }
            false
        });
        self.counts.kept[k] += batch.len() as u64;
        self.counts.left_out[k] += (before - batch.len()) as u64;
        // R→S: R sees them first (the reverse truth's sender), S later
        if k == 1 {
            self.reverse.push_sender(&self.mirrored);
        } else {
            self.reverse.push_receiver(&self.mirrored);
        }
        // nothing of the reverse truth is kept but its whole-run figures
        self.reverse.drain_closed().for_each(drop);
    }

    /// Side `k`'s capture ended.
    pub fn end(&mut self, k: usize) {
        if k == 1 {
            self.reverse.finish_sender();
        } else {
            self.reverse.finish_receiver();
        }
    }

    pub fn finish(self) -> Selected {
        let (t, _) = self.reverse.finish();
        Selected {
            reverse_matched: t.received,
            reverse_min_ns: t.delay.map(|d| d.min_ns),
            ..self.counts
        }
    }
}
