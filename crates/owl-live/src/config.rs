//! What both agents must agree on before any synopsis crosses: the interval grid, the identity
//! seed, and the methods with their configurations — the fields a synopsis file's header holds
//! (`owl record`), compared by the same check ([`SynopsisFile::check_pair`]), so a mismatch is
//! refused naming the field that differs, as `owl estimate` does for two files.

use std::sync::Arc;

use owl_core::cut::Cut;
use owl_core::interval::Intervals;
use owl_core::method::{Method, Role};
use owl_core::wire::{DecodeError, SynopsisFile, WireReader, WireWriter};

/// Most methods one agent runs.
pub const MAX_METHODS: usize = 64;
/// Most configuration fields of one method.
pub const MAX_FIELDS: usize = 4096;

/// One agent's measurement configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentConfig {
    pub intervals: Intervals,
    pub identity_seed: u64,
    /// `--identity-bytes`: packets are identified on their first this many IP bytes; `None`:
    /// on every captured byte.
    pub identity_bytes: Option<u32>,
    /// Each method's name and configuration fields, in the agent's order.
    pub methods: Vec<(String, Vec<(String, String)>)>,
    /// The `--filter` in canonical text ([`crate::filter::Filter`]'s `Display`); empty: every
    /// packet. Two points measuring different packets would report the difference as loss.
    pub filter: String,
    /// The `--bpf` pre-filter (libpcap's expression text as given); empty: none. The kernel
    /// applies it before owl sees a frame, so both points must give the same one.
    pub bpf: String,
    /// How both points cut intervals (`--cut`, `--cut-window`).
    pub cut: Cut,
    /// The path this configuration measures (a point's `[[path]]` name; empty: the single
    /// pair of `--role`). A receiver point serves each sender the path it names.
    pub path: String,
}

impl AgentConfig {
    pub fn of(
        methods: &[Arc<dyn Method>],
        intervals: Intervals,
        identity_seed: u64,
        identity_bytes: Option<u32>,
        filter: Option<&crate::filter::Filter>,
        bpf: Option<&str>,
        cut: Cut,
    ) -> AgentConfig {
        AgentConfig {
            cut,
            path: String::new(),
            intervals,
            identity_seed,
            identity_bytes,
            filter: filter.map(ToString::to_string).unwrap_or_default(),
            bpf: bpf.unwrap_or_default().to_string(),
            methods: methods
                .iter()
                .map(|m| {
                    let c = m
                        .config()
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect();
                    (m.name().to_string(), c)
                })
                .collect(),
        }
    }

    /// The configuration of path `path` (empty: the single pair).
    pub fn on_path(mut self, path: &str) -> AgentConfig {
        self.path = path.to_string();
        self
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        let mut w = WireWriter::new(&mut b);
        w.u64(self.intervals.length_ns);
        w.u64(self.intervals.origin_ns);
        w.u64(self.identity_seed);
        w.u32(self.identity_bytes.unwrap_or(0));
        w.u16(self.methods.len() as u16);
        for (name, fields) in &self.methods {
            w.str(name);
            w.u32(fields.len() as u32);
            for (k, v) in fields {
                w.str(k);
                w.str(v);
            }
        }
        w.str(&self.filter);
        w.str(&self.bpf);
        let cut = self.cut.pairs();
        w.u16(cut.len() as u16);
        for (k, v) in cut {
            w.str(k);
            w.str(&v);
        }
        w.str(&self.path);
        b
    }

    pub fn decode(b: &[u8]) -> Result<AgentConfig, DecodeError> {
        let mut r = WireReader::new(b);
        let length_ns = r.u64("interval length")?;
        let origin_ns = r.u64("interval origin")?;
        let identity_seed = r.u64("identity seed")?;
        let identity_bytes = Some(r.u32("identity bytes")?).filter(|&n| n != 0);
        let n = r.u16("method count")? as usize;
        if n > MAX_METHODS {
            return Err(r.invalid(format!("{n} methods (at most {MAX_METHODS})")));
        }
        let mut methods = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.str("method name")?;
            let k = r.u32("configuration size")? as usize;
            if k > MAX_FIELDS {
                return Err(r.invalid(format!("{k} configuration fields (at most {MAX_FIELDS})")));
            }
            let mut fields = Vec::with_capacity(k.min(r.remaining() / 4));
            for _ in 0..k {
                fields.push((r.str("configuration field")?, r.str("configuration value")?));
            }
            methods.push((name, fields));
        }
        let filter = r.str("filter")?;
        let bpf = r.str("bpf")?;
        let n = r.u16("cut fields")? as usize;
        if n > 16 {
            return Err(r.invalid(format!("{n} cut fields (at most 16)")));
        }
        let mut cut = Vec::with_capacity(n);
        for _ in 0..n {
            cut.push((r.str("cut field")?, r.str("cut value")?));
        }
        let cut = Cut::from_pairs(&cut).map_err(|e| r.invalid(e))?;
        let path = r.str("path")?;
        r.finish("configuration")?;
        Ok(AgentConfig {
            intervals: Intervals {
                length_ns,
                origin_ns,
            },
            identity_seed,
            identity_bytes,
            methods,
            filter,
            bpf,
            cut,
            path,
        })
    }

    fn header(&self, role: Role, method: usize) -> SynopsisFile {
        let (name, config) = self
            .methods
            .get(method)
            .cloned()
            .unwrap_or_else(|| (String::new(), Vec::new()));
        SynopsisFile {
            method: name,
            role,
            intervals: self.intervals,
            identity_seed: self.identity_seed,
            identity_bytes: self.identity_bytes,
            config,
            cut: Vec::new(),
            points: Vec::new(),
        }
    }

    /// Can the sender's and the receiver's configurations measure together? The error is one
    /// line naming the first field that differs.
    pub fn check_pair(sender: &AgentConfig, receiver: &AgentConfig) -> Result<(), String> {
        let names = |c: &AgentConfig| {
            c.methods
                .iter()
                .map(|m| m.0.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        if sender.path != receiver.path {
            let show = |p: &str| {
                if p.is_empty() {
                    "the single pair (--role)".to_string()
                } else {
                    format!("path '{p}'")
                }
            };
            return Err(format!(
                "configuration mismatch between sender and receiver: the sender measures {} but the receiver {}",
                show(&sender.path),
                show(&receiver.path)
            ));
        }
        // the grid and the identity seed first, then each method's fields
        let grid = |c: &AgentConfig, role| SynopsisFile {
            method: String::new(),
            config: Vec::new(),
            ..c.header(role, usize::MAX)
        };
        SynopsisFile::check_pair(&grid(sender, Role::Sender), &grid(receiver, Role::Receiver))
            .map_err(|e| e.to_string())?;
        // the packets measured: both selections must be the same
        for (option, a, b) in [
            ("--filter", &sender.filter, &receiver.filter),
            ("--bpf", &sender.bpf, &receiver.bpf),
        ] {
            if a != b {
                let show = |f: &str| {
                    if f.is_empty() {
                        "none".to_string()
                    } else {
                        format!("'{f}'")
                    }
                };
                return Err(format!(
                    "configuration mismatch between sender and receiver: {option} is {} at the sender but {} at the receiver (both points must measure the same packets)",
                    show(a),
                    show(b)
                ));
            }
        }
        if sender.cut != receiver.cut {
            let pairs = |c: &Cut| {
                c.pairs()
                    .into_iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            return Err(format!(
                "configuration mismatch between sender and receiver: the interval cut is {} at the sender but {} at the receiver (--cut and --cut-window must be the same at both points)",
                pairs(&sender.cut),
                pairs(&receiver.cut)
            ));
        }
        if names(sender) != names(receiver) {
            return Err(format!(
                "configuration mismatch between sender and receiver: methods is {} at the sender but {} at the receiver",
                names(sender),
                names(receiver)
            ));
        }
        for (i, (name, _)) in sender.methods.iter().enumerate() {
            SynopsisFile::check_pair(
                &sender.header(Role::Sender, i),
                &receiver.header(Role::Receiver, i),
            )
            .map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> AgentConfig {
        AgentConfig {
            intervals: Intervals::aligned(1_000_000_000),
            identity_seed: 3,
            identity_bytes: Some(80),
            methods: vec![
                (
                    "lda".into(),
                    vec![("rows".into(), "1024".into()), ("seed".into(), "1".into())],
                ),
                ("rda".into(), vec![("banks".into(), "3".into())]),
            ],
            filter: "(proto 17 and dst port 9000)".into(),
            bpf: "udp".into(),
            cut: Cut::delimiter_fitted(Intervals::aligned(1_000_000_000), 1_000_000_000),
            path: "a-to-b".into(),
        }
    }

    #[test]
    fn roundtrip_and_truncations() {
        let c = cfg();
        let b = c.encode();
        assert_eq!(AgentConfig::decode(&b).unwrap(), c);
        for cut in 0..b.len() {
            assert!(AgentConfig::decode(&b[..cut]).is_err(), "cut {cut}");
        }
    }

    #[test]
    fn a_mismatch_names_the_field() {
        let s = cfg();
        assert!(AgentConfig::check_pair(&s, &s).is_ok());
        let mut r = cfg();
        r.methods[0].1[0].1 = "512".into();
        assert_eq!(
            AgentConfig::check_pair(&s, &r).unwrap_err(),
            "lda: configuration mismatch between sender and receiver: rows is 1024 at the sender but 512 at the receiver"
        );
        let mut r = cfg();
        r.intervals.length_ns = 100;
        let e = AgentConfig::check_pair(&s, &r).unwrap_err();
        assert!(
            e.contains("interval is 1000000000 ns at the sender but 100 ns"),
            "{e}"
        );
        let mut r = cfg();
        r.methods.pop();
        let e = AgentConfig::check_pair(&s, &r).unwrap_err();
        assert!(
            e.contains("methods is lda,rda at the sender but lda at the receiver"),
            "{e}"
        );
        let mut r = cfg();
        r.cut = Cut::Clock;
        let e = AgentConfig::check_pair(&s, &r).unwrap_err();
        assert!(
            e.contains("the interval cut is cut=delimiter cut_delimiters=8")
                && e.contains("but cut=clock at the receiver"),
            "{e}"
        );
        let mut r = cfg();
        r.path = String::new();
        let e = AgentConfig::check_pair(&s, &r).unwrap_err();
        assert!(
            e.contains("the sender measures path 'a-to-b' but the receiver the single pair"),
            "{e}"
        );
        let mut r = cfg();
        r.identity_seed = 9;
        let e = AgentConfig::check_pair(&s, &r).unwrap_err();
        assert!(e.contains("identity seed is 3 at the sender but 9"), "{e}");
        let mut r = cfg();
        r.identity_bytes = None;
        let e = AgentConfig::check_pair(&s, &r).unwrap_err();
        assert!(
            e.contains(
                "identity bytes is 80 (--identity-bytes) at the sender but every captured byte"
            ),
            "{e}"
        );
        let mut r = cfg();
        r.bpf = "tcp".into();
        let e = AgentConfig::check_pair(&s, &r).unwrap_err();
        assert!(
            e.contains("--bpf is 'udp' at the sender but 'tcp' at the receiver"),
            "{e}"
        );
        let mut r = cfg();
        r.filter.clear();
        let e = AgentConfig::check_pair(&s, &r).unwrap_err();
        assert!(
            e.contains(
                "--filter is '(proto 17 and dst port 9000)' at the sender but none at the receiver"
            ),
            "{e}"
        );
    }
}
