//! AMX-BF16 for [`super::bf16`]: the OS permission (asked once per process), the per-work-item tile
//! configuration ([`Tiles`]), and the kernel (32 outputs x 32 pixels as 2x2 C tiles).
//!
//! Rust has no AMX intrinsics: the tile instructions are spelled in `asm!` templates with the tile
//! registers named literally (the compiler never allocates tmm registers, so nothing else touches
//! them between the statements). Tiles: tmm0-3 the fp32 C tiles (16 rows x 64 bytes), tmm4/5 the
//! A tiles of two 16-output blocks (16 outputs x 16 bf16 pairs), tmm6/7 the B tiles of two 16-pixel
//! blocks (16 pairs x 16 pixels, rows one padded image row apart). Linux gives tile state only after
//! `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)` (per process); without it the first tile
//! instruction faults, so [`unavailable_reason`] asks first and the kernel is never chosen when it
//! fails.

#[cfg(target_arch = "x86_64")]
use super::bf16_job::Job;
use std::sync::OnceLock;

/// Why AMX-BF16 cannot run here (CPU flags, OS permission), or None when it can.
pub fn unavailable_reason() -> Option<String> {
    static R: OnceLock<Option<String>> = OnceLock::new();
    R.get_or_init(detect).clone()
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn detect() -> Option<String> {
    Some("AMX is used on x86-64 Linux only".into())
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn detect() -> Option<String> {
    use std::arch::x86_64::__cpuid_count;
    let leaf7 = __cpuid_count(7, 0);
    let (tile, bf16) = (leaf7.edx & (1 << 24) != 0, leaf7.edx & (1 << 22) != 0);
    if !(tile && bf16) {
        return Some("this CPU lacks amx_tile/amx_bf16".into());
    }
    const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
    const XFEATURE_XTILEDATA: i64 = 18;
    let r: i64;
    // SAFETY: arch_prctl (syscall 158) with these arguments only changes this process's
    // permission to use the AMX tile state.
    unsafe {
        std::arch::asm!("syscall", inlateout("rax") 158i64 => r, in("rdi") ARCH_REQ_XCOMP_PERM, in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    (r != 0).then(|| format!("the OS refused the AMX tile state (arch_prctl returned {r})"))
}

/// The 64-byte tile configuration: palette 1, eight tiles of 16 rows x 64 bytes.
#[repr(C, align(64))]
struct Config([u8; 64]);

/// The tile configuration of the current thread, loaded for the life of the value (one work item);
/// released on drop so no tile state lingers in the pool's threads.
pub struct Tiles(());

impl Tiles {
    /// Loads the configuration. Call only when [`unavailable_reason`] is None.
    pub(super) fn config() -> Tiles {
        let mut cfg = Config([0; 64]);
        cfg.0[0] = 1;
        for t in 0..8 {
            cfg.0[16 + 2 * t] = 64;
            cfg.0[48 + t] = 16;
        }
        // SAFETY: the kernel is only chosen when AMX is supported and permitted (see the module doc).
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::asm!("ldtilecfg [{0}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly));
        }
        Tiles(())
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        // SAFETY: as in `config`.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::asm!("tilerelease", options(nostack, nomem));
        }
    }
}

#[cfg(target_arch = "x86_64")]
macro_rules! tileload {
    ($t:literal, $p:expr, $stride:expr) => {
        std::arch::asm!(concat!("tileloadd ", $t, ", [{p} + {s}*1]"), p = in(reg) $p, s = in(reg) $stride, options(nostack, readonly))
    };
}

#[cfg(target_arch = "x86_64")]
macro_rules! tilestore {
    ($t:literal, $p:expr, $stride:expr) => {
        std::arch::asm!(concat!("tilestored [{p} + {s}*1], ", $t), p = in(reg) $p, s = in(reg) $stride, options(nostack))
    };
}

/// The block both kernels compute: 32 channels (two A tiles, tmm4/tmm5) x 32 outputs (two B tiles,
/// tmm6/tmm7) into the 2x2 C tiles tmm0-tmm3 by `$op` (`tdpbf16ps` or `tdpbssd`, 4-byte results),
/// over every tap and input chunk of `$j`, stored to `$c` (row stride `$ldc` elements). The next
/// step's tiles are loaded as soon as the products of this step are done with the register (A0
/// after its two products, B0 after the third), so the loads overlap the remaining products.
/// Input chunks per pass of [`tile_blocks!`] for int8 (64 channels a chunk): one for 3x3 convs
/// (18 KB of A tiles, kept in L1 with a block's B rows), more for 1x1. Measured with cpu_bench
/// `--kernels` on this Xeon: int8 192->32 3x3 17.5 us instead of 22, 128->64 42 instead of 47; the
/// same passes made bf16 slower (192->32 44 us instead of 38), so bf16 runs all chunks in one pass.
#[cfg(target_arch = "x86_64")]
fn int8_chunks_per_pass(j: &Job) -> usize {
    (12 / (j.kh * j.kw)).max(1)
}

/// The blocks both kernels compute: per block `(q, c)` of `$blocks`, 32 channels (two A tiles,
/// tmm4/tmm5) x 32 outputs (two B tiles, tmm6/tmm7) into the 2x2 C tiles tmm0-tmm3 by `$op`
/// (`tdpbf16ps` or `tdpbssd`, 4-byte results), over every tap and input chunk of `$j`, stored to
/// `c` (row stride `$ldc` elements). The input chunks are split into passes of `$per` chunks,
/// each over all blocks, the C tiles stored after a pass and loaded back
/// for the next: the A tiles of one pass are reused from L1 by every block. (Loading the next
/// step's tiles between this step's products, across block boundaries, measured the same: the core
/// reorders the tile loads itself; a software prefetch of the next A tiles cost ~10%.)
#[cfg(target_arch = "x86_64")]
macro_rules! tile_blocks {
    ($op:literal, $j:expr, $per:expr, $ob2:expr, $blocks:expr, $ldc:expr) => {{
        let (j, per, ob2, blocks, ldc) = ($j, $per, $ob2, $blocks, $ldc);
        let (sa, sb, sc) = (64usize, j.kstride * 4, ldc * 4);
        for k0 in (0..j.nkc).step_by(per) {
            let k1 = (k0 + per).min(j.nkc);
            for &(q, c) in blocks {
                if k0 == 0 {
                    std::arch::asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
                } else {
                    tileload!("tmm0", c, sc);
                    tileload!("tmm1", c.add(16), sc);
                    tileload!("tmm2", c.add(16 * ldc), sc);
                    tileload!("tmm3", c.add(16 * ldc + 16), sc);
                }
                for t in 0..j.kh * j.kw {
                    for kc in k0..k1 {
                        let b = j.b(t, kc, q);
                        tileload!("tmm4", j.a(t, ob2 * 2, kc), sa);
                        tileload!("tmm6", b, sb);
                        tileload!("tmm7", b.add(16), sb);
                        tileload!("tmm5", j.a(t, ob2 * 2 + 1, kc), sa);
                        std::arch::asm!(
                            concat!($op, " tmm0, tmm4, tmm6"),
                            concat!($op, " tmm1, tmm4, tmm7"),
                            concat!($op, " tmm2, tmm5, tmm6"),
                            concat!($op, " tmm3, tmm5, tmm7"),
                            options(nostack, nomem)
                        );
                    }
                }
                tilestore!("tmm0", c, sc);
                tilestore!("tmm1", c.add(16), sc);
                tilestore!("tmm2", c.add(16 * ldc), sc);
                tilestore!("tmm3", c.add(16 * ldc + 16), sc);
            }
        }
    }};
}

/// [`super::bf16`]'s kernel ([`super::bf16_job::KernelFn`]).
///
/// # Safety
/// As [`super::bf16_job::KernelFn`], with AMX-BF16 supported and a live [`Tiles`].
#[cfg(target_arch = "x86_64")]
pub unsafe fn kernel(j: &Job, ob2: usize, blocks: &[(usize, *mut f32)], ldc: usize) {
    tile_blocks!("tdpbf16ps", j, j.nkc, ob2, blocks, ldc);
}

/// Why AMX-INT8 cannot run here, or None when it can (the amx_int8 flag, then the tile state
/// permission of [`unavailable_reason`], which also wants amx_bf16: every AMX CPU so far has both).
pub fn int8_unavailable_reason() -> Option<String> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    if std::arch::x86_64::__cpuid_count(7, 0).edx & (1 << 25) == 0 {
        return Some("this CPU lacks amx_int8".into());
    }
    unavailable_reason()
}

/// [`super::int8`]'s kernel: the i32 sums `w * v` (s8 x s8, TDPBSSD) of each block (`j` in the
/// quad layout of [`super::int8`]).
///
/// # Safety
/// As [`kernel`], with AMX-INT8 supported.
#[cfg(target_arch = "x86_64")]
pub unsafe fn kernel_int8(j: &Job, ob2: usize, blocks: &[(usize, *mut i32)], ldc: usize) {
    tile_blocks!("tdpbssd", j, int8_chunks_per_pass(j), ob2, blocks, ldc);
}
