//! What both observation points must agree on — intervals, method configuration, seeds — as
//! the command-line flags `owl compare` and `owl record` share.

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use owl_core::cut::{Cut, DEFAULT_DELIMITERS};
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
    /// How the two points cut their streams into intervals (both must use the same).
    #[arg(
        long,
        value_enum,
        default_value_t = CutRule::Delimiter,
        value_name = "RULE",
        long_help = "How the two points cut their streams into intervals (both points must use \
the same). delimiter (default): S cuts by its clock and names each interval's first 8 packets, \
its delimiters; R holds what it receives around each boundary (--cut-window: by default up to \
250 ms past it, set it above the path's largest delay) and cuts at the first of them it receives, so on a FIFO path both points' interval i holds the same packets \
(less losses, and packets reordered across the cut itself). A boundary none of whose \
delimiters reaches R within its window is cut by R's clock, and reported (the cuts check). \
clock: each point cuts by its own clock, as RDA does (§III-A): the packets in flight at a \
boundary are in S's interval and in R's next, which aggregate synopses (lda, mpe, countmin, \
...) cannot tell from real packets of the interval. Without --interval there is no boundary \
and both rules are the same."
    )]
    pub cut: CutRule,
    /// R's window for the delimiter cut: R holds what it receives from T/5 ahead of each
    /// boundary to T past it (its clock); a boundary none of whose delimiters arrives within it
    /// is cut by R's clock and reported [default: min(250ms, --horizon, 5/12 of --interval)
    /// past and min(10ms, 1/20 of --interval) ahead]. Set it above the path's largest delay.
    #[arg(long, value_parser = parse_duration_u64, value_name = "T")]
    pub cut_window: Option<u64>,
    /// Largest one-way delay accepted (plus reordering): the truth counts a later sighting
    /// lost and late, and methods that match packets (sample) leave out matches beyond it (both
    /// points must use the same).
    #[arg(long, default_value = "1s", value_parser = parse_duration_u64, value_name = "T")]
    pub horizon: u64,
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

/// The interval cuts `--cut` offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CutRule {
    /// S by its clock, R at S's delimiters.
    Delimiter,
    /// Each point by its own clock.
    Clock,
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
            cut: CutRule::Delimiter,
            cut_window: None,
            horizon: owl_core::pipeline::truth::DEFAULT_HORIZON_NS,
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

    /// The cut both points use for `intervals` (`--cut`, `--cut-window`).
    pub fn cut(&self, intervals: Intervals) -> Result<Cut> {
        match (self.cut, self.cut_window) {
            (CutRule::Clock, Some(_)) => {
                bail!("--cut-window sets the delimiter cut's window: drop it with --cut clock")
            }
            (CutRule::Clock, None) => Ok(Cut::Clock),
            (CutRule::Delimiter, None) => Ok(Cut::delimiter_fitted(intervals, self.horizon)),
            (CutRule::Delimiter, Some(w)) => {
                Ok(Cut::delimiter(w, DEFAULT_DELIMITERS as u64, intervals)?)
            }
        }
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
