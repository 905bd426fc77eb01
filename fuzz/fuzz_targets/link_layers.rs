//! Hostile frames through every link layer owl dissects (VLAN tags, MPLS label stacks, PPPoE,
//! PPP, Cisco HDLC, NFLOG TLVs, IPoIB, PKTAP, 802.11 and radiotap) and the identity hash, with and without an
//! identity byte limit: every outcome must be a packet or a counted skip, never a panic, and
//! what is dissected stays inside the frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use owl_trace::dissect::{dissect, supports_linktype};
use owl_trace::identity::{DEFAULT_IDENTITY_SEED, frame_identity_within};

const LINKTYPES: [u32; 19] = [
    0, 1, 9, 12, 14, 50, 101, 104, 108, 113, 219, 228, 229, 239, 242, 258, 276, 105, 127,
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, frame)) = data.split_first() else {
        return;
    };
    let lt = LINKTYPES[pick as usize % LINKTYPES.len()];
    assert!(supports_linktype(lt));
    if let Ok(d) = dissect(lt, frame) {
        assert!(d.ip_offset <= d.ip_end && d.ip_end <= frame.len());
        let _ = frame_identity_within(frame, &d, DEFAULT_IDENTITY_SEED, None);
        let _ = frame_identity_within(frame, &d, DEFAULT_IDENTITY_SEED, Some(u32::from(pick)));
    }
});
