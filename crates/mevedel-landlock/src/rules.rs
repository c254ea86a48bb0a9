//! The rules, and applying them to this process.
//!
//! Landlock only *grants*: a rule on a directory covers everything
//! beneath it, and nothing can be subtracted. A writable root holding a
//! read-only `.git` (or a readable `/` holding an inaccessible `~/.ssh`)
//! is therefore granted piecewise: every directory on the way down to a
//! carve-out is split into its entries, each entry that holds no
//! carve-out gets one rule for its whole subtree, and the carve-out gets
//! none. The directories on that path get no rule of their own, so new
//! entries cannot be created directly in them (nor can they be listed,
//! for a read carve-out) — the price of having no deny rules.

use std::path::{Path, PathBuf};

use ::landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use mevedel_sandbox_protocol::{HelperArgs, landlock_abi};

/// One rule: grant read (or read and write) on PATH and beneath it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub path: PathBuf,
    pub write: bool,
    pub is_dir: bool,
}

/// The rules that enforce ARGS' read/write roots and carve-outs.
pub fn plan(args: &HelperArgs) -> Vec<Rule> {
    let deny: Vec<&Path> = args.deny.iter().map(PathBuf::as_path).collect();
    let mut write_carve = deny.clone();
    write_carve.extend(args.protect.iter().map(PathBuf::as_path));
    let mut rules = Vec::new();
    for root in &args.read {
        cover(root, false, &deny, &mut rules);
    }
    for root in &args.write {
        cover(root, true, &write_carve, &mut rules);
    }
    rules
}

/// Grant ROOT's subtree except the CARVE paths beneath (or at) it.
fn cover(root: &Path, write: bool, carve: &[&Path], out: &mut Vec<Rule>) {
    if carve.contains(&root) {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(root) else {
        return;
    };
    let beneath: Vec<&Path> = carve
        .iter()
        .copied()
        .filter(|c| c.starts_with(root))
        .collect();
    if beneath.is_empty() || !meta.is_dir() {
        out.push(Rule {
            path: root.to_path_buf(),
            write,
            is_dir: meta.is_dir(),
        });
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        // A rule on a link would follow it and grant its target.
        if kind.is_symlink() {
            continue;
        }
        let path = entry.path();
        if kind.is_dir() {
            cover(&path, write, &beneath, out);
        } else if !beneath.contains(&path.as_path()) {
            out.push(Rule {
                path,
                write,
                is_dir: false,
            });
        }
    }
}

/// Landlock ABI whose features have been tested with this helper; newer
/// kernels are asked for no more than this.
pub const TESTED_ABI: u32 = 6;

/// Apply ARGS' ruleset to this process (and so to the command it
/// starts), asking for the features of ABI version ABI. Returns `full`
/// or `partial`; fails when the ruleset cannot be applied, or when
/// `--required` and anything requested is not enforced.
pub fn restrict(args: &HelperArgs, abi: u32) -> Result<&'static str, String> {
    let abi = ABI::from(i32::try_from(abi.min(TESTED_ABI)).unwrap_or(1));
    let level = if args.required {
        CompatLevel::HardRequirement
    } else {
        CompatLevel::BestEffort
    };
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let file = AccessFs::from_file(abi);
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("Landlock {what}: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(level)
        .handle_access(all)
        .map_err(|e| fail("cannot handle filesystem access", &e))?;
    if args.deny_net && abi >= ABI::V4 {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| fail("cannot handle network access", &e))?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(|e| fail("cannot scope signals and sockets", &e))?;
    }
    let mut created = ruleset
        .create()
        .map_err(|e| fail("cannot create a ruleset", &e))?;
    for rule in plan(args) {
        let rights: BitFlags<AccessFs> = match (rule.write, rule.is_dir) {
            (true, true) => all,
            (false, true) => read,
            (true, false) => all & file,
            (false, false) => read & file,
        };
        // A path that vanished since it was listed needs no rule.
        let Ok(fd) = PathFd::new(&rule.path) else {
            continue;
        };
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| {
                fail(
                    &format!("cannot add a rule for {}", rule.path.display()),
                    &e,
                )
            })?;
    }
    let status = created
        .restrict_self()
        .map_err(|e| fail("cannot restrict the process", &e))?;
    if !status.no_new_privs {
        return Err("no_new_privs could not be set".into());
    }
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok("full"),
        RulesetStatus::PartiallyEnforced if !args.required => Ok("partial"),
        RulesetStatus::PartiallyEnforced => {
            Err("the Landlock ruleset is only partially enforced".into())
        }
        _ => Err("the Landlock ruleset is not enforced by this kernel".into()),
    }
}

/// Landlock ABI that scopes signals and abstract Unix sockets.
pub const SCOPE_ABI: u32 = 6;

/// Put the command (a freshly forked child) in a nested domain scoped
/// for signals and abstract sockets: it can no longer signal the
/// supervising helper, which stays in the outer domain.
pub fn scope_child() -> Result<(), String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("Landlock {what}: {e}");
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(|e| fail("cannot scope the command", &e))?
        .create()
        .map_err(|e| fail("cannot create the command's scope", &e))?
        .restrict_self()
        .map_err(|e| fail("cannot scope the command", &e))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(()),
        _ => Err("the command's Landlock scope is not enforced".into()),
    }
}

/// For `--probe`: restrict this process with a trivial ruleset and say
/// whether it worked, e.g. `landlock=full abi=6`.
pub fn probe() -> String {
    let args = HelperArgs {
        read: vec![PathBuf::from("/")],
        ..HelperArgs::default()
    };
    let kernel = match landlock_abi() {
        Ok(abi) => abi,
        Err(problem) => return format!("landlock=none {problem}"),
    };
    match restrict(&args, kernel) {
        Ok(status) => format!("landlock={status} abi={}", kernel.min(TESTED_ABI)),
        Err(problem) => format!("landlock=none {problem}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);

    impl Dir {
        fn new(tag: &str) -> Dir {
            let path =
                std::env::temp_dir().join(format!("mevedel-ll-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            for sub in [
                "ws/.git/hooks",
                "ws/src/deep",
                "ws/lib/.git",
                "home/.ssh",
                "home/docs",
            ] {
                std::fs::create_dir_all(path.join(sub)).unwrap();
            }
            for file in ["ws/README", "ws/src/main.rs", "home/.profile"] {
                std::fs::write(path.join(file), "x").unwrap();
            }
            std::os::unix::fs::symlink("/etc", path.join("ws/etc-link")).unwrap();
            Dir(path)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn sorted(mut rules: Vec<Rule>, base: &Path) -> Vec<String> {
        rules.sort_by(|a, b| a.path.cmp(&b.path));
        rules
            .iter()
            .map(|r| {
                format!(
                    "{} {}{}",
                    if r.write { "rw" } else { "ro" },
                    r.path.strip_prefix(base).unwrap_or(&r.path).display(),
                    if r.is_dir { "/" } else { "" }
                )
            })
            .collect()
    }

    #[test]
    fn carve_outs_split_their_ancestors() {
        let dir = Dir::new("plan");
        let base = &dir.0;
        let args = HelperArgs {
            read: vec![base.join("home")],
            write: vec![base.join("ws")],
            protect: vec![base.join("ws/.git"), base.join("ws/lib/.git")],
            deny: vec![base.join("home/.ssh")],
            ..HelperArgs::default()
        };
        assert_eq!(
            sorted(plan(&args), base),
            vec![
                "ro home/.profile",
                "ro home/docs/",
                "rw ws/README",
                "rw ws/src/",
            ]
        );
    }

    #[test]
    fn roots_without_carve_outs_get_one_rule() {
        let dir = Dir::new("whole");
        let base = &dir.0;
        let args = HelperArgs {
            read: vec![base.join("ws")],
            write: vec![base.join("home/docs"), base.join("missing")],
            protect: vec![base.join("ws/.git")],
            ..HelperArgs::default()
        };
        assert_eq!(sorted(plan(&args), base), vec!["rw home/docs/", "ro ws/"]);
    }

    #[test]
    fn a_carve_out_that_is_the_root_gets_nothing() {
        let dir = Dir::new("root");
        let args = HelperArgs {
            write: vec![dir.0.join("ws/.git")],
            protect: vec![dir.0.join("ws/.git")],
            ..HelperArgs::default()
        };
        assert!(plan(&args).is_empty());
    }
}
