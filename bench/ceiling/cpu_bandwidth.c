/* The memory ceiling of the CPU `add` case: how fast this machine can read two [1024, 4096]
 * f32 arrays and write a third, with the best loop we know (AVX-512, streaming stores), on
 * one thread and on all of them. nuvec's `add` cannot beat these figures; BENCHMARKS.md
 * quotes them beside NumPy's single thread.
 *
 *   gcc -O2 -mavx512f -fopenmp bench/ceiling/cpu_bandwidth.c -o /tmp/cpu_bandwidth
 *   OMP_NUM_THREADS=1 /tmp/cpu_bandwidth; OMP_NUM_THREADS=2 /tmp/cpu_bandwidth
 *
 * Each figure is the best of 50 runs (GB/s counting each array once). */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N (1024 * 4096)
#define RUNS 50

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { READ_TWO, STREAM_WRITE, ADD_STREAMED, ADD_PLAIN, KINDS };
static const char *names[KINDS] = {"read two arrays", "streamed write", "add, streamed out",
                                   "add, plain stores"};
static const double arrays[KINDS] = {2, 1, 3, 3};

int main(void) {
  float *x = aligned_alloc(64, N * 4), *y = aligned_alloc(64, N * 4), *z = aligned_alloc(64, N * 4);
  for (long i = 0; i < N; i++) x[i] = (float)i, y[i] = 1.0f, z[i] = 0.0f;
  printf("%d thread(s)\n", omp_get_max_threads());
  for (int kind = 0; kind < KINDS; kind++) {
    double best = 1e30;
    float sink = 0;
    for (int r = 0; r < RUNS; r++) {
      double t0 = seconds();
      float acc = 0;
#pragma omp parallel reduction(+ : acc)
      {
        long threads = omp_get_num_threads(), me = omp_get_thread_num();
        long lo = N * me / threads / 16 * 16, hi = me + 1 == threads ? N : N * (me + 1) / threads / 16 * 16;
        __m512 s = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
        for (long i = lo; i < hi; i += 16) {
          __m512 v = kind == STREAM_WRITE ? one : _mm512_add_ps(_mm512_load_ps(x + i), _mm512_load_ps(y + i));
          if (kind == READ_TWO) s = _mm512_add_ps(s, v);
          else if (kind == ADD_PLAIN) _mm512_store_ps(z + i, v);
          else _mm512_stream_ps(z + i, v);
        }
        acc += _mm512_reduce_add_ps(s);
      }
      _mm_sfence();
      double t = seconds() - t0;
      if (t < best) best = t;
      sink += acc;
    }
    printf("%-18s %6.1f GB/s\n", names[kind], arrays[kind] * N * 4 / best / 1e9);
    if (sink == 1.0f) printf(" ");  /* keeps the reads */
  }
  free(x), free(y), free(z);
  return 0;
}
