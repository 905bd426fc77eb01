//! Durations and byte sizes as people type and read them.
//!
//! Durations: a number followed by `ns`, `us` (or `µs`), `ms`, `s`, `m` or `h`: `200ns`,
//! `1.5us`, `3ms`, `1s`. A bare `0` is accepted. Byte sizes: a number optionally followed by
//! `B`, `KB`/`MB`/`GB` (powers of 1000) or `KiB`/`MiB`/`GiB` (powers of 1024).

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum UnitError {
    #[error("'{0}' is not a duration: write a number and a unit, e.g. 200ns, 1.5us, 3ms, 1s")]
    Duration(String),
    #[error("'{0}' is not a byte size: write e.g. 4096, 64KiB, 1MB")]
    Bytes(String),
    #[error("'{0}' is out of range")]
    Range(String),
    #[error("'{0}' is negative: give a duration of 0 or more")]
    Negative(String),
    #[error("'{0}' is too long: at most about 292 years (9.2e18 ns)")]
    TooLong(String),
}

/// The number at the start of `s` (digits, sign, point, and an exponent such as `e30`) and the
/// rest, trimmed.
fn split_number(s: &str) -> (&str, &str) {
    let b = s.as_bytes();
    let mut end = 0;
    while end < b.len() {
        let c = b[end];
        let exponent = (c == b'e' || c == b'E')
            && end > 0
            && b[..end].iter().any(u8::is_ascii_digit)
            && b.get(end + 1).is_some_and(|&n| {
                n.is_ascii_digit()
                    || ((n == b'-' || n == b'+') && b.get(end + 2).is_some_and(u8::is_ascii_digit))
            });
        if !(c.is_ascii_digit() || c == b'.' || c == b'-' || c == b'+' || exponent) {
            break;
        }
        end += if exponent { 2 } else { 1 };
    }
    (&s[..end], s[end..].trim())
}

/// Parse a signed duration into nanoseconds (as `f64`, so `0.5ns` is representable for
/// models; callers round where they need integers).
pub fn parse_duration_ns(s: &str) -> Result<f64, UnitError> {
    let t = s.trim();
    let (num, unit) = split_number(t);
    let v: f64 = num.parse().map_err(|_| UnitError::Duration(s.into()))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "" if v == 0.0 => 1.0,
        _ => return Err(UnitError::Duration(s.into())),
    };
    let ns = v * scale;
    if !ns.is_finite() || ns.abs() > 9.2e18 {
        return Err(UnitError::TooLong(s.into()));
    }
    Ok(ns)
}

/// Parse a non-negative duration into whole nanoseconds.
pub fn parse_duration_u64(s: &str) -> Result<u64, UnitError> {
    let ns = parse_duration_ns(s)?;
    if ns < 0.0 {
        return Err(UnitError::Negative(s.into()));
    }
    Ok(ns.round() as u64)
}

/// Parse a byte size.
pub fn parse_bytes(s: &str) -> Result<u64, UnitError> {
    let t = s.trim();
    let (num, unit) = split_number(t);
    let v: f64 = num.parse().map_err(|_| UnitError::Bytes(s.into()))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(UnitError::Bytes(s.into())),
    };
    let b = v * scale;
    if !b.is_finite() || !(0.0..1.8e19).contains(&b) {
        return Err(UnitError::Range(s.into()));
    }
    Ok(b.round() as u64)
}

/// Format nanoseconds with a unit that keeps 3–4 significant digits: `187.3ns`, `12.41us`,
/// `3.002ms`, `1.500s`.
pub fn format_ns(ns: f64) -> String {
    if !ns.is_finite() {
        return format!("{ns}");
    }
    let a = ns.abs();
    let (v, u) = if a < 1e3 {
        (ns, "ns")
    } else if a < 1e6 {
        (ns / 1e3, "us")
    } else if a < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let av = v.abs();
    if u == "ns" && v.fract() == 0.0 {
        format!("{v}{u}")
    } else if av >= 100.0 {
        format!("{v:.1}{u}")
    } else if av >= 10.0 {
        format!("{v:.2}{u}")
    } else {
        format!("{v:.3}{u}")
    }
}

/// Format a byte count: `512B`, `16.0KiB`, `1.50MiB`.
pub fn format_bytes(b: u64) -> String {
    let f = b as f64;
    if b < 1024 {
        format!("{b}B")
    } else if f < 1024.0 * 1024.0 {
        format!("{:.1}KiB", f / 1024.0)
    } else if f < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}MiB", f / 1024.0 / 1024.0)
    } else {
        format!("{:.2}GiB", f / 1024.0 / 1024.0 / 1024.0)
    }
}

/// A timestamp as UTC, to the microsecond: `2026-01-01 00:00:00.000000`.
pub fn format_utc(ns: u64) -> String {
    format_utc_digits(ns, 6)
}

/// A timestamp as UTC, to the nanosecond: `2026-01-01 00:00:00.000000000`.
pub fn format_utc_ns(ns: u64) -> String {
    format_utc_digits(ns, 9)
}

/// A timestamp as UTC with `digits` (0 to 9) of the second's fraction.
fn format_utc_digits(ns: u64, digits: u32) -> String {
    let secs = ns / 1_000_000_000;
    let (days, sod) = (secs / 86_400, secs % 86_400);
    // civil from days (H. Hinnant's algorithm), days since 1970-01-01
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let digits = digits.min(9);
    let frac = ns % 1_000_000_000 / 10u64.pow(9 - digits);
    let frac = if digits == 0 {
        String::new()
    } else {
        format!(".{frac:0w$}", w = digits as usize)
    };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}{frac}",
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00.000000");
        assert_eq!(
            format_utc(1_767_225_600_000_000_000 + 1_500),
            "2026-01-01 00:00:00.000001"
        );
        assert_eq!(
            format_utc(951_782_400_000_000_000),
            "2000-02-29 00:00:00.000000"
        );
        assert_eq!(
            format_utc_ns(1_767_225_601_226_579_075),
            "2026-01-01 00:00:01.226579075"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("200ns"), Ok(200.0));
        assert_eq!(parse_duration_ns("1.5us"), Ok(1500.0));
        assert_eq!(parse_duration_ns("1.5µs"), Ok(1500.0));
        assert_eq!(parse_duration_ns("3ms"), Ok(3e6));
        assert_eq!(parse_duration_ns("-5us"), Ok(-5000.0));
        assert_eq!(parse_duration_ns("0"), Ok(0.0));
        assert_eq!(parse_duration_u64("1s"), Ok(1_000_000_000));
        assert!(parse_duration_ns("5").is_err());
        assert!(parse_duration_ns("fast").is_err());
        assert_eq!(parse_duration_ns("1e3us"), Ok(1e6));
        assert_eq!(parse_duration_ns("2.5E-3s"), Ok(2.5e6));
        // a unit after an exponent is a unit, and a too-large value says so
        assert_eq!(
            parse_duration_ns("1e30s"),
            Err(UnitError::TooLong("1e30s".into()))
        );
        assert_eq!(
            parse_duration_u64("-1s"),
            Err(UnitError::Negative("-1s".into()))
        );
        assert!(parse_duration_ns("1e").is_err());
    }

    #[test]
    fn bytes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64KiB"), Ok(65536));
        assert_eq!(parse_bytes("1MB"), Ok(1_000_000));
        assert_eq!(parse_bytes("1.5 kib"), Ok(1536));
        assert!(parse_bytes("-3").is_err());
        assert!(parse_bytes("lots").is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(format_ns(187.25), "187.2ns");
        assert_eq!(format_ns(12_410.0), "12.41us");
        assert_eq!(format_ns(3_002_000.0), "3.002ms");
        assert_eq!(format_ns(-1.5e9), "-1.500s");
        assert_eq!(format_ns(0.0), "0ns");
        assert_eq!(format_ns(12.0), "12ns");
        assert_eq!(format_bytes(512), "512B");
        assert_eq!(format_bytes(16 * 1024), "16.0KiB");
    }
}
