//! `owl`: passive one-way latency measurement between two observation points.

#![deny(unsafe_code)]

/// `println!` that hands back the error of a closed standard output (`owl … | head`) instead of
/// panicking on it.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($t)*)
    }};
}

mod cmd;
mod colate;
mod experiment;
mod numbers;
mod store;

// The library's modules, named at the root as the commands and experiments name them.
use owl::{input, methods, progress, report};

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// `owl --help`: what owl is, naming the methods this build implements (from the registry).
fn about() -> String {
    let methods: Vec<&str> = methods::ALL
        .iter()
        .map(|m| m.name)
        .filter(|n| *n != methods::EXACT)
        .collect();
    format!(
        "Passive one-way latency measurement between two observation points.

owl turns what two observation points saw of the same traffic — a sender point S where packets
pass first and a receiver point R — into one-way delay (mean, spread, tails), loss, reordering
and duplication, without probes and without touching the packets. It runs the exact
store-everything method as ground truth beside compact synopses from the literature ({}) so
each can be judged on the same traffic.",
        methods.join(", ")
    )
}

const EXAMPLES: &str = "Examples:
  owl demo                                  simulate a small pair and compare on it
  owl simulate --out pair --packets 1M --loss uniform:0.01 --delay weibull-mean:200us:0.7
  owl compare pair/sender.pcap pair/receiver.pcap
  owl compare S.pcap R.pcap --interval 1s --json > report.json
  owl compare S.pcap R.pcap --unmatched lost/      # write what only one side saw
  owl record --method lda --role sender S.pcap -o S.owl    # at each point, then
  owl estimate S.owl R.owl                                 # where the files meet
  owl record --method colate --store S.db S.pcap           # COLATE: epochs, no intervals
  owl query --flow 'tcp 10.0.0.1 40000 10.0.0.2 443' S.db R.db

Run `owl <command> --help` for the details of each command.";

#[derive(Parser)]
#[command(name = "owl", version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("OWL_COMMIT"), ")"), about = about(), after_help = EXAMPLES, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Threads that run the methods and the exact truth: an interval's methods side by side,
    /// at each point and in the pair estimate, OPA's recovery within them, the truth beside
    /// them. The capture readers keep threads of their own. Results are the same on any
    /// number [default: every core]
    #[arg(long, global = true, value_name = "N")]
    threads: Option<usize>,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a small capture pair in a temporary directory and compare methods on it.
    Demo(cmd::demo::DemoArgs),
    /// Write a sender and a receiver capture of simulated traffic over a simulated path.
    Simulate(cmd::simulate::SimulateArgs),
    /// Measure one-way latency between two captures: exact truth and every method, side by side.
    Compare(cmd::compare::CompareArgs),
    /// Record one point's synopses (per interval) from its capture into a file.
    Record(cmd::record::RecordArgs),
    /// Turn a sender's and a receiver's synopsis files into estimates.
    Estimate(cmd::estimate::EstimateArgs),
    /// A flow's mean and std of delay between two points from their COLATE epoch stores.
    Query(cmd::query::QueryArgs),
    /// COLATE's parameter plan (§5) and epoch-store statistics.
    Colate(cmd::colate::ColateArgs),
    /// Regenerate a paper's evaluation on simulated traces (CSV + PNG).
    Experiment(experiment::ExperimentArgs),
    /// One observation point of a live measurement: exchange per-interval synopses with the other.
    Agent(cmd::agent::AgentArgs),
    /// Store the per-interval results of live agent pairs in an SQLite database.
    Collector(cmd::collector::CollectorArgs),
    /// Print the per-interval series a collector stored.
    Report(cmd::report::ReportArgs),
    /// Make the shared key of a live deployment (agents and collector).
    Keygen(cmd::keygen::KeygenArgs),
    /// Print the shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::install::CompletionsArgs),
    /// Write man pages: owl.1 and one per command.
    Manpages(cmd::install::ManpagesArgs),
}

/// The command line, with every option that takes a value accepting one that starts with `-`,
/// so a negative number or duration reaches its parser (which says what is wrong with it)
/// instead of being taken for an unknown option (with clap's tip to write `-- -1`, which would
/// be wrong here).
fn command_line() -> clap::Command {
    Cli::command().mut_subcommands(|sc| {
        sc.mut_args(|a| {
            if !a.is_positional() && a.get_action().takes_values() {
                a.allow_hyphen_values(true)
            } else {
                a
            }
        })
    })
}

/// A command-line error as one line: clap's first line without its tips, and where to look.
fn usage_error(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut first = lines
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string();
    // "the following required arguments were not provided:" lists them below
    if first.ends_with(':') {
        let names: Vec<&str> = lines
            .by_ref()
            .take_while(|l| l.starts_with('<') || l.starts_with("--"))
            .collect();
        first.push(' ');
        first.push_str(&names.join(", "));
    }
    // an invalid value: what would have been valid (clap's tips stay out: `-- --x` advice
    // misleads more than it helps)
    for l in lines {
        if let Some(v) = l.strip_prefix("[possible values: ") {
            first.push_str(&format!(" (valid: {})", v.trim_end_matches(']')));
        }
    }
    let cmd = std::env::args()
        .nth(1)
        .filter(|a| !a.starts_with('-'))
        .map(|a| format!(" {a}"))
        .unwrap_or_default();
    format!("{first} (see owl{cmd} --help)")
}

/// One line for an error and its causes, each said once (a cause whose text the line already
/// holds, as when an error prints its source, is not repeated).
fn one_line(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for c in e.chain() {
        let c = c.to_string();
        if msg.contains(&c) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&c);
    }
    msg
}

/// A closed standard output (`owl compare … | head`): the reader has what it wanted. The
/// error must be a broken pipe and standard output must be the pipe that broke: an agent's
/// connection that breaks is a broken pipe too, and was taken for this (the agent exited 0
/// without a word).
fn closed_pipe(e: &anyhow::Error) -> bool {
    stdout_gone()
        && e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
                || c.downcast_ref::<serde_json::Error>()
                    .and_then(|j| j.io_error_kind())
                    .is_some_and(|k| k == std::io::ErrorKind::BrokenPipe)
        })
}

/// Whether standard output's reader has gone: poll reports an error or a hang-up on it.
#[cfg(unix)]
#[allow(unsafe_code)]
fn stdout_gone() -> bool {
    let mut p = libc::pollfd {
        fd: 1,
        events: 0,
        revents: 0,
    };
    // SAFETY: one pollfd on the stack, its count given, no wait
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r > 0 && p.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

#[cfg(not(unix))]
fn stdout_gone() -> bool {
    true
}

/// Buffers of a million packets come and go with every interval; glibc raises its mmap
/// threshold to the largest block freed (up to 32 MiB), then serves such blocks from its heaps,
/// which keep them: a fixed 1 MiB threshold hands each back to the system when freed (`owl
/// compare` at 1 Mpps, 1 s intervals, 3 M packets: 1040 -> 809 MB peak RSS). The
/// environment's `MALLOC_MMAP_THRESHOLD_` or `GLIBC_TUNABLES` still decide if set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn return_large_buffers() {
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none()
        && std::env::var_os("GLIBC_TUNABLES").is_none()
    {
        // SAFETY: sets one allocator parameter, before any other thread exists
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn return_large_buffers() {}

fn main() -> ExitCode {
    return_large_buffers();
    let cli = match command_line()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    ExitCode::FAILURE
                }
                _ => {
                    eprintln!("owl: error: {}", usage_error(&e));
                    ExitCode::FAILURE
                }
            };
        }
    };
    if let Some(n) = cli.threads {
        if n == 0 {
            eprintln!("owl: error: --threads 0: give at least 1 (the default is every core)");
            return ExitCode::FAILURE;
        }
        if let Err(e) = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("owl-method-{i}"))
            .build_global()
        {
            eprintln!("owl: error: cannot start {n} method threads: {e}");
            return ExitCode::FAILURE;
        }
    }
    let result = match cli.command {
        Command::Demo(a) => cmd::demo::run(a),
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Record(a) => cmd::record::run(a),
        Command::Estimate(a) => cmd::estimate::run(a),
        Command::Query(a) => cmd::query::run(a),
        Command::Colate(a) => cmd::colate::run(a),
        Command::Experiment(a) => experiment::run(a),
        Command::Agent(a) => cmd::agent::run(a),
        Command::Collector(a) => cmd::collector::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Keygen(a) => cmd::keygen::run(a),
        Command::Completions(a) => cmd::install::completions(a, command_line()),
        Command::Manpages(a) => cmd::install::manpages(a, command_line()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if closed_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("owl: error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A broken pipe is a closed standard output only when standard output is the pipe that
    /// broke: here it is open (the test runner reads it), as it is for an agent whose
    /// connection to its peer broke.
    #[test]
    fn a_broken_connection_is_not_a_closed_standard_output() {
        let e = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing to the peer");
        assert!(!closed_pipe(&e));
    }
}
