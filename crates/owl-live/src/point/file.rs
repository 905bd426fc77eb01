//! A point's configuration file (`owl agent --config FILE`, TOML): the point's capture, name,
//! listening port, collector and key, and its paths. Each path's measurement settings are the
//! agent's own options without their dashes (`interval = "1s"`, `memory = "4KiB"`,
//! `method_config = ["rda:banks=3"]`), in `[defaults]` for every path or in the path itself;
//! the command line parses them as it parses the flags, so a setting means one thing wherever
//! it is written.
//!
//! Checked up front, each mistake one error naming the path: a duplicate path, a path with no
//! or an unknown peer, a filter that does not parse, and two paths with the same peer and role
//! whose filters overlap (a packet of both would be measured twice on one connection).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use crate::filter::Filter;

/// Most paths one point measures.
pub const MAX_PATHS: usize = 256;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointFile {
    /// The point's name (handshakes, logs, the collector's `sender_point`/`receiver_point`).
    pub name: String,
    /// The shared key (`owl keygen`); `owl agent --key-file` gives it instead (a service
    /// manager's credential).
    pub key_file: Option<PathBuf>,
    /// Where senders of this point's receiver paths connect (one port for every path).
    pub listen: Option<String>,
    /// Receiver paths deliver their lines to this collector too.
    pub collector: Option<String>,
    pub collector_queue: Option<usize>,
    pub collector_patience: Option<String>,
    /// How long a sender path keeps trying to reach its receiver point, and how long a
    /// receiver path whose capture is done waits for a sender whose connection broke.
    pub connect_timeout: Option<String>,
    /// Peer points by name: `b = "10.0.0.2:7707"`; a path's `peer` may name one.
    #[serde(default)]
    pub peers: BTreeMap<String, String>,
    pub capture: CaptureSection,
    /// Measurement settings every path takes unless it gives its own.
    #[serde(default)]
    pub defaults: toml::Table,
    #[serde(default, rename = "path")]
    pub paths: Vec<PathSection>,
}

/// `[capture]`: the point's one capture, shared by every path.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureSection {
    pub replay: Option<PathBuf>,
    pub iface: Option<String>,
    /// A replay's pace: `max` or a factor of real time.
    pub speed: Option<String>,
    /// `afpacket` or `pcap`.
    pub capture: Option<String>,
    pub bpf: Option<String>,
    /// Only packets this selects reach any path (each path's filter applies after it).
    pub filter: Option<String>,
    pub duration: Option<String>,
    pub ring_size: Option<String>,
    pub ring_block: Option<String>,
    pub ring_timeout: Option<String>,
    /// Identity of packets: the same for every path (a frame is identified once).
    pub identity_seed: Option<u64>,
    pub identity_bytes: Option<u32>,
    /// Timestamp disorder tolerated before an interval closes.
    pub disorder: Option<String>,
}

/// One `[[path]]`.
#[derive(Debug, Deserialize)]
pub struct PathSection {
    pub name: String,
    /// `sender` or `receiver`: this point's role on the path.
    pub role: String,
    /// A sender path: the receiver point, `HOST:PORT` or a name from `[peers]`.
    pub peer: Option<String>,
    /// The path's packets at this point, e.g. `dst net 10.2.0.0/16` (both points of the path
    /// give the same).
    pub filter: Option<String>,
    /// The path's own measurement settings (over `[defaults]`).
    #[serde(flatten)]
    pub settings: toml::Table,
}

/// A path as checked: its role, its peer's address, its filter (the capture's and its own).
#[derive(Debug, Clone)]
pub struct CheckedPath {
    pub name: String,
    pub sender: bool,
    pub peer: Option<String>,
    pub filter: Option<Filter>,
    /// `[defaults]` overlaid with the path's own settings.
    pub settings: toml::Table,
}

/// Why a point's file is refused.
#[derive(Debug, thiserror::Error)]
pub enum PointFileError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

/// Settings a path cannot have: they are the point's (one capture, identified once).
const POINT_ONLY: [&str; 4] = ["identity_seed", "identity_bytes", "disorder", "key_file"];

impl PointFile {
    /// Read and parse `path` (not yet checked: [`PointFile::check`]).
    pub fn read(path: &std::path::Path) -> Result<PointFile, PointFileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PointFileError::Read {
            path: shown.clone(),
            source,
        })?;
        PointFile::parse(&text).map_err(|message| PointFileError::Syntax {
            path: shown,
            message,
        })
    }

    /// Parse TOML text; the error is the parser's, with its line and column.
    pub fn parse(text: &str) -> Result<PointFile, String> {
        toml::from_str(text).map_err(|e| e.to_string().trim_end().replace('\n', " "))
    }

    /// Check the whole file; every path, ready to build.
    pub fn check(&self) -> Result<Vec<CheckedPath>, PointFileError> {
        let bad = |m: String| Err(PointFileError::Invalid(m));
        if !valid_name(&self.name) {
            return bad(format!(
                "name '{}': a point's name is 1 to 64 letters, digits, '.', '-' or '_'",
                self.name
            ));
        }
        if self.paths.is_empty() {
            return bad("no [[path]]: a point measures at least one path".into());
        }
        if self.paths.len() > MAX_PATHS {
            return bad(format!(
                "{} paths (at most {MAX_PATHS} a point)",
                self.paths.len()
            ));
        }
        match (&self.capture.replay, &self.capture.iface) {
            (Some(_), None) | (None, Some(_)) => {}
            _ => return bad("[capture] needs exactly one of replay = FILE and iface = IF".into()),
        }
        for key in POINT_ONLY {
            if self.defaults.contains_key(key) {
                return bad(format!(
                    "[defaults] {key}: it is the point's (give it in [capture]: a frame is identified once for every path)"
                ));
            }
        }
        for (name, addr) in &self.peers {
            if !host_port(addr) {
                return bad(format!("[peers] {name} = '{addr}': give HOST:PORT"));
            }
        }
        for (key, addr) in [("listen", &self.listen), ("collector", &self.collector)] {
            if let Some(a) = addr
                && !host_port(a)
            {
                return bad(format!("{key} = '{a}': give HOST:PORT"));
            }
        }
        let capture_filter = match &self.capture.filter {
            Some(f) => Some(
                Filter::parse(f)
                    .map_err(|e| PointFileError::Invalid(format!("[capture] filter '{f}': {e}")))?,
            ),
            None => None,
        };
        let mut checked: Vec<CheckedPath> = Vec::new();
        let mut receivers = 0;
        for p in &self.paths {
            let at = |m: String| PointFileError::Invalid(format!("path {}: {m}", p.name));
            if !valid_name(&p.name) {
                return Err(at(
                    "a path's name is 1 to 64 letters, digits, '.', '-' or '_'".into(),
                ));
            }
            if checked.iter().any(|c| c.name == p.name) {
                return Err(at("a second path of that name".into()));
            }
            let sender = match p.role.as_str() {
                "sender" => true,
                "receiver" => false,
                r => {
                    return Err(at(format!(
                        "role '{r}': give sender or receiver (this point's role on the path)"
                    )));
                }
            };
            let peer = match (&p.peer, sender) {
                (None, true) => {
                    return Err(at(
                        "a sender path needs peer = \"HOST:PORT\" (or a name from [peers]): the receiver point".into(),
                    ));
                }
                (Some(_), false) => {
                    return Err(at(
                        "peer is for a sender path; a receiver path is served on the point's listen".into(),
                    ));
                }
                (None, false) => None,
                (Some(x), true) => Some(match self.peers.get(x) {
                    Some(addr) => addr.clone(),
                    None if host_port(x) => x.clone(),
                    None => {
                        let known: Vec<&str> = self.peers.keys().map(String::as_str).collect();
                        return Err(at(format!(
                            "peer '{x}' is unknown: give HOST:PORT or a name from [peers] ({})",
                            if known.is_empty() {
                                "there is none".to_string()
                            } else {
                                known.join(", ")
                            }
                        )));
                    }
                }),
            };
            for key in POINT_ONLY {
                if p.settings.contains_key(key) {
                    return Err(at(format!(
                        "{key} is the point's (give it in [capture]: a frame is identified once for every path)"
                    )));
                }
            }
            let own = match &p.filter {
                Some(f) => Some(Filter::parse(f).map_err(|e| at(format!("filter '{f}': {e}")))?),
                None => None,
            };
            let filter = match (&capture_filter, own) {
                (Some(c), Some(o)) => Some(Filter::And(Box::new(c.clone()), Box::new(o))),
                (c, o) => o.or_else(|| c.clone()),
            };
            let mut settings = self.defaults.clone();
            settings.extend(p.settings.clone());
            receivers += usize::from(!sender);
            checked.push(CheckedPath {
                name: p.name.clone(),
                sender,
                peer,
                filter,
                settings,
            });
        }
        // two paths on one connection's worth of peer and role must not share a packet
        for (i, a) in checked.iter().enumerate() {
            for b in &checked[..i] {
                if a.sender != b.sender || a.peer != b.peer {
                    continue;
                }
                // no filter: every packet
                let overlap = match (&a.filter, &b.filter) {
                    (Some(x), Some(y)) => x.may_overlap(y),
                    _ => true,
                };
                if overlap {
                    let with = match &a.peer {
                        Some(p) => format!("both send to {p}"),
                        None => "both are received here".to_string(),
                    };
                    return bad(format!(
                        "paths {} and {} {with} and their filters overlap ({} / {}): a packet of both would be measured twice; make the filters disjoint",
                        b.name,
                        a.name,
                        shown(&b.filter),
                        shown(&a.filter)
                    ));
                }
            }
        }
        if receivers > 0 && self.listen.is_none() {
            return bad(format!(
                "{receivers} receiver path(s) but no listen = \"HOST:PORT\" (where their senders connect)"
            ));
        }
        if receivers == 0 && self.listen.is_some() {
            return bad("listen is for receiver paths, and this point has none".into());
        }
        if receivers == 0 && self.collector.is_some() {
            return bad(
                "collector is for receiver paths (they deliver each path's results), and this point has none".into(),
            );
        }
        Ok(checked)
    }
}

fn shown(f: &Option<Filter>) -> String {
    f.as_ref()
        .map_or_else(|| "every packet".to_string(), ToString::to_string)
}

/// `HOST:PORT` (a name or an address, IPv6 in brackets), with a port number.
fn host_port(a: &str) -> bool {
    a.rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
}

fn valid_name(n: &str) -> bool {
    (1..=64).contains(&n.len())
        && n.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
}

/// A table of measurement settings as the agent's flags: `interval = "1s"` is `--interval 1s`,
/// `per_class = true` is `--per-class`, an array repeats the flag.
pub fn settings_args(t: &toml::Table) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    for (k, v) in t {
        let flag = format!("--{}", k.replace('_', "-"));
        let one = |v: &toml::Value| -> Result<String, String> {
            match v {
                toml::Value::String(s) => Ok(s.clone()),
                toml::Value::Integer(i) => Ok(i.to_string()),
                toml::Value::Float(x) => Ok(x.to_string()),
                other => Err(format!(
                    "{k}: give a string or a number, not {}",
                    other.type_str()
                )),
            }
        };
        match v {
            toml::Value::Boolean(true) => args.push(flag),
            toml::Value::Boolean(false) => {}
            toml::Value::Array(items) => {
                for i in items {
                    args.push(flag.clone());
                    args.push(one(i)?);
                }
            }
            v => {
                args.push(flag);
                args.push(one(v)?);
            }
        }
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREE: &str = r#"
name = "a"
key_file = "owl.key"
listen = "127.0.0.1:7707"

[peers]
b = "10.0.0.2:7707"

[capture]
replay = "a.pcap"

[defaults]
methods = "rda,lda"
interval = "1s"

[[path]]
name = "a-to-b"
role = "sender"
peer = "b"
filter = "dst net 10.2.0.0/16"

[[path]]
name = "a-to-b-2"
role = "sender"
peer = "b"
filter = "dst net 10.3.0.0/16"
interval = "500ms"

[[path]]
name = "c-to-a"
role = "receiver"
filter = "src net 10.3.0.0/16"
"#;

    fn with(edit: impl Fn(&str) -> String) -> Result<Vec<CheckedPath>, String> {
        PointFile::parse(&edit(THREE))?
            .check()
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_point_with_three_paths_reads() {
        let p = with(str::to_string).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].peer.as_deref(), Some("10.0.0.2:7707"));
        assert_eq!(p[1].settings["interval"].as_str(), Some("500ms"));
        assert_eq!(p[0].settings["interval"].as_str(), Some("1s"));
        assert_eq!(p[2].settings["methods"].as_str(), Some("rda,lda"));
        assert!(!p[2].sender && p[2].peer.is_none());
        let mut args = settings_args(&p[1].settings).unwrap();
        args.sort();
        assert_eq!(args, ["--interval", "--methods", "500ms", "rda,lda"]);
    }

    #[test]
    fn each_mistake_is_one_error_naming_it() {
        for (edit, want) in [
            (
                THREE.replace("name = \"a-to-b-2\"", "name = \"a-to-b\""),
                "path a-to-b: a second path of that name",
            ),
            (
                THREE.replace(
                    "peer = \"b\"\nfilter = \"dst net 10.3",
                    "peer = \"q\"\nfilter = \"dst net 10.3",
                ),
                "path a-to-b-2: peer 'q' is unknown: give HOST:PORT or a name from [peers] (b)",
            ),
            (
                THREE.replace("dst net 10.3.0.0/16", "dst nett 10.3.0.0/16"),
                "path a-to-b-2: filter 'dst nett 10.3.0.0/16'",
            ),
            (
                THREE.replace("dst net 10.3.0.0/16", "dst net 10.2.128.0/17"),
                "paths a-to-b and a-to-b-2 both send to 10.0.0.2:7707 and their filters overlap",
            ),
            (
                THREE.replace("filter = \"dst net 10.3.0.0/16\"\n", ""),
                "paths a-to-b and a-to-b-2 both send to 10.0.0.2:7707 and their filters overlap",
            ),
            (
                THREE.replace("listen = \"127.0.0.1:7707\"", "listen = \"127.0.0.1\""),
                "listen = '127.0.0.1': give HOST:PORT",
            ),
            (
                THREE.replace("b = \"10.0.0.2:7707\"", "b = \"10.0.0.2:77077\""),
                "[peers] b = '10.0.0.2:77077': give HOST:PORT",
            ),
            (
                THREE.replace("role = \"receiver\"", "role = \"recv\""),
                "path c-to-a: role 'recv': give sender or receiver",
            ),
            (
                THREE.replace("listen = \"127.0.0.1:7707\"\n", ""),
                "1 receiver path(s) but no listen",
            ),
            (
                THREE.replace("interval = \"500ms\"", "identity_seed = 3"),
                "path a-to-b-2: identity_seed is the point's",
            ),
            (
                THREE.replace(
                    "replay = \"a.pcap\"",
                    "replay = \"a.pcap\"\niface = \"eth0\"",
                ),
                "[capture] needs exactly one of replay = FILE and iface = IF",
            ),
        ] {
            let e = with(|_| edit.clone()).unwrap_err();
            assert!(e.contains(want), "{e}\nwanted: {want}");
        }
        // unknown keys are refused by the parser, with the line
        let e =
            PointFile::parse(&THREE.replace("[capture]", "[capture]\nifac = \"x\"")).unwrap_err();
        assert!(e.contains("ifac"), "{e}");
    }

    /// Paths to different peers may share packets (each gets them); so may a sender and a
    /// receiver path.
    #[test]
    fn overlap_matters_only_on_one_peer_and_role() {
        let p = with(|t| {
            t.replace(
                "peer = \"b\"\nfilter = \"dst net 10.3.0.0/16\"",
                "peer = \"10.0.0.3:7707\"\nfilter = \"dst net 10.2.0.0/16\"",
            )
        });
        assert!(p.is_ok(), "{p:?}");
    }
}
