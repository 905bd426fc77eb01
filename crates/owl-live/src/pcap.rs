//! Live capture through libpcap (`--capture pcap`, cargo feature `pcap`): for systems without
//! `AF_PACKET`, and for a kernel BPF pre-filter (`--bpf`, tcpdump's full expression language,
//! compiled by libpcap).
//!
//! The frames feed the same [`crate::capture`] loop as the `AF_PACKET` ring's, so the records
//! and synopses are the same. Timestamps are asked at nanosecond precision; where the
//! platform only has microseconds, the capture says so once and scales them. The kernel's
//! counts come from `pcap_stats` (packets received, and dropped by the buffer or the
//! interface), as differences between calls: libpcap's counters are cumulative 32-bit.
//!
//! Needs libpcap at build time (`apt-get install libpcap-dev`) and root or `CAP_NET_RAW` to
//! run.

use pcap::{Active, Capture, Error, Precision, Stat};

use crate::afpacket::KernelStats;
use crate::capture::PcapOptions;

/// Longest frame asked for: whole frames (jumbo and loopback's 64 KiB included).
const SNAPLEN: i32 = 262_144;
/// Most frames read in one call.
const BATCH: usize = 4096;

/// An open libpcap capture.
pub struct PcapSource {
    iface: String,
    cap: Capture<Active>,
    linktype: u32,
    /// ns per unit of the timestamps' fraction (1 at nanosecond precision, 1000 at micro).
    scale: u64,
    last: Stat,
    timeout_ms: i32,
}

impl PcapSource {
    /// Open `iface` (promiscuous, immediate delivery, reads waiting at most `timeout_ms`).
    pub fn open(iface: &str, o: &PcapOptions, timeout_ms: i32) -> Result<PcapSource, String> {
        let what = |e: Error| format!("--iface {iface} (libpcap): {e}");
        let inactive = || -> Result<Capture<pcap::Inactive>, String> {
            Ok(Capture::from_device(iface)
                .map_err(what)?
                .promisc(true)
                .snaplen(SNAPLEN)
                .timeout(timeout_ms)
                .immediate_mode(true)
                .buffer_size(i32::try_from(o.buffer_bytes).unwrap_or(i32::MAX)))
        };
        let (mut cap, scale) = match inactive()?.precision(Precision::Nano).open() {
            Ok(c) => (c, 1),
            // a platform without nanosecond timestamps: microseconds, said once
            Err(_) => (
                inactive()?
                    .precision(Precision::Micro)
                    .open()
                    .map_err(what)?,
                1000,
            ),
        };
        if let Some(expr) = &o.bpf {
            cap.filter(expr, true)
                .map_err(|e| format!("--bpf '{expr}': {e}"))?;
        }
        // reads never block: the wait is a poll on the capture's descriptor with our timeout,
        // whatever libpcap does with its own in immediate mode
        let mut cap = cap.setnonblock().map_err(what)?;
        let linktype = u32::try_from(cap.get_datalink().0)
            .map_err(|_| format!("--iface {iface}: a negative link type"))?;
        let last = cap.stats().map_err(what)?;
        Ok(PcapSource {
            iface: iface.to_string(),
            cap,
            linktype,
            scale,
            last,
            timeout_ms,
        })
    }

    pub fn linktype(&self) -> u32 {
        self.linktype
    }

    /// Microsecond timestamps only (the platform had no nanosecond precision).
    pub fn microseconds(&self) -> bool {
        self.scale != 1
    }

    /// The time after which every packet stamped before it has been read: the poll timeout
    /// twice (immediate mode hands each packet over as it comes), plus 50 ms of slack.
    pub fn delivery_lag_ns(&self) -> u64 {
        (2 * self.timeout_ms.max(0) as u64 + 50) * 1_000_000
    }

    /// The frames that came within the timeout, at most [`BATCH`]: `(timestamp ns, bytes)` to
    /// `each`. `None`: none came (everything older than the delivery lag has been read).
    pub fn next_frames(&mut self, each: &mut dyn FnMut(u64, &[u8])) -> Result<Option<u64>, String> {
        let n = self.read(each)?;
        if n > 0 {
            return Ok(Some(n));
        }
        let mut p = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&self.cap),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, self.timeout_ms) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(format!("--iface {}: poll: {e}", self.iface));
            }
        }
        let n = self.read(each)?;
        Ok((n > 0).then_some(n))
    }

    /// What is ready now, without waiting (the capture does not block).
    fn read(&mut self, each: &mut dyn FnMut(u64, &[u8])) -> Result<u64, String> {
        let mut n = 0u64;
        while (n as usize) < BATCH {
            match self.cap.next_packet() {
                Ok(p) => {
                    let (s, f) = (p.header.ts.tv_sec, p.header.ts.tv_usec);
                    let ts = u64::try_from(s)
                        .ok()
                        .and_then(|s| s.checked_mul(1_000_000_000))
                        .and_then(|s| s.checked_add(u64::try_from(f).ok()? * self.scale));
                    // a timestamp before 1970 or past 2554 is no packet owl can place
                    if let Some(ts) = ts {
                        each(ts, p.data);
                    }
                    n += 1;
                }
                Err(Error::TimeoutExpired) => break,
                Err(e) => return Err(format!("--iface {} (libpcap): {e}", self.iface)),
            }
        }
        Ok(n)
    }

    /// The kernel's counts since the last call.
    pub fn stats(&mut self) -> Result<KernelStats, String> {
        let s = self
            .cap
            .stats()
            .map_err(|e| format!("--iface {} (libpcap): {e}", self.iface))?;
        let d = |now: u32, before: u32| u64::from(now.wrapping_sub(before));
        let k = KernelStats {
            packets: d(s.received, self.last.received),
            drops: d(s.dropped, self.last.dropped) + d(s.if_dropped, self.last.if_dropped),
            freezes: 0,
        };
        self.last = s;
        Ok(k)
    }
}
