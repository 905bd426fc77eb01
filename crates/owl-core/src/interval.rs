//! The grid of pipelined measurement intervals (RDA §III-A, §VIII-A).
//!
//! Interval `i` is `[t0 + i·T, t0 + (i+1)·T)`, with `t0` agreed by both points (by default
//! `t0 = 0`, so intervals are aligned to multiples of `T` since the Unix epoch and any two points
//! with the same `T` agree without talking). S cuts its stream on this grid by its clock; R either
//! does the same (a clock cut: packets in flight at a boundary are then in interval `i` at S and
//! in `i + 1` at R) or cuts at S's delimiters ([`crate::cut`]), so that both hold the same
//! packets. `T = 0` means a single interval holding the whole capture.

use serde::{Deserialize, Serialize};
use thiserror::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intervals {
    /// Interval length `T` in nanoseconds; 0 means one interval over everything.
    pub length_ns: u64,
    /// Agreed origin `t0` in nanoseconds since the epoch.
    pub origin_ns: u64,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum IntervalError {
    #[error("interval origin {origin_ns} ns is set but the interval length is 0 (one interval)")]
    OriginWithoutLength { origin_ns: u64 },
}

impl Intervals {
    /// One interval over the whole capture.
    pub const WHOLE: Intervals = Intervals {
        length_ns: 0,
        origin_ns: 0,
    };

    /// Intervals of `length_ns`, aligned to multiples of the length since the epoch.
    pub fn aligned(length_ns: u64) -> Intervals {
        Intervals {
            length_ns,
            origin_ns: 0,
        }
    }

    /// Intervals of `length_ns` starting at an agreed origin.
    pub fn with_origin(length_ns: u64, origin_ns: u64) -> Result<Intervals, IntervalError> {
        if length_ns == 0 && origin_ns != 0 {
            return Err(IntervalError::OriginWithoutLength { origin_ns });
        }
        Ok(Intervals {
            length_ns,
            origin_ns,
        })
    }

    pub fn is_whole(&self) -> bool {
        self.length_ns == 0
    }

    /// Index of the interval holding `ts_ns`, or `None` for a packet before the origin (it
    /// belongs to no agreed interval and is not measured).
    #[inline]
    pub fn index(&self, ts_ns: u64) -> Option<u64> {
        if self.length_ns == 0 {
            return Some(0);
        }
        ts_ns
            .checked_sub(self.origin_ns)
            .map(|d| d / self.length_ns)
    }

    /// Start time of interval `index` (0 for the single whole interval).
    pub fn start_ns(&self, index: u64) -> u64 {
        self.origin_ns
            .saturating_add(index.saturating_mul(self.length_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_cutting() {
        let iv = Intervals::aligned(1_000);
        assert_eq!(iv.index(0), Some(0));
        assert_eq!(iv.index(999), Some(0));
        assert_eq!(iv.index(1_000), Some(1));
        assert_eq!(iv.start_ns(3), 3_000);
    }

    #[test]
    fn origin_and_whole() {
        let iv = Intervals::with_origin(100, 50).unwrap();
        assert_eq!(iv.index(49), None);
        assert_eq!(iv.index(50), Some(0));
        assert_eq!(iv.index(150), Some(1));
        assert_eq!(Intervals::WHOLE.index(u64::MAX), Some(0));
        assert!(Intervals::with_origin(0, 5).is_err());
    }
}
