//! The plain reference checked on small hand-computed cases, so that it is not just trusted.
mod common;
use common::*;
use lucent_core::ncnn::model::{BinaryOpKind, Conv, Crop, Interp, Padding, PoolKind, Pooling};
use lucent_core::ncnn::Activation;
use lucent_core::{reference as r, Code, Tensor};

fn conv(cout: usize, cin: usize, k: usize, stride: usize, pad: usize, weight: Vec<f32>, bias: Option<Vec<f32>>) -> Conv {
    Conv {
        num_output: cout,
        num_input: cin,
        group: 1,
        kernel_w: k,
        kernel_h: k,
        dilation_w: 1,
        dilation_h: 1,
        stride_w: stride,
        stride_h: stride,
        pad: Padding::Explicit { left: pad, right: pad, top: pad, bottom: pad },
        pad_value: 0.0,
        output_pad_right: 0,
        output_pad_bottom: 0,
        output_w: 0,
        output_h: 0,
        weight,
        bias,
        activation: Activation::None,
    }
}

fn t(c: usize, h: usize, w: usize, v: &[f32]) -> Tensor {
    Tensor::from_vec(c, h, w, v.to_vec())
}

#[test]
fn conv_2x2_by_hand() {
    // input 1..9 as 3x3, kernel [[1,0],[0,1]] -> x[y][x] + x[y+1][x+1]
    let x = t(1, 3, 3, &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
    let c = conv(1, 1, 2, 1, 0, vec![1., 0., 0., 1.], Some(vec![0.5]));
    assert_eq!(r::conv(&c, &x).unwrap().data, vec![6.5, 8.5, 12.5, 14.5]);
    // padding 1, stride 2: out 2x2; out[0][0] = pad*1 + x[0][0]*1 = 1
    let c = conv(1, 1, 2, 2, 1, vec![1., 0., 0., 1.], None);
    let y = r::conv(&c, &x).unwrap();
    assert_eq!((y.h, y.w), (2, 2));
    // out[1][1] = x[1][1] + x[2][2] = 5 + 9
    assert_eq!(y.data, vec![1., 3., 7., 14.]);
    // pad_value and ReLU; two input channels summed
    let mut c = conv(1, 2, 1, 1, 1, vec![1., -2.], None);
    c.pad_value = 1.0;
    c.activation = Activation::Relu;
    let x2 = t(2, 1, 1, &[3., 1.]);
    // padded pixels give 1 - 2 = -1 -> 0; centre 3 - 2 = 1
    assert_eq!(r::conv(&c, &x2).unwrap().data, vec![0., 0., 0., 0., 1., 0., 0., 0., 0.]);
    // SAME upper padding on even input with stride 2: out = ceil(4/2) = 2
    let mut c = conv(1, 1, 3, 2, 0, vec![1.; 9], None);
    c.pad = Padding::SameUpper;
    let y = r::conv(&c, &Tensor::from_vec(1, 4, 4, vec![1.; 16])).unwrap();
    // total pad 1 -> 0 top/left, 1 bottom/right: first window full (9), last has 2x2 = 4 inside
    assert_eq!(y.data, vec![9., 6., 6., 4.]);
}

#[test]
fn deconv_by_hand() {
    let x = t(1, 2, 2, &[1., 2., 3., 4.]);
    // stride 1, 2x2 ones kernel: full 3x3 sums of overlapping copies
    let c = conv(1, 1, 2, 1, 0, vec![1.; 4], None);
    assert_eq!(r::deconv(&c, &x).unwrap().data, vec![1., 3., 2., 4., 10., 6., 3., 7., 4.]);
    // stride 2, kernel [[1,2],[3,4]]: each pixel paints a scaled 2x2 block
    let c = conv(1, 1, 2, 2, 0, vec![1., 2., 3., 4.], Some(vec![1.0]));
    let y = r::deconv(&c, &x).unwrap();
    assert_eq!((y.h, y.w), (4, 4));
    assert_eq!(y.data[..4], [2., 3., 3., 5.]);
    assert_eq!(y.data[12..], [10., 13., 13., 17.]);
    // pad 1 cut all round: the inner 2x2 of the 4x4
    let mut c = conv(1, 1, 2, 2, 1, vec![1., 2., 3., 4.], None);
    let y = r::deconv(&c, &x).unwrap();
    // full rows 1..2, cols 1..2 of [[1,2,2,4],[3,4,6,8],[3,6,4,8],[9,12,12,16]]
    assert_eq!(y.data, vec![4., 6., 6., 4.]);
    // output_pad adds a zero (+bias) column / row on the right / bottom
    c.pad = Padding::Explicit { left: 0, right: 0, top: 0, bottom: 0 };
    c.output_pad_right = 1;
    c.output_pad_bottom = 1;
    let y = r::deconv(&c, &x).unwrap();
    assert_eq!((y.h, y.w), (5, 5));
    assert_eq!(y.data[4], 0.0);
    // SAME_UPPER with a fixed output size cuts symmetric-then-right
    c.output_pad_right = 0;
    c.output_pad_bottom = 0;
    c.pad = Padding::SameUpper;
    c.output_w = 3;
    c.output_h = 3;
    let y = r::deconv(&c, &x).unwrap();
    assert_eq!(y.data[..3], [1., 2., 2.]);
}

#[test]
fn pixel_shuffle_order() {
    // mode 0: out channel 0 at (dy,dx) reads in channel dy*2+dx
    let x = t(4, 1, 1, &[0., 1., 2., 3.]);
    assert_eq!(r::pixel_shuffle(&x, 2, 0).unwrap().data, vec![0., 1., 2., 3.]);
    // two output channels: channel 1 reads in channels 4..8
    let x = t(8, 1, 1, &[0., 1., 2., 3., 4., 5., 6., 7.]);
    assert_eq!(r::pixel_shuffle(&x, 2, 0).unwrap().data, vec![0., 1., 2., 3., 4., 5., 6., 7.]);
    // mode 1 (DCR): out channel p at offset k reads in channel k*2 + p
    assert_eq!(r::pixel_shuffle(&x, 2, 1).unwrap().data, vec![0., 2., 4., 6., 1., 3., 5., 7.]);
    // spatial order on a 2x2 input, r=2, one output channel
    let x = t(4, 1, 2, &[0., 10., 1., 11., 2., 12., 3., 13.]);
    assert_eq!(r::pixel_shuffle(&x, 2, 0).unwrap().data, vec![0., 1., 10., 11., 2., 3., 12., 13.]);
    assert_eq!(r::pixel_shuffle(&t(3, 1, 1, &[0.; 3]), 2, 0).unwrap_err().code, Code::InvalidArgument);
}

fn interp(kind: i32, s: f32, align: bool) -> Interp {
    Interp { resize_type: kind, height_scale: 1.0, width_scale: s, output_h: 0, output_w: 0, align_corner: align }
}

#[test]
fn interp_values() {
    let x = t(1, 1, 2, &[1., 2.]);
    assert_eq!(r::interp(&interp(1, 2.0, false), &x).unwrap().data, vec![1., 1., 2., 2.]);
    // nearest x3 of 3: floor(dst / 3)
    let x3 = t(1, 1, 3, &[1., 2., 3.]);
    assert_eq!(r::interp(&interp(1, 3.0, false), &x3).unwrap().data, vec![1., 1., 1., 2., 2., 2., 3., 3., 3.]);
    // bilinear half-pixel: src = (d + .5)/2 - .5 = -.25 (clamped), .25, .75, 1.25 (clamped)
    assert_eq!(r::interp(&interp(2, 2.0, false), &x).unwrap().data, vec![1., 1.25, 1.75, 2.]);
    // align corners: src = d / 3
    let y = r::interp(&interp(2, 2.0, true), &x).unwrap().data;
    for (a, b) in y.iter().zip([1., 4. / 3., 5. / 3., 2.]) {
        assert!((a - b).abs() < 1e-6);
    }
    // bicubic weights (A = -0.75)
    assert_eq!(r::cubic_weights(0.0), [0., 1., 0., 0.]);
    let w = r::cubic_weights(0.5);
    for (a, b) in w.iter().zip([-0.09375, 0.59375, 0.59375, -0.09375]) {
        assert!((a - b).abs() < 1e-6, "{w:?}");
    }
    // bicubic of a constant stays constant; fixed output size wins over scale
    let mut p = interp(3, 2.0, false);
    p.output_w = 5;
    p.output_h = 2;
    let y = r::interp(&p, &t(1, 1, 3, &[2., 2., 2.])).unwrap();
    assert_eq!((y.h, y.w), (2, 5));
    assert!(y.data.iter().all(|v| (v - 2.0).abs() < 1e-6));
}

fn crop_p() -> Crop {
    Crop { woffset: 0, hoffset: 0, coffset: 0, outw: -233, outh: -233, outc: -233, woffset2: 0, hoffset2: 0, coffset2: 0, starts: vec![], ends: vec![], axes: vec![] }
}

#[test]
fn crop_forms() {
    let x = Tensor::from_vec(2, 3, 4, (0..24).map(|v| v as f32).collect());
    // starts/ends on w with a negative end
    let mut p = crop_p();
    p.starts = vec![1];
    p.ends = vec![-1];
    p.axes = vec![2];
    let y = r::crop(&p, &x, None).unwrap();
    assert_eq!((y.c, y.h, y.w), (2, 3, 2));
    assert_eq!(y.data[..4], [1., 2., 5., 6.]);
    // channel + h axes, negative axis for h, end -233 = to the end
    p.starts = vec![1, 2];
    p.ends = vec![-233, -233];
    p.axes = vec![0, -2];
    let y = r::crop(&p, &x, None).unwrap();
    assert_eq!(y.data, vec![20., 21., 22., 23.]);
    // offsets form: woffset 1, outw 2, hoffset2 trims the bottom
    let mut p = crop_p();
    p.woffset = 1;
    p.outw = 2;
    p.hoffset2 = 1;
    let y = r::crop(&p, &x, None).unwrap();
    assert_eq!((y.c, y.h, y.w), (2, 2, 2));
    assert_eq!(y.data[..4], [1., 2., 5., 6.]);
    // reference-blob form: size of the second input at the offsets
    let mut p = crop_p();
    p.hoffset = 1;
    p.woffset = 2;
    let y = r::crop(&p, &x, Some(&Tensor::zeros(1, 2, 2))).unwrap();
    assert_eq!(y.data, vec![6., 7., 10., 11.]);
    // out of range -> error, not panic
    p.woffset = 3;
    assert_eq!(r::crop(&p, &x, Some(&Tensor::zeros(1, 2, 2))).unwrap_err().code, Code::InvalidArgument);
}

#[test]
fn concat_axes() {
    let a = t(1, 2, 2, &[1., 2., 3., 4.]);
    let b = t(1, 2, 1, &[5., 6.]);
    let y = r::concat(2, &[&a, &b]).unwrap();
    assert_eq!(y.data, vec![1., 2., 5., 3., 4., 6.]);
    assert_eq!(r::concat(-1, &[&a, &b]).unwrap(), y);
    let y = r::concat(0, &[&a, &a]).unwrap();
    assert_eq!((y.c, y.h, y.w), (2, 2, 2));
    let y = r::concat(1, &[&a, &t(1, 1, 2, &[7., 8.])]).unwrap();
    assert_eq!(y.data, vec![1., 2., 3., 4., 7., 8.]);
    let m = Tensor::matrix(2, 1, vec![1., 2.]);
    assert_eq!(r::concat(1, &[&m, &m]).unwrap().data, vec![1., 1., 2., 2.]);
    assert_eq!(r::concat(0, &[&a, &b]).unwrap_err().code, Code::InvalidArgument);
}

#[test]
fn binary_broadcast_pool_permute_reshape_softmax() {
    let x = Tensor::from_vec(2, 1, 2, vec![1., 2., 3., 4.]);
    let v = Tensor::vector(vec![10., 20.]);
    assert_eq!(r::binary(BinaryOpKind::Add, &x, &v).unwrap().data, vec![11., 12., 23., 24.]);
    assert_eq!(r::binary(BinaryOpKind::Sub, &v, &x).unwrap().data, vec![9., 8., 17., 16.]);
    assert_eq!(r::binary(BinaryOpKind::RSub, &x, &Tensor::vector(vec![1.])).unwrap().data, vec![0., -1., -2., -3.]);
    assert!(r::binary(BinaryOpKind::Add, &x, &Tensor::vector(vec![1., 2., 3.])).is_err());
    // pooling: max 2x2/2, average excluding pad
    let p = Pooling { kind: PoolKind::Max, global: false, kernel_w: 2, kernel_h: 2, stride_w: 2, stride_h: 2, pad_left: 0, pad_right: 0, pad_top: 0, pad_bottom: 0, pad_mode: 1, count_include_pad: false, adaptive: false, out_w: 0, out_h: 0 };
    let img = Tensor::from_vec(1, 2, 4, vec![1., 5., 2., 0., 3., 4., 8., 1.]);
    assert_eq!(r::pooling(&p, &img).unwrap().data, vec![5., 8.]);
    let mut pa = p.clone();
    pa.kind = PoolKind::Avg;
    pa.pad_left = 1;
    pa.pad_right = 1;
    pa.kernel_h = 2;
    pa.pad_top = 0;
    pa.pad_bottom = 0;
    // windows: [pad,1;pad,3] -> 2, [5,2;4,8] -> 4.75, [0,pad;1,pad] -> .5
    assert_eq!(r::pooling(&pa, &img).unwrap().data, vec![2., 4.75, 0.5]);
    pa.count_include_pad = true;
    assert_eq!(r::pooling(&pa, &img).unwrap().data, vec![1., 4.75, 0.25]);
    let mut pg = p.clone();
    pg.global = true;
    pg.kind = PoolKind::Avg;
    let g = r::pooling(&pg, &img).unwrap();
    assert_eq!((g.dims, g.data.clone()), (1, vec![3.0]));
    // permute order 5 = (c,h,w) -> out w = c, out c = w
    let x = Tensor::from_vec(2, 1, 3, vec![0., 1., 2., 10., 11., 12.]);
    let y = r::permute(&x, 5).unwrap();
    assert_eq!((y.c, y.h, y.w), (3, 1, 2));
    assert_eq!(y.data, vec![0., 10., 1., 11., 2., 12.]);
    // reshape: -1 inferred, 0 keeps
    let y = r::reshape(&x, 0, -1, -233).unwrap();
    assert_eq!((y.dims, y.h, y.w), (2, 2, 3));
    assert!(r::reshape(&x, 4, -1, -233).is_err());
    // softmax over channels
    let s = r::softmax(&Tensor::from_vec(2, 1, 1, vec![0., (3.0f32).ln()]), 0).unwrap();
    assert!((s.data[0] - 0.25).abs() < 1e-6 && (s.data[1] - 0.75).abs() < 1e-6);
}

#[test]
fn reference_net_freed_blobs_and_errors() {
    // run_net on a small graph: Split feeding two convs, result summed; matches direct calls.
    let (mut rng, seed) = Rng::from_env_or_time();
    let mut bin = Bin::default();
    let w1 = rng.vec(2 * 9);
    let w2 = rng.vec(2 * 9);
    bin.tagged(&w1);
    bin.tagged(&w2);
    let n = net(
        &[
            "Input in 0 1 data".into(),
            "Split sp 1 2 data a b".into(),
            "Convolution c1 1 1 a x 0=2 1=3 4=1 6=18".into(),
            "Convolution c2 1 1 b y 0=2 1=3 4=1 6=18".into(),
            "BinaryOp add 2 1 x y out 0=0".into(),
        ],
        &bin,
    );
    let x = rng.tensor(1, 5, 4);
    let out = r::run_net(&n, &[(n.blob("data").unwrap(), x.clone())], &[n.blob("out").unwrap()]).unwrap();
    let x1 = r::conv(&conv(2, 1, 3, 1, 1, w1, None), &x).unwrap();
    let y1 = r::conv(&conv(2, 1, 3, 1, 1, w2, None), &x).unwrap();
    let want = r::binary(BinaryOpKind::Add, &x1, &y1).unwrap();
    assert!(rel_err(&out[0], &want) < 1e-6, "seed {seed}");
    // wrong input shape -> invalid_argument
    let e = r::run_net(&n, &[(n.blob("data").unwrap(), Tensor::zeros(3, 5, 4))], &[n.blob("out").unwrap()]).unwrap_err();
    assert_eq!(e.code, Code::InvalidArgument);
}
