//! The command line of the `mevedel-sandbox` helper binary.
//!
//! The launcher (in Emacs's process) writes it and the helper (its own
//! process, inside bwrap or alone) reads it, so both sides share this one
//! definition. Paths are passed as they are: the helper never consults a
//! shell.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Everything the helper needs to confine itself and start the command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelperArgs {
    /// Apply a Landlock ruleset using the features of this ABI version
    /// (`None`: only drop capabilities, set no_new_privs and report the
    /// start). The launcher passes the ABI its probe found.
    pub landlock: Option<u32>,
    /// Refuse to run unless every requested Landlock feature is enforced.
    pub required: bool,
    /// Deny TCP bind/connect through Landlock (ABI 4+).
    pub deny_net: bool,
    /// Stay as a subreaper that kills leftover descendants and reports the
    /// command's raw wait status on the start descriptor.
    pub supervise: bool,
    /// Lead a new session whose controlling terminal is standard input
    /// (bwrap's `--new-session` left the command without one), so the
    /// terminal's Ctrl-C reaches the command's foreground group.
    pub take_tty: bool,
    /// Readable (and executable) hierarchies.
    pub read: Vec<PathBuf>,
    /// Writable hierarchies.
    pub write: Vec<PathBuf>,
    /// Read-only carve-outs inside writable hierarchies.
    pub protect: Vec<PathBuf>,
    /// Inaccessible carve-outs inside readable hierarchies.
    pub deny: Vec<PathBuf>,
    /// Descriptor on which the helper reports its start (see [`Marker`]).
    pub start_fd: Option<i32>,
    /// Give the command a pipe at this descriptor for Bash's PIPESTATUS
    /// snapshot: the supervising helper alone reads it, checks it against
    /// the status it reaped and relays it as [`Marker::Pipestatus`], so
    /// no descriptor onto anything the launcher trusts reaches the command.
    pub snapshot_fd: Option<i32>,
    /// The command and its arguments.
    pub command: Vec<OsString>,
}

/// One line the helper writes on its start descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    /// Confinement is in place; the command is about to be executed.
    /// `landlock` is `full`, `partial` or `none`; `sockets` is `blocked`
    /// when the seccomp filter stops new Unix sockets, `open` otherwise.
    Started { landlock: String, sockets: String },
    /// The helper refused to run the command (e.g. `required` and the
    /// Landlock ruleset could not be enforced).
    Refused(String),
    /// The command could not be executed (not found, not executable).
    ExecFailed(String),
    /// The command ended with this raw wait status (a supervising helper
    /// reports it: bwrap turns a death by signal into an exit code).
    Exited(i32),
    /// The final pipeline's stage statuses, from the snapshot the helper
    /// read and found consistent with the status it reaped.
    Pipestatus(Vec<i32>),
}

impl Marker {
    pub fn line(&self) -> String {
        let one_line = |s: &str| s.replace('\n', " ");
        match self {
            Marker::Started { landlock, sockets } => {
                format!("started landlock={landlock} sockets={sockets}\n")
            }
            Marker::Refused(why) => format!("refused {}\n", one_line(why)),
            Marker::ExecFailed(why) => format!("exec-failed {}\n", one_line(why)),
            Marker::Exited(status) => format!("exited status={status}\n"),
            Marker::Pipestatus(codes) => {
                let codes: Vec<String> = codes.iter().map(i32::to_string).collect();
                format!("pipestatus {}\n", codes.join(" "))
            }
        }
    }

    /// Read the markers out of everything the start descriptor delivered.
    pub fn parse_all(text: &str) -> Vec<Marker> {
        text.lines()
            .filter_map(|line| {
                if let Some(rest) = line.strip_prefix("started landlock=") {
                    let (landlock, sockets) = rest
                        .trim()
                        .split_once(" sockets=")
                        .unwrap_or((rest.trim(), "open"));
                    Some(Marker::Started {
                        landlock: landlock.to_string(),
                        sockets: sockets.to_string(),
                    })
                } else if let Some(rest) = line.strip_prefix("pipestatus ") {
                    let codes: Option<Vec<i32>> =
                        rest.split_whitespace().map(|f| f.parse().ok()).collect();
                    codes.filter(|c| !c.is_empty()).map(Marker::Pipestatus)
                } else if let Some(rest) = line.strip_prefix("refused ") {
                    Some(Marker::Refused(rest.to_string()))
                } else if let Some(rest) = line.strip_prefix("exited status=") {
                    rest.trim().parse().ok().map(Marker::Exited)
                } else {
                    line.strip_prefix("exec-failed ")
                        .map(|rest| Marker::ExecFailed(rest.to_string()))
                }
            })
            .collect()
    }
}

/// Exit status of the helper when it refuses or fails before the command.
pub const EXIT_REFUSED: i32 = 125;
/// Exit status when the command could not be executed.
pub const EXIT_EXEC_FAILED: i32 = 127;

impl HelperArgs {
    /// The argument list (without the helper's own name).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = Vec::new();
        if let Some(abi) = self.landlock {
            out.push("--landlock-abi".into());
            out.push(abi.to_string().into());
        }
        for (on, name) in [
            (self.required, "--required"),
            (self.deny_net, "--deny-net"),
            (self.supervise, "--supervise"),
            (self.take_tty, "--take-tty"),
        ] {
            if on {
                out.push(name.into());
            }
        }
        for (name, paths) in [
            ("--read", &self.read),
            ("--write", &self.write),
            ("--protect", &self.protect),
            ("--deny", &self.deny),
        ] {
            for path in paths {
                out.push(name.into());
                out.push(path.clone().into_os_string());
            }
        }
        for (name, fd) in [
            ("--start-fd", self.start_fd),
            ("--snapshot-fd", self.snapshot_fd),
        ] {
            if let Some(fd) = fd {
                out.push(name.into());
                out.push(fd.to_string().into());
            }
        }
        out.push("--".into());
        out.extend(self.command.iter().cloned());
        out
    }

    /// Parse the helper's arguments (without its own name).
    pub fn parse<I: IntoIterator<Item = OsString>>(args: I) -> Result<HelperArgs, String> {
        let mut parsed = HelperArgs::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
            match arg.as_bytes() {
                b"--" => {
                    parsed.command = args.collect();
                    if parsed.command.is_empty() {
                        return Err("no command after --".into());
                    }
                    return Ok(parsed);
                }
                b"--landlock-abi" => {
                    let text = value("--landlock-abi")?;
                    parsed.landlock = Some(
                        number(&text)
                            .ok_or_else(|| format!("bad --landlock-abi {}", show(&text)))?,
                    );
                }
                b"--required" => parsed.required = true,
                b"--deny-net" => parsed.deny_net = true,
                b"--supervise" => parsed.supervise = true,
                b"--take-tty" => parsed.take_tty = true,
                b"--read" => parsed.read.push(value("--read")?.into()),
                b"--write" => parsed.write.push(value("--write")?.into()),
                b"--protect" => parsed.protect.push(value("--protect")?.into()),
                b"--deny" => parsed.deny.push(value("--deny")?.into()),
                b"--start-fd" => {
                    parsed.start_fd = Some(fd_arg(value("--start-fd")?, "--start-fd")?)
                }
                b"--snapshot-fd" => {
                    parsed.snapshot_fd = Some(fd_arg(value("--snapshot-fd")?, "--snapshot-fd")?)
                }
                _ => return Err(format!("unknown argument {}", show(&arg))),
            }
        }
        Err("missing -- before the command".into())
    }
}

fn fd_arg(text: OsString, name: &str) -> Result<i32, String> {
    number(&text)
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| format!("bad {name} {}", show(&text)))
}

fn number(s: &OsStr) -> Option<u32> {
    s.to_str().and_then(|s| s.parse::<u32>().ok())
}

fn show(s: &OsStr) -> String {
    s.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> HelperArgs {
        HelperArgs {
            landlock: Some(6),
            required: true,
            deny_net: true,
            supervise: false,
            take_tty: true,
            read: vec!["/".into()],
            write: vec!["/w".into(), "/w with space".into()],
            protect: vec!["/w/.git".into()],
            deny: vec!["/home/u/.ssh".into()],
            start_fd: Some(7),
            snapshot_fd: Some(63),
            command: vec!["sh".into(), "-c".into(), "echo --read".into()],
        }
    }

    #[test]
    fn args_round_trip() {
        let args = sample();
        let text = args.to_args();
        assert_eq!(HelperArgs::parse(text), Ok(args));
        let plain = HelperArgs {
            command: vec!["true".into()],
            ..HelperArgs::default()
        };
        assert_eq!(plain.to_args(), vec![OsString::from("--"), "true".into()]);
        assert_eq!(HelperArgs::parse(plain.to_args()), Ok(plain));
    }

    #[test]
    fn bad_args_are_named() {
        let parse = |items: &[&str]| HelperArgs::parse(items.iter().map(OsString::from));
        assert_eq!(
            parse(&["--bogus", "--", "true"]),
            Err("unknown argument --bogus".into())
        );
        assert_eq!(parse(&["--read"]), Err("--read needs a value".into()));
        assert_eq!(parse(&["--"]), Err("no command after --".into()));
        assert_eq!(parse(&["true"]), Err("unknown argument true".into()));
        assert_eq!(
            parse(&["--start-fd", "x", "--", "true"]),
            Err("bad --start-fd x".into())
        );
        assert_eq!(parse(&[]), Err("missing -- before the command".into()));
    }

    #[test]
    fn markers_round_trip() {
        let all = [
            Marker::Started {
                landlock: "full".into(),
                sockets: "blocked".into(),
            },
            Marker::Refused("Landlock is not enforced".into()),
            Marker::ExecFailed("nope: No such file or directory".into()),
            Marker::Pipestatus(vec![1, 0]),
            Marker::Exited(15),
        ];
        let text: String = all.iter().map(Marker::line).collect();
        assert_eq!(Marker::parse_all(&text), all.to_vec());
        assert_eq!(
            Marker::Refused("a\nb".into()).line(),
            "refused a b\n".to_string()
        );
    }
}
