//! Results: one per case, printed as a table and written as JSON (the peers' scripts write
//! the same objects, so `bench/compare.py` can set them side by side).

use serde_json::{Value, json};

use crate::case::{Case, Skip};

/// What running one case gave.
pub struct Outcome {
    /// The case's name.
    pub name: &'static str,
    /// `cpu` or `gpu`.
    pub device: &'static str,
    /// The shapes, as written in tables.
    pub shape: &'static str,
    /// The element type.
    pub dtype: &'static str,
    /// The figure's unit label.
    pub unit: &'static str,
    /// The median time and the figure, or why there are none.
    pub result: Result<Measured, Skip>,
}

/// A timed case.
pub struct Measured {
    /// Median seconds of one run.
    pub median_s: f64,
    /// The figure in the case's unit.
    pub figure: f64,
    /// How many timed samples.
    pub runs: usize,
    /// Runs queued back to back in each sample (see `BATCH_S` in main.rs).
    pub batch: usize,
    /// The fastest sample's seconds per run.
    pub min_s: f64,
}

impl Outcome {
    /// The outcome of `case`.
    pub fn new(case: &Case, result: Result<Measured, Skip>) -> Outcome {
        Outcome {
            name: case.name,
            device: case.target.name(),
            shape: case.shape,
            dtype: case.dtype,
            unit: case.unit.label(),
            result,
        }
    }

    /// "ok", or "unavailable: needs ...", or "error: ...".
    pub fn status(&self) -> String {
        match &self.result {
            Ok(_) => "ok".into(),
            Err(Skip::Unavailable(why)) => format!("unavailable: {why}"),
            Err(Skip::Failed(why)) => format!("error: {why}"),
        }
    }

    /// The JSON object: name, device, shape, dtype, median_s, figure, unit (null figures when
    /// the case did not run), plus runner, runs, batch, min_s and status.
    pub fn to_json(&self) -> Value {
        let (median, figure, runs, batch, min) = match &self.result {
            Ok(m) => (
                json!(m.median_s),
                json!(m.figure),
                json!(m.runs),
                json!(m.batch),
                json!(m.min_s),
            ),
            Err(_) => (Value::Null, Value::Null, json!(0), json!(0), Value::Null),
        };
        json!({
            "name": self.name,
            "device": self.device,
            "shape": self.shape,
            "dtype": self.dtype,
            "median_s": median,
            "figure": figure,
            "unit": self.unit,
            "runner": "nuvec",
            "runs": runs,
            "batch": batch,
            "min_s": min,
            "status": self.status(),
        })
    }
}

/// A figure with about four significant digits.
pub fn format_figure(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// A time in the most readable unit.
pub fn format_time(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}

/// The header of the human-readable table.
pub fn header() -> String {
    format!(
        "{:<20} {:<6} {:>12} {:>10}  {:<8} status",
        "case", "dtype", "median", "figure", "unit"
    )
}

/// One row of the human-readable table.
pub fn row(o: &Outcome) -> String {
    let (median, figure) = match &o.result {
        Ok(m) => (format_time(m.median_s), format_figure(m.figure)),
        Err(_) => ("-".into(), "-".into()),
    };
    format!(
        "{:<20} {:<6} {:>12} {:>10}  {:<8} {}",
        o.name,
        o.dtype,
        median,
        figure,
        o.unit,
        o.status()
    )
}
