//! Ownership of child processes, so that none outlives Emacs.
//!
//! Each child starts in its own process group, gets `PR_SET_PDEATHSIG`
//! (SIGKILL) as a backstop for an Emacs that dies without running its
//! exit hooks, has every inherited descriptor from 3 up marked
//! close-on-exec, and is reaped as soon as it exits (its pidfd wakes the
//! shared runtime; no thread waits per child), so it never lingers as a
//! zombie. [`Owner::stop_all`] signals every group (TERM, then KILL
//! after a grace period) and is what Emacs's `kill-emacs-hook` calls.
//!
//! Children start only through [`Owner::start`], which hands a
//! [`Program`] to `spawn`. The parent-death signal fires when the
//! *thread* that started the child exits, so every start happens on one
//! long-lived spawner thread, never on a pool thread that may be retired.
//!
//! Known limit: a descendant that leaves the process group (`setsid`)
//! escapes [`Owner::stop_all`]; the sandbox's PID namespace is what
//! contains those.

use std::collections::HashMap;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::ExitStatus;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::spawn::{self, Program};
use crate::error::{Error, ErrorKind, Result};

/// Work for the spawner thread: it starts children, so that their
/// parent-death signal follows a thread that lives as long as Emacs.
type Job = Box<dyn FnOnce() + Send>;

/// Tracks process groups started by the module.
pub struct Owner {
    state: Arc<State>,
}

struct State {
    /// Process group id -> whether its leader is still unreaped.
    groups: Mutex<HashMap<i32, bool>>,
    leader_exited: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether any process that is not a zombie is still in group PGID.
///
/// Zombies count as gone: an orphaned member is reaped by init (or
/// whatever PID 1 is in a container), which may take its time.
fn group_exists(pgid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    if unsafe { libc::kill(-pgid, 0) } != 0 {
        return false;
    }
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return true;
    };
    procs.filter_map(|e| e.ok()).any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // Fields after "(comm)": state ppid pgrp ...
        let mut fields = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .unwrap_or("")
            .split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let pgrp = fields.nth(1).and_then(|f| f.parse::<i32>().ok());
        pgrp == Some(pgid) && state != "Z"
    })
}

fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: signals only the group we created; ESRCH is harmless.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

fn spawner() -> Result<&'static Sender<Job>> {
    static SPAWNER: OnceLock<std::result::Result<Sender<Job>, String>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("mevedel-spawner".into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .map(|_| tx)
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| {
            Error::new(
                ErrorKind::Exec,
                format!("cannot start the spawner thread: {e}"),
            )
        })
}

/// Run JOB on the spawner thread and return its answer.
fn on_spawner<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let gone = || Error::new(ErrorKind::Exec, "the spawner thread is gone");
    let (reply, answer) = mpsc::channel();
    spawner()?
        .send(Box::new(move || {
            let _ = reply.send(job());
        }))
        .map_err(|_| gone())?;
    answer.recv().map_err(|_| gone())
}

/// Reap PID once it exits, holding no thread while it runs: its pidfd
/// wakes the runtime. Without pidfds (Linux before 5.3) a blocking-pool
/// thread waits instead.
async fn reap(pid: i32) -> io::Result<ExitStatus> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd >= 0 {
        // SAFETY: FD was just opened and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        // SAFETY: the OwnedFd stays open, as the same descriptor, for as
        // long as the AsyncFd owns it.
        if let Ok(exit) = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            && exit.readable().await.is_ok()
        {
            return spawn::wait(pid);
        }
    }
    tokio::task::spawn_blocking(move || spawn::wait(pid))
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e.to_string())))
}

impl Default for Owner {
    fn default() -> Self {
        Self::new()
    }
}

impl Owner {
    pub fn new() -> Self {
        Owner {
            state: Arc::new(State {
                groups: Mutex::new(HashMap::new()),
                leader_exited: Condvar::new(),
            }),
        }
    }

    /// Start PROGRAM as an owned group (or session) leader without
    /// copying this process (see [`spawn`]); ON_EXIT gets the leader's
    /// status once it is reaped. The only way the module starts a child.
    pub fn start(&self, program: Program, on_exit: Option<OnExit>) -> Result<ChildInfo> {
        let pid = on_spawner(move || spawn::start(&program))?
            .map_err(|e| Error::io(ErrorKind::Exec, "cannot start the command", &e))?;
        let pgid = pid;
        self.prune();
        lock(&self.state.groups).insert(pgid, true);
        let state = Arc::clone(&self.state);
        let reaping = crate::runtime::spawn(async move {
            let status = reap(pid).await;
            lock(&state.groups).insert(pgid, false);
            state.leader_exited.notify_all();
            if let Some(notify) = on_exit {
                notify(status);
            }
        });
        if let Err(e) = reaping {
            signal_group(pgid, libc::SIGKILL);
            // SAFETY: reaps the child just killed, which nothing else waits for.
            unsafe {
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            lock(&self.state.groups).insert(pgid, false);
            return Err(e);
        }
        Ok(ChildInfo { pid: pid as u32 })
    }

    /// Forget groups whose leader was reaped and that have no member left.
    fn prune(&self) {
        lock(&self.state.groups).retain(|&pgid, leader_alive| *leader_alive || group_exists(pgid));
    }

    /// Process groups that still have members.
    pub fn live_groups(&self) -> Vec<i32> {
        self.prune();
        let mut groups: Vec<i32> = lock(&self.state.groups).keys().copied().collect();
        groups.sort_unstable();
        groups
    }

    /// [`Owner::stop_all`] with a grace of GRACE-MS, at most a minute.
    pub fn stop_all_ms(&self, grace_ms: i64) -> usize {
        self.stop_all(Duration::from_millis(grace_ms.clamp(0, 60_000) as u64))
    }

    /// Stop every owned group: SIGTERM, then SIGKILL to what is left after
    /// GRACE, then wait (bounded) for the leaders to be reaped. Returns the
    /// number of groups that were signalled.
    pub fn stop_all(&self, grace: Duration) -> usize {
        let targets = self.live_groups();
        for &pgid in &targets {
            signal_group(pgid, libc::SIGTERM);
        }
        let all_gone = |groups: &HashMap<i32, bool>| {
            groups
                .iter()
                .all(|(&pgid, &alive)| !alive && !group_exists(pgid))
        };
        self.wait_until(grace, all_gone);
        for &pgid in &targets {
            if group_exists(pgid) {
                signal_group(pgid, libc::SIGKILL);
            }
        }
        self.wait_until(Duration::from_secs(1), |groups| {
            groups.values().all(|alive| !alive)
        });
        self.prune();
        targets.len()
    }

    fn wait_until(&self, limit: Duration, done: impl Fn(&HashMap<i32, bool>) -> bool) {
        let deadline = Instant::now() + limit;
        let mut groups = lock(&self.state.groups);
        while !done(&groups) {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            // Group members other than the leader are not our children and
            // send no notification, so wake periodically to re-check them.
            let step = (deadline - now).min(Duration::from_millis(20));
            groups = self
                .state
                .leader_exited
                .wait_timeout(groups, step)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// Called by the reaper with the leader's exit status.
pub type OnExit = Box<dyn FnOnce(io::Result<ExitStatus>) + Send>;

/// Whether group PGID still has a live (non-zombie) member.
pub fn group_alive(pgid: i32) -> bool {
    group_exists(pgid)
}

/// The process group of the session below LEADER that bwrap's
/// `--new-session` made for the command (its first descendant leading a
/// session of its own), found through /proc.
pub fn inner_group(leader: i32) -> Option<i32> {
    // (pid, ppid, pgrp, session) of every live process.
    let procs: Vec<(i32, i32, i32, i32)> = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // Fields after "(comm)": state ppid pgrp session ...
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
            let state = fields.next()?;
            let mut num = || fields.next().and_then(|f| f.parse::<i32>().ok());
            let (ppid, pgrp, session) = (num()?, num()?, num()?);
            (state != "Z").then_some((pid, ppid, pgrp, session))
        })
        .collect();
    let mut frontier = vec![leader];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for &(pid, ppid, pgrp, session) in &procs {
            if frontier.contains(&ppid) {
                if session == pid {
                    return Some(pgrp);
                }
                next.push(pid);
            }
        }
        frontier = next;
    }
    None
}

/// Send SIGNAL to every member of group PGID.
pub fn signal(pgid: i32, signal: i32) {
    signal_group(pgid, signal);
}

/// What the caller learns about a started child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildInfo {
    pub pid: u32,
}

/// The owner of every process the module starts for Emacs.
pub fn global() -> &'static Owner {
    static OWNER: OnceLock<Owner> = OnceLock::new();
    OWNER.get_or_init(Owner::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: i32) -> bool {
        // A reaped or absent pid has no /proc entry; a zombie has state Z.
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z'),
            Err(_) => false,
        }
    }

    /// Start ITEMS through OWNER with no streams; returns the pid.
    fn spawn(owner: &Owner, items: &[&str]) -> u32 {
        let program = Program::new(items.iter().map(Into::into).collect());
        owner.start(program, None).expect("spawn").pid
    }

    #[test]
    fn stop_all_kills_group_members_too() {
        let owner = Owner::new();
        let dir = std::env::temp_dir().join(format!("mevedel-owner-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let pidfile = dir.join("grandchild");
        let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let pid = spawn(&owner, &["sh", "-c", &script]);
        let mut grandchild = None;
        for _ in 0..200 {
            if let Ok(text) = std::fs::read_to_string(&pidfile)
                && let Ok(n) = text.trim().parse::<i32>()
            {
                grandchild = Some(n);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let grandchild = grandchild.expect("grandchild never started");
        assert!(alive(pid as i32) && alive(grandchild));
        assert_eq!(owner.stop_all(Duration::from_millis(500)), 1);
        assert!(!alive(pid as i32), "leader survived");
        // The grandchild is reparented to init, which reaps it shortly.
        for _ in 0..100 {
            if !alive(grandchild) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(grandchild), "grandchild survived");
        assert!(owner.live_groups().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn exited_child_is_reaped_not_zombie() {
        let owner = Owner::new();
        let pid = spawn(&owner, &["true"]);
        for _ in 0..200 {
            if owner.live_groups().is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(owner.live_groups().is_empty());
        assert!(!alive(pid as i32));
    }

    #[test]
    fn running_children_hold_no_thread_each() {
        let threads = || std::fs::read_dir("/proc/self/task").map_or(0, Iterator::count);
        let owner = Owner::new();
        // Warm the spawner and the runtime, which start threads once.
        spawn(&owner, &["true"]);
        let before = threads();
        let (tx, exits) = mpsc::channel();
        for _ in 0..32 {
            let tx = tx.clone();
            let program = Program::new(["sleep", "1"].map(Into::into).to_vec());
            let exit: OnExit = Box::new(move |status| {
                let _ = tx.send(status.map(|s| s.success()));
            });
            owner.start(program, Some(exit)).expect("spawn");
        }
        let during = threads();
        // Other tests run meanwhile on their own threads, far fewer than 32.
        assert!(
            during < before + 16,
            "{before} threads grew to {during} for 32 children"
        );
        for _ in 0..32 {
            let ok = exits
                .recv_timeout(Duration::from_secs(10))
                .expect("no exit");
            assert!(matches!(ok, Ok(true)));
        }
    }

    #[test]
    fn watched_child_reports_status_through_a_kept_descriptor() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let owner = Owner::new();
        let (mut reader, writer) = io::pipe().expect("pipe");
        let fd = writer.as_raw_fd();
        // bash, not sh: dash cannot redirect to a descriptor above 9.
        let mut program = Program::new(
            ["bash", "-c", &format!("echo kept >&{fd}; exit 5")]
                .map(Into::into)
                .to_vec(),
        );
        program.fd_map.push((fd, fd));
        let (tx, exit) = mpsc::channel();
        owner
            .start(
                program,
                Some(Box::new(move |status| {
                    let _ = tx.send(status);
                })),
            )
            .expect("spawn");
        drop(writer);
        let status = exit
            .recv_timeout(Duration::from_secs(10))
            .expect("no status")
            .expect("wait");
        assert_eq!(status.code(), Some(5));
        let mut text = String::new();
        reader.read_to_string(&mut text).expect("read");
        assert_eq!(text, "kept\n");
    }

    #[test]
    fn child_runs_in_own_group_without_inherited_fds() {
        let owner = Owner::new();
        let (_reader, writer) = io::pipe().expect("pipe");
        // Make the pipe inheritable, as Emacs's channel descriptor is.
        use std::os::fd::AsRawFd;
        let fd = writer.as_raw_fd();
        // SAFETY: clearing FD_CLOEXEC on a descriptor we own.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
        let dir = std::env::temp_dir().join(format!("mevedel-fds-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let out = dir.join("out");
        let script = format!(
            "ls /proc/$$/fd > {0}; cut -d' ' -f5 /proc/$$/stat >> {0}",
            out.display()
        );
        let pid = spawn(&owner, &["sh", "-c", &script]);
        for _ in 0..200 {
            if owner.live_groups().is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        assert!(
            !text.lines().any(|l| l.trim() == fd.to_string()),
            "fd {fd} leaked: {text}"
        );
        assert!(
            text.lines().any(|l| l.trim() == pid.to_string()),
            "not a group leader: {text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
