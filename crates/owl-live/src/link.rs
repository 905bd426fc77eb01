//! An authenticated connection: the handshake that turns a TCP stream and the pre-shared key
//! into a session key, then two halves (one per thread) that seal and open [`crate::frame`]s.
//!
//! ```text
//! connector → listener  Hello   { "OWL-LIVE", role, 32-byte nonce_c, name }
//!                       tagged with K_hello = HMAC(PSK, "owl-live-v1 hello"), frame 0
//! listener → connector  Welcome { 32-byte nonce_s, name }
//!                       tagged with K = HMAC(PSK, "owl-live-v1 session" | nonce_c | nonce_s), frame 0
//! then both ways: frames 1, 2, … tagged with K and their direction
//! ```
//!
//! The listener checks the Hello's tag before answering, so a peer without the key learns
//! nothing but a refusal; the connector checks the Welcome's tag under a key that depends on
//! its own fresh nonce, so a recorded Welcome cannot be replayed to it. A replayed Hello gets
//! a fresh `nonce_s`, hence a session key its sender cannot compute: the next frame fails.
//!
//! A refusal ([`kind::REFUSE`]: a reason) is tagged when a session key exists; before that
//! (the Hello did not verify) it is sent untagged, and the connector reports it as such.

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use owl_core::wire::{WireReader, WireWriter};

use crate::frame::{
    self, Direction, Frame, FrameError, FrameReader, MAX_FRAME, Opener, Sealer, parse_body,
};
use crate::key::{Key, random_bytes};

/// Frame kinds of the handshake and of every connection (application kinds start at 16).
pub mod kind {
    pub const HELLO: u8 = 1;
    pub const WELCOME: u8 = 2;
    /// A refusal, with its reason: the connection ends after it.
    pub const REFUSE: u8 = 3;
}

/// First bytes of a Hello's payload.
pub const MAGIC: &[u8; 8] = b"OWL-LIVE";
/// How long a handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the connecting side is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerRole {
    /// A sender agent connecting to its receiver agent.
    Sender = 1,
    /// An agent delivering results to a collector.
    Reporter = 2,
}

impl PeerRole {
    fn from_u8(b: u8) -> Option<PeerRole> {
        match b {
            1 => Some(PeerRole::Sender),
            2 => Some(PeerRole::Reporter),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            PeerRole::Sender => "a sender agent",
            PeerRole::Reporter => "an agent reporting results",
        }
    }
}

/// Why a connection could not be set up or went wrong.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("{0}")]
    Frame(#[from] FrameError),
    #[error("the peer refused the connection: {reason}{}", if *.authenticated { "" } else { " (unauthenticated reply)" })]
    Refused { reason: String, authenticated: bool },
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The peer accepted the connection and closed it before it answered the hello: a
    /// listener that is restarting or shedding (worth connecting again), or not an owl agent.
    #[error("protocol error: the peer closed the connection during the handshake")]
    ClosedInHandshake,
}

impl From<std::io::Error> for LinkError {
    fn from(e: std::io::Error) -> Self {
        LinkError::Frame(FrameError::Io(e))
    }
}

/// The Hello's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub role: PeerRole,
    pub nonce: [u8; 32],
    /// The connecting side's name (its pair label, for logs and the collector).
    pub name: String,
}

impl Hello {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        let mut w = WireWriter::new(&mut b);
        w.bytes(MAGIC);
        w.u8(self.role as u8);
        w.bytes(&self.nonce);
        w.str(&self.name);
        b
    }

    fn decode(p: &[u8]) -> Result<Hello, LinkError> {
        let bad = |e: String| LinkError::Protocol(format!("malformed hello: {e}"));
        let mut r = WireReader::new(p);
        let m = r
            .take(MAGIC.len(), "magic")
            .map_err(|e| bad(e.to_string()))?;
        if m != MAGIC {
            return Err(LinkError::Protocol(
                "the peer's first frame is not an owl hello".into(),
            ));
        }
        let role = r.u8("role").map_err(|e| bad(e.to_string()))?;
        let role = PeerRole::from_u8(role).ok_or_else(|| bad(format!("unknown role {role}")))?;
        let nonce: [u8; 32] = r
            .take(32, "nonce")
            .map_err(|e| bad(e.to_string()))?
            .try_into()
            .expect("32 bytes");
        let name = r.str("name").map_err(|e| bad(e.to_string()))?;
        r.finish("hello").map_err(|e| bad(e.to_string()))?;
        Ok(Hello { role, nonce, name })
    }
}

fn hello_key(psk: &Key) -> Key {
    psk.derive(&[b"owl-live-v1 hello"])
}

fn session_key(psk: &Key, nonce_c: &[u8; 32], nonce_s: &[u8; 32]) -> Key {
    psk.derive(&[b"owl-live-v1 session", nonce_c, nonce_s])
}

/// The sending half of a connection.
pub struct LinkWriter {
    w: TcpStream,
    sealer: Sealer,
    /// Bytes written (frames, length prefixes and tags included).
    pub bytes: u64,
}

impl LinkWriter {
    /// Seal and send one frame.
    pub fn send(&mut self, kind: u8, payload: &[u8]) -> Result<(), LinkError> {
        let f = self.sealer.seal(kind, payload);
        frame::write_frame(&mut self.w, &f)?;
        self.bytes += f.len() as u64;
        Ok(())
    }

    /// Send a refusal with its reason and close the sending direction.
    pub fn refuse(&mut self, reason: &str) {
        let _ = self.send(kind::REFUSE, reason.as_bytes());
        let _ = self.w.shutdown(Shutdown::Write);
    }

    /// Close both directions (the reading half's thread sees the end).
    pub fn shutdown(&self) {
        let _ = self.w.shutdown(Shutdown::Both);
    }
}

/// The receiving half of a connection.
pub struct LinkReader {
    r: FrameReader<TcpStream>,
    opener: Opener,
    /// Bytes read.
    pub bytes: u64,
}

impl LinkReader {
    /// The next authenticated frame; a refusal from the peer is [`LinkError::Refused`].
    pub fn recv(&mut self) -> Result<Frame, LinkError> {
        let body = self.r.read_body()?;
        self.bytes += 4 + body.len() as u64;
        let f = self.opener.open(&body)?;
        if f.kind == kind::REFUSE {
            return Err(LinkError::Refused {
                reason: String::from_utf8_lossy(&f.payload).into_owned(),
                authenticated: true,
            });
        }
        Ok(f)
    }
}

/// Both halves of an authenticated connection and what the peer said of itself.
pub struct Link {
    pub reader: LinkReader,
    pub writer: LinkWriter,
    /// The connector's Hello (for the listener), or the listener's name (for the connector,
    /// in `hello.name`).
    pub hello: Hello,
    pub peer: String,
}

impl Link {
    /// The session once the handshake is done, at either side: frames read in direction
    /// `reads` and written in the other, both numbered from 1 (the handshake's frames were 0),
    /// the session's frame cap lifted from the handshake's, and the handshake's bytes
    /// (`[read, written]`) counted.
    fn established(
        mut r: FrameReader<TcpStream>,
        w: TcpStream,
        key: Key,
        reads: Direction,
        handshake: [u64; 2],
        hello: Hello,
        peer: String,
    ) -> Link {
        let writes = match reads {
            Direction::ToListener => Direction::ToConnector,
            Direction::ToConnector => Direction::ToListener,
        };
        r.set_cap(MAX_FRAME);
        Link {
            reader: LinkReader {
                r,
                opener: Opener::new(key.clone(), reads, 1),
                bytes: handshake[0],
            },
            writer: LinkWriter {
                w,
                sealer: Sealer::new(key, writes, 1),
                bytes: handshake[1],
            },
            hello,
            peer,
        }
    }
}

/// How long a connection may go silent, or leave data unacknowledged, before the kernel
/// declares it dead: keepalive probes after [`KEEPALIVE_IDLE_S`] of silence, every
/// [`KEEPALIVE_INTERVAL_S`], [`KEEPALIVE_PROBES`] of them; and at most [`USER_TIMEOUT_MS`] for
/// sent data to be acknowledged (Linux). A peer that vanished without a word (power cut,
/// partition) then ends the connection in about half a minute, as a broken one — not after
/// TCP's default of two hours idle or fifteen minutes of retransmissions.
pub const KEEPALIVE_IDLE_S: i32 = 10;
pub const KEEPALIVE_INTERVAL_S: i32 = 5;
pub const KEEPALIVE_PROBES: i32 = 4;
pub const USER_TIMEOUT_MS: u32 = 30_000;

/// Set the liveness options above on `stream` (on Linux; elsewhere TCP's defaults hold).
pub fn watch_liveness(stream: &TcpStream) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::time::Duration;
        let s = socket2::SockRef::from(stream);
        s.set_tcp_keepalive(
            &socket2::TcpKeepalive::new()
                .with_time(Duration::from_secs(KEEPALIVE_IDLE_S as u64))
                .with_interval(Duration::from_secs(KEEPALIVE_INTERVAL_S as u64))
                .with_retries(KEEPALIVE_PROBES as u32),
        )?;
        s.set_tcp_user_timeout(Some(Duration::from_millis(USER_TIMEOUT_MS.into())))?;
    }
    #[cfg(not(target_os = "linux"))]
    let _ = stream;
    Ok(())
}

/// The connecting side's handshake.
pub fn connect(
    stream: TcpStream,
    psk: &Key,
    role: PeerRole,
    name: &str,
) -> Result<Link, LinkError> {
    connect_within(stream, psk, role, name, HANDSHAKE_TIMEOUT)
}

/// [`connect`], waiting at most `timeout` for the peer's answer.
pub fn connect_within(
    stream: TcpStream,
    psk: &Key,
    role: PeerRole,
    name: &str,
    timeout: Duration,
) -> Result<Link, LinkError> {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    stream.set_nodelay(true)?;
    watch_liveness(&stream)?;
    stream.set_read_timeout(Some(timeout))?;
    let hello = Hello {
        role,
        nonce: random_bytes().map_err(|e| LinkError::Protocol(e.to_string()))?,
        name: name.to_string(),
    };
    let mut w = stream.try_clone()?;
    let f = frame::seal_with(
        &hello_key(psk),
        Direction::ToListener,
        0,
        kind::HELLO,
        &hello.encode(),
    );
    frame::write_frame(&mut w, &f)?;
    let mut r = FrameReader::new(stream.try_clone()?);
    let body = r.read_body().map_err(|e| match e {
        FrameError::Closed => LinkError::ClosedInHandshake,
        // a read timeout is EAGAIN on Linux: say what it means, not "os error 11"
        FrameError::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            LinkError::Protocol(format!(
                "no handshake from the peer at {peer} within {:?} (is an owl agent listening there, and not busy with another connection?)",
                timeout
            ))
        }
        e => e.into(),
    })?;
    let raw = parse_body(&body)?;
    if raw.kind == kind::REFUSE {
        return Err(LinkError::Refused {
            reason: String::from_utf8_lossy(raw.payload).into_owned(),
            authenticated: false,
        });
    }
    if raw.kind != kind::WELCOME {
        return Err(LinkError::Protocol(format!(
            "expected a welcome, got a frame of kind {}",
            raw.kind
        )));
    }
    let (nonce_s, rest) = raw
        .payload
        .split_first_chunk::<32>()
        .ok_or_else(|| LinkError::Protocol("malformed welcome".into()))?;
    let key = session_key(psk, &hello.nonce, nonce_s);
    frame::verify(&key, Direction::ToConnector, &raw, 0)?;
    let name = WireReader::new(rest)
        .str("name")
        .map_err(|e| LinkError::Protocol(format!("malformed welcome: {e}")))?;
    stream.set_read_timeout(None)?;
    let hello = Hello {
        role,
        nonce: *nonce_s,
        name,
    };
    let handshake = [4 + body.len() as u64, f.len() as u64];
    Ok(Link::established(
        r,
        w,
        key,
        Direction::ToConnector,
        handshake,
        hello,
        peer,
    ))
}

/// Why [`connect_with_patience`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The address does not resolve.
    #[error("{what} at {peer}: {source}")]
    Resolve {
        what: &'static str,
        peer: String,
        source: std::io::Error,
    },
    /// Nothing accepted a connection within the patience (the last attempt's error).
    #[error("cannot connect to {what} at {peer} within {} s: {}", patience.as_secs(), last.as_ref().map_or_else(|| "no address".to_string(), |e| e.to_string()))]
    Unreachable {
        what: &'static str,
        peer: String,
        patience: Duration,
        last: Option<std::io::Error>,
    },
}

/// Connect to `peer` (`what` it is, for the error: "the receiver", "the collector"), retrying
/// until `patience` has passed (it may start later).
pub fn connect_with_patience(
    peer: &str,
    what: &'static str,
    patience: Duration,
) -> Result<TcpStream, ConnectError> {
    let start = Instant::now();
    let addrs: Vec<SocketAddr> = peer
        .to_socket_addrs()
        .map_err(|source| ConnectError::Resolve {
            what,
            peer: peer.to_string(),
            source,
        })?
        .collect();
    loop {
        let mut last = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, Duration::from_secs(2)) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        if start.elapsed() >= patience {
            return Err(ConnectError::Unreachable {
                what,
                peer: peer.to_string(),
                patience,
                last,
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The listening side's handshake: the connector must prove it holds the key before anything
/// is said; a connector that does not is refused with a reason (untagged).
pub fn accept(stream: TcpStream, psk: &Key, name: &str) -> Result<Link, LinkError> {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    stream.set_nodelay(true)?;
    watch_liveness(&stream)?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut w = stream.try_clone()?;
    let mut r = FrameReader::new(stream.try_clone()?);
    let refuse = |w: &mut TcpStream, reason: &str| {
        let _ = frame::write_frame(w, &frame::unauthenticated(kind::REFUSE, reason.as_bytes()));
        let _ = w.shutdown(Shutdown::Write);
    };
    let body = match r.read_body() {
        Ok(b) => b,
        Err(e) => {
            refuse(&mut w, &e.to_string());
            return Err(e.into());
        }
    };
    let raw = parse_body(&body)?;
    let hello = match frame::verify(&hello_key(psk), Direction::ToListener, &raw, 0)
        .map_err(LinkError::from)
        .and_then(|f| {
            if f.kind != kind::HELLO {
                return Err(LinkError::Protocol(format!(
                    "expected a hello, got a frame of kind {}",
                    f.kind
                )));
            }
            Hello::decode(&f.payload)
        }) {
        Ok(h) => h,
        Err(e) => {
            let reason = match &e {
                LinkError::Frame(FrameError::Tag { .. }) => {
                    "authentication failed: the two sides do not hold the same key (check --key-file)"
                        .to_string()
                }
                e => e.to_string(),
            };
            refuse(&mut w, &reason);
            return Err(LinkError::Protocol(reason));
        }
    };
    let nonce_s: [u8; 32] = random_bytes().map_err(|e| LinkError::Protocol(e.to_string()))?;
    let key = session_key(psk, &hello.nonce, &nonce_s);
    let mut p = nonce_s.to_vec();
    WireWriter::new(&mut p).str(name);
    let f = frame::seal_with(&key, Direction::ToConnector, 0, kind::WELCOME, &p);
    w.write_all(&f)?;
    w.flush()?;
    stream.set_read_timeout(None)?;
    let handshake = [4 + body.len() as u64, f.len() as u64];
    Ok(Link::established(
        r,
        w,
        key,
        Direction::ToListener,
        handshake,
        hello,
        peer,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The liveness options are on the socket as stated.
    #[cfg(target_os = "linux")]
    #[test]
    fn links_watch_for_a_silent_peer() {
        use std::time::Duration;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        watch_liveness(&s).unwrap();
        let s = socket2::SockRef::from(&s);
        assert!(s.keepalive().unwrap());
        let secs = |d: Duration| d.as_secs() as i32;
        assert_eq!(secs(s.tcp_keepalive_time().unwrap()), KEEPALIVE_IDLE_S);
        assert_eq!(
            secs(s.tcp_keepalive_interval().unwrap()),
            KEEPALIVE_INTERVAL_S
        );
        assert_eq!(s.tcp_keepalive_retries().unwrap() as i32, KEEPALIVE_PROBES);
        assert_eq!(
            s.tcp_user_timeout().unwrap(),
            Some(Duration::from_millis(USER_TIMEOUT_MS.into()))
        );
    }
    use std::net::TcpListener;

    /// A peer that accepts and never answers: the connector's error says so, with the
    /// address and the wait, not an OS error number ("os error 11" before).
    #[test]
    fn a_silent_peer_is_named_not_an_os_error() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let s = TcpStream::connect(addr).unwrap();
        let _held = l.accept().unwrap();
        let e = connect_within(
            s,
            &Key::from_bytes([3; 32]),
            PeerRole::Sender,
            "s",
            Duration::from_millis(200),
        )
        .err()
        .expect("no answer, no link")
        .to_string();
        assert!(
            e.contains(&format!("no handshake from the peer at {addr}")),
            "{e}"
        );
        assert!(e.contains("200ms"), "{e}");
        assert!(!e.contains("os error"), "{e}");
    }

    fn pair(
        listener_key: Key,
        connector_key: Key,
    ) -> (Result<Link, LinkError>, Result<Link, LinkError>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            accept(s, &listener_key, "receiver")
        });
        let c = connect(
            TcpStream::connect(addr).unwrap(),
            &connector_key,
            PeerRole::Sender,
            "sender",
        );
        (t.join().unwrap(), c)
    }

    #[test]
    fn same_key_talks_both_ways() {
        let k = Key::from_bytes([7; 32]);
        let (a, c) = pair(k.clone(), k);
        let (mut a, mut c) = (a.unwrap(), c.unwrap());
        assert_eq!(a.hello.role, PeerRole::Sender);
        assert_eq!(a.hello.name, "sender");
        assert_eq!(c.hello.name, "receiver");
        c.writer.send(20, b"to the listener").unwrap();
        a.writer.send(21, b"to the connector").unwrap();
        let f = a.reader.recv().unwrap();
        assert_eq!(
            (f.kind, f.seq, &f.payload[..]),
            (20, 1, &b"to the listener"[..])
        );
        let f = c.reader.recv().unwrap();
        assert_eq!(
            (f.kind, f.seq, &f.payload[..]),
            (21, 1, &b"to the connector"[..])
        );
        a.writer.refuse("configuration mismatch: interval");
        let e = c.reader.recv().unwrap_err();
        assert_eq!(
            e.to_string(),
            "the peer refused the connection: configuration mismatch: interval"
        );
    }

    #[test]
    fn a_wrong_key_is_refused_with_a_reason_on_both_sides() {
        let (a, c) = pair(Key::from_bytes([1; 32]), Key::from_bytes([2; 32]));
        let a = a.err().unwrap().to_string();
        let c = c.err().unwrap().to_string();
        assert!(a.contains("do not hold the same key"), "{a}");
        assert!(
            c.contains("refused the connection: authentication failed")
                && c.contains("(unauthenticated reply)"),
            "{c}"
        );
        assert_eq!(a.lines().count(), 1);
        assert_eq!(c.lines().count(), 1);
    }
}
