//! The array itself: construction, reading values, laziness, deep graphs, donation, devices,
//! errors, and property tests of broadcasting and promotion.

mod common;

use nuvec_core::*;
use proptest::prelude::*;

#[test]
fn construction_and_reading() {
    let a = Array::from_slice(&[1i64, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    assert_eq!(
        (a.shape(), a.ndim(), a.size(), a.dtype()),
        (&[2usize, 3][..], 2, 6, DType::I64)
    );
    assert_eq!(a.nbytes(), 48);
    assert_eq!(Array::scalar(2.5f64).item::<f64>().unwrap(), 2.5);
    assert_eq!(
        Array::full(&[2, 2], 7u16).unwrap().to_vec::<u16>().unwrap(),
        [7; 4]
    );
    assert_eq!(
        zeros(&[3], DType::BF16).unwrap().to_vec::<bf16>().unwrap(),
        [bf16::ZERO; 3]
    );
    assert_eq!(
        ones(&[2], DType::C64)
            .unwrap()
            .to_vec::<Complex64>()
            .unwrap(),
        [Complex64::new(1.0, 0.0); 2]
    );
    assert_eq!(
        full(&[2], 1.5, DType::I32)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        [1, 1]
    );
    let h = Array::from_buffer(HostData::F16(vec![f16::ONE, f16::NEG_ONE]), &[2]).unwrap();
    assert_eq!(h.dtype(), DType::F16);
    assert!(Array::from_slice(&[1.0f32; 5], &[2, 3]).is_err());
    assert!(Array::from_buffer(HostData::U8(vec![1]), &[2]).is_err());
    // Reading needs the array's own element type, and one element for item.
    assert!(matches!(
        a.to_vec::<f32>(),
        Err(Error::DTypeMismatch { .. })
    ));
    assert!(a.item::<i64>().is_err());
    assert_eq!(zeros_like(&a).unwrap().to_vec::<i64>().unwrap(), [0; 6]);
    assert_eq!(ones_like(&a).unwrap().dtype(), DType::I64);
}

#[test]
fn operations_are_lazy_and_drop_their_inputs_once_computed() {
    let a = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let b = &a + 1.0;
    let c = &b * 2.0;
    assert!(!c.is_evaluated() && !b.is_evaluated());
    assert_eq!(c.inputs().len(), 2);
    assert!(matches!(c.primitive(), Some(Primitive::Binary(_))));
    eval(std::slice::from_ref(&c)).unwrap();
    assert!(c.is_evaluated() && b.is_evaluated());
    assert!(c.inputs().is_empty(), "a computed node keeps no inputs");
    assert_eq!(c.to_vec::<f32>().unwrap(), [4.0, 6.0]);
    assert_eq!(b.to_vec::<f32>().unwrap(), [2.0, 3.0]);
}

#[test]
fn a_graph_100000_nodes_deep_evaluates_and_drops_without_overflow() {
    let mut x = Array::scalar(0i32);
    for _ in 0..100_000 {
        x = &x + 1;
    }
    assert_eq!(x.item::<i32>().unwrap(), 100_000);
    // An unevaluated chain is dropped iteratively too.
    let mut y = Array::scalar(0.0f32);
    for _ in 0..200_000 {
        y = &y * 1.0;
    }
    drop(y);
}

#[test]
fn a_held_input_is_never_written_in_place() {
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let b = exp(&a).unwrap();
    let kept = b.clone();
    // `b` is held twice when `c` runs: `c` may not reuse its buffer.
    let c = add(&b, 1.0).unwrap();
    drop(b);
    let before = kept.to_vec::<f32>().unwrap();
    let c = c.to_vec::<f32>().unwrap();
    assert_eq!(kept.to_vec::<f32>().unwrap(), before);
    for (x, y) in before.iter().zip(&c) {
        assert_eq!(*y, x + 1.0);
    }
    // A chain whose intermediates nobody holds reuses buffers and stays correct.
    let mut x = Array::from_slice(&[0.5f64; 1000], &[1000]).unwrap();
    let base = x.clone();
    for _ in 0..10 {
        x = &x * 2.0 + 1.0;
    }
    let want = (0..10).fold(0.5f64, |v, _| v * 2.0 + 1.0);
    assert!(x.to_vec::<f64>().unwrap().iter().all(|&v| v == want));
    assert!(base.to_vec::<f64>().unwrap().iter().all(|&v| v == 0.5));
}

#[test]
fn arrays_are_shared_across_threads() {
    let a = Array::from_slice(&(0..1000).map(|i| i as f32).collect::<Vec<_>>(), &[1000]).unwrap();
    let b = sqrt(&a).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let b = b.clone();
            std::thread::spawn(move || {
                let c = &b * (i as f32);
                c.to_vec::<f32>().unwrap()[999]
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), 999f32.sqrt() * i as f32);
    }
}

#[test]
fn streams_record_where_work_runs_and_missing_gpus_are_errors() {
    assert_eq!(default_stream(), Stream::default_for(Device::cpu()));
    let a = Array::scalar(1.0f32);
    let on_gpu = with_stream(Stream::default_for(Device::gpu(0)), || &a + &a);
    assert_eq!(on_gpu.stream().device, Device::gpu(0));
    assert_eq!(
        default_stream().device,
        Device::cpu(),
        "the previous stream is restored"
    );
    // Without a CUDA device, evaluating on the GPU fails with an error naming it, not a
    // panic; with one, it computes.
    match on_gpu.eval() {
        Err(Error::Device(msg)) => assert!(msg.contains("gpu(0)"), "{msg}"),
        Ok(()) => assert_eq!(on_gpu.item::<f32>().unwrap(), 2.0),
        other => panic!("expected a device error or a value, got {other:?}"),
    }
    // The array stays computable on the CPU's terms: the same graph on the CPU works.
    assert_eq!((&a + &a).item::<f32>().unwrap(), 2.0);
}

#[test]
fn printing_shows_values() {
    let a = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2]).unwrap();
    let s = format!("{a}");
    assert!(s.starts_with("array([[1, 2],"), "{s}");
    let e = Array::from_error(Error::InvalidArgument("boom".into()));
    assert!(format!("{e:?}").contains("boom"));
}

/// Shapes that broadcast together: a common shape, and two shapes that each keep or drop
/// (to 1, or by leaving out leading axes) each of its axes.
fn broadcast_pair() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<usize>)> {
    prop::collection::vec(1usize..4, 0..4).prop_flat_map(|shape| {
        let n = shape.len();
        (
            Just(shape),
            prop::collection::vec(prop::bool::ANY, n),
            prop::collection::vec(prop::bool::ANY, n),
            0..=n,
            0..=n,
        )
            .prop_map(|(shape, ka, kb, da, db)| {
                let pick = |keep: &[bool], drop: usize| -> Vec<usize> {
                    shape
                        .iter()
                        .zip(keep)
                        .skip(drop)
                        .map(|(&d, &k)| if k { d } else { 1 })
                        .collect()
                };
                (shape.clone(), pick(&ka, da), pick(&kb, db))
            })
    })
}

fn index_of(shape: &[usize], out_index: &[usize]) -> usize {
    // Row-major position in `shape` (right-aligned, size-1 axes broadcast) of an output index.
    let lead = out_index.len() - shape.len();
    shape.iter().enumerate().fold(0, |acc, (i, &d)| {
        acc * d + if d == 1 { 0 } else { out_index[lead + i] }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn broadcasting_follows_numpy((out, sa, sb) in broadcast_pair()) {
        let na: usize = sa.iter().product();
        let nb: usize = sb.iter().product();
        let av: Vec<f64> = (0..na).map(|i| i as f64).collect();
        let bv: Vec<f64> = (0..nb).map(|i| 100.0 * i as f64).collect();
        let a = Array::from_slice(&av, &sa).unwrap();
        let b = Array::from_slice(&bv, &sb).unwrap();
        let c = add(&a, &b).unwrap();
        let expect_shape: Vec<usize> = {
            let n = sa.len().max(sb.len());
            (0..n).map(|i| {
                let da = if i + sa.len() >= n { sa[i + sa.len() - n] } else { 1 };
                let db = if i + sb.len() >= n { sb[i + sb.len() - n] } else { 1 };
                da.max(db)
            }).collect()
        };
        prop_assert_eq!(c.shape(), &expect_shape[..]);
        let got = c.to_vec::<f64>().unwrap();
        let total: usize = expect_shape.iter().product();
        for (k, &value) in got.iter().enumerate().take(total) {
            let mut idx = vec![0; expect_shape.len()];
            let mut rem = k;
            for ax in (0..idx.len()).rev() {
                idx[ax] = rem % expect_shape[ax];
                rem /= expect_shape[ax];
            }
            let want = av[index_of(&sa, &idx)] + bv[index_of(&sb, &idx)];
            prop_assert_eq!(value, want);
        }
        let _ = out;
    }

    #[test]
    fn promotion_is_the_table_and_values_survive(i in 0usize..14, j in 0usize..14, v in 0u8..100) {
        let (da, db) = (DType::ALL[i], DType::ALL[j]);
        let a = Array::scalar(v).astype(da).unwrap();
        let b = Array::scalar(1u8).astype(db).unwrap();
        let want = promote_types(da, db);
        let c = multiply(&a, &b).unwrap();
        prop_assert_eq!(c.dtype(), want);
        prop_assert_eq!(multiply(&b, &a).unwrap().dtype(), want);
        // v · 1 (v < 100) is exact in every type except bool.
        if da != DType::Bool && db != DType::Bool && want != DType::C64 {
            prop_assert_eq!(c.astype(DType::F64).unwrap().item::<f64>().unwrap(), f64::from(v));
        }
    }
}

#[test]
fn f64_to_half_floats_rounds_once() {
    // Just above and just below each halfway point between neighbouring positive half
    // values (and their negatives): f32 cannot tell these from the halfway point itself, so
    // a conversion through f32 rounds the tie to even and is wrong for one of each pair.
    // (type, bits of its largest finite value, the value of some bits)
    type Half = (DType, u16, fn(u16) -> f64);
    let halves: [Half; 2] = [
        (DType::F16, 0x7bff, |b| f16::from_bits(b).to_f64()),
        (DType::BF16, 0x7f7f, |b| bf16::from_bits(b).to_f64()),
    ];
    for (dtype, largest, value) in halves {
        let (mut xs, mut want) = (Vec::new(), Vec::new());
        for b in 0..largest {
            let (lo, hi) = (value(b), value(b + 1));
            let half_way = (lo + hi) / 2.0;
            for (x, w) in [(half_way.next_up(), hi), (half_way.next_down(), lo)] {
                xs.extend([x, -x]);
                want.extend([w, -w]);
            }
        }
        let x = Array::from_slice(&xs, &[xs.len()]).unwrap();
        let got = x.astype(dtype).unwrap().astype(DType::F64).unwrap();
        let got = got.to_vec::<f64>().unwrap();
        for ((g, w), x) in got.iter().zip(&want).zip(&xs) {
            assert_eq!(g, w, "{dtype} of {x:e}");
        }
    }
    // One case by hand: 1 + 2⁻¹¹ is halfway between the f16 values 1 and 1 + 2⁻¹⁰.
    let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    let got = Array::scalar(x)
        .astype(DType::F16)
        .unwrap()
        .item::<f16>()
        .unwrap();
    assert_eq!(got.to_f64(), 1.0 + 2f64.powi(-10));
    // Scalars meeting a half array are converted the same way.
    let y = Array::from_slice(&[f16::from_f64(0.0)], &[1]).unwrap() + x;
    assert_eq!(y.to_vec::<f16>().unwrap()[0].to_f64(), 1.0 + 2f64.powi(-10));
}

#[test]
fn empty_layouts_are_row_contiguous_whatever_their_strides() {
    use nuvec_core::array::Layout;
    let layouts = [
        (vec![0], vec![1]),
        (vec![3, 0], vec![1, 3]),
        (vec![0, 4], vec![0, 1]),
        (vec![2, 0, 3], vec![-3, 7, 0]),
    ];
    for (shape, strides) in layouts {
        let layout = Layout {
            shape,
            strides: strides.clone(),
            offset: 2,
        };
        assert!(layout.is_row_contiguous(), "{layout:?}");
        // The same strides with elements are not row-major.
        let full = Layout {
            shape: vec![2; strides.len()],
            strides,
            offset: 2,
        };
        assert_eq!(full.is_row_contiguous(), full.strides == [1], "{full:?}");
    }
    // Empty transposed, broadcast and sliced views compute as empty arrays.
    let e = Array::from_slice::<f32>(&[], &[0, 3]).unwrap();
    let views = [
        e.t().unwrap(),
        broadcast_to(&Array::from_slice::<f32>(&[], &[1, 0]).unwrap(), &[4, 0]).unwrap(),
        slice(&e.t().unwrap(), &[SliceArg::new(None, None, -1)]).unwrap(),
    ];
    for v in views {
        let shape = v.shape().to_vec();
        for y in [
            contiguous(&v).unwrap(),
            &v + 1.0,
            exp(&v).unwrap(),
            copy(&v).unwrap(),
        ] {
            assert_eq!(y.shape(), shape);
            assert!(y.to_vec::<f32>().unwrap().is_empty());
        }
        assert_eq!(sum(&v, &[], false).unwrap().item::<f32>().unwrap(), 0.0);
    }
}
