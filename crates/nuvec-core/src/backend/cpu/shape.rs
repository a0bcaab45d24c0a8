//! Shape primitives on the CPU: views rewrite the layout and share the buffer; copies gather.

use crate::Result;
use crate::array::{ArrayData, Layout, row_major_strides};
use crate::ops::shape::{ShapeOp, split_pieces};
use crate::primitive::OutputSpec;

/// Computes a shape primitive.
pub(crate) fn eval(
    op: &ShapeOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let out_shape = &outputs[0].0;
    match op {
        ShapeOp::Concatenate(axis) => {
            return Ok(vec![super::copy::concatenate(inputs, *axis, out_shape)]);
        }
        ShapeOp::Pad(widths) => {
            let data = super::copy::pad(&inputs[0], &inputs[1], widths, out_shape);
            return Ok(vec![data]);
        }
        ShapeOp::Split { axis, indices } => {
            let x = &inputs[0];
            let pieces = split_pieces(x.layout.shape[*axis], indices);
            let stride = x.layout.strides[*axis];
            let views = pieces
                .into_iter()
                .zip(outputs)
                .map(|((start, _), (shape, _))| {
                    let first = x.layout.offset as isize + start as isize * stride;
                    view_at(x, shape.clone(), x.layout.strides.clone(), first)
                })
                .collect();
            return Ok(views);
        }
        _ => {}
    }
    let x = &inputs[0];
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
        ShapeOp::Contiguous => row_major(x, x.layout.is_row_contiguous()),
        ShapeOp::Slice(ranges) => {
            let mut strides = Vec::with_capacity(ranges.len());
            let mut at = x.layout.offset as isize;
            for (&(start, step, _), &stride) in ranges.iter().zip(&x.layout.strides) {
                at += start as isize * stride;
                strides.push(stride * step);
            }
            view_at(x, out_shape.clone(), strides, at)
        }
        ShapeOp::Diagonal {
            offset,
            axis1,
            axis2,
        } => {
            let (s1, s2) = (x.layout.strides[*axis1], x.layout.strides[*axis2]);
            let mut strides: Vec<isize> = (0..x.layout.shape.len())
                .filter(|d| d != axis1 && d != axis2)
                .map(|d| x.layout.strides[d])
                .collect();
            strides.push(s1 + s2);
            let (skip1, skip2) = if *offset >= 0 {
                (0, *offset)
            } else {
                (-*offset, 0)
            };
            let start = x.layout.offset as isize + skip1 * s1 + skip2 * s2;
            view_at(x, out_shape.clone(), strides, start)
        }
        ShapeOp::AsStrided {
            shape,
            strides,
            offset,
        } => {
            // The strides count in the input's row-major order.
            let base = super::copy::to_contiguous_shared(x);
            let empty = shape.contains(&0);
            let start = base.layout.offset + if empty { 0 } else { *offset };
            base.view(Layout {
                shape: shape.clone(),
                strides: strides.clone(),
                offset: start,
            })
        }
        // When nobody else holds the buffer, it is this array's own already.
        ShapeOp::Copy => row_major(x, x.is_donatable() && x.layout.is_row_contiguous()),
        ShapeOp::Concatenate(_) | ShapeOp::Pad(_) | ShapeOp::Split { .. } => {
            unreachable!("handled above")
        }
    };
    Ok(vec![data])
}

/// A view of `x` as `shape` and `strides` from buffer position `start`. An empty view keeps
/// `x`'s offset, which is known to lie in the buffer (`start` may not).
fn view_at(x: &ArrayData, shape: Vec<usize>, strides: Vec<isize>, start: isize) -> ArrayData {
    let offset = if shape.contains(&0) {
        x.layout.offset
    } else {
        start as usize
    };
    x.view(Layout {
        shape,
        strides,
        offset,
    })
}

/// `x`'s elements in row-major order: a view of them with row-major strides when `reuse`
/// (they are laid out so, and may be shared), else a row-major copy.
fn row_major(x: &ArrayData, reuse: bool) -> ArrayData {
    if reuse {
        x.view(Layout {
            shape: x.layout.shape.clone(),
            strides: row_major_strides(&x.layout.shape),
            offset: x.layout.offset,
        })
    } else {
        super::copy::to_contiguous(x)
    }
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
    fn composite_views_share_the_buffer() {
        let a = Array::from_vec((0..60).collect::<Vec<i32>>(), &[3, 4, 5]).unwrap();
        for part in crate::split_at(&a, &[1, 3], 1).unwrap() {
            assert!(shares(&a, &part));
        }
        for part in crate::unstack(&a, 2).unwrap() {
            assert!(shares(&a, &part));
        }
        let d = crate::diagonal(&a, 1, 0, 2).unwrap();
        assert!(shares(&a, &d));
        // Rows and columns both advance: one step of 20 + 1 elements.
        assert_eq!(d.data().unwrap().layout.strides, vec![5, 21]);
        assert_eq!(d.data().unwrap().layout.offset, 1);
        let views = [
            crate::flip(&a, &[]).unwrap(),
            crate::swapaxes(&a, 0, 2).unwrap(),
            crate::moveaxis(&a, 0, -1).unwrap(),
            crate::flatten(&a, 0, -1).unwrap(),
            crate::unflatten(&a, 2, &[5, 1]).unwrap(),
            crate::atleast_3d(&a).unwrap(),
            crate::as_strided(&a, &[2, 2], &[-1, 3], 10).unwrap(),
            crate::contiguous(&a).unwrap(),
        ];
        for v in &views {
            assert!(shares(&a, v), "{:?}", v.primitive());
        }
        assert_eq!(views[0].data().unwrap().layout.strides, vec![-20, -5, -1]);
    }

    #[test]
    fn copies_get_their_own_buffer() {
        let a = Array::from_vec((0..60).collect::<Vec<i32>>(), &[3, 4, 5]).unwrap();
        let t = a.t().unwrap();
        let copies = [
            crate::copy(&a).unwrap(),
            crate::contiguous(&t).unwrap(),
            crate::concatenate(&[a.clone(), a.clone()], 1).unwrap(),
            crate::pad(&a, &[(0, 1)], 0).unwrap(),
            crate::roll(&a, 2, Some(1)).unwrap(),
        ];
        for c in &copies {
            assert!(!shares(&a, c), "{:?}", c.primitive());
            assert!(c.data().unwrap().layout.is_row_contiguous());
        }
        // as_strided of a strided view reads a row-major copy.
        let s = crate::as_strided(&t, &[3], &[1], 0).unwrap();
        assert!(!shares(&a, &s));
        assert_eq!(s.to_vec::<i32>().unwrap(), [0, 20, 40]);
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
