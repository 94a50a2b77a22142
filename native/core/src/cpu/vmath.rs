//! Branch-free `exp`, sigmoid and Mish for the conv epilogues and element-wise loops: plain f32
//! arithmetic and bit manipulation only (no libm call), so a loop over a slice is vectorised by
//! the compiler in whichever `#[target_feature]` function inlines it (see [`super::epilogue`]:
//! one copy per ISA level, AVX2 8 lanes, AVX-512F 16 lanes, SSE2 otherwise).
//!
//! `exp`: `e^x = 2^n · e^r` with `n = round(x / ln 2)` (rounded by adding and subtracting
//! 1.5·2^23, whose low mantissa bits then hold `n`), `r = x - n ln 2` in two parts (|r| <= ln2/2),
//! `e^r` by its Taylor polynomial to degree 7 (truncation < 1e-8 relative), `2^n` built from the
//! exponent bits. Inputs are clamped to [-87.3, 88.3] (the f32 normal range): below, the result is
//! about 1.2e-38 instead of a denormal or 0. Measured against f64 exp over [-87, 88]: relative error
//! 9.2e-8 at worst (about 1.5 ulp; the test bounds it by 2e-7).
//!
//! Mish: `x · tanh(softplus(x)) = x · n / (n + 2)` with `n = e^x (e^x + 2)`: one exp, no
//! cancellation for negative x; above 20 it is `x` (tanh(softplus(20)) rounds to 1 in f32).

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split so that `n * LN2_HI` is exact for |n| < 2^9.
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
const SHIFT: f32 = 12_582_912.0; // 1.5 * 2^23

/// `e^x` (see the module doc for range and error).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.3, 88.3);
    let t = x * LOG2E + SHIFT;
    let n = t - SHIFT;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    // Horner form of sum_{k<=7} r^k / k!
    let mut p = 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    let ni = t.to_bits().wrapping_sub(SHIFT.to_bits()) as i32;
    let scale = f32::from_bits(((ni + 127) as u32) << 23);
    p * scale
}

/// `1 / (1 + e^-x)`.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// `x · sigmoid(x)` (SiLU).
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

/// `x · tanh(ln(1 + e^x))`.
#[inline(always)]
pub fn mish(x: f32) -> f32 {
    let e = exp(x.min(20.0));
    let n = e * (e + 2.0);
    let m = x * n / (n + 2.0);
    if x > 20.0 {
        x
    } else {
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ncnn::model::Activation;

    /// A wide sweep: every 1/256 over [-100, 100] plus powers of two up to 2^20 on each side.
    fn inputs() -> Vec<f32> {
        let mut v: Vec<f32> = (-25_600..=25_600).map(|i| i as f32 / 256.0).collect();
        for k in -30..=20 {
            let p = (k as f32).exp2();
            v.extend([p, -p, p * 1.37, -p * 1.37]);
        }
        v.extend([0.0, -0.0, f32::MIN_POSITIVE, 87.0, 88.0, -87.0, 1e30, -1e30]);
        v
    }

    fn close(got: f32, want: f32, rel: f32, abs: f32) -> bool {
        (got - want).abs() <= abs.max(rel * want.abs())
    }

    #[test]
    fn exp_matches_libm_over_the_normal_range() {
        let mut worst = 0.0f64;
        for x in inputs().into_iter().filter(|x| (-87.0..=88.0).contains(x)) {
            let (got, want) = (exp(x) as f64, (x as f64).exp());
            worst = worst.max(((got - want) / want).abs());
        }
        println!("exp: worst relative error {worst:e}");
        assert!(worst < 2e-7, "exp: worst relative error {worst:e}");
        // Saturation: no inf/NaN from finite inputs, tiny at the bottom.
        assert!(exp(1e30).is_finite() && exp(-1e30) >= 0.0 && exp(-1e30) < 2e-38);
        assert_eq!(exp(0.0), 1.0);
    }

    /// Against the scalar reference (`Activation::apply`, libm): relative 1e-6 or absolute 1e-6.
    #[test]
    fn sigmoid_and_mish_match_the_scalar_reference() {
        for x in inputs() {
            let (s, m) = (Activation::Sigmoid.apply(x), Activation::Mish.apply(x));
            assert!(close(sigmoid(x), s, 1e-6, 1e-6), "sigmoid({x}) = {} want {s}", sigmoid(x));
            assert!(close(mish(x), m, 1e-6, 1e-6), "mish({x}) = {} want {m}", mish(x));
            assert!(close(silu(x), x * s, 1e-6, 1e-6), "silu({x}) = {} want {}", silu(x), x * s);
        }
        assert_eq!(mish(1e30), 1e30);
        assert_eq!(sigmoid(1e30), 1.0);
        assert!((0.0..1e-38).contains(&sigmoid(-1e30)));
    }
}
