//! A first look at nuvec: arrays, broadcasting, lazy evaluation and printing.

use nuvec_core::{Array, DType, Result, add, multiply};

fn main() -> Result<()> {
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    let row = Array::from_slice(&[10.0f32, 20.0, 30.0], &[3])?;
    // Broadcasting: the row is added to every row of x. Nothing runs yet.
    let y = add(&x, &row)?;
    let z = multiply(&y, 0.5)?;
    println!("x =\n{x}");
    println!("(x + row) * 0.5 =\n{z}");
    println!("as int32: {}", z.astype(DType::I32)?);
    println!("transposed: {}", z.t()?);
    Ok(())
}
