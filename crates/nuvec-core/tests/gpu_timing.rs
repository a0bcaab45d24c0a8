//! `synchronize` and `cuda::EventTimer`: errors where they cannot work, and on a GPU, a
//! timed run that covers the work. The GPU parts skip themselves, saying so, without a
//! CUDA device.

use nuvec_core::cuda::EventTimer;
use nuvec_core::*;

fn gpu() -> Stream {
    Stream::default_for(Device::gpu(0))
}

#[test]
fn cpu_streams_synchronize_and_have_no_events() {
    assert!(synchronize(Stream::default_for(Device::cpu())).is_ok());
    let err = EventTimer::new(Stream::default_for(Device::cpu())).unwrap_err();
    assert!(err.to_string().contains("EventTimer"), "{err}");
}

#[test]
fn missing_devices_are_errors() {
    // A device index no machine has: an error, never a panic.
    let far = Stream::default_for(Device::gpu(4096));
    assert!(synchronize(far).is_err());
    assert!(EventTimer::new(far).is_err());
}

#[test]
fn events_time_the_work_on_a_gpu() {
    let mut timer = match EventTimer::new(gpu()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("skipped: no CUDA device ({e})");
            // Without a device, waiting on its stream is an error too.
            assert!(synchronize(gpu()).is_err());
            return;
        }
    };
    assert!(timer.stop().is_err(), "stop before start");
    let n = 1 << 24;
    let x = with_stream(gpu(), || {
        Array::from_vec(vec![1.5f32; n], &[n]).and_then(|a| multiply(&a, 2.0))
    })
    .unwrap();
    eval(std::slice::from_ref(&x)).unwrap();
    timer.start().unwrap();
    let y = with_stream(gpu(), || {
        let mut y = x.clone();
        for _ in 0..20 {
            y = add(&y, 1.0)?;
        }
        Ok::<_, Error>(y)
    })
    .unwrap();
    eval(std::slice::from_ref(&y)).unwrap();
    let busy = timer.stop().unwrap();
    synchronize(gpu()).unwrap();
    timer.start().unwrap();
    let idle = timer.stop().unwrap();
    assert!(busy > 0.0 && busy.is_finite(), "{busy}");
    assert!(idle >= 0.0 && idle < busy, "idle {idle} vs busy {busy}");
    let v = y.to_vec::<f32>().unwrap();
    assert_eq!((v[0], v[n - 1]), (23.0, 23.0));
}
