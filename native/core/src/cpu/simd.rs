//! A minimal f32 SIMD vector abstraction for the hand-written micro-kernels ([`super::wgemm`]):
//! one implementation per instruction set (AVX2 `__m256`, AVX-512F `__m512`) plus a portable
//! array of `L` lanes ([`Lanes`]) that runs anywhere.
//!
//! The portable one is what lets a machine without AVX-512 test the 16-lane kernel logic (panel
//! widths, padding, tails) exactly as the AVX-512 path instantiates it; only the six one-line
//! intrinsic wrappers of [`Avx512`] below are then left unexercised on such a machine.
//!
//! Every method is `unsafe`: pointers must be valid for `LANES` floats (one for `splat`), and the
//! intrinsic implementations may only be called from code compiled with their target feature.

pub trait Simd: Copy {
    const LANES: usize;
    type V: Copy;
    unsafe fn zero() -> Self::V;
    /// Broadcast `*p` to every lane.
    unsafe fn splat(p: *const f32) -> Self::V;
    /// Unaligned load of `LANES` floats.
    unsafe fn load(p: *const f32) -> Self::V;
    /// Unaligned store of `LANES` floats.
    unsafe fn store(p: *mut f32, v: Self::V);
    /// `acc + a * b` (fused where the hardware has it).
    unsafe fn fma(acc: Self::V, a: Self::V, b: Self::V) -> Self::V;
}

/// Portable `L`-lane vector (plain arrays; the compiler vectorises what it can).
#[derive(Clone, Copy)]
pub struct Lanes<const L: usize>;

impl<const L: usize> Simd for Lanes<L> {
    const LANES: usize = L;
    type V = [f32; L];
    #[inline(always)]
    unsafe fn zero() -> [f32; L] {
        [0.0; L]
    }
    #[inline(always)]
    unsafe fn splat(p: *const f32) -> [f32; L] {
        [*p; L]
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> [f32; L] {
        std::ptr::read_unaligned(p as *const [f32; L])
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: [f32; L]) {
        std::ptr::write_unaligned(p as *mut [f32; L], v)
    }
    #[inline(always)]
    unsafe fn fma(acc: [f32; L], a: [f32; L], b: [f32; L]) -> [f32; L] {
        let mut r = acc;
        for i in 0..L {
            r[i] = a[i].mul_add(b[i], acc[i]);
        }
        r
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{Avx2, Avx512};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Simd;
    use std::arch::x86_64::*;

    /// 8 lanes, `__m256`; callers are compiled with `avx2,fma`.
    #[derive(Clone, Copy)]
    pub struct Avx2;

    impl Simd for Avx2 {
        const LANES: usize = 8;
        type V = __m256;
        #[inline(always)]
        unsafe fn zero() -> __m256 {
            _mm256_setzero_ps()
        }
        #[inline(always)]
        unsafe fn splat(p: *const f32) -> __m256 {
            _mm256_broadcast_ss(&*p)
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> __m256 {
            _mm256_loadu_ps(p)
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: __m256) {
            _mm256_storeu_ps(p, v)
        }
        #[inline(always)]
        unsafe fn fma(acc: __m256, a: __m256, b: __m256) -> __m256 {
            _mm256_fmadd_ps(a, b, acc)
        }
    }

    /// 16 lanes, `__m512`; callers are compiled with `avx512f`.
    #[derive(Clone, Copy)]
    pub struct Avx512;

    impl Simd for Avx512 {
        const LANES: usize = 16;
        type V = __m512;
        #[inline(always)]
        unsafe fn zero() -> __m512 {
            _mm512_setzero_ps()
        }
        #[inline(always)]
        unsafe fn splat(p: *const f32) -> __m512 {
            _mm512_set1_ps(*p)
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> __m512 {
            _mm512_loadu_ps(p)
        }
        #[inline(always)]
        unsafe fn store(p: *mut f32, v: __m512) {
            _mm512_storeu_ps(p, v)
        }
        #[inline(always)]
        unsafe fn fma(acc: __m512, a: __m512, b: __m512) -> __m512 {
            _mm512_fmadd_ps(a, b, acc)
        }
    }
}
