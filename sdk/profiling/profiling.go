// Package profiling writes Go pprof profiles of an infrakit process when
// the environment asks for them (INFRAKIT_CPUPROFILE, INFRAKIT_MEMPROFILE),
// so an operator or a benchmark can see where a slow apply or a busy watch
// spends its time without rebuilding the binary. It is in sdk/, beside
// atomicfile and filelock, because both the infrakit binary and the
// providers' side of sdk/plugin use it, and sdk/ imports nothing from
// internal/.
package profiling

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// Environment variables read by Start.
const (
	EnvCPU = "INFRAKIT_CPUPROFILE"
	EnvMem = "INFRAKIT_MEMPROFILE"
)

// Start begins a CPU profile to the file named by getenv(EnvCPU), if set,
// and returns the function that ends it and writes the heap profile
// (allocations since start, and in use) to getenv(EnvMem), if set. The
// stop function must be called once, when the process is done.
func Start(getenv func(string) string) (stop func() error, err error) {
	cpuPath, memPath := getenv(EnvCPU), getenv(EnvMem)
	var cpu *os.File
	if cpuPath != "" {
		cpu, err = os.Create(cpuPath)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvCPU, err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			_ = cpu.Close()
			return nil, fmt.Errorf("%s: %w", EnvCPU, err)
		}
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", EnvCPU, err))
			}
		}
		if memPath != "" {
			errs = append(errs, writeHeap(memPath))
		}
		return errors.Join(errs...)
	}, nil
}

// writeHeap writes the heap profile to path, after a collection so that
// its in-use figures are current.
func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s: %w", EnvMem, err)
	}
	runtime.GC()
	werr := pprof.Lookup("allocs").WriteTo(f, 0)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("%s: %w", EnvMem, err)
	}
	return nil
}
