//! Untrusted model files: crafted pickles, damaged zips and lying safetensors headers each get a
//! clear `model_invalid` error (no panic, no large allocation), and a fuzz of random and mutated
//! pickles, zips and safetensors files never panics.

use lucent_core::Code;
use lucent_models::pickle::unpickle;
use lucent_models::{load, read_state_dict, Limits};
use std::path::PathBuf;

fn golden(name: &str) -> Vec<u8> {
    std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/goldens").join(name)).unwrap()
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    !c
}

/// A stored zip of the given entries, as torch writes them.
fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let off = out.len() as u32;
        let crc = crc32(data);
        let mut h = Vec::new();
        h.extend(0x0403_4b50u32.to_le_bytes());
        h.extend([20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        h.extend(crc.to_le_bytes());
        h.extend((data.len() as u32).to_le_bytes());
        h.extend((data.len() as u32).to_le_bytes());
        h.extend((name.len() as u16).to_le_bytes());
        h.extend(0u16.to_le_bytes());
        h.extend(name.as_bytes());
        out.extend(&h);
        out.extend(*data);
        central.extend(0x0201_4b50u32.to_le_bytes());
        central.extend([20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        central.extend(crc.to_le_bytes());
        central.extend((data.len() as u32).to_le_bytes());
        central.extend((data.len() as u32).to_le_bytes());
        central.extend((name.len() as u16).to_le_bytes());
        central.extend([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        central.extend(off.to_le_bytes());
        central.extend(name.as_bytes());
    }
    let cd_off = out.len() as u32;
    out.extend(&central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0, 0, 0, 0]);
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((central.len() as u32).to_le_bytes());
    out.extend(cd_off.to_le_bytes());
    out.extend([0, 0]);
    out
}

fn pth(pickle: &[u8], storages: &[(&str, &[u8])]) -> Vec<u8> {
    let names: Vec<String> = storages.iter().map(|(k, _)| format!("archive/data/{k}")).collect();
    let mut e: Vec<(&str, &[u8])> = vec![("archive/data.pkl", pickle)];
    for (n, (_, d)) in names.iter().zip(storages) {
        e.push((n, d));
    }
    zip(&e)
}

fn err_of(bytes: &[u8]) -> String {
    match read_state_dict(bytes, "crafted.pth", &Limits::default()) {
        Ok(_) => panic!("crafted file was accepted"),
        Err(e) => {
            assert_eq!(e.code, Code::ModelInvalid, "{e}");
            e.message
        }
    }
}

fn no_pid(_: lucent_models::pickle::Value) -> lucent_core::Result<lucent_models::pickle::Value> {
    Err(lucent_core::Error::new(Code::ModelInvalid, "no persistent ids here"))
}

/// A pickle for `{"w": _rebuild_tensor_v2(storage('0', numel), 0, shape, stride, False, OrderedDict())}`.
fn tensor_pickle(numel: u32, shape: &[u32], storage_class: &str, key: &str) -> Vec<u8> {
    tensor_pickle_strided(numel, shape, None, storage_class, key)
}

fn tensor_pickle_strided(numel: u32, shape: &[u32], explicit: Option<&[u32]>, storage_class: &str, key: &str) -> Vec<u8> {
    let mut p = vec![0x80, 2, b'}', b'X', 1, 0, 0, 0, b'w'];
    p.extend(b"ctorch._utils\n_rebuild_tensor_v2\n(");
    p.extend(b"(X\x07\x00\x00\x00storagectorch\n");
    p.extend(storage_class.as_bytes());
    p.extend(b"\nX");
    p.extend((key.len() as u32).to_le_bytes());
    p.extend(key.as_bytes());
    p.extend(b"X\x03\x00\x00\x00cpuJ");
    p.extend(numel.to_le_bytes());
    p.extend(b"tQK\x00(");
    for d in shape {
        p.push(b'J');
        p.extend(d.to_le_bytes());
    }
    p.extend(b"t(");
    let mut stride = 1u32;
    let mut strides = Vec::new();
    for d in shape.iter().rev() {
        strides.push(stride);
        stride = stride.wrapping_mul(*d);
    }
    strides.reverse();
    let strides = explicit.map(|s| s.to_vec()).unwrap_or(strides);
    for s in strides.iter() {
        p.push(b'J');
        p.extend(s.to_le_bytes());
    }
    p.extend(b"t\x89ccollections\nOrderedDict\n)RtRs.");
    p
}

#[test]
fn a_well_formed_crafted_checkpoint_loads() {
    let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let f = pth(&tensor_pickle(4, &[2, 2], "FloatStorage", "0"), &[("0", &data)]);
    let (_, sd) = read_state_dict(&f, "ok.pth", &Limits::default()).unwrap();
    assert_eq!(sd["w"].shape, vec![2, 2]);
    assert_eq!(sd["w"].data, vec![1.0, 2.0, 3.0, 4.0]);
    // A transposed view (strides 1, 2) of the same storage, and a half-precision one.
    let f = pth(&tensor_pickle_strided(4, &[2, 2], Some(&[1, 2]), "FloatStorage", "0"), &[("0", &data)]);
    assert_eq!(read_state_dict(&f, "t.pth", &Limits::default()).unwrap().1["w"].data, vec![1.0, 3.0, 2.0, 4.0]);
    let half: Vec<u8> = [0x3c00u16, 0xc000].iter().flat_map(|v| v.to_le_bytes()).collect();
    let f = pth(&tensor_pickle(2, &[2], "HalfStorage", "0"), &[("0", &half)]);
    assert_eq!(read_state_dict(&f, "h.pth", &Limits::default()).unwrap().1["w"].data, vec![1.0, -2.0]);
}

#[test]
fn globals_that_are_not_tensor_rebuilds_are_refused() {
    let m = err_of(&pth(b"\x80\x02cposix\nsystem\nX\x02\x00\x00\x00ls\x85R.", &[]));
    assert!(m.contains("posix.system") && m.contains("not allowed"), "{m}");
    let m = err_of(&pth(b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93\x8c\x011\x85R.", &[]));
    assert!(m.contains("builtins.eval"), "{m}");
    let m = err_of(&pth(b"\x80\x02ctorch\nload\n.", &[]));
    assert!(m.contains("torch.load"), "{m}");
    let m = err_of(&pth(b"\x80\x02cos\nsystem\n.", &[]));
    assert!(m.contains("os.system"), "{m}");
}

#[test]
fn reduce_build_and_object_opcodes_are_refused() {
    // REDUCE on a string, on a storage class, on None.
    let m = err_of(&pth(b"\x80\x02X\x01\x00\x00\x00a)R.", &[]));
    assert!(m.contains("REDUCE calls a str"), "{m}");
    let m = err_of(&pth(b"\x80\x02ctorch\nFloatStorage\n)R.", &[]));
    assert!(m.contains("storage class"), "{m}");
    // BUILD on a list.
    let m = err_of(&pth(b"\x80\x02]}b.", &[]));
    assert!(m.contains("BUILD on a list"), "{m}");
    for (op, name) in [(0x81u8, "NEWOBJ"), (b'i', "INST"), (b'o', "OBJ"), (0x82, "EXT"), (b'P', "PERSID"), (0x92, "NEWOBJ_EX")] {
        let m = err_of(&pth(&[0x80, 2, b'N', op, b'.'], &[]));
        assert!(m.contains(name) && m.contains("not allowed"), "{m}");
    }
}

#[test]
fn deep_nesting_and_huge_stacks_are_refused() {
    let mut p = vec![0x80, 2];
    p.extend(std::iter::repeat_n(b']', 200));
    p.extend(std::iter::repeat_n(b'a', 199));
    p.push(b'.');
    let m = unpickle(&p, &mut no_pid).unwrap_err().message;
    assert!(m.contains("deeper than"), "{m}");
    let mut p = vec![0x80, 2];
    p.extend(std::iter::repeat_n(b'(', 100_000));
    let m = unpickle(&p, &mut no_pid).unwrap_err().message;
    assert!(m.contains("nested marks"), "{m}");
    // A million-element list copied through the memo over and over.
    let mut p = vec![0x80, 2, b']', b'('];
    p.extend(std::iter::repeat_n(b'N', 1_000_000));
    p.extend(b"eq\x00");
    for _ in 0..100 {
        p.extend(b"h\x00");
    }
    p.push(b'.');
    let m = unpickle(&p, &mut no_pid).unwrap_err().message;
    assert!(m.contains("more than") || m.contains("stack exceeds"), "{m}");
    // A truncated pickle and a stack underflow.
    assert!(unpickle(b"\x80\x02X\xff\xff\x00\x00ab", &mut no_pid).unwrap_err().message.contains("truncated"));
    assert!(unpickle(b"\x80\x02a.", &mut no_pid).unwrap_err().message.contains("underflow"));
}

#[test]
fn storages_are_checked() {
    let data = [0u8; 16];
    // A key that tries to leave data/.
    let m = err_of(&pth(&tensor_pickle(4, &[4], "FloatStorage", "../x"), &[("0", &data)]));
    assert!(m.contains("not a plain name"), "{m}");
    // A view past the end of its storage (2 elements 4 apart over 4), and a view longer than it.
    let m = err_of(&pth(&tensor_pickle_strided(4, &[2], Some(&[4]), "FloatStorage", "0"), &[("0", &data)]));
    assert!(m.contains("past the end of its storage"), "{m}");
    let m = err_of(&pth(&tensor_pickle(4, &[10], "FloatStorage", "0"), &[("0", &data)]));
    assert!(m.contains("over a storage of 4"), "{m}");
    // A broadcast view (strides 0) expanding 4 stored elements to 10,000.
    let m = err_of(&pth(&tensor_pickle_strided(4, &[100, 100], Some(&[0, 0]), "FloatStorage", "0"), &[("0", &data)]));
    assert!(m.contains("over a storage of 4"), "{m}");
    // A storage declaring more than its entry holds.
    let m = err_of(&pth(&tensor_pickle(400, &[4], "FloatStorage", "0"), &[("0", &data)]));
    assert!(m.contains("declares 400 elements"), "{m}");
    // A 10 GB tensor (50000 x 50000 f32) declared over 16 bytes.
    let m = err_of(&pth(&tensor_pickle(4, &[50_000, 50_000], "FloatStorage", "0"), &[("0", &data)]));
    assert!(m.contains("over the limit"), "{m}");
    // A missing storage, and a storage type torch does not have.
    let m = err_of(&pth(&tensor_pickle(4, &[4], "FloatStorage", "7"), &[("0", &data)]));
    assert!(m.contains("which the archive lacks"), "{m}");
    let m = err_of(&pth(&tensor_pickle(4, &[4], "EvilStorage", "0"), &[("0", &data)]));
    assert!(m.contains("torch.EvilStorage"), "{m}");
}

#[test]
fn damaged_zips_are_refused() {
    let good = golden("compact_x4_nf16_nc2.0.pth");
    assert!(load(&good, "ok.pth", &Limits::default()).is_ok());
    for cut in [good.len() / 2, good.len() - 10, 100, 30] {
        let m = err_of(&good[..cut]);
        assert!(m.contains("truncated") || m.contains("zip"), "cut at {cut}: {m}");
    }
    // One flipped byte inside a storage: the CRC check catches it.
    let mut bad = good.clone();
    let i = bad.len() / 2;
    bad[i] ^= 0x55;
    let m = err_of(&bad);
    assert!(m.contains("CRC"), "{m}");
    // A zip without data.pkl.
    let m = err_of(&zip(&[("hello.txt", b"hi")]));
    assert!(m.contains("data.pkl"), "{m}");
}

fn safetensors(header: &str, data_len: usize) -> Vec<u8> {
    let mut f = (header.len() as u64).to_le_bytes().to_vec();
    f.extend(header.as_bytes());
    f.extend(std::iter::repeat_n(0u8, data_len));
    f
}

#[test]
fn lying_safetensors_headers_are_refused() {
    let ok = safetensors(r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#, 8);
    assert_eq!(read_state_dict(&ok, "ok.safetensors", &Limits::default()).unwrap().1["w"].data, vec![0.0, 0.0]);
    // Offset past the end of the file.
    let m = err_of(&safetensors(r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#, 4));
    assert!(m.contains("safetensors"), "{m}");
    let m = err_of(&safetensors(r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,80000000000]}}"#, 8));
    assert!(m.contains("safetensors"), "{m}");
    // A 10 GB tensor declared over 8 bytes.
    let m = err_of(&safetensors(r#"{"w":{"dtype":"F32","shape":[50000,50000],"data_offsets":[0,10000000000]}}"#, 8));
    assert!(m.contains("safetensors"), "{m}");
    // Shape overflowing usize.
    let m = err_of(&safetensors(r#"{"w":{"dtype":"F32","shape":[18446744073709551615,4],"data_offsets":[0,8]}}"#, 8));
    assert!(m.contains("safetensors"), "{m}");
    // Absurd header lengths.
    for n in [u64::MAX, 1 << 40, 17 << 20] {
        let mut f = n.to_le_bytes().to_vec();
        f.extend(b"{}");
        let m = err_of(&f);
        assert!(m.contains("header"), "{n}: {m}");
    }
    // Header length past the end of a small file.
    let mut f = 1000u64.to_le_bytes().to_vec();
    f.extend(b"{\"a\":1}");
    let m = err_of(&f);
    assert!(m.contains("past the end"), "{m}");
}

#[test]
fn an_unknown_architecture_names_what_was_found() {
    let ok = safetensors(
        concat!(
            r#"{"relative_position_index_SA":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"#,
            r#""layers.0.residual_group.blocks.0.conv_block.cab.0.weight":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#
        ),
        8,
    );
    let e = load(&ok, "hat.safetensors", &Limits::default()).err().unwrap();
    assert!(e.message.contains("recognised HAT"), "{}", e.message);
    let ok = safetensors(r#"{"foo.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#, 8);
    let e = load(&ok, "x.safetensors", &Limits::default()).err().unwrap();
    assert!(e.message.contains("unknown architecture") && e.message.contains("foo.weight"), "{}", e.message);
    let e = load(b"7767517\n3 3\n", "x.param", &Limits::default()).err().unwrap();
    assert!(e.message.contains("ncnn"), "{}", e.message);
}

/// A safetensors file of zero f32 tensors with these names and shapes.
fn zeros_safetensors(tensors: &[(&str, &[usize])]) -> Vec<u8> {
    let mut off = 0;
    let mut parts = Vec::new();
    for (name, shape) in tensors {
        let n = shape.iter().product::<usize>() * 4;
        parts.push(format!(r#""{name}":{{"dtype":"F32","shape":{shape:?},"data_offsets":[{off},{}]}}"#, off + n));
        off += n;
    }
    safetensors(&format!("{{{}}}", parts.join(",")), off)
}

#[test]
fn realplksr_variants_lucent_cannot_run_are_named() {
    let mut keys: Vec<(&str, &[usize])> = vec![
        ("feats.0.weight", &[8, 3, 3, 3]),
        ("feats.1.channel_mixer.0.weight", &[16, 8, 3, 3]),
        ("feats.1.lk.conv.weight", &[2, 2, 5, 5]),
        ("feats.1.refine.weight", &[8, 8, 1, 1]),
        ("feats.3.weight", &[12, 8, 3, 3]),
    ];
    let e = load(&zeros_safetensors(&keys), "gn.safetensors", &Limits::default()).err().unwrap();
    assert!(e.message.contains("RealPLKSR with GroupNorm"), "{}", e.message);
    keys.push(("feats.1.layer_norm.bias", &[8]));
    keys.push(("to_img.init_pos", &[1, 8, 1, 1]));
    let e = load(&zeros_safetensors(&keys), "dys.safetensors", &Limits::default()).err().unwrap();
    assert!(e.message.contains("DySample"), "{}", e.message);
}

/// xorshift64*, seeded: the fuzz is the same every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn mutate(rng: &mut Rng, src: &[u8]) -> Vec<u8> {
    let mut b = src.to_vec();
    for _ in 0..1 + rng.below(4) {
        if b.is_empty() {
            break;
        }
        let i = rng.below(b.len());
        match rng.below(5) {
            0 => b[i] = rng.next() as u8,
            1 => b[i] ^= 1 << rng.below(8),
            2 => b.truncate(i),
            3 => {
                let v = [0u8, 0xff, 0x7f, 0x80, b'(', b'.', b'R', b'Q'][rng.below(8)];
                b.insert(i, v);
            }
            _ => {
                b.remove(i);
            }
        }
    }
    b
}

fn pickle_of(pth: &[u8]) -> Vec<u8> {
    let entries = lucent_models::zipfile::entries(pth).unwrap();
    entries.iter().find(|e| e.name.ends_with("/data.pkl")).unwrap().data.to_vec()
}

#[test]
fn fuzz_never_panics() {
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let base = golden("compact_x4_nf16_nc2.0.pth");
    let entries: Vec<(String, Vec<u8>)> =
        lucent_models::zipfile::entries(&base).unwrap().iter().map(|e| (e.name.clone(), e.data.to_vec())).collect();
    let pkl = pickle_of(&base);
    let legacy = golden("compact_x4_nf16_nc2.1.pth");
    let st = golden("compact_x4_nf16_nc2.2.safetensors");
    let limits = Limits::default();
    let mut accepted = 0;
    for it in 0..4000 {
        // Random bytes straight into the unpickler, with and without a protocol header.
        let n = rng.below(64);
        let mut r: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        if it % 2 == 0 {
            r.splice(0..0, [0x80, 2]);
        }
        let _ = unpickle(&r, &mut no_pid);
        // A mutated data.pkl in an otherwise valid archive (CRC fixed): reaches tensor rebuilds.
        let m = mutate(&mut rng, &pkl);
        let e: Vec<(&str, &[u8])> =
            entries.iter().map(|(n, d)| (n.as_str(), if n.ends_with("data.pkl") { &m[..] } else { &d[..] })).collect();
        if load(&zip(&e), "fuzz.pth", &limits).is_ok() {
            accepted += 1;
        }
        // Mutated legacy and safetensors files, and mutated raw zips.
        let _ = load(&mutate(&mut rng, &legacy), "fuzz.pth", &limits);
        let _ = load(&mutate(&mut rng, &st), "fuzz.safetensors", &limits);
        if it % 8 == 0 {
            let _ = load(&mutate(&mut rng, &base), "fuzz.pth", &limits);
        }
    }
    eprintln!("fuzz: {accepted} of 4000 mutated pickles still loaded");
}
