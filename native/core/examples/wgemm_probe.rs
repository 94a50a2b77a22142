//! Probe: the Winograd products (36 per block of tiles) on our micro-kernels (`wgemm`, U packed once)
//! against the `gemm` crate called per product, single thread, on the shapes of realesr-general-x4v3
//! (64 -> 64) and RealESRGAN_x4plus's dense blocks (64..192 -> 32, 192 -> 64), for tile blocks of
//! 16, 24 and 64 tiles. Alternates the two, keeps the best of several rounds.
//!
//! `cargo run --release -p lucent-core --example wgemm_probe [-- --isa avx2]`
use lucent_core::cpu::wgemm::{self, Batch, Layout, Path, Seg};
use lucent_core::cpu::Isa;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let isa = args.iter().position(|a| a == "--isa").and_then(|i| args.get(i + 1)).and_then(|s| Isa::parse(s)).unwrap_or_else(Isa::detected);
    assert!(isa.supported(), "{isa} not supported here");
    let path = Path::of(isa);
    println!("isa {isa}");
    const POS: usize = 36;
    // (x, 36): the 6-row panel on 36 rows, i.e. what 32 rows cost when padded to 6-row blocks.
    for &(ic, oc) in &[(64usize, 64usize), (64, 32), (64, 36), (192, 32), (192, 36), (192, 64)] {
        let l = Layout::for_rows(path, oc);
        for &t in &[16usize, 24, 64] {
            let (ocp, tp) = (l.rows_padded(oc), l.tiles_padded(t));
            let u: Vec<f32> = (0..POS * oc * ic).map(|i| ((i * 7) % 13) as f32 * 0.01).collect();
            let v: Vec<f32> = (0..POS * ic * tp).map(|i| ((i * 5) % 11) as f32 * 0.01).collect();
            let a = wgemm::pack_a(&u, POS, oc, ic, l);
            let mut m = vec![0.0f32; POS * ocp * tp];
            let flop = 2.0 * (POS * oc * ic * t) as f64;
            let reps = (3e9 / flop) as usize + 1;
            let seg = [Seg { ptr: v.as_ptr(), k: ic, pos_stride: ic * tp }];
            let ours = |m: &mut [f32]| {
                let b = Batch {
                    npos: POS,
                    rows: ocp,
                    k: ic,
                    tp,
                    a: a.as_ptr(),
                    a_stride: ocp * ic,
                    b: &seg,
                    ldb: tp,
                    c: m.as_mut_ptr(),
                    c_stride: ocp * tp,
                    ldc: tp,
                };
                unsafe { wgemm::run(Path::of(isa), &b) };
            };
            let crate_gemm = |m: &mut [f32]| {
                for pos in 0..POS {
                    unsafe {
                        gemm::gemm(
                            oc,
                            t,
                            ic,
                            m.as_mut_ptr().add(pos * ocp * tp),
                            1,
                            tp as isize,
                            false,
                            u.as_ptr().add(pos * oc * ic),
                            1,
                            ic as isize,
                            v.as_ptr().add(pos * ic * tp),
                            1,
                            tp as isize,
                            0.0,
                            1.0,
                            false,
                            false,
                            false,
                            gemm::Parallelism::None,
                        );
                    }
                }
            };
            let (mut best_o, mut best_g) = (f64::INFINITY, f64::INFINITY);
            for _ in 0..5 {
                let s = Instant::now();
                for _ in 0..reps {
                    ours(&mut m);
                }
                best_o = best_o.min(s.elapsed().as_secs_f64());
                let s = Instant::now();
                for _ in 0..reps {
                    crate_gemm(&mut m);
                }
                best_g = best_g.min(s.elapsed().as_secs_f64());
            }
            let g = |s: f64| flop * reps as f64 / s / 1e9;
            println!(
                "ic {ic:3} oc {oc:2} tiles {t:2} (panel {}x{}): wgemm {:6.1} GFLOP/s  gemm crate {:6.1} GFLOP/s  ratio {:.2}",
                l.mr,
                l.nv * l.lanes,
                g(best_o),
                g(best_g),
                best_g / best_o
            );
        }
    }
}
