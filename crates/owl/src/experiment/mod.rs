//! `owl experiment NAME`: the papers' evaluations, regenerated on simulated traces.
//!
//! Every experiment writes a CSV (one row per point and run, so anyone can re-plot it) and a
//! PNG (log axes where the paper uses them) into `--out` (default `out/experiments/NAME`),
//! prints where they are, and shows progress on a terminal. `--quick` shrinks the traces and
//! the run count so the whole experiment takes seconds (CI uses it); the full size is the
//! paper's setup.

pub mod colate;
pub mod intervals;
pub mod lda;
pub mod lda_std;
pub mod lds;
pub mod opa;
pub mod plot;
pub mod rda;
pub mod tails;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::ProgressBar;

pub use plot::{Panel, Series, plot_png};

/// Everything an experiment needs from the command line.
pub struct Ctx {
    /// Directory the experiment writes into (created).
    pub out_dir: PathBuf,
    /// Small, fast version for CI and a first look.
    pub quick: bool,
    /// Runs (seeds) per point; `None` means the experiment's own default (the paper's).
    pub runs: Option<usize>,
    /// Base seed: run `i` of a point uses seeds derived from `seed + i`.
    pub seed: u64,
    /// Progress bar (hidden off a terminal); experiments set its length and advance it.
    pub progress: ProgressBar,
}

impl Ctx {
    /// Path of an output file in the experiment's directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.out_dir.join(name)
    }
    /// The run count: `--runs`, else `quick` in quick mode, else `full`.
    pub fn runs_or(&self, full: usize, quick: usize) -> usize {
        self.runs.unwrap_or(if self.quick { quick } else { full })
    }
}

/// An experiment: a name, what it regenerates, and how.
pub struct Experiment {
    pub name: &'static str,
    pub summary: &'static str,
    /// The files it writes into its directory.
    pub files: &'static str,
    pub run: fn(&Ctx) -> Result<Vec<PathBuf>>,
}

/// Every experiment owl knows, in the order `owl experiment --list` prints them.
pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: "lda-loss",
        summary: "LDA Fig. 4: mean/std relative error vs loss, Weibull 0.6-0.8 and Pareto 3-5, one bank of 1024 tuned to the loss",
        files: "lda-loss.csv, lda-loss-summary.csv, lda-loss.png",
        run: lda::run_loss,
    },
    Experiment {
        name: "lda-banks",
        summary: "LDA Fig. 5: 2/3/4-bank LDAs of 1024 counters vs the tuned single bank over loss rates",
        files: "lda-banks.csv, lda-banks-summary.csv, lda-banks.png",
        run: lda::run_banks,
    },
    Experiment {
        name: "lda-vs-probes",
        summary: "LDA Fig. 6: two-bank LDA vs Poisson probes at 1/7/144/10000 Hz under loss episodes",
        files: "lda-vs-probes.csv, lda-vs-probes-summary.csv, lda-vs-probes.png",
        run: lda::run_vs_probes,
    },
    Experiment {
        name: "lda-std",
        summary: "LDA std estimators (paper / centred / rows) vs mean/std 0.3-1000 and loss 0-20 %, default 2 x 512 rows, 500 k packets; 95 % interval coverage",
        files: "lda-std.csv, lda-std-summary.csv, lda-std-coverage.csv, lda-std.png",
        run: lda_std::run,
    },
    Experiment {
        name: "lds-accuracy",
        summary: "LDS Fig. 9/10: per-flow relative error by flow size, LDS vs MPE, RLI, aggregate mean; paper-like and queues-only paths, base-delay sweep",
        files: "lds-accuracy.csv, lds-accuracy-cdf.csv, lds-accuracy-sweep.csv, lds-accuracy-{paper-like,queues-only}.png, lds-accuracy-bins-{paper-like,queues-only}.png, lds-accuracy-sweep.png",
        run: lds::accuracy,
    },
    Experiment {
        name: "lds-loss",
        summary: "LDS Fig. 11: multi-bank (as written, densest row) vs single-bank LDS under 0.1/0.5/1% uniform loss, both paths",
        files: "lds-loss.csv, lds-loss-cdf.csv, lds-loss-{paper-like,queues-only}.png, lds-loss-100-{paper-like,queues-only}.png",
        run: lds::loss,
    },
    Experiment {
        name: "lds-weights",
        summary: "LDS Fig. 12: gold/silver/bronze flow weights on 40 000 and 100 000 cells, both paths",
        files: "lds-weights.csv, lds-weights-cdf.csv, lds-weights-{40000,100000}-{paper-like,queues-only}.png",
        run: lds::weights,
    },
    rda::SET_DIFFERENCE,
    rda::DECODE_TIME,
    Experiment {
        name: "colate-reliability",
        summary: "COLATE Fig. 6/8: CDF of observed beta (mean) and std error, low/medium/high at 1/10/100 MiB, one link and the triangle; fraction of covered flows within beta vs alpha",
        files: "colate-reliability.csv, colate-reliability-cdf.csv, colate-reliability.png",
        run: colate::reliability,
    },
    Experiment {
        name: "colate-std",
        summary: "COLATE Fig. 7/9: flows with std error < 5 % vs virtual repetitions (1 .. 1e5 and the closed-form limit), medium 10 MiB, two paths",
        files: "colate-std.csv, colate-std-cdf.csv, colate-std.png",
        run: colate::std,
    },
    Experiment {
        name: "colate-chic",
        summary: "COLATE at the paper's scale: the CHIC-like trace (124k packets/s, 100 s, 12.4M packets, 1.0M flows) through §6.1's RED queue, lossless and lossy, medium plan at 1/10/100 MiB: per flow-size bin, means within 5 %, owl's std and its interval, bits per packet",
        files: "colate-chic.csv",
        run: colate::chic,
    },
    Experiment {
        name: "colate-bits",
        summary: "COLATE §1.4's storage claim at its own 484k packets/s (45 s): stored bits per packet at 1/10/100 MiB (high, medium), 1 us and 1 ms units, Rice-coded (default) and in fixed cells, and what the coarse unit costs per flow-size bin",
        files: "colate-bits.csv, colate-bits-accuracy.csv",
        run: colate::bits,
    },
    Experiment {
        name: "colate-loss",
        summary: "COLATE on a lossy path (0.1 % and 1 %): flows estimated, from some counters only, and their error, one vector vs sampling vectors, both estimators",
        files: "colate-loss.csv",
        run: colate::loss,
    },
    Experiment {
        name: "colate-storage",
        summary: "COLATE Fig. 10: stored bits per packet at 1/10/100 MiB (high), timestamp unit 1 us .. 1 ms, measured and at the 484 kpps CAIDA link; what the unit costs",
        files: "colate-storage.csv, colate-storage.png",
        run: colate::storage,
    },
    Experiment {
        name: "colate-vs",
        summary: "COLATE Fig. 11 / §6.5: CDF of observed beta, COLATE (high, 10 MiB) vs RLI 1:300-1:10 and 1:10-1:2 vs Count-Min in 10 MiB",
        files: "colate-vs.csv, colate-vs-cdf.csv, colate-vs.png",
        run: colate::versus,
    },
    colate::QUERY_TIME,
    opa::GROUPS,
    opa::PER_PACKET,
    opa::VERSUS,
    tails::TAILS,
    Experiment {
        name: "intervals",
        summary: "every method per interval against the interval's truth, delimiter vs clock cuts: FIFO paths, 50 ms-1 s intervals, 0-1 % loss, delays 2 us-10 ms; error and bound coverage",
        files: "intervals.csv, intervals-summary.csv",
        run: intervals::run,
    },
];

/// The help after the options: the files each experiment writes, and examples.
fn after_help() -> String {
    let mut s = String::from(
        "Each experiment writes CSV files (every point and run, to re-plot; *-summary.csv and \
*-cdf.csv aggregate them) and PNG figures (the paper's) into --out, default \
out/experiments/NAME. --quick is a small version for CI and a first look; without it the \
experiment uses the paper's setup and can take minutes.\n\nFiles:\n",
    );
    for e in EXPERIMENTS {
        s.push_str(&format!("  {:<20} {}\n", e.name, e.files));
    }
    s.push_str(
        "\nExamples:\n  owl experiment --list\n  owl experiment lda-loss --quick\n  \
owl experiment lds-accuracy --runs 5 --seed 7 --out results/lds",
    );
    s
}

#[derive(Args, Clone, Debug)]
#[command(after_help = after_help())]
pub struct ExperimentArgs {
    /// Experiment to run (`--list` shows them all).
    #[arg(required_unless_present = "list")]
    pub name: Option<String>,
    /// List the experiments.
    #[arg(long)]
    pub list: bool,
    /// Small traces and few runs: seconds instead of minutes.
    #[arg(long)]
    pub quick: bool,
    /// Runs per point (default: the paper's, or 3 with --quick).
    #[arg(long, value_parser = crate::numbers::usize_arg)]
    pub runs: Option<usize>,
    /// Base seed.
    #[arg(long, value_parser = crate::numbers::u64_arg, default_value_t = 1)]
    pub seed: u64,
    /// Output directory (default out/experiments/NAME).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn run(a: ExperimentArgs) -> Result<()> {
    if a.list || a.name.is_none() {
        for e in EXPERIMENTS {
            say!("{:<22} {}", e.name, e.summary)?;
        }
        return Ok(());
    }
    let name = a.name.unwrap();
    let Some(e) = EXPERIMENTS.iter().find(|e| e.name == name) else {
        bail!(
            "unknown experiment '{name}'; available: {}",
            EXPERIMENTS
                .iter()
                .map(|e| e.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    if a.runs == Some(0) {
        bail!("--runs must be at least 1");
    }
    let out_dir = a
        .out
        .unwrap_or_else(|| Path::new("out").join("experiments").join(e.name));
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("{}: cannot create", out_dir.display()))?;
    let ctx = Ctx {
        out_dir,
        quick: a.quick,
        runs: a.runs,
        seed: a.seed,
        progress: crate::progress::bar(0, e.name, false),
    };
    let files = (e.run)(&ctx)?;
    ctx.progress.finish_and_clear();
    for f in files {
        say!("wrote {}", f.display())?;
    }
    Ok(())
}

/// Write a CSV with a header row.
pub fn write_csv(path: &Path, header: &[&str], rows: &[Vec<String>]) -> Result<()> {
    let mut w = csv::Writer::from_path(path).with_context(|| format!("{}", path.display()))?;
    w.write_record(header)?;
    for r in rows {
        w.write_record(r)?;
    }
    w.flush()?;
    Ok(())
}

/// Bounded reordering of R's arrival order, as the OPA paper adds it (§VII-A): walking the
/// packets in order, each is overtaken with probability `rate` by the 1 to 3 packets after it
/// (the timestamps stay, so the delays are unchanged), and the walk goes on past them.
pub fn overtake(receiver: &mut [owl_core::PacketRecord], rate: f64, rng: &mut rand_pcg::Pcg64) {
    use rand::RngExt;
    let mut i = 0;
    while rate > 0.0 && i + 4 < receiver.len() {
        if rng.random_bool(rate) {
            let by = rng.random_range(1..=3usize);
            receiver[i..=i + by].rotate_left(1);
            i += by + 1;
        } else {
            i += 1;
        }
    }
}

/// Mean and the half-width of a 95 % confidence interval (Student t) of a sample.
pub fn mean_ci95(xs: &[f64]) -> (f64, f64) {
    let n = xs.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let m = xs.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (m, 0.0);
    }
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
    // two-sided 97.5 % quantiles of Student's t for 1..30 degrees of freedom, then normal
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    let t = if n - 1 <= 30 { T[n - 2] } else { 1.96 };
    (m, t * (var / n as f64).sqrt())
}

/// What the experiments' tests share: a quick context writing into a temporary directory, and
/// reading back a CSV an experiment wrote.
#[cfg(test)]
pub(crate) mod testing {
    use super::Ctx;
    use std::path::Path;

    /// `--quick`, default runs, seed 1, no progress bar, writing into `dir`.
    pub fn quick_ctx(dir: &Path) -> Ctx {
        Ctx {
            out_dir: dir.to_path_buf(),
            quick: true,
            runs: None,
            seed: 1,
            progress: indicatif::ProgressBar::hidden(),
        }
    }

    /// The data rows of a CSV file (header skipped).
    pub fn csv_rows(p: &Path) -> Vec<csv::StringRecord> {
        csv::Reader::from_path(p)
            .unwrap()
            .records()
            .map(|r| r.unwrap())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_of_known_sample() {
        let (m, h) = mean_ci95(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(m, 3.0);
        // sd = 1.5811, se = 0.7071, t(4) = 2.776
        assert!((h - 2.776 * std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-4);
        assert_eq!(mean_ci95(&[7.0]), (7.0, 0.0));
    }

    #[test]
    fn plot_and_csv_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.png");
        let panel = Panel {
            title: "test".into(),
            x_label: "loss rate".into(),
            y_label: "relative error".into(),
            log_x: true,
            log_y: true,
            series: vec![Series {
                name: "a".into(),
                points: vec![(0.001, 0.01), (0.01, 0.02), (0.1, 0.5)],
                err: Some(vec![(0.005, 0.02), (0.01, 0.03), (0.3, 0.7)]),
            }],
        };
        plot_png(&p, &[panel.clone(), panel]).unwrap();
        assert!(std::fs::metadata(&p).unwrap().len() > 1000);
        let c = dir.path().join("x.csv");
        write_csv(&c, &["a", "b"], &[vec!["1".into(), "2".into()]]).unwrap();
        assert_eq!(std::fs::read_to_string(&c).unwrap(), "a,b\n1,2\n");
    }
}
