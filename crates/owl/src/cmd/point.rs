//! `owl agent --config FILE`: one point, every path through it (the work is in
//! `owl_live::point`; the file's schema and checks in `owl_live::point::file`). A path's
//! settings and the point's capture are parsed by the same flags as a single pair's, so a
//! setting means one thing wherever it is written.

use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;
use owl_core::method::Role;
use owl_core::units::parse_duration_u64;
use owl_live::agent::AgentOptions;
use owl_live::capture::CaptureOptions;
use owl_live::collector::Reporter;
use owl_live::point::file::{PointFile, settings_args};
use owl_live::point::{PathEnd, PathSpec, Point, run_point};

use super::agent::{CaptureArgs, build_methods, read_key};
use super::agreed::Agreed;

/// A path's measurement settings: the single pair's flags that belong to a path.
#[derive(Parser, Debug)]
#[command(no_binary_name = true, disable_help_flag = true)]
struct PathSettings {
    #[arg(long, default_value = "rda,lda,lds")]
    methods: String,
    #[arg(long, default_value_t = 8)]
    queue: usize,
    #[arg(long)]
    per_class: bool,
    /// The path's label at the collector (default: its name).
    #[arg(long)]
    pair: Option<String>,
    #[command(flatten)]
    agreed: Agreed,
}

/// The point's capture, as `[capture]` gives it.
#[derive(Parser, Debug)]
#[command(no_binary_name = true, disable_help_flag = true)]
struct CaptureSettings {
    #[command(flatten)]
    capture: CaptureArgs,
}

/// clap's error for a setting of the file, on one line, without the usage.
fn setting_error(what: &str, e: &clap::Error) -> anyhow::Error {
    let text = e.to_string();
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim_start_matches("error: ");
    anyhow!(
        "{what}: {first} (a setting is the agent's option without its dashes, e.g. interval = \"1s\")"
    )
}

fn log(line: &str) {
    eprintln!("owl: agent: {line}");
}

fn duration(what: &str, v: &Option<String>, default: &str) -> Result<Duration> {
    let s = v.as_deref().unwrap_or(default);
    parse_duration_u64(s)
        .map(Duration::from_nanos)
        .map_err(|e| anyhow!("{what} = '{s}': {e}"))
}

/// A point file read, checked and turned into its paths' specifications; with `check`, the
/// interface, the key and the collectors are not opened.
struct Plan {
    f: PointFile,
    capture: CaptureArgs,
    input: owl_live::capture::Input,
    stop: Option<&'static std::sync::atomic::AtomicBool>,
    key: owl_live::key::Key,
    specs: Vec<PathSpec>,
    patience: Duration,
    collector_patience: Duration,
    point_log: Arc<dyn Fn(&str) + Send + Sync>,
}

fn plan(file: &Path, key_override: Option<&Path>, check: bool) -> Result<Plan> {
    let f = PointFile::read(file)?;
    let paths = f.check().map_err(|e| anyhow!("{}: {e}", file.display()))?;
    let at = |m: String| anyhow!("{}: {m}", file.display());
    // the capture: [capture]'s settings, as the flags
    let c = &f.capture;
    // paths in the file are relative to the file's directory (`-` stays standard input)
    let beside = |p: &Path| {
        if p.is_relative() && p != Path::new("-") {
            file.parent().unwrap_or(Path::new(".")).join(p)
        } else {
            p.to_path_buf()
        }
    };
    let mut args = Vec::new();
    for (flag, v) in [
        (
            "--replay",
            c.replay.as_ref().map(|p| beside(p).display().to_string()),
        ),
        ("--iface", c.iface.clone()),
        ("--speed", c.speed.clone()),
        ("--capture", c.capture.clone()),
        ("--bpf", c.bpf.clone()),
        ("--duration", c.duration.clone()),
        ("--ring-size", c.ring_size.clone()),
        ("--ring-block", c.ring_block.clone()),
        ("--ring-timeout", c.ring_timeout.clone()),
        ("--disorder", c.disorder.clone()),
    ] {
        if let Some(v) = v {
            args.push(flag.to_string());
            args.push(v);
        }
    }
    let capture = CaptureSettings::try_parse_from(&args)
        .map_err(|e| setting_error(&format!("{}: [capture]", file.display()), &e))?
        .capture;
    let key_file = match (key_override, &f.key_file) {
        (Some(k), _) => k.to_path_buf(),
        (None, Some(k)) => beside(k),
        (None, None) => {
            return Err(at(
                "no key_file (give key_file = \"FILE\", or --key-file FILE)".to_string(),
            ));
        }
    };
    // --check opens neither the interface nor the key: the file may be checked anywhere
    let (input, stop) = if check {
        (
            owl_live::capture::Input::Replay {
                path: Default::default(),
                speed: capture.speed,
            },
            None,
        )
    } else {
        capture.input().map_err(|e| at(format!("[capture]: {e}")))?
    };
    let key = if check {
        owl_live::key::Key::from_bytes([0; 32])
    } else {
        read_key(&key_file).with_context(|| format!("{}: key_file", file.display()))?
    };
    let patience =
        duration("connect_timeout", &f.connect_timeout, "30s").map_err(|e| at(e.to_string()))?;
    let collector_patience = duration("collector_patience", &f.collector_patience, "30s")
        .map_err(|e| at(e.to_string()))?;
    let point_log: Arc<dyn Fn(&str) + Send + Sync> = Arc::new(log);
    let mut specs = Vec::new();
    for p in &paths {
        let mut args =
            settings_args(&p.settings).map_err(|e| at(format!("path {}: {e}", p.name)))?;
        if let Some(s) = c.identity_seed {
            args.extend(["--identity-seed".to_string(), s.to_string()]);
        }
        if let Some(b) = c.identity_bytes {
            args.extend(["--identity-bytes".to_string(), b.to_string()]);
        }
        let s = PathSettings::try_parse_from(&args)
            .map_err(|e| setting_error(&format!("{}: path {}", file.display(), p.name), &e))?;
        if s.queue == 0 {
            return Err(at(format!("path {}: queue must be at least 1", p.name)));
        }
        let methods = build_methods(&s.methods, &s.agreed, s.per_class)
            .map_err(|e| at(format!("path {}: {e}", p.name)))?;
        if s.pair.is_some() && p.sender {
            return Err(at(format!(
                "path {}: pair is the label a receiver path delivers under; this point sends it",
                p.name
            )));
        }
        if s.per_class && p.sender {
            return Err(at(format!(
                "path {}: per_class is for a receiver path, where the delays are recovered",
                p.name
            )));
        }
        let intervals = s.agreed.intervals()?;
        let name = p.name.clone();
        let options = AgentOptions {
            methods,
            intervals,
            cut: s.agreed.cut(intervals)?,
            identity_seed: s.agreed.identity_seed,
            identity_bytes: s.agreed.identity_bytes,
            disorder_ns: capture.disorder,
            input: input.clone(),
            filter: p.filter.clone(),
            stop,
            duration: capture.duration.map(Duration::from_nanos),
            queue: s.queue,
            patience,
            key: key.clone(),
            name: f.name.clone(),
            path: p.name.clone(),
            per_class: s.per_class,
            log: Arc::new(move |l: &str| log(&format!("path {name}: {l}"))),
        };
        let collector = match (&f.collector, p.sender) {
            (Some(addr), false) if !check => Some((
                addr.clone(),
                Reporter::start(
                    addr.clone(),
                    key.clone(),
                    s.pair.clone().unwrap_or_else(|| p.name.clone()),
                    f.collector_queue.unwrap_or(10_000),
                    point_log.clone(),
                ),
            )),
            _ => None,
        };
        specs.push(PathSpec {
            name: p.name.clone(),
            role: if p.sender {
                Role::Sender
            } else {
                Role::Receiver
            },
            peer: p.peer.clone(),
            options,
            collector,
        });
    }
    if !check {
        capture
            .check_replay()
            .map_err(|e| at(format!("[capture]: {e}")))?;
    }
    Ok(Plan {
        f,
        capture,
        input,
        stop,
        key,
        specs,
        patience,
        collector_patience,
        point_log,
    })
}

pub fn run(file: &Path, key_override: Option<&Path>, check: bool) -> Result<()> {
    let Plan {
        f,
        capture,
        input,
        stop,
        key,
        specs,
        patience,
        collector_patience,
        point_log,
    } = plan(file, key_override, check)?;
    let at = |m: String| anyhow!("{}: {m}", file.display());
    let c = &f.capture;
    if check {
        for p in &specs {
            println!(
                "{}\t{}\t{}\t{}\t{}",
                p.name,
                if p.role == Role::Sender {
                    "sender"
                } else {
                    "receiver"
                },
                p.peer.as_deref().unwrap_or("-"),
                p.options
                    .filter
                    .as_ref()
                    .map_or_else(|| "every packet".to_string(), ToString::to_string),
                p.options
                    .methods
                    .iter()
                    .map(|m| m.name())
                    .collect::<Vec<_>>()
                    .join(",")
            );
        }
        log(&format!(
            "{}: point {}, {} paths: the file is good (the interface and the key were not opened)",
            file.display(),
            f.name,
            specs.len()
        ));
        return Ok(());
    }
    {
        let (file, key_override) = (file.to_path_buf(), key_override.map(Path::to_path_buf));
        super::hangup::go_on_after_hangup(
            move || {
                let now = match plan(&file, key_override.as_deref(), true) {
                    Ok(p) => format!(
                        "as it is now it checks ({} path{}): `systemctl restart` (or a restart \
                         by hand) applies it",
                        p.specs.len(),
                        if p.specs.len() == 1 { "" } else { "s" }
                    ),
                    Err(e) => format!("as it is now it does not check, fix it first: {e:#}"),
                };
                format!(
                    "SIGHUP: an agent reloads nothing; this one goes on with the paths it \
                     started with. {}: {now}",
                    file.display()
                )
            },
            log,
        );
    }
    let listener = match &f.listen {
        Some(addr) => {
            let l = TcpListener::bind(addr)
                .map_err(|e| at(format!("listen = '{addr}': cannot listen: {e}")))?;
            log(&format!("listening on {}", l.local_addr()?));
            Some(l)
        }
        None => None,
    };
    log(&format!(
        "point {}: {} paths ({})",
        f.name,
        specs.len(),
        specs
            .iter()
            .map(|s| format!(
                "{} as {}",
                s.name,
                if s.role == Role::Sender {
                    "sender"
                } else {
                    "receiver"
                }
            ))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let outcomes = run_point(
        Point {
            name: f.name.clone(),
            capture: CaptureOptions {
                input,
                stop,
                duration: capture.duration.map(Duration::from_nanos),
                disorder_ns: capture.disorder,
                identity_seed: c
                    .identity_seed
                    .unwrap_or(owl_trace::identity::DEFAULT_IDENTITY_SEED),
                identity_bytes: c.identity_bytes,
                log: point_log,
            },
            listener,
            key,
            paths: specs,
            patience,
            collector_patience,
        },
        Box::new(std::io::stdout()),
    );
    let mut failed = Vec::new();
    for o in &outcomes {
        match &o.result {
            Ok(PathEnd::Sent(s)) => log(&format!("path {}: done: {}", o.name, s.describe())),
            Ok(PathEnd::Received(s, delivery)) => {
                log(&format!(
                    "path {}: done: {} intervals estimated, {} missing, {}+{} left out (lead-in/out at S/R)",
                    o.name, s.intervals, s.missing, s.trimmed[0], s.trimmed[1]
                ));
                if let Some(d) = delivery
                    && (d.undelivered > 0 || d.dropped > 0)
                {
                    failed.push(format!(
                        "{}: {} result lines not delivered to the collector ({} dropped while it was unreachable)",
                        o.name,
                        d.undelivered + d.dropped,
                        d.dropped
                    ));
                }
            }
            Err(e) => failed.push(format!("{}: {e}", o.name)),
        }
    }
    if !failed.is_empty() {
        bail!(
            "{} of {} paths failed: {}",
            failed.len(),
            outcomes.len(),
            failed.join("; ")
        );
    }
    Ok(())
}
