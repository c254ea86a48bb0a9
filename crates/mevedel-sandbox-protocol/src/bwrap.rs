//! The bubblewrap command line for a [`Plan`]: a pure function.
//!
//! The sandbox starts from a read-only view of `/` with fresh `/dev`,
//! `/proc` and a private `/tmp`, in new user, PID, IPC, UTS, cgroup and
//! (unless granted) network namespaces, with every capability dropped
//! and no further user namespaces. Binds are applied parent-first, so a
//! carve-out inside a writable root lands on top of it and a granted
//! path on top of both; masks are remounted read-only last. bwrap's
//! `--die-with-parent` and the PID namespace take every descendant down
//! with the command, `setsid` or not.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::plan::{Plan, depth};

/// Flags shared by the launcher and the probe, so the probe tests exactly
/// the namespaces a launch will ask for.
fn base(bwrap: &Path, network: bool) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec![bwrap.into()];
    argv.extend(
        [
            "--new-session",
            "--die-with-parent",
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--cap-drop",
            "ALL",
        ]
        .map(OsString::from),
    );
    if network {
        argv.push("--share-net".into());
    }
    argv.extend(
        [
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
        ]
        .map(OsString::from),
    );
    argv
}

/// The private `/tmp` hides whatever lives beneath it, the helper binary
/// of a checkout under `/tmp` among them: bind INNER's program back,
/// read-only, so the sandbox can start.
fn keep_program_visible(argv: &mut Vec<OsString>, inner: &[OsString]) {
    if let Some(program) = inner.first()
        && Path::new(program).starts_with("/tmp")
    {
        argv.extend(["--ro-bind".into(), program.clone(), program.clone()]);
    }
}

/// The probe's command line: the launch namespaces around INNER.
pub fn probe_argv(bwrap: &Path, inner: &[OsString]) -> Vec<OsString> {
    let mut argv = base(bwrap, false);
    keep_program_visible(&mut argv, inner);
    argv.push("--".into());
    argv.extend(inner.iter().cloned());
    argv
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    /// Order matters for equal paths: later ops mount on top.
    Write,
    Protect,
    MaskDir,
    MaskFile,
    GrantRead,
    GrantWrite,
}

/// The full command line that runs INNER (the helper and the command)
/// under PLAN with CWD as working directory.
pub fn argv(bwrap: &Path, plan: &Plan, cwd: &Path, inner: &[OsString]) -> Vec<OsString> {
    let mut argv = base(bwrap, plan.network);
    keep_program_visible(&mut argv, inner);
    let mut ops: Vec<(usize, Op, &PathBuf)> = Vec::new();
    ops.extend(plan.writable.iter().map(|p| (depth(p), Op::Write, p)));
    ops.extend(plan.protected.iter().map(|p| (depth(p), Op::Protect, p)));
    ops.extend(plan.masked.iter().map(|m| {
        let op = if m.is_dir { Op::MaskDir } else { Op::MaskFile };
        (depth(&m.path), op, &m.path)
    }));
    ops.extend(plan.grant_read.iter().map(|p| (depth(p), Op::GrantRead, p)));
    ops.extend(
        plan.grant_write
            .iter()
            .map(|p| (depth(p), Op::GrantWrite, p)),
    );
    ops.sort();
    for (_, op, path) in &ops {
        let (flag, source): (&str, OsString) = match op {
            Op::Write | Op::GrantWrite => ("--bind", (*path).into()),
            Op::Protect | Op::GrantRead => ("--ro-bind", (*path).into()),
            Op::MaskDir => ("--tmpfs", OsString::new()),
            Op::MaskFile => ("--ro-bind", "/dev/null".into()),
        };
        argv.push(flag.into());
        if !source.is_empty() {
            argv.push(source);
        }
        argv.push((*path).into());
    }
    for (_, op, path) in &ops {
        if *op == Op::MaskDir {
            argv.push("--remount-ro".into());
            argv.push((*path).into());
        }
    }
    argv.push("--chdir".into());
    argv.push(cwd.into());
    argv.push("--".into());
    argv.extend(inner.iter().cloned());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Masked;

    fn text(argv: &[OsString]) -> String {
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn inner() -> Vec<OsString> {
        ["/m/mevedel-sandbox", "--", "sh", "-c", "echo hi"]
            .map(OsString::from)
            .to_vec()
    }

    #[test]
    fn golden_minimal() {
        let plan = Plan {
            writable: vec!["/w".into()],
            ..Plan::default()
        };
        assert_eq!(
            text(&argv(
                Path::new("/usr/bin/bwrap"),
                &plan,
                Path::new("/w"),
                &inner()
            )),
            "/usr/bin/bwrap --new-session --die-with-parent --unshare-all --unshare-user \
             --disable-userns --cap-drop ALL --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
             --bind /w /w --chdir /w -- /m/mevedel-sandbox -- sh -c echo hi"
        );
    }

    #[test]
    fn golden_full_plan_orders_mounts_parent_first() {
        let plan = Plan {
            writable: vec!["/home/u/ws".into(), "/s/scratch".into()],
            protected: vec![
                "/home/u/ws/.git".into(),
                "/home/u/ws/.mevedel".into(),
                "/home/u/ws/lib/dep/.git".into(),
            ],
            landlock_protected: Vec::new(),
            dir_locals: Vec::new(),
            masked: vec![
                Masked {
                    path: "/home/u/.netrc".into(),
                    is_dir: false,
                },
                Masked {
                    path: "/home/u/.ssh".into(),
                    is_dir: true,
                },
            ],
            grant_write: vec!["/home/u/ws/.git".into()],
            grant_read: vec!["/home/u/.ssh/known_hosts".into()],
            network: true,
        };
        assert_eq!(
            text(&argv(
                Path::new("bwrap"),
                &plan,
                Path::new("/home/u/ws"),
                &inner()
            )),
            "bwrap --new-session --die-with-parent --unshare-all --unshare-user \
             --disable-userns --cap-drop ALL --share-net --ro-bind / / --dev /dev --proc /proc \
             --tmpfs /tmp \
             --bind /s/scratch /s/scratch \
             --bind /home/u/ws /home/u/ws \
             --tmpfs /home/u/.ssh \
             --ro-bind /dev/null /home/u/.netrc \
             --ro-bind /home/u/ws/.git /home/u/ws/.git \
             --ro-bind /home/u/ws/.mevedel /home/u/ws/.mevedel \
             --ro-bind /home/u/.ssh/known_hosts /home/u/.ssh/known_hosts \
             --bind /home/u/ws/.git /home/u/ws/.git \
             --ro-bind /home/u/ws/lib/dep/.git /home/u/ws/lib/dep/.git \
             --remount-ro /home/u/.ssh \
             --chdir /home/u/ws -- /m/mevedel-sandbox -- sh -c echo hi"
        );
    }

    #[test]
    fn golden_probe() {
        assert_eq!(
            text(&probe_argv(Path::new("bwrap"), &["true".into()])),
            "bwrap --new-session --die-with-parent --unshare-all --unshare-user \
             --disable-userns --cap-drop ALL --ro-bind / / --dev /dev --proc /proc \
             --tmpfs /tmp -- true"
        );
    }

    #[test]
    fn helper_under_tmp_stays_visible() {
        let inner = ["/tmp/x/mevedel-sandbox", "--", "true"]
            .map(OsString::from)
            .to_vec();
        let plan = Plan {
            writable: vec!["/w".into()],
            ..Plan::default()
        };
        for line in [
            text(&argv(Path::new("bwrap"), &plan, Path::new("/w"), &inner)),
            text(&probe_argv(Path::new("bwrap"), &inner)),
        ] {
            assert!(
                line.contains(
                    "--tmpfs /tmp --ro-bind /tmp/x/mevedel-sandbox /tmp/x/mevedel-sandbox"
                ),
                "{line}"
            );
        }
        let elsewhere = text(&argv(
            Path::new("bwrap"),
            &plan,
            Path::new("/w"),
            &super::tests::inner(),
        ));
        assert!(!elsewhere.contains("--ro-bind /m/mevedel-sandbox"));
    }
}
