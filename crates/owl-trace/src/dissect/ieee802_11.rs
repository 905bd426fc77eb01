//! IEEE 802.11 (Wi-Fi) data frames, bare (LINKTYPE_IEEE802_11) or behind a radiotap header
//! (LINKTYPE_IEEE802_11_RADIOTAP), down to the LLC/SNAP EtherType.
//!
//! What is read: data frames (type 2) whose subtype carries a frame body (Data, QoS Data and
//! the older Data+CF-Ack/Poll subtypes), unprotected and unfragmented, whose body is an
//! RFC 1042 LLC/SNAP header (`AA AA 03`, OUI `00 00 00`, or the 802.1H bridge-tunnel OUI
//! `00 00 F8`) with an EtherType, followed like Ethernet's ([`by_ethertype`]).
//!
//! Counted non-IP ([`Skip::NotIp`]), never errors, since none of them can be measured:
//! management, control and extension frames; Null and QoS Null (no body); protected
//! (encrypted) frames; fragments of an MSDU (owl does not reassemble); A-MSDUs (an aggregate
//! carries several packets in one frame, and a frame gives owl at most one record: they are
//! counted, not parsed); frames of another 802.11 protocol version; bodies that are not
//! LLC/SNAP (mesh control, other LLC); and, under radiotap, frames that failed their FCS check
//! (a damaged frame is not one the station took in: 802.11 sends it again).
//!
//! A header shorter than its type needs, a radiotap length outside the frame, or a radiotap
//! field past that length is [`Skip::Malformed`].

use super::{Framed, Link, Skip, by_ethertype};

/// Radiotap presence bits (radiotap.org, "Defined fields"): TSFT (u64, 8-aligned) and Flags
/// (u8), the first two fields; bit 31 says another presence word follows.
const PRESENT_TSFT: u32 = 1 << 0;
const PRESENT_FLAGS: u32 = 1 << 1;
const PRESENT_EXT: u32 = 1 << 31;

/// Radiotap Flags field bits (radiotap.org, "Flags").
const FLAG_DATA_PAD: u8 = 0x20;
const FLAG_FCS: u8 = 0x10;
const FLAG_BAD_FCS: u8 = 0x40;

/// The 802.11 frame check sequence: a CRC-32 after the frame body.
const FCS_LEN: usize = 4;

/// A radiotap header (radiotap.org, "Radiotap header": `it_version` 0, `it_pad`, `it_len`
/// little-endian, `it_present` and its extension words), then an 802.11 frame.
///
/// The header is skipped whole by `it_len`; only the Flags field is read, so the presence
/// words are walked only to find where fields begin. With the FCS flag set the last 4 bytes
/// are the FCS and are cut before the IP length checks (of the captured bytes: a frame the
/// snaplen cut loses 4 IP bytes, and is counted short); with the bad-FCS flag set the frame
/// is not IP.
pub(super) fn radiotap(f: &[u8]) -> Framed {
    let le32 = |o: usize| u32::from_le_bytes([f[o], f[o + 1], f[o + 2], f[o + 3]]);
    if f.len() < 8 {
        return Err(Skip::Malformed("truncated radiotap header"));
    }
    if f[0] != 0 {
        return Err(Skip::Malformed("radiotap version is not 0"));
    }
    let len = usize::from(u16::from_le_bytes([f[2], f[3]]));
    if len < 8 {
        return Err(Skip::Malformed("radiotap length below 8 bytes"));
    }
    if len > f.len() {
        return Err(Skip::Malformed("radiotap length past the captured frame"));
    }
    let present = le32(4);
    // fields start after the last presence word
    let mut fields = 8;
    let mut word = present;
    while word & PRESENT_EXT != 0 {
        if fields + 4 > len {
            return Err(Skip::Malformed(
                "radiotap presence words run past its length",
            ));
        }
        word = le32(fields);
        fields += 4;
    }
    let mut flags = 0;
    if present & PRESENT_FLAGS != 0 {
        // fields are aligned to their size from the start of the header
        let at = if present & PRESENT_TSFT != 0 {
            fields.next_multiple_of(8) + 8
        } else {
            fields
        };
        if at >= len {
            return Err(Skip::Malformed("radiotap Flags field past its length"));
        }
        flags = f[at];
    }
    if flags & FLAG_BAD_FCS != 0 {
        return Err(Skip::NotIp);
    }
    let end = if flags & FLAG_FCS != 0 {
        match f.len().checked_sub(FCS_LEN) {
            Some(e) if e >= len => e,
            _ => return Err(Skip::Malformed("802.11 frame shorter than its FCS")),
        }
    } else {
        f.len()
    };
    let (off, hint) = mac(&f[len..end], flags & FLAG_DATA_PAD != 0)?;
    Ok((len + off, hint, end))
}

/// Frame control (IEEE 802.11-2020 §9.2.4.1): type, subtype, and the flags byte.
const TYPE_DATA: u8 = 2;
/// Data subtypes (§9.2.4.1.3, Table 9-1): bit 3 (of the subtype) is QoS, bit 2 "no data"
/// (Null, QoS Null, CF-Poll/Ack without data).
const SUBTYPE_QOS: u8 = 0x8;
const SUBTYPE_NO_DATA: u8 = 0x4;
const TO_DS: u8 = 0x01;
const FROM_DS: u8 = 0x02;
const MORE_FRAGMENTS: u8 = 0x04;
const PROTECTED: u8 = 0x40;
/// +HTC/Order: on a QoS data frame, an HT Control field follows QoS Control (§9.2.4.1.10).
const ORDER: u8 = 0x80;
/// QoS Control bit 7: the body is an A-MSDU (§9.2.4.5.9).
const QOS_AMSDU: u8 = 0x80;

/// An 802.11 MAC frame (IEEE 802.11-2020 §9.2, "MAC frame formats"; data frames §9.3.2.1):
/// frame control, duration, three addresses (four when ToDS and FromDS are both set),
/// sequence control, QoS Control on QoS subtypes, HT Control on QoS frames with +HTC/Order,
/// then the body, 4-byte aligned when `pad` (radiotap's data-pad flag). The frame ends before
/// any FCS (the caller cut it).
pub(super) fn mac(f: &[u8], pad: bool) -> Link {
    let Some(&[fc0, fc1]) = f.get(..2) else {
        return Err(Skip::Malformed("truncated 802.11 frame control"));
    };
    let (version, kind, subtype) = (fc0 & 3, (fc0 >> 2) & 3, fc0 >> 4);
    if version != 0 || kind != TYPE_DATA || subtype & SUBTYPE_NO_DATA != 0 {
        return Err(Skip::NotIp);
    }
    if fc1 & PROTECTED != 0 {
        return Err(Skip::NotIp);
    }
    let qos = subtype & SUBTYPE_QOS != 0;
    let mut header = 24;
    if fc1 & (TO_DS | FROM_DS) == TO_DS | FROM_DS {
        header += 6; // Address 4 (WDS, mesh)
    }
    let qos_control = header;
    if qos {
        header += 2;
        if fc1 & ORDER != 0 {
            header += 4;
        }
    }
    if f.len() < header {
        return Err(Skip::Malformed("802.11 header shorter than its frame type"));
    }
    let fragment = f[22] & 0x0f; // sequence control's low 4 bits (§9.2.4.4)
    if fc1 & MORE_FRAGMENTS != 0 || fragment != 0 {
        return Err(Skip::NotIp);
    }
    if qos && f[qos_control] & QOS_AMSDU != 0 {
        return Err(Skip::NotIp);
    }
    if pad {
        header = header.next_multiple_of(4);
    }
    llc_snap(f, header)
}

/// An RFC 1042 LLC/SNAP header at `off` (DSAP and SSAP `AA`, UI control `03`, OUI
/// `00 00 00`; or 802.1H's bridge-tunnel OUI `00 00 F8`), then the EtherType's payload.
fn llc_snap(f: &[u8], off: usize) -> Link {
    match f.get(off..off + 8) {
        Some(&[0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00 | 0xf8, t0, t1]) => {
            by_ethertype(f, off + 8, u16::from_be_bytes([t0, t1]))
        }
        Some(_) => Err(Skip::NotIp),
        None => Err(Skip::Malformed("truncated LLC/SNAP header")),
    }
}
