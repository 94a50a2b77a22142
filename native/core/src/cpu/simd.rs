//! A minimal f32 SIMD vector abstraction for the hand-written micro-kernels ([`super::wgemm`]):
//! one implementation per instruction set (AVX2 `__m256`, AVX-512F `__m512`) plus a portable
//! array of `L` lanes ([`Lanes`]) that runs anywhere.
//!
//! The portable one is what lets a machine without AVX-512 test the 16-lane kernel logic (panel
//! widths, padding, tails) exactly as the AVX-512 path instantiates it; only the one-line
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
    unsafe fn set1(v: f32) -> Self::V;
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    /// `a * b`, rounded on its own (no fusing).
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn div(a: Self::V, b: Self::V) -> Self::V;
    /// `a > b ? a : b` per lane (b where either is NaN, as x86's maxps).
    unsafe fn max(a: Self::V, b: Self::V) -> Self::V;
    /// `out[4 j + q] = p[q][j]` for q in 0..4, j in 0..LANES (4 * LANES floats).
    #[inline(always)]
    unsafe fn interleave4(p: [Self::V; 4], out: *mut f32) {
        let mut tmp = [0.0f32; 64];
        debug_assert!(4 * Self::LANES <= tmp.len());
        for (q, v) in p.iter().enumerate() {
            Self::store(tmp.as_mut_ptr().add(q * Self::LANES), *v);
        }
        for j in 0..Self::LANES {
            for q in 0..4 {
                *out.add(4 * j + q) = tmp[q * Self::LANES + j];
            }
        }
    }
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
    /// Unfused (`mul_add` would be a slow library call on CPUs without FMA).
    #[inline(always)]
    unsafe fn fma(acc: [f32; L], a: [f32; L], b: [f32; L]) -> [f32; L] {
        let mut r = acc;
        for i in 0..L {
            r[i] = acc[i] + a[i] * b[i];
        }
        r
    }
    #[inline(always)]
    unsafe fn set1(v: f32) -> [f32; L] {
        [v; L]
    }
    #[inline(always)]
    unsafe fn add(a: [f32; L], b: [f32; L]) -> [f32; L] {
        let mut r = a;
        for i in 0..L {
            r[i] = a[i] + b[i];
        }
        r
    }
    #[inline(always)]
    unsafe fn sub(a: [f32; L], b: [f32; L]) -> [f32; L] {
        let mut r = a;
        for i in 0..L {
            r[i] = a[i] - b[i];
        }
        r
    }
    #[inline(always)]
    unsafe fn mul(a: [f32; L], b: [f32; L]) -> [f32; L] {
        std::array::from_fn(|i| a[i] * b[i])
    }
    #[inline(always)]
    unsafe fn div(a: [f32; L], b: [f32; L]) -> [f32; L] {
        std::array::from_fn(|i| a[i] / b[i])
    }
    #[inline(always)]
    unsafe fn max(a: [f32; L], b: [f32; L]) -> [f32; L] {
        std::array::from_fn(|i| if a[i] > b[i] { a[i] } else { b[i] })
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
        #[inline(always)]
        unsafe fn set1(v: f32) -> __m256 {
            _mm256_set1_ps(v)
        }
        #[inline(always)]
        unsafe fn add(a: __m256, b: __m256) -> __m256 {
            _mm256_add_ps(a, b)
        }
        #[inline(always)]
        unsafe fn sub(a: __m256, b: __m256) -> __m256 {
            _mm256_sub_ps(a, b)
        }
        #[inline(always)]
        unsafe fn mul(a: __m256, b: __m256) -> __m256 {
            _mm256_mul_ps(a, b)
        }
        #[inline(always)]
        unsafe fn div(a: __m256, b: __m256) -> __m256 {
            _mm256_div_ps(a, b)
        }
        #[inline(always)]
        unsafe fn max(a: __m256, b: __m256) -> __m256 {
            _mm256_max_ps(a, b)
        }
        #[inline(always)]
        unsafe fn interleave4(p: [__m256; 4], out: *mut f32) {
            let t0 = _mm256_unpacklo_ps(p[0], p[1]); // p0[0] p1[0] p0[1] p1[1] | p0[4] p1[4] p0[5] p1[5]
            let t1 = _mm256_unpackhi_ps(p[0], p[1]); // p0[2] p1[2] p0[3] p1[3] | p0[6] ..
            let t2 = _mm256_unpacklo_ps(p[2], p[3]);
            let t3 = _mm256_unpackhi_ps(p[2], p[3]);
            let u0 = _mm256_shuffle_ps::<0x44>(t0, t2); // tile 0 | tile 4
            let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2); // tile 1 | tile 5
            let u2 = _mm256_shuffle_ps::<0x44>(t1, t3); // tile 2 | tile 6
            let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3); // tile 3 | tile 7
            _mm256_storeu_ps(out, _mm256_permute2f128_ps::<0x20>(u0, u1));
            _mm256_storeu_ps(out.add(8), _mm256_permute2f128_ps::<0x20>(u2, u3));
            _mm256_storeu_ps(out.add(16), _mm256_permute2f128_ps::<0x31>(u0, u1));
            _mm256_storeu_ps(out.add(24), _mm256_permute2f128_ps::<0x31>(u2, u3));
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
        #[inline(always)]
        unsafe fn set1(v: f32) -> __m512 {
            _mm512_set1_ps(v)
        }
        #[inline(always)]
        unsafe fn add(a: __m512, b: __m512) -> __m512 {
            _mm512_add_ps(a, b)
        }
        #[inline(always)]
        unsafe fn sub(a: __m512, b: __m512) -> __m512 {
            _mm512_sub_ps(a, b)
        }
        #[inline(always)]
        unsafe fn mul(a: __m512, b: __m512) -> __m512 {
            _mm512_mul_ps(a, b)
        }
        #[inline(always)]
        unsafe fn div(a: __m512, b: __m512) -> __m512 {
            _mm512_div_ps(a, b)
        }
        #[inline(always)]
        unsafe fn max(a: __m512, b: __m512) -> __m512 {
            _mm512_max_ps(a, b)
        }
    }
}
