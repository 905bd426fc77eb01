//! Writing captures: nanosecond pcap (what tcpdump, Wireshark and every libpcap tool read) and
//! pcapng with one interface at nanosecond resolution.

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

/// A capture writer for one link type.
pub struct CaptureWriter<W: Write> {
    out: W,
    format: CaptureFormat,
    snaplen: u32,
    packets: u64,
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
                // Interface Description Block with if_tsresol = 9 (ns).
                let len = 20u32 + 8 + 4;
                let mut idb = Vec::with_capacity(len as usize);
                idb.extend_from_slice(&1u32.to_le_bytes());
                idb.extend_from_slice(&len.to_le_bytes());
                idb.extend_from_slice(&(linktype as u16).to_le_bytes());
                idb.extend_from_slice(&0u16.to_le_bytes());
                idb.extend_from_slice(&snaplen.to_le_bytes());
                idb.extend_from_slice(&9u16.to_le_bytes()); // if_tsresol
                idb.extend_from_slice(&1u16.to_le_bytes());
                idb.extend_from_slice(&[9, 0, 0, 0]);
                idb.extend_from_slice(&0u32.to_le_bytes()); // opt_endofopt
                idb.extend_from_slice(&len.to_le_bytes());
                out.write_all(&idb)?;
            }
        }
        Ok(CaptureWriter {
            out,
            format,
            snaplen,
            packets: 0,
        })
    }

    /// Write one packet captured at `ts_ns`, `orig_len` bytes long on the wire; `data` is cut to
    /// the snaplen.
    pub fn write_packet(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let data = &data[..data.len().min(self.snaplen as usize)];
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
                let mut h = [0u8; 28];
                h[0..4].copy_from_slice(&6u32.to_le_bytes());
                h[4..8].copy_from_slice(&len.to_le_bytes());
                // interface 0
                h[12..16].copy_from_slice(&((ts_ns >> 32) as u32).to_le_bytes());
                h[16..20].copy_from_slice(&(ts_ns as u32).to_le_bytes());
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
