// Package bench measures infrakit end to end through the real binaries:
// `infrakit apply` and a no-op `infrakit plan` over thousands of simulator
// instances, with wall time and peak RSS. Its tests run only with
// INFRAKIT_BENCH=1 (`make bench`), so `make test` skips them; they report
// figures against the targets and never fail on timing, because the machine
// they run on is shared and noisy.
//
// The package has no non-test code; this file only documents it.
package bench
