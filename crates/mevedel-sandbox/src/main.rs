//! `mevedel-sandbox`: confine this process, then become the command.
//!
//! Started by mevedel's launcher (inside bwrap, or alone where bwrap
//! cannot run). In order, it drops every capability, sets no_new_privs,
//! applies the Landlock ruleset its arguments describe
//! (`mevedel_sandbox_protocol::HelperArgs`), reports `started` on its start
//! descriptor and executes the command. With `--supervise` (what the
//! launcher asks for) it instead stays as a subreaper: it forks the
//! command, and when the command exits or the helper is told to stop, it
//! kills every remaining descendant, including ones that left the process
//! group with `setsid` (no PID namespace may contain them), and reports
//! the command's raw wait status (bwrap would turn a death by signal into
//! an exit code).
//!
//! The helper is what the launcher trusts, so nothing the command can
//! reach may speak for it: it makes itself non-dumpable first (its
//! `/proc/<pid>/fd`, memory and ptrace are then out of the command's
//! reach, root in a namespace or not), its own descriptors are
//! close-on-exec, the command runs in a nested Landlock scope that
//! cannot signal it, and the PIPESTATUS snapshot reaches the launcher
//! only through a pipe the helper reads and checks.
//!
//! `mevedel-sandbox --probe` applies a trivial ruleset and prints whether
//! Landlock could be enforced.

mod seccomp;

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use mevedel_landlock as confine;
use mevedel_sandbox_protocol::{
    EXIT_EXEC_FAILED, EXIT_REFUSED, HelperArgs, Marker, parse_snapshot,
};

fn main() {
    // Before anything the launcher trusts is opened or written.
    // SAFETY: plain prctl.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.len() == 1 && args[0] == "--probe" {
        println!("{}", confine::probe());
        return;
    }
    let args = match HelperArgs::parse(args) {
        Ok(args) => args,
        Err(problem) => {
            eprintln!("mevedel-sandbox: {problem}");
            std::process::exit(EXIT_REFUSED);
        }
    };
    let mut start = args.start_fd.map(|fd| {
        set_cloexec(fd);
        // SAFETY: the launcher passed this descriptor for us to write to;
        // nothing else in this process owns it.
        unsafe { std::fs::File::from_raw_fd(fd) }
    });
    let refuse = |start: &mut Option<std::fs::File>, why: String| -> ! {
        report(start, &Marker::Refused(why.clone()));
        eprintln!("mevedel-sandbox: {why}");
        std::process::exit(EXIT_REFUSED);
    };
    if args.take_tty {
        // bwrap's session belongs to its init process: lead one of our
        // own (no terminal yet), then make the terminal on stdin ours.
        // SAFETY: plain setsid and ioctl on standard input.
        if unsafe { libc::setsid() } < 0 || unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } != 0 {
            let err = std::io::Error::last_os_error();
            refuse(&mut start, format!("cannot take the terminal: {err}"));
        }
    }
    if let Err(why) = drop_capabilities() {
        refuse(&mut start, why);
    }
    let landlock = match args.landlock {
        Some(abi) => match confine::restrict(&args, abi) {
            Ok(status) => status,
            Err(why) => refuse(&mut start, why),
        },
        None => {
            if let Err(why) = set_no_new_privs() {
                refuse(&mut start, why);
            }
            "none"
        }
    };
    let sockets = match seccomp::install() {
        Ok(()) => "blocked",
        Err(why) if args.required => refuse(&mut start, why),
        Err(_) => "open",
    };
    report(
        &mut start,
        &Marker::Started {
            landlock: landlock.into(),
            sockets: sockets.into(),
        },
    );
    if args.supervise {
        let scoped = args.landlock.is_some_and(|abi| abi >= confine::SCOPE_ABI);
        supervise(&args.command, args.snapshot_fd, scoped, start)
    } else {
        let err = command(&args.command).exec();
        exec_failed(&mut start, &args.command, &err)
    }
}

fn report(start: &mut Option<std::fs::File>, marker: &Marker) {
    if let Some(file) = start {
        let _ = file.write_all(marker.line().as_bytes());
    }
}

fn exec_failed(start: &mut Option<std::fs::File>, argv: &[OsString], err: &std::io::Error) -> ! {
    let name = argv
        .first()
        .map_or(String::new(), |a| a.to_string_lossy().into_owned());
    report(start, &Marker::ExecFailed(format!("{name}: {err}")));
    eprintln!("mevedel-sandbox: cannot execute {name}: {err}");
    std::process::exit(EXIT_EXEC_FAILED);
}

/// The command, with the signal state a fresh program expects.
fn command(argv: &[OsString]) -> Command {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    // SAFETY: only async-signal-safe calls between fork/exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd
}

fn set_cloexec(fd: i32) {
    // SAFETY: plain fcntl on a descriptor number.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
    }
}

fn set_no_new_privs() -> Result<(), String> {
    // SAFETY: plain prctl.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!(
            "cannot set no_new_privs: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;

/// Drop every capability, bounding set included, so that root inside the
/// sandbox is an ordinary user (mount, module loading, reboot, ptrace of
/// others and DAC overrides all need one). A process that holds none
/// (any normal user) has nothing to drop.
fn drop_capabilities() -> Result<(), String> {
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget with a v3 header and two data structs.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return Err(format!("capget: {}", std::io::Error::last_os_error()));
    }
    let holds_any = data
        .iter()
        .any(|d| d.effective | d.permitted | d.inheritable != 0);
    if !holds_any {
        return Ok(());
    }
    for cap in 0..64 {
        // SAFETY: plain prctl calls.
        match unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) } {
            1 => {
                if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
                    return Err(format!(
                        "cannot drop capability {cap} from the bounding set: {}",
                        std::io::Error::last_os_error()
                    ));
                }
            }
            0 => {}
            _ => break,
        }
    }
    // SAFETY: plain prctl; EINVAL on kernels without ambient sets is fine.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
    }
    let zero = [CapData::default(); 2];
    // SAFETY: capset with a v3 header and two zeroed data structs.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, zero.as_ptr()) } != 0 {
        return Err(format!(
            "cannot drop capabilities: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Fork the command and stay as its subreaper until it exits or we are
/// told to stop (TERM or HUP; an interrupt is left to the command); then kill whatever descends from us and exit the way
/// the command did.
fn supervise(
    argv: &[OsString],
    snapshot_fd: Option<i32>,
    scoped: bool,
    mut start: Option<std::fs::File>,
) -> ! {
    // SAFETY: plain prctl and signal-mask calls in a single-threaded process.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::sigemptyset(&mut set);
        for sig in [
            libc::SIGCHLD,
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
        ] {
            libc::sigaddset(&mut set, sig);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let me = std::process::id() as libc::pid_t;
    let snapshot = match snapshot_fd.map(|_| snapshot_pipe()).transpose() {
        Ok(pipe) => pipe,
        Err(err) => {
            report(&mut start, &Marker::Refused(err));
            std::process::exit(EXIT_REFUSED);
        }
    };
    // SAFETY: the helper is single-threaded, so the child may run Rust.
    let main = unsafe { libc::fork() };
    if main < 0 {
        let err = std::io::Error::last_os_error();
        report(&mut start, &Marker::Refused(format!("cannot fork: {err}")));
        std::process::exit(EXIT_REFUSED);
    }
    if main == 0 {
        // SAFETY: plain prctl/getppid.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != me {
                libc::_exit(EXIT_REFUSED);
            }
        }
        if let (Some((_, writer)), Some(fd)) = (&snapshot, snapshot_fd) {
            // SAFETY: dup2 of our pipe's writer; the copy is inheritable.
            if unsafe { libc::dup2(writer.as_raw_fd(), fd) } < 0 {
                let err = std::io::Error::last_os_error();
                exec_failed(&mut start, argv, &err);
            }
        }
        if scoped && let Err(why) = confine::scope_child() {
            report(&mut start, &Marker::Refused(why));
            // SAFETY: leaving the forked child without unwinding.
            unsafe { libc::_exit(EXIT_REFUSED) };
        }
        let err = command(argv).exec();
        exec_failed(&mut start, argv, &err);
    }
    // Only the command may hold the snapshot's writer, so the end of the
    // pipe is its end.
    let snapshot = snapshot.map(|(reader, _writer)| reader);
    loop {
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waiting for one of the blocked signals.
        let sig = unsafe { libc::sigwaitinfo(&set, &mut info) };
        if sig == libc::SIGCHLD {
            if let Some(status) = reap(main) {
                kill_descendants(me);
                if let Some(codes) = snapshot.as_ref().and_then(|r| checked_snapshot(r, status)) {
                    report(&mut start, &Marker::Pipestatus(codes));
                }
                report(&mut start, &Marker::Exited(status));
                exit_like(status);
            }
        } else if sig == libc::SIGINT || sig == libc::SIGQUIT {
            // Ctrl-C (from the terminal or the owner) reaches the command
            // in our group by itself; it is the command's to handle.
        } else if sig > 0 {
            // SAFETY: plain kill; the command shares our group, but may
            // have left it.
            unsafe { libc::kill(main, libc::SIGTERM) };
            kill_descendants(me);
            // The command was told to stop by the same signal.
            report(&mut start, &Marker::Exited(sig));
            // SAFETY: restore the default action and die of the same signal.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                libc::kill(me, sig);
            }
            std::process::exit(128 + sig);
        }
    }
}

/// A close-on-exec pipe (reader, writer) for the snapshot; the writer
/// never blocks, so a command that filled the pipe cannot hang itself on
/// the snapshot line.
fn snapshot_pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "cannot create the snapshot pipe: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: both descriptors were just created and are ours.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for fd in [&reader, &writer] {
        // SAFETY: flag change on a descriptor we own.
        unsafe {
            let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
    Ok((reader, writer))
}

/// The stage statuses in the snapshot READER holds, when it is exactly
/// one well-formed line agreeing with the shell's reaped STATUS: the
/// shell wrote its `$?` first and exited with it, and without pipefail
/// that is the last stage's status. A shell killed by a signal never
/// reached the snapshot line, and a second line means the command wrote
/// one of its own: both give nothing.
fn checked_snapshot(reader: &OwnedFd, status: i32) -> Option<Vec<i32>> {
    if !libc::WIFEXITED(status) {
        return None;
    }
    let mut bytes = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        // SAFETY: reads into a buffer we own, at most its length.
        let n = unsafe { libc::read(reader.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 || bytes.len() > 4096 {
            break;
        }
        bytes.extend_from_slice(&buf[..n as usize]);
    }
    let text = std::str::from_utf8(&bytes).ok()?;
    let line = text.strip_suffix('\n')?;
    if line.contains('\n') {
        return None;
    }
    let first: i32 = line.split_whitespace().next()?.parse().ok()?;
    let codes = parse_snapshot(text)?;
    let exit = libc::WEXITSTATUS(status);
    (first == exit && codes.last() == Some(&exit)).then_some(codes)
}

/// Reap every exited child; return MAIN's wait status if it was one.
fn reap(main: libc::pid_t) -> Option<i32> {
    let mut main_status = None;
    loop {
        let mut status = 0;
        // SAFETY: non-blocking wait for any child.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return main_status;
        }
        if pid == main {
            main_status = Some(status);
        }
    }
}

/// Exit with the command's code, or die of its signal.
fn exit_like(status: i32) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: default action, unblocked, then the same signal.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(std::process::id() as libc::pid_t, sig);
        }
        std::process::exit(128 + sig);
    }
    std::process::exit(libc::WEXITSTATUS(status));
}

/// Every live process descending from ROOT, found through /proc.
fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    let mut children: HashMap<libc::pid_t, Vec<libc::pid_t>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let mut fields = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let ppid = fields.next().and_then(|f| f.parse::<libc::pid_t>().ok());
        if let (Some(ppid), false) = (ppid, state == "Z") {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if let Some(kids) = children.get(&pid) {
            out.extend(kids);
            stack.extend(kids);
        }
    }
    out
}

/// TERM every descendant of ME, KILL what remains after a grace period,
/// and reap; bounded in time.
fn kill_descendants(me: libc::pid_t) {
    let grace = Instant::now() + Duration::from_millis(300);
    let give_up = Instant::now() + Duration::from_secs(3);
    let mut signal = libc::SIGTERM;
    loop {
        let _ = reap(0);
        let left = descendants(me);
        if left.is_empty() || Instant::now() > give_up {
            return;
        }
        if Instant::now() > grace {
            signal = libc::SIGKILL;
        }
        for pid in left {
            // SAFETY: signalling our own descendants.
            unsafe { libc::kill(pid, signal) };
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot_of(text: &str, status: i32) -> Option<Vec<i32>> {
        let (reader, writer) = snapshot_pipe().unwrap();
        let mut writer = std::fs::File::from(writer);
        writer.write_all(text.as_bytes()).unwrap();
        drop(writer);
        checked_snapshot(&reader, status)
    }

    #[test]
    fn snapshot_must_agree_with_the_reaped_status() {
        // Raw wait statuses: exit N is N << 8; 9 is death by SIGKILL.
        assert_eq!(snapshot_of("1 0 1\n", 1 << 8), Some(vec![0, 1]));
        assert_eq!(snapshot_of("0 1 0\n", 0), Some(vec![1, 0]));
        // A forged line that disagrees with the exit, a second line, a
        // shell killed before its snapshot line, junk: nothing.
        assert_eq!(snapshot_of("0 0 0\n", 1 << 8), None);
        assert_eq!(snapshot_of("1 1 1\n1 0 1\n", 1 << 8), None);
        assert_eq!(snapshot_of("0 0\n", 9), None);
        assert_eq!(snapshot_of("1 0 1", 1 << 8), None);
        assert_eq!(snapshot_of("x 1\n", 1 << 8), None);
        assert_eq!(snapshot_of("", 0), None);
    }
}
