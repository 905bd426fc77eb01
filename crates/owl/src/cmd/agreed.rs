//! What both observation points must agree on — intervals, method configuration, seeds — as
//! the command-line flags `owl compare` and `owl record` share.

use anyhow::Result;
use clap::Args;
use owl_core::interval::Intervals;
use owl_core::units::{parse_bytes, parse_duration_u64};
use owl_trace::identity::DEFAULT_IDENTITY_SEED;
use owl_trace::records::ReadOptions;

use crate::methods;

#[derive(Args, Clone, Debug)]
pub struct Agreed {
    /// Measurement interval T (e.g. 100ms, 1s); 0 = the whole capture is one interval.
    #[arg(long, default_value = "0", value_parser = parse_duration_u64, value_name = "T")]
    pub interval: u64,
    /// Agreed interval boundary t0, ns since the epoch: intervals start at t0 + kT for every
    /// integer k, so packets before t0 fall in the intervals before it (default: multiples of
    /// T since the epoch). Only t0's phase within T matters; reports number and time intervals
    /// from the epoch.
    #[arg(long, value_parser = crate::numbers::u64_arg, value_name = "NS")]
    pub origin_ns: Option<u64>,
    /// Synopsis budget per interval (e.g. 32KiB): sizes every method to the same bytes, so
    /// comparisons are fair.
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    pub memory: Option<u64>,
    /// Set one configuration field of a method, e.g. `lda:rows=1024`, `lda:targets=0.2`,
    /// `probe:rate_hz=10000` (repeatable; replaces that method's defaults and --memory).
    #[arg(long = "method-config", value_name = "METHOD:KEY=VALUE")]
    pub method_config: Vec<String>,
    /// Seed of the methods' hashes (both points must use the same).
    #[arg(long, value_parser = crate::numbers::u64_arg, default_value_t = 1)]
    pub seed: u64,
    /// Seed of the packet identity hash (both points must use the same).
    #[arg(long, value_parser = crate::numbers::u64_arg, default_value_t = DEFAULT_IDENTITY_SEED, value_name = "N")]
    pub identity_seed: u64,
    /// Identify each packet on at most its first N IP bytes (both points must use the same).
    #[arg(
        long,
        value_parser = identity_bytes_arg,
        value_name = "N",
        long_help = "Identify each packet on at most its first N bytes from the IP header on \
(both points must use the same). A packet's identity is a hash of the bytes routers do not \
change; a point whose snaplen cuts a packet hashes fewer of them, so two points that keep \
different numbers of bytes (another snaplen, or a longer link header: Ethernet 14 bytes, \
Linux SLL2 20) give a long packet two identities, and it counts lost at S and unexpected at \
R. Set N to what both keep: snaplen minus link header at the point that keeps less (tcpdump \
-s 128 on Ethernet keeps 114). compare finds it by itself for two captures it reads; record \
cannot (the points run apart), warns when the capture keeps fewer than N, and writes N into \
the file so that estimate refuses a pair recorded with different values. At least 40 (an \
IPv6 header); 64 or more also covers the transport header. Default: every captured byte."
    )]
    pub identity_bytes: Option<u32>,
}

/// Fewest IP bytes an identity may rest on: an IPv6 header.
const MIN_IDENTITY_BYTES: u32 = 40;

fn identity_bytes_arg(s: &str) -> Result<u32, String> {
    let n = crate::numbers::u32_arg(s)?;
    if n < MIN_IDENTITY_BYTES {
        return Err(format!(
            "{n} is too few: at least {MIN_IDENTITY_BYTES} (an IPv6 header), or packets of a flow would share identities"
        ));
    }
    Ok(n)
}

impl Agreed {
    /// The defaults, with a method seed.
    pub fn with_seed(seed: u64) -> Agreed {
        Agreed {
            interval: 0,
            origin_ns: None,
            memory: None,
            method_config: Vec::new(),
            seed,
            identity_seed: DEFAULT_IDENTITY_SEED,
            identity_bytes: None,
        }
    }

    /// The interval grid. `--origin-ns t0` only shifts the boundaries: the origin is reduced to
    /// its phase `t0 mod T`, so a packet before `t0` has an interval like any other instead of
    /// being dropped, and two points that agree on the grid agree on every interval's index.
    pub fn intervals(&self) -> Result<Intervals> {
        Ok(match self.origin_ns {
            None => Intervals::aligned(self.interval),
            Some(o) if self.interval > 0 => {
                Intervals::with_origin(self.interval, o % self.interval)?
            }
            Some(o) => Intervals::with_origin(self.interval, o)?,
        })
    }

    /// How each capture is read, for the identities both points agree on and the interface
    /// `interface` of the capture (`--interface`).
    pub fn read_options(&self, interface: Option<u32>) -> ReadOptions {
        ReadOptions {
            identity_seed: self.identity_seed,
            identity_bytes: self.identity_bytes,
            interface,
        }
    }

    pub fn options(&self) -> methods::Options {
        methods::Options {
            seed: self.seed,
            memory: self.memory,
        }
    }

    pub fn overrides(&self) -> Result<methods::Overrides> {
        methods::Overrides::parse(&self.method_config)
    }
}
