package plugin

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
)

// Performance of the wire: how long until a freshly launched provider
// answers, and one DescribeInstances round trip. TestBenchReport prints the
// figures `make bench` shows.

func benchConfig(mtls bool) ClientConfig {
	return ClientConfig{Name: "test", Path: testBinary, DisableMTLS: !mtls}
}

// startToFirstCall launches a provider, makes one call and kills it; it
// returns the time until the call's answer.
func startToFirstCall(tb testing.TB, cfg ClientConfig) time.Duration {
	ctx := context.Background()
	begin := time.Now()
	c, err := Start(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Kill()
	if _, err := c.Metadata(ctx); err != nil {
		tb.Fatal(err)
	}
	return time.Since(begin)
}

func BenchmarkStart(b *testing.B) {
	for _, mtls := range []bool{false, true} {
		b.Run(fmt.Sprintf("mtls=%v", mtls), func(b *testing.B) {
			cfg := benchConfig(mtls)
			var total time.Duration
			for range b.N {
				total += startToFirstCall(b, cfg)
			}
			// Kill is outside what is measured; report the start itself.
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/start")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// describeClient starts a provider holding n instances, tagged as a group's
// members are (internal/tags.Member: stack, group, config hash).
func describeClient(tb testing.TB, mtls bool, n int) instance.Plugin {
	c, _ := startTest(tb, "", func(cfg *ClientConfig) { cfg.DisableMTLS = !mtls })
	p := c.Instance("compute")
	for i := range n {
		_, err := p.Provision(context.Background(), instance.Spec{
			Tags:       map[string]string{"infrakit.stack": "mystack", "infrakit.group": "bench", "infrakit.config.hash": "abc123"},
			Properties: []byte(fmt.Sprintf(`{"note":"instance %d"}`, i)),
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return p
}

// benchTags is the selector the group controller describes its members
// with on every pass (internal/tags.GroupSelector), without properties.
var benchTags = map[string]string{"infrakit.stack": "mystack", "infrakit.group": "bench"}

func BenchmarkDescribeRoundTrip(b *testing.B) {
	for _, mtls := range []bool{false, true} {
		b.Run(fmt.Sprintf("mtls=%v", mtls), func(b *testing.B) {
			p := describeClient(b, mtls, 10)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if _, err := p.DescribeInstances(ctx, benchTags, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBenchReport prints start and round-trip figures against their targets.
// It runs only with INFRAKIT_BENCH=1:
//
//	INFRAKIT_BENCH=1 go test -count=1 -run '^TestBenchReport$' -v ./sdk/plugin
func TestBenchReport(t *testing.T) {
	if os.Getenv("INFRAKIT_BENCH") != "1" {
		t.Skip("set INFRAKIT_BENCH=1 to measure")
	}
	const starts, calls = 20, 1000
	// The figures mean little on a busy machine: say how busy it is.
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("load average %s on %d CPUs\n", strings.Join(strings.Fields(string(load))[:3], " "), runtime.NumCPU())
	}
	report := func(what string, got, target time.Duration, detail string) {
		verdict := "ok"
		if got > target {
			verdict = "OVER TARGET"
		}
		fmt.Printf("%-46s %10s  (target %s, %s) %s\n", what, got.Round(time.Microsecond), target, detail, verdict)
	}
	for _, tc := range []struct {
		mtls   bool
		target time.Duration
	}{{false, 25 * time.Millisecond}, {true, 120 * time.Millisecond}} {
		startToFirstCall(t, benchConfig(tc.mtls)) // warm the page cache
		var ds []time.Duration
		for range starts {
			ds = append(ds, startToFirstCall(t, benchConfig(tc.mtls)))
		}
		slices.Sort(ds)
		report(fmt.Sprintf("start to first call, mTLS=%v, p50", tc.mtls), ds[len(ds)/2], tc.target, fmt.Sprintf("%d starts, min %s", starts, ds[0].Round(time.Microsecond)))
	}
	// Not part of the start above (the bench pins no checksum): a host that
	// pins one (internal/pluginhost always does) hashes the binary once per
	// launch, before executing it.
	var hs []time.Duration
	for range 5 {
		begin := time.Now()
		if _, err := fileSHA256(testBinary); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, time.Since(begin))
	}
	slices.Sort(hs)
	if fi, err := os.Stat(testBinary); err == nil {
		fmt.Printf("%-46s %10s  (no target; %.1f MB binary, added to each launch by a host that pins a checksum)\n",
			"sha256 check of the binary, p50", hs[len(hs)/2].Round(time.Microsecond), float64(fi.Size())/1e6)
	}
	for _, mtls := range []bool{false, true} {
		p := describeClient(t, mtls, 10)
		ctx := context.Background()
		for range 100 { // warm up the connection
			if _, err := p.DescribeInstances(ctx, benchTags, false); err != nil {
				t.Fatal(err)
			}
		}
		ds := make([]time.Duration, calls)
		for i := range ds {
			begin := time.Now()
			if _, err := p.DescribeInstances(ctx, benchTags, false); err != nil {
				t.Fatal(err)
			}
			ds[i] = time.Since(begin)
		}
		slices.Sort(ds)
		detail := fmt.Sprintf("%d calls, 10 instances, p99 %s", calls, ds[calls*99/100].Round(time.Microsecond))
		report(fmt.Sprintf("DescribeInstances round trip, mTLS=%v, p50", mtls), ds[calls/2], 150*time.Microsecond, detail)
	}
}
