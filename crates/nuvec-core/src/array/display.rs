//! Printing arrays as NumPy does: `array([[1, 2],\n       [3, 4]], dtype=int32)`.

use std::fmt;

use super::Array;
use crate::DType;
use crate::dtype::Canon;

/// Formats one element.
fn element(v: Canon, dtype: DType) -> String {
    match v {
        Canon::Bool(b) => if b { "true" } else { "false" }.to_string(),
        Canon::Int(i) => i.to_string(),
        Canon::Float(f) => float(f, dtype),
        Canon::Complex(re, im) => {
            let sign = if im < 0.0 { "-" } else { "+" };
            format!("{}{sign}{}j", float(re, dtype), float(im.abs(), dtype))
        }
    }
}

fn float(f: f64, dtype: DType) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Enough digits for the type, trailing zeros dropped (NumPy's style).
    let digits = match dtype {
        DType::F16 | DType::BF16 => 4,
        DType::F64 => 8,
        _ => 6,
    };
    if f != 0.0 && (f.abs() >= 1e8 || f.abs() < 1e-4) {
        return format!("{f:.digits$e}");
    }
    let s = format!("{f:.digits$}");
    s.trim_end_matches('0').to_string()
}

fn write_nested(out: &mut String, values: &[String], shape: &[usize], depth: usize, indent: usize) {
    if shape.is_empty() {
        out.push_str(&values[0]);
        return;
    }
    out.push('[');
    let n = shape[0];
    let stride = values.len().checked_div(n).unwrap_or(0);
    for i in 0..n {
        if i > 0 {
            out.push(',');
            if shape.len() > 1 {
                out.push_str(&"\n".repeat(shape.len() - 1));
                out.push_str(&" ".repeat(indent + depth + 1));
            } else {
                out.push(' ');
            }
        }
        write_nested(
            out,
            &values[i * stride..(i + 1) * stride],
            &shape[1..],
            depth + 1,
            indent,
        );
    }
    out.push(']');
}

impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(err) = self.error() {
            return write!(f, "array(<error: {err}>)");
        }
        let data = match self.evaluated().and_then(|d| {
            crate::transforms::synchronize(d)?;
            Ok(d.clone())
        }) {
            Ok(d) => d,
            Err(err) => return write!(f, "array(<error: {err}>)"),
        };
        let dtype = self.dtype();
        let values: Vec<String> = crate::with_host!(data.buffer.host(), src, _T => {
            crate::array::gather_row_major(src, &data.layout)
                .into_iter()
                .map(|v| element(crate::dtype::Element::to_canon(v), dtype))
                .collect()
        });
        let width = values.iter().map(String::len).max().unwrap_or(0);
        let padded: Vec<String> = values.iter().map(|v| format!("{v:>width$}")).collect();
        let mut body = String::new();
        write_nested(&mut body, &padded, self.shape(), 0, "array(".len());
        let show_dtype = !matches!(dtype, DType::F32 | DType::I32 | DType::Bool);
        if show_dtype || self.size() == 0 {
            write!(f, "array({body}, dtype={dtype})")
        } else {
            write!(f, "array({body})")
        }
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
