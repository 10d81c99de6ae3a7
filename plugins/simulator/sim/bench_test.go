package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/infrakit/infrakit/sdk/instance"
)

// cpuTime is this process's user+system CPU time. The benchmarks report it
// per operation beside wall time because on a shared machine wall time
// mostly measures the neighbours; CPU time measures us.
func cpuTime(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

const benchInstances = 10_000

var benchSpec = instance.Spec{
	Properties: json.RawMessage(`{"note":"custom field for miners"}`),
	Tags: map[string]string{
		"infrakit.stack": "mystack", "infrakit.group": "miners",
		"infrakit.config.hash": "0123456789abcdef", "project": "e2e",
	},
	Init: "curl -sSL https://get.docker.com | sh\ndocker run -d -p 80:80 stuff/miner",
}

// provisionN provisions n instances with the given parallelism (the CLI's
// -parallelism defaults to 10).
func provisionN(tb testing.TB, p *Instances, n, parallelism int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range parallelism {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := p.Provision(context.Background(), benchSpec); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkProvision10k provisions 10,000 instances into one empty directory
// with 10 parallel callers per iteration and reports instances per second.
func BenchmarkProvision10k(b *testing.B) {
	var total, cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		s := newSim(b, Config{})
		p := s.Instances("compute")
		b.StartTimer()
		start, cpu0 := time.Now(), cpuTime(b)
		provisionN(b, p, benchInstances, 10)
		total += time.Since(start)
		cpu += cpuTime(b) - cpu0
	}
	b.ReportMetric(float64(benchInstances*b.N)/total.Seconds(), "instances/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(benchInstances*b.N), "cpu-µs/instance")
}

// BenchmarkProvision is the cost of one Provision with parallel callers.
func BenchmarkProvision(b *testing.B) {
	p := newSim(b, Config{}).Instances("compute")
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Provision(context.Background(), benchSpec); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkDescribeInstances10k lists a directory of 10,000 instances,
// filtering on a tag every instance carries.
func BenchmarkDescribeInstances10k(b *testing.B) {
	p := newSim(b, Config{}).Instances("compute")
	provisionN(b, p, benchInstances, 10)
	tags := map[string]string{"infrakit.group": "miners"}
	cpu0 := cpuTime(b)
	defer func() { b.ReportMetric(float64((cpuTime(b)-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op") }()
	for b.Loop() {
		ds, err := p.DescribeInstances(context.Background(), tags, false)
		if err != nil {
			b.Fatal(err)
		}
		if len(ds) != benchInstances {
			b.Fatalf("described %d", len(ds))
		}
	}
}

// BenchmarkDescribeInstances10kCold is DescribeInstances of 10,000 instances
// by a freshly started provider (as the CLI starts one per command): with
// no listing index every file is read and decoded; with the index the
// first listing left, each is stat'ed.
func BenchmarkDescribeInstances10kCold(b *testing.B) {
	dir := b.TempDir()
	provisionN(b, newSim(b, Config{Dir: dir}).Instances("compute"), benchInstances, 10)
	index := filepath.Join(dir, "instances", "compute", ".index")
	for _, withIndex := range []bool{false, true} {
		b.Run(map[bool]string{false: "no-index", true: "index"}[withIndex], func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				if !withIndex {
					if err := os.Remove(index); err != nil && !errors.Is(err, fs.ErrNotExist) {
						b.Fatal(err)
					}
				}
				p := newSim(b, Config{Dir: dir}).Instances("compute")
				b.StartTimer()
				cpu0 := cpuTime(b)
				ds, err := p.DescribeInstances(context.Background(), nil, false)
				cpu += cpuTime(b) - cpu0
				if err != nil || len(ds) != benchInstances {
					b.Fatalf("described %d: %v", len(ds), err)
				}
				if _, err := os.Stat(index); err != nil {
					b.Fatalf("no listing index after a cold listing: %v", err)
				}
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}
