//! The COLATE epoch store: counter epochs appended per observation point to an embedded SQLite
//! database (bundled, no system library), read back by time range for `owl query`.
//!
//! # Schema (version 2)
//!
//! ```sql
//! meta(key TEXT PRIMARY KEY, value TEXT)       -- application = owl-colate-store, schema = 2
//! points(id INTEGER PRIMARY KEY, name TEXT UNIQUE, config TEXT, identity_seed INTEGER)
//! epochs(point INTEGER, seq INTEGER, vector INTEGER, first_ns INTEGER, last_ns INTEGER,
//!        packets INTEGER, bytes INTEGER, epoch BLOB, PRIMARY KEY (point, seq))
//! index epochs_range ON epochs(point, last_ns, first_ns)
//! ```
//!
//! `config` is the method's configuration, one `field=value` per line; `epoch` is the
//! checksummed `CLE2` encoding of [`owl_core::colate::epoch`] — self-describing (its base,
//! unit, `n`, `m`, seed), so an epoch is readable without the row around it. Timestamps are
//! ns since the Unix epoch in SQLite's signed 64-bit integers (until 2262). Schema 1 held
//! `CLE1` epochs, whose cells were not randomly accessible; it is refused by name.
//!
//! # Reading one flow
//!
//! A query reads, of each epoch in its range, the header and the flow's `m` cells only, by
//! SQLite's incremental blob I/O ([`Store::flow_epochs`]; `CLE2` puts every cell at an offset
//! its header gives). An epoch of a large vector spans a chain of overflow pages, and SQLite
//! finds the page of an offset by following the chain; the store is created with
//! `auto_vacuum = INCREMENTAL`, whose pointer-map pages let SQLite follow the chain without
//! reading the pages it skips. A flow's query reads a few kilobytes per epoch, not the epoch.
//!
//! # Crash safety
//!
//! The database runs in WAL mode with `synchronous = FULL`, and each epoch is one transaction:
//! once [`Store::append`] returns, the epoch survives a crash or a power cut; a cut during an
//! append loses that epoch only (SQLite ignores a WAL transaction without its commit frame,
//! and every frame is checksummed). Reading an epoch whole ([`Store::epochs`], `owl query
//! --verify`) checks its own checksum too, so a damaged blob is one clear error naming the
//! epoch, never a wrong counter; reading a flow's cells checks the header's checksum and every
//! offset against the blob's length.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use owl_core::FlowKey;
use owl_core::colate::{Epoch, EpochReader, FlowEpoch, Mapping, ReadAt, Sealed};
use owl_core::wire::DecodeError;
use rusqlite::blob::Blob;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

const APPLICATION: &str = "owl-colate-store";
/// Bytes of a store a reader maps (SQLite's own bound is 2 GiB; pages past it are read).
const MMAP_BYTES: i64 = 0x7fff_0000;
const SCHEMA: &str = "2";

/// An epoch blob read in place.
struct BlobAt<'a, 'c>(&'a Blob<'c>);

impl ReadAt for BlobAt<'_, '_> {
    fn size(&self) -> usize {
        self.0.len()
    }
    fn read_at(&mut self, offset: usize, buf: &mut [u8]) -> Result<(), DecodeError> {
        self.0
            .read_at_exact(buf, offset)
            .map_err(|e| DecodeError::Invalid {
                offset,
                what: format!("reading the epoch blob: {e}"),
            })
    }
}

/// An open store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// One observation point of a store.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub id: i64,
    pub name: String,
    pub config: Vec<(String, String)>,
    pub identity_seed: u64,
}

/// What a point holds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PointStats {
    pub epochs: u64,
    pub packets: u64,
    /// Bytes of the epochs themselves (their encodings).
    pub bytes: u64,
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
}

impl PointStats {
    /// Stored bits per recorded packet (epochs only; the file adds SQLite's pages).
    pub fn bits_per_packet(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.packets.max(1) as f64
    }
}

fn ns(v: u64, what: &str) -> Result<i64> {
    i64::try_from(v).map_err(|_| anyhow!("{what} {v} ns is beyond 2262: SQLite cannot hold it"))
}

fn config_text(c: &[(String, String)]) -> String {
    c.iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect::<String>()
}

fn parse_config(s: &str) -> Vec<(String, String)> {
    s.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Store {
    /// Open `path` for appending, creating it (and its schema) if it does not exist.
    pub fn open_or_create(path: &Path) -> Result<Store> {
        let conn = Connection::open(path)
            .with_context(|| format!("{}: cannot open or create", path.display()))?;
        let ctx = || format!("{}: cannot set up the epoch store", path.display());
        // pointer maps: a blob's overflow chain is followed without reading it (module doc);
        // only takes effect on a new database
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
            .with_context(ctx)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .with_context(ctx)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .with_context(ctx)?;
        conn.execute_batch(
            "BEGIN;
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS points (
                 id INTEGER PRIMARY KEY,
                 name TEXT NOT NULL UNIQUE,
                 config TEXT NOT NULL,
                 identity_seed INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS epochs (
                 point INTEGER NOT NULL REFERENCES points(id),
                 seq INTEGER NOT NULL,
                 vector INTEGER NOT NULL,
                 first_ns INTEGER NOT NULL,
                 last_ns INTEGER NOT NULL,
                 packets INTEGER NOT NULL,
                 bytes INTEGER NOT NULL,
                 epoch BLOB NOT NULL,
                 PRIMARY KEY (point, seq));
             CREATE INDEX IF NOT EXISTS epochs_range ON epochs(point, last_ns, first_ns);
             INSERT OR IGNORE INTO meta VALUES ('application', 'owl-colate-store');
             INSERT OR IGNORE INTO meta VALUES ('schema', '2');
             COMMIT;",
        )
        .map_err(|e| anyhow!("{}: not an epoch store ({e})", path.display()))?;
        let s = Store {
            conn,
            path: path.to_path_buf(),
        };
        s.check_meta()?;
        Ok(s)
    }

    /// Open an existing store read-only.
    pub fn open_read(path: &Path) -> Result<Store> {
        if !path.is_file() {
            bail!("{}: no such epoch store", path.display());
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .with_context(|| format!("{}: cannot open", path.display()))?;
        let s = Store {
            conn,
            path: path.to_path_buf(),
        };
        s.check_meta()?;
        // pages read through a memory map, not a pread each: a query reads a few small pieces
        // of every epoch in range, and on a cold connection each piece's page was a system call
        // (a day's query: ~2 000 of them); the store is only ever appended to, never truncated
        s.conn
            .pragma_update(None, "mmap_size", MMAP_BYTES)
            .with_context(|| format!("{}: cannot map", path.display()))?;
        Ok(s)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_meta(&self) -> Result<()> {
        let get = |k: &str| -> Result<Option<String>> {
            Ok(self
                .conn
                .query_row("SELECT value FROM meta WHERE key = ?1", [k], |r| r.get(0))
                .optional()?)
        };
        let bad = |e: rusqlite::Error| anyhow!("{}: not an epoch store ({e})", self.path.display());
        let app = get("application").map_err(|e| match e.downcast::<rusqlite::Error>() {
            Ok(e) => bad(e),
            Err(e) => e,
        })?;
        if app.as_deref() != Some(APPLICATION) {
            bail!("{}: not an owl epoch store", self.path.display());
        }
        let schema = get("schema")?;
        if schema.as_deref() != Some(SCHEMA) {
            bail!(
                "{}: epoch store schema {} (this owl reads {SCHEMA})",
                self.path.display(),
                schema.unwrap_or_default()
            );
        }
        Ok(())
    }

    /// The point `name`, created with `config` if new; an existing point must have been
    /// recorded with the same configuration and identity seed (the first field that differs
    /// is named).
    pub fn point(
        &self,
        name: &str,
        config: &[(String, String)],
        identity_seed: u64,
    ) -> Result<Point> {
        if let Some(p) = self.find_point(name)? {
            if p.identity_seed != identity_seed {
                bail!(
                    "{}: point {name} was recorded with identity seed {}, not {identity_seed}",
                    self.path.display(),
                    p.identity_seed
                );
            }
            for (k, v) in config {
                let old = p
                    .config
                    .iter()
                    .find(|(a, _)| a == k)
                    .map(|(_, b)| b.as_str());
                if old != Some(v.as_str()) {
                    bail!(
                        "{}: point {name} was recorded with {k} = {}, not {v}: record under another --point name",
                        self.path.display(),
                        old.unwrap_or("(none)")
                    );
                }
            }
            return Ok(p);
        }
        let seed = ns(identity_seed, "identity seed").unwrap_or(identity_seed as i64);
        self.conn
            .execute(
                "INSERT INTO points (name, config, identity_seed) VALUES (?1, ?2, ?3)",
                params![name, config_text(config), seed],
            )
            .with_context(|| format!("{}: cannot add point {name}", self.path.display()))?;
        self.find_point(name)?
            .ok_or_else(|| anyhow!("{}: point {name} vanished", self.path.display()))
    }

    fn find_point(&self, name: &str) -> Result<Option<Point>> {
        Ok(self
            .conn
            .query_row(
                "SELECT id, name, config, identity_seed FROM points WHERE name = ?1",
                [name],
                |r| {
                    Ok(Point {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        config: parse_config(&r.get::<_, String>(2)?),
                        identity_seed: r.get::<_, i64>(3)? as u64,
                    })
                },
            )
            .optional()?)
    }

    /// Every point, by name.
    pub fn points(&self) -> Result<Vec<Point>> {
        let mut st = self
            .conn
            .prepare("SELECT id, name, config, identity_seed FROM points ORDER BY name")?;
        let rows = st.query_map([], |r| {
            Ok(Point {
                id: r.get(0)?,
                name: r.get(1)?,
                config: parse_config(&r.get::<_, String>(2)?),
                identity_seed: r.get::<_, i64>(3)? as u64,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// The point of a store that holds one, or the one named.
    pub fn only_point(&self, name: Option<&str>) -> Result<Point> {
        let ps = self.points()?;
        let names = || {
            ps.iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match name {
            Some(n) => ps.iter().find(|p| p.name == n).cloned().ok_or_else(|| {
                anyhow!(
                    "{}: no point {n} (points: {})",
                    self.path.display(),
                    names()
                )
            }),
            None if ps.len() == 1 => Ok(ps[0].clone()),
            None if ps.is_empty() => bail!("{}: the store holds no point", self.path.display()),
            None => bail!(
                "{}: the store holds several points ({}): name one as FILE#POINT",
                self.path.display(),
                names()
            ),
        }
    }

    /// The sequence number the point's next epoch gets.
    pub fn next_seq(&self, point: &Point) -> Result<u64> {
        let max: Option<i64> = self.conn.query_row(
            "SELECT MAX(seq) FROM epochs WHERE point = ?1",
            [point.id],
            |r| r.get(0),
        )?;
        Ok(max.map_or(0, |m| m as u64 + 1))
    }

    /// Append one epoch as a recorder dumped it (one transaction, durable when this
    /// returns); its bytes.
    pub fn append_sealed(&self, point: &Point, e: &Sealed) -> Result<u64> {
        let h = &e.head;
        self.conn
            .execute(
                "INSERT INTO epochs (point, seq, vector, first_ns, last_ns, packets, bytes, epoch)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    point.id,
                    ns(h.seq, "sequence")?,
                    h.vector as i64,
                    ns(h.first_ns, "first timestamp")?,
                    ns(h.last_ns, "last timestamp")?,
                    ns(h.packets, "packets")?,
                    e.bytes.len() as i64,
                    e.bytes
                ],
            )
            .with_context(|| {
                format!(
                    "{}: cannot append epoch {} of point {}",
                    self.path.display(),
                    h.seq,
                    point.name
                )
            })?;
        Ok(e.bytes.len() as u64)
    }

    /// The point's epochs whose time frame meets `[from, to]`, by sequence; each decoded and
    /// checked (a damaged one is an error naming it).
    pub fn epochs(&self, point: &Point, from: u64, to: u64) -> Result<Vec<Epoch>> {
        let mut out = Vec::new();
        self.each_epoch(point, from, to, |e| {
            out.push(e);
            Ok(())
        })?;
        Ok(out)
    }

    /// [`epochs`](Self::epochs), handed to `f` one at a time (one decoded epoch in memory).
    pub fn each_epoch(
        &self,
        point: &Point,
        from: u64,
        to: u64,
        mut f: impl FnMut(Epoch) -> Result<()>,
    ) -> Result<()> {
        let mut st = self.conn.prepare(
            "SELECT seq, epoch FROM epochs
             WHERE point = ?1 AND last_ns >= ?2 AND first_ns <= ?3 ORDER BY seq",
        )?;
        let (from, to) = (
            i64::try_from(from).unwrap_or(i64::MAX),
            i64::try_from(to).unwrap_or(i64::MAX),
        );
        let rows = st.query_map(params![point.id, from, to], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        for row in rows {
            let (seq, blob) = row?;
            f(Epoch::decode(&blob).map_err(|e| {
                anyhow!(
                    "{}: epoch {seq} of point {}: {e}",
                    self.path.display(),
                    point.name
                )
            })?)?;
        }
        Ok(())
    }

    /// The flow's cells of the point's epochs whose time frame meets `[from, to]`, by
    /// sequence: each epoch's header and `m` cells read in place (module doc).
    pub fn flow_epochs(
        &self,
        point: &Point,
        from: u64,
        to: u64,
        flow: &FlowKey,
    ) -> Result<Vec<FlowEpoch>> {
        let mut st = self.conn.prepare_cached(
            "SELECT rowid, seq FROM epochs
             WHERE point = ?1 AND last_ns >= ?2 AND first_ns <= ?3 ORDER BY seq",
        )?;
        let (from, to) = (
            i64::try_from(from).unwrap_or(i64::MAX),
            i64::try_from(to).unwrap_or(i64::MAX),
        );
        let rows = st
            .query_map(params![point.id, from, to], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = Vec::with_capacity(rows.len());
        let mut blob: Option<Blob> = None;
        let mut map: Option<(Mapping, u64)> = None;
        for (rowid, seq) in rows {
            let named = |e: &dyn std::fmt::Display| {
                anyhow!(
                    "{}: epoch {seq} of point {}: {e}",
                    self.path.display(),
                    point.name
                )
            };
            match &mut blob {
                Some(b) => b.reopen(rowid).map_err(|e| named(&e))?,
                None => {
                    blob = Some(
                        self.conn
                            .blob_open(c"main", c"epochs", c"epoch", rowid, true)
                            .map_err(|e| named(&e))?,
                    )
                }
            }
            let b = blob.as_ref().expect("opened above");
            let mut rd = EpochReader::open(BlobAt(b)).map_err(|e| named(&e))?;
            let h = rd.head();
            let (map, fh) = match &map {
                Some((mp, fh))
                    if mp.seed == h.seed && mp.m == h.m && mp.placement == h.placement =>
                {
                    (mp, *fh)
                }
                _ => {
                    let mp = Mapping::new(h.seed, h.m, &[1.0], h.placement);
                    let fh = mp.flow_hash(flow);
                    let (mp, fh) = map.insert((mp, fh));
                    (&*mp, *fh)
                }
            };
            out.push(rd.flow(map, fh).map_err(|e| named(&e))?);
        }
        Ok(out)
    }

    /// What the point holds.
    pub fn stats(&self, point: &Point) -> Result<PointStats> {
        let (epochs, packets, bytes, first, last): (
            i64,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
        ) = self.conn.query_row(
            "SELECT COUNT(*), SUM(packets), SUM(bytes), MIN(first_ns), MAX(last_ns)
                 FROM epochs WHERE point = ?1",
            [point.id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )?;
        Ok(PointStats {
            epochs: epochs as u64,
            packets: packets.unwrap_or(0) as u64,
            bytes: bytes.unwrap_or(0) as u64,
            first_ns: first.map(|v| v as u64),
            last_ns: last.map(|v| v as u64),
        })
    }

    /// `PRAGMA integrity_check`: `ok`, or what SQLite found.
    pub fn integrity(&self) -> Result<String> {
        Ok(self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use owl_core::colate::{Config, Layout, Recorder};
    use owl_core::{FlowKey, PacketRecord};

    fn epochs(k: usize) -> Vec<Sealed> {
        let c = Config::paper_default(1)
            .with_parameters(1_000, 10, 20, 50_000)
            .unwrap();
        let mut r = Recorder::new(Layout::new(c));
        for i in 0..20_000u64 {
            r.record(&PacketRecord {
                ts_ns: 1_767_225_600_000_000_000 + i * 1_000,
                id: i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                flow: FlowKey {
                    sport: (i % 50) as u16,
                    ..FlowKey::default()
                },
                len: 100,
            });
        }
        r.dump_open();
        let mut v = r.take_sealed();
        assert!(v.len() >= k, "{}", v.len());
        v.truncate(k);
        v
    }

    #[test]
    fn append_read_by_range_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let es = epochs(5);
        let cfg = vec![("m".to_string(), "10".to_string())];
        {
            let st = Store::open_or_create(&path).unwrap();
            let p = st.point("s", &cfg, 7).unwrap();
            for e in &es {
                st.append_sealed(&p, e).unwrap();
            }
            assert_eq!(st.next_seq(&p).unwrap(), es.len() as u64);
            // a point recorded with another configuration is refused by field
            let e = st.point("s", &[("m".into(), "12".into())], 7).unwrap_err();
            assert!(e.to_string().contains("m = 10, not 12"), "{e}");
        }
        let st = Store::open_read(&path).unwrap();
        let p = st.only_point(None).unwrap();
        let decoded: Vec<Epoch> = es.iter().map(Sealed::decode).collect();
        assert_eq!(st.epochs(&p, 0, u64::MAX).unwrap(), decoded);
        let mid = st
            .epochs(&p, es[2].head.first_ns, es[2].head.last_ns)
            .unwrap();
        assert!(mid.iter().any(|e| e.seq == es[2].head.seq));
        assert!(mid.len() <= 3);
        let s = st.stats(&p).unwrap();
        assert_eq!(s.epochs, 5);
        assert_eq!(s.packets, es.iter().map(|e| e.head.packets).sum::<u64>());
        assert_eq!(st.integrity().unwrap(), "ok");
        assert!(Store::open_read(&dir.path().join("none.db")).is_err());
        std::fs::write(dir.path().join("junk.db"), b"not a database at all").unwrap();
        assert!(Store::open_read(&dir.path().join("junk.db")).is_err());
    }

    /// A damaged epoch blob is one clear error naming it, never a wrong counter.
    #[test]
    fn a_torn_blob_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let st = Store::open_or_create(&path).unwrap();
        let p = st.point("s", &[], 1).unwrap();
        for e in epochs(2) {
            st.append_sealed(&p, &e).unwrap();
        }
        st.conn
            .execute(
                "UPDATE epochs SET epoch = substr(epoch, 1, length(epoch) - 100) WHERE seq = 1",
                [],
            )
            .unwrap();
        let e = st.epochs(&p, 0, u64::MAX).unwrap_err().to_string();
        assert!(e.contains("epoch 1 of point s"), "{e}");
    }
}
