//! The output plan of a command: every output file is checked before any work, written to
//! a temporary file in its own folder, and renamed over its destination only once every
//! output of the command has been written. A failure at any point (a folder that does not
//! exist, a full disk, a file-size limit, an error in the computation) leaves every
//! existing file as it was and removes the temporaries.
//!
//! Checks, before any work: the path is not empty and not a folder; its folder exists; a
//! file can be created there (a probe, removed at once: no temporary lingers while the
//! command computes); an existing destination is not read-only; no output names an input
//! (the same path after resolving `.`/`..`/symbolic links, or the same file through a hard
//! link) or another output.
//!
//! Writes go to a temporary `.NAME.PID.N.logot-tmp` next to the destination, flushed to
//! disk (`fsync`). Commit renames each over its destination (atomic within a folder); an
//! existing destination is first hard-linked to a backup name, so that a rename failing
//! part-way puts back the files already replaced. Destinations that are not regular files
//! (`/dev/null`, a FIFO) are written directly, first.

use crate::input;
use crate::npy;
use logot::{Error, Real, Result};
use ndarray::{ArrayView, Dimension};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Temporaries and backups of this process are numbered from here.
static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// One output of the command.
struct Slot {
    /// The flag (`--out`, `--grad-mu`, …).
    flag: String,
    /// The path as given on the command line (echoed in the JSON and in messages).
    given: String,
    /// The destination with its folder resolved (symbolic links followed).
    dest: PathBuf,
    /// The permissions of the file `dest` replaces.
    old_permissions: Option<fs::Permissions>,
    target: Target,
    written: bool,
}

enum Target {
    /// A temporary next to `dest` once written, renamed over it at commit (`None` before
    /// the write and after the rename).
    Temp { path: Option<PathBuf> },
    /// An existing destination that is not a regular file (a device, a FIFO): its bytes,
    /// written at commit.
    Direct { bytes: Vec<u8> },
}

/// The outputs of one command, prepared by [`Outputs::prepare`], filled by
/// [`Outputs::write`] and published by [`Outputs::commit`]; dropping it without a commit
/// removes the temporaries and leaves every destination untouched.
pub struct Outputs {
    slots: Vec<Slot>,
}

fn file_err(path: &str, flag: &str, msg: impl std::fmt::Display) -> Error {
    npy::file_err(path, format!("{flag}: {msg}"))
}

/// What identifies a file: its device and inode (Unix), else nothing beyond its path.
#[cfg(unix)]
fn file_id(m: &Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn file_id(_: &Metadata) -> Option<(u64, u64)> {
    None
}

/// A file a check compares: its resolved path and, when it exists, its identity.
struct Known {
    path: Option<PathBuf>,
    id: Option<(u64, u64)>,
}

impl Known {
    fn same(&self, other: &Known) -> bool {
        (self.id.is_some() && self.id == other.id)
            || (self.path.is_some() && self.path == other.path)
    }
}

/// Where an output goes: its resolved destination and the metadata of an existing file.
fn resolve(flag: &str, given: &str) -> Result<(PathBuf, Option<Metadata>)> {
    if given.is_empty() {
        return Err(Error::parameter(flag, "\"\"", "an output path is needed"));
    }
    let path = Path::new(given);
    match fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(file_err(
            given,
            flag,
            "is a folder; give a file path for the output",
        )),
        Ok(m) => {
            let dest = fs::canonicalize(path).map_err(|e| file_err(given, flag, e))?;
            Ok((dest, Some(m)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if fs::symlink_metadata(path).is_ok() {
                return Err(file_err(
                    given,
                    flag,
                    "is a symbolic link to a missing file; give the file path itself",
                ));
            }
            let name = match path.file_name() {
                Some(n) if !given.ends_with('/') => n,
                _ => {
                    return Err(file_err(
                        given,
                        flag,
                        "names a folder; give a file path for the output",
                    ))
                }
            };
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let folder = parent.to_string_lossy();
            match fs::metadata(parent) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(file_err(given, flag, format!("{folder} is not a folder"))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(file_err(
                        given,
                        flag,
                        format!("the folder {folder} does not exist"),
                    ))
                }
                Err(e) => return Err(file_err(given, flag, format!("{folder}: {e}"))),
            }
            let dir = fs::canonicalize(parent).map_err(|e| file_err(given, flag, e))?;
            Ok((dir.join(name), None))
        }
        Err(e) => Err(file_err(given, flag, e)),
    }
}

/// A sibling of `dest` named `.NAME.PID.N.SUFFIX` that does not exist yet.
fn sibling(dest: &Path, suffix: &str) -> PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Keep the name short enough for the file system's limit (255 bytes).
    let short: String = name.chars().take(80).collect();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dest.with_file_name(format!(".{short}.{}.{n}.{suffix}", std::process::id()))
}

/// Create a fresh temporary next to `dest`, with the permissions of the file it replaces.
fn create_temp(
    flag: &str,
    given: &str,
    dest: &Path,
    permissions: Option<&fs::Permissions>,
) -> Result<(PathBuf, File)> {
    let folder = dest
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    for _ in 0..100 {
        let path = sibling(dest, "logot-tmp");
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => {
                if let Some(perm) = permissions {
                    if let Err(e) = fs::set_permissions(&path, perm.clone()) {
                        let _ = fs::remove_file(&path);
                        return Err(file_err(given, flag, e));
                    }
                }
                return Ok((path, file));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(file_err(
                    given,
                    flag,
                    format!("cannot create a file in the folder {folder}: {e}"),
                ))
            }
        }
    }
    Err(file_err(
        given,
        flag,
        format!("cannot create a temporary file in the folder {folder}"),
    ))
}

impl Outputs {
    /// Check the outputs (`(flag, path)`, `None` for an output not asked for) against each
    /// other and against the inputs (`(flag, path or FILE.npz:NAME)`), and create their
    /// temporaries. Call before any work.
    pub fn prepare(
        inputs: &[(&str, Option<&str>)],
        outputs: &[(&str, Option<&str>)],
    ) -> Result<Outputs> {
        let inputs: Vec<(&str, &str, Known)> = inputs
            .iter()
            .filter_map(|(flag, spec)| spec.map(|s| (*flag, s)))
            .map(|(flag, spec)| {
                let file = input::source(spec).file;
                let known = Known {
                    path: fs::canonicalize(&file).ok(),
                    id: fs::metadata(&file).ok().as_ref().and_then(file_id),
                };
                (flag, spec, known)
            })
            .collect();
        let mut planned: Vec<(&str, &str, PathBuf, Option<Metadata>)> = Vec::new();
        for (flag, given) in outputs.iter().filter_map(|(f, p)| p.map(|p| (*f, p))) {
            let (dest, old) = resolve(flag, given)?;
            let known = Known {
                path: Some(dest.clone()),
                id: old.as_ref().and_then(file_id),
            };
            if let Some((in_flag, spec, _)) = inputs.iter().find(|(_, _, k)| k.same(&known)) {
                return Err(Error::parameter(
                    flag,
                    given,
                    format!(
                        "is the same file as the input {in_flag} ({spec}); an output never \
                         overwrites an input, give {flag} another path"
                    ),
                ));
            }
            if let Some((other, other_path, ..)) = planned.iter().find(|(_, _, d, m)| {
                Known {
                    path: Some(d.clone()),
                    id: m.as_ref().and_then(file_id),
                }
                .same(&known)
            }) {
                return Err(Error::parameter(
                    flag,
                    given,
                    format!(
                        "is the same file as the output {other} ({other_path}); each output \
                         needs its own file"
                    ),
                ));
            }
            if let Some(m) = &old {
                if m.is_file() && m.permissions().readonly() {
                    return Err(file_err(
                        given,
                        flag,
                        "the file is read-only; make it writable or give another path",
                    ));
                }
            }
            planned.push((flag, given, dest, old));
        }
        let mut out = Outputs { slots: Vec::new() };
        for (flag, given, dest, old) in planned {
            let target = match &old {
                Some(m) if !m.is_file() => Target::Direct { bytes: Vec::new() },
                _ => {
                    // The probe: the folder takes a new file (removed at once).
                    let (probe, file) = create_temp(flag, given, &dest, None)?;
                    drop(file);
                    let _ = fs::remove_file(probe);
                    Target::Temp { path: None }
                }
            };
            out.slots.push(Slot {
                flag: flag.into(),
                given: given.into(),
                dest,
                old_permissions: old.map(|m| m.permissions()),
                target,
                written: false,
            });
        }
        Ok(out)
    }

    /// Whether output `flag` is asked for.
    pub fn has(&self, flag: &str) -> bool {
        self.slots.iter().any(|s| s.flag == flag)
    }

    /// Refuse, before any work, an output `flag` of `values` numbers of `item` bytes (its
    /// .npy header added) that cannot be made: its bytes past the file-size limit
    /// (`ulimit -f`) or past the free space of its file system, or (a destination that is
    /// not a regular file, whose bytes are held until the commit) past what can be
    /// allocated. `what` says what the output is, in messages. An output not asked for, or
    /// of a size that overflows, is left to the computation's own checks.
    pub fn check_room(&self, flag: &str, what: &str, shape: &[usize], item: usize) -> Result<()> {
        let Some(slot) = self.slots.iter().find(|s| s.flag == flag) else {
            return Ok(());
        };
        let Some(data) = shape.iter().try_fold(item, |acc, &d| acc.checked_mul(d)) else {
            return Ok(());
        };
        let bytes = (npy::npy_header(item == 4, shape).len() + data) as u64;
        let refuse = |why: String| {
            file_err(
                &slot.given,
                flag,
                format!("{what} needs {} ({bytes} bytes), {why}", human_bytes(bytes)),
            )
        };
        match &slot.target {
            Target::Direct { .. } => {
                if Vec::<u8>::new().try_reserve_exact(bytes as usize).is_err() {
                    return Err(refuse("which cannot be allocated".into()));
                }
            }
            Target::Temp { .. } => {
                if let Some(limit) = file_size_limit().filter(|&l| bytes > l) {
                    return Err(refuse(format!(
                        "more than the file-size limit of {limit} bytes (ulimit -f)"
                    )));
                }
                let folder = slot.dest.parent().unwrap_or(Path::new("."));
                if let Some(free) = free_space(folder).filter(|&f| bytes > f) {
                    return Err(refuse(format!(
                        "more than the {} free in {}",
                        human_bytes(free),
                        folder.display()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Write the array of output `flag` (as .npy, in the precision `T`) to its temporary.
    /// An output not asked for is skipped.
    pub fn write<T: Real, D: Dimension>(
        &mut self,
        flag: &str,
        a: ArrayView<'_, T, D>,
    ) -> Result<()> {
        let Some(slot) = self.slots.iter_mut().find(|s| s.flag == flag) else {
            return Ok(());
        };
        let rename = |e: Error| match e {
            Error::File { path, msg } => file_err(&path, flag, msg),
            e => e,
        };
        match &mut slot.target {
            Target::Temp { path } => {
                if let Some(old) = path.take() {
                    let _ = fs::remove_file(old); // written twice: the last one counts
                }
                let (tmp, mut file) =
                    create_temp(flag, &slot.given, &slot.dest, slot.old_permissions.as_ref())?;
                // Recorded first, so a failed write is removed (by `drop`).
                *path = Some(tmp);
                npy::write_to(&slot.given, &mut file, a).map_err(rename)?;
                file.sync_all()
                    .map_err(|e| file_err(&slot.given, flag, format!("cannot write .npy: {e}")))?;
            }
            Target::Direct { bytes } => {
                bytes.clear();
                npy::write_to(&slot.given, &mut *bytes, a).map_err(rename)?;
            }
        }
        slot.written = true;
        Ok(())
    }

    /// Publish every output (see the module docs) and return them as a JSON object,
    /// flag → path as given.
    pub fn commit(mut self) -> Result<serde_json::Value> {
        if let Some(s) = self.slots.iter().find(|s| !s.written) {
            return Err(file_err(
                &s.given,
                &s.flag,
                "nothing was written to this output",
            ));
        }
        for s in &mut self.slots {
            if let Target::Direct { bytes } = &s.target {
                OpenOptions::new()
                    .write(true)
                    .open(&s.dest)
                    .and_then(|mut f| f.write_all(bytes))
                    .map_err(|e| file_err(&s.given, &s.flag, e))?;
            }
        }
        // (slot index, backup of the file it replaced)
        let mut done: Vec<(usize, Option<PathBuf>)> = Vec::new();
        let mut failure = None;
        for (i, s) in self.slots.iter_mut().enumerate() {
            let Target::Temp { path } = &mut s.target else {
                continue;
            };
            let Some(tmp) = path.clone() else { continue };
            let backup = if s.dest.exists() {
                let b = sibling(&s.dest, "logot-old");
                fs::hard_link(&s.dest, &b).ok().map(|_| b)
            } else {
                None
            };
            match fs::rename(&tmp, &s.dest) {
                Ok(()) => {
                    *path = None;
                    done.push((i, backup));
                }
                Err(e) => {
                    if let Some(b) = backup {
                        let _ = fs::remove_file(b);
                    }
                    failure = Some(file_err(
                        &s.given,
                        &s.flag,
                        format!("cannot replace the file: {e}"),
                    ));
                    break;
                }
            }
        }
        if let Some(err) = failure {
            // Put back what was replaced: the old file from its backup, or no file.
            for (i, backup) in done.into_iter().rev() {
                let dest = &self.slots[i].dest;
                match backup {
                    Some(b) => {
                        let _ = fs::rename(b, dest);
                    }
                    None => {
                        let _ = fs::remove_file(dest);
                    }
                }
            }
            return Err(err);
        }
        for (_, backup) in done {
            if let Some(b) = backup {
                let _ = fs::remove_file(b);
            }
        }
        let mut map = serde_json::Map::new();
        for s in &self.slots {
            map.insert(s.flag.clone(), s.given.clone().into());
        }
        Ok(map.into())
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        for s in &mut self.slots {
            if let Target::Temp { path: Some(p) } = &s.target {
                let _ = fs::remove_file(p);
            }
        }
    }
}

/// `bytes` in the largest unit that keeps it at least 1 (kB, MB, GB, TB: powers of 1000).
pub fn human_bytes(bytes: u64) -> String {
    let units = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    match units.iter().find(|(_, u)| bytes as f64 >= *u) {
        Some((name, u)) => format!("{:.1} {name}", bytes as f64 / u),
        None => format!("{bytes} B"),
    }
}

/// The file-size limit of this process (`RLIMIT_FSIZE`, `ulimit -f`), `None` when there is
/// none.
#[cfg(unix)]
#[allow(clippy::unnecessary_cast)] // rlim_t is u64 on Linux, not on every unix
fn file_size_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim) } == 0;
    (ok && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur as u64)
}

#[cfg(not(unix))]
fn file_size_limit() -> Option<u64> {
    None
}

/// The bytes an unprivileged process may still write on the file system of `folder`
/// (`statvfs`: available blocks × fragment size), `None` when it cannot be told.
#[cfg(unix)]
#[allow(clippy::unnecessary_cast)] // fsblkcnt_t and c_ulong are u64 on 64-bit Linux only
fn free_space(folder: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(folder.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string and `st` a statvfs for the call to fill.
    let ok = unsafe { libc::statvfs(path.as_ptr(), &mut st) } == 0;
    ok.then(|| (st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(not(unix))]
fn free_space(_: &Path) -> Option<u64> {
    None
}
