//! Bad input: one test per kind.

use super::*;

// ---------------------------------------------------------------------------------------------
// Bad input: one test per kind.

fn expect_err(r: nuvec_core::Result<Array>, op: &str) {
    match r {
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with(op), "{msg:?} should name {op}");
        }
        Ok(a) => panic!("{op}: expected an error, got shape {:?}", a.shape()),
    }
}

#[test]
fn non_integer_indices_are_rejected() {
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let f = Array::from_slice(&[0.0f32], &[1]).unwrap();
    let b = Array::from_slice(&[true], &[1]).unwrap();
    let v = Array::from_slice(&[5.0f32], &[1]).unwrap();
    for bad in [&f, &b] {
        expect_err(take(&a, bad, Some(0)), "take");
        expect_err(take_along_axis(&a, bad, Some(0)), "take_along_axis");
        expect_err(put_along_axis(&a, bad, &v, Some(0)), "put_along_axis");
        expect_err(scatter_add_axis(&a, bad, &v, Some(0)), "scatter_add_axis");
        expect_err(gather(&a, std::slice::from_ref(bad), &[0], &[1]), "gather");
        let u = Array::from_slice(&[5.0f32], &[1, 1]).unwrap();
        expect_err(scatter(&a, std::slice::from_ref(bad), &u, &[0]), "scatter");
    }
}

#[test]
fn axes_out_of_range_are_rejected() {
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let i = Array::from_slice(&[0i32], &[1]).unwrap();
    let i2 = Array::from_slice(&[0i32, 1], &[1, 2]).unwrap();
    assert!(matches!(
        take(&a, &i, Some(2)),
        Err(Error::AxisOutOfRange { .. })
    ));
    assert!(matches!(
        take(&a, &i, Some(-3)),
        Err(Error::AxisOutOfRange { .. })
    ));
    assert!(matches!(
        take(&Array::scalar(1.0f32), &i, Some(0)),
        Err(Error::AxisOutOfRange { .. })
    ));
    assert!(matches!(
        take_along_axis(&a, &i2, Some(2)),
        Err(Error::AxisOutOfRange { .. })
    ));
    assert!(matches!(
        put_along_axis(&a, &i2, &i2, Some(-3)),
        Err(Error::AxisOutOfRange { .. })
    ));
    assert!(matches!(
        gather(&a, std::slice::from_ref(&i), &[2], &[1, 1]),
        Err(Error::AxisOutOfRange { .. })
    ));
    let u = Array::from_slice(&[0.0f32; 2], &[1, 1, 2]).unwrap();
    assert!(matches!(
        scatter(&a, &[i], &u, &[-3]),
        Err(Error::AxisOutOfRange { .. })
    ));
}

#[test]
fn taking_from_an_empty_axis_is_rejected() {
    let a = Array::from_vec(Vec::<f32>::new(), &[0, 2]).unwrap();
    let i = Array::from_slice(&[0i32], &[1]).unwrap();
    expect_err(take(&a, &i, Some(0)), "take");
    expect_err(take(&a, &i, None), "take");
    let i2 = Array::from_slice(&[0i32, 0], &[1, 2]).unwrap();
    expect_err(take_along_axis(&a, &i2, Some(0)), "take_along_axis");
}

#[test]
fn mismatched_ranks_and_shapes_are_rejected() {
    let a = Array::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    let i1 = Array::from_slice(&[0i32, 1], &[2]).unwrap();
    let i3 = Array::from_slice(&[0i32; 3], &[3, 1]).unwrap();
    // Indices of another rank.
    expect_err(take_along_axis(&a, &i1, Some(1)), "take_along_axis");
    expect_err(put_along_axis(&a, &i1, &i1, Some(1)), "put_along_axis");
    // Shapes that do not broadcast (3 against 2 off the axis).
    expect_err(take_along_axis(&a, &i3, Some(1)), "take_along_axis");
    expect_err(
        put_along_axis(&a, &i3, &Array::scalar(1.0f32), Some(1)),
        "put_along_axis",
    );
    // Values that do not broadcast with the indices.
    let i22 = Array::from_slice(&[0i32; 4], &[2, 2]).unwrap();
    let v3 = Array::from_slice(&[0.0f32; 3], &[3]).unwrap();
    expect_err(scatter_add_axis(&a, &i22, &v3, Some(1)), "scatter_add_axis");
    // Index arrays that do not broadcast together.
    let i4 = Array::from_slice(&[0i32; 4], &[4]).unwrap();
    expect_err(gather(&a, &[i1.clone(), i4], &[0, 1], &[1, 1]), "gather");
}

#[test]
fn bad_gather_arguments_are_rejected() {
    let a = Array::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    let i = Array::from_slice(&[0i32, 1], &[2]).unwrap();
    // Too many index arrays.
    expect_err(
        gather(&a, &[i.clone(), i.clone(), i.clone()], &[0, 1, 1], &[1, 1]),
        "gather",
    );
    // Index arrays and axes of different counts.
    expect_err(
        gather(&a, std::slice::from_ref(&i), &[0, 1], &[1, 1]),
        "gather",
    );
    // A repeated axis.
    expect_err(
        gather(&a, &[i.clone(), i.clone()], &[1, -1], &[1, 1]),
        "gather",
    );
    // Slice sizes of the wrong count, or larger than the array.
    expect_err(gather(&a, std::slice::from_ref(&i), &[0], &[1]), "gather");
    expect_err(
        gather(&a, std::slice::from_ref(&i), &[0], &[1, 4]),
        "gather",
    );
}

#[test]
fn bad_scatter_updates_are_rejected() {
    let a = Array::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    let i = Array::from_slice(&[0i32, 1], &[2]).unwrap();
    // Updates of the wrong rank.
    let u = Array::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    expect_err(scatter(&a, std::slice::from_ref(&i), &u, &[0]), "scatter");
    // Leading axes that are not the index shape.
    let u = Array::from_slice(&[0.0f32; 9], &[3, 1, 3]).unwrap();
    expect_err(
        scatter_add(&a, std::slice::from_ref(&i), &u, &[0]),
        "scatter_add",
    );
    // A window larger than the array.
    let u = Array::from_slice(&[0.0f32; 16], &[2, 2, 4]).unwrap();
    expect_err(
        scatter_max(&a, std::slice::from_ref(&i), &u, &[0]),
        "scatter_max",
    );
}

#[test]
fn unordered_types_reject_max_and_min() {
    let a = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let c = a.astype(DType::C64).unwrap();
    let i = Array::from_slice(&[0i32], &[1]).unwrap();
    let u = Array::from_slice(&[5.0f32], &[1, 1]).unwrap();
    assert!(matches!(
        scatter_max(&c, std::slice::from_ref(&i), &u, &[0]),
        Err(Error::UnsupportedDType { .. })
    ));
    assert!(matches!(
        scatter_min(&c, std::slice::from_ref(&i), &u, &[0]),
        Err(Error::UnsupportedDType { .. })
    ));
    let s = [SliceArg::full()];
    assert!(matches!(
        slice_update_max(&c, &a, &s),
        Err(Error::UnsupportedDType { .. })
    ));
    // Sums of complex numbers are fine.
    let got = scatter_add(&c, &[i], &u, &[0]).unwrap();
    assert_eq!(got.shape(), [2]);
}

#[test]
fn bad_slice_updates_are_rejected() {
    let a = Array::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    let u = Array::scalar(1.0f32);
    let full = SliceArg::full();
    // Too many slices.
    expect_err(slice_update(&a, &u, &[full, full, full]), "slice_update");
    // A zero step.
    expect_err(
        slice_update(&a, &u, &[SliceArg::new(None, None, 0)]),
        "slice_update",
    );
    // An update that does not broadcast to the region (region [2, 2]).
    let u3 = Array::from_slice(&[0.0f32; 3], &[3]).unwrap();
    let region = [full, SliceArg::new(Some(1), None, 1)];
    expect_err(slice_update_add(&a, &u3, &region), "slice_update_add");
    // An update of a higher rank than the region.
    let u122 = Array::from_slice(&[0.0f32; 4], &[2, 1, 2]).unwrap();
    expect_err(slice_update(&a, &u122, &region), "slice_update");
}

#[test]
fn inputs_in_an_error_state_are_reported() {
    let a = Array::from_slice(&[0.0f32; 4], &[4]).unwrap();
    let bad = Array::from_error(Error::InvalidArgument("upstream: broken".into()));
    let i = Array::from_slice(&[0i32], &[1]).unwrap();
    expect_err(take(&bad, &i, None), "upstream");
    expect_err(take(&a, &bad, None), "upstream");
    expect_err(slice_update(&a, &bad, &[]), "upstream");
    expect_err(
        scatter_add(&a, std::slice::from_ref(&i), &bad, &[0]),
        "upstream",
    );
    expect_err(put_along_axis(&a, &i, &bad, Some(0)), "upstream");
}

#[test]
fn nodes_built_directly_are_checked() {
    let a = Array::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    let u = Array::from_slice(&[1.0f32; 2], &[1, 2]).unwrap();
    // A region that runs past the end of axis 1.
    let op = IndexOp::SliceUpdate {
        start: vec![0, 2],
        step: vec![1, 1],
        mode: ScatterMode::Replace,
    };
    assert!(Array::from_op(Primitive::Index(op), vec![a.clone(), u.clone()]).is_err());
    // A negative step that runs past the start.
    let op = IndexOp::SliceUpdate {
        start: vec![0, 0],
        step: vec![1, -1],
        mode: ScatterMode::Replace,
    };
    assert!(Array::from_op(Primitive::Index(op), vec![a.clone(), u.clone()]).is_err());
    // Updates of another type.
    let op = IndexOp::SliceUpdate {
        start: vec![0, 0],
        step: vec![1, 1],
        mode: ScatterMode::Replace,
    };
    let ui = u.astype(DType::I32).unwrap();
    assert!(Array::from_op(Primitive::Index(op.clone()), vec![a.clone(), ui]).is_err());
    assert!(Array::from_op(Primitive::Index(op), vec![a.clone(), u]).is_ok());
    // Take on an axis past the last.
    let i = Array::from_slice(&[0i32], &[1]).unwrap();
    let op = IndexOp::Take { axis: 2 };
    assert!(Array::from_op(Primitive::Index(op), vec![a.clone(), i.clone()]).is_err());
    // Index arrays of different shapes.
    let j = Array::from_slice(&[0i32, 1], &[2]).unwrap();
    let op = IndexOp::Gather {
        axes: vec![0, 1],
        slice_sizes: vec![1, 1],
    };
    assert!(Array::from_op(Primitive::Index(op), vec![a, i, j]).is_err());
}
