//! Live capture on Linux: an `AF_PACKET` socket with a `TPACKET_V3` memory-mapped receive
//! ring (packet(7); the kernel's Documentation/networking/packet_mmap.rst), through the `libc`
//! crate only — no libpcap.
//!
//! The kernel fills fixed-size *blocks* of the ring with variable-size frames, each behind a
//! `tpacket3_hdr` carrying its capture timestamp in nanoseconds (`tp_sec`, `tp_nsec`: the
//! kernel's software receive/transmit timestamp, `CLOCK_REALTIME`). A block is handed to user
//! space when it is full or when the retire timeout has passed since it was opened, so a quiet
//! link still delivers its few packets within about two timeouts. User space walks the block
//! ([`walk_block`]) and hands it back. What the ring could not take is counted by the kernel
//! (`PACKET_STATISTICS`, [`KernelStats`]).
//!
//! Every length and offset in a block comes from the ring and is checked against the block
//! before it is used: a damaged block ends the walk and is counted, never read out of bounds.

/// Size of the ring, of one block, and the retire timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingOptions {
    /// Bytes of the whole ring (a multiple of the block size).
    pub ring_bytes: usize,
    /// Bytes of one block (a power of two, at least a page; bounds the longest frame).
    pub block_bytes: usize,
    /// A block with packets is handed over at most about this long after it was opened, ms.
    pub retire_ms: u32,
}

impl Default for RingOptions {
    /// 32 MiB of 1 MiB blocks, retired after 10 ms.
    fn default() -> RingOptions {
        RingOptions {
            ring_bytes: 32 << 20,
            block_bytes: 1 << 20,
            retire_ms: 10,
        }
    }
}

impl RingOptions {
    /// How long after its timestamp a packet can still be waiting in a block the kernel has
    /// not handed over: two retire timeouts (the kernel's retire timer closes a block that has
    /// stayed the active one for a whole period), plus 50 ms of scheduling slack.
    pub fn delivery_lag_ns(&self) -> u64 {
        2 * u64::from(self.retire_ms) * 1_000_000 + 50_000_000
    }

    /// Check the sizes; the error says which and why.
    pub fn check(&self) -> Result<(), String> {
        if !self.block_bytes.is_power_of_two() || self.block_bytes < 4096 {
            return Err(format!(
                "ring block of {} bytes: it must be a power of two of at least 4 KiB",
                self.block_bytes
            ));
        }
        if self.ring_bytes < self.block_bytes || !self.ring_bytes.is_multiple_of(self.block_bytes) {
            return Err(format!(
                "ring of {} bytes: it must be a whole number (at least 1) of {}-byte blocks",
                self.ring_bytes, self.block_bytes
            ));
        }
        if self.ring_bytes / self.block_bytes > u32::MAX as usize || self.block_bytes > 1 << 30 {
            return Err(format!("ring of {} bytes: too large", self.ring_bytes));
        }
        if self.retire_ms == 0 {
            return Err("a ring retire timeout of 0 ms would let quiet blocks wait forever".into());
        }
        Ok(())
    }
}

/// The kernel's counts since the last read (`PACKET_STATISTICS` resets them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct KernelStats {
    /// Packets the socket took (including those dropped).
    pub packets: u64,
    /// Packets dropped because the ring was full.
    pub drops: u64,
    /// Times the ring was frozen full (TPACKET_V3's `tp_freeze_q_cnt`).
    pub freezes: u64,
}

/// One frame of a block.
#[derive(Clone, Copy, Debug)]
pub struct RingFrame<'a> {
    /// Capture timestamp, ns since the Unix epoch.
    pub ts_ns: u64,
    /// The captured bytes from the link-layer header on.
    pub data: &'a [u8],
    /// The frame's length on the wire (more than `data` when the block cut it).
    pub wire_len: u32,
}

/// What one block held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Walked {
    /// Frames handed on.
    pub frames: u64,
    /// Frames (or the rest of the block) skipped as damaged: an offset or length outside the
    /// block, or a timestamp whose nanoseconds are not below 1 s.
    pub malformed: u64,
}

/// `tpacket_block_desc`: version, offset_to_priv, then `tpacket_hdr_v1`.
mod block {
    pub const STATUS: usize = 8;
    pub const NUM_PKTS: usize = 12;
    pub const FIRST: usize = 16;
    pub const LEN: usize = 20;
    /// Bytes of the descriptor up to `ts_last_pkt`'s end.
    pub const HEADER: usize = 48;
}

/// `tpacket3_hdr`.
mod frame {
    pub const NEXT: usize = 0;
    pub const SEC: usize = 4;
    pub const NSEC: usize = 8;
    pub const SNAPLEN: usize = 12;
    pub const LEN: usize = 16;
    pub const MAC: usize = 24;
    /// Bytes up to and including `tp_mac` and `tp_net`.
    pub const HEADER: usize = 28;
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes(s.try_into().ok()?))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_ne_bytes(s.try_into().ok()?))
}

/// Walk the frames of one block the kernel handed over (`block` is the whole block), in
/// order, handing each to `each`. Nothing in the block is trusted: the walk stops at the first
/// frame that does not fit, and counts it and the frames the block said would follow.
pub fn walk_block(block: &[u8], mut each: impl FnMut(RingFrame<'_>)) -> Walked {
    let mut w = Walked::default();
    let (Some(n), Some(first), Some(len)) = (
        u32_at(block, block::NUM_PKTS),
        u32_at(block, block::FIRST),
        u32_at(block, block::LEN),
    ) else {
        w.malformed = 1;
        return w;
    };
    // blk_len: the bytes the kernel used, never past the block
    let end = (len as usize).min(block.len());
    let block = &block[..end];
    let mut at = first as usize;
    if at < block::HEADER.min(end) && n > 0 {
        w.malformed = u64::from(n);
        return w;
    }
    for i in 0..n {
        let fields = (
            u32_at(block, at + frame::NEXT),
            u32_at(block, at + frame::SEC),
            u32_at(block, at + frame::NSEC),
            u32_at(block, at + frame::SNAPLEN),
            u32_at(block, at + frame::LEN),
            u16_at(block, at + frame::MAC),
        );
        let (Some(next), Some(sec), Some(nsec), Some(snap), Some(wire), Some(mac)) = fields else {
            w.malformed += u64::from(n - i);
            return w;
        };
        let start = at + mac as usize;
        let data = start
            .checked_add(snap as usize)
            .filter(|_| mac as usize >= frame::HEADER)
            .and_then(|stop| block.get(start..stop));
        match data {
            Some(data) if nsec < 1_000_000_000 => {
                w.frames += 1;
                each(RingFrame {
                    ts_ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec),
                    data,
                    wire_len: wire,
                });
            }
            _ => w.malformed += 1,
        }
        if i + 1 == n {
            break;
        }
        // every frame moves the walk forward by at least its header
        if (next as usize) < frame::HEADER {
            w.malformed += u64::from(n - i - 1);
            return w;
        }
        at += next as usize;
    }
    w
}

#[cfg(target_os = "linux")]
pub use linux::Ring;

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::CString;
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::atomic::{Ordering, fence};

    use owl_trace::dissect::{LINKTYPE_ETHERNET, LINKTYPE_RAW};

    use super::{KernelStats, RingFrame, RingOptions, Walked, block, walk_block};

    /// `TP_STATUS_USER`: the block is user space's until handed back with `TP_STATUS_KERNEL`.
    const TP_STATUS_USER: u32 = libc::TP_STATUS_USER;
    const TP_STATUS_KERNEL: u32 = libc::TP_STATUS_KERNEL;
    /// `TPACKET_V3` of `enum tpacket_versions`.
    const TPACKET_V3: libc::c_int = 2;

    /// An interface's `AF_PACKET` socket and its mapped `TPACKET_V3` ring.
    pub struct Ring {
        fd: OwnedFd,
        map: *mut u8,
        map_len: usize,
        block_bytes: usize,
        blocks: usize,
        next: usize,
        linktype: u32,
        iface: String,
    }

    // SAFETY: the ring is only touched through `&mut self`; the mapping belongs to this value.
    unsafe impl Send for Ring {}

    fn os_error(what: &str, iface: &str) -> String {
        let e = io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                " (capturing needs root or the CAP_NET_RAW capability: sudo setcap cap_net_raw+ep $(which owl))"
            }
            Some(libc::ENOMEM) => " (a smaller --ring-size may fit)",
            _ => "",
        };
        format!("--iface {iface}: {what}: {e}{hint}")
    }

    /// The link type of an interface's frames, from its ARPHRD type in sysfs.
    fn linktype_of(iface: &str) -> Result<u32, String> {
        let path = format!("/sys/class/net/{iface}/type");
        let t = std::fs::read_to_string(&path)
            .map_err(|e| format!("--iface {iface}: no such interface ({path}: {e})"))?;
        match t.trim().parse::<u16>() {
            // loopback frames carry an Ethernet header (zero addresses) on Linux
            Ok(libc::ARPHRD_ETHER) | Ok(libc::ARPHRD_LOOPBACK) => Ok(LINKTYPE_ETHERNET),
            // tun, WireGuard: the frame is the IP packet
            Ok(libc::ARPHRD_NONE) => Ok(LINKTYPE_RAW),
            _ => Err(format!(
                "--iface {iface}: link type ARPHRD {} is not supported (Ethernet, loopback, or raw IP as on tun and WireGuard)",
                t.trim()
            )),
        }
    }

    impl Ring {
        /// Open `iface`'s ring. The socket takes no packet until the ring is ready and bound
        /// to the interface, so none from another interface slips in.
        pub fn open(iface: &str, o: &RingOptions) -> Result<Ring, String> {
            o.check()?;
            let linktype = linktype_of(iface)?;
            let name = CString::new(iface).map_err(|_| format!("--iface {iface:?}: not a name"))?;
            // SAFETY: plain system calls on a socket this function owns; every pointer passed
            // points to a live local of the size given.
            unsafe {
                let index = libc::if_nametoindex(name.as_ptr());
                if index == 0 {
                    return Err(os_error("no such interface", iface));
                }
                let raw = libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0);
                if raw < 0 {
                    return Err(os_error("cannot open an AF_PACKET socket", iface));
                }
                let fd = OwnedFd::from_raw_fd(raw);
                let version = TPACKET_V3;
                if libc::setsockopt(
                    raw,
                    libc::SOL_PACKET,
                    libc::PACKET_VERSION,
                    (&version as *const libc::c_int).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                ) != 0
                {
                    return Err(os_error("TPACKET_V3 not available", iface));
                }
                let blocks = o.ring_bytes / o.block_bytes;
                let frame_size = 2048usize;
                let req = libc::tpacket_req3 {
                    tp_block_size: o.block_bytes as libc::c_uint,
                    tp_block_nr: blocks as libc::c_uint,
                    tp_frame_size: frame_size as libc::c_uint,
                    tp_frame_nr: (o.ring_bytes / frame_size) as libc::c_uint,
                    tp_retire_blk_tov: o.retire_ms,
                    tp_sizeof_priv: 0,
                    tp_feature_req_word: 0,
                };
                if libc::setsockopt(
                    raw,
                    libc::SOL_PACKET,
                    libc::PACKET_RX_RING,
                    (&req as *const libc::tpacket_req3).cast(),
                    size_of::<libc::tpacket_req3>() as libc::socklen_t,
                ) != 0
                {
                    return Err(os_error("cannot set up the receive ring", iface));
                }
                let map = libc::mmap(
                    std::ptr::null_mut(),
                    o.ring_bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    raw,
                    0,
                );
                if map == libc::MAP_FAILED {
                    return Err(os_error("cannot map the receive ring", iface));
                }
                let ring = Ring {
                    fd,
                    map: map.cast(),
                    map_len: o.ring_bytes,
                    block_bytes: o.block_bytes,
                    blocks,
                    next: 0,
                    linktype,
                    iface: iface.to_string(),
                };
                let mut sll: libc::sockaddr_ll = std::mem::zeroed();
                sll.sll_family = libc::AF_PACKET as libc::c_ushort;
                sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
                sll.sll_ifindex = index as libc::c_int;
                if libc::bind(
                    raw,
                    (&sll as *const libc::sockaddr_ll).cast(),
                    size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                ) != 0
                {
                    return Err(os_error("cannot bind to the interface", iface));
                }
                // counts start now
                ring.stats()?;
                Ok(ring)
            }
        }

        /// The link type of the frames (Ethernet, or raw IP).
        pub fn linktype(&self) -> u32 {
            self.linktype
        }

        /// The next block the kernel has handed over, waiting at most `timeout_ms` for one:
        /// its frames go to `each`, then the block goes back to the kernel. `None`: no block
        /// came within the timeout (every packet older than about
        /// [`RingOptions::delivery_lag_ns`] has been handed on).
        pub fn next_block(
            &mut self,
            timeout_ms: i32,
            each: impl FnMut(RingFrame<'_>),
        ) -> Result<Option<Walked>, String> {
            if !self.user_owns(self.next) {
                let mut p = libc::pollfd {
                    fd: self.fd.as_raw_fd(),
                    events: libc::POLLIN | libc::POLLERR,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
                if r < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::Interrupted {
                        return Ok(None);
                    }
                    return Err(format!("--iface {}: poll: {e}", self.iface));
                }
                if !self.user_owns(self.next) {
                    return Ok(None);
                }
            }
            let b = self.next;
            // SAFETY: block b lies inside the mapping, and while its status is TP_STATUS_USER
            // the kernel does not write it.
            let block = unsafe { std::slice::from_raw_parts(self.block_ptr(b), self.block_bytes) };
            let w = walk_block(block, each);
            self.hand_back(b);
            self.next = (b + 1) % self.blocks;
            Ok(Some(w))
        }

        fn block_ptr(&self, b: usize) -> *mut u8 {
            debug_assert!(b < self.blocks);
            // SAFETY: b < blocks, so the offset stays inside the mapping
            unsafe { self.map.add(b * self.block_bytes) }
        }

        fn status(&self, b: usize) -> *mut u32 {
            // SAFETY: the status word lies inside block b's descriptor (aligned: blocks are
            // page-aligned, the word at offset 8)
            unsafe { self.block_ptr(b).add(block::STATUS).cast() }
        }

        fn user_owns(&self, b: usize) -> bool {
            // SAFETY: an aligned u32 inside the mapping, written by the kernel
            let s = unsafe { std::ptr::read_volatile(self.status(b)) };
            fence(Ordering::Acquire);
            s & TP_STATUS_USER != 0
        }

        fn hand_back(&self, b: usize) {
            fence(Ordering::Release);
            // SAFETY: as in user_owns
            unsafe { std::ptr::write_volatile(self.status(b), TP_STATUS_KERNEL) };
        }

        /// The kernel's counts since the last call (`PACKET_STATISTICS` resets them).
        pub fn stats(&self) -> Result<KernelStats, String> {
            let mut s = libc::tpacket_stats_v3 {
                tp_packets: 0,
                tp_drops: 0,
                tp_freeze_q_cnt: 0,
            };
            let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
            // SAFETY: s and len are live locals of the sizes given
            let r = unsafe {
                libc::getsockopt(
                    self.fd.as_raw_fd(),
                    libc::SOL_PACKET,
                    libc::PACKET_STATISTICS,
                    (&mut s as *mut libc::tpacket_stats_v3).cast(),
                    &mut len,
                )
            };
            if r != 0 {
                return Err(os_error("PACKET_STATISTICS", &self.iface));
            }
            Ok(KernelStats {
                packets: u64::from(s.tp_packets),
                drops: u64::from(s.tp_drops),
                freezes: u64::from(s.tp_freeze_q_cnt),
            })
        }
    }

    impl Drop for Ring {
        fn drop(&mut self) {
            // SAFETY: the mapping made in open, unmapped once; the socket closes after
            unsafe {
                libc::munmap(self.map.cast(), self.map_len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block as the kernel lays it out: descriptor, then frames each behind a
    /// `tpacket3_hdr` whose `tp_mac` is `mac`.
    fn block(frames: &[(u32, u32, &[u8])], size: usize) -> Vec<u8> {
        let mut b = vec![0u8; size];
        let put = |b: &mut Vec<u8>, at: usize, v: u32| {
            b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        };
        let first = 48usize;
        let mut at = first;
        let mac = 68u16; // TPACKET_ALIGN(sizeof tpacket3_hdr) + sockaddr_ll, as the kernel does
        for (i, (sec, nsec, data)) in frames.iter().enumerate() {
            let len = (mac as usize + data.len()).next_multiple_of(16);
            let next = if i + 1 == frames.len() { 0 } else { len as u32 };
            put(&mut b, at + frame::NEXT, next);
            put(&mut b, at + frame::SEC, *sec);
            put(&mut b, at + frame::NSEC, *nsec);
            put(&mut b, at + frame::SNAPLEN, data.len() as u32);
            put(&mut b, at + frame::LEN, data.len() as u32 + 4);
            b[at + frame::MAC..at + frame::MAC + 2].copy_from_slice(&mac.to_ne_bytes());
            b[at + mac as usize..at + mac as usize + data.len()].copy_from_slice(data);
            at += len;
        }
        put(&mut b, block::STATUS, 1);
        put(&mut b, block::NUM_PKTS, frames.len() as u32);
        put(&mut b, block::FIRST, first as u32);
        put(&mut b, block::LEN, at as u32);
        b
    }

    fn walk(b: &[u8]) -> (Walked, Vec<(u64, Vec<u8>, u32)>) {
        let mut got = Vec::new();
        let w = walk_block(b, |f| got.push((f.ts_ns, f.data.to_vec(), f.wire_len)));
        (w, got)
    }

    #[test]
    fn walks_every_frame_in_order_with_ns_timestamps() {
        let b = block(
            &[
                (1_700_000_000, 5, b"first frame"),
                (1_700_000_000, 999_999_999, b"second"),
                (1_700_000_001, 0, &[7u8; 300]),
            ],
            4096,
        );
        let (w, got) = walk(&b);
        assert_eq!(
            w,
            Walked {
                frames: 3,
                malformed: 0
            }
        );
        assert_eq!(
            got[0],
            (1_700_000_000_000_000_005, b"first frame".to_vec(), 15)
        );
        assert_eq!(got[1].0, 1_700_000_000_999_999_999);
        assert_eq!(got[2], (1_700_000_001_000_000_000, vec![7u8; 300], 304));
    }

    #[test]
    fn an_empty_block_has_no_frames() {
        let b = block(&[], 4096);
        assert_eq!(walk(&b).0, Walked::default());
    }

    /// Lengths and offsets from the ring are untrusted: every damage ends in a count, never a
    /// read outside the block.
    #[test]
    fn damaged_blocks_are_counted_not_read_out_of_bounds() {
        let good = block(&[(1, 0, b"aaaa"), (2, 0, b"bbbb"), (3, 0, b"cccc")], 1024);
        let set = |b: &mut Vec<u8>, at: usize, v: u32| {
            b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        };
        let first = 48;
        let step = (68 + 4usize).next_multiple_of(16);
        // snaplen past the block: that frame skipped, the walk goes on
        let mut b = good.clone();
        set(&mut b, first + frame::SNAPLEN, u32::MAX);
        assert_eq!(
            walk(&b).0,
            Walked {
                frames: 2,
                malformed: 1
            }
        );
        // tp_mac inside the header
        let mut b = good.clone();
        b[first + frame::MAC..first + frame::MAC + 2].copy_from_slice(&3u16.to_ne_bytes());
        assert_eq!(
            walk(&b).0,
            Walked {
                frames: 2,
                malformed: 1
            }
        );
        // next offset of 0 before the last frame: the rest is lost, counted
        let mut b = good.clone();
        set(&mut b, first + frame::NEXT, 0);
        assert_eq!(
            walk(&b).0,
            Walked {
                frames: 1,
                malformed: 2
            }
        );
        // next offset far past the block
        let mut b = good.clone();
        set(&mut b, first + step + frame::NEXT, u32::MAX - 10);
        assert_eq!(
            walk(&b).0,
            Walked {
                frames: 2,
                malformed: 1
            }
        );
        // more packets claimed than there are
        let mut b = good.clone();
        set(&mut b, block::NUM_PKTS, u32::MAX);
        let (w, got) = walk(&b);
        assert_eq!(got.len(), 3);
        assert_eq!(w.frames + w.malformed, u64::from(u32::MAX));
        // first packet offset inside the descriptor, or past the block
        let mut b = good.clone();
        set(&mut b, block::FIRST, 4);
        assert_eq!(
            walk(&b).0,
            Walked {
                frames: 0,
                malformed: 3
            }
        );
        let mut b = good.clone();
        set(&mut b, block::FIRST, u32::MAX);
        assert_eq!(
            walk(&b).0,
            Walked {
                frames: 0,
                malformed: 3
            }
        );
        // blk_len shorter than the frames: the block ends there
        let mut b = good.clone();
        set(&mut b, block::LEN, (first + step + 10) as u32);
        assert_eq!(
            walk(&b).0,
            Walked {
                frames: 1,
                malformed: 2
            }
        );
        // nanoseconds of a second or more
        let mut b = good.clone();
        set(&mut b, first + frame::NSEC, 1_000_000_000);
        assert_eq!(
            walk(&b).0,
            Walked {
                frames: 2,
                malformed: 1
            }
        );
        // a block shorter than its descriptor
        assert_eq!(
            walk(&good[..10]).0,
            Walked {
                frames: 0,
                malformed: 1
            }
        );
        assert_eq!(
            walk(&[]).0,
            Walked {
                frames: 0,
                malformed: 1
            }
        );
    }

    #[test]
    fn ring_sizes_are_checked() {
        assert!(RingOptions::default().check().is_ok());
        for bad in [
            RingOptions {
                block_bytes: 3000,
                ..Default::default()
            },
            RingOptions {
                block_bytes: 1024,
                ..Default::default()
            },
            RingOptions {
                ring_bytes: 1 << 19,
                ..Default::default()
            },
            RingOptions {
                ring_bytes: (1 << 20) + 1,
                ..Default::default()
            },
            RingOptions {
                retire_ms: 0,
                ..Default::default()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
