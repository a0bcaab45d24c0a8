//! Printing arrays as NumPy's `repr` does (NumPy 2's default options: 8 digits of precision,
//! lines of 75 characters, summaries past 1000 elements with 3 items at each edge):
//!
//! ```text
//! array([[1. , 2.5],
//!        [3. , 4. ]], dtype=float16)
//! ```
//!
//! Floats print the shortest digits that identify the value in its own type (`0.1` for a
//! float16 0.1), at most 8 after the point, aligned on the point with a common width; integral
//! floats keep their point (`1.`); scientific notation is used when the nonzero magnitudes
//! call for it (past `10^min(8, digits of the type)`, below `1e-4`, or spread more than
//! 1000-fold). Booleans print as MLX prints them, `true` and `false`. The dtype is named
//! unless NumPy leaves it implied (float64, int64, bool); empty and summarised arrays also
//! give their shape. Arrays in an error state (or whose evaluation fails) print the error.

use std::fmt;

use super::Array;
use crate::dtype::{Canon, Element, bf16, f16};
use crate::{Category, DType};

/// NumPy's `linewidth`.
const LINE_WIDTH: usize = 75;
/// Arrays with more elements than this are summarised.
const THRESHOLD: usize = 1000;
/// Items kept at each edge of a summarised axis.
const EDGE: usize = 3;
/// The most digits printed after the point (NumPy's `precision`).
const MAX_FRACTION: usize = 8;

/// The float type whose digits are printed: each prints the shortest digits that read back
/// as the same value of that type.
#[derive(Clone, Copy, PartialEq)]
enum FloatKind {
    Half,
    Brain,
    Single,
    Double,
}

impl FloatKind {
    fn of(dtype: DType) -> FloatKind {
        match dtype {
            DType::F16 => FloatKind::Half,
            DType::BF16 => FloatKind::Brain,
            DType::F64 => FloatKind::Double,
            _ => FloatKind::Single,
        }
    }

    /// `v` rounded to this type (NumPy compares the thresholds in the array's type).
    fn round(self, v: f64) -> f64 {
        match self {
            FloatKind::Half => f16::from_f64(v).to_f64(),
            FloatKind::Brain => bf16::from_f64(v).to_f64(),
            FloatKind::Single => f64::from(v as f32),
            FloatKind::Double => v,
        }
    }

    /// The magnitude from which values print in scientific notation: `10^min(8, p)`, `p` the
    /// type's decimal precision (NumPy's `finfo(dtype).precision`).
    fn scientific_from(self) -> f64 {
        match self {
            FloatKind::Half => 1e3,
            FloatKind::Brain => 1e2,
            FloatKind::Single => 1e6,
            FloatKind::Double => 1e8,
        }
    }
}

/// Splits Rust's exponent notation (`1.25e-3`) into its digits (`125`) and exponent (`-3`).
fn split_exponent(s: &str) -> (String, i32) {
    let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits, exp.parse().unwrap_or(0))
}

/// The shortest digits identifying the finite, non-negative `x` in `kind`, and the decimal
/// exponent of the first: `x = d.ddd × 10^exp`.
fn shortest(x: f64, kind: FloatKind) -> (String, i32) {
    if x == 0.0 {
        return ("0".into(), 0);
    }
    let reads_back = |s: &String| s.parse::<f64>().is_ok_and(|back| kind.round(back) == x);
    let s = match kind {
        FloatKind::Single | FloatKind::Double => {
            let shortest = if kind == FloatKind::Single {
                format!("{:e}", x as f32)
            } else {
                format!("{x:e}")
            };
            // Rust's shortest digits may break a tie upward; NumPy takes the nearest digits of
            // that length, ties to even, which exact rounding gives.
            let fraction = split_exponent(&shortest).0.len() - 1;
            Some(format!("{x:.fraction$e}"))
                .filter(reads_back)
                .unwrap_or(shortest)
        }
        // Rust's shortest printing knows only f32 and f64: try ever more digits.
        FloatKind::Half | FloatKind::Brain => (0..17)
            .map(|d| format!("{x:.d$e}"))
            .find(reads_back)
            .unwrap_or_else(|| format!("{x:e}")),
    };
    split_exponent(&s)
}

/// The sign printed before `x`.
fn sign(x: f64, plus: bool) -> &'static str {
    if x.is_sign_negative() {
        "-"
    } else if plus {
        "+"
    } else {
        ""
    }
}

/// The integer part (with its sign) and fraction digits of finite `x` written out, with at
/// most [`MAX_FRACTION`] fraction digits.
fn positional(x: f64, kind: FloatKind, plus: bool) -> (String, String) {
    let ax = x.abs();
    let (digits, exp) = shortest(ax, kind);
    let fraction_len = (digits.len() as i32 - 1 - exp).max(0) as usize;
    let (int, frac) = if fraction_len > MAX_FRACTION {
        // Too long: the value rounded to the last digit kept.
        let s = format!("{ax:.MAX_FRACTION$}");
        let (i, f) = s.split_once('.').unwrap_or((&s, ""));
        (i.to_string(), f.trim_end_matches('0').to_string())
    } else if exp >= 0 {
        let e = exp as usize;
        if digits.len() > e + 1 {
            (digits[..=e].to_string(), digits[e + 1..].to_string())
        } else {
            (format!("{digits:0<width$}", width = e + 1), String::new())
        }
    } else {
        let zeros = "0".repeat((-exp - 1) as usize);
        ("0".to_string(), format!("{zeros}{digits}"))
    };
    (format!("{}{int}", sign(x, plus)), frac)
}

/// The leading digit (with its sign), fraction digits and exponent of finite `x` in
/// scientific notation, with at most [`MAX_FRACTION`] fraction digits and at least
/// `min_fraction`: digits past the shortest ones are the value's own (`1.4e-45` for the
/// float32 that reads back from `1e-45`), as NumPy's Dragon4 prints them.
fn scientific(x: f64, kind: FloatKind, plus: bool, min_fraction: usize) -> (String, String, i32) {
    let ax = x.abs();
    let (mut digits, mut exp) = shortest(ax, kind);
    if digits.len() > MAX_FRACTION + 1 {
        (digits, exp) = split_exponent(&format!("{ax:.MAX_FRACTION$e}"));
        let kept = digits.trim_end_matches('0').len().max(1);
        digits.truncate(kept);
    }
    if digits.len() < min_fraction + 1 {
        (digits, exp) = split_exponent(&format!("{ax:.min_fraction$e}"));
    }
    let sign = sign(x, plus);
    (
        format!("{sign}{}", &digits[..1]),
        digits[1..].to_string(),
        exp,
    )
}

/// One float format for a whole array (NumPy's `FloatingFormat` in its `maxprec` mode).
struct FloatFormat {
    kind: FloatKind,
    /// Print a `+` before non-negative values (the imaginary parts of complex numbers).
    plus: bool,
    /// `(fraction digits, exponent digits)` in scientific notation; `None` writes numbers out.
    scientific: Option<(usize, usize)>,
    /// The width of the integer part.
    pad_left: usize,
    /// The width of the fraction (in scientific notation: fraction and exponent).
    pad_right: usize,
}

impl FloatFormat {
    fn new(values: &[f64], kind: FloatKind, plus: bool) -> FloatFormat {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let magnitudes = finite.iter().map(|v| v.abs()).filter(|&v| v != 0.0);
        let (min, max) = magnitudes.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        let use_scientific = max > 0.0
            && (max >= kind.scientific_from()
                || min < kind.round(1e-4)
                || kind.round(max / min) > 1000.0);
        let mut format = FloatFormat {
            kind,
            plus,
            scientific: None,
            pad_left: 0,
            pad_right: 0,
        };
        if finite.is_empty() {
            // Only NaN and infinities: widths come from them below.
        } else if use_scientific {
            let parts: Vec<_> = finite
                .iter()
                .map(|&v| scientific(v, kind, plus, 0))
                .collect();
            let fraction = parts.iter().map(|p| p.1.len()).max().unwrap_or(0);
            let exp_digits = parts
                .iter()
                .map(|p| p.2.unsigned_abs().to_string().len())
                .max()
                .unwrap_or(0)
                .max(2);
            format.scientific = Some((fraction, exp_digits));
            format.pad_left = parts.iter().map(|p| p.0.len()).max().unwrap_or(0);
            // 'e' and the exponent's sign, then its digits.
            format.pad_right = fraction + 2 + exp_digits;
        } else {
            let parts: Vec<_> = finite.iter().map(|&v| positional(v, kind, plus)).collect();
            format.pad_left = parts.iter().map(|p| p.0.len()).max().unwrap_or(0);
            format.pad_right = parts.iter().map(|p| p.1.len()).max().unwrap_or(0);
        }
        if finite.len() != values.len() {
            // Room for "nan" and "-inf" right-aligned with the numbers' points.
            let neg_inf = plus || values.contains(&f64::NEG_INFINITY);
            let width = 3 + usize::from(neg_inf);
            format.pad_left = format
                .pad_left
                .max(width.saturating_sub(format.pad_right + 1));
        }
        format
    }

    fn format(&self, x: f64) -> String {
        if !x.is_finite() {
            let word = if x.is_nan() {
                format!("{}nan", if self.plus { "+" } else { "" })
            } else {
                format!("{}inf", sign(x, self.plus))
            };
            let width = self.pad_left + self.pad_right + 1;
            return format!("{word:>width$}");
        }
        let left = self.pad_left;
        match self.scientific {
            Some((fraction, exp_digits)) => {
                let (int, frac, exp) = scientific(x, self.kind, self.plus, fraction);
                let exp_sign = if exp < 0 { '-' } else { '+' };
                format!(
                    "{int:>left$}.{frac}e{exp_sign}{:0exp_digits$}",
                    exp.unsigned_abs()
                )
            }
            None => {
                let (int, frac) = positional(x, self.kind, self.plus);
                let right = self.pad_right;
                format!("{int:>left$}.{frac:<right$}")
            }
        }
    }
}

/// The printed form of each value (all of one type), aligned as NumPy aligns them.
fn words(values: &[Canon], dtype: DType, zero_dim: bool) -> Vec<String> {
    match dtype.category() {
        Category::Bool => values
            .iter()
            .map(|v| match (v.as_bool(), zero_dim) {
                (true, true) => "true".to_string(),
                // Pads `true` to the width of `false`.
                (true, false) => " true".to_string(),
                (false, _) => "false".to_string(),
            })
            .collect(),
        Category::Signed | Category::Unsigned => {
            let strings: Vec<String> = values.iter().map(|v| v.as_i128().to_string()).collect();
            let width = strings.iter().map(String::len).max().unwrap_or(0);
            strings.iter().map(|s| format!("{s:>width$}")).collect()
        }
        Category::Float => {
            let floats: Vec<f64> = values.iter().map(|v| v.as_f64()).collect();
            let format = FloatFormat::new(&floats, FloatKind::of(dtype), false);
            floats.iter().map(|&v| format.format(v)).collect()
        }
        Category::Complex => {
            let parts = |v: &Canon| match *v {
                Canon::Complex(re, im) => (re, im),
                other => (other.as_f64(), 0.0),
            };
            let re: Vec<f64> = values.iter().map(|v| parts(v).0).collect();
            let im: Vec<f64> = values.iter().map(|v| parts(v).1).collect();
            let kind = FloatKind::of(dtype);
            let (re_format, im_format) = (
                FloatFormat::new(&re, kind, false),
                FloatFormat::new(&im, kind, true),
            );
            re.iter()
                .zip(&im)
                .map(|(&r, &i)| {
                    let imag = im_format.format(i);
                    // The `j` goes before the padding of the imaginary part.
                    let end = imag.trim_end().len();
                    format!("{}{}j{}", re_format.format(r), &imag[..end], &imag[end..])
                })
                .collect()
        }
    }
}

/// The printed elements in a grid: `shape` counts the items shown along each axis, `cut`
/// says which axes hide their middle (a `...` after the first [`EDGE`] items).
struct Grid<'a> {
    words: &'a [String],
    shape: &'a [usize],
    cut: &'a [bool],
}

impl Grid<'_> {
    /// The nested lists from `axis` down, for the items from `start` (in `words`), as
    /// NumPy's `_formatArray` lays them out: `indent` begins each continuation line, and
    /// lines stay within `width`.
    fn block(&self, axis: usize, start: usize, indent: &str, width: usize) -> String {
        if axis == self.shape.len() {
            return self.words[start].clone();
        }
        let len = self.shape[axis];
        let step: usize = self.shape[axis + 1..].iter().product();
        let cut = self.cut[axis].then_some(EDGE);
        let mut s = String::new();
        if axis + 1 == self.shape.len() {
            // The room left before the `,` or `]` that follows an element.
            let room = width.saturating_sub(1);
            let mut line = indent.to_string();
            for i in 0..len {
                if cut == Some(i) {
                    extend_line(&mut s, &mut line, "...", room, indent);
                    line.push_str(", ");
                }
                extend_line(&mut s, &mut line, &self.words[start + i], room, indent);
                if i + 1 < len {
                    line.push_str(", ");
                }
            }
            s.push_str(&line);
        } else {
            let inner_indent = format!("{indent} ");
            let separator = format!(",{}", "\n".repeat(self.shape.len() - axis - 1));
            for i in 0..len {
                if cut == Some(i) {
                    s.push_str(indent);
                    s.push_str("...");
                    s.push_str(&separator);
                }
                s.push_str(indent);
                s.push_str(&self.block(axis + 1, start + i * step, &inner_indent, width - 1));
                if i + 1 < len {
                    s.push_str(&separator);
                }
            }
        }
        format!("[{}]", &s[indent.len()..])
    }
}

/// Appends `word` to `line`, first moving to a new line when it would pass `width` (unless
/// the line holds nothing yet).
fn extend_line(s: &mut String, line: &mut String, word: &str, width: usize, indent: &str) {
    if line.len() + word.len() > width && line.len() > indent.len() {
        s.push_str(line.trim_end());
        s.push('\n');
        *line = indent.to_string();
    }
    line.push_str(word);
}

/// A shape as Python writes a tuple: `(3,)`, `(0, 3)`.
fn tuple(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => {
            let items: Vec<String> = shape.iter().map(usize::to_string).collect();
            format!("({})", items.join(", "))
        }
    }
}

impl Array {
    /// The NumPy-style text of the array, or the error that keeps it from being computed.
    fn repr(&self) -> std::result::Result<String, crate::Error> {
        if let Some(err) = self.error() {
            return Err(err);
        }
        let data = self.evaluated()?;
        crate::scheduler::synchronize(data)?;
        let (shape, dtype, size) = (self.shape(), self.dtype(), self.size());
        let summarise = size > THRESHOLD;
        let cut: Vec<bool> = shape.iter().map(|&n| summarise && n > 2 * EDGE).collect();
        let shown: Vec<usize> = shape
            .iter()
            .zip(&cut)
            .map(|(&n, &c)| if c { 2 * EDGE } else { n })
            .collect();
        let body = if size == 0 {
            "[]".to_string()
        } else {
            // Only the elements shown are read (and decide the format), as in NumPy.
            let values = shown_values(data, &shown, &cut)?;
            let words = words(&values, dtype, shape.is_empty());
            let grid = Grid {
                words: &words,
                shape: &shown,
                cut: &cut,
            };
            // Continuation lines start under the first element: past "array(" and "[".
            let indent = " ".repeat("array([".len());
            grid.block(0, 0, &indent, LINE_WIDTH - ")".len())
        };
        let mut extras = Vec::new();
        if (size == 0 && shape != [0]) || summarise {
            extras.push(format!("shape={}", tuple(shape)));
        }
        if !matches!(dtype, DType::F64 | DType::I64 | DType::Bool) || size == 0 {
            extras.push(format!("dtype={dtype}"));
        }
        if extras.is_empty() {
            return Ok(format!("array({body})"));
        }
        let head = format!("array({body},");
        let tail = format!("{})", extras.join(", "));
        let last_line = head.len() - head.rfind('\n').map_or(0, |i| i + 1);
        let spacer = if last_line + tail.len() + 1 > LINE_WIDTH {
            "\n      "
        } else {
            " "
        };
        Ok(format!("{head}{spacer}{tail}"))
    }
}

/// The elements at the shown indices (the first and last [`EDGE`] of each cut axis), in
/// row-major order of the shown grid.
fn shown_values(
    data: &super::ArrayData,
    shown: &[usize],
    cut: &[bool],
) -> crate::Result<Vec<Canon>> {
    let layout = &data.layout;
    let index_of = |axis: usize, i: usize| {
        if cut[axis] && i >= EDGE {
            layout.shape[axis] - 2 * EDGE + i
        } else {
            i
        }
    };
    let count: usize = shown.iter().product();
    let mut positions = Vec::with_capacity(count);
    let mut index = vec![0usize; shown.len()];
    for _ in 0..count {
        let full: Vec<usize> = index
            .iter()
            .enumerate()
            .map(|(axis, &i)| index_of(axis, i))
            .collect();
        positions.push(layout.element(&full));
        for axis in (0..shown.len()).rev() {
            index[axis] += 1;
            if index[axis] < shown[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    Ok(crate::with_host!(data.buffer.host()?, src, _T => {
        positions.iter().map(|&p| Element::to_canon(src[p])).collect()
    }))
}

impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.repr() {
            Ok(s) => f.write_str(&s),
            Err(err) => write!(f, "array(<error: {err}>)"),
        }
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
