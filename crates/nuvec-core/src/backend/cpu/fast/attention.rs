//! [`FastOp::Attention`](crate::fast::FastOp::Attention) for decoding: a few query rows per
//! head against many keys, no array mask nor sinks. One task per (batch, key head, block of
//! keys) streams its keys once for every query row that reads them (all the query heads of
//! the group), with an online softmax in float32 over blocks of keys; the key range is split
//! when there are too few heads to keep every thread busy, and the tasks' partial sums are
//! merged at the end.

use super::{CpuKernel, Lane, dot, par_map, widest};
use crate::array::{ArrayData, Layout};
use crate::backend::cpu::math::exp_f32;
use crate::fast::attention::Attention;
use crate::fast::{Arg, kernel_sized};
use crate::primitive::OutputSpec;
use crate::{DType, Result, bf16, f16};

const OP: &str = "scaled_dot_product_attention";

/// The most query rows per head the kernel takes (decoding and short verification
/// windows); longer queries are products of matrices, which the fallback does better.
const MAX_QUERY_ROWS: usize = 16;
/// The most query rows one task carries (query heads per key head times query rows).
const MAX_GROUP_ROWS: usize = 256;

impl CpuKernel for Attention {
    /// `(q, k, v)` of one kernel type without an array mask or sinks, at most
    /// [`MAX_QUERY_ROWS`] query rows per head.
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        if self.mask || self.sinks || inputs.len() != 3 || !kernel_sized(inputs) {
            return false;
        }
        let dtype = inputs[0].dtype;
        if inputs
            .iter()
            .any(|a| a.shape.len() != 4 || a.dtype != dtype)
        {
            return false;
        }
        let (q, k, v) = (inputs[0].shape, inputs[1].shape, inputs[2].shape);
        let (lq, lk) = (q[2], k[2]);
        k[0] == q[0]
            && v[0] == q[0]
            && k[3] == q[3]
            && k[1] == v[1]
            && k[2] == v[2]
            && k[1] > 0
            && q[1] % k[1] == 0
            && lk > 0
            && v[3] > 0
            && lq <= MAX_QUERY_ROWS
            && (q[1] / k[1]) * lq <= MAX_GROUP_ROWS
            && (!self.causal || lq <= lk)
    }

    fn eval(&self, inputs: &[ArrayData], _: &[OutputSpec]) -> Result<Vec<ArrayData>> {
        Ok(vec![eval(inputs, self.scale, self.causal)?])
    }
}
/// Keys scored together before their probabilities are folded into the sums.
const BLOCK: usize = 64;
/// The fewest keys worth a task of their own.
const MIN_SPLIT: usize = 256;

/// Where the rows of one `[B, H, L, D]` operand start: offset and strides of the first
/// three axes (the last is unit-stride).
#[derive(Clone, Copy)]
struct Rows {
    offset: isize,
    strides: [isize; 3],
}

impl Rows {
    fn new(layout: &Layout) -> Rows {
        let s = &layout.strides;
        Rows {
            offset: layout.offset as isize,
            strides: [s[0], s[1], s[2]],
        }
    }

    #[inline(always)]
    fn at(&self, b: usize, h: usize, l: usize) -> usize {
        let [s0, s1, s2] = self.strides;
        (self.offset + b as isize * s0 + h as isize * s1 + l as isize * s2) as usize
    }
}

/// `data` with unit-stride rows (copied row-major when not).
fn unit_rows(data: &ArrayData) -> ArrayData {
    let l = &data.layout;
    if l.shape[3] <= 1 || l.strides[3] == 1 {
        data.clone()
    } else {
        super::super::copy::to_contiguous(data)
    }
}

/// The sizes and parameters of one attention.
#[derive(Clone, Copy)]
struct Dims {
    hq: usize,
    hkv: usize,
    lq: usize,
    lk: usize,
    d: usize,
    dv: usize,
    scale: f32,
    causal: bool,
}

impl Dims {
    fn group(&self) -> usize {
        self.hq / self.hkv
    }
}

/// One task's result: per query row, the running maximum, the sum of exponentials and the
/// weighted sum of values.
struct Partial {
    max: Vec<f32>,
    total: Vec<f32>,
    acc: Vec<f32>,
}

/// `(q, k, v)` attended.
fn eval(inputs: &[ArrayData], scale: f32, causal: bool) -> Result<ArrayData> {
    let (q, k, v) = (
        unit_rows(&inputs[0]),
        unit_rows(&inputs[1]),
        unit_rows(&inputs[2]),
    );
    let (qs, ks, vs) = (&q.layout.shape, &k.layout.shape, &v.layout.shape);
    let dims = Dims {
        hq: qs[1],
        hkv: ks[1],
        lq: qs[2],
        lk: ks[2],
        d: qs[3],
        dv: vs[3],
        scale,
        causal,
    };
    let batch = qs[0];
    let out_shape = [batch, dims.hq, dims.lq, dims.dv];
    match q.dtype() {
        DType::F32 => typed::<f32>([&q, &k, &v], dims, batch, &out_shape),
        DType::F16 => typed::<f16>([&q, &k, &v], dims, batch, &out_shape),
        _ => typed::<bf16>([&q, &k, &v], dims, batch, &out_shape),
    }
}

/// The operands of one task.
struct Job<'a, T> {
    q: &'a [T],
    k: &'a [T],
    v: &'a [T],
    at: [Rows; 3],
    dims: Dims,
}

fn typed<T: Lane>(
    [q, k, v]: [&ArrayData; 3],
    dims: Dims,
    batch: usize,
    out_shape: &[usize],
) -> Result<ArrayData> {
    let job = Job {
        q: q.buffer.host()?.typed::<T>(OP)?,
        k: k.buffer.host()?.typed::<T>(OP)?,
        v: v.buffer.host()?.typed::<T>(OP)?,
        at: [
            Rows::new(&q.layout),
            Rows::new(&k.layout),
            Rows::new(&v.layout),
        ],
        dims,
    };
    // Split the keys so that every thread has a few tasks, without tasks of too few keys.
    let heads = batch * dims.hkv;
    let threads = rayon::current_num_threads();
    let wanted = (4 * threads).div_ceil(heads.max(1));
    let splits = wanted.min(dims.lk.div_ceil(MIN_SPLIT)).max(1);
    let per_split = dims.lk.div_ceil(splits);
    let partials = par_map(heads * splits, &|task| {
        let (head, split) = (task / splits, task % splits);
        let keys = split * per_split..((split + 1) * per_split).min(dims.lk);
        part::<T>(&job, head / dims.hkv, head % dims.hkv, keys)
    });
    // Merge each head's parts, row by row.
    let rows = dims.group() * dims.lq;
    // From the buffer cache, as every kernel's output: a fresh vector would return to the
    // cache when dropped but never be taken back from it, which fills it step after step.
    // Every element is written below.
    let mut out = crate::array::pool::alloc::<T>(out_shape.iter().product());
    let mut acc = vec![0f32; dims.dv];
    for head in 0..heads {
        let parts = &partials[head * splits..(head + 1) * splits];
        let (b, h) = (head / dims.hkv, head % dims.hkv);
        for r in 0..rows {
            let top = parts.iter().fold(f32::NEG_INFINITY, |m, p| m.max(p.max[r]));
            let mut total = 0.0;
            acc.fill(0.0);
            for p in parts.iter().filter(|p| p.total[r] > 0.0) {
                let w = exp_f32(p.max[r] - top);
                total += p.total[r] * w;
                for (a, &x) in acc.iter_mut().zip(&p.acc[r * dims.dv..(r + 1) * dims.dv]) {
                    *a += x * w;
                }
            }
            let (g, i) = (r / dims.lq, r % dims.lq);
            let at = ((b * dims.hq + h * dims.group() + g) * dims.lq + i) * dims.dv;
            for (o, &a) in out[at..at + dims.dv].iter_mut().zip(&acc) {
                *o = T::down(a / total);
            }
        }
    }
    Ok(ArrayData::from_vec(out, out_shape))
}

widest! {
    /// [`part_body`] with the widest vectors the CPU has.
    fn part<T: Lane>(job: &Job<'_, T>, b: usize, h: usize, keys: std::ops::Range<usize>) -> Partial = part_body;
}

/// The partial attention of every query row of key head `h` (batch `b`) over `keys`.
#[inline(always)]
fn part_body<T: Lane>(
    job: &Job<'_, T>,
    b: usize,
    h: usize,
    keys: std::ops::Range<usize>,
) -> Partial {
    let dims = job.dims;
    let (d, dv, lq, group) = (dims.d, dims.dv, dims.lq, dims.group());
    let rows = group * lq;
    // The query rows, scaled in their own type first as the fallback does.
    let mut q = vec![0f32; rows * d];
    for (r, qr) in q.chunks_exact_mut(d).enumerate() {
        let at = job.at[0].at(b, h * group + r / lq, r % lq);
        for (o, x) in qr.iter_mut().zip(&job.q[at..at + d]) {
            *o = T::down(x.up() * dims.scale).up();
        }
    }
    // The last key each row sees (queries aligned with the last keys when causal).
    let last = |r: usize| {
        if dims.causal {
            r % lq + dims.lk - lq
        } else {
            dims.lk - 1
        }
    };
    let mut max = vec![f32::NEG_INFINITY; rows];
    let mut total = vec![0f32; rows];
    let mut acc = vec![0f32; rows * dv];
    let mut k_scratch = vec![0f32; BLOCK * d];
    let mut v_scratch = vec![0f32; BLOCK * dv];
    let mut scores = [0f32; BLOCK];
    let mut start = keys.start;
    while start < keys.end {
        let n = BLOCK.min(keys.end - start);
        let mut k_rows: [&[f32]; BLOCK] = [&[]; BLOCK];
        let mut v_rows: [&[f32]; BLOCK] = [&[]; BLOCK];
        for (j, (ks, vs)) in k_scratch
            .chunks_exact_mut(d)
            .zip(v_scratch.chunks_exact_mut(dv))
            .take(n)
            .enumerate()
        {
            let (ka, va) = (job.at[1].at(b, h, start + j), job.at[2].at(b, h, start + j));
            k_rows[j] = T::widen(&job.k[ka..ka + d], ks);
            v_rows[j] = T::widen(&job.v[va..va + dv], vs);
        }
        for r in 0..rows {
            let seen = (last(r) + 1).saturating_sub(start).min(n);
            if seen == 0 {
                continue;
            }
            let qr = &q[r * d..(r + 1) * d];
            for (s, kr) in scores[..seen].iter_mut().zip(&k_rows[..seen]) {
                *s = dot(qr, kr);
            }
            let top = scores[..seen].iter().fold(max[r], |m, &s| m.max(s));
            let ar = &mut acc[r * dv..(r + 1) * dv];
            if top > max[r] {
                // Rescale what came before to the new maximum.
                let w = exp_f32(max[r] - top);
                total[r] *= w;
                for a in ar.iter_mut() {
                    *a *= w;
                }
                max[r] = top;
            }
            let mut block_total = 0.0;
            for s in scores[..seen].iter_mut() {
                *s = exp_f32(*s - top);
                block_total += *s;
            }
            total[r] += block_total;
            add_weighted(ar, &scores[..seen], &v_rows[..seen]);
        }
        start += n;
    }
    Partial { max, total, acc }
}

/// `acc += Σ_j p[j] · rows[j]`, 16 columns at a time held in registers across the rows.
#[inline(always)]
fn add_weighted(acc: &mut [f32], p: &[f32], rows: &[&[f32]]) {
    let done = acc.len() / 16 * 16;
    let mut chunks = acc.chunks_exact_mut(16);
    for (c, a) in (&mut chunks).enumerate() {
        let mut sum = [0f32; 16];
        sum.copy_from_slice(a);
        for (&p, r) in p.iter().zip(rows) {
            for (s, &x) in sum.iter_mut().zip(&r[16 * c..16 * c + 16]) {
                *s += p * x;
            }
        }
        a.copy_from_slice(&sum);
    }
    for (i, a) in chunks.into_remainder().iter_mut().enumerate() {
        for (&p, r) in p.iter().zip(rows) {
            *a += p * r[done + i];
        }
    }
}
