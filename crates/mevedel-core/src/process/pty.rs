//! Pseudo-terminals for `tty=true` executions, from libc's `openpty`.
//!
//! The child gets the terminal side as stdin, stdout and stderr and makes
//! it its controlling terminal (see `spawn::Program::new_session`), so a
//! Ctrl-C written to the controller side interrupts its foreground job.

use std::os::fd::{FromRawFd, OwnedFd};

use crate::error::{Error, ErrorKind, Result};

/// Columns of the terminal: wide, so tools rarely wrap their output.
const COLUMNS: u16 = 200;
const ROWS: u16 = 50;

/// The two sides of a new PTY: (controller, terminal).
pub fn open() -> Result<(OwnedFd, OwnedFd)> {
    let mut controller: libc::c_int = -1;
    let mut terminal: libc::c_int = -1;
    let size = libc::winsize {
        ws_row: ROWS,
        ws_col: COLUMNS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors into the given ints; name and
    // termios are optional (null); the winsize pointer is valid.
    let rc = unsafe {
        libc::openpty(
            &mut controller,
            &mut terminal,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    if rc != 0 {
        return Err(Error::io(
            ErrorKind::Exec,
            "cannot allocate a pseudo-terminal",
            &std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: both descriptors were just opened for us and are owned here.
    let (controller, terminal) = unsafe {
        (
            OwnedFd::from_raw_fd(controller),
            OwnedFd::from_raw_fd(terminal),
        )
    };
    for fd in [&controller, &terminal] {
        set_cloexec(fd);
    }
    Ok((controller, terminal))
}

fn set_cloexec(fd: &OwnedFd) {
    use std::os::fd::AsRawFd;
    // SAFETY: flag change on a descriptor we own.
    unsafe {
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
    }
}
