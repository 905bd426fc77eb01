//! Writing captures: nanosecond pcap (what tcpdump, Wireshark and every libpcap tool read) and
//! pcapng with one interface at nanosecond resolution, or several
//! ([`CaptureWriter::add_interface`]: link types, snaplens and timestamp resolutions of their
//! own, as `dumpcap -i a -i b` writes).

use std::io::{self, Write};

/// Output container.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CaptureFormat {
    /// pcap with the nanosecond magic `0xa1b23c4d`, little-endian.
    #[default]
    Pcap,
    /// pcapng, one section, one interface with `if_tsresol = 9`.
    Pcapng,
}

impl CaptureFormat {
    pub fn extension(self) -> &'static str {
        match self {
            CaptureFormat::Pcap => "pcap",
            CaptureFormat::Pcapng => "pcapng",
        }
    }
}

/// A capture writer (one link type, or with pcapng one per interface).
pub struct CaptureWriter<W: Write> {
    out: W,
    format: CaptureFormat,
    /// Per interface: snaplen and timestamp units per second's decimal exponent.
    interfaces: Vec<(u32, u8)>,
    packets: u64,
}

/// A pcapng Interface Description Block with `if_tsresol = 10^-exp`.
fn idb(linktype: u32, snaplen: u32, exp: u8) -> Vec<u8> {
    let len = 20u32 + 8 + 4;
    let mut idb = Vec::with_capacity(len as usize);
    idb.extend_from_slice(&1u32.to_le_bytes());
    idb.extend_from_slice(&len.to_le_bytes());
    idb.extend_from_slice(&(linktype as u16).to_le_bytes());
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&snaplen.to_le_bytes());
    idb.extend_from_slice(&9u16.to_le_bytes()); // if_tsresol
    idb.extend_from_slice(&1u16.to_le_bytes());
    idb.extend_from_slice(&[exp, 0, 0, 0]);
    idb.extend_from_slice(&0u32.to_le_bytes()); // opt_endofopt
    idb.extend_from_slice(&len.to_le_bytes());
    idb
}

impl<W: Write> CaptureWriter<W> {
    /// Write the file header. `snaplen` is recorded in the header; packets passed to
    /// [`write_packet`](Self::write_packet) are truncated to it.
    pub fn new(mut out: W, format: CaptureFormat, linktype: u32, snaplen: u32) -> io::Result<Self> {
        let snaplen = if snaplen == 0 { 262_144 } else { snaplen };
        match format {
            CaptureFormat::Pcap => {
                let mut h = [0u8; 24];
                h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
                h[4..6].copy_from_slice(&2u16.to_le_bytes());
                h[6..8].copy_from_slice(&4u16.to_le_bytes());
                h[16..20].copy_from_slice(&snaplen.to_le_bytes());
                h[20..24].copy_from_slice(&linktype.to_le_bytes());
                out.write_all(&h)?;
            }
            CaptureFormat::Pcapng => {
                // Section Header Block: no options, section length unknown (-1).
                let mut shb = Vec::with_capacity(28);
                shb.extend_from_slice(&0x0a0d_0d0au32.to_le_bytes());
                shb.extend_from_slice(&28u32.to_le_bytes());
                shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
                shb.extend_from_slice(&1u16.to_le_bytes());
                shb.extend_from_slice(&0u16.to_le_bytes());
                shb.extend_from_slice(&(-1i64).to_le_bytes());
                shb.extend_from_slice(&28u32.to_le_bytes());
                out.write_all(&shb)?;
                out.write_all(&idb(linktype, snaplen, 9))?;
            }
        }
        Ok(CaptureWriter {
            out,
            format,
            interfaces: vec![(snaplen, 9)],
            packets: 0,
        })
    }

    /// Describe another pcapng interface (its number is returned; the first is 0) of link type
    /// `linktype`, `snaplen` (0: 262 144) and timestamps in units of 10^-`exp` s (6: µs, 9:
    /// ns); write its packets with [`write_packet_on`](Self::write_packet_on). A pcap file has
    /// one interface only.
    pub fn add_interface(&mut self, linktype: u32, snaplen: u32, exp: u8) -> io::Result<u32> {
        if self.format != CaptureFormat::Pcapng || exp > 9 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "only pcapng holds several interfaces, with timestamps of 10^-9 s or coarser",
            ));
        }
        let snaplen = if snaplen == 0 { 262_144 } else { snaplen };
        self.out.write_all(&idb(linktype, snaplen, exp))?;
        self.interfaces.push((snaplen, exp));
        Ok(self.interfaces.len() as u32 - 1)
    }

    /// Write one packet captured at `ts_ns`, `orig_len` bytes long on the wire; `data` is cut to
    /// the snaplen.
    pub fn write_packet(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        self.write_packet_on(0, ts_ns, data, orig_len)
    }

    /// [`write_packet`](Self::write_packet) on pcapng interface `interface` (its timestamp cut
    /// to the interface's resolution).
    pub fn write_packet_on(
        &mut self,
        interface: u32,
        ts_ns: u64,
        data: &[u8],
        orig_len: u32,
    ) -> io::Result<()> {
        let Some(&(snaplen, exp)) = self.interfaces.get(interface as usize) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no interface {interface} described"),
            ));
        };
        let data = &data[..data.len().min(snaplen as usize)];
        let caplen = data.len() as u32;
        let orig_len = orig_len.max(caplen);
        match self.format {
            CaptureFormat::Pcap => {
                let sec = ts_ns / 1_000_000_000;
                if sec > u32::MAX as u64 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "timestamp beyond 2106 does not fit a pcap record",
                    ));
                }
                let mut h = [0u8; 16];
                h[0..4].copy_from_slice(&(sec as u32).to_le_bytes());
                h[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
                h[8..12].copy_from_slice(&caplen.to_le_bytes());
                h[12..16].copy_from_slice(&orig_len.to_le_bytes());
                self.out.write_all(&h)?;
                self.out.write_all(data)?;
            }
            CaptureFormat::Pcapng => {
                let pad = (4 - data.len() % 4) % 4;
                let len = 32 + data.len() as u32 + pad as u32;
                let ts = ts_ns / 10u64.pow(9 - u32::from(exp));
                let mut h = [0u8; 28];
                h[0..4].copy_from_slice(&6u32.to_le_bytes());
                h[4..8].copy_from_slice(&len.to_le_bytes());
                h[8..12].copy_from_slice(&interface.to_le_bytes());
                h[12..16].copy_from_slice(&((ts >> 32) as u32).to_le_bytes());
                h[16..20].copy_from_slice(&(ts as u32).to_le_bytes());
                h[20..24].copy_from_slice(&caplen.to_le_bytes());
                h[24..28].copy_from_slice(&orig_len.to_le_bytes());
                self.out.write_all(&h)?;
                self.out.write_all(data)?;
                self.out.write_all(&[0u8; 3][..pad])?;
                self.out.write_all(&len.to_le_bytes())?;
            }
        }
        self.packets += 1;
        Ok(())
    }

    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Push what is buffered to the underlying writer (and on, for a `BufWriter`).
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flush and return the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
