/* A hand-written FMA loop, independent of rosetta/runner/ceiling.c, to check the measured
 * ceiling against: the lead runs both on the same quiet machine (benchmarks/fma_c/README.md);
 * the ceiling should come within 10% of this program's total.
 *
 * One OpenMP thread per core (OMP_PLACES=cores OMP_PROC_BIND=close), each running ACC
 * independent fused multiply-adds per iteration on the widest vectors the compiler targets
 * (-march=native: AVX-512, else AVX2 + FMA, else SSE mul + add), for SECONDS of wall time per
 * repetition; the best of REPS repetitions is printed, total and per thread, in GFLOP/s.
 *
 *   gcc -O3 -march=native -fopenmp -o /tmp/fma_c benchmarks/fma_c/fma.c
 *   OMP_PLACES=cores OMP_PROC_BIND=close /tmp/fma_c [SECONDS] [REPS]
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <immintrin.h>

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define ACC 24
#define SET1(x) _mm512_set1_ps(x)
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define ISA "avx512f"
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define ACC 10
#define SET1(x) _mm256_set1_ps(x)
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define ISA "avx2+fma"
#else
typedef __m128 vec;
#define LANES 4
#define ACC 8
#define SET1(x) _mm_set1_ps(x)
#define FMA(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)
#define ISA "sse (mul + add)"
#endif

#define CHUNK 100000 /* iterations between two clock reads */

static float burn(double seconds, long *iterations) {
    vec acc[ACC];
    const vec x = SET1(0.9999f), y = SET1(0.0001f);
    for (int i = 0; i < ACC; i++) acc[i] = SET1((float)i);
    long n = 0;
    double end = omp_get_wtime() + seconds;
    while (omp_get_wtime() < end) {
        for (int k = 0; k < CHUNK; k++) {
#pragma GCC unroll 32
            for (int i = 0; i < ACC; i++) acc[i] = FMA(acc[i], x, y);
        }
        n += CHUNK;
    }
    *iterations = n;
    float out[LANES], s = 0.0f;
    for (int i = 0; i < ACC; i++) {
        _Alignas(64) float v[LANES];
        *(vec *)v = acc[i];
        for (int l = 0; l < LANES; l++) out[l] = v[l];
        for (int l = 0; l < LANES; l++) s += out[l];
    }
    return s;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    const double flop_per_iter = 2.0 * LANES * ACC;
    int threads = omp_get_max_threads();
    double best = 0.0;
    double *per = calloc((size_t)threads, sizeof(double));
    double *best_per = calloc((size_t)threads, sizeof(double));
    float sink = 0.0f;
    for (int r = 0; r <= reps; r++) { /* r = 0 warms the cores up */
        double t0 = 0.0, t1 = 0.0;
        long total = 0;
#pragma omp parallel reduction(+ : total, sink)
        {
            long n = 0;
#pragma omp barrier
#pragma omp single
            t0 = omp_get_wtime();
            double s = omp_get_wtime();
            sink += burn(seconds, &n);
            per[omp_get_thread_num()] = n * flop_per_iter / (omp_get_wtime() - s) / 1e9;
            total += n;
#pragma omp barrier
#pragma omp single
            t1 = omp_get_wtime();
        }
        double gflops = total * flop_per_iter / (t1 - t0) / 1e9;
        if (r > 0 && gflops > best) {
            best = gflops;
            for (int t = 0; t < threads; t++) best_per[t] = per[t];
        }
    }
    printf("{\"isa\": \"%s\", \"accumulators\": %d, \"threads\": %d, \"gflops\": %.2f, "
           "\"per_thread_gflops\": [", ISA, ACC, threads, best);
    for (int t = 0; t < threads; t++) printf("%s%.2f", t ? ", " : "", best_per[t]);
    printf("], \"sink\": %g}\n", (double)sink);
    return 0;
}
