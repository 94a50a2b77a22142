//! Probe: raw `gemm` throughput on the conv-shaped product (M=64, K=576, N=rows*276), single thread,
//! to separate GEMM speed from im2col / epilogue overhead. `cargo run --release -p lucent-core --example gemm_probe`
use std::time::Instant;
fn main() {
    let (m, k) = (64usize, 576usize);
    for n in [1104usize, 3588, 8280] {
        let a = vec![0.5f32; m * k];
        let b = vec![0.25f32; k * n];
        let mut c = vec![0f32; m * n];
        let reps = (2e10 / (2.0 * (m * k * n) as f64)) as usize + 1;
        let t = Instant::now();
        for _ in 0..reps {
            unsafe {
                gemm::gemm(m, n, k, c.as_mut_ptr(), 1, n as isize, false, a.as_ptr(), 1, k as isize, b.as_ptr(), 1, n as isize, 0.0, 1.0, false, false, false, gemm::Parallelism::None);
            }
        }
        let dt = t.elapsed().as_secs_f64();
        println!("M={m} K={k} N={n}: {:.1} GFLOP/s (1 thread)", 2.0 * (m * k * n * reps) as f64 / dt / 1e9);
    }
}
