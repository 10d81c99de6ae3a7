// Package bench measures infrakit end to end through the real binaries:
// `infrakit apply` and a no-op `infrakit plan` over thousands of simulator
// instances (up to 100,000), `infrakit watch` idle and healing on the
// walk-through stack, `group scale`, failover, Docker and real processes,
// with wall time, CPU and RSS. Its tests run only with INFRAKIT_BENCH=1
// (`make bench`), so `make test` skips them; they report figures against
// the targets and never fail on timing, because the machine they run on is
// shared and noisy.
//
// The scenarios append issue 19's figures to INFRAKIT_BENCH_RESULTS;
// bench/figures holds their catalogue and targets, and bench/benchtable
// prints the table that ends `make bench`, against bench/baseline.json.
// website/operations/performance.md says how to run and read them.
//
// The package has no non-test code; this file only documents it.
package bench
