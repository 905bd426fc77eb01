//! Admission: how a listening port (a receiver agent, the collector) lets connections in.
//!
//! Anyone who can reach the port can open a connection and say nothing. Served one at a time,
//! twenty idle connections held a receiver agent for 200 s and a real sender failed its
//! handshake; a hundred filled the listen backlog. Here every accepted connection handshakes
//! on its own thread, at once, and:
//!
//! - it must finish its handshake (the first authenticated frame, and whatever the port asks
//!   next) within a **deadline** ([`Admission::deadline`], 5 s by default), however slowly its
//!   bytes trickle in: a watchdog closes it when the deadline passes (counted `timed_out`);
//! - at most a **cap** of handshakes are under way ([`Admission::cap`], 64): when a new
//!   connection finds the cap reached, the oldest handshake of the source address holding the
//!   most of them is closed (counted `shed`), so one source flooding the port sheds its own
//!   connections, not a real peer's from elsewhere;
//! - threads, sockets and memory are bounded by the cap, and the port keeps accepting, so the
//!   listen backlog never fills.
//!
//! What admission does not bound: connections past their handshake (authenticated peers),
//! which the port caps itself.

use std::collections::BTreeMap;
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;

/// Handshakes under way at once, by default.
pub const DEFAULT_CAP: usize = 64;
/// Time a connection has to finish its handshake, by default.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(5);
/// A handshake thread's stack: a handshake reads one or two small frames.
const STACK: usize = 256 * 1024;

/// What admission did with the connections it accepted (counters since the port opened;
/// Prometheus counters, so that the collector can expose them as `owl_connections_total`).
#[derive(Debug, Default)]
pub struct Counts {
    /// Connections accepted from the listener.
    pub accepted: Counter,
    /// Handshakes that succeeded.
    pub admitted: Counter,
    /// Handshakes that failed (wrong key, wrong role, a configuration that differs, garbage).
    pub refused: Counter,
    /// Handshakes closed for a newer connection when the cap was reached.
    pub shed: Counter,
    /// Handshakes closed at their deadline.
    pub timed_out: Counter,
}

impl Counts {
    /// `accepted admitted refused shed timed_out`, as one line for a log.
    pub fn describe(&self) -> String {
        let g = |a: &Counter| a.get();
        format!(
            "{} connections accepted: {} admitted, {} refused, {} shed (handshakes over the cap), {} timed out",
            g(&self.accepted),
            g(&self.admitted),
            g(&self.refused),
            g(&self.shed),
            g(&self.timed_out)
        )
    }
}

/// A port's admission rules, and its counters.
#[derive(Debug)]
pub struct Admission {
    /// Handshakes under way at once.
    pub cap: usize,
    /// Time a connection has to finish its handshake.
    pub deadline: Duration,
    pub counts: Arc<Counts>,
}

impl Default for Admission {
    fn default() -> Admission {
        Admission {
            cap: DEFAULT_CAP,
            deadline: DEFAULT_DEADLINE,
            counts: Arc::default(),
        }
    }
}

/// A handshake under way.
struct Pending {
    source: Option<IpAddr>,
    /// A handle on its socket, to close it from outside its thread.
    socket: TcpStream,
    deadline: Instant,
}

/// The handshakes under way, oldest first (ids ascend with arrival).
#[derive(Default)]
struct Table {
    next: u64,
    pending: BTreeMap<u64, Pending>,
}

impl Table {
    /// The handshake to close for a newcomer: the oldest of the source holding the most.
    fn victim(&self) -> Option<u64> {
        let mut per: BTreeMap<Option<IpAddr>, (usize, u64)> = BTreeMap::new();
        for (&id, p) in &self.pending {
            let e = per.entry(p.source).or_insert((0, id));
            e.0 += 1;
        }
        // most handshakes; among equals, the one whose oldest is oldest
        per.into_values()
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
            .map(|(_, oldest)| oldest)
    }
}

struct Shared {
    table: Mutex<Table>,
    /// Wakes the watchdog when a deadline is added.
    added: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // every update is a whole insert or remove: a panicked thread leaves it consistent
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn close(p: &Pending) {
    let _ = p.socket.shutdown(Shutdown::Both);
}

/// Accept connections on `listener` until `admitted` returns `false` or the listener fails:
/// each runs `handshake` on its own thread under the cap and the deadline, and a connection
/// that passes goes to `admitted` (on that thread, once it no longer counts against the cap).
/// A refused handshake's error goes to `log` with the peer's address; shedding and timeouts are
/// logged at most once a second, with the counts. Returns when the listener fails.
pub fn serve<T, E, H, A>(
    listener: TcpListener,
    rules: Admission,
    handshake: H,
    admitted: A,
    log: Arc<dyn Fn(&str) + Send + Sync>,
) where
    E: std::fmt::Display,
    H: Fn(TcpStream) -> Result<T, E> + Send + Sync + 'static,
    A: Fn(T) + Send + Sync + 'static,
{
    let shared = Arc::new(Shared {
        table: Mutex::default(),
        added: Condvar::new(),
    });
    let counts = rules.counts.clone();
    let handshake = Arc::new(handshake);
    let admitted = Arc::new(admitted);
    let noted = Arc::new(Mutex::new(None::<Instant>));
    // a note on shedding and timeouts, at most once a second
    let note = {
        let (log, counts, noted) = (log.clone(), counts.clone(), noted.clone());
        Arc::new(move |what: &str| {
            let mut last = noted.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                *last = Some(Instant::now());
                log(&format!("{what} ({})", counts.describe()));
            }
        })
    };
    {
        let (shared, counts, note) = (shared.clone(), counts.clone(), note.clone());
        std::thread::Builder::new()
            .name("owl-admission".into())
            .spawn(move || watchdog(&shared, &counts, &*note))
            .expect("a thread for the admission watchdog");
    }
    for stream in listener.incoming() {
        let Ok(stream) = stream else {
            // EMFILE and the like: the listener is fine, this connection is not; let the
            // handshakes under way finish before taking the next
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        counts.accepted.inc();
        let source = stream.peer_addr().ok().map(|a| a.ip());
        let Ok(socket) = stream.try_clone() else {
            continue;
        };
        let mut shed = false;
        let id = {
            let mut t = shared.lock();
            while t.pending.len() >= rules.cap.max(1) {
                let Some(v) = t.victim() else { break };
                if let Some(p) = t.pending.remove(&v) {
                    close(&p);
                    counts.shed.inc();
                    shed = true;
                }
            }
            let id = t.next;
            t.next += 1;
            t.pending.insert(
                id,
                Pending {
                    source,
                    socket,
                    deadline: Instant::now() + rules.deadline,
                },
            );
            id
        };
        shared.added.notify_one();
        if shed {
            note("handshakes over the cap: the oldest of the busiest source closed");
        }
        let (shared2, counts2, handshake, admitted, log) = (
            shared.clone(),
            counts.clone(),
            handshake.clone(),
            admitted.clone(),
            log.clone(),
        );
        let from = source.map(|a| a.to_string()).unwrap_or_default();
        let spawned = std::thread::Builder::new()
            .name("owl-handshake".into())
            .stack_size(STACK)
            .spawn(move || {
                let result = handshake(stream);
                // still ours, or closed from outside (shed, timed out: counted there)?
                let ours = shared2.lock().pending.remove(&id).is_some();
                match result {
                    Ok(t) if ours => {
                        counts2.admitted.inc();
                        admitted(t);
                    }
                    Ok(_) => {}
                    Err(e) if ours => {
                        counts2.refused.inc();
                        log(&format!("connection from {from} refused: {e}"));
                    }
                    Err(_) => {}
                }
            });
        if spawned.is_err() {
            // no thread to be had: this connection goes, the port stays
            if let Some(p) = shared.lock().pending.remove(&id) {
                close(&p);
                counts.shed.inc();
            }
        }
    }
}

/// Close every handshake past its deadline, as the deadlines come.
fn watchdog(shared: &Shared, counts: &Counts, note: &(dyn Fn(&str) + Send + Sync)) {
    let mut t = shared.lock();
    loop {
        let now = Instant::now();
        let late: Vec<u64> = t
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(&id, _)| id)
            .collect();
        let closed = !late.is_empty();
        for id in late {
            if let Some(p) = t.pending.remove(&id) {
                close(&p);
                counts.timed_out.inc();
            }
        }
        if closed {
            drop(t);
            note("handshakes past their deadline closed");
            t = shared.lock();
            continue;
        }
        // deadlines are added in order: the oldest is the next to pass
        let wait = t
            .pending
            .values()
            .next()
            .map(|p| p.deadline.saturating_duration_since(now))
            .unwrap_or(Duration::from_secs(3600));
        t = shared
            .added
            .wait_timeout(t, wait)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A port whose handshake is: read one byte `b'h'`, answer `b'w'`.
    fn port(rules: Admission) -> (std::net::SocketAddr, crossbeam_channel::Receiver<u8>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            serve(
                l,
                rules,
                |mut s: TcpStream| -> Result<u8, String> {
                    let mut b = [0u8];
                    s.read_exact(&mut b).map_err(|e| e.to_string())?;
                    if b[0] != b'h' {
                        return Err("not a hello".into());
                    }
                    s.write_all(b"w").map_err(|e| e.to_string())?;
                    Ok(b[0])
                },
                move |b| {
                    let _ = tx.send(b);
                },
                Arc::new(|_: &str| {}),
            )
        });
        (addr, rx)
    }

    fn hello(addr: std::net::SocketAddr) -> Result<(), String> {
        let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        s.write_all(b"h").map_err(|e| e.to_string())?;
        let mut b = [0u8];
        s.read_exact(&mut b).map_err(|e| e.to_string())?;
        (b[0] == b'w').then_some(()).ok_or("no welcome".into())
    }

    #[test]
    fn idle_connections_do_not_hold_a_real_peer() {
        let rules = Admission {
            cap: 8,
            deadline: Duration::from_secs(30),
            ..Admission::default()
        };
        let counts = rules.counts.clone();
        let (addr, rx) = port(rules);
        // 40 connections that say nothing, from this address (over the cap of 8)
        let idle: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let t0 = Instant::now();
        hello(addr).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert_eq!(rx.recv_timeout(Duration::from_secs(2)).unwrap(), b'h');
        // the newest idle ones shed the older: at most the cap are held
        std::thread::sleep(Duration::from_millis(100));
        assert!(counts.shed.get() >= 32, "{}", counts.describe());
        assert_eq!(counts.admitted.get(), 1);
        drop(idle);
    }

    #[test]
    fn a_trickle_is_closed_at_the_deadline() {
        let rules = Admission {
            cap: 8,
            deadline: Duration::from_millis(300),
            ..Admission::default()
        };
        let counts = rules.counts.clone();
        let (addr, _rx) = port(rules);
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let t0 = Instant::now();
        let mut b = [0u8];
        // the port closes it: the read ends (0 bytes or a reset), well before 5 s
        let n = s.read(&mut b).unwrap_or(0);
        assert_eq!(n, 0);
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(counts.timed_out.get(), 1, "{}", counts.describe());
    }

    #[test]
    fn a_refused_handshake_is_counted_and_the_port_goes_on() {
        let rules = Admission::default();
        let counts = rules.counts.clone();
        let (addr, rx) = port(rules);
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"x").unwrap();
        let mut b = [0u8];
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        assert_eq!(s.read(&mut b).unwrap_or(0), 0);
        hello(addr).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(2)).unwrap(), b'h');
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(counts.refused.get(), 1);
        assert_eq!(counts.admitted.get(), 1);
    }

    #[test]
    fn the_busiest_source_is_shed_first() {
        let mut t = Table::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let sock = || TcpStream::connect(l.local_addr().unwrap()).unwrap();
        for (id, src) in [(0, b), (1, a), (2, a), (3, b), (4, a)] {
            t.pending.insert(
                id,
                Pending {
                    source: Some(src),
                    socket: sock(),
                    deadline: Instant::now(),
                },
            );
        }
        // a holds three, b two: a's oldest (1) goes, not the oldest of all (b's 0)
        assert_eq!(t.victim(), Some(1));
    }
}
