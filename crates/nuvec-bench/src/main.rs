//! `nuvec-bench`: runs the named cases of BENCH-CASES.md on nuvec and reports the median time
//! of "build the graph and evaluate it" with each case's figure (GB/s, GFLOP/s, µs per op).
//!
//! ```text
//! nuvec-bench [--device cpu|gpu] [--json FILE] [--repeat N] [--budget S] [--list] [--host] [CASE...]
//! ```
//!
//! Each case builds and evaluates its inputs first, runs a warm-up, checks one result against
//! a reference computed apart from nuvec, then times its runs. GPU cases run on the default
//! stream of `gpu(0)` and are timed with CUDA events; without a CUDA device they are listed
//! as unavailable (and the run succeeds).

mod case;
mod cases;
mod inputs;
mod report;
mod timer;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use nuvec_core::{Device, Stream, eval, with_stream};

use crate::case::{Case, Skip, Target};
use crate::report::{Measured, Outcome};
use crate::timer::Timer;

/// Runs nuvec's benchmark cases (BENCH-CASES.md) and reports median times and figures.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Where the cases run.
    #[arg(long, value_enum, default_value = "cpu")]
    device: Target,
    /// Also write the results to this file, as a JSON array of one object per case.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Timed runs per case (each case has its own default).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    repeat: Option<u32>,
    /// Timed runs of a case stop once they add up to this many seconds (at least one runs).
    #[arg(long, value_name = "S", default_value_t = CASE_BUDGET_S)]
    budget: f64,
    /// List the cases of the device and exit.
    #[arg(long)]
    list: bool,
    /// Run the GPU cases on the CPU backend instead, wall-clocked: tests their inputs and
    /// checks on a machine without a GPU (the figures say nothing about a GPU).
    #[arg(long)]
    host: bool,
    /// Cases to run (every case of the device when none is given).
    #[arg(value_name = "CASE")]
    cases: Vec<String>,
}

/// Prints a line on stdout; a closed pipe (`| head`) is not worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {
        let _ = writeln!(std::io::stdout(), $($arg)*);
    };
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let all = cases::all(cli.device);
    if cli.list {
        for c in &all {
            say!(
                "{:<20} {:<6} {:<8} {}",
                c.name,
                c.dtype,
                c.unit.label(),
                c.shape
            );
        }
        return ExitCode::SUCCESS;
    }
    let unknown: Vec<&String> = cli
        .cases
        .iter()
        .filter(|n| !all.iter().any(|c| c.name == n.as_str()))
        .collect();
    if !unknown.is_empty() {
        eprintln!(
            "nuvec-bench: no {} case named {} (see --list)",
            cli.device.name(),
            unknown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return ExitCode::from(2);
    }
    let chosen: Vec<&Case> = all
        .iter()
        .filter(|c| cli.cases.is_empty() || cli.cases.iter().any(|n| n == c.name))
        .collect();

    let stream = match cli.device {
        Target::Gpu if !cli.host => Stream::default_for(Device::gpu(0)),
        _ => Stream::default_for(Device::cpu()),
    };
    // Without a device, say why once; the rows then say it briefly.
    let mut timer = timer::for_stream(stream).map_err(|skip| {
        let (Skip::Unavailable(why) | Skip::Failed(why)) = skip;
        eprintln!(
            "nuvec-bench: {why}: every {} case is unavailable",
            cli.device.name()
        );
        Skip::Unavailable("no GPU (see the message above)".into())
    });

    say!("{}", report::header());
    let mut outcomes = Vec::new();
    for case in chosen {
        let runs = cli.repeat.map_or(case.runs, |n| n as usize);
        let result = match &mut timer {
            // A panic in one case (a bug on a new device) is that case's failure only.
            Ok(t) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                with_stream(stream, || {
                    measure(case, runs, cli.budget, batch_limit(stream), &mut **t)
                })
            }))
            .unwrap_or_else(|panic| Err(Skip::Failed(format!("panicked: {}", message(&panic))))),
            Err(skip) => Err(skip.clone()),
        };
        let outcome = Outcome::new(case, result);
        say!("{}", report::row(&outcome));
        outcomes.push(outcome);
        // Written after every case, so that a run stopped by a time limit keeps its results.
        if let Some(path) = &cli.json
            && let Err(e) = write_json(path, &outcomes)
        {
            eprintln!("nuvec-bench: {e}");
            return ExitCode::FAILURE;
        }
    }
    // A failed case (an error or a wrong result) fails the run; unavailable ones do not.
    if outcomes
        .iter()
        .any(|o| matches!(o.result, Err(Skip::Failed(_))))
    {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The text of a panic's payload.
fn message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

/// Writes `outcomes` to `path` as a JSON array.
fn write_json(path: &std::path::Path, outcomes: &[Outcome]) -> Result<(), String> {
    let json = serde_json::Value::Array(outcomes.iter().map(Outcome::to_json).collect());
    let text = serde_json::to_string_pretty(&json)
        .map_err(|e| format!("cannot encode the results: {e}"))?;
    std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A warm-up run slower than this is the last one (a slow case needs no more), the first
/// excepted (see `measure`).
const SLOW_WARMUP_S: f64 = 2.0;
/// Warm-up runs go on, past the case's count, until they add up to this: long enough for
/// an idle GPU to reach its working clocks (triton's `do_bench` warms up for 25 ms too).
const WARMUP_S: f64 = 0.025;
/// Timed runs stop once they add up to this by default (at least one runs);
/// bench/peers/harness.py uses the same three limits.
const CASE_BUDGET_S: f64 = 10.0;

/// On a GPU, a timed sample of a run shorter than this holds as many runs queued back to back
/// as fill it (at most [`MAX_BATCH`]) and counts their mean: a single short run would time
/// the host's launch latency more than the device's work. bench/peers/harness.py does the
/// same.
const BATCH_S: f64 = 5e-4;
/// The most runs in one timed sample.
const MAX_BATCH: usize = 32;

/// The most runs per timed sample on `stream`: batching only pays on a GPU, whose `eval`
/// returns before the work is done.
fn batch_limit(stream: Stream) -> usize {
    if stream.device.kind == nuvec_core::DeviceKind::Gpu {
        MAX_BATCH
    } else {
        1
    }
}

/// Runs in one timed sample of a run that took `single_s` alone: enough to fill [`BATCH_S`],
/// at most `limit`.
fn batch_size(single_s: f64, limit: usize) -> usize {
    if single_s <= 0.0 || !single_s.is_finite() {
        return limit.max(1);
    }
    ((BATCH_S / single_s).ceil() as usize).clamp(1, limit.max(1))
}

/// Prepares `case`, warms it up, checks one result, then times `runs` samples of building and
/// evaluating its graph (each sample up to `batch` runs back to back, see [`BATCH_S`]) and
/// returns the median time of one run. Runs on the thread's default stream.
fn measure(
    case: &Case,
    runs: usize,
    budget: f64,
    batch: usize,
    timer: &mut dyn Timer,
) -> Result<Measured, Skip> {
    let mut prepared = (case.prepare)()?;
    let mut last = Vec::new();
    // Warm-up runs are timed as the samples are. The fastest sizes the batches: the first
    // run also compiles and loads kernels (seconds, with an empty kernel cache), and an idle
    // GPU's clocks take a while to rise. So the first run neither counts towards `WARMUP_S`
    // nor, unless the case asks for a single warm-up run, ends the warm-up by being slow.
    let warmup = case.warmup.max(1);
    let (mut fastest_s, mut spent_s, mut done) = (f64::INFINITY, 0.0, 0);
    loop {
        drop(std::mem::take(&mut last));
        timer.start()?;
        last = (prepared.build)()?;
        eval(&last)?;
        let single_s = timer.stop()?;
        fastest_s = fastest_s.min(single_s);
        done += 1;
        if done > 1 {
            spent_s += single_s;
        }
        let slow = single_s > SLOW_WARMUP_S && (done > 1 || warmup == 1);
        if slow || (done >= warmup && (warmup == 1 || spent_s >= WARMUP_S)) {
            break;
        }
    }
    (prepared.check)(&last).map_err(|e| Skip::Failed(format!("wrong result: {e}")))?;
    drop(last);

    let batch = batch_size(fastest_s, batch);
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let mut outs = Vec::with_capacity(batch);
        timer.start()?;
        for _ in 0..batch {
            let out = (prepared.build)()?;
            eval(&out)?;
            outs.push(out);
        }
        times.push(timer.stop()? / batch as f64);
        // Freeing the outputs is left out of the timing, as in the peers' scripts.
        drop(outs);
        if times.iter().sum::<f64>() * batch as f64 > budget {
            break;
        }
    }
    times.sort_by(f64::total_cmp);
    let mid = times.len() / 2;
    let median_s = if times.len() % 2 == 1 {
        times[mid]
    } else {
        (times[mid - 1] + times[mid]) / 2.0
    };
    Ok(Measured {
        median_s,
        figure: case.unit.figure(prepared.work, median_s),
        runs: times.len(),
        batch,
        min_s: times[0],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entries `("name", "shape", "dtype", "unit", ...)` of the Python list `list`.
    fn python_specs<'a>(text: &'a str, list: &str) -> Vec<Vec<&'a str>> {
        let body = text
            .split(&format!("\n{list} = ["))
            .nth(1)
            .and_then(|s| s.split("\n]").next())
            .unwrap_or_else(|| panic!("harness.py has a {list} list"));
        body.split("\n    (")
            .skip(1)
            .map(|entry| entry.split('"').skip(1).step_by(2).take(4).collect())
            .collect()
    }

    /// The peers' harness lists the cases of each device with the same names, shapes, dtypes
    /// and units, in the same order, so that compare.py lines them up.
    #[test]
    fn peers_share_the_cases() {
        // Embedded when built, so the test binary runs anywhere (the GPU machine too).
        let text = include_str!("../../../bench/peers/harness.py");
        for (target, list) in [(Target::Cpu, "SPECS"), (Target::Gpu, "GPU_SPECS")] {
            let ours: Vec<Vec<&str>> = cases::all(target)
                .iter()
                .map(|c| vec![c.name, c.shape, c.dtype, c.unit.label()])
                .collect();
            assert_eq!(python_specs(text, list), ours, "{list}");
        }
    }

    /// A case runs end to end: prepared, checked, timed, with a finite positive figure.
    #[test]
    fn tiny_op_chain_measures() {
        let all = cases::all(Target::Cpu);
        let case = all
            .iter()
            .find(|c| c.name == "tiny_op_chain")
            .expect("registered");
        let mut timer = timer::WallTimer::default();
        let m = measure(case, 3, CASE_BUDGET_S, 1, &mut timer)
            .map_err(|e| format!("{e:?}"))
            .expect("runs");
        assert_eq!(m.runs, 3);
        assert!(m.median_s > 0.0 && m.figure.is_finite() && m.figure > 0.0);
    }

    /// Short GPU runs are timed several to a sample, as many as fill `BATCH_S`, and the figure
    /// stays that of one run.
    #[test]
    fn short_runs_are_timed_in_batches() {
        assert_eq!(batch_size(1e-5, MAX_BATCH), MAX_BATCH);
        assert_eq!(batch_size(1e-4, MAX_BATCH), 5);
        assert_eq!(batch_size(1e-3, MAX_BATCH), 1);
        assert_eq!(batch_size(1e-5, 1), 1);
        assert_eq!(batch_limit(Stream::default_for(Device::cpu())), 1);
        let all = cases::all(Target::Cpu);
        let case = all.iter().find(|c| c.name == "add").expect("registered");
        let mut timer = timer::WallTimer::default();
        let single = measure(case, 3, CASE_BUDGET_S, 1, &mut timer).expect("runs");
        let batched = measure(case, 3, CASE_BUDGET_S, 4, &mut timer).expect("runs");
        // Four runs per sample, divided by four: the same order of time as one run alone.
        let ratio = batched.median_s / single.median_s;
        assert!(ratio > 0.2 && ratio < 5.0, "{ratio}");
    }

    /// A wrong result is a failure, not a figure.
    #[test]
    fn wrong_results_fail() {
        fn prepare() -> Result<case::Prepared, Skip> {
            let a = inputs::array(vec![1.0f32, 2.0], &[2])?;
            Ok(case::Prepared {
                work: 1.0,
                build: Box::new(move || Ok(vec![nuvec_core::add(&a, &a)?])),
                check: Box::new(|out| {
                    let got = inputs::output_f32(out)?;
                    inputs::expect_close("out", 0, got[0], 3.0, 0.0)
                }),
            })
        }
        let case = Case::new(
            "bad",
            Target::Cpu,
            "[2]",
            "f32",
            case::Unit::GBps,
            1,
            prepare,
        );
        let mut timer = timer::WallTimer::default();
        assert!(matches!(
            measure(&case, 1, CASE_BUDGET_S, 1, &mut timer),
            Err(Skip::Failed(msg)) if msg.starts_with("wrong result")
        ));
    }

    /// GPU cases are listed; their timer exists exactly when a CUDA device answers.
    #[test]
    fn gpu_timer_needs_a_device() {
        let all = cases::all(Target::Gpu);
        assert!(all.iter().any(|c| c.name == "matmul_8192"));
        let gpu = Stream::default_for(Device::gpu(0));
        let has_device = nuvec_core::cuda::EventTimer::new(gpu).is_ok();
        match timer::for_stream(gpu) {
            Ok(_) => assert!(has_device),
            Err(Skip::Unavailable(why)) => assert!(!has_device && why.contains("no GPU")),
            Err(Skip::Failed(why)) => panic!("{why}"),
        }
        assert!(timer::for_stream(Stream::default_for(Device::cpu())).is_ok());
    }

    #[test]
    fn figures_follow_the_units() {
        assert_eq!(case::Unit::GBps.figure(2e9, 0.5), 4.0);
        assert_eq!(case::Unit::GFlops.figure(3e9, 1.0), 3.0);
        assert_eq!(case::Unit::UsPerOp.figure(1000.0, 2e-3), 2.0);
    }
}
