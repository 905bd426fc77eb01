//! R estimates a decided interval: its side cut at S's delimiters, then each method at once,
//! or RDA's exchange opened.

use super::*;

impl ReceiverState {
    /// R's synopses of interval `k` cut at S's delimiters (a delimiter cut): its core, the
    /// packets it held after the start's cut and before the end's ([`owl_core::cut`], the
    /// rule `owl estimate` applies to two files). S's delimiters are those S announced with
    /// `k`, or where S has no interval `k`, its previous interval's for the start (none
    /// announced: S sent nothing there) and its next one's for the end (none, and S has
    /// passed it: S sent nothing there; not announced yet: R's clock cuts, and the line says
    /// so) — [`owl_core::cut::Neighbours`]. A synopsis that cannot be assembled is an error
    /// of its method.
    #[allow(clippy::type_complexity)]
    fn cut_local(
        &self,
        k: u64,
        synopses: Synopses,
        cut: PointCut,
    ) -> (
        Vec<Result<Box<dyn PointSynopsis>, String>>,
        u64,
        Option<IntervalCut>,
    ) {
        let PointCut::Receiver { head, tail } = cut else {
            return (synopses.into_iter().map(Ok).collect(), 0, None);
        };
        // S's next interval not announced: silence once S has passed it, else R's clock cuts
        let [start, end] = self.neighbours.around(k, self.join.passed(SENDER, k + 1));
        let split = owl_core::cut::split(
            &self.intervals,
            k,
            &head,
            &tail,
            start.as_ref(),
            end.as_ref(),
        );
        let assembled = self
            .capture_methods
            .iter()
            .zip(synopses)
            .map(|(m, core)| {
                owl_core::cut::assemble(&**m, Some(core), &split).map_err(|e| e.to_string())
            })
            .collect();
        (
            assembled,
            split.packets(),
            Some(IntervalCut {
                start: split.start,
                end: split.end,
                held_in: split.packets(),
            }),
        )
    }

    /// Estimate interval `k`: one-way methods at once, RDA by opening its exchange.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start(
        &mut self,
        mut w: Option<&mut LinkWriter>,
        k: u64,
        local: Option<(Synopses, PointCut)>,
        remote: Option<Vec<Option<Vec<u8>>>>,
        errors: Vec<(u16, String)>,
        mut packets: [u64; 2],
    ) -> Result<(), AgentError> {
        let n = self.methods.len();
        let mut failed: Vec<(usize, String)> = Vec::new();
        let (mut local, cut): (Vec<Option<Box<dyn PointSynopsis>>>, _) = match local {
            Some((s, c)) => {
                let (assembled, held_in, cut) = self.cut_local(k, s, c);
                packets[1] += held_in;
                let local = assembled
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| match r {
                        Ok(s) => Some(s),
                        Err(e) => {
                            failed.push((i, e));
                            None
                        }
                    })
                    .collect();
                (local, cut)
            }
            None => ((0..n).map(|_| None).collect(), None),
        };
        if let (Some(t), Some(c)) = (self.summary.cuts.as_mut(), &cut) {
            t.add(k, c);
        }
        if packets == [0, 0] && cut.is_some() {
            // only R held packets here, and the cut put every one in a neighbouring interval:
            // nothing to measure (no line, as `owl estimate` writes none; a later line's quiet
            // stretch covers it)
            return Ok(());
        }
        let mut remote = remote.unwrap_or_else(|| vec![None; n]);
        let mut work = Work {
            start_ns: self.intervals.start_ns(k),
            packets,
            cut,
            kernel_drops: None,
            results: (0..n).map(|_| None).collect(),
            responders: (0..n).map(|_| None).collect(),
            classes: (0..n).map(|_| None).collect(),
        };
        for (i, e) in failed {
            if let Some(r) = work.results.get_mut(i) {
                *r = Some(Err(format!("the receiver's side at the cut: {e}")));
            }
        }
        // the class tap is the synopsis after the methods' (capture_options)
        let tap = match (self.per_class, local.len() > n) {
            (true, true) => local
                .pop()
                .flatten()
                .and_then(|t| receiver_of::<ClassTapMethod>(t).ok()),
            _ => None,
        };
        let received = tap.as_ref().map(|t| self.book.note(t));
        if let Some(t) = &tap
            && (t.overflow > 0 || t.collisions > 0)
        {
            (self.log)(&format!(
                "interval {k}: {} packets past the class tap's {DEFAULT_TAP_CAPACITY} identities and {} identities seen with two classes: their delays are in no class",
                t.overflow, t.collisions
            ));
        }
        for (i, e) in errors {
            if let Some(r) = work.results.get_mut(i as usize) {
                *r = Some(Err(e));
            }
        }
        for i in 0..n {
            if work.results[i].is_some() {
                continue;
            }
            let m = &self.methods[i];
            let r = local[i]
                .take()
                .unwrap_or_else(|| m.new_point(Role::Receiver));
            if self.rda[i].is_some() {
                let Some(w) = w.as_deref_mut() else {
                    work.results[i] = Some(Err("no sender is connected".into()));
                    continue;
                };
                match rda::open(w, k, i as u16, r)? {
                    Ok(resp) => work.responders[i] = Some(resp),
                    Err(e) => work.results[i] = Some(Err(e)),
                }
                continue;
            }
            let s = match remote[i].take() {
                Some(p) => m
                    .decode_point(Role::Sender, &p)
                    .map_err(|e| format!("the sender's synopsis: {e}")),
                None => Ok(m.new_point(Role::Sender)),
            };
            if let (Some(tap), Some(received), Ok(s)) = (&tap, &received, &s)
                && let Some(Ok(p)) = m.recovered_packets(&**s, &*r)
            {
                let mut c = ClassDelays::default();
                c.add_interval(&self.book, tap, received, &p);
                let buckets = (0..self.book.slots())
                    .filter_map(|slot| {
                        Some(ClassBuckets {
                            class: self.book.label(slot),
                            buckets: DelayBuckets::of_histogram(&c.slot(slot)?.histogram)?,
                        })
                    })
                    .collect();
                work.classes[i] = Some((buckets, c.unclassified));
            }
            let cut = work.cut;
            work.results[i] = Some(
                s.and_then(|s| m.estimate(s, r).map_err(|e| e.to_string()))
                    .map(|mut e| {
                        owl_core::pipeline::withhold_unpaired(&**m, cut.as_ref(), &mut e);
                        e
                    }),
            );
        }
        self.work.insert(k, work);
        Ok(())
    }
}
