use super::*;
use crate::exact::method::ExactMethod;
use crate::method::receiver_ref;
use crate::pipeline::{NoHook, NoTimer, PairPipeline, PipelineConfig, TruthConfig};

fn rec(ts_ns: u64, id: u64) -> PacketRecord {
    PacketRecord {
        ts_ns,
        id,
        flow: FlowKey::default(),
        len: 100,
    }
}

fn held(records: Vec<PacketRecord>) -> Held {
    Held {
        records,
        seqs: Vec::new(),
        overflowed: false,
    }
}

const MS: u64 = 1_000_000;

#[test]
fn windows_sit_around_each_boundary() {
    let iv = Intervals::aligned(100 * MS);
    let Cut::Delimiter(d) = Cut::delimiter(10 * MS, 8, iv).unwrap() else {
        panic!("a delimiter cut");
    };
    assert_eq!((d.before_ns, d.after_ns), (2 * MS, 10 * MS));
    assert_eq!(d.window_of(&iv, 0), Some(0));
    assert_eq!(d.window_of(&iv, 10 * MS - 1), Some(0));
    assert_eq!(d.window_of(&iv, 10 * MS), None);
    assert_eq!(d.window_of(&iv, 98 * MS - 1), None);
    assert_eq!(d.window_of(&iv, 98 * MS), Some(1));
    assert_eq!(d.window_of(&iv, 109 * MS), Some(1));
    // a window that would meet the next one is refused; one interval has no boundary
    assert!(matches!(
        Cut::delimiter(90 * MS, 8, iv),
        Err(CutError::WindowTooLong { .. })
    ));
    assert!(Cut::delimiter(10 * MS, 0, iv).is_err());
    assert_eq!(Cut::delimiter(10 * MS, 8, Intervals::WHOLE), Ok(Cut::Clock));
    // the default fits half of a short interval, and holds no longer than the horizon
    let fitted = |t: u64, h: u64| match Cut::delimiter_fitted(Intervals::aligned(t), h) {
        Cut::Delimiter(f) => (f.before_ns, f.after_ns),
        Cut::Clock => panic!("a delimiter cut"),
    };
    let (b, a) = fitted(50 * MS, 1_000 * MS);
    assert!(b + a <= 25 * MS && a > 20 * MS, "{b} {a}");
    assert_eq!(fitted(250 * MS, 1_000 * MS), (10 * MS, 104_166_665));
    assert_eq!(fitted(1_000 * MS, 1_000 * MS), (10 * MS, DEFAULT_AFTER_NS));
    assert_eq!(fitted(1_000 * MS, 80 * MS), (10 * MS, 80 * MS));
    // pairs round-trip, and an absent cut reads as a clock cut (older files)
    for cut in [Cut::Clock, Cut::Delimiter(d)] {
        let pairs: Vec<(String, String)> = cut
            .pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(Cut::from_pairs(&pairs), Ok(cut));
    }
    assert_eq!(Cut::from_pairs(&[]), Ok(Cut::Clock));
    assert!(Cut::from_pairs(&[("cut".into(), "sometimes".into())]).is_err());
}

/// The cut is R's first sighting of any of S's delimiters; the packets held before it go
/// before the boundary, whatever R's clock said.
#[test]
fn the_first_delimiter_seen_cuts() {
    let iv = Intervals::aligned(100 * MS);
    // boundary 1 at 100 ms; S's first packets of interval 1 are 10, 11, 12
    let head = held(vec![
        rec(99 * MS, 1),
        rec(101 * MS, 2), // in flight: sent before the boundary, received after it
        rec(102 * MS, 3),
        rec(103 * MS, 10),
        rec(104 * MS, 4), // reordered across the cut: it goes after it
        rec(105 * MS, 11),
    ]);
    let s = split(
        &iv,
        1,
        &head,
        &Held::default(),
        Some(&Named::First(vec![10, 11, 12])),
        Some(&Named::First(vec![])),
    );
    assert_eq!(s.head.iter().map(|r| r.id).collect::<Vec<_>>(), [10, 4, 11]);
    let b = s.start.unwrap();
    assert_eq!(b.cut, BoundaryCut::Delimiter { nth: 0 });
    assert_eq!((b.held, b.crossed), (6, 2));
    // the first delimiter lost: the second cuts at the same place
    let lost: Vec<PacketRecord> = head
        .records
        .iter()
        .copied()
        .filter(|r| r.id != 10)
        .collect();
    let s = split(
        &iv,
        1,
        &held(lost),
        &Held::default(),
        Some(&Named::First(vec![10, 11, 12])),
        None,
    );
    assert_eq!(s.start.unwrap().cut, BoundaryCut::Delimiter { nth: 1 });
    assert_eq!(s.head.iter().map(|r| r.id).collect::<Vec<_>>(), [11]);
    // the tail of interval 0 is the complement
    let t = split(
        &iv,
        0,
        &Held::default(),
        &head,
        None,
        Some(&Named::First(vec![10, 11, 12])),
    );
    assert_eq!(t.tail.iter().map(|r| r.id).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(t.end.unwrap().cut, BoundaryCut::Delimiter { nth: 0 });
}

#[test]
fn silence_and_fallbacks() {
    let iv = Intervals::aligned(100 * MS);
    let head = held(vec![rec(99 * MS, 1), rec(101 * MS, 2)]);
    // S named none: everything R held was sent before the boundary
    let s = split(
        &iv,
        1,
        &head,
        &Held::default(),
        Some(&Named::First(vec![])),
        None,
    );
    assert!(s.head.is_empty());
    assert_eq!(s.start.unwrap().cut, BoundaryCut::Silent);
    assert_eq!(s.start.unwrap().crossed, 1);
    // S named some, none arrived: R's clock, said
    let s = split(
        &iv,
        1,
        &head,
        &Held::default(),
        Some(&Named::First(vec![7, 8])),
        None,
    );
    assert_eq!(s.head.iter().map(|r| r.id).collect::<Vec<_>>(), [2]);
    assert_eq!(s.start.unwrap().fell_back(), Some(Fallback::NotSeen));
    // unknown delimiters, an overflowed hold
    let s = split(&iv, 1, &head, &Held::default(), None, None);
    assert_eq!(s.start.unwrap().fell_back(), Some(Fallback::Unnamed));
    let over = Held {
        overflowed: true,
        ..head.clone()
    };
    let s = split(
        &iv,
        1,
        &over,
        &Held::default(),
        Some(&Named::First(vec![2])),
        None,
    );
    assert_eq!(s.start.unwrap().fell_back(), Some(Fallback::Overflow));
    // nothing held, nothing named: nothing to report
    let s = split(&iv, 1, &Held::default(), &Held::default(), None, None);
    assert_eq!((s.start, s.end), (None, None));
}

#[test]
fn cut_data_round_trips_and_refuses_hostile_bytes() {
    let flows = [
        FlowKey::default(),
        FlowKey {
            proto: 6,
            src: "10.0.0.1".parse().unwrap(),
            dst: "2001:db8::2".parse().unwrap(),
            sport: 1,
            dport: 443,
        },
    ];
    let records: Vec<PacketRecord> = (0..500u64)
        .map(|i| PacketRecord {
            ts_ns: 5 * MS + i * 1_000,
            id: i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            flow: flows[(i % 2) as usize],
            len: 40 + i as u32,
        })
        .collect();
    let cuts = [
        PointCut::None,
        PointCut::Sender {
            start: vec![1, 2, 3],
            end: Named::SILENT,
        },
        PointCut::Sender {
            start: vec![4],
            end: Named::Last(vec![7, 5, 6]),
        },
        PointCut::Sender {
            start: vec![],
            end: Named::Stopped(vec![8]),
        },
        PointCut::Receiver {
            head: Arc::new(held(records.clone())),
            tail: Arc::new(Held::default()),
        },
    ];
    for c in &cuts {
        let mut b = Vec::new();
        encode_point_cut(c, 5 * MS, &mut b);
        let mut r = WireReader::new(&b);
        assert_eq!(&decode_point_cut(&mut r).unwrap(), c);
        r.finish("cut").unwrap();
        // every truncation is an error, never a panic
        for n in 0..b.len() {
            assert!(decode_point_cut(&mut WireReader::new(&b[..n])).is_err());
        }
    }
    // a count that cannot fit is refused before anything is allocated
    let mut b = vec![CUT_RECEIVER, 0];
    b.extend_from_slice(&0u64.to_le_bytes());
    WireWriter::new(&mut b).varint(u64::MAX / 2);
    assert!(decode_point_cut(&mut WireReader::new(&b)).is_err());
    assert!(decode_point_cut(&mut WireReader::new(&[9])).is_err());
    // a start named by last packets is refused; so is a count past the most delimiters
    assert!(decode_point_cut(&mut WireReader::new(&[CUT_SENDER, 0x80, 0])).is_err());
    for head in [
        vec![CUT_SENDER, 0, 0x80 | (MAX_DELIMITERS + 1)],
        vec![CUT_SENDER, 0, 0xff, MAX_DELIMITERS + 1],
    ] {
        let mut b = head;
        b.extend(std::iter::repeat_n(0, 8 * (MAX_DELIMITERS as usize + 1)));
        assert!(decode_point_cut(&mut WireReader::new(&b)).is_err());
    }
}

/// S's stream ended before the boundary's window did: R cuts after the last of S's last
/// packets it holds (what followed it S never saw), falls back to its clock when none of them
/// is held, and reads silence (all before) only where S said it was silent.
#[test]
fn an_ended_sender_is_cut_after_its_last_packet() {
    let iv = Intervals::aligned(100 * MS);
    // boundary 1 at 100 ms; S's last packets 5, 6 (its capture stopped at 99.5 ms), and R
    // goes on receiving traffic S never saw
    let tail = held(vec![
        rec(99 * MS, 5),
        rec(99 * MS + 600_000, 6),
        rec(99 * MS + 900_000, 20), // sent after S stopped, received before the boundary
        rec(101 * MS, 21),
        rec(102 * MS, 22),
    ]);
    let last = Named::Last(vec![4, 5, 6]);
    let s = split(&iv, 0, &Held::default(), &tail, None, Some(&last));
    assert_eq!(s.tail.iter().map(|r| r.id).collect::<Vec<_>>(), [5, 6]);
    let b = s.end.unwrap();
    assert_eq!(b.cut, BoundaryCut::Ended);
    assert_eq!((b.held, b.crossed), (5, 1));
    // the interval after it takes the rest, cut at the same place
    let n = split(&iv, 1, &tail, &Held::default(), Some(&last), None);
    assert_eq!(
        n.head.iter().map(|r| r.id).collect::<Vec<_>>(),
        [20, 21, 22]
    );
    assert_eq!(n.start.unwrap().cut, BoundaryCut::Ended);
    // what silence would have said: every held packet S's
    let silent = split(&iv, 0, &Held::default(), &tail, None, Some(&Named::SILENT));
    assert_eq!(silent.tail.len(), 5);
    // S's last packet lost: the one before it cuts; none held: R's clock, said
    let lost = held(tail.records.iter().copied().filter(|r| r.id != 6).collect());
    let s = split(&iv, 0, &Held::default(), &lost, None, Some(&last));
    assert_eq!(s.tail.iter().map(|r| r.id).collect::<Vec<_>>(), [5]);
    let none = held(tail.records[2..].to_vec());
    let s = split(&iv, 0, &Held::default(), &none, None, Some(&last));
    assert_eq!(s.tail.iter().map(|r| r.id).collect::<Vec<_>>(), [20]);
    assert_eq!(s.end.unwrap().fell_back(), Some(Fallback::Ended));
    // nothing held: nothing followed S's last packet
    let s = split(
        &iv,
        0,
        &Held::default(),
        &Held::default(),
        None,
        Some(&last),
    );
    assert_eq!(s.end.unwrap().cut, BoundaryCut::Ended);
    assert!(s.tail.is_empty());
    // S watched up to the boundary: holding none of its last packets, R received them before
    // its window, and every packet it holds came after S stopped
    let stopped = Named::Stopped(vec![4, 5, 6]);
    let s = split(&iv, 0, &Held::default(), &none, None, Some(&stopped));
    assert!(s.tail.is_empty());
    assert_eq!(s.end.unwrap().cut, BoundaryCut::Ended);
    let s = split(&iv, 0, &Held::default(), &tail, None, Some(&stopped));
    assert_eq!(s.tail.iter().map(|r| r.id).collect::<Vec<_>>(), [5, 6]);
}

/// A FIFO path with delays of up to 8 ms across 50 ms boundaries, 1 % loss: under the
/// delimiter cut R's interval `i` is S's interval `i` less its lost packets, in every
/// interval; under the clock cut the packets in flight at each boundary are in the next one.
/// `packets` at 100 kpps from 1 s on, over a FIFO path of 1 to 8 ms with 1 % loss: what S
/// and R capture.
fn fifo_path(packets: u64) -> (Vec<PacketRecord>, Vec<PacketRecord>) {
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut sent = Vec::new();
    let mut received = Vec::new();
    let mut last_arrival = 0u64;
    for k in 0..packets {
        let ts = 1_000 * MS + k * 10_000;
        let id = rnd();
        sent.push(rec(ts, id));
        if rnd() % 100 == 0 {
            continue;
        }
        // FIFO: a queue that drains in order
        let arrival = (ts + MS + rnd() % (7 * MS)).max(last_arrival + 1);
        last_arrival = arrival;
        received.push(rec(arrival, id));
    }
    (sent, received)
}

/// The exact method's outcomes of `sent` and `received` joined under `cut`, the two streams
/// pushed in lock-step a few packets at a time.
fn run_pair(
    iv: Intervals,
    cut: Cut,
    sent: &[PacketRecord],
    received: &[PacketRecord],
) -> Vec<crate::pipeline::IntervalOutcome> {
    let methods: Vec<Arc<dyn crate::method::Method>> = vec![Arc::new(ExactMethod)];
    let mut p = PairPipeline::new(
        PipelineConfig {
            intervals: iv,
            disorder_ns: MS,
        },
        methods,
        Some(TruthConfig::new(iv, 100 * MS)),
    )
    .with_cut(cut);
    let (mut a, mut b) = (0, 0);
    while a < sent.len() || b < received.len() {
        let take_s = b >= received.len() || (a < sent.len() && sent[a].ts_ns <= received[b].ts_ns);
        if take_s {
            let e = (a + 64).min(sent.len());
            p.push(Role::Sender, &sent[a..e], &mut NoTimer, &mut NoHook);
            a = e;
        } else {
            let e = (b + 64).min(received.len());
            p.push(Role::Receiver, &received[b..e], &mut NoTimer, &mut NoHook);
            b = e;
        }
    }
    p.finish_point(Role::Sender, &mut NoTimer, &mut NoHook);
    p.finish_point(Role::Receiver, &mut NoTimer, &mut NoHook);
    let mut out: Vec<_> = p.drain().collect();
    let (rest, _, _) = p.finish();
    out.extend(rest);
    out
}

#[test]
fn a_delimiter_cut_gives_both_points_the_same_packets() {
    let iv = Intervals::aligned(50 * MS);
    // 100 kpps, 8 intervals
    let (sent, received) = fifo_path(40_000);
    let run = |cut: Cut| run_pair(iv, cut, &sent, &received);
    let delivered: std::collections::HashSet<u64> = received.iter().map(|r| r.id).collect();
    let by_interval = |i: u64| -> Vec<u64> {
        sent.iter()
            .filter(|r| iv.index(r.ts_ns) == Some(i) && delivered.contains(&r.id))
            .map(|r| r.id)
            .collect()
    };
    let d = Cut::delimiter(20 * MS, 8, iv).unwrap();
    // R's windows open intervals in the truth on either side of the 8 intervals the packets
    // were sent in, for the cut to put their packets in: they hold nothing, and no point has
    // a side of them (compare does not report them)
    let (outcomes, empty): (Vec<_>, Vec<_>) = run(d).into_iter().partition(|o| {
        let t = o.truth.as_ref().unwrap();
        o.packets.is_some() || t.sent + t.received > 0
    });
    assert_eq!(outcomes.len(), 8);
    assert!(empty.len() <= 2);
    let mut crossed = 0;
    for o in &outcomes {
        let truth = o.truth.as_ref().expect("a truth");
        assert_eq!(
            truth.left, 0,
            "interval {}: nothing left to the next",
            o.index
        );
        let Some(Ok(e)) = &o.estimates[0] else {
            panic!("interval {}: no exact estimate", o.index)
        };
        // the exact method's samples are the packets both points put in the interval
        assert_eq!(
            e.samples,
            by_interval(o.index).len() as u64,
            "interval {}",
            o.index
        );
        assert_eq!(e.samples, truth.matched, "interval {}", o.index);
        let c = o.cut.expect("a cut report");
        if let Some(b) = c.start {
            assert!(
                matches!(b.cut, BoundaryCut::Delimiter { .. }),
                "interval {}: {b:?}",
                o.index
            );
            crossed += b.crossed;
        }
        let [s, r] = o.packets.unwrap();
        assert_eq!(s - r, truth.lost, "interval {}", o.index);
    }
    // about 4 ms of 100 kpps in flight at each of 7 inner boundaries
    assert!(crossed > 7 * 200, "{crossed} packets crossed");
    // the same path cut by each point's clock: packets in flight land in the next interval
    let outcomes = run(Cut::Clock);
    let left: u64 = outcomes
        .iter()
        .map(|o| o.truth.as_ref().unwrap().left)
        .sum();
    assert!(left > 7 * 200, "{left} left");
    assert!(outcomes.iter().all(|o| o.cut.is_none()));
}

/// S's capture stops while traffic goes on, and R's goes on capturing it. Stopped just before
/// a boundary, S's last interval at R holds exactly the packets S sent in it less the lost
/// ones, cut after S's last packet (read as silence, R's whole window past the boundary went
/// into it: it "received" more than S sent). Stopped inside an interval, R's interval holds
/// what it received after S stopped in its core, beyond any cut: its end falls back and says
/// so, and the interval before it is whole.
#[test]
fn a_sender_that_stops_first_keeps_its_last_interval_its_own() {
    let iv = Intervals::aligned(50 * MS);
    let (sent, received) = fifo_path(40_000);
    let delivered: std::collections::HashSet<u64> = received.iter().map(|r| r.id).collect();
    let cut = Cut::delimiter(20 * MS, 8, iv).unwrap();
    let mine = |s: &[PacketRecord], i: u64| {
        let all = s.iter().filter(|r| iv.index(r.ts_ns) == Some(i));
        (
            all.clone().count() as u64,
            all.filter(|r| delivered.contains(&r.id)).count() as u64,
        )
    };
    // S stops 0.5 ms before the boundary at 1.2 s (interval 24)
    let s: Vec<PacketRecord> = sent
        .iter()
        .copied()
        .filter(|r| r.ts_ns < 1_200 * MS - MS / 2)
        .collect();
    let outcomes = run_pair(iv, cut, &s, &received);
    let o = outcomes.iter().find(|o| o.index == 23).unwrap();
    let Some(Ok(e)) = &o.estimates[0] else {
        panic!("no exact estimate")
    };
    let (ns, nr) = mine(&s, 23);
    assert_eq!(
        o.packets,
        Some([ns, nr]),
        "R's packets of S's last interval"
    );
    assert_eq!(e.samples, nr);
    let t = o.truth.as_ref().unwrap();
    assert_eq!((t.matched, t.lost), (nr, ns - nr));
    let end = o.cut.unwrap().end.unwrap();
    assert_eq!(end.cut, BoundaryCut::Ended);
    // R received traffic past S's stop within the window: the cut moved it out
    assert!(end.held > 100 && end.crossed > 0, "{end:?}");
    // what reading the end as silence gave
    let mut silent = Held::default();
    for r in &received {
        if cut.delimiters().unwrap().window_of(&iv, r.ts_ns) == Some(24) {
            silent.records.push(*r);
        }
    }
    let old = split(
        &iv,
        23,
        &Held::default(),
        &silent,
        None,
        Some(&Named::SILENT),
    );
    assert!(old.tail.len() as u64 > end.held - end.crossed + 100);

    // S stops 3 ms into interval 24: 23 is whole, 24 holds R's packets after S's stop
    let s: Vec<PacketRecord> = sent
        .iter()
        .copied()
        .filter(|r| r.ts_ns < 1_203 * MS)
        .collect();
    let outcomes = run_pair(iv, cut, &s, &received);
    let o = outcomes.iter().find(|o| o.index == 23).unwrap();
    let (ns, nr) = mine(&s, 23);
    assert_eq!(o.packets, Some([ns, nr]));
    assert!(o.cut.unwrap().fell_back().is_none());
    let o = outcomes.iter().find(|o| o.index == 24).unwrap();
    let (ns, nr) = mine(&s, 24);
    let [s24, r24] = o.packets.unwrap();
    assert_eq!(s24, ns);
    assert!(r24 > 10 * nr, "{r24} at R, {nr} of them S's");
    assert_eq!(o.cut.unwrap().fell_back(), Some(Fallback::Ended));
    // the exact method matches identities: S's packets only
    let Some(Ok(e)) = &o.estimates[0] else {
        panic!("no exact estimate")
    };
    assert_eq!(e.samples, nr);
}

/// A sender stream names its last packets for the end of its last interval when it ends
/// short of the next boundary (Last) or between it and its window's end (Stopped: it watched
/// the whole interval), and silence once it has passed the window.
#[test]
fn a_sender_names_its_end_by_how_far_its_stream_went() {
    let iv = Intervals::aligned(50 * MS);
    let cut = Cut::delimiter(20 * MS, 4, iv).unwrap();
    let methods: Vec<Arc<dyn crate::method::Method>> = vec![Arc::new(ExactMethod)];
    let recs: Vec<PacketRecord> = (0..100u64)
        .map(|k| rec(1_000 * MS + k * MS / 4, k))
        .collect();
    let last = vec![96, 97, 98, 99];
    for (advance, want) in [
        (None, Named::Last(last.clone())),
        (Some(1_050 * MS - 1), Named::Last(last.clone())),
        (Some(1_050 * MS), Named::Stopped(last.clone())),
        (Some(1_069 * MS), Named::Stopped(last.clone())),
        (Some(1_070 * MS), Named::SILENT),
    ] {
        let mut p =
            crate::pipeline::PointStream::new(Role::Sender, iv, MS, methods.clone()).with_cut(cut);
        p.push(&recs, &NoTimer);
        if let Some(t) = advance {
            p.advance(t);
        }
        let mut closed = Vec::new();
        p.drain_closed(&mut closed);
        p.finish(&mut closed);
        assert_eq!(closed.len(), 1);
        let PointCut::Sender { start, end } = &closed[0].cut else {
            panic!("a sender's cut")
        };
        assert_eq!(start, &[0, 1, 2, 3]);
        assert_eq!(end, &want, "advanced to {advance:?}");
    }
}

/// R's synopsis assembled from its core and the two windows is the one of its packets in
/// order, and a receiver stream closed under a delimiter cut keeps every record exactly once.
#[test]
fn a_receiver_keeps_every_record_once() {
    let iv = Intervals::aligned(50 * MS);
    let cut = Cut::delimiter(20 * MS, 4, iv).unwrap();
    let methods: Vec<Arc<dyn crate::method::Method>> = vec![Arc::new(ExactMethod)];
    let mut p =
        crate::pipeline::PointStream::new(Role::Receiver, iv, MS, methods.clone()).with_cut(cut);
    let recs: Vec<PacketRecord> = (0..3_000u64)
        .map(|k| rec(1_000 * MS + k * 100_000, k))
        .collect();
    let mut closed = Vec::new();
    for c in recs.chunks(100) {
        p.push(c, &NoTimer);
        p.drain_closed(&mut closed);
    }
    p.finish(&mut closed);
    // with every boundary "silent" at S, each held packet belongs before its boundary
    let mut seen = Vec::new();
    for c in closed {
        let PointCut::Receiver { head, tail } = &c.cut else {
            panic!("receiver cut data")
        };
        let s = split(
            &iv,
            c.index,
            head,
            tail,
            Some(&Named::First(vec![])),
            Some(&Named::First(vec![])),
        );
        let syn = assemble(&ExactMethod, c.synopses.into_iter().next(), &s).unwrap();
        let e = receiver_ref::<ExactMethod>(&*syn).unwrap();
        seen.extend(e.packets.iter().map(|p| p.0));
    }
    assert_eq!(seen, (0..3_000).collect::<Vec<_>>());
    assert!(p.counters().held > 0);
}

/// An interval S has no side of is cut at what S named with its neighbours: the end of
/// `k − 1` (silence where S has no `k − 1`), the start of `k + 1` (silence once S has passed
/// it, unknown before); S's own names where it has `k`; forgetting keeps `k − 1`.
#[test]
fn neighbours_name_the_boundaries_of_an_interval_s_has_not() {
    let mut n = Neighbours::default();
    n.note(4, &[1, 2], &Named::First(vec![3]));
    n.note_cut(
        6,
        &PointCut::Sender {
            start: vec![7],
            end: Named::Last(vec![8, 9]),
        },
    );
    n.note_cut(9, &PointCut::None);
    assert_eq!(
        n.around(4, false),
        [Some(Named::First(vec![1, 2])), Some(Named::First(vec![3]))]
    );
    assert_eq!(
        n.around(5, false),
        [Some(Named::First(vec![3])), Some(Named::First(vec![7]))]
    );
    assert_eq!(n.around(7, false), [Some(Named::Last(vec![8, 9])), None]);
    assert_eq!(n.around(7, true)[1], Some(Named::SILENT));
    assert_eq!(n.around(3, true)[0], Some(Named::SILENT));
    assert_eq!(n.around(9, false), [Some(Named::SILENT), None]);
    // a later interval noted: S passed 8 without it
    n.note(10, &[11], &Named::SILENT);
    assert_eq!(n.around(7, false)[1], Some(Named::SILENT));
    n.forget_below(6);
    assert_eq!(n.around(5, false)[0], Some(Named::SILENT));
    assert_eq!(n.around(7, false)[0], Some(Named::Last(vec![8, 9])));
}
