//! The seccomp filter of the `mevedel-sandbox` helper binary.
//!
//! Compiled into the helper only (like its Landlock rules, crate `mevedel-landlock`). Landlock cannot
//! stop `connect` to a pathname Unix socket (an Emacs server, the session
//! bus, ssh and gpg agents, container daemons), and such a socket stays
//! connectable through read-only binds and network namespaces. The
//! filter therefore refuses to create Unix sockets at all (`EACCES`),
//! keeps connected `socketpair` streams (libuv, Python and shells use
//! them between a parent and its children), refuses datagram pairs (a
//! datagram socket can be re-pointed at any named socket), and hides
//! `io_uring`, whose requests can create sockets without a system call
//! the filter sees (`ENOSYS`, so programs fall back). Calls of a foreign
//! ABI get the same rules by their own numbers; x32 calls are refused.

/// One classic BPF instruction, as `struct sock_filter`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

#[repr(C)]
struct Prog {
    len: u16,
    filter: *const Insn,
}

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// Low 32 bits of argument N (little-endian `u64`s from offset 16).
const fn off_arg(n: u32) -> u32 {
    16 + 8 * n
}

const AF_UNIX: u32 = 1;
const SOCK_TYPE_MASK: u32 = 0xf;
const SOCK_DGRAM: u32 = 2;
const IO_URING_FIRST: u32 = 425;
const IO_URING_LAST: u32 = 427;

/// The system call numbers of one ABI that the filter looks at.
struct Abi {
    arch: u32,
    socket: u32,
    socketpair: u32,
    /// `socketcall` multiplexer (i386), whose arguments are out of reach.
    socketcall: Option<u32>,
}

#[cfg(target_arch = "x86_64")]
const NATIVE: Abi = Abi {
    arch: 0xC000_003E,
    socket: 41,
    socketpair: 53,
    socketcall: None,
};
#[cfg(target_arch = "x86_64")]
const FOREIGN: Option<Abi> = Some(Abi {
    arch: 0x4000_0003,
    socket: 359,
    socketpair: 360,
    socketcall: Some(102),
});
#[cfg(target_arch = "aarch64")]
const NATIVE: Abi = Abi {
    arch: 0xC000_00B7,
    socket: 198,
    socketpair: 199,
    socketcall: None,
};
#[cfg(target_arch = "aarch64")]
const FOREIGN: Option<Abi> = None;

/// x32 system calls carry this bit in their number.
#[cfg(target_arch = "x86_64")]
const X32_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(target_arch = "aarch64")]
const X32_BIT: Option<u32> = None;

/// `socketcall`'s first argument for `socket` and `socketpair`.
const SYS_SOCKET: u32 = 1;
const SYS_SOCKETPAIR: u32 = 8;

fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jeq(k: u32, jt: u8, jf: u8) -> Insn {
    Insn {
        code: JEQ_K,
        jt,
        jf,
        k,
    }
}

fn deny(errno: i32) -> Insn {
    stmt(RET_K, RET_ERRNO | errno as u32)
}

/// The checks for one ABI, starting with the system call number loaded.
/// Every path ends in a return, so blocks can follow one another.
fn abi_block(abi: &Abi, x32_bit: Option<u32>) -> Vec<Insn> {
    let allow = stmt(RET_K, RET_ALLOW);
    let mut out = vec![stmt(LD_W_ABS, OFF_NR)];
    if let Some(bit) = x32_bit {
        out.push(Insn {
            code: JGE_K,
            jt: 0,
            jf: 1,
            k: bit,
        });
        out.push(deny(libc::ENOSYS));
    }
    // io_uring_setup ..= io_uring_register: numbers shared by every ABI.
    out.push(Insn {
        code: JGE_K,
        jt: 0,
        jf: 2,
        k: IO_URING_FIRST,
    });
    out.push(Insn {
        code: JGE_K,
        jt: 1,
        jf: 0,
        k: IO_URING_LAST + 1,
    });
    out.push(deny(libc::ENOSYS));
    // socket(AF_UNIX, ...)
    out.push(jeq(abi.socket, 0, 3));
    out.push(stmt(LD_W_ABS, off_arg(0)));
    out.push(jeq(AF_UNIX, 0, 1));
    out.push(deny(libc::EACCES));
    // The reload keeps the number for the next test when socket's
    // domain was not AF_UNIX (its path returns just below).
    out.push(stmt(LD_W_ABS, OFF_NR));
    out.push(jeq(abi.socket, 0, 1));
    out.push(allow);
    // socketpair(_, SOCK_DGRAM, ...)
    out.push(jeq(abi.socketpair, 0, 4));
    out.push(stmt(LD_W_ABS, off_arg(1)));
    out.push(stmt(AND_K, SOCK_TYPE_MASK));
    out.push(jeq(SOCK_DGRAM, 0, 1));
    out.push(deny(libc::EACCES));
    out.push(stmt(LD_W_ABS, OFF_NR));
    if let Some(socketcall) = abi.socketcall {
        out.push(jeq(socketcall, 0, 4));
        out.push(stmt(LD_W_ABS, off_arg(0)));
        out.push(jeq(SYS_SOCKET, 1, 0));
        out.push(jeq(SYS_SOCKETPAIR, 0, 1));
        out.push(deny(libc::EACCES));
    }
    out.push(allow);
    out
}

/// The whole filter: dispatch on the architecture, then one block each.
pub fn program() -> Result<Vec<Insn>, &'static str> {
    let native = abi_block(&NATIVE, X32_BIT);
    let mut out = vec![stmt(LD_W_ABS, OFF_ARCH)];
    match FOREIGN {
        Some(foreign) => {
            let foreign_arch = foreign.arch;
            let foreign = abi_block(&foreign, None);
            // native: to its block (after the refusal); foreign: over it.
            let over = u8::try_from(native.len() + 1).map_err(|_| "seccomp filter too long")?;
            out.push(jeq(NATIVE.arch, 2, 0));
            out.push(jeq(foreign_arch, over, 0));
            out.push(deny(libc::ENOSYS));
            out.extend(native);
            out.extend(foreign);
        }
        None => {
            out.push(jeq(NATIVE.arch, 1, 0));
            out.push(deny(libc::ENOSYS));
            out.extend(native);
        }
    }
    Ok(out)
}

/// Install the filter on this process (inherited by every child). The
/// caller has set no_new_privs.
pub fn install() -> Result<(), String> {
    let filter = program()?;
    let prog = Prog {
        len: u16::try_from(filter.len()).map_err(|_| "seccomp filter too long".to_string())?,
        filter: filter.as_ptr(),
    };
    // SAFETY: PROG points at FILTER, alive across the call; the kernel
    // copies it.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const Prog,
            0,
            0,
        )
    };
    if rc != 0 {
        return Err(format!(
            "cannot install the seccomp filter that blocks Unix sockets: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run the classic BPF PROG on one call, as the kernel would.
    fn run(prog: &[Insn], arch: u32, nr: u32, args: [u32; 2]) -> u32 {
        let mut pc = 0usize;
        let mut acc = 0u32;
        loop {
            let insn = prog[pc];
            pc += 1;
            match insn.code {
                LD_W_ABS => {
                    acc = match insn.k {
                        OFF_NR => nr,
                        OFF_ARCH => arch,
                        k if k == off_arg(0) => args[0],
                        k if k == off_arg(1) => args[1],
                        k => panic!("load of {k}"),
                    }
                }
                AND_K => acc &= insn.k,
                JEQ_K => pc += usize::from(if acc == insn.k { insn.jt } else { insn.jf }),
                JGE_K => pc += usize::from(if acc >= insn.k { insn.jt } else { insn.jf }),
                RET_K => return insn.k,
                code => panic!("opcode {code:#x}"),
            }
        }
    }

    #[test]
    fn unix_sockets_are_refused_and_pairs_kept() {
        let prog = program().unwrap();
        let n = &NATIVE;
        let eacces = RET_ERRNO | libc::EACCES as u32;
        let enosys = RET_ERRNO | libc::ENOSYS as u32;
        assert_eq!(run(&prog, n.arch, n.socket, [AF_UNIX, 1]), eacces);
        assert_eq!(run(&prog, n.arch, n.socket, [2, 1]), RET_ALLOW);
        assert_eq!(run(&prog, n.arch, n.socket, [10, 2]), RET_ALLOW);
        assert_eq!(run(&prog, n.arch, n.socketpair, [AF_UNIX, 1]), RET_ALLOW);
        // SOCK_STREAM | SOCK_CLOEXEC
        assert_eq!(
            run(&prog, n.arch, n.socketpair, [AF_UNIX, 1 | 0o2000000]),
            RET_ALLOW
        );
        assert_eq!(
            run(&prog, n.arch, n.socketpair, [AF_UNIX, SOCK_DGRAM | 0o4000]),
            eacces
        );
        for nr in IO_URING_FIRST..=IO_URING_LAST {
            assert_eq!(run(&prog, n.arch, nr, [0, 0]), enosys);
        }
        assert_eq!(run(&prog, n.arch, IO_URING_LAST + 1, [0, 0]), RET_ALLOW);
        assert_eq!(run(&prog, n.arch, 0, [AF_UNIX, 0]), RET_ALLOW);
        assert_eq!(run(&prog, 0x1234, n.socket, [2, 1]), enosys);
        if let Some(bit) = X32_BIT {
            assert_eq!(run(&prog, n.arch, bit | n.socket, [2, 1]), enosys);
        }
        if let Some(f) = FOREIGN {
            assert_eq!(run(&prog, f.arch, f.socket, [AF_UNIX, 1]), eacces);
            assert_eq!(run(&prog, f.arch, f.socket, [2, 1]), RET_ALLOW);
            assert_eq!(run(&prog, f.arch, f.socketpair, [AF_UNIX, 2]), eacces);
            let call = f.socketcall.unwrap_or(0);
            assert_eq!(run(&prog, f.arch, call, [SYS_SOCKET, 0]), eacces);
            assert_eq!(run(&prog, f.arch, call, [SYS_SOCKETPAIR, 0]), eacces);
            assert_eq!(run(&prog, f.arch, call, [3, 0]), RET_ALLOW);
            assert_eq!(run(&prog, f.arch, 425, [0, 0]), enosys);
        }
    }
}
