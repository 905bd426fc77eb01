//! Helpers shared by the command-line test files: run `owl`, demand success or one clear error.

// Each test file compiles this module on its own and uses a part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Run the `owl` binary built for these tests.
pub fn owl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_owl"))
        .args(args)
        .output()
        .expect("run owl")
}

/// Run a command that must succeed; its standard output.
pub fn ok(args: &[&str]) -> String {
    let o = owl(args);
    assert!(
        o.status.success(),
        "owl {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// `owl record --method METHOD --role ROLE CAP -o DIR/OUT EXTRA…`: the file and what owl said.
pub fn record(
    dir: &std::path::Path,
    method: &str,
    cap: &std::path::Path,
    role: &str,
    out: &str,
    extra: &[&str],
) -> (std::path::PathBuf, String) {
    let o = dir.join(out);
    let mut args = vec![
        "record",
        "--method",
        method,
        "--role",
        role,
        cap.to_str().unwrap(),
        "-o",
        o.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let said = ok(&args);
    (o, said)
}

/// Run a command that must fail: exit status 1, exactly one line on stderr, naming `want`.
pub fn fails(args: &[&str], want: &str) -> String {
    let o = owl(args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "owl {args:?}: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    assert!(err.starts_with("owl: error: "), "{err}");
    assert!(err.contains(want), "owl {args:?}: '{want}' not in: {err}");
    err
}

/// `owl simulate` of 20 000 packets at 100 kpps into `dir`, with `extra` flags: the two
/// captures and the simulator's books (`sim.json`).
pub fn simulate(
    dir: &std::path::Path,
    extra: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf, serde_json::Value) {
    let d = dir.to_str().unwrap();
    let mut args = vec!["simulate", "--out", d, "--packets", "20k", "--rate", "100k"];
    args.extend_from_slice(extra);
    ok(&args);
    let books: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sim.json")).unwrap()).unwrap();
    (dir.join("sender.pcap"), dir.join("receiver.pcap"), books)
}

/// Copy capture `src` to `dst` (pcap) keeping `snaplen` bytes of each frame (0: all) and only
/// the frames `keep(index, ts_ns)` accepts: a capture taken with another snaplen, started late
/// or stopped early.
pub fn recapture(
    src: &std::path::Path,
    dst: &std::path::Path,
    snaplen: u32,
    keep: impl Fn(u64, u64) -> bool,
) {
    use owl_trace::capture::{CaptureFormat, CaptureReader, CaptureWriter};
    let mut r = CaptureReader::open(src).unwrap();
    let f = std::io::BufWriter::new(std::fs::File::create(dst).unwrap());
    let mut w: Option<CaptureWriter<_>> = None;
    let mut f = Some(f);
    let mut i = 0;
    while let Some(p) = r.next_packet().unwrap() {
        let w = w.get_or_insert_with(|| {
            CaptureWriter::new(f.take().unwrap(), CaptureFormat::Pcap, p.linktype, snaplen).unwrap()
        });
        if keep(i, p.ts_ns) {
            w.write_packet(p.ts_ns, p.data, p.orig_len).unwrap();
        }
        i += 1;
    }
    w.unwrap().finish().unwrap();
}

/// Copy Ethernet capture `src` to `dst` as `tcpdump -i any` writes it since libpcap 1.10:
/// pcapng, link type Linux SLL2 (a 20-byte link header in place of Ethernet's 14), keeping
/// `snaplen` bytes of each frame.
pub fn to_sll2(src: &std::path::Path, dst: &std::path::Path, snaplen: u32) {
    use owl_trace::capture::{CaptureFormat, CaptureReader, CaptureWriter};
    use owl_trace::dissect::{LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL2};
    let mut r = CaptureReader::open(src).unwrap();
    let f = std::io::BufWriter::new(std::fs::File::create(dst).unwrap());
    let mut w = CaptureWriter::new(f, CaptureFormat::Pcapng, LINKTYPE_LINUX_SLL2, snaplen).unwrap();
    while let Some(p) = r.next_packet().unwrap() {
        assert_eq!(p.linktype, LINKTYPE_ETHERNET);
        // protocol (the EtherType), reserved, ifindex 2, ARPHRD_ETHER, outgoing, 6-byte address
        let mut f = vec![p.data[12], p.data[13], 0, 0, 0, 0, 0, 2, 0, 1, 4, 6];
        f.extend_from_slice(&p.data[6..12]);
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&p.data[14..]);
        w.write_packet(p.ts_ns, &f, p.orig_len + 6).unwrap();
    }
    w.finish().unwrap();
}

/// Merge captures `a` and `b` into one pcapng `dst` with two interfaces, as `dumpcap -i a -i b`
/// writes: `a`'s packets on interface 0 (nanoseconds), `b`'s on interface 1 with timestamps of
/// 10^-`exp` s and `snaplen`.
pub fn two_interfaces(
    a: &std::path::Path,
    b: &std::path::Path,
    dst: &std::path::Path,
    exp: u8,
    snaplen: u32,
) {
    use owl_trace::capture::{CaptureFormat, CaptureReader, CaptureWriter};
    struct Frame {
        iface: u32,
        ts: u64,
        linktype: u32,
        data: Vec<u8>,
        len: u32,
    }
    let read = |p: &std::path::Path, iface| {
        let mut r = CaptureReader::open(p).unwrap();
        let mut v = Vec::new();
        while let Some(p) = r.next_packet().unwrap() {
            let (ts, linktype, data, len) = (p.ts_ns, p.linktype, p.data.to_vec(), p.orig_len);
            v.push(Frame {
                iface,
                ts,
                linktype,
                data,
                len,
            });
        }
        v
    };
    let (mut all, b) = (read(a, 0), read(b, 1));
    let f = std::io::BufWriter::new(std::fs::File::create(dst).unwrap());
    let mut w = CaptureWriter::new(f, CaptureFormat::Pcapng, all[0].linktype, 0).unwrap();
    w.add_interface(b[0].linktype, snaplen, exp).unwrap();
    all.extend(b);
    all.sort_by_key(|f| f.ts);
    for f in all {
        w.write_packet_on(f.iface, f.ts, &f.data, f.len).unwrap();
    }
    w.finish().unwrap();
}

/// Copy Ethernet capture `src` to `dst` with every packet turned around: MAC and IP addresses
/// and TCP/UDP ports swapped (checksums stay right: their sums do not depend on the order) —
/// the same conversations the other way, as their replies.
pub fn mirror(src: &std::path::Path, dst: &std::path::Path) {
    use owl_trace::capture::{CaptureFormat, CaptureReader, CaptureWriter};
    use owl_trace::dissect::LINKTYPE_ETHERNET;
    let mut r = CaptureReader::open(src).unwrap();
    let f = std::io::BufWriter::new(std::fs::File::create(dst).unwrap());
    let mut w = CaptureWriter::new(f, CaptureFormat::Pcap, LINKTYPE_ETHERNET, 0).unwrap();
    while let Some(p) = r.next_packet().unwrap() {
        assert_eq!(p.linktype, LINKTYPE_ETHERNET);
        let mut d = p.data.to_vec();
        let swap = |d: &mut [u8], a: usize, b: usize, n: usize| {
            for k in 0..n {
                d.swap(a + k, b + k);
            }
        };
        swap(&mut d, 0, 6, 6);
        let (proto, l4) = match d[14] >> 4 {
            4 => {
                swap(&mut d, 26, 30, 4);
                (d[23], 14 + usize::from(d[14] & 15) * 4)
            }
            6 => {
                swap(&mut d, 22, 38, 16);
                (d[20], 54)
            }
            v => panic!("IP version {v}"),
        };
        if matches!(proto, 6 | 17) && d.len() >= l4 + 4 {
            swap(&mut d, l4, l4 + 2, 2);
        }
        w.write_packet(p.ts_ns, &d, p.orig_len).unwrap();
    }
    w.finish().unwrap();
}

/// Merge captures `a` and `b` (one link type) into pcap `dst` in timestamp order: two
/// directions of traffic as one point's tcpdump sees them.
pub fn merge(a: &std::path::Path, b: &std::path::Path, dst: &std::path::Path) {
    use owl_trace::capture::{CaptureFormat, CaptureReader, CaptureWriter};
    let mut all = Vec::new();
    let mut linktype = None;
    for src in [a, b] {
        let mut r = CaptureReader::open(src).unwrap();
        while let Some(p) = r.next_packet().unwrap() {
            assert_eq!(*linktype.get_or_insert(p.linktype), p.linktype);
            all.push((p.ts_ns, p.data.to_vec(), p.orig_len));
        }
    }
    all.sort_by_key(|p| p.0);
    let f = std::io::BufWriter::new(std::fs::File::create(dst).unwrap());
    let mut w = CaptureWriter::new(f, CaptureFormat::Pcap, linktype.unwrap(), 0).unwrap();
    for (ts, d, len) in &all {
        w.write_packet(*ts, d, *len).unwrap();
    }
    w.finish().unwrap();
}

/// A child process killed (by its id) when the test ends, even by a panic.
pub struct Guard(pub Option<std::process::Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Read all of a child's pipe on its own thread, so a chatty child never blocks on a full pipe
/// while the test waits for something else.
pub fn drain(mut r: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = r.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    })
}

/// The first line of a process's standard error, after `prefix` (read byte by byte: nothing
/// past the line is taken from the pipe).
pub fn first_line(mut c: std::process::Child, prefix: &str) -> (std::process::Child, String) {
    use std::io::Read;
    let err = c.stderr.as_mut().unwrap();
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while err.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
        line.push(b[0]);
    }
    let first = String::from_utf8(line).unwrap();
    let rest = first
        .trim()
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("said: {first}"))
        .to_string();
    (c, rest)
}

/// Can `program --version` run here? If not, `test` is skipped (a `SKIPPED:` line on standard
/// error), or fails where `.ci/run` set `require` (it sets it where it could install the tool).
pub fn have_tool(program: &str, require: &str, test: &str) -> bool {
    let have = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        assert!(
            std::env::var_os(require).is_none(),
            "{require} is set but {program} cannot run"
        );
        eprintln!("SKIPPED: {test} (no {program})");
    }
    have
}

/// `owl agent` at `place` (its role, and where it listens or connects) replaying `capture`
/// with the key in `key`, and the flags both agents share.
pub fn replay_agent(place: &[&str], capture: &Path, key: &Path, common: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_owl"));
    c.arg("agent").args(place).args([
        "--replay",
        capture.to_str().unwrap(),
        "--key-file",
        key.to_str().unwrap(),
    ]);
    c.args(common);
    c
}
