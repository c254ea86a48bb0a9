//! Ownership of child processes, so that none outlives Emacs.
//!
//! Each child starts in its own process group, gets `PR_SET_PDEATHSIG`
//! (SIGKILL) as a backstop for an Emacs that dies without running its
//! exit hooks, has every inherited descriptor from 3 up marked
//! close-on-exec, and is waited on by a reaper thread so it never lingers
//! as a zombie. [`Owner::stop_all`] signals every group (TERM, then KILL
//! after a grace period) and is what Emacs's `kill-emacs-hook` calls.
//!
//! The parent-death signal fires when the *thread* that forked exits, so
//! all forks happen on one long-lived spawner thread, never on a pool
//! thread that may be retired.
//!
//! Known limit: a descendant that leaves the process group (`setsid`)
//! escapes [`Owner::stop_all`]; the sandbox's PID namespace is what
//! contains those.

use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

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

/// Prepare COMMAND's child side; runs between fork and exec, so only
/// async-signal-safe calls. With NEW_SESSION the child leads a new
/// session whose controlling terminal is its stdin (a PTY); otherwise it
/// leads a new process group. Either way its pid is its group id.
/// FD_MAP places descriptors at fixed numbers (source, target) after
/// every other inherited descriptor was marked close-on-exec.
fn confine_lifetime(command: &mut Command, fd_map: Vec<(RawFd, RawFd)>, new_session: bool) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure makes only async-signal-safe syscalls.
    unsafe {
        command.pre_exec(move || {
            if new_session {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            // Descriptors Emacs or other modules left inheritable (the
            // event channel among them) must not reach the command.
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            for &(from, to) in &fd_map {
                let placed = if from == to {
                    libc::fcntl(from, libc::F_SETFD, 0)
                } else {
                    libc::dup2(from, to)
                };
                if placed < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
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

    /// Start ARGV in CWD as the leader of a new owned process group, with
    /// stdin, stdout and stderr at /dev/null. Returns the leader's pid,
    /// which is also the group id.
    pub fn spawn(&self, argv: &[String], cwd: Option<&Path>) -> Result<u32> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| Error::new(ErrorKind::Exec, "empty command"))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(dir) = cwd {
            command.current_dir(dir);
        }
        self.spawn_command(command).map(|info| info.pid)
    }

    /// Start COMMAND as an owned group leader and reap it when it exits.
    /// Returns the running child's id; the reaper owns the `Child`.
    pub fn spawn_command(&self, command: Command) -> Result<ChildInfo> {
        self.launch(Launch::new(command))
    }

    /// Like [`Owner::spawn_command`], but the descriptors in KEEP_FDS stay
    /// open in the child (e.g. a sandbox start-marker pipe), and the exit
    /// status arrives on the returned receiver once the reaper has it.
    pub fn spawn_watched(&self, command: Command, keep_fds: &[RawFd]) -> Result<Watched> {
        let (tx, exit) = mpsc::channel();
        let info = self.launch(Launch {
            command,
            fd_map: keep_fds.iter().map(|&fd| (fd, fd)).collect(),
            new_session: false,
            on_exit: Some(Box::new(move |status| {
                let _ = tx.send(status);
            })),
        })?;
        Ok(Watched {
            pid: info.pid,
            exit,
        })
    }

    /// Start LAUNCH's command as an owned group (or session) leader; the
    /// reaper calls its `on_exit` with the leader's status.
    pub fn launch(&self, launch: Launch) -> Result<ChildInfo> {
        let Launch {
            mut command,
            fd_map,
            new_session,
            on_exit,
        } = launch;
        confine_lifetime(&mut command, fd_map, new_session);
        let mut child = on_spawner(move || command.spawn())?
            .map_err(|e| Error::io(ErrorKind::Exec, "cannot start the command", &e))?;
        let pid = child.id() as i32;
        self.watch(pid, move || child.wait(), on_exit)
    }

    /// Start PROGRAM as an owned group (or session) leader without
    /// copying this process (see `exec::spawn`); the reaper calls ON_EXIT
    /// with the leader's status.
    pub fn start(&self, program: Program, on_exit: Option<OnExit>) -> Result<ChildInfo> {
        let pid = on_spawner(move || spawn::start(&program))?
            .map_err(|e| Error::io(ErrorKind::Exec, "cannot start the command", &e))?;
        self.watch(pid, move || spawn::wait(pid), on_exit)
    }

    /// Record group PID and reap its leader with WAIT on a thread of its own.
    fn watch(
        &self,
        pid: i32,
        wait: impl FnOnce() -> io::Result<ExitStatus> + Send + 'static,
        on_exit: Option<OnExit>,
    ) -> Result<ChildInfo> {
        let pgid = pid;
        self.prune();
        lock(&self.state.groups).insert(pgid, true);
        let state = Arc::clone(&self.state);
        let reaper = std::thread::Builder::new()
            .name("mevedel-reaper".into())
            .spawn(move || {
                let status = wait();
                lock(&state.groups).insert(pgid, false);
                state.leader_exited.notify_all();
                if let Some(notify) = on_exit {
                    notify(status);
                }
            });
        if let Err(e) = reaper {
            signal_group(pgid, libc::SIGKILL);
            return Err(Error::io(
                ErrorKind::Exec,
                "cannot start a reaper thread",
                &e,
            ));
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

    /// Stop the one owned group PGID: SIGTERM, SIGKILL after GRACE if
    /// members remain, then wait (bounded) for its leader to be reaped.
    pub fn stop_group(&self, pgid: i32, grace: Duration) {
        let leader_reaped =
            |groups: &HashMap<i32, bool>| !groups.get(&pgid).copied().unwrap_or(false);
        if !group_exists(pgid) && leader_reaped(&lock(&self.state.groups)) {
            return;
        }
        signal_group(pgid, libc::SIGTERM);
        self.wait_until(grace, |groups| leader_reaped(groups) && !group_exists(pgid));
        if group_exists(pgid) {
            signal_group(pgid, libc::SIGKILL);
        }
        self.wait_until(Duration::from_secs(1), leader_reaped);
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

/// A started child whose exit status the caller waits for.
pub struct Watched {
    pub pid: u32,
    /// Receives the leader's exit status once it has been reaped.
    pub exit: Receiver<io::Result<ExitStatus>>,
}

/// Called by the reaper with the leader's exit status.
pub type OnExit = Box<dyn FnOnce(io::Result<ExitStatus>) + Send>;

/// A command to start as an owned process group, with its descriptor
/// plumbing.
pub struct Launch {
    pub command: Command,
    /// Descriptors to place in the child: (open descriptor, number in child).
    pub fd_map: Vec<(RawFd, RawFd)>,
    /// Lead a new session with stdin (a PTY) as controlling terminal.
    pub new_session: bool,
    pub on_exit: Option<OnExit>,
}

impl Launch {
    pub fn new(command: Command) -> Launch {
        Launch {
            command,
            fd_map: Vec::new(),
            new_session: false,
            on_exit: None,
        }
    }
}

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

    fn argv(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn stop_all_kills_group_members_too() {
        let owner = Owner::new();
        let dir = std::env::temp_dir().join(format!("mevedel-owner-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let pidfile = dir.join("grandchild");
        let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let pid = owner.spawn(&argv(&["sh", "-c", &script]), None);
        let pid = pid.unwrap_or_else(|e| panic!("spawn: {e}"));
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
        let grandchild = grandchild.unwrap_or_else(|| panic!("grandchild never started"));
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
        let pid = owner
            .spawn(&argv(&["true"]), None)
            .unwrap_or_else(|e| panic!("spawn: {e}"));
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
    fn watched_child_reports_status_through_a_kept_descriptor() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let owner = Owner::new();
        let (mut reader, writer) = io::pipe().unwrap_or_else(|e| panic!("pipe: {e}"));
        let fd = writer.as_raw_fd();
        let mut command = Command::new("sh");
        command
            .args(["-c", &format!("echo kept >&{fd}; exit 5")])
            .stdin(Stdio::null());
        let watched = owner
            .spawn_watched(command, &[fd])
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        drop(writer);
        let status = watched
            .exit
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("no status: {e}"))
            .unwrap_or_else(|e| panic!("wait: {e}"));
        assert_eq!(status.code(), Some(5));
        let mut text = String::new();
        reader
            .read_to_string(&mut text)
            .unwrap_or_else(|e| panic!("read: {e}"));
        assert_eq!(text, "kept\n");
    }

    #[test]
    fn stop_group_stops_only_that_group() {
        let owner = Owner::new();
        let first = owner
            .spawn(&argv(&["sh", "-c", "sleep 300 & wait"]), None)
            .unwrap_or_else(|e| panic!("{e}"));
        let second = owner
            .spawn(&argv(&["sleep", "300"]), None)
            .unwrap_or_else(|e| panic!("{e}"));
        owner.stop_group(first as i32, Duration::from_millis(500));
        assert!(!alive(first as i32));
        assert!(!group_exists(first as i32));
        assert!(alive(second as i32));
        assert_eq!(owner.live_groups(), vec![second as i32]);
        owner.stop_all(Duration::from_millis(500));
        assert!(!alive(second as i32));
    }

    #[test]
    fn child_runs_in_own_group_without_inherited_fds() {
        let owner = Owner::new();
        let (_reader, writer) = io::pipe().unwrap_or_else(|e| panic!("pipe: {e}"));
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
        let pid = owner
            .spawn(&argv(&["sh", "-c", &script]), None)
            .unwrap_or_else(|e| panic!("{e}"));
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
