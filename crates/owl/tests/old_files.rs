//! Synopsis files written by earlier versions of owl, checked in as their writers wrote them
//! (`tests/old-files/vN/`, with the commit in `WRITTEN_BY` and what `owl estimate` printed for
//! them then in `estimate.json`): today's owl reads them and gives the same figures.
//!
//! - `v1/`: format version 1 (one checksummed document), `owl record --method exact
//!   --interval 100ms` (the only method `owl record` knew then) at both points of the same
//!   3 000-packet simulated pair;
//! - `v2/`: format version 2 (the first streamed one: no identity byte limit, no packet counts),
//!   `owl record --method lda --memory 1KiB --interval 100ms` (tag `LDA1`);
//! - `v3/`: format version 3, `owl record --method lda --memory 1KiB --interval 100ms` at both
//!   points of a 3 000-packet simulated pair; clock cuts (version 3 has none other) and the
//!   paper's LDA rows (tag `LDA1`, before the identity digest);
//! - `v4/`: format version 4 (the current one: the delimiter cut), the same recording (tag
//!   `LDA2`, with the identity digest); read, then written again byte for byte;
//! - `v4-methods/`: version 4 files of every method of that commit, written again byte for
//!   byte and estimated as then (but COLATE's pair: a defect, see its test);
//! - `smp1/`: version 3 files holding `sample`'s first payload format (`SMP1`), no longer read:
//!   refused, naming it.
//!
//! And live-protocol transcripts (`tests/old-files/live-vN/`: the bytes each way of every
//! connection between two `owl agent --replay` at the commit that introduced version N, with
//! the key file they held; `README.md` says how they were made): version 7, the current one,
//! is read, authenticated and written again byte for byte; versions 1 to 6 are refused, naming
//! their version.

mod common;

use std::path::{Path, PathBuf};

use common::ok;
use owl_core::method::Role;
use owl_core::wire::{StreamReader, SynopsisFile};
use owl_live::frame::{self, Direction, Opener};
use owl_live::key::Key;
use owl_live::link;
use owl_live::protocol::Msg;
use serde_json::Value;

fn old(version: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/old-files")
        .join(version)
        .join(name)
}

/// The figures of an interval every report since version 3 prints.
const INTERVAL_FIGURES: &[&str] = &[
    "index",
    "start_ns",
    "sent",
    "received",
    "mean_ns",
    "std_ns",
    "samples",
    "lost",
    "mean_ci98_ns",
    "std_ci95_ns",
];

/// `owl estimate --json` today on sender file `s` and receiver file `r`, and what the writing
/// commit printed then (`then`): the two reports and their interval lists, of equal length.
fn now_and_then(s: &Path, r: &Path, then: &Path, what: &str) -> (Value, Value) {
    let now: Value = serde_json::from_str(&ok(&[
        "estimate",
        s.to_str().unwrap(),
        r.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let then: Value = serde_json::from_str(&std::fs::read_to_string(then).unwrap()).unwrap();
    assert_eq!(
        now["intervals"].as_array().unwrap().len(),
        then["intervals"].as_array().unwrap().len(),
        "{what}"
    );
    (now, then)
}

#[test]
fn version_3_files_estimate_as_they_did() {
    let (s, r) = (old("v3", "lda-sender.owl"), old("v3", "lda-receiver.owl"));
    let (now, then) = now_and_then(&s, &r, &old("v3", "estimate.json"), "v3");
    let (a, b) = (
        now["intervals"].as_array().unwrap(),
        then["intervals"].as_array().unwrap(),
    );
    assert!(a.len() >= 3);
    for (x, y) in a.iter().zip(b) {
        for k in INTERVAL_FIGURES {
            assert_eq!(x[k], y[k], "interval {}: {k}", y["index"]);
        }
        // cut by each point's clock, as they were recorded: no cut data
        assert!(x.get("cut").is_none(), "{x}");
    }
    assert_eq!(now["overall"]["mean_ns"], then["overall"]["mean_ns"]);
    // the cuts check says how they were cut
    let cuts = &now["checks"]["cuts"];
    assert_eq!(cuts["rule"], "clock", "{cuts}");
    // a version 3 file paired with a version 4 one of another cut is refused, naming the cut
    let dir = tempfile::tempdir().unwrap();
    let (sp, _, _) = common::simulate(dir.path(), &[]);
    let new = dir.path().join("new.owl");
    ok(&[
        "record",
        "--method",
        "lda",
        "--memory",
        "1KiB",
        "--role",
        "sender",
        sp.to_str().unwrap(),
        "--interval",
        "100ms",
        "-o",
        new.to_str().unwrap(),
    ]);
    common::fails(
        &["estimate", new.to_str().unwrap(), r.to_str().unwrap()],
        "cut is delimiter at the sender but clock at the receiver",
    );
}

/// `owl estimate --json` today on `vN/{method}-sender.owl` and `-receiver.owl`, held to what
/// the writing commit printed (`vN/estimate.json`) field by field, for each of `keys` that
/// commit printed, and for each of `or_withheld` where today's is not withheld (`null`);
/// today's report.
fn estimates_as_then(version: &str, method: &str, keys: &[&str], or_withheld: &[&str]) -> Value {
    let s = old(version, &format!("{method}-sender.owl"));
    let r = old(version, &format!("{method}-receiver.owl"));
    let (now, then) = now_and_then(&s, &r, &old(version, "estimate.json"), version);
    let (a, b) = (
        now["intervals"].as_array().unwrap(),
        then["intervals"].as_array().unwrap(),
    );
    assert!(a.len() >= 3, "{version}");
    let mut compared = 0;
    for (x, y) in a.iter().zip(b) {
        for k in keys {
            if let Some(want) = y.get(k) {
                assert_eq!(&x[k], want, "{version}: interval {}: {k}", y["index"]);
                compared += 1;
            }
        }
        for k in or_withheld {
            if !x[k].is_null() {
                assert_eq!(&x[k], &y[k], "{version}: interval {}: {k}", y["index"]);
            }
        }
    }
    assert!(
        compared >= 4 * a.len(),
        "{version}: {compared} figures compared"
    );
    assert_eq!(
        now["overall"]["mean_ns"], then["overall"]["mean_ns"],
        "{version}"
    );
    now
}

/// Version 1 (one checksummed document, written whole at the end), recorded with the exact
/// method: the same figures today.
#[test]
fn version_1_files_estimate_as_they_did() {
    let now = estimates_as_then(
        "v1",
        "exact",
        &[
            "index",
            "start_ns",
            "mean_ns",
            "std_ns",
            "samples",
            "lost",
            "mean_ci98_ns",
        ],
        &[],
    );
    assert_eq!(now["checks"]["cuts"]["rule"], "clock");
    // no packet counts in version 1
    let r =
        StreamReader::open(std::fs::File::open(old("v1", "exact-sender.owl")).unwrap()).unwrap();
    assert_eq!(r.version, 1);
}

/// Version 2 (the first streamed one: no identity byte limit, no packet counts), recorded
/// with the paper's LDA rows (`LDA1`): the same figures today. The std and the mean's bound
/// are held to what was printed where today states them: LDA now withholds a std on fewer
/// than 3 usable rows (d50ff6c, merged after version 2) and its bound below 20 effective
/// samples (3180062), which every interval of this small recording is.
#[test]
fn version_2_files_estimate_as_they_did() {
    let now = estimates_as_then(
        "v2",
        "lda",
        &["index", "start_ns", "mean_ns", "samples", "lost"],
        &["std_ns", "mean_ci98_ns"],
    );
    assert_eq!(now["checks"]["cuts"]["rule"], "clock");
    let mut r =
        StreamReader::open(std::fs::File::open(old("v2", "lda-sender.owl")).unwrap()).unwrap();
    assert_eq!(r.version, 2);
    assert_eq!(r.header.identity_bytes, None);
    let b = r.next_block().unwrap().unwrap();
    assert_eq!(b.packets, None);
    assert_eq!(&b.payload[..4], b"LDA1");
}

/// A method payload no longer read: `sample`'s first format (`SMP1`, 16-byte samples), in the
/// version 3 files of the last commit that wrote it. The container reads; `owl estimate` refuses
/// the payload in one line naming the tag and what to do.
#[test]
fn sample_payloads_of_the_first_format_are_refused_naming_it() {
    let (s, r) = (
        old("smp1", "sample-sender.owl"),
        old("smp1", "sample-receiver.owl"),
    );
    let mut reader = StreamReader::open(std::fs::File::open(&s).unwrap()).unwrap();
    assert_eq!(
        (reader.version, reader.header.method.as_str()),
        (3, "sample")
    );
    let b = reader.next_block().unwrap().unwrap();
    assert_eq!(&b.payload[..4], b"SMP1");
    let e = common::fails(
        &["estimate", s.to_str().unwrap(), r.to_str().unwrap()],
        "a sample payload of the earlier format (SMP1, 16-byte samples)",
    );
    assert!(e.contains("record the captures again"), "{e}");
}

/// `bytes` read as a streamed synopsis file and written again with today's writer (header,
/// every block, the closing block); every block's payload decoded with the method the header
/// names and encoded again, and its cut data decoded. The blocks read.
fn rewritten(bytes: &[u8]) -> (Vec<u8>, Vec<owl_core::wire::Block>) {
    let mut r = StreamReader::open(bytes).unwrap();
    assert_eq!(r.version, owl_core::wire::STREAM_VERSION);
    let h = r.header.clone();
    let info = owl_core::registry::find(&h.method).unwrap();
    let m = (info.from_config)(&h.config).unwrap();
    let mut out = h.encode_stream_header();
    let mut blocks = Vec::new();
    while let Some(b) = r.next_block().unwrap() {
        let p = m.decode_point(h.role, &b.payload).unwrap();
        let mut again = Vec::new();
        // a receiver's file holds its local form (`owl record`)
        match h.role {
            Role::Sender => p.encode(&mut again),
            Role::Receiver => p.encode_local(&mut again),
        }
        assert_eq!(
            again, b.payload,
            "interval {}: payload encoded again",
            b.index
        );
        let mut cr = owl_core::wire::WireReader::new(&b.cut);
        let cut = owl_core::cut::decode_point_cut(&mut cr).unwrap();
        cr.finish("cut data").unwrap();
        if let owl_core::cut::PointCut::Sender { .. } = &cut {
            let mut again = Vec::new();
            owl_core::cut::encode_point_cut(&cut, 0, &mut again);
            assert_eq!(again, b.cut, "interval {}: cut data encoded again", b.index);
        }
        out.extend(SynopsisFile::encode_stream_block(
            b.index,
            b.packets.unwrap(),
            &b.payload,
            &b.cut,
        ));
        blocks.push(b);
    }
    out.extend(SynopsisFile::encode_stream_end(blocks.len() as u64));
    (out, blocks)
}

/// Version 4 (the current one), as the commit that introduced it wrote it: the same figures
/// today, cut at S's delimiters; read and written again, byte for byte.
#[test]
fn version_4_files_estimate_as_they_did_and_write_again_byte_for_byte() {
    let now = estimates_as_then("v4", "lda", &[INTERVAL_FIGURES, &["cut"]].concat(), &[]);
    assert_eq!(now["checks"]["cuts"]["rule"], "delimiter");
    for role in ["sender", "receiver"] {
        let bytes = std::fs::read(old("v4", &format!("lda-{role}.owl"))).unwrap();
        let (again, blocks) = rewritten(&bytes);
        assert!(blocks.len() >= 3, "{role}");
        assert!(
            blocks.iter().all(|b| &b.payload[..4] == b"LDA2"),
            "{role}: the digest's rows"
        );
        assert_eq!(again.len(), bytes.len(), "{role}");
        assert!(again == bytes, "{role}: written again, the bytes differ");
    }
}

/// Every method of the commit that introduced version 4, recorded there (`v4-methods/`,
/// `METHOD-sender.owl`, `METHOD-receiver.owl` and what its `owl estimate --json` printed,
/// `METHOD-estimate.json`): every file reads and is written again byte for byte, each
/// payload decoded by today's method and encoded again; and today's estimates give every
/// figure printed then, but where an estimator changed on purpose since: FineComb's std
/// (434c08d: a std and its interval that hold per interval).
///
/// COLATE's pair is the exception, a defect these bytes found and this commit does not fix:
/// its epochs are `CLE2` (xxh3 of the canonical key, 20728be's only placement), and its
/// configuration has no `placement` field (added later), so today's `owl estimate` rebuilds
/// the method with today's default placement (`CLE3`) and records R's held packets at the
/// cuts with it; the two placements then meet in one query and the pair is refused, in one
/// line naming the flow hash. The files read, and write again, byte for byte.
#[test]
fn every_method_of_version_4_reads_and_estimates_as_it_did() {
    const METHODS: &[&str] = &[
        "exact",
        "lda",
        "probe",
        "rda",
        "rda-fixed",
        "finecomb",
        "lds",
        "lds-mb",
        "lds-mb-dense",
        "sds",
        "rli",
        "mpe",
        "mpe1",
        "countmin",
        "opa",
        "opa-wavelet",
        "sample",
        "colate",
    ];
    let dir = "v4-methods";
    for m in METHODS {
        let (s, r) = (
            old(dir, &format!("{m}-sender.owl")),
            old(dir, &format!("{m}-receiver.owl")),
        );
        for f in [&s, &r] {
            let bytes = std::fs::read(f).unwrap();
            let (again, blocks) = rewritten(&bytes);
            assert!(blocks.len() >= 3, "{m}");
            assert!(again == bytes, "{m}: {} written again differs", f.display());
        }
        if *m == "colate" {
            common::fails(
                &["estimate", s.to_str().unwrap(), r.to_str().unwrap()],
                "flow hash (epochs of two owl versions",
            );
            continue;
        }
        let (now, then) = now_and_then(&s, &r, &old(dir, &format!("{m}-estimate.json")), m);
        let (a, b) = (
            now["intervals"].as_array().unwrap(),
            then["intervals"].as_array().unwrap(),
        );
        for (x, y) in a.iter().zip(b) {
            for k in INTERVAL_FIGURES
                .iter()
                .chain(&["cut", "p50_ns", "p90_ns", "p99_ns", "p999_ns"])
            {
                if *m == "finecomb" && k.starts_with("std") {
                    continue;
                }
                assert_eq!(x.get(k), y.get(k), "{m}: interval {}: {k}", y["index"]);
            }
        }
        assert_eq!(now["overall"]["mean_ns"], then["overall"]["mean_ns"], "{m}");
    }
}

// ---------------------------------------------------------------------------------------------
// Live protocol transcripts

/// One connection of a transcript: the bytes each way, as the relay forwarded them.
struct Conn {
    to_listener: Vec<u8>,
    to_connector: Vec<u8>,
}

/// The connections of `live-vN/`, in the order the sender made them.
fn connections(dir: &str) -> Vec<Conn> {
    let mut out = Vec::new();
    for n in 1.. {
        let (a, b) = (
            old(dir, &format!("conn{n}-to-listener.bin")),
            old(dir, &format!("conn{n}-to-connector.bin")),
        );
        if !a.exists() {
            break;
        }
        out.push(Conn {
            to_listener: std::fs::read(a).unwrap(),
            to_connector: std::fs::read(b).unwrap(),
        });
    }
    assert!(!out.is_empty(), "{dir}: no connection");
    out
}

/// Every frame of one direction's bytes, whole (length prefix included), with today's pure
/// decoder; the bytes must end at a frame's end.
fn raw_frames(b: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = b;
    while !rest.is_empty() {
        let (_, used) = frame::decode(rest, frame::MAX_FRAME)
            .unwrap_or_else(|e| panic!("frame {}: {e}", out.len()))
            .unwrap_or_else(|| panic!("frame {} is cut ({} bytes left)", out.len(), rest.len()));
        out.push(&rest[..used]);
        rest = &rest[used..];
    }
    out
}

/// The key file the transcript's agents held.
fn transcript_key(dir: &str) -> Key {
    Key::read(&old(dir, "key")).unwrap()
}

/// The keys of `owl_live::link`'s handshake, derived as it derives them (a change of the
/// derivation changes every frame's tag, and these transcripts stop verifying).
fn hello_key(psk: &Key) -> Key {
    psk.derive(&[b"owl-live-v1 hello"])
}
fn session_key(psk: &Key, nonce_c: &[u8], nonce_s: &[u8]) -> Key {
    psk.derive(&[b"owl-live-v1 session", nonce_c, nonce_s])
}

/// One connection decoded and authenticated by today's code: each direction's messages in
/// order, and how many results came without the reason byte. Every frame is also sealed again
/// with the session key and must give the recorded bytes, and every message encoded again
/// must give its recorded payload (a result without the reason byte, with it).
fn decode_connection(psk: &Key, c: &Conn) -> (Vec<Msg>, Vec<Msg>, usize) {
    let up = raw_frames(&c.to_listener);
    let down = raw_frames(&c.to_connector);
    // Hello: frame 0 towards the listener, under the hello key
    let reasonless = std::cell::Cell::new(0);
    let (hello, _) = frame::decode(up[0], frame::MAX_HANDSHAKE_FRAME)
        .unwrap()
        .unwrap();
    let f = frame::verify(&hello_key(psk), Direction::ToListener, &hello, 0).unwrap();
    assert_eq!(f.kind, link::kind::HELLO);
    assert_eq!(&f.payload[..8], link::MAGIC);
    assert_eq!(f.payload[8], link::PeerRole::Sender as u8);
    let nonce_c = f.payload[9..41].to_vec();
    // Welcome: frame 0 towards the connector, under the session key of both nonces
    let (welcome, _) = frame::decode(down[0], frame::MAX_HANDSHAKE_FRAME)
        .unwrap()
        .unwrap();
    assert_eq!(welcome.kind, link::kind::WELCOME);
    let key = session_key(psk, &nonce_c, &welcome.payload[..32]);
    frame::verify(&key, Direction::ToConnector, &welcome, 0).unwrap();
    let open = |frames: &[&[u8]], dir: Direction| -> Vec<Msg> {
        let mut o = Opener::new(key.clone(), dir, 1);
        frames[1..]
            .iter()
            .map(|bytes| {
                let f = o.open(&bytes[4..]).unwrap();
                assert_eq!(
                    frame::seal_with(&key, dir, f.seq, f.kind, &f.payload),
                    *bytes,
                    "frame {} sealed again",
                    f.seq
                );
                let m = Msg::decode(f.kind, &f.payload)
                    .unwrap_or_else(|e| panic!("frame {} (kind {}): {e}", f.seq, f.kind));
                let (k, p) = m.encode();
                assert_eq!(k, f.kind);
                if p != f.payload {
                    // an estimate without the reason byte, as protocol 5's first writers sent
                    // it: today's writer adds the byte (0, no reason)
                    assert!(
                        matches!(m, Msg::Result { result: Ok(_), .. })
                            && p.len() == f.payload.len() + 1
                            && p.starts_with(&f.payload)
                            && p.last() == Some(&0),
                        "{} encoded again",
                        m.name()
                    );
                    reasonless.set(reasonless.get() + 1);
                }
                m
            })
            .collect()
    };
    (
        open(&up, Direction::ToListener),
        open(&down, Direction::ToConnector),
        reasonless.get(),
    )
}

fn names(ms: &[Msg]) -> Vec<&'static str> {
    ms.iter().map(Msg::name).collect()
}

/// Live protocol version 7 (the current one), as two agents at the commit that introduced it
/// spoke it: a whole session over two connections (the first cut by a relay as S sent its
/// fifth RDA result, the second resumed), decoded, authenticated and re-encoded byte for byte
/// by today's code, with the figures the receiver printed then; S's last interval ends with
/// its last packets. (Version 5's transcript, from 20728be, and version 6's, from 0c636e8,
/// read the same way until the next version; they are now refused with versions 1 to 4.)
#[test]
fn live_protocol_version_7_session_reads_as_it_did() {
    let dir = "live-v7";
    let mut ended = 0;
    let psk = transcript_key(dir);
    let conns = connections(dir);
    assert_eq!(conns.len(), 2, "one cut, one resumed connection");
    let mut config = None;
    let mut rda_results = std::collections::BTreeMap::new();
    let mut rda_messages = 0;
    let mut synopses = 0;
    let mut reasonless = 0;
    let mut all_sent = std::collections::BTreeSet::new();
    for (n, c) in conns.iter().enumerate() {
        let (up, down, without_reason) = decode_connection(&psk, c);
        reasonless += without_reason;
        // S: its configuration, then where it resumes
        let Msg::Config(cfg) = &up[0] else {
            panic!("conn {n}: {:?}", names(&up))
        };
        assert_eq!(config.get_or_insert_with(|| cfg.clone()), cfg);
        assert_eq!(cfg.path, "", "a single pair (--role)");
        let Msg::Resume { released, started } = &up[1] else {
            panic!("conn {n}: {:?}", names(&up))
        };
        assert_eq!(*started, None, "a replay is no live capture");
        // a first connection resumes nowhere; the second where R last released
        if n == 0 {
            assert_eq!(*released, None, "conn {n}");
        }
        let resumed_at = released.unwrap_or(0);
        // R: its window first
        assert!(
            matches!(down[0], Msg::Accept { window } if window > 0),
            "{:?}",
            names(&down)
        );
        for m in up.iter().chain(&down) {
            match m {
                Msg::Synopsis {
                    method, payload, ..
                } => {
                    // the method's payload decodes with today's decoder, and encodes again
                    let (name, fields) = &cfg.methods[*method as usize];
                    let info = owl_core::registry::find(name).unwrap();
                    let m = (info.from_config)(fields).unwrap();
                    let p = m.decode_point(Role::Sender, payload).unwrap();
                    let mut again = Vec::new();
                    p.encode(&mut again);
                    assert_eq!(&again, payload, "{name} synopsis encoded again");
                    synopses += 1;
                }
                Msg::Rda {
                    method, message, ..
                } => {
                    let (name, fields) = &cfg.methods[*method as usize];
                    let rc = owl_core::rda::Config::from_pairs(fields).unwrap();
                    let msg = owl_core::rda::session::Message::decode(&rc, message)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                    let mut again = Vec::new();
                    msg.encode(&mut again);
                    assert_eq!(&again, message, "{name}: {} encoded again", msg.name());
                    rda_messages += 1;
                }
                Msg::Result {
                    interval, result, ..
                } => {
                    rda_results.insert(*interval, result.clone());
                }
                Msg::Have { delimiters, .. } => {
                    let (_, end) = delimiters.as_ref().expect("a delimiter cut");
                    if let owl_core::cut::Named::Last(last) = end {
                        assert!(!last.is_empty());
                        ended += 1;
                    }
                }
                _ => {}
            }
        }
        let sent: std::collections::BTreeSet<u64> = up
            .iter()
            .filter_map(|m| match m {
                Msg::Synopsis { interval, .. } => Some(*interval),
                _ => None,
            })
            .collect();
        // the second connection sends again every interval R had not released
        if n == 1 {
            for k in all_sent.iter().filter(|&&k| k >= resumed_at) {
                assert!(sent.contains(k), "conn {n}: {k} not sent again: {sent:?}");
            }
        }
        assert!(!sent.is_empty(), "conn {n}");
        all_sent.extend(sent);
        if n == 0 {
            // cut as S sent a result: R never said goodbye on it
            assert!(up.iter().any(|m| matches!(m, Msg::Result { .. })));
            assert!(!down.iter().any(|m| matches!(m, Msg::Bye)));
        } else {
            // S says it is done (its last RDA results may follow), R says goodbye last
            assert!(
                up.iter().any(|m| matches!(m, Msg::Done)),
                "{:?}",
                names(&up)
            );
            assert!(matches!(down.last(), Some(Msg::Bye)), "{:?}", names(&down));
        }
    }
    assert_eq!(all_sent.len(), 7, "every interval's synopsis: {all_sent:?}");
    assert!(ended >= 1, "the last interval's end: S's last packets");
    let cfg = config.unwrap();
    let names_of: Vec<&str> = cfg.methods.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names_of, ["lda", "rda-fixed"]);
    assert!(synopses >= 7, "{synopses} synopses");
    assert!(rda_messages >= 20, "{rda_messages} rda messages");
    // the figures R printed then for RDA are S's Result frames as today's decoder reads them
    let lines: Vec<Value> = std::fs::read_to_string(old(dir, "lines.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut compared = 0;
    for l in lines
        .iter()
        .filter(|l| l["type"] == "interval" && l["status"] == "estimated")
    {
        let i = l["index"].as_u64().unwrap();
        let then = &l["methods"][1];
        assert_eq!(then["method"], "rda-fixed");
        let Some(Ok(e)) = rda_results.get(&i) else {
            continue;
        };
        for (k, v) in [
            ("mean_ns", e.mean_ns),
            ("std_ns", e.std_ns),
            ("samples", Some(e.samples as f64)),
        ] {
            // the line's decimal text, parsed, is the figure to the last bit or next to it
            // (serde_json's parser does not round-trip every float)
            let (then, now) = (then[k].as_f64().unwrap(), v.unwrap());
            assert!(
                (then - now).abs() <= now.abs() * 4.0 * f64::EPSILON,
                "interval {i}: {k}: {then} printed, {now} read"
            );
        }
        compared += 1;
    }
    assert!(compared >= 3, "{compared} RDA results compared");
    // every result carries its reason byte (protocol 5's first writers sent none)
    assert_eq!(reasonless, 0, "results without the reason byte");
}

/// Live protocol versions 1 to 6, as agents at the commits that introduced them spoke them:
/// every frame of theirs carries its version, and today's code refuses it naming that
/// version — their Hello at today's listener (which answers with an unauthenticated refusal
/// that says why), their Welcome at today's connector.
#[test]
fn live_protocol_versions_1_to_6_are_refused_naming_the_version() {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    for v in 1..=6u8 {
        let dir = format!("live-v{v}");
        let psk = transcript_key(&dir);
        let c = &connections(&dir)[0];
        let up = raw_frames(&c.to_listener);
        let down = raw_frames(&c.to_connector);
        assert!(up.len() > 3 && down.len() > 1, "v{v}: a session");
        let want = format!(
            "the peer speaks owl live protocol version {v}, this owl speaks version {}",
            frame::VERSION
        );
        for (i, f) in up.iter().chain(&down).enumerate() {
            let (raw, _) = frame::decode(f, frame::MAX_FRAME).unwrap().unwrap();
            assert_eq!(raw.version, v, "v{v} frame {i}");
            let e = frame::verify(&psk, Direction::ToListener, &raw, raw.seq).unwrap_err();
            assert_eq!(e.to_string(), want, "v{v} frame {i}");
        }
        // the old sender's Hello at today's listener
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut old_sender = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        old_sender.write_all(up[0]).unwrap();
        let (s, _) = l.accept().unwrap();
        let e = link::accept(s, &psk, "today").err().expect("refused");
        assert!(e.to_string().contains(&want), "v{v}: {e}");
        let mut answer = Vec::new();
        old_sender.read_to_end(&mut answer).unwrap();
        let (refusal, _) = frame::decode(&answer, frame::MAX_HANDSHAKE_FRAME)
            .unwrap()
            .unwrap();
        assert_eq!(refusal.kind, link::kind::REFUSE);
        assert!(
            String::from_utf8_lossy(refusal.payload).contains(&want),
            "v{v}: {:?}",
            String::from_utf8_lossy(refusal.payload)
        );
        // the old receiver's Welcome at today's connector
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let welcome = down[0].to_vec();
        let old_receiver = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap();
            let mut hello = vec![0u8; u32::from_le_bytes(b) as usize];
            s.read_exact(&mut hello).unwrap();
            s.write_all(&welcome).unwrap();
        });
        let e = link::connect(
            TcpStream::connect(addr).unwrap(),
            &psk,
            link::PeerRole::Sender,
            "today",
        )
        .err()
        .expect("refused");
        assert!(e.to_string().contains(&want), "v{v}: {e}");
        old_receiver.join().unwrap();
    }
}

/// The fuzz targets start from these old bytes: `fuzz/seeds/synopsis_file/old-DIR-NAME` is
/// each synopsis file here, `fuzz/seeds/live_frames/old-DIR-NAME` each transcript's bytes,
/// byte for byte.
#[test]
fn fuzz_seeds_hold_the_old_bytes() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/old-files");
    let seeds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let mut checked = 0;
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let d = dir.file_name().unwrap().to_str().unwrap().to_string();
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_str().unwrap();
            let target = if name.ends_with(".owl") {
                "synopsis_file"
            } else if name.starts_with("conn") && name.ends_with(".bin") {
                "live_frames"
            } else {
                continue;
            };
            let seed = seeds.join(target).join(format!("old-{d}-{name}"));
            let want = std::fs::read(&f).unwrap();
            let got = std::fs::read(&seed)
                .unwrap_or_else(|e| panic!("{}: {e} (copy {d}/{name} there)", seed.display()));
            assert!(got == want, "{} differs from {d}/{name}", seed.display());
            checked += 1;
        }
    }
    // v1 to v4 and smp1, two files each; v4-methods, 18 methods' two; live-v1 to live-v4, one
    // connection each; live-v5 to live-v7, two
    assert_eq!(checked, 10 + 36 + 8 + 4 + 4 + 4, "old files with seeds");
}
