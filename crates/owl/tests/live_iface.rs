//! `owl agent --iface` end to end: two network namespaces joined by a veth pair, a receiver
//! agent capturing one end and a sender agent the other, UDP sent across. Needs root and
//! `ip` (iproute2); otherwise it says `SKIPPED:` on standard error and passes.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PACKETS: u64 = 3000;
const PORT: u16 = 9000;
const R_ADDR: &str = "10.77.0.2";

/// Namespaces and children removed even when the test fails.
struct Lab {
    ns: [String; 2],
    children: Vec<Child>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in &self.ns {
            // deleting a namespace deletes its end of the veth, and with it the pair
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn skip_reason() -> Option<String> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("not root (live capture and network namespaces need it)".into());
    }
    match Command::new("ip").args(["netns", "list"]).output() {
        Ok(o) if o.status.success() => None,
        _ => Some("`ip netns` (iproute2) is not available".into()),
    }
}

/// Collect a child's standard error lines as they come.
fn collect(r: impl std::io::Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let t = text.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            let mut s = t.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    text
}

fn wait_for(log: &Arc<Mutex<String>>, what: &str, other: &Arc<Mutex<String>>) {
    let t0 = Instant::now();
    while !log.lock().unwrap().contains(what) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no '{what}' in time\nlog: {}\nother: {}",
            log.lock().unwrap(),
            other.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run by the test below inside the sender's namespace: `PACKETS` UDP datagrams to R, paced
/// (bursts of 10 every 2 ms), each with a distinct payload so every identity differs.
#[test]
#[ignore = "a helper the namespace test runs in the sender's namespace"]
fn udp_sender_helper() {
    let Ok(to) = std::env::var("OWL_TEST_UDP_TO") else {
        return;
    };
    let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    for i in 0..PACKETS {
        let mut payload = [0u8; 64];
        payload[..8].copy_from_slice(&i.to_be_bytes());
        s.send_to(&payload, &to).unwrap();
        if i % 10 == 9 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

#[test]
fn agents_on_a_veth_pair_measure_udp_across_it() {
    on_a_veth_pair("a", &[]);
}

/// The same through libpcap, with the kernel BPF pre-filter (an owl built with the pcap
/// feature: `.ci/run` runs this test so).
#[cfg(feature = "pcap")]
#[test]
fn pcap_agents_on_a_veth_pair_measure_udp_across_it() {
    on_a_veth_pair(
        "p",
        &[
            "--capture",
            "pcap",
            "--bpf",
            &format!("udp and dst port {PORT}"),
        ],
    );
}

/// Two namespaces (names and interfaces suffixed by `variant`), agents capturing with `extra`
/// arguments, UDP sent across.
fn on_a_veth_pair(variant: &str, extra: &[&str]) {
    // `.ci/run` sets OWL_REQUIRE_NETNS=1 once it has made a namespace itself: then a skip is a
    // failure, never a silent pass (the harness hides a passing test's standard error)
    let required = std::env::var("OWL_REQUIRE_NETNS").is_ok_and(|v| v == "1");
    if let Some(why) = skip_reason() {
        assert!(!required, "OWL_REQUIRE_NETNS=1 but: {why}");
        eprintln!("SKIPPED: agents_on_a_veth_pair_measure_udp_across_it: {why}");
        return;
    }
    let id = std::process::id();
    let (ns_s, ns_r) = (
        format!("owl-s-{id}{variant}"),
        format!("owl-r-{id}{variant}"),
    );
    let (if_s, if_r) = (format!("os{variant}{id}"), format!("or{variant}{id}"));
    let (if_s, if_r) = (&if_s[..if_s.len().min(15)], &if_r[..if_r.len().min(15)]);
    let mut lab = Lab {
        ns: [ns_s.clone(), ns_r.clone()],
        children: Vec::new(),
    };
    // a container may run as root without the right to make namespaces: that is the
    // environment, not owl
    let made = Command::new("ip")
        .args(["netns", "add", &ns_s])
        .output()
        .unwrap();
    if !made.status.success() {
        assert!(
            !required,
            "OWL_REQUIRE_NETNS=1 but ip netns add failed: {}",
            String::from_utf8_lossy(&made.stderr).trim()
        );
        eprintln!(
            "SKIPPED: agents_on_a_veth_pair_measure_udp_across_it: cannot create a network namespace: {}",
            String::from_utf8_lossy(&made.stderr).trim()
        );
        return;
    }
    ip(&["netns", "add", &ns_r]);
    ip(&["link", "add", if_s, "type", "veth", "peer", "name", if_r]);
    ip(&["link", "set", if_s, "netns", &ns_s]);
    ip(&["link", "set", if_r, "netns", &ns_r]);
    for (ns, ifc, addr) in [(&ns_s, if_s, "10.77.0.1/24"), (&ns_r, if_r, "10.77.0.2/24")] {
        ip(&["-n", ns, "addr", "add", addr, "dev", ifc]);
        ip(&["-n", ns, "link", "set", ifc, "up"]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
    }
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("owl.key");
    let bin = env!("CARGO_BIN_EXE_owl");
    let st = Command::new(bin)
        .args(["keygen", "-o", key.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    let filter = format!("udp and dst port {PORT}");
    let common = |role: &str, ifc: &str| -> Vec<String> {
        [
            "agent",
            "--role",
            role,
            "--iface",
            ifc,
            "--filter",
            &filter,
            "--interval",
            "1s",
            "--key-file",
            key.to_str().unwrap(),
        ]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
    };
    let listen = format!("{R_ADDR}:7707");
    let mut rx = Command::new("ip")
        .args(["netns", "exec", &ns_r, bin])
        .args(common("receiver", if_r))
        .args(["--listen", &listen])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let r_log = collect(rx.stderr.take().unwrap());
    let r_out = collect(rx.stdout.take().unwrap());
    lab.children.push(rx);
    wait_for(&r_log, "capturing on", &r_log);
    let mut tx = Command::new("ip")
        .args(["netns", "exec", &ns_s, bin])
        .args(common("sender", if_s))
        .args(["--peer", &listen, "--duration", "3s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let s_log = collect(tx.stderr.take().unwrap());
    lab.children.push(tx);
    wait_for(&s_log, "capturing on", &r_log);
    // the sender's ring is bound: send across
    let helper = std::env::current_exe().unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &ns_s])
        .arg(&helper)
        .args(["--exact", "udp_sender_helper", "--ignored", "--quiet"])
        .env("OWL_TEST_UDP_TO", format!("{R_ADDR}:{PORT}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // the sender stops by itself (--duration), the receiver on SIGTERM (`ip netns exec`
    // execs owl: the child is the agent), each at the end of its current interval
    let rx_pid = lab.children[0].id().to_string();
    let st = Command::new("kill")
        .args(["-TERM", &rx_pid])
        .status()
        .unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    let mut status = [None, None];
    while status.iter().any(Option::is_none) {
        for (i, c) in lab.children.iter_mut().enumerate() {
            if status[i].is_none() {
                status[i] = c.try_wait().unwrap();
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the agents did not stop\nreceiver: {}\nsender: {}",
            r_log.lock().unwrap(),
            s_log.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(100)); // the last lines of the pipes
    let (r_log, s_log) = (r_log.lock().unwrap().clone(), s_log.lock().unwrap().clone());
    let all = format!("receiver:\n{r_log}\nsender:\n{s_log}");
    assert!(
        status.iter().all(|s| s.is_some_and(|s| s.success())),
        "{status:?}\n{all}"
    );
    let out = r_out.lock().unwrap().clone();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let intervals: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["type"] == "interval").collect();
    let sum = |k: &str| {
        intervals
            .iter()
            .map(|l| l[k].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(
        (sum("sent"), sum("received")),
        (PACKETS, PACKETS),
        "{out}\n{all}"
    );
    let mut delays = 0;
    for l in &intervals {
        if l["sent"].as_u64() == Some(0) {
            continue;
        }
        assert_eq!(l["status"], "estimated", "{l}\n{all}");
        assert_eq!(l["sent"], l["received"], "{l}");
        // both points capture live: each reports its kernel's drops, none on this light load
        assert_eq!(l["kernel_drops"], serde_json::json!([0, 0]), "{l}");
        for m in l["methods"].as_array().unwrap() {
            assert!(m["error"].is_null(), "{m}");
            let mean = m["mean_ns"].as_f64().unwrap();
            // a veth between two namespaces: microseconds, at most a few ms on a loaded box
            assert!(mean > 0.0 && mean < 20e6, "{m}");
            if m["method"] == "rda" {
                assert_eq!(m["lost"], 0, "{m}");
            }
            delays += 1;
        }
    }
    assert!(delays > 0, "{out}");
    eprintln!("receiver's lines:\n{out}\n{all}");
    assert_eq!(lines.last().unwrap()["type"], "summary", "{out}\n{all}");
    assert!(
        s_log.contains("kernel:") && r_log.contains("0 dropped"),
        "{all}"
    );
    for log in [&r_log, &s_log] {
        assert!(
            log.contains("stopping at the end of the current interval"),
            "{all}"
        );
    }
}
