//! The collector's database: every interval of every pair, in an embedded SQLite file.
//!
//! # Schema (version 3, `PRAGMA user_version`)
//!
//! ```sql
//! CREATE TABLE intervals (          -- one row per interval a receiver agent decided
//!   pair      TEXT    NOT NULL,     -- the pair's label (the receiver's --pair)
//!   idx       INTEGER NOT NULL,     -- interval index on the agreed grid
//!   start_ns  INTEGER NOT NULL,     -- interval start, ns since the epoch (receiver's clock)
//!   status    TEXT    NOT NULL,     -- 'estimated' | 'missing' | 'left_out'
//!   reason    TEXT,                 -- why missing or left out
//!   sent      INTEGER NOT NULL,     -- packets the sender point recorded in it
//!   received  INTEGER NOT NULL,     -- packets the receiver point recorded in it
//!   stored_ns INTEGER NOT NULL,     -- the collector's clock when stored
//!   clock_offset_ns      INTEGER,   -- the agents' clock offset (S's minus R's) as of this
//!   clock_uncertainty_ns INTEGER,   --   interval, and its bound (crate::clock); NULL before
//!                                   --   the first exchange (version 2)
//!   PRIMARY KEY (pair, idx));
//! CREATE TABLE results (            -- one row per method of an estimated interval
//!   pair TEXT NOT NULL, idx INTEGER NOT NULL, method TEXT NOT NULL,
//!   mean_ns REAL, std_ns REAL, samples INTEGER, lost INTEGER, bytes INTEGER,
//!   error    TEXT,                  -- the method's error instead of an estimate
//!   estimate TEXT,                  -- the whole estimate, JSON as `owl estimate` prints it
//!   PRIMARY KEY (pair, idx, method));
//! CREATE TABLE quiet (              -- intervals [from_idx, to_idx) with no packet at either point
//!   pair TEXT NOT NULL, from_idx INTEGER NOT NULL, to_idx INTEGER NOT NULL,
//!   start_ns INTEGER NOT NULL, PRIMARY KEY (pair, from_idx));
//! CREATE TABLE paths (              -- a pair that is a point's path: its two points (version 3)
//!   pair TEXT NOT NULL PRIMARY KEY, sender_point TEXT NOT NULL, receiver_point TEXT NOT NULL);
//! ```
//!
//! **Crash-safe**: write-ahead log, `synchronous = FULL`, and one transaction per interval
//! (its row and its methods' rows together), committed before the agent is acknowledged — an
//! interval is either wholly stored or not at all, and one not acknowledged is sent again (a
//! resent interval replaces itself: the primary keys make storing idempotent). A `missing` line
//! never replaces an `estimated` row: a receiver restarted between writing an interval and the
//! sender hearing of it reports that interval again, as missing.
//!
//! A version-1 database (before the clock columns) or version-2 one (before `paths`) is
//! upgraded in place when the collector opens it, and read as it is by `owl report` (no
//! offsets; no points).
//!
//! **Never silently absent**: every index from a pair's first stored interval to its last is
//! an interval row or inside a quiet range, unless no agent delivered it (the agent was down,
//! or its results were lost): [`Store::series`] reports those as missing too.

use std::path::Path;

use crate::lines::{Line, Status};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

/// Schema version in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 3;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS intervals (
  pair TEXT NOT NULL, idx INTEGER NOT NULL, start_ns INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('estimated', 'missing', 'left_out')),
  reason TEXT, sent INTEGER NOT NULL, received INTEGER NOT NULL, stored_ns INTEGER NOT NULL,
  clock_offset_ns INTEGER, clock_uncertainty_ns INTEGER,
  PRIMARY KEY (pair, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS results (
  pair TEXT NOT NULL, idx INTEGER NOT NULL, method TEXT NOT NULL,
  mean_ns REAL, std_ns REAL, samples INTEGER, lost INTEGER, bytes INTEGER,
  error TEXT, estimate TEXT,
  PRIMARY KEY (pair, idx, method)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS quiet (
  pair TEXT NOT NULL, from_idx INTEGER NOT NULL, to_idx INTEGER NOT NULL,
  start_ns INTEGER NOT NULL, PRIMARY KEY (pair, from_idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS paths (
  pair TEXT NOT NULL PRIMARY KEY, sender_point TEXT NOT NULL, receiver_point TEXT NOT NULL)
  WITHOUT ROWID;
";

/// Why the store refused something.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Sql(#[from] rusqlite::Error),
    #[error("{0}")]
    Invalid(String),
}

/// An open database.
#[derive(Debug)]
pub struct Store {
    db: Connection,
    /// The schema version of the file (a version-1 file read as it is has no clock columns).
    version: i64,
}

/// A count or index as SQLite's signed integer.
fn i63(x: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(x).map_err(|_| StoreError::Invalid(format!("`{what}` {x} is not below 2^63")))
}

impl Store {
    /// Open (or create) the database at `path` for writing.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let db = Connection::open(path)?;
        let version: i64 = db.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::Invalid(format!(
                "{}: schema version {version}, this owl writes version {SCHEMA_VERSION}",
                path.display()
            )));
        }
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "FULL")?;
        if version == 1 {
            // version 2 added the clock columns
            db.execute_batch(
                "BEGIN;
                 ALTER TABLE intervals ADD COLUMN clock_offset_ns INTEGER;
                 ALTER TABLE intervals ADD COLUMN clock_uncertainty_ns INTEGER;
                 PRAGMA user_version = 2;
                 COMMIT;",
            )?;
        }
        db.execute_batch(SCHEMA)?;
        db.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        Ok(Store {
            db,
            version: SCHEMA_VERSION,
        })
    }

    /// Open an existing database to read (`owl report`).
    pub fn open_read(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Invalid(format!(
                "{}: no such database",
                path.display()
            )));
        }
        let not_db = |e: rusqlite::Error| {
            StoreError::Invalid(format!(
                "{}: not an owl collector database ({e})",
                path.display()
            ))
        };
        let db = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(not_db)?;
        let version: i64 = db
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(not_db)?;
        if !(1..=SCHEMA_VERSION).contains(&version) {
            return Err(StoreError::Invalid(format!(
                "{}: not an owl collector database (schema version {version}, expected 1 to {SCHEMA_VERSION})",
                path.display()
            )));
        }
        Ok(Store { db, version })
    }

    /// Store one line of a receiver agent (an interval or a quiet range) for `pair`, in one
    /// transaction. `now_ns` is the collector's clock. Returns `false` for a `missing` line of
    /// an interval already stored as estimated, which keeps its estimate: a receiver restarted
    /// after it wrote the interval, before the sender learnt so, reports it again as missing.
    pub fn store_line(&mut self, pair: &str, line: &Line, now_ns: i64) -> Result<bool, StoreError> {
        let tx = self.db.transaction()?;
        match line {
            Line::Interval(l) => {
                l.check().map_err(StoreError::Invalid)?;
                let idx = i63(l.index, "index")?;
                if l.status == Status::Missing {
                    let stored: Option<String> = tx
                        .query_row(
                            "SELECT status FROM intervals WHERE pair = ?1 AND idx = ?2",
                            params![pair, idx],
                            |r| r.get(0),
                        )
                        .optional()?;
                    if stored.as_deref() == Some(Status::Estimated.as_str()) {
                        return Ok(false);
                    }
                }
                tx.execute(
                    "INSERT OR REPLACE INTO intervals (pair, idx, start_ns, status, reason, sent,
                       received, stored_ns, clock_offset_ns, clock_uncertainty_ns)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                    params![
                        pair,
                        idx,
                        i63(l.start_ns, "start_ns")?,
                        l.status.as_str(),
                        l.reason,
                        i63(l.sent, "sent")?,
                        i63(l.received, "received")?,
                        now_ns,
                        l.clock.map(|c| c.offset_ns),
                        l.clock.map(|c| c.uncertainty_ns)
                    ],
                )?;
                tx.execute(
                    "DELETE FROM results WHERE pair = ?1 AND idx = ?2",
                    params![pair, idx],
                )?;
                if let Some([s, r]) = &l.points {
                    tx.execute(
                        "INSERT OR REPLACE INTO paths VALUES (?1, ?2, ?3)",
                        params![pair, s, r],
                    )?;
                }
                for m in &l.methods {
                    let e = m.estimate.as_ref();
                    let whole = match (&m.error, e) {
                        (None, Some(_)) => Some(
                            serde_json::to_string(m)
                                .map_err(|e| StoreError::Invalid(e.to_string()))?,
                        ),
                        _ => None,
                    };
                    tx.execute(
                        "INSERT INTO results VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                        params![
                            pair,
                            idx,
                            m.method,
                            e.and_then(|e| e.mean_ns),
                            e.and_then(|e| e.std_ns),
                            e.and_then(|e| i64::try_from(e.samples).ok()),
                            e.and_then(|e| e.lost).and_then(|x| i64::try_from(x).ok()),
                            e.and_then(|e| i64::try_from(e.bytes).ok()),
                            m.error,
                            whole
                        ],
                    )?;
                }
            }
            Line::Quiet(q) => {
                tx.execute(
                    "INSERT OR REPLACE INTO quiet VALUES (?1, ?2, ?3, ?4)",
                    params![
                        pair,
                        i63(q.from, "from")?,
                        i63(q.to, "to")?,
                        i63(q.start_ns, "start_ns")?
                    ],
                )?;
            }
            Line::Summary(_) => {
                return Err(StoreError::Invalid(
                    "a summary line: the collector stores intervals and quiet ranges".into(),
                ));
            }
        }
        tx.commit()?;
        Ok(true)
    }

    /// The pairs in the database.
    pub fn pairs(&self) -> Result<Vec<String>, StoreError> {
        let mut q = self
            .db
            .prepare("SELECT DISTINCT pair FROM intervals ORDER BY pair")?;
        let v = q.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        Ok(v)
    }

    /// A pair's per-interval series: one row per method of each estimated interval, one row per
    /// method for each missing or left-out interval and for each index between the first and
    /// the last that no agent delivered (status `missing`, "not reported"); quiet ranges (no
    /// packet at either point) are left out.
    pub fn series(&self, pair: &str) -> Result<Vec<Row>, StoreError> {
        let methods: Vec<String> = {
            let mut q = self
                .db
                .prepare("SELECT DISTINCT method FROM results WHERE pair = ?1 ORDER BY method")?;
            q.query_map([pair], |r| r.get(0))?
                .collect::<Result<_, _>>()?
        };
        let quiet: Vec<(i64, i64)> = {
            let mut q = self
                .db
                .prepare("SELECT from_idx, to_idx FROM quiet WHERE pair = ?1 ORDER BY from_idx")?;
            q.query_map([pair], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?
        };
        let is_quiet = |k: i64| quiet.iter().any(|&(a, b)| a <= k && k < b);
        let clock = if self.version >= 2 {
            "i.clock_offset_ns, i.clock_uncertainty_ns"
        } else {
            "NULL, NULL"
        };
        let mut q = self.db.prepare(&format!(
            "SELECT i.idx, i.start_ns, i.status, i.reason, i.sent, i.received,
                    r.method, r.mean_ns, r.std_ns, r.samples, r.lost, r.error, {clock}
             FROM intervals i LEFT JOIN results r ON r.pair = i.pair AND r.idx = i.idx
             WHERE i.pair = ?1 ORDER BY i.idx, r.method"
        ))?;
        let mut rows = Vec::new();
        let mut prev: Option<(i64, i64)> = None;
        let mut it = q.query([pair])?;
        while let Some(r) = it.next()? {
            let idx: i64 = r.get(0)?;
            let start: i64 = r.get(1)?;
            // indices between two stored intervals that nobody reported
            if let Some((p, pstart)) = prev
                && idx > p + 1
            {
                let len = if idx > p {
                    (start - pstart) / (idx - p)
                } else {
                    0
                };
                for k in p + 1..idx {
                    if is_quiet(k) {
                        continue;
                    }
                    for m in &methods {
                        rows.push(Row::missing(
                            pair,
                            m,
                            pstart + (k - p) * len,
                            "not reported (agent down or results lost)",
                        ));
                    }
                }
            }
            prev = Some((idx, start));
            let status: String = r.get(2)?;
            let reason: Option<String> = r.get(3)?;
            let method: Option<String> = r.get(6)?;
            match method {
                Some(m) => rows.push(Row {
                    pair: pair.to_string(),
                    method: m,
                    start_ns: start as u64,
                    mean_ns: r.get(7)?,
                    std_ns: r.get(8)?,
                    samples: r.get::<_, Option<i64>>(9)?.map(|x| x as u64),
                    lost: r.get::<_, Option<i64>>(10)?.map(|x| x as u64),
                    sent: Some(r.get::<_, i64>(4)? as u64),
                    received: Some(r.get::<_, i64>(5)? as u64),
                    status,
                    reason: r.get::<_, Option<String>>(11)?.or(reason),
                    clock_offset_ns: r.get(12)?,
                    clock_uncertainty_ns: r.get(13)?,
                }),
                None => {
                    for m in &methods {
                        let mut row = Row::missing(pair, m, start, reason.as_deref().unwrap_or(""));
                        row.status = status.clone();
                        row.sent = Some(r.get::<_, i64>(4)? as u64);
                        row.received = Some(r.get::<_, i64>(5)? as u64);
                        row.clock_offset_ns = r.get(12)?;
                        row.clock_uncertainty_ns = r.get(13)?;
                        rows.push(row);
                    }
                }
            }
        }
        Ok(rows)
    }

    /// What the database holds, pair by pair (`owl report --pairs`).
    pub fn pair_summaries(&self) -> Result<Vec<PairSummary>, StoreError> {
        let mut out = Vec::new();
        for pair in self.pairs()? {
            let (first, last, estimated, missing, left_out): (i64, i64, i64, i64, i64) =
                self.db.query_row(
                    "SELECT MIN(start_ns), MAX(start_ns),
                       SUM(status = 'estimated'), SUM(status = 'missing'), SUM(status = 'left_out')
                     FROM intervals WHERE pair = ?1",
                    [&pair],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )?;
            let points: Option<(String, String)> = if self.version >= 3 {
                self.db
                    .query_row(
                        "SELECT sender_point, receiver_point FROM paths WHERE pair = ?1",
                        [&pair],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?
            } else {
                None
            };
            let methods: Vec<String> = {
                let mut q = self.db.prepare(
                    "SELECT DISTINCT method FROM results WHERE pair = ?1 ORDER BY method",
                )?;
                q.query_map([&pair], |r| r.get(0))?
                    .collect::<Result<_, _>>()?
            };
            out.push(PairSummary {
                sender_point: points.as_ref().map(|p| p.0.clone()),
                receiver_point: points.map(|p| p.1),
                pair,
                first_start_ns: first as u64,
                last_start_ns: last as u64,
                estimated: estimated as u64,
                missing: missing as u64,
                left_out: left_out as u64,
                methods,
            });
        }
        Ok(out)
    }

    /// Intervals stored for `pair` (for tests and logs).
    pub fn count(&self, pair: &str) -> Result<u64, StoreError> {
        let n: Option<i64> = self
            .db
            .query_row(
                "SELECT COUNT(*) FROM intervals WHERE pair = ?1",
                [pair],
                |r| r.get(0),
            )
            .optional()?;
        Ok(n.unwrap_or(0) as u64)
    }
}

/// One pair of the database, as `owl report --pairs` lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairSummary {
    pub pair: String,
    /// A point's path: its sender and receiver points (`null`: a single pair, or a database
    /// from before version 3).
    pub sender_point: Option<String>,
    pub receiver_point: Option<String>,
    /// Start of its first and last stored interval, ns since the Unix epoch.
    pub first_start_ns: u64,
    pub last_start_ns: u64,
    /// Intervals stored, by status (indices no agent delivered are not counted here).
    pub estimated: u64,
    pub missing: u64,
    pub left_out: u64,
    pub methods: Vec<String>,
}

/// One row of `owl report`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub pair: String,
    pub method: String,
    pub start_ns: u64,
    pub mean_ns: Option<f64>,
    pub std_ns: Option<f64>,
    pub samples: Option<u64>,
    pub lost: Option<u64>,
    pub sent: Option<u64>,
    pub received: Option<u64>,
    /// `estimated`, `missing` or `left_out`.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The agents' clock offset as of this interval (S's clock minus R's) and its bound;
    /// `null` before the first exchange, or from a version-1 database.
    pub clock_offset_ns: Option<i64>,
    pub clock_uncertainty_ns: Option<i64>,
}

impl Row {
    fn missing(pair: &str, method: &str, start_ns: i64, reason: &str) -> Row {
        Row {
            pair: pair.to_string(),
            method: method.to_string(),
            start_ns: start_ns.max(0) as u64,
            mean_ns: None,
            std_ns: None,
            samples: None,
            lost: None,
            sent: None,
            received: None,
            status: "missing".into(),
            reason: Some(reason.to_string()),
            clock_offset_ns: None,
            clock_uncertainty_ns: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn parse(v: Value) -> Line {
        serde_json::from_value(v).unwrap()
    }

    fn line(idx: u64, status: &str) -> Line {
        parse(json_line(idx, status))
    }

    fn json_line(idx: u64, status: &str) -> Value {
        let mut v = json!({"type": "interval", "index": idx, "start_ns": idx * 1000,
            "status": status, "sent": 10, "received": 9});
        if status == "estimated" {
            v["methods"] = json!([
                {"method": "lda", "mean_ns": 5.5, "std_ns": 1.0, "samples": 9, "lost": 1, "bytes": 100,
                 "notes": []},
                {"method": "rda", "error": "decoding failed"}
            ]);
        } else {
            v["reason"] = json!("dropped at the sender (overload)");
        }
        v
    }

    /// The clock offset travels with its interval; a version-1 file (no clock columns) is
    /// read as it is, and upgraded in place, rows kept, when a collector opens it.
    #[test]
    fn clock_offsets_are_stored_and_version_1_files_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        {
            let db = Connection::open(&path).unwrap();
            db.execute_batch(
                "CREATE TABLE intervals (
                   pair TEXT NOT NULL, idx INTEGER NOT NULL, start_ns INTEGER NOT NULL,
                   status TEXT NOT NULL, reason TEXT, sent INTEGER NOT NULL,
                   received INTEGER NOT NULL, stored_ns INTEGER NOT NULL,
                   PRIMARY KEY (pair, idx)) WITHOUT ROWID;
                 CREATE TABLE results (
                   pair TEXT NOT NULL, idx INTEGER NOT NULL, method TEXT NOT NULL,
                   mean_ns REAL, std_ns REAL, samples INTEGER, lost INTEGER, bytes INTEGER,
                   error TEXT, estimate TEXT, PRIMARY KEY (pair, idx, method)) WITHOUT ROWID;
                 CREATE TABLE quiet (pair TEXT NOT NULL, from_idx INTEGER NOT NULL,
                   to_idx INTEGER NOT NULL, start_ns INTEGER NOT NULL,
                   PRIMARY KEY (pair, from_idx)) WITHOUT ROWID;
                 INSERT INTO intervals VALUES ('a', 1, 1000, 'estimated', NULL, 10, 9, 5);
                 INSERT INTO results VALUES ('a', 1, 'lda', 5.5, 1.0, 9, 1, 100, NULL, '{}');
                 PRAGMA user_version = 1;",
            )
            .unwrap();
        }
        let old = Store::open_read(&path).unwrap().series("a").unwrap();
        assert_eq!((old[0].mean_ns, old[0].clock_offset_ns), (Some(5.5), None));
        let mut s = Store::open(&path).unwrap();
        let mut l = json_line(2, "estimated");
        l["clock"] = json!({"offset_ns": -1200, "uncertainty_ns": 35, "rtt_ns": 70,
                            "exchanges": 2, "discarded": 0});
        s.store_line("a", &parse(l), 6).unwrap();
        drop(s);
        let s = Store::open_read(&path).unwrap();
        type Seen = (u64, Option<f64>, Option<i64>, Option<i64>);
        let rows: Vec<Seen> = s
            .series("a")
            .unwrap()
            .iter()
            .filter(|r| r.method == "lda")
            .map(|r| {
                (
                    r.start_ns,
                    r.mean_ns,
                    r.clock_offset_ns,
                    r.clock_uncertainty_ns,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (1000, Some(5.5), None, None),
                (2000, Some(5.5), Some(-1200), Some(35))
            ]
        );
        // a version-1 file read as it is lists its pairs without points
        let sums = s.pair_summaries().unwrap();
        assert_eq!(sums[0].sender_point, None);
    }

    /// A point's path stores its two points (version 3); `--pairs` lists each pair with them,
    /// its first and last interval and its intervals by status.
    #[test]
    fn a_path_keeps_its_points_and_pairs_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let mut s = Store::open(&path).unwrap();
        for (k, status) in [(1, "estimated"), (2, "missing"), (3, "estimated")] {
            let mut l = json_line(k, status);
            l["path"] = json!("a-to-b");
            l["points"] = json!(["a", "b"]);
            s.store_line("a-to-b", &parse(l), 6).unwrap();
        }
        s.store_line("single", &parse(json_line(1, "estimated")), 6)
            .unwrap();
        drop(s);
        let s = Store::open_read(&path).unwrap();
        let sums = s.pair_summaries().unwrap();
        assert_eq!(sums.len(), 2);
        let p = &sums[0];
        assert_eq!(p.pair, "a-to-b");
        assert_eq!(
            (p.sender_point.as_deref(), p.receiver_point.as_deref()),
            (Some("a"), Some("b"))
        );
        assert_eq!((p.estimated, p.missing, p.left_out), (2, 1, 0));
        assert_eq!((p.first_start_ns, p.last_start_ns), (1000, 3000));
        assert_eq!(sums[1].sender_point, None);
    }

    #[test]
    fn intervals_roundtrip_gaps_are_missing_and_resends_replace() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("owl.db");
        let mut s = Store::open(&path).unwrap();
        s.store_line("a", &line(10, "estimated"), 1).unwrap();
        s.store_line("a", &line(11, "missing"), 1).unwrap();
        s.store_line(
            "a",
            &parse(json!({"type": "quiet", "from": 12, "to": 14, "start_ns": 12000})),
            1,
        )
        .unwrap();
        s.store_line("a", &line(14, "estimated"), 1).unwrap();
        // 15 never arrives (agent down)
        s.store_line("a", &line(16, "estimated"), 1).unwrap();
        assert!(s.store_line("a", &line(16, "estimated"), 2).unwrap()); // resent: replaces
        // a restarted receiver says 16 is missing: the estimate stays; 11 may become estimated
        assert!(!s.store_line("a", &line(16, "missing"), 3).unwrap());
        assert!(s.store_line("a", &line(11, "missing"), 3).unwrap());
        s.store_line("b", &line(1, "estimated"), 1).unwrap();
        // what no agent writes is refused, and nothing of it is stored
        let mut huge = json_line(17, "missing");
        huge["sent"] = json!(u64::MAX);
        let e = s.store_line("a", &parse(huge), 1).unwrap_err().to_string();
        assert!(
            e.contains("`sent` 18446744073709551615 is not below 2^63"),
            "{e}"
        );
        let mut neither = json_line(17, "estimated");
        neither["methods"][0] = json!({"method": "lda", "mean_ns": "fast"});
        let e = s
            .store_line("a", &parse(neither), 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("method lda: neither an estimate nor an error"),
            "{e}"
        );
        let summary = parse(json!({"type": "summary", "intervals": 1, "trimmed": [0, 0],
            "missing": 0, "dropped": [0, 0], "reconnects": 0, "bytes_sent": 0,
            "bytes_received": 0}));
        assert!(s.store_line("a", &summary, 1).is_err());
        drop(s);
        let s = Store::open_read(&path).unwrap();
        assert_eq!(s.pairs().unwrap(), ["a", "b"]);
        assert_eq!(s.count("a").unwrap(), 4);
        let rows = s.series("a").unwrap();
        let summary: Vec<(u64, &str, &str, Option<f64>)> = rows
            .iter()
            .map(|r| (r.start_ns, r.method.as_str(), r.status.as_str(), r.mean_ns))
            .collect();
        assert_eq!(
            summary,
            [
                (10_000, "lda", "estimated", Some(5.5)),
                (10_000, "rda", "estimated", None),
                (11_000, "lda", "missing", None),
                (11_000, "rda", "missing", None),
                (14_000, "lda", "estimated", Some(5.5)),
                (14_000, "rda", "estimated", None),
                (15_000, "lda", "missing", None),
                (15_000, "rda", "missing", None),
                (16_000, "lda", "estimated", Some(5.5)),
                (16_000, "rda", "estimated", None),
            ]
        );
        assert_eq!(rows[1].reason.as_deref(), Some("decoding failed"));
        assert!(rows[6].reason.as_deref().unwrap().contains("not reported"));
        // a file that is not a collector database
        let other = dir.path().join("x.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t(x)")
            .unwrap();
        assert!(
            Store::open_read(&other)
                .unwrap_err()
                .to_string()
                .contains("not an owl collector database")
        );
    }
}
