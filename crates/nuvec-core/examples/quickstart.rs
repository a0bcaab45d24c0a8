//! A first look at nuvec: arrays, broadcasting, a reduction, a matrix product, printing.

use nuvec_core::{Array, DType, Result, add, arange, matmul, multiply, sum};

fn main() -> Result<()> {
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    let row = Array::from_slice(&[10.0f32, 20.0, 30.0], &[3])?;
    // Broadcasting: the row is added to every row of x. Nothing is computed yet.
    let y = multiply(&add(&x, &row)?, 0.5)?;
    println!("x =\n{x}\n");
    println!("(x + row) * 0.5 =\n{y}\n");
    // A reduction over the last axis, and over everything.
    println!("row sums: {}", sum(&y, &[-1], false)?);
    println!("total:    {}", sum(&y, &[], false)?);
    // A matrix product with a transposed view (no copy is made for the transpose).
    let w = arange(0.0, 6.0, 1.0, DType::F32)?.reshape(&[2, 3])?;
    println!("\ny @ wᵀ =\n{}", matmul(&y, &w.t()?)?);
    println!("\nas int32: {}", y.astype(DType::I32)?);
    Ok(())
}
