//! The loss curve as a PNG: drawn by `plotters` into a pixel buffer, with its text in DejaVu
//! Sans (bundled by the `dejavu` crate, so no system font is needed), and encoded by `png`.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

/// The picture's size in pixels.
const SIZE: (u32, u32) = (960, 600);

/// Draws the loss of each step (thin) and its moving average (thick), on a log scale, to the
/// PNG file `path`.
pub fn loss_curve(path: &Path, losses: &[f32], title: &str) -> Result<(), String> {
    // Registering twice is harmless; a font that does not parse would be a bug of the crate.
    register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| "the bundled font does not parse".to_string())?;
    let (w, h) = SIZE;
    let mut pixels = vec![255u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area();
        draw(&root, losses, title).map_err(|e| format!("drawing the loss curve: {e}"))?;
        root.present()
            .map_err(|e| format!("drawing the loss curve: {e}"))?;
    }
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder
        .write_header()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    writer
        .write_image_data(&pixels)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The moving average of `xs` over `window` values (shorter at the start).
fn smoothed(xs: &[f32], window: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(xs.len());
    let mut sum = 0.0f64;
    for (i, &x) in xs.iter().enumerate() {
        sum += f64::from(x);
        if i >= window {
            sum -= f64::from(xs[i - window]);
        }
        out.push((sum / (i + 1).min(window) as f64) as f32);
    }
    out
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    losses: &[f32],
    title: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let finite: Vec<f32> = losses
        .iter()
        .copied()
        .filter(|l| l.is_finite() && *l > 0.0)
        .collect();
    let low = finite.iter().copied().fold(f32::INFINITY, f32::min);
    let high = finite.iter().copied().fold(0.0f32, f32::max);
    let (low, high) = if finite.is_empty() {
        (1e-3, 10.0)
    } else {
        (low.max(1e-6) * 0.8, high * 1.25)
    };
    let steps = losses.len().max(2);
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(0usize..steps, (low..high).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc("loss on the answer tokens (log scale)")
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .y_label_formatter(&|v| decimal(*v))
        .draw()?;
    let raw = RGBColor(160, 190, 230);
    chart
        .draw_series(LineSeries::new(
            losses
                .iter()
                .enumerate()
                .filter(|(_, l)| l.is_finite() && **l > 0.0)
                .map(|(i, &l)| (i, l)),
            raw.stroke_width(1),
        ))?
        .label("per step")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], raw.stroke_width(2)));
    let window = (losses.len() / 50).clamp(1, 100);
    if window > 1 {
        let avg = smoothed(losses, window);
        let dark = RGBColor(20, 70, 160);
        chart
            .draw_series(LineSeries::new(
                avg.iter()
                    .enumerate()
                    .filter(|(_, l)| l.is_finite() && **l > 0.0)
                    .map(|(i, &l)| (i, l)),
                dark.stroke_width(3),
            ))?
            .label(format!("mean of {window} steps"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], dark.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .draw()?;
    Ok(())
}

/// A tick label: `v` with as many decimals as its first significant digit needs (`0.001`,
/// `0.5`, `2`).
fn decimal(v: f32) -> String {
    let decimals = if v > 0.0 && v < 1.0 {
        (-v.log10()).ceil() as usize
    } else {
        0
    };
    format!("{v:.decimals$}")
}
