//! The pair estimator (Algorithms 1 and 2 over every group of an interval) and OPA as a
//! [`Method`].

use std::sync::Arc;

use hashbrown::HashMap;

use crate::method::{
    DelayBasis, Estimate, Method, MethodConfig, MethodError, MethodInfo, PacketEstimate,
    RecoveredPacket, RecoveredPackets, TypedSynopsis,
};
use crate::wire::DecodeError;

use super::align::{self, DelayModel, recover_aligned};
use super::cah;
use super::config::{Config, MAX_WORK_PER_PACKET, MIN_WORK, Search};
use super::recovery::{
    Errors, GroupRecovery, Limits, Mapping, Unrecovered, arrived_whole, recover, work,
};
use super::synopsis::{Key, Receiver, Sender, Tuple};
use super::timestamps::{self, Codec, CodecError};

/// The first pass's cap on mappings per group; groups that reach it are searched again with
/// caps growing sixteenfold up to the configuration's, while the interval's budget lasts.
pub const FIRST_CAP: u64 = 1 << 12;
/// The same for the search aligned on the timestamps, whose first alignments are the likely
/// ones.
pub const FIRST_CAP_ALIGNED: u64 = 1 << 8;
/// A group's share of the interval's search budget in the first pass, per packet of the
/// group, in budgets per packet of the interval (sixteen times more each pass after).
pub const FIRST_SHARE: u64 = 2;
/// A job of several S segments (R's segment past a lost delimiter) has this many shares: it
/// tries several splits of R's packets, each within the cap.
pub const SPLIT_SHARES: u64 = 8;
/// Mappings of Algorithm 1 tried after an alignment failed.
pub const FALLBACK_CAP: u64 = 1 << 12;
/// Most delays sampled (from the groups that arrived whole) for the alignment's delay model.
pub const MODEL_SAMPLE: usize = 1 << 16;

/// Most consecutive sender segments one receiver segment may be split into (delimiters lost
/// in a row); a longer run is not searched.
pub const MAX_MERGED: usize = 4;
/// Fewest one-segment groups recovered on several cores at once (fewer are not worth the
/// threads), and most at once.
const PARALLEL_MIN: usize = 2;
const PARALLEL_STRETCH: usize = 1 << 16;

/// What became of one sender packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Received, at `receiver_ns`, as the packet of identity `id`.
    Delivered { id: u64, receiver_ns: u64 },
    /// Located as lost (its position solved by Eq. 5).
    Lost,
    /// In a group recovery could not resolve.
    Unrecovered,
}

/// One sender packet: its timestamp as the receiver decodes it, and its fate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderPacket {
    pub sender_ns: u64,
    pub fate: Fate,
}

/// What recovery found over an interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub sender_packets: u64,
    pub receiver_packets: u64,
    pub groups: u64,
    /// Groups with `w′ = w` and `B′ = B` (§IV-C).
    pub exact_groups: u64,
    /// Groups recovered with errors (§IV-D).
    pub recovered_groups: u64,
    pub unrecovered_groups: u64,
    pub unrecovered_sent: u64,
    pub unrecovered_received: u64,
    /// Unrecovered groups by reason.
    pub too_many_errors: u64,
    pub capped: u64,
    pub over_budget: u64,
    pub no_mapping: u64,
    /// Errors found in recovered groups.
    pub errors: Errors,
    /// Insertions placed by their solved hash at a lost position (reordered across a delimiter,
    /// or delayed far behind their group).
    pub rematched: u64,
    /// Received packets given no sender position.
    pub unplaced: u64,
    /// Received copies of a packet already in its group (removed before recovery).
    pub duplicates: u64,
    /// Received packets moved to the neighbouring segment across a delimiter that arrived
    /// out of place.
    pub recut: u64,
    /// Most groups with errors stayed unrecovered at the first cap, and were not searched
    /// further.
    pub hopeless: bool,
    /// Loss rate measured over the groups: packets S counted that R did not, over S's
    /// (a floor: insertions hide losses).
    pub loss_rate: f64,
    /// Fewest and most rows of a group.
    pub rows: (u32, u32),
    /// Mappings tested (Algorithm 1's loop), and the most in one group.
    pub mappings: u64,
    pub most_mappings: u64,
    /// Work spent (in [`work`](super::recovery::work) steps, about a nanosecond each) and the
    /// interval's budget of it: every phase of the pair side counts — decoding, the lists,
    /// the exact checks, the search, the re-matching, the estimate.
    pub work: u64,
    pub work_budget: u64,
    /// The part of `work` no budget cuts short (decoding the sender's timestamps and labels,
    /// R's lists, each group's exact check of §IV-C, the output and the estimate): charged
    /// first, the search has what the budget leaves.
    pub fixed_work: u64,
    /// Insertions left unplaced because the budget ran out before their re-matching.
    pub rematch_cut: u64,
    pub sender_segments: u64,
    pub receiver_segments: u64,
    /// Sender segments whose delimiter R did not see, recovered from R's merged segment.
    pub merged_segments: u64,
    /// R segments opened by a packet S did not see as a delimiter, or by a delimiter out of
    /// S's order (held behind later ones), merged back.
    pub foreign_segments: u64,
    pub tuple_bytes: u64,
    pub stream_bytes: u64,
    pub label_bytes: u64,
    pub payload_bytes: u64,
    pub codec_error: CodecError,
    /// Zeroth-order empirical entropy of the sender's inter-packet gaps, bits per gap: within
    /// each group (what the codec codes) and over all packets in time order.
    pub gap_entropy_group: f64,
    pub gap_entropy_all: f64,
}

/// Every sender packet's fate over an interval, in the sender's segment, group, position order.
#[derive(Clone, Debug, PartialEq)]
pub struct PairRecovery {
    pub packets: Vec<SenderPacket>,
    pub stats: Stats,
}

impl PairRecovery {
    /// The delays of delivered packets, ns.
    pub fn delays(&self) -> impl Iterator<Item = i64> + '_ {
        self.packets.iter().filter_map(|p| match p.fate {
            Fate::Delivered { receiver_ns, .. } => {
                Some(receiver_ns.wrapping_sub(p.sender_ns) as i64)
            }
            _ => None,
        })
    }
}

/// A received packet: its hash, identity, arrival time.
type Got = (u64, u64, u64);

/// A sender group: its tuple, and its packets' timestamps and labels by position.
struct Sent<'a> {
    tuple: Tuple,
    times: &'a [u64],
    labels: &'a [u8],
}

/// Recover an interval: decode the sender's timestamps (and labels), line the two points'
/// segments up, leave out R's duplicate copies, move packets across a delimiter that arrived
/// out of place, recover each group (Algorithm 1, or aligned on the timestamps), pair
/// positions with timestamps (Algorithm 2).
///
/// The receiver keeps the last recovery with a fingerprint of the sender's payload, so asking
/// for the packets ([`Method::estimate_packets`]) and then for the estimate recovers once.
///
/// Groups are recovered on the threads of the current rayon pool ([`recover_pair_on`]: every
/// core, or `owl compare --threads N`); the result is the same on any number of them.
pub fn recover_pair(s: &Sender, r: &Receiver) -> Result<Arc<PairRecovery>, MethodError> {
    recover_pair_on(s, r, rayon::current_num_threads())
}

/// [`recover_pair`] on at most `threads` threads: stretches of one-segment groups are
/// recovered at once, each within its share of the budget left, and taken in their order
/// while each asked for no more than it would have had one after the other (the first past
/// that is recovered again alone), so the result is the one a single thread finds.
pub fn recover_pair_on(
    s: &Sender,
    r: &Receiver,
    threads: usize,
) -> Result<Arc<PairRecovery>, MethodError> {
    Config::check_pair(&s.cfg, &r.cfg)?;
    let mut payload = Vec::new();
    s.encode(&mut payload);
    let print = xxhash_rust::xxh3::xxh3_64(&payload);
    if let Some(hit) = r.cache.get(print) {
        return Ok(hit);
    }
    let rec = Arc::new(recover_uncached(
        s,
        r,
        payload.len() as u64,
        threads.max(1),
    )?);
    r.cache.put(print, rec.clone());
    Ok(rec)
}

fn recover_uncached(
    s: &Sender,
    r: &Receiver,
    payload_bytes: u64,
    threads: usize,
) -> Result<PairRecovery, MethodError> {
    let cfg = &*s.cfg;
    let wire = s.wire();
    let g = cfg.groups as usize;
    let mut st = Stats {
        sender_segments: wire.segments.len() as u64,
        receiver_segments: r.segments.len() as u64,
        sender_packets: wire.packets(),
        receiver_packets: r.packets(),
        codec_error: wire.error,
        ..Default::default()
    };
    let (tb, sb, lb) = wire.split_bytes(cfg);
    st.tuple_bytes = tb;
    st.stream_bytes = sb;
    st.label_bytes = lb;
    st.payload_bytes = payload_bytes;
    let lengths: Vec<usize> = wire
        .segments
        .iter()
        .flat_map(|sg| sg.tuples.iter().map(|t| t.w as usize))
        .collect();
    let ts = timestamps::decode(cfg.codec, &wire.stream, &lengths)
        .map_err(|e| MethodError::Invalid(format!("opa: the sender's timestamps: {e}")))?;
    st.gap_entropy_group = timestamps::entropy_bits(
        ts.iter()
            .flat_map(|t| t.windows(2).map(|w| w[1].wrapping_sub(w[0]) as i64)),
    );
    let mut sorted: Vec<u64> = ts.iter().flatten().copied().collect();
    sorted.sort_unstable();
    st.gap_entropy_all = timestamps::entropy_bits(sorted.windows(2).map(|w| (w[1] - w[0]) as i64));
    let span_ns = match (sorted.first(), sorted.last()) {
        (Some(a), Some(b)) => b - a,
        _ => 0,
    };
    drop(sorted);

    // R's segments in S's order: a segment opened by a packet S did not see as a delimiter, or
    // by a delimiter that arrived out of S's order (held behind later delimiters), is merged
    // back into the one before it (the longest run of R's keys in S's order is kept)
    let mut s_keys: HashMap<Key, usize> = HashMap::new();
    for (i, sg) in wire.segments.iter().enumerate() {
        s_keys.entry(sg.key).or_insert(i);
    }
    let ranks: Vec<Option<usize>> = r
        .segments
        .iter()
        .map(|seg| s_keys.get(&seg.key).copied())
        .collect();
    let keep = in_order(&ranks);
    let mut rsegs: Vec<(Key, Vec<Vec<Got>>)> = Vec::new();
    for (k, seg) in r.segments.iter().enumerate() {
        let lists: Vec<Vec<Got>> = seg
            .groups
            .iter()
            .map(|grp| {
                grp.iter()
                    .map(|&(id, t)| (r.packet_hash(id), id, t))
                    .collect()
            })
            .collect();
        match rsegs.last_mut() {
            Some(last) if !keep[k] => {
                st.foreign_segments += 1;
                for (a, b) in last.1.iter_mut().zip(lists) {
                    a.extend(b);
                }
            }
            _ => rsegs.push((seg.key, lists)),
        }
    }
    // a packet R received twice is one packet: its first copy counts (in whichever segment it
    // arrived), the others are counted as duplicates — they would be insertions, and a later
    // copy in the packet's own segment could take the original's arrival time
    let mut seen: hashbrown::HashSet<u64> = hashbrown::HashSet::with_capacity(r.packets() as usize);
    for (_, lists) in &mut rsegs {
        for l in lists.iter_mut() {
            let before = l.len();
            l.retain(|p| seen.insert(p.1));
            st.duplicates += (before - l.len()) as u64;
        }
    }
    drop(seen);
    // runs: one R segment and the S segments it holds (more than one when delimiters were lost)
    let mut r_keys: HashMap<Key, usize> = HashMap::new();
    for (i, (k, _)) in rsegs.iter().enumerate() {
        r_keys.entry(*k).or_insert(i);
    }
    let mut used = vec![false; rsegs.len()];
    let mut runs: Vec<(Option<usize>, Vec<usize>)> = Vec::new();
    for (i, sg) in wire.segments.iter().enumerate() {
        match r_keys.get(&sg.key) {
            Some(&ri) if !used[ri] => {
                used[ri] = true;
                runs.push((Some(ri), vec![i]));
            }
            _ => match runs.last_mut() {
                Some(run) => run.1.push(i),
                None => runs.push((None, vec![i])),
            },
        }
    }
    for (ri, u) in used.iter().enumerate() {
        if !u {
            st.unplaced += rsegs[ri].1.iter().map(|l| l.len() as u64).sum::<u64>();
        }
    }
    // a delimiter that arrived late (or early) by m packets leaves the m packets it should
    // have led (or followed) in R's segment before (or after) it: one segment counts m more
    // than S sent, the next m fewer. A few are insertions near the end of one segment, solved
    // losses of the other, and re-matched; more than a search allows (m > MAX_INSERTIONS) are
    // moved, aligned on the timestamps, to the segment S sent them in — the m that arrived
    // just before the delimiter, or just after it — bounded by the shift
    if cfg.search == Search::Timestamps {
        let d = cfg.shift as usize;
        for a in 1..runs.len() {
            let (Some(ra), Some(rb)) = (runs[a - 1].0, runs[a].0) else {
                continue;
            };
            for gi in 0..g {
                let wa: i64 = runs[a - 1]
                    .1
                    .iter()
                    .map(|&i| wire.segments[i].tuples[gi].w as i64)
                    .sum();
                let wb: i64 = runs[a]
                    .1
                    .iter()
                    .map(|&i| wire.segments[i].tuples[gi].w as i64)
                    .sum();
                let na = rsegs[ra].1[gi].len() as i64;
                let nb = rsegs[rb].1[gi].len() as i64;
                let few = align::MAX_INSERTIONS as i64;
                if na - wa > few && wb - nb > few {
                    let m = ((na - wa).min(wb - nb) as usize).min(d);
                    let from = &mut rsegs[ra].1[gi];
                    let moved: Vec<Got> = from.drain(from.len() - m..).collect();
                    rsegs[rb].1[gi].splice(0..0, moved);
                    st.recut += m as u64;
                } else if wa - na > few && nb - wb > few {
                    // after the delimiter, which opened R's segment (with one group: its
                    // first packet)
                    let skip = usize::from(g == 1);
                    let m = ((wa - na).min(nb - wb) as usize).min(d);
                    let to = &mut rsegs[rb].1[gi];
                    let m = m.min(to.len().saturating_sub(skip));
                    let moved: Vec<Got> = to.drain(skip..skip + m).collect();
                    rsegs[ra].1[gi].extend(moved);
                    st.recut += m as u64;
                }
            }
        }
    }

    // each group of each run, within the interval's work budget: every group first with a
    // small cap, then the ones that reached it again with caps growing sixteenfold, so that a
    // hopeless group cannot starve the solvable ones
    let total = ((cfg.cpu * span_ns as f64) as u64)
        .min(MAX_WORK_PER_PACKET.saturating_mul(st.sender_packets))
        .max(MIN_WORK);
    st.work_budget = total;
    // the phases no budget cuts short, charged first: decoding the sender's timestamps and
    // labels (and their entropy), R's lists (hashes, duplicates, segments), the output and the
    // estimate; each group's exact check is added below
    st.fixed_work = st.sender_packets * work::SENT_PACKET
        + st.receiver_packets * work::RECEIVED_PACKET
        + (st.sender_segments + st.receiver_segments) * g as u64 * work::GROUP;
    let nseg = wire.segments.len();
    let jobs: Vec<(usize, usize)> = (0..runs.len())
        .flat_map(|r| (0..g).map(move |gi| (r, gi)))
        .collect();
    let list_of = |run: usize, gi: usize| -> &[Got] {
        match runs[run].0 {
            Some(ri) => &rsegs[ri].1[gi],
            None => &[],
        }
    };
    let labels = wire.labels(cfg);
    let tuples_of = |run: usize, gi: usize| -> Vec<Sent> {
        runs[run]
            .1
            .iter()
            .map(|&i| Sent {
                tuple: wire.segments[i].tuples[gi],
                times: &ts[i * g + gi][..],
                labels: labels.get(i * g + gi).map_or(&[][..], |l| &l[..]),
            })
            .collect()
    };
    // the interval's delays and loss rate, for the alignment's likelihood: the groups that
    // arrived whole (count for count) give their delays in order
    let model = {
        let (mut sent, mut missing, mut whole) = (0u64, 0u64, 0usize);
        for (run, gi) in jobs.iter().copied() {
            let list = list_of(run, gi);
            let tuples = tuples_of(run, gi);
            let w: usize = tuples.iter().map(|t| t.tuple.w as usize).sum();
            sent += w as u64;
            missing += w.saturating_sub(list.len()) as u64;
            if tuples.len() == 1 && w == list.len() {
                whole += w;
            }
        }
        let stride = whole.div_ceil(MODEL_SAMPLE).max(1);
        let mut delays = Vec::with_capacity(whole.min(MODEL_SAMPLE) + 1);
        let mut at = 0usize;
        for (run, gi) in jobs.iter().copied() {
            let list = list_of(run, gi);
            let tuples = tuples_of(run, gi);
            if tuples.len() == 1 && tuples[0].tuple.w as usize == list.len() {
                for (p, &t) in list.iter().zip(tuples[0].times) {
                    if at.is_multiple_of(stride) {
                        delays.push(p.2.wrapping_sub(t) as i64);
                    }
                    at += 1;
                }
            }
        }
        st.loss_rate = missing as f64 / sent.max(1) as f64;
        DelayModel::fit(&mut delays, st.loss_rate)
    };
    // Level 0 (§IV-C) for every group R received as many packets of as S sent: `B′ = B`, the
    // packets in order. It is what places anything at all, so no budget cuts it (it costs a
    // few field operations a packet); its groups are not searched
    type Found = Result<Vec<(Mapping, usize, usize)>, Unrecovered>;
    let mut found: Vec<Found> = vec![Err(Unrecovered::Cap); jobs.len()];
    let whole_candidates: Vec<usize> = (0..jobs.len())
        .filter(|&n| {
            let (run, gi) = jobs[n];
            runs[run].1.len() == 1
                && runs[run].0.is_some()
                && wire.segments[runs[run].1[0]].tuples[gi].w as usize == list_of(run, gi).len()
        })
        .collect();
    let whole: Vec<Option<Mapping>> = {
        let check = |n: usize| {
            let (run, gi) = jobs[n];
            let t = &wire.segments[runs[run].1[0]].tuples[gi];
            let xs: Vec<u64> = list_of(run, gi).iter().map(|p| p.0).collect();
            arrived_whole(&t.b, cfg.rows_for(t.w), t.w as usize, &xs, &cah::augmented)
        };
        if threads > 1 && whole_candidates.len() >= PARALLEL_MIN {
            use rayon::prelude::*;
            let per = whole_candidates.len().div_ceil(threads);
            whole_candidates
                .par_chunks(per)
                .map(|c| c.iter().map(|&n| check(n)).collect::<Vec<_>>())
                .collect::<Vec<_>>()
                .into_iter()
                .flatten()
                .collect()
        } else {
            whole_candidates.iter().map(|&n| check(n)).collect()
        }
    };
    let mut searched_jobs = vec![true; jobs.len()];
    for (&n, m) in whole_candidates.iter().zip(whole) {
        let (run, gi) = jobs[n];
        let w = wire.segments[runs[run].1[0]].tuples[gi].w;
        st.fixed_work += cfg.rows_for(w) as u64 * u64::from(w) * work::WHOLE_ROW;
        if let Some(m) = m {
            st.mappings += 1;
            st.most_mappings = st.most_mappings.max(1);
            found[n] = Ok(vec![(m, 0, w as usize)]);
            searched_jobs[n] = false;
        }
    }
    st.work = st.fixed_work;
    // the search has what the fixed phases leave
    let mut budget = total.saturating_sub(st.fixed_work);
    let first_cap = match cfg.search {
        Search::Paper => FIRST_CAP,
        Search::Timestamps => FIRST_CAP_ALIGNED,
    };
    st.rows = (u32::MAX, 0);
    for sg in &wire.segments {
        for t in &sg.tuples {
            let k = cfg.rows_for(t.w) as u32;
            st.rows = (st.rows.0.min(k), st.rows.1.max(k));
        }
    }
    if st.rows.0 > st.rows.1 {
        st.rows = (cfg.rows, cfg.rows);
    }
    let mut cap = first_cap.min(cfg.max_mappings);
    let mut share = (budget / st.sender_packets.max(1))
        .saturating_mul(FIRST_SHARE)
        .max(1);
    let mut deferred = vec![false; jobs.len()];
    let mut pending: Vec<usize> = (0..jobs.len()).filter(|&n| searched_jobs[n]).collect();
    loop {
        let mut again = Vec::new();
        // one job as the budget left allows (a job of several S segments tries several
        // splits, each within the cap)
        let one = |n: usize, st: &mut Stats, spend: &mut Spend| {
            let (run, gi) = jobs[n];
            let segs = &runs[run].1;
            if segs.len() > MAX_MERGED || runs[run].0.is_none() {
                Err(Unrecovered::NoMapping)
            } else {
                let mut lim = cfg.limits();
                lim.max_mappings = cap;
                assign(
                    cfg,
                    &lim,
                    &model,
                    list_of(run, gi),
                    &tuples_of(run, gi),
                    st,
                    spend,
                )
            }
        };
        let single = |n: usize| {
            let (run, _) = jobs[n];
            runs[run].1.len() == 1 && runs[run].0.is_some()
        };
        // a job's share of the budget in this pass: `share` for each of its packets (sent and
        // received), so that every group is tried before a few hard ones spend the budget; a
        // job of several S segments (a lost delimiter, rare) tries several splits, each within
        // the cap, and has a share for each split it may try
        let share_of = |n: usize| {
            let (run, gi) = jobs[n];
            let splits = if single(n) { 1 } else { SPLIT_SHARES };
            let w: u64 = runs[run]
                .1
                .iter()
                .map(|&i| u64::from(wire.segments[i].tuples[gi].w))
                .sum();
            share
                .saturating_mul(w + list_of(run, gi).len() as u64)
                .saturating_mul(splits)
        };
        // a job that spent its share (not the interval's budget) is searched again in the
        // next pass, with the next cap and share
        let spent_share = |r: &Found, spend: &Spend, budget: u64| {
            *r == Err(Unrecovered::Budget) && spend.limit < budget
        };
        let mut at = 0;
        while at < pending.len() {
            // a stretch of one-segment jobs whose shares the budget left covers is recovered on
            // every core, each job within its share of the budget left; they are taken in
            // order while each stayed within what it would have had one after the other (the
            // same steps, so the same result, as on one thread), and the first job past that
            // is recovered again alone
            let mut room = budget;
            let stretch = pending[at..]
                .iter()
                .take(PARALLEL_STRETCH)
                .take_while(|&&n| {
                    let c = share_of(n);
                    let fits = single(n) && c <= room;
                    room = room.saturating_sub(c);
                    fits
                })
                .count();
            if threads > 1 && stretch >= PARALLEL_MIN {
                let batch = &pending[at..at + stretch];
                let per = batch.len().div_ceil(threads);
                let left = budget;
                // on the threads of the current rayon pool (owl compare --threads bounds it)
                use rayon::prelude::*;
                let results: Vec<(Found, Stats, Spend)> = batch
                    .par_chunks(per)
                    .map(|chunk| {
                        chunk
                            .iter()
                            .map(|&n| {
                                let mut local = Stats::default();
                                let mut spend = Spend::new(left.min(share_of(n)));
                                let r = one(n, &mut local, &mut spend);
                                (r, local, spend)
                            })
                            .collect::<Vec<_>>()
                    })
                    .collect::<Vec<_>>()
                    .into_iter()
                    .flatten()
                    .collect();
                let mut taken = 0;
                for (&n, (r, local, spend)) in batch.iter().zip(results) {
                    let alone = budget.min(share_of(n));
                    if spend.limit != alone && spend.reached > alone {
                        break;
                    }
                    deferred[n] = spent_share(&r, &spend, budget);
                    found[n] = r;
                    budget -= spend.spent;
                    st.work += spend.spent;
                    st.mappings += local.mappings;
                    st.most_mappings = st.most_mappings.max(local.most_mappings);
                    taken += 1;
                }
                at += taken;
                if taken == stretch {
                    continue;
                }
            }
            let n = pending[at];
            let mut spend = Spend::new(budget.min(share_of(n)));
            let r = one(n, &mut st, &mut spend);
            deferred[n] = spent_share(&r, &spend, budget);
            found[n] = r;
            budget -= spend.spent;
            st.work += spend.spent;
            at += 1;
        }
        let mut stuck = 0;
        for &n in &pending {
            if found[n] == Err(Unrecovered::Cap) || deferred[n] {
                stuck += 1;
                again.push(n);
            }
        }
        // the first pass decides whether the path is within OPA's assumptions: when most of
        // the groups with errors it searched stayed unrecovered at the first cap or share
        // (reordering far beyond the shift bound, i.i.d. delays), searching them harder only
        // spends the budget (groups the budget left unsearched say nothing either way)
        let searched = pending
            .iter()
            .filter(|&&n| match &found[n] {
                Ok(parts) => parts.iter().any(|p| p.0.errors.total() > 0),
                Err(Unrecovered::Budget) => deferred[n],
                Err(_) => true,
            })
            .count();
        if cap == first_cap.min(cfg.max_mappings) && stuck * 2 > searched {
            st.hopeless = true;
            break;
        }
        if again.is_empty() || cap >= cfg.max_mappings || budget == 0 {
            break;
        }
        cap = cap.saturating_mul(16).min(cfg.max_mappings);
        share = share.saturating_mul(16);
        pending = again;
    }
    let mut fates: Vec<Vec<Fate>> = lengths
        .iter()
        .map(|&w| vec![Fate::Unrecovered; w])
        .collect();
    let mut solved: Vec<Vec<(u32, u64)>> = vec![Vec::new(); nseg * g];
    let mut inserted: Vec<(usize, usize, Got)> = Vec::new(); // (S segment, group, packet)
    for (_, segs) in &runs {
        st.merged_segments += segs.len() as u64 - 1;
        st.groups += (segs.len() * g) as u64;
    }
    for (n, &(run, gi)) in jobs.iter().enumerate() {
        let segs = &runs[run].1;
        let list = list_of(run, gi);
        match &found[n] {
            Ok(parts) => {
                for (&si, (m, start, end)) in segs.iter().zip(parts) {
                    let f = &mut fates[si * g + gi];
                    for &(q, h) in &m.lost {
                        f[q as usize - 1] = Fate::Lost;
                        solved[si * g + gi].push((q, h));
                    }
                    for (&q, p) in m.sigma.iter().zip(&list[*start..*end]) {
                        if q == 0 {
                            inserted.push((si, gi, *p));
                        } else {
                            f[q as usize - 1] = Fate::Delivered {
                                id: p.1,
                                receiver_ns: p.2,
                            };
                        }
                    }
                    st.errors.lost += m.errors.lost;
                    st.errors.inserted += m.errors.inserted;
                    st.errors.moved += m.errors.moved;
                    if m.errors.total() == 0 {
                        st.exact_groups += 1;
                    } else {
                        st.recovered_groups += 1;
                    }
                }
            }
            Err(why) => {
                let tuples = tuples_of(run, gi);
                st.unrecovered_groups += tuples.len() as u64;
                st.unrecovered_sent += tuples.iter().map(|t| t.tuple.w as u64).sum::<u64>();
                st.unrecovered_received += list.len() as u64;
                st.unplaced += list.len() as u64;
                match why {
                    Unrecovered::TooManyErrors => st.too_many_errors += tuples.len() as u64,
                    Unrecovered::Cap => st.capped += tuples.len() as u64,
                    Unrecovered::Budget => st.over_budget += tuples.len() as u64,
                    Unrecovered::NoMapping => st.no_mapping += tuples.len() as u64,
                }
            }
        }
    }
    // packets reordered across a delimiter (or delayed past several): an insertion whose
    // augmented hash at a lost position of its group, in any segment, is the solved one (the
    // first such segment): the solved hashes are indexed by group, position and hash, and an
    // insertion looks up its hash at each position solved in its group
    let mut index: HashMap<(usize, u32, u64), Vec<usize>> = HashMap::new();
    let mut positions: Vec<Vec<u32>> = vec![Vec::new(); g];
    for sj in 0..nseg {
        for gi in 0..g {
            for &(q, h) in &solved[sj * g + gi] {
                index.entry((gi, q, h)).or_default().push(sj);
                positions[gi].push(q);
            }
        }
    }
    for p in &mut positions {
        p.sort_unstable();
        p.dedup();
    }
    for l in index.values_mut() {
        l.reverse(); // the first segment last: taken by pop
    }
    // each insertion's look-ups are searched work: they stop where the budget does
    for (_, gi, (x, id, t)) in inserted {
        let cost = positions[gi].len() as u64 * work::REMATCH + work::GROUP;
        if cost > budget {
            st.rematch_cut += 1;
            st.unplaced += 1;
            continue;
        }
        budget -= cost;
        st.work += cost;
        let hit = positions[gi]
            .iter()
            .filter_map(|&q| {
                let key = (gi, q, cah::augmented(x, q as u64));
                index.get(&key).and_then(|l| l.last()).map(|&sj| (sj, key))
            })
            .min();
        match hit {
            Some((sj, key)) => {
                index.get_mut(&key).expect("found").pop();
                fates[sj * g + gi][key.1 as usize - 1] = Fate::Delivered { id, receiver_ns: t };
                st.rematched += 1;
            }
            None => st.unplaced += 1,
        }
    }
    let packets = ts
        .iter()
        .zip(&fates)
        .flat_map(|(t, f)| {
            t.iter()
                .zip(f)
                .map(|(&sender_ns, &fate)| SenderPacket { sender_ns, fate })
        })
        .collect();
    Ok(PairRecovery { packets, stats: st })
}

/// Which of R's segments to keep as segments: those whose sender ranks form the longest
/// increasing run (patience sorting), the first always.
fn in_order(ranks: &[Option<usize>]) -> Vec<bool> {
    let mut keep = vec![false; ranks.len()];
    // tails[l]: index of the smallest last rank of an increasing run of length l + 1
    let mut tails: Vec<usize> = Vec::new();
    let mut prev: Vec<Option<usize>> = vec![None; ranks.len()];
    for (i, r) in ranks.iter().enumerate() {
        let Some(r) = *r else { continue };
        let at = tails.partition_point(|&t| ranks[t].expect("ranked") < r);
        prev[i] = at.checked_sub(1).map(|a| tails[a]);
        if at == tails.len() {
            tails.push(i);
        } else {
            tails[at] = i;
        }
    }
    let mut at = tails.last().copied();
    while let Some(i) = at {
        keep[i] = true;
        at = prev[i];
    }
    if let Some(k) = keep.first_mut() {
        *k = true;
    }
    keep
}

/// One job's share of the interval's work budget: its limit (the budget left when it starts),
/// what its groups' searches spent, and the most any of them asked for, counted from the
/// job's start. The job takes the same steps under any limit of at least `reached`.
#[derive(Clone, Copy, Debug)]
struct Spend {
    limit: u64,
    spent: u64,
    reached: u64,
}

impl Spend {
    fn new(limit: u64) -> Spend {
        Spend {
            limit,
            spent: 0,
            reached: 0,
        }
    }

    fn add(&mut self, r: &GroupRecovery) {
        self.reached = self.reached.max(self.spent + r.reached);
        self.spent += r.work;
    }
}

/// The mappings of consecutive sender tuples (with their sending times) over one received
/// list, split where each tuple's packets end: `(mapping, start, end)` per tuple.
#[allow(clippy::too_many_arguments)]
fn assign(
    cfg: &Config,
    lim: &Limits,
    model: &DelayModel,
    list: &[Got],
    tuples: &[Sent],
    st: &mut Stats,
    spend: &mut Spend,
) -> Result<Vec<(Mapping, usize, usize)>, Unrecovered> {
    let run = |part: &[Got], s: &Sent, st: &mut Stats, spend: &mut Spend| {
        // the group's lists for the search (hashes, arrival times, labels)
        let prep = (part.len() as u64 + u64::from(s.tuple.w)) * work::JOB_PACKET;
        spend.reached = spend.reached.max(spend.spent + prep);
        if spend.spent + prep > spend.limit {
            return Err(Unrecovered::Budget);
        }
        spend.spent += prep;
        let mut lim = *lim;
        lim.max_work = spend.limit - spend.spent;
        let xs: Vec<u64> = part.iter().map(|p| p.0).collect();
        let t = &s.tuple;
        let (k, w) = (cfg.rows_for(t.w), t.w as usize);
        let r = if cfg.search == Search::Timestamps && w <= align::MAX_ALIGNED {
            let arrived: Vec<u64> = part.iter().map(|p| p.2).collect();
            let labels: Vec<u8> = if s.labels.is_empty() {
                Vec::new()
            } else {
                xs.iter().map(|&x| cfg.label(x)).collect()
            };
            let pts = align::Points {
                sent: s.times,
                sent_labels: s.labels,
                arrived: &arrived,
                labels: &labels,
            };
            let mut r = recover_aligned(&t.b, k, w, &xs, &pts, model, &cah::augmented, &lim);
            // what the alignment does not propose (a path far from FIFO, a packet held far
            // behind its segment), Algorithm 1 may still find within its few errors: a short
            // enumeration after every failed alignment
            if r.result.is_err() && r.result != Err(Unrecovered::TooManyErrors) {
                let mut paper = lim;
                paper.max_mappings = FALLBACK_CAP.min(lim.max_mappings.saturating_sub(r.tested));
                paper.max_work = lim.max_work - r.work;
                if paper.max_mappings > 0 {
                    let p = recover(&t.b, k, w, &xs, &cah::augmented, &paper);
                    r.tested += p.tested;
                    r.reached = r.reached.max(r.work + p.reached);
                    r.work += p.work;
                    if p.result.is_ok() {
                        r.result = p.result;
                    }
                }
            }
            r
        } else {
            recover(&t.b, k, w, &xs, &cah::augmented, &lim)
        };
        spend.add(&r);
        st.mappings += r.tested;
        st.most_mappings = st.most_mappings.max(r.tested);
        r.result
    };
    let [t0, rest @ ..] = tuples else {
        return Ok(Vec::new());
    };
    if rest.is_empty() {
        return run(list, t0, st, spend).map(|m| vec![(m, 0, list.len())]);
    }
    // the first tuple's packets end near its count (within its errors): try the likeliest end
    // first, then outwards — its count (the paper's search), or the packets that arrived by
    // the time its last one was sent plus the median delay (aligned on the timestamps)
    let w0 = t0.tuple.w as i64;
    let (lo, hi, guess) = match cfg.search {
        Search::Paper => {
            let e = cfg.max_errors as i64;
            (w0 - e, w0 + e, w0)
        }
        Search::Timestamps => {
            let lo = w0 - (cfg.rows_for(t0.tuple.w) as i64 - 1);
            let hi = w0 + align::MAX_INSERTIONS as i64;
            let guess = match t0.times.last() {
                Some(&t) => {
                    let by = t.saturating_add_signed(model.median());
                    list.partition_point(|p| p.2 <= by) as i64
                }
                None => w0,
            };
            (lo, hi, guess.clamp(lo, hi))
        }
    };
    let mut last = Unrecovered::NoMapping;
    let mut capped = false;
    let reach = (guess - lo).max(hi - guess);
    for off in (0..=reach).flat_map(|o| if o == 0 { vec![0] } else { vec![-o, o] }) {
        let c = guess + off;
        if c < lo.max(0) || c > hi.min(list.len() as i64) {
            continue;
        }
        let c = c as usize;
        match run(&list[..c], t0, st, spend) {
            Ok(m0) => match assign(cfg, lim, model, &list[c..], rest, st, spend) {
                Ok(more) => {
                    let mut out = vec![(m0, 0, c)];
                    out.extend(more.into_iter().map(|(m, a, b)| (m, a + c, b + c)));
                    return Ok(out);
                }
                Err(why) => last = why,
            },
            Err(why) => last = why,
        }
        // a split that reached the cap may check with a larger one: say so, whatever the
        // other splits found
        capped |= last == Unrecovered::Cap;
    }
    Err(if capped { Unrecovered::Cap } else { last })
}

/// An interval's estimate from its recovery: the exact mean and std of the recovered delays,
/// and what they rest on.
/// What a recovery's `placed` delays rest on ([`DelayBasis::Placed`]): the received packets
/// given no delay, and the timestamp codec's largest error (what the quantiles' intervals
/// allow for).
fn unplaced_and_error(cfg: &Config, rec: &PairRecovery, placed: u64) -> (u64, u64) {
    let st = &rec.stats;
    (
        st.receiver_packets
            .saturating_sub(st.duplicates)
            .saturating_sub(placed),
        match cfg.codec {
            Codec::Lossless => 0,
            Codec::Wavelet { .. } => st.codec_error.max_abs_ns,
        },
    )
}

pub fn to_estimate(cfg: &Config, rec: &PairRecovery) -> Estimate {
    let st = &rec.stats;
    let delays: Vec<i64> = rec.delays().collect();
    let n = delays.len();
    let (mean, std) = if n == 0 {
        (None, None)
    } else {
        let sum: i128 = delays.iter().map(|&d| d as i128).sum();
        let m = sum as f64 / n as f64;
        let ss: f64 = delays.iter().map(|&d| (d as f64 - m).powi(2)).sum();
        (Some(m), Some((ss / n as f64).sqrt()))
    };
    let lost_located = rec.packets.iter().filter(|p| p.fate == Fate::Lost).count() as u64;
    let lost = lost_located + st.unrecovered_sent.saturating_sub(st.unrecovered_received);
    let per = |b: u64| b as f64 / st.sender_packets.max(1) as f64;
    let mut notes = vec![format!(
        "{n} of {} received packets placed with their delay, {lost_located} of {} sent located lost; {} groups: {} exact, {} recovered ({} lost, {} inserted, {} moved, {} re-matched across a delimiter), {} unrecovered",
        st.receiver_packets,
        st.sender_packets,
        st.groups,
        st.exact_groups,
        st.recovered_groups,
        st.errors.lost,
        st.errors.inserted,
        st.errors.moved,
        st.rematched,
        st.unrecovered_groups
    )];
    if st.unrecovered_groups > 0 {
        notes.push(format!(
            "unrecovered groups hold {} sent and {} received packets ({} with more errors than {}, {} at the cap of {} mappings, {} past the interval's search budget, {} with no mapping within the search); their loss counted as the difference{}",
            st.unrecovered_sent,
            st.unrecovered_received,
            st.too_many_errors,
            match cfg.search {
                Search::Paper => format!("the budget of {}", cfg.max_errors),
                Search::Timestamps => "their rows solve".to_string(),
            },
            st.capped,
            cfg.max_mappings,
            st.over_budget,
            st.no_mapping,
            if st.over_budget > 0 && !st.hopeless {
                format!(
                    " — the budget is {} of a core per second of traffic (opa:cpu={}); a larger cpu searches further, given the time",
                    cfg.cpu, cfg.cpu
                )
            } else {
                String::new()
            }
        ));
    }
    if st.hopeless && !reordered_note(st, cfg) {
        notes.push(
            "most groups with errors were unrecoverable at the first cap and were not searched further: reordering far beyond the shift bound (or independent per-packet delays) breaks OPA's assumption of mostly ordered packets (§II)".to_string(),
        );
    }
    if st.duplicates > 0 || st.recut > 0 {
        notes.push(format!(
            "{} received copies of a packet left out before recovery; {} packets moved to the segment across a delimiter that arrived out of place",
            st.duplicates, st.recut
        ));
    }
    // say so only when groups were lost to it (a loss rate a little over the design that
    // every group survived needs no advice); packets missing from their groups are losses
    // only when the interval lost as many: else they arrived elsewhere (reordered across
    // segments), which is what to say
    let fixed = cfg.design_loss == 0.0;
    let net_loss = st.sender_packets.saturating_sub(st.receiver_packets) as f64
        / st.sender_packets.max(1) as f64;
    let reordered = st.loss_rate > cfg.design_loss && net_loss <= cfg.design_loss;
    if reordered && st.too_many_errors > 0 {
        notes.push(format!(
            "{:.3} % of the packets were missing from their groups but only {:.3} % of the interval was lost: the rest arrived in other segments, reordered beyond OPA's design of mostly ordered packets (§II), which no design_loss fixes{}",
            100.0 * st.loss_rate,
            100.0 * net_loss,
            if st.hopeless {
                " (independent per-packet delays, or reordering far beyond the shift bound)"
            } else {
                ""
            }
        ));
    } else if st.loss_rate > cfg.design_loss && st.too_many_errors > 0 {
        let paper_search = cfg.labels == 0 || cfg.search == Search::Paper;
        notes.push(format!(
            "measured loss {:.3} % exceeds the design loss rate of {} % the groups' rows ({} to {}) are sized for{}: a group losing as many packets as it has rows cannot be recovered ({} groups with too many errors here); record with a larger design_loss{}",
            100.0 * st.loss_rate,
            100.0 * cfg.design_loss,
            st.rows.0,
            st.rows.1,
            if fixed { " (0: fixed rows)" } else { "" },
            st.too_many_errors,
            if paper_search {
                " — on lossy paths design_loss=0.01,labels=2,search=timestamps (opa's configuration; about 1 B a packet with wavelet timestamps)"
            } else {
                ""
            }
        ));
    }
    let share = |w: u64| 100.0 * w as f64 / st.work_budget.max(1) as f64;
    notes.push(format!(
        "{} mappings tested (at most {} in a group), work {:.1} % of the interval's budget ({:.0} ms of one core at cpu={}; the phases no budget cuts — decoding, R's lists, each group's exact check, the estimate — {:.1} % of it){}{}; segments: {} at S, {} at R, {} recovered past a lost delimiter, {} opened by a packet S did not see or out of order",
        st.mappings,
        st.most_mappings,
        share(st.work),
        st.work_budget as f64 / 1e6,
        cfg.cpu,
        share(st.fixed_work),
        if st.fixed_work >= st.work_budget {
            ": they alone spent the budget, nothing was searched"
        } else {
            ""
        },
        if st.rematch_cut > 0 {
            format!(
                "; {} packets reordered across a delimiter left unplaced when the budget ran out",
                st.rematch_cut
            )
        } else {
            String::new()
        },
        st.sender_segments,
        st.receiver_segments,
        st.merged_segments,
        st.foreign_segments
    ));
    let (h_group, h_all) = (st.gap_entropy_group, st.gap_entropy_all);
    let (unplaced, max_error_ns) = unplaced_and_error(cfg, rec, n as u64);
    let codec = match cfg.codec {
        Codec::Lossless => "lossless".to_string(),
        Codec::Wavelet { ratio } => format!("wavelet θ = {ratio}"),
    };
    notes.push(format!(
        "bytes per packet: {:.3} ({:.3} OPA tuples, {:.3} labels, {:.3} timestamps {codec}); zeroth-order entropy of the sender's gaps: {:.3} B per packet in group order, {:.3} B in S order",
        per(st.payload_bytes),
        per(st.tuple_bytes),
        per(st.label_bytes),
        per(st.stream_bytes),
        h_group / 8.0,
        h_all / 8.0
    ));
    if let Codec::Wavelet { .. } = cfg.codec {
        let e = &st.codec_error;
        notes.push(format!(
            "sender timestamp error per packet (wavelet): mean |e| {:.1} ns, mean e {:.2} ns, max |e| {} ns",
            e.mean_abs_ns(),
            e.mean_ns(),
            e.max_abs_ns
        ));
    }
    // the rule the figures rest on: the placed packets stand for the received ones
    let placed = n as f64 / st.receiver_packets.max(1) as f64;
    let reason = (st.receiver_packets > 0 && placed < MIN_PLACED).then(|| {
        format!(
            "withheld: {n} of {} received packets placed ({:.1} %, under the {:.0} % the mean and std rest on; quantiles only where their bounds allow for every unplaced packet): the unplaced sit in groups with reordering or losses beyond the search, not a random sample",
            st.receiver_packets,
            100.0 * placed,
            100.0 * MIN_PLACED
        )
    });
    let withheld = reason.is_some();
    Estimate {
        reason,
        mean_ns: if withheld { None } else { mean },
        std_ns: if withheld { None } else { std },
        samples: n as u64,
        bytes: st.payload_bytes,
        lost: Some(lost),
        // The mean and std are those of the recovered packets themselves, exact for the
        // lossless codec: no sampling interval applies. What they leave out (the unrecovered
        // groups) is in the notes.
        mean_ci98_ns: None,
        std_ci95_ns: None,
        notes,
        recovered: Some(crate::method::RecoveredDelays::placed(
            &delays,
            unplaced,
            max_error_ns,
        )),
        // quantiles come with certain bounds that allow for every unplaced packet: kept
        // where every one has them, withheld with the mean otherwise
        quantiles: bounded_quantiles(delays, unplaced, max_error_ns).filter(|q| {
            !withheld
                || [q.p50_ci95_ns, q.p90_ci95_ns, q.p99_ci95_ns, q.p999_ci95_ns]
                    .iter()
                    .all(Option::is_some)
        }),
    }
}

/// Fewest received packets, as a fraction, OPA must place for its mean, std and quantiles to
/// stand for the interval: below it they are withheld with the reason ([`to_estimate`]).
pub const MIN_PLACED: f64 = 0.5;

/// Whether the notes blame reordering, not loss, for packets missing from their groups.
fn reordered_note(st: &Stats, cfg: &Config) -> bool {
    let net_loss = st.sender_packets.saturating_sub(st.receiver_packets) as f64
        / st.sender_packets.max(1) as f64;
    st.loss_rate > cfg.design_loss && net_loss <= cfg.design_loss && st.too_many_errors > 0
}

/// Delay quantiles of the delivered packets with intervals that hold whatever the packets left
/// unplaced and the timestamp codec did (owl's addition; the paper reports no quantiles).
///
/// Of `N = n + u′` delivered packets, `n` are placed and `u′ ≤ u` are not (`u`: received
/// copies given no delay). The true `q`-quantile, rank `k = ⌈qN⌉` among all of them, has
/// between `k − u′` and `k` placed delays at or below it, so it lies between the placed order
/// statistics of ranks `⌈q(n + u)⌉ − u` and `⌈q(n + u)⌉` (the extremes over `u′`). Each placed
/// delay is off by at most the sender's largest timestamp error `E` (0 for the lossless codec;
/// the wavelet's, computed at S and shipped, §V-A), and so is each order statistic: the
/// interval is `[P̂(lo) − E, P̂(hi) + E]`. It holds with certainty, so it is a (conservative)
/// 95 % interval; none is given when a rank falls outside the placed delays. With every
/// packet placed and lossless timestamps it is the exact quantile itself.
fn bounded_quantiles(
    mut delays: Vec<i64>,
    unplaced: u64,
    max_error_ns: u64,
) -> Option<crate::method::Quantiles> {
    if delays.is_empty() {
        return None;
    }
    delays.sort_unstable();
    let n = delays.len() as u64;
    let e = max_error_ns as f64;
    let interval = |p: f64| -> Option<[f64; 2]> {
        let k = (p * (n + unplaced) as f64).ceil() as u64;
        let (lo, hi) = (k.checked_sub(unplaced)?, k);
        if lo < 1 || hi > n {
            return None;
        }
        Some([
            delays[lo as usize - 1] as f64 - e,
            delays[hi as usize - 1] as f64 + e,
        ])
    };
    Some(crate::method::Quantiles {
        p50_ci95_ns: interval(0.50),
        p90_ci95_ns: interval(0.90),
        p99_ci95_ns: interval(0.99),
        p999_ci95_ns: interval(0.999),
        ..crate::method::Quantiles::of_sorted(&delays)
    })
}

/// OPA under a name: `opa` (lossless timestamps) or `opa-wavelet`.
#[derive(Clone, Debug)]
pub struct OpaMethod {
    name: &'static str,
    cfg: Arc<Config>,
}

impl OpaMethod {
    pub fn new(cfg: Config) -> Result<OpaMethod, MethodError> {
        cfg.validate()?;
        let name = Self::name_of(&cfg);
        Ok(OpaMethod {
            name,
            cfg: Arc::new(cfg),
        })
    }

    /// The name a configuration is registered under.
    pub fn name_of(cfg: &Config) -> &'static str {
        match cfg.codec {
            Codec::Lossless => "opa",
            Codec::Wavelet { .. } => "opa-wavelet",
        }
    }

    pub fn config_struct(&self) -> &Config {
        &self.cfg
    }
}

impl MethodConfig for Config {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        Config::pairs(self)
    }
}

impl crate::method::TypedMethod for OpaMethod {
    type Config = Config;
    type Sender = Sender;
    type Receiver = Receiver;
    fn name(&self) -> &str {
        self.name
    }
    fn config(&self) -> &Config {
        &self.cfg
    }
    fn foreign(&self) -> crate::method::Foreign {
        crate::method::Foreign::Matches(
            "a group's hashes place every packet R has; one S did not send is an insertion",
        )
    }
    fn new_sender(&self) -> Sender {
        Sender::new(self.cfg.clone())
    }
    fn new_receiver(&self) -> Receiver {
        Receiver::new(self.cfg.clone())
    }
    fn decode_sender(&self, bytes: &[u8]) -> Result<Sender, DecodeError> {
        Sender::decode(self.cfg.clone(), bytes)
    }
    fn decode_receiver(&self, bytes: &[u8]) -> Result<Receiver, DecodeError> {
        Receiver::decode(self.cfg.clone(), bytes)
    }
    fn estimate(&self, s: Sender, r: Receiver) -> Result<Estimate, MethodError> {
        Ok(to_estimate(&s.cfg, &*recover_pair(&s, &r)?))
    }
    fn estimate_packets(
        &self,
        sender: &Sender,
        receiver: &Receiver,
    ) -> Option<Result<Vec<PacketEstimate>, MethodError>> {
        Some((|| {
            let (s, r) = (sender, receiver);
            let rec = recover_pair(s, r)?;
            let mut out: Vec<PacketEstimate> = rec
                .packets
                .iter()
                .map(|p| match p.fate {
                    Fate::Delivered { id, receiver_ns } => PacketEstimate {
                        id: Some(id),
                        sender_ns: p.sender_ns,
                        receiver_ns: Some(receiver_ns),
                        placed: true,
                    },
                    Fate::Lost => PacketEstimate {
                        id: None,
                        sender_ns: p.sender_ns,
                        receiver_ns: None,
                        placed: true,
                    },
                    Fate::Unrecovered => PacketEstimate {
                        id: None,
                        sender_ns: p.sender_ns,
                        receiver_ns: None,
                        placed: false,
                    },
                })
                .collect();
            out.sort_by_key(|p| p.sender_ns);
            Ok(out)
        })())
    }
    /// Every packet placed with its delay (the recovery is the one [`estimate`](crate::method::TypedMethod::estimate) makes:
    /// the receiver keeps it).
    fn recovered_packets(
        &self,
        sender: &Sender,
        receiver: &Receiver,
    ) -> Option<Result<RecoveredPackets, MethodError>> {
        Some((|| {
            let (s, r) = (sender, receiver);
            let rec = recover_pair(s, r)?;
            let packets: Vec<RecoveredPacket> = rec
                .packets
                .iter()
                .filter_map(|p| match p.fate {
                    Fate::Delivered { id, receiver_ns } => Some(RecoveredPacket {
                        id,
                        delay_ns: receiver_ns.wrapping_sub(p.sender_ns) as i64,
                    }),
                    _ => None,
                })
                .collect();
            let (unplaced, max_error_ns) = unplaced_and_error(&s.cfg, &rec, packets.len() as u64);
            Ok(RecoveredPackets {
                basis: DelayBasis::Placed {
                    unplaced,
                    max_error_ns,
                },
                packets,
            })
        })())
    }
}

/// Rebuild `name` from configuration fields; the name says the codec when they do not.
fn from_config(
    name: &'static str,
    pairs: &[(String, String)],
) -> Result<Box<dyn Method>, MethodError> {
    let base = if name == "opa" {
        Config::lossless(1)
    } else {
        Config::wavelet(1)
    };
    let cfg = Config::from_pairs_over(base, pairs)?;
    let n = OpaMethod::name_of(&cfg);
    if n != name {
        return Err(MethodError::Invalid(format!(
            "a synopsis of method '{name}' carries the configuration of '{n}'"
        )));
    }
    Ok(Box::new(OpaMethod::new(cfg)?))
}

/// `opa`: not sizeable by `--memory` — what crosses follows the traffic (about 2.6 B a
/// packet: tuples, labels and lossless timestamps; each estimate reports its bytes).
pub const LOSSLESS: MethodInfo = MethodInfo {
    name: "opa",
    summary: "OPA (Every Packet Counts): Vandermonde-coded order per group + lossless timestamps, exact per-packet delay and loss",
    samples: "packets the mean rests on",
    per_flow: false,
    per_packet: true,
    recovers_delays: true,
    crosses: "the sender's OPA tuples (Vandermonde-coded hashes per group, rows sized for 1 % loss), 2 label bits a packet and its losslessly compressed timestamps, one way (about 2.6 B a packet, 0.5 B of it tuples); the receiver computes its own side; no round trip",
    build: |o| Ok(Box::new(OpaMethod::new(Config::lossless(o.seed))?)),
    from_config: |pairs| from_config("opa", pairs),
};

/// `opa-wavelet`: OPA as the paper configures it (§V-A, §VI-B): wavelet timestamps (θ =
/// 0.06), 3 rows per group, no labels, Algorithm 1 — the paper's overhead, 0.44 B a packet.
pub const WAVELET: MethodInfo = MethodInfo {
    name: "opa-wavelet",
    summary: "OPA as the paper configures it: wavelet timestamps (6 % of coefficients), 3 rows a group, Algorithm 1; per-packet delay within the reported timestamp error, 0.44 B a packet",
    samples: "packets the mean rests on",
    per_flow: false,
    per_packet: true,
    recovers_delays: true,
    crosses: "the sender's OPA tuples (3 rows a group) and its wavelet-compressed timestamps (θ = 0.06), one way (about 0.44 B a packet, the paper's overhead; `design_loss=0.01,labels=2,search=timestamps` for lossy paths, about 1 B); the receiver computes its own side; no round trip",
    build: |o| Ok(Box::new(OpaMethod::new(Config::wavelet(o.seed))?)),
    from_config: |pairs| from_config("opa-wavelet", pairs),
};
