//! Checkpoints: what each turn's edits found before they changed a file,
//! so that the workspace can be rewound to the start of any turn.
//!
//! A turn's first edit of a path records the path's bytes then (or that
//! it did not exist) as a content-addressed blob in `blobs/` beside
//! `session.sqlite`, written once however many turns share it. After
//! each edit the store remembers the digest of what the session left in
//! the file, so that a rewind can tell the user's later changes from its
//! own. Turns that ran other tools which may change files (Bash, Eval…)
//! are marked: their effects cannot be rewound, only named.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{OptionalExtension, params};
use sha2::{Digest, Sha256};

use super::Store;
use crate::datum::Datum;
use crate::error::{Error, ErrorKind, Result};
use crate::patch;

/// A file as an edit found it (or left it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    /// Absolute path.
    pub path: String,
    /// The bytes, or `None` when the file did not exist.
    pub content: Option<Vec<u8>>,
    /// Unix permission bits, when the file existed.
    pub mode: Option<u32>,
}

impl FileState {
    /// PATH as it is now; `None` for a directory or other non-file,
    /// which no checkpoint covers.
    pub fn read(path: &str) -> Result<Option<FileState>> {
        use std::os::unix::fs::PermissionsExt;
        let missing = FileState {
            path: path.to_string(),
            content: None,
            mode: None,
        };
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Some(missing)),
            Err(e) => Err(io_error("Cannot read", Path::new(path), e)),
            Ok(meta) if !meta.is_file() => Ok(None),
            Ok(meta) => {
                let content =
                    std::fs::read(path).map_err(|e| io_error("Cannot read", Path::new(path), e))?;
                Ok(Some(FileState {
                    path: path.to_string(),
                    content: Some(content),
                    mode: Some(meta.permissions().mode() & 0o7777),
                }))
            }
        }
    }

    /// Each of PATHS as it is now, leaving out what no checkpoint covers.
    pub fn read_all(paths: &[String]) -> Result<Vec<FileState>> {
        let mut states = Vec::with_capacity(paths.len());
        for path in paths {
            states.extend(FileState::read(path)?);
        }
        Ok(states)
    }
}

/// A turn with checkpoints or Bash calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    pub id: String,
    /// Order among the session's turns (increasing, with gaps).
    pub seq: i64,
    /// Position among the recorded turns, from 1.
    pub number: i64,
    pub label: String,
    /// Milliseconds since the Unix epoch of the turn's first record.
    pub started_at: i64,
    pub bash: bool,
    /// Paths whose before-state the turn recorded, sorted.
    pub files: Vec<String>,
}

impl Turn {
    pub fn to_datum(&self) -> Datum {
        Datum::plist([
            ("id", Datum::str(&self.id)),
            ("seq", Datum::Int(self.seq)),
            ("number", Datum::Int(self.number)),
            ("label", Datum::str(&self.label)),
            ("started-at", Datum::Int(self.started_at)),
            ("bash", Datum::bool(self.bash)),
            (
                "files",
                Datum::List(self.files.iter().map(Datum::str).collect()),
            ),
        ])
    }
}

/// What restoring one path to the start of a turn means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    pub path: String,
    /// The digest of the bytes to restore, `None` to delete the file.
    pub blob: Option<String>,
    pub mode: Option<u32>,
    /// The digest of what the session's last edit left (`None`: it
    /// deleted the file), to tell whether someone changed it since.
    pub left: Option<Option<String>>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The hex SHA-256 digest of BYTES.
pub fn digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for b in hash {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

fn io_error(doing: &str, path: &Path, e: std::io::Error) -> Error {
    Error::new(ErrorKind::Store, format!("{doing} {}: {e}", path.display()))
}

impl Store {
    /// Where checkpoint blobs live: `blobs/` beside the store's file.
    pub fn blobs_dir(&self) -> PathBuf {
        self.path()
            .parent()
            .map_or_else(|| PathBuf::from("blobs"), |dir| dir.join("blobs"))
    }

    fn blob_path(&self, hex: &str) -> PathBuf {
        self.blobs_dir().join(&hex[..2.min(hex.len())]).join(hex)
    }

    /// Store BYTES as a blob unless it is there already; return its digest.
    fn put_blob(&self, bytes: &[u8]) -> Result<String> {
        let hex = digest(bytes);
        let path = self.blob_path(&hex);
        if path.exists() {
            return Ok(hex);
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)
            .map_err(|e| io_error("Cannot create the checkpoint directory", dir, e))?;
        let temp = dir.join(format!(".{hex}.{}.tmp", std::process::id()));
        let written = std::fs::File::create(&temp)
            .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&temp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(io_error("Cannot write the checkpoint blob", &path, e));
        }
        Ok(hex)
    }

    /// The bytes of blob HEX.
    pub fn read_blob(&self, hex: &str) -> Result<Vec<u8>> {
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::new(
                ErrorKind::Store,
                format!("Not a checkpoint blob digest: {hex:?}"),
            ));
        }
        let path = self.blob_path(hex);
        std::fs::read(&path).map_err(|e| io_error("Cannot read the checkpoint blob", &path, e))
    }

    /// Record that turn ID (LABEL: what the user asked) exists, once.
    fn ensure_turn(tx: &rusqlite::Transaction<'_>, id: &str, label: &str) -> rusqlite::Result<()> {
        tx.execute(
            "INSERT OR IGNORE INTO checkpoint_turns (id, label, started_at) VALUES (?1, ?2, ?3)",
            params![id, label, now_ms()],
        )?;
        Ok(())
    }

    /// Record the before-state of FILES for turn ID; a path the turn
    /// recorded already keeps its first state. Returns how many paths
    /// were new to the turn.
    pub fn checkpoint_before(&self, id: &str, label: &str, files: &[FileState]) -> Result<usize> {
        let known: Vec<String> = self.with("Cannot record a checkpoint", |c| {
            c.prepare_cached("SELECT path FROM checkpoints WHERE turn = ?1")?
                .query_map([id], |row| row.get(0))?
                .collect()
        })?;
        let mut new = Vec::with_capacity(files.len());
        for file in files.iter().filter(|f| !known.contains(&f.path)) {
            let blob = match &file.content {
                Some(bytes) => Some(self.put_blob(bytes)?),
                None => None,
            };
            new.push((file, blob));
        }
        self.with("Cannot record a checkpoint", |c| {
            let tx = c.transaction()?;
            Self::ensure_turn(&tx, id, label)?;
            let mut added = 0;
            {
                let mut stmt = tx.prepare_cached(
                    "INSERT OR IGNORE INTO checkpoints (turn, path, blob, mode) VALUES (?1, ?2, ?3, ?4)",
                )?;
                for (file, blob) in &new {
                    added += stmt.execute(params![id, file.path, blob, file.mode])?;
                }
            }
            tx.commit()?;
            Ok(added)
        })
    }

    /// Remember what the session's edit left in each of FILES.
    pub fn checkpoint_after(&self, files: &[FileState]) -> Result<()> {
        self.with("Cannot record a checkpoint", |c| {
            let tx = c.transaction()?;
            {
                let mut stmt = tx.prepare_cached(
                    "INSERT INTO checkpoint_left (path, blob) VALUES (?1, ?2)
                     ON CONFLICT (path) DO UPDATE SET blob = excluded.blob",
                )?;
                for file in files {
                    stmt.execute(params![file.path, file.content.as_deref().map(digest)])?;
                }
            }
            tx.commit()
        })
    }

    /// Mark turn ID as one whose Bash calls may have changed files.
    pub fn checkpoint_note_bash(&self, id: &str, label: &str) -> Result<()> {
        self.with("Cannot record a checkpoint", |c| {
            let tx = c.transaction()?;
            Self::ensure_turn(&tx, id, label)?;
            tx.execute("UPDATE checkpoint_turns SET bash = 1 WHERE id = ?1", [id])?;
            tx.commit()
        })
    }

    /// The session's recorded turns, oldest first.
    pub fn checkpoint_turns(&self) -> Result<Vec<Turn>> {
        self.with("Cannot list the checkpoints", |c| {
            let mut turns = c
                .prepare_cached(
                    "SELECT id, seq, label, started_at, bash FROM checkpoint_turns ORDER BY seq",
                )?
                .query_map([], |row| {
                    Ok(Turn {
                        id: row.get(0)?,
                        seq: row.get(1)?,
                        label: row.get(2)?,
                        started_at: row.get(3)?,
                        bash: row.get::<_, i64>(4)? != 0,
                        number: 0,
                        files: Vec::new(),
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let mut files =
                c.prepare_cached("SELECT path FROM checkpoints WHERE turn = ?1 ORDER BY path")?;
            for (turn, number) in turns.iter_mut().zip(1..) {
                turn.number = number;
                turn.files = files
                    .query_map([&turn.id], |row| row.get(0))?
                    .collect::<rusqlite::Result<Vec<String>>>()?;
            }
            Ok(turns)
        })
    }

    fn turn_seq(c: &rusqlite::Connection, id: &str) -> rusqlite::Result<Option<i64>> {
        c.query_row(
            "SELECT seq FROM checkpoint_turns WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .optional()
    }

    /// What restoring the workspace to the start of turn ID takes: per
    /// path any turn from ID on recorded, its earliest recorded state.
    pub fn checkpoint_rewind_plan(&self, id: &str) -> Result<Vec<Restore>> {
        self.with("Cannot plan the rewind", |c| {
            let Some(seq) = Self::turn_seq(c, id)? else {
                return Ok(Vec::new());
            };
            c.prepare_cached(
                "SELECT k.path, k.blob, k.mode, l.path IS NOT NULL, l.blob
                 FROM checkpoints k JOIN checkpoint_turns t ON t.id = k.turn
                 LEFT JOIN checkpoint_left l ON l.path = k.path
                 WHERE t.seq >= ?1
                   AND t.seq = (SELECT MIN(t2.seq) FROM checkpoints k2
                                JOIN checkpoint_turns t2 ON t2.id = k2.turn
                                WHERE k2.path = k.path AND t2.seq >= ?1)
                 ORDER BY k.path",
            )?
            .query_map([seq], |row| {
                Ok(Restore {
                    path: row.get(0)?,
                    blob: row.get(1)?,
                    mode: row.get(2)?,
                    left: if row.get::<_, bool>(3)? {
                        Some(row.get(4)?)
                    } else {
                        None
                    },
                })
            })?
            .collect()
        })
    }

    /// Forget turn ID and every later turn (after a rewind to its start).
    pub fn checkpoint_forget_from(&self, id: &str) -> Result<()> {
        self.with("Cannot forget the checkpoints", |c| {
            let tx = c.transaction()?;
            if let Some(seq) = Self::turn_seq(&tx, id)? {
                tx.execute(
                    "DELETE FROM checkpoints WHERE turn IN (SELECT id FROM checkpoint_turns WHERE seq >= ?1)",
                    [seq],
                )?;
                tx.execute("DELETE FROM checkpoint_turns WHERE seq >= ?1", [seq])?;
            }
            tx.commit()
        })
    }
}

/// One path of a rewind, as Lisp is told of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindStep {
    pub path: String,
    /// Restored bytes, or removed (it did not exist before the turn).
    pub restore: bool,
    /// The file is not as the session's last edit left it: someone
    /// changed it since.
    pub changed: bool,
}

impl RewindStep {
    pub fn to_datum(&self) -> Datum {
        Datum::plist([
            ("path", Datum::str(&self.path)),
            (
                "action",
                Datum::Symbol(if self.restore { "restore" } else { "delete" }.into()),
            ),
            ("changed", Datum::bool(self.changed)),
        ])
    }
}

impl Store {
    /// The paths a rewind to the start of turn ID changes (those not in
    /// their before-state already), each with its bytes now.
    fn rewind_targets(&self, id: &str) -> Result<Vec<(Restore, Option<Vec<u8>>)>> {
        let mut targets = Vec::new();
        for r in self.checkpoint_rewind_plan(id)? {
            let now = FileState::read(&r.path)?.and_then(|s| s.content);
            if now.as_deref().map(digest) != r.blob {
                targets.push((r, now));
            }
        }
        Ok(targets)
    }

    fn step(r: &Restore, now: Option<&[u8]>) -> RewindStep {
        let now = now.map(digest);
        RewindStep {
            path: r.path.clone(),
            restore: r.blob.is_some(),
            // Without a settled edit to compare with, any difference counts.
            changed: r.left.as_ref().is_none_or(|left| *left != now),
        }
    }

    /// What rewinding to the start of turn ID would do, path by path.
    pub fn rewind_steps(&self, id: &str) -> Result<Vec<RewindStep>> {
        Ok(self
            .rewind_targets(id)?
            .iter()
            .map(|(r, now)| Self::step(r, now.as_deref()))
            .collect())
    }

    /// Restore every file turn ID and later turns recorded to its state
    /// before ID, all or none, then forget those turns. Returns the
    /// steps taken.
    pub fn rewind(&self, id: &str) -> Result<Vec<RewindStep>> {
        let targets = self.rewind_targets(id)?;
        let mut actions = Vec::with_capacity(targets.len());
        let mut after = Vec::with_capacity(targets.len());
        for (r, _) in &targets {
            let path = PathBuf::from(&r.path);
            let content = match &r.blob {
                Some(hex) => Some(self.read_blob(hex)?),
                None => None,
            };
            actions.push(match &content {
                Some(bytes) => patch::commit::Action::Write {
                    display: r.path.clone(),
                    path,
                    bytes: bytes.clone(),
                    mode: r.mode,
                },
                None => patch::commit::Action::Remove {
                    display: r.path.clone(),
                    path,
                },
            });
            after.push(FileState {
                path: r.path.clone(),
                content,
                mode: r.mode,
            });
        }
        let expect: Vec<_> = targets
            .iter()
            .map(|(r, now)| patch::commit::Expect {
                display: r.path.clone(),
                path: PathBuf::from(&r.path),
                bytes: now.as_deref(),
            })
            .collect();
        patch::commit::commit(&expect, &actions)?;
        self.checkpoint_after(&after)?;
        self.checkpoint_forget_from(id)?;
        Ok(targets
            .iter()
            .map(|(r, now)| Self::step(r, now.as_deref()))
            .collect())
    }

    /// One unified diff of every file the session's edits touched: its
    /// state before the first turn that edited it against the disk now.
    pub fn session_diff(&self) -> Result<String> {
        let Some(first) = self.checkpoint_turns()?.into_iter().next() else {
            return Ok(String::new());
        };
        let mut out = String::new();
        for r in self.checkpoint_rewind_plan(&first.id)? {
            let before = match &r.blob {
                Some(hex) => self.read_blob(hex)?,
                None => Vec::new(),
            };
            let now = FileState::read(&r.path)?
                .and_then(|s| s.content)
                .unwrap_or_default();
            if before == now {
                continue;
            }
            let old_name = if r.blob.is_some() {
                r.path.as_str()
            } else {
                "/dev/null"
            };
            let new_name = if Path::new(&r.path).exists() {
                r.path.as_str()
            } else {
                "/dev/null"
            };
            out.push_str(&patch::diff::whole_file(&before, &now, old_name, new_name));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(name: &str) -> (Store, PathBuf) {
        let dir = std::env::temp_dir().join(format!("mevedel-ckpt-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        (Store::open(&dir.join("session.sqlite")).unwrap(), dir)
    }

    fn state(path: &str, content: Option<&str>) -> FileState {
        FileState {
            path: path.into(),
            content: content.map(|c| c.as_bytes().to_vec()),
            mode: content.map(|_| 0o644),
        }
    }

    #[test]
    fn first_state_per_turn_wins_and_blobs_are_shared() {
        let (s, dir) = store("first");
        assert_eq!(
            s.checkpoint_before("t1", "fix a", &[state("/w/a", Some("one"))])
                .unwrap(),
            1
        );
        // A second edit of the same path in the same turn keeps the first state.
        assert_eq!(
            s.checkpoint_before("t1", "fix a", &[state("/w/a", Some("two"))])
                .unwrap(),
            0
        );
        s.checkpoint_before(
            "t2",
            "more",
            &[state("/w/a", Some("one")), state("/w/new", None)],
        )
        .unwrap();
        let blobs: Vec<_> = walk(&s.blobs_dir());
        assert_eq!(blobs.len(), 1, "{blobs:?}");
        let turns = s.checkpoint_turns().unwrap();
        assert_eq!(
            turns.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["t1", "t2"]
        );
        assert_eq!(turns[1].files, ["/w/a", "/w/new"]);
        assert_eq!(turns[0].label, "fix a");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.path().is_dir() {
                out.extend(walk(&entry.path()));
            } else {
                out.push(entry.path());
            }
        }
        out
    }

    #[test]
    fn rewind_plan_takes_the_earliest_state_from_the_turn_on() {
        let (s, dir) = store("plan");
        s.checkpoint_before("t1", "a", &[state("/w/a", Some("a0"))])
            .unwrap();
        s.checkpoint_after(&[state("/w/a", Some("a1"))]).unwrap();
        s.checkpoint_before("t2", "b", &[state("/w/a", Some("a1")), state("/w/b", None)])
            .unwrap();
        s.checkpoint_after(&[state("/w/a", Some("a2")), state("/w/b", Some("b1"))])
            .unwrap();
        s.checkpoint_note_bash("t3", "run").unwrap();
        let plan = s.checkpoint_rewind_plan("t2").unwrap();
        assert_eq!(plan.len(), 2);
        assert_eq!(plan[0].path, "/w/a");
        assert_eq!(
            s.read_blob(plan[0].blob.as_deref().unwrap()).unwrap(),
            b"a1"
        );
        assert_eq!(plan[0].left, Some(Some(digest(b"a2"))));
        assert_eq!(
            (plan[1].path.as_str(), plan[1].blob.as_deref()),
            ("/w/b", None)
        );
        let from_start = s.checkpoint_rewind_plan("t1").unwrap();
        assert_eq!(
            s.read_blob(from_start[0].blob.as_deref().unwrap()).unwrap(),
            b"a0"
        );
        assert!(s.checkpoint_turns().unwrap()[2].bash);
        assert!(s.checkpoint_rewind_plan("nope").unwrap().is_empty());
        s.checkpoint_forget_from("t2").unwrap();
        let left: Vec<_> = s
            .checkpoint_turns()
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(left, ["t1"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn rewind_restores_and_removes_then_forgets() {
        let (s, dir) = store("rewind");
        let a = dir.join("a").to_string_lossy().into_owned();
        let b = dir.join("b").to_string_lossy().into_owned();
        std::fs::write(&a, "a0").unwrap();
        s.checkpoint_before(
            "t1",
            "x",
            &FileState::read_all(&[a.clone(), b.clone()]).unwrap(),
        )
        .unwrap();
        std::fs::write(&a, "a1").unwrap();
        std::fs::write(&b, "b1").unwrap();
        s.checkpoint_after(&FileState::read_all(&[a.clone(), b.clone()]).unwrap())
            .unwrap();
        let steps = s.rewind_steps("t1").unwrap();
        assert_eq!(
            steps
                .iter()
                .map(|s| (s.restore, s.changed))
                .collect::<Vec<_>>(),
            [(true, false), (false, false)]
        );
        let diff = s.session_diff().unwrap();
        assert!(
            diff.contains("-a0") && diff.contains("+a1") && diff.contains("+b1"),
            "{diff}"
        );
        s.rewind("t1").unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "a0");
        assert!(!Path::new(&b).exists());
        assert!(s.checkpoint_turns().unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_bad_digest_is_refused_without_touching_the_disk() {
        let (s, dir) = store("digest");
        let err = s.read_blob("../../etc/passwd").unwrap_err();
        assert!(
            err.message.contains("Not a checkpoint blob digest"),
            "{}",
            err.message
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
