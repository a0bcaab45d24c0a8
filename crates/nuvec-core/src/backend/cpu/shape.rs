//! Shape primitives on the CPU: views rewrite the layout and share the buffer; copies gather.

use crate::Result;
use crate::array::{ArrayData, Layout, row_major_strides};
use crate::ops::shape::ShapeOp;
use crate::primitive::OutputSpec;

/// Computes a shape primitive.
pub(crate) fn eval(
    op: &ShapeOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let x = &inputs[0];
    let out_shape = &outputs[0].0;
    let data = match op {
        ShapeOp::Reshape(shape) => match reshaped_strides(&x.layout, shape) {
            Some(strides) => x.view(Layout {
                shape: shape.clone(),
                strides,
                offset: x.layout.offset,
            }),
            None => {
                let copy = super::copy::to_contiguous(x);
                copy.view(Layout::contiguous(shape))
            }
        },
        ShapeOp::Transpose(perm) => x.view(Layout {
            shape: out_shape.clone(),
            strides: perm.iter().map(|&p| x.layout.strides[p]).collect(),
            offset: x.layout.offset,
        }),
        ShapeOp::Broadcast(shape) => {
            let lead = shape.len() - x.layout.shape.len();
            let strides = (0..shape.len())
                .map(|i| {
                    if i < lead || x.layout.shape[i - lead] == 1 {
                        0
                    } else {
                        x.layout.strides[i - lead]
                    }
                })
                .collect();
            x.view(Layout {
                shape: shape.clone(),
                strides,
                offset: x.layout.offset,
            })
        }
        ShapeOp::Contiguous => {
            if x.layout.is_row_contiguous() {
                x.view(Layout {
                    shape: x.layout.shape.clone(),
                    strides: row_major_strides(&x.layout.shape),
                    offset: x.layout.offset,
                })
            } else {
                super::copy::to_contiguous(x)
            }
        }
        ShapeOp::Slice(ranges) => {
            let mut layout = Layout {
                shape: out_shape.clone(),
                strides: Vec::with_capacity(ranges.len()),
                offset: x.layout.offset,
            };
            let empty = ranges.iter().any(|r| r.2 == 0);
            let mut at = x.layout.offset as isize;
            for (&(start, step, _), &stride) in ranges.iter().zip(&x.layout.strides) {
                at += start as isize * stride;
                layout.strides.push(stride * step);
            }
            // An empty view keeps the input's offset, which is known to be in the buffer.
            if !empty {
                layout.offset = at as usize;
            }
            x.view(layout)
        }
    };
    Ok(vec![data])
}

/// The strides that read `layout`'s elements in row-major order as `shape`, when no copy is
/// needed (NumPy's rule: each group of merged axes must be contiguous within itself).
pub(crate) fn reshaped_strides(layout: &Layout, shape: &[usize]) -> Option<Vec<isize>> {
    if layout.is_row_contiguous() {
        return Some(row_major_strides(shape));
    }
    // Drop the input's size-1 axes; match groups of old and new axes with equal products.
    let old: Vec<(usize, isize)> = layout
        .shape
        .iter()
        .zip(&layout.strides)
        .filter(|(n, _)| **n != 1)
        .map(|(&n, &s)| (n, s))
        .collect();
    if shape.iter().product::<usize>() == 0 {
        return Some(row_major_strides(shape));
    }
    let mut strides = vec![0isize; shape.len()];
    let (mut oi, mut ni) = (0usize, 0usize);
    while ni < shape.len() {
        if shape[ni] == 1 {
            strides[ni] = 0;
            ni += 1;
            continue;
        }
        if oi >= old.len() {
            return None;
        }
        // Grow both groups until their products match.
        let (o_start, n_start) = (oi, ni);
        let (mut op, mut np) = (old[oi].0, shape[ni]);
        oi += 1;
        ni += 1;
        while op != np {
            if op < np {
                if oi >= old.len() {
                    return None;
                }
                op *= old[oi].0;
                oi += 1;
            } else {
                while ni < shape.len() && shape[ni] == 1 {
                    ni += 1;
                }
                if ni >= shape.len() {
                    return None;
                }
                np *= shape[ni];
                ni += 1;
            }
        }
        // The old group must be contiguous within itself.
        for k in o_start..oi - 1 {
            if old[k].1 != old[k + 1].1 * old[k + 1].0 as isize {
                return None;
            }
        }
        // New strides: the innermost old stride, growing outward.
        let mut stride = old[oi - 1].1;
        for k in (n_start..ni).rev() {
            strides[k] = stride;
            stride *= shape[k] as isize;
        }
    }
    if oi != old.len() {
        return None;
    }
    Some(strides)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Array, SliceArg};

    /// Whether two evaluated arrays read the same buffer.
    fn shares(a: &Array, b: &Array) -> bool {
        a.eval().unwrap();
        b.eval().unwrap();
        std::sync::Arc::ptr_eq(&a.data().unwrap().buffer, &b.data().unwrap().buffer)
    }

    #[test]
    fn slices_are_views() {
        let a = Array::from_vec((0..60).collect::<Vec<i32>>(), &[3, 4, 5]).unwrap();
        let s = crate::slice(
            &a,
            &[
                SliceArg::new(None, None, -2),
                SliceArg::new(Some(1), Some(3), 1),
            ],
        )
        .unwrap();
        assert!(shares(&a, &s));
        let layout = &s.data().unwrap().layout;
        assert_eq!(layout.strides, vec![-40, 5, 1]);
        assert_eq!(layout.offset, 2 * 20 + 5);
        // Empty slices keep a valid offset.
        let e = crate::slice(&a, &[SliceArg::new(Some(2), Some(2), 1)]).unwrap();
        assert!(shares(&a, &e));
        assert_eq!(e.data().unwrap().layout.offset, 0);
    }

    #[test]
    fn reshape_views_merge_only_contiguous_groups() {
        // A [4, 6] transposed to [6, 4]: splitting the 6 works, merging the two does not.
        let t = Layout {
            shape: vec![6, 4],
            strides: vec![1, 6],
            offset: 0,
        };
        assert_eq!(reshaped_strides(&t, &[2, 3, 4]), Some(vec![3, 1, 6]));
        assert_eq!(reshaped_strides(&t, &[24]), None);
        assert_eq!(reshaped_strides(&t, &[6, 1, 4]), Some(vec![1, 0, 6]));
    }
}
