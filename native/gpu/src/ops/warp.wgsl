// rife.Warp: bilinear backward warp (see native/gpu/src/warp.rs). The host prepends the storage
// type (`alias T = f16 | f32`, with `enable f16;`) and replaces WG with the workgroup size.
// One thread per output pixel; it computes the taps once and applies them to every channel.
// Params (binding 0): 0 n = H * W, 1 C, 2 H, 3 W.
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> IMG: array<T>;
@group(0) @binding(2) var<storage, read> FLOW: array<T>;
@group(0) @binding(3) var<storage, read_write> Y: array<T>;

// Along one axis of length n: the sample point i + d clamped to [0, n - 1], then
// (low tap, high tap, weight of the high tap).
fn taps(i: u32, d: f32, n: u32) -> vec3<f32> {
    let s = clamp(f32(i) + d, 0.0, f32(n - 1u));
    let lo = floor(s);
    return vec3<f32>(lo, min(lo + 1.0, f32(n - 1u)), s - lo);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WGu;
    let n = P[0];
    if (i >= n) { return; }
    let h = P[2];
    let w = P[3];
    let y = i / w;
    let x = i - y * w;
    let tx = taps(x, f32(FLOW[i]), w);
    let ty = taps(y, f32(FLOW[n + i]), h);
    let x0 = u32(tx.x);
    let x1 = u32(tx.y);
    let r0 = u32(ty.x) * w;
    let r1 = u32(ty.y) * w;
    let a = tx.z;
    let b = ty.z;
    for (var c = 0u; c < P[1]; c++) {
        let base = c * n;
        let top = f32(IMG[base + r0 + x0]) * (1.0 - a) + f32(IMG[base + r0 + x1]) * a;
        let bot = f32(IMG[base + r1 + x0]) * (1.0 - a) + f32(IMG[base + r1 + x1]) * a;
        Y[base + i] = T(top * (1.0 - b) + bot * b);
    }
}
