//! Whole numbers as the command line takes them: a number that is negative, too large for its
//! option or not a whole number is refused with a sentence saying which.

use std::num::IntErrorKind;

fn whole<T: TryFrom<u128>>(s: &str, max: u128) -> Result<T, String> {
    let t = s.trim().replace('_', "");
    if t.starts_with('-') && t[1..].chars().all(|c| c.is_ascii_digit()) && t.len() > 1 {
        return Err(format!(
            "'{s}' is negative: give a whole number from 0 to {max}"
        ));
    }
    let v: u128 = t
        .parse()
        .map_err(|e: std::num::ParseIntError| match e.kind() {
            IntErrorKind::PosOverflow => format!("'{s}' is too large: at most {max}"),
            _ => format!("'{s}' is not a whole number"),
        })?;
    if v > max {
        return Err(format!("'{s}' is too large: at most {max}"));
    }
    T::try_from(v).map_err(|_| format!("'{s}' is too large: at most {max}"))
}

/// A whole number from 0 to `u64::MAX`.
pub fn u64_arg(s: &str) -> Result<u64, String> {
    whole(s, u64::MAX.into())
}

/// A whole number from 0 to `usize::MAX`.
pub fn usize_arg(s: &str) -> Result<usize, String> {
    whole(s, usize::MAX as u128)
}

/// A whole number from 0 to `u32::MAX`.
pub fn u32_arg(s: &str) -> Result<u32, String> {
    whole(s, u32::MAX.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_why() {
        assert_eq!(u64_arg("42"), Ok(42));
        assert_eq!(u64_arg("1_000"), Ok(1000));
        assert!(u64_arg("-1").unwrap_err().contains("negative"));
        assert!(
            u64_arg("99999999999999999999")
                .unwrap_err()
                .contains("too large")
        );
        assert!(
            u64_arg("999999999999999999999999999999999999999999")
                .unwrap_err()
                .contains("too large")
        );
        assert!(u32_arg("4294967296").unwrap_err().contains("too large"));
        assert!(usize_arg("1.5").unwrap_err().contains("not a whole number"));
    }
}
