//! Starting a child without copying Emacs: `clone(CLONE_VM | CLONE_VFORK)`.
//!
//! `std::process::Command` with a `pre_exec` hook has to `fork`, which
//! copies the page tables of the whole (large) Emacs process and made a
//! trivial command cost several milliseconds. Like `posix_spawn`, this
//! runs the child on its own small stack in the parent's memory until it
//! calls `execve`, while the parent thread waits. `posix_spawn` itself
//! cannot set the parent-death signal, hence this.
//!
//! Everything the child needs (paths, argument and environment arrays,
//! descriptors) is prepared before the clone; the child only makes
//! async-signal-safe system calls and reports a failure's errno through
//! memory it shares with the parent.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// A child to start.
pub struct Program {
    /// Program and arguments; the program is looked up in the PATH of
    /// `env` (or of this process) unless it contains a slash.
    pub argv: Vec<OsString>,
    /// The complete environment; this process's when `None`.
    pub env: Option<Vec<(OsString, OsString)>>,
    pub cwd: Option<PathBuf>,
    /// Standard streams; `/dev/null` for `None`.
    pub stdin: Option<OwnedFd>,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
    /// Descriptors to place in the child: (open descriptor, number in child).
    pub fd_map: Vec<(RawFd, RawFd)>,
    /// Lead a new session with stdin (a PTY) as controlling terminal;
    /// otherwise lead a new process group.
    pub new_session: bool,
}

impl Program {
    /// ARGV in the current directory and environment, with every
    /// standard stream at `/dev/null`.
    pub fn new(argv: Vec<OsString>) -> Program {
        Program {
            argv,
            env: None,
            cwd: None,
            stdin: None,
            stdout: None,
            stderr: None,
            fd_map: Vec::new(),
            new_session: false,
        }
    }
}

/// Signals reset to their default action in the child: Emacs ignores
/// some of them, and an ignored signal stays ignored across `execve`.
const RESET_SIGNALS: &[libc::c_int] = &[
    libc::SIGPIPE,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGHUP,
    libc::SIGTERM,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGCHLD,
    libc::SIGALRM,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Where the child failed, and its errno.
#[repr(C)]
struct Failure {
    step: libc::c_int,
    errno: libc::c_int,
}

/// What the child reads; all pointers stay valid while the parent waits.
#[repr(C)]
struct ChildArgs {
    path: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    stdio: [RawFd; 3],
    map: *const (RawFd, RawFd),
    map_len: usize,
    new_session: bool,
    parent: libc::pid_t,
    failure: *mut Failure,
}

const STEPS: &[&str] = &[
    "",
    "cannot start a process group or session",
    "cannot set the parent-death signal",
    "cannot set up standard streams",
    "cannot take the terminal",
    "cannot place a descriptor",
    "cannot enter the working directory",
    "cannot execute the program",
];

/// Record the failed STEP and errno for the parent, then end the child.
///
/// # Safety
/// Child side only; A.failure points into the waiting parent's memory.
unsafe fn fail(a: &ChildArgs, step: libc::c_int) -> ! {
    // SAFETY: see above; errno is read right after the failed call.
    unsafe {
        (*a.failure).errno = *libc::__errno_location();
        (*a.failure).step = step;
        libc::_exit(127)
    }
}

/// The child side. Only system calls; no allocation, no locks.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: ARG points to the ChildArgs the parent keeps alive until
    // this child has exec'd or exited (CLONE_VFORK).
    unsafe {
        let a = &*(arg as *const ChildArgs);
        let started = if a.new_session {
            libc::setsid() >= 0
        } else {
            libc::setpgid(0, 0) == 0
        };
        if !started {
            fail(a, 1);
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            fail(a, 2);
        }
        if libc::getppid() != a.parent {
            libc::_exit(1);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        for &sig in RESET_SIGNALS {
            libc::signal(sig, libc::SIG_DFL);
        }
        for (target, &fd) in a.stdio.iter().enumerate() {
            if libc::dup2(fd, target as libc::c_int) < 0 {
                fail(a, 3);
            }
        }
        if a.new_session && libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
            fail(a, 4);
        }
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        for i in 0..a.map_len {
            let (from, to) = *a.map.add(i);
            if libc::dup2(from, to) < 0 {
                fail(a, 5);
            }
        }
        if !a.cwd.is_null() && libc::chdir(a.cwd) != 0 {
            fail(a, 6);
        }
        libc::execve(a.path, a.argv, a.envp);
        fail(a, 7)
    }
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in an argument"))
}

/// The executable PROGRAM names: itself when it has a slash, else the
/// first executable file of that name in PATH.
fn resolve(program: &OsStr, path: Option<&OsStr>) -> io::Result<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let path = path.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    for dir in path.as_bytes().split(|&b| b == b':') {
        let dir = if dir.is_empty() {
            Path::new(".")
        } else {
            Path::new(OsStr::from_bytes(dir))
        };
        let candidate = dir.join(program);
        if let Ok(c) = cstring(candidate.as_os_str().as_bytes())
            // SAFETY: access() reads a NUL-terminated path.
            && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
            && candidate.is_file()
        {
            return Ok(candidate);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} was not found in PATH", program.to_string_lossy()),
    ))
}

/// MAP's descriptors copied above every target number, each with its
/// target: placing one then never overwrites another still to be placed
/// (a source whose number is a later target), and `dup2` always makes a
/// fresh, inheritable copy. Two descriptors for one number is an error.
fn staged(map: &[(RawFd, RawFd)]) -> io::Result<Vec<(OwnedFd, RawFd)>> {
    let invalid = |what: String| Err(io::Error::new(io::ErrorKind::InvalidInput, what));
    for (i, &(_, to)) in map.iter().enumerate() {
        if to < 3 {
            return invalid(format!("descriptor {to} is a standard stream of the child"));
        }
        if map[..i].iter().any(|&(_, earlier)| earlier == to) {
            return invalid(format!(
                "two descriptors are given number {to} in the child"
            ));
        }
    }
    let floor = map.iter().map(|&(_, to)| to + 1).max().unwrap_or(3);
    map.iter()
        .map(|&(from, to)| {
            // SAFETY: duplicates a descriptor the caller keeps open; the
            // copy is ours and close-on-exec.
            let fd = unsafe { libc::fcntl(from, libc::F_DUPFD_CLOEXEC, floor) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: FD was just opened and nothing else owns it.
            Ok((unsafe { OwnedFd::from_raw_fd(fd) }, to))
        })
        .collect()
}

fn dev_null() -> io::Result<OwnedFd> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map(OwnedFd::from)
}

/// Start PROGRAM; returns its pid. Call it on the thread whose exit
/// should kill the child (the parent-death signal follows the thread).
pub fn start(program: &Program) -> io::Result<libc::pid_t> {
    let (name, _) = program
        .argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
    let env: Vec<(OsString, OsString)> = match &program.env {
        Some(env) => env.clone(),
        None => std::env::vars_os().collect(),
    };
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_os_str());
    let path = cstring(resolve(name, path_var)?.as_os_str().as_bytes())?;
    let argv: Vec<CString> = program
        .argv
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    let envs: Vec<CString> = env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.clone().into_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            cstring(&kv)
        })
        .collect::<io::Result<_>>()?;
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut env_ptrs: Vec<*const libc::c_char> = envs.iter().map(|e| e.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());
    let cwd = program
        .cwd
        .as_ref()
        .map(|d| cstring(d.as_os_str().as_bytes()))
        .transpose()?;
    let null = dev_null()?;
    let fd_of = |fd: &Option<OwnedFd>| fd.as_ref().map_or(null.as_raw_fd(), AsRawFd::as_raw_fd);
    let stdio = [
        fd_of(&program.stdin),
        fd_of(&program.stdout),
        fd_of(&program.stderr),
    ];
    if stdio.iter().any(|&fd| fd < 3) || program.fd_map.iter().any(|&(from, _)| from < 3) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a descriptor given to the child is a standard stream of this process",
        ));
    }
    let map = staged(&program.fd_map)?;
    let placements: Vec<(RawFd, RawFd)> = map
        .iter()
        .map(|(staged, to)| (staged.as_raw_fd(), *to))
        .collect();
    let mut failure = Failure { step: 0, errno: 0 };
    let args = ChildArgs {
        path: path.as_ptr(),
        argv: argv_ptrs.as_ptr(),
        envp: env_ptrs.as_ptr(),
        cwd: cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
        stdio,
        map: placements.as_ptr(),
        map_len: placements.len(),
        new_session: program.new_session,
        parent: std::process::id() as libc::pid_t,
        failure: &mut failure,
    };
    const STACK: usize = 64 * 1024;
    let mut stack = vec![0u128; STACK / 16];
    // SAFETY: the stack grows down from its (16-byte aligned) end; the
    // child uses it only until execve or _exit, while CLONE_VFORK keeps
    // this thread (and every pointer in ARGS) waiting.
    let pid = unsafe {
        let top = stack.as_mut_ptr().add(stack.len()) as *mut libc::c_void;
        libc::clone(
            child_main,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &args as *const ChildArgs as *mut libc::c_void,
        )
    };
    drop(stack);
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the child (now gone or exec'd) may have written it.
    let failure = unsafe { std::ptr::read_volatile(&failure) };
    if failure.step != 0 {
        // SAFETY: reaps the child that failed before exec.
        unsafe {
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        let what = STEPS
            .get(failure.step as usize)
            .copied()
            .unwrap_or("cannot start");
        let err = io::Error::from_raw_os_error(failure.errno);
        return Err(io::Error::new(err.kind(), format!("{what}: {err}")));
    }
    Ok(pid)
}

/// Wait for PID and return its status.
pub fn wait(pid: libc::pid_t) -> io::Result<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(std::process::ExitStatus::from_raw(status));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn program(script: &str) -> (Program, std::io::PipeReader) {
        let (reader, writer) = io::pipe().expect("pipe");
        let mut program = Program::new(["sh", "-c", script].map(OsString::from).to_vec());
        program.stdout = Some(OwnedFd::from(writer));
        (program, reader)
    }

    #[test]
    fn child_leads_its_group_with_only_the_descriptors_it_was_given() {
        let (leak_r, leak_w) = io::pipe().expect("pipe");
        // Inheritable, like Emacs's event-channel descriptor.
        // SAFETY: clearing FD_CLOEXEC on a descriptor we own.
        unsafe { libc::fcntl(leak_w.as_raw_fd(), libc::F_SETFD, 0) };
        let (placed, _keep) = io::pipe().expect("pipe");
        let leak = leak_w.as_raw_fd();
        // A number no descriptor of this (busy, multi-threaded) test
        // process is likely to have, and certainly not the leaked one.
        let target = 900 + (leak % 50);
        // Builtins only, so the shell opens nothing of its own meanwhile.
        let script = format!(
            "[ -e /proc/$$/fd/{leak} ] && echo leaked; [ -e /proc/$$/fd/{target} ] && echo placed; \
             read -r _ _ _ _ pgrp _ < /proc/$$/stat; echo $pgrp"
        );
        let (mut program, mut out) = program(&script);
        program.fd_map.push((placed.as_raw_fd(), target));
        let pid = start(&program).expect("start");
        drop(program);
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        let status = wait(pid).expect("wait");
        assert!(status.success());
        assert_eq!(text, format!("placed\n{pid}\n"));
        drop(leak_r);
    }

    #[test]
    fn a_source_numbered_like_another_target_is_not_overwritten() {
        let (mut first_r, first_w) = io::pipe().expect("pipe");
        let (mut second_r, second_w) = io::pipe().expect("pipe");
        // The first is placed at the second's own number, the second
        // elsewhere: placed in order, the second would be lost.
        let clash = second_w.as_raw_fd();
        let elsewhere = 900 + (clash % 50);
        let (mut program, _out) = program(&format!("echo one >&{clash}; echo two >&{elsewhere}"));
        program.argv[0] = "bash".into();
        program.fd_map.push((first_w.as_raw_fd(), clash));
        program.fd_map.push((second_w.as_raw_fd(), elsewhere));
        let pid = start(&program).expect("start");
        drop((program, first_w, second_w));
        assert!(wait(pid).expect("wait").success());
        let (mut one, mut two) = (String::new(), String::new());
        first_r.read_to_string(&mut one).expect("read");
        second_r.read_to_string(&mut two).expect("read");
        assert_eq!((one.as_str(), two.as_str()), ("one\n", "two\n"));
    }

    #[test]
    fn one_number_for_two_descriptors_is_refused() {
        let (_r, w) = io::pipe().expect("pipe");
        let (mut program, _out) = program("true");
        program.fd_map.push((w.as_raw_fd(), 63));
        program.fd_map.push((w.as_raw_fd(), 63));
        let err = start(&program)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("two descriptors are given number 63"), "{err}");
    }

    #[test]
    fn failures_before_exec_are_reported() {
        let (mut program, _out) = program("true");
        program.argv[0] = "no-such-program-here".into();
        let err = start(&program)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("not found"), "{err}");
        let (mut program, _out) = program_in("/no/such/dir");
        let err = start(&program)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("working directory"), "{err}");
        program.cwd = None;
        assert!(start(&program).and_then(wait).is_ok_and(|s| s.success()));
    }

    fn program_in(dir: &str) -> (Program, std::io::PipeReader) {
        let (mut p, r) = program("true");
        p.cwd = Some(PathBuf::from(dir));
        (p, r)
    }
}
