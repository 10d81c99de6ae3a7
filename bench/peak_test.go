package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// peaks are the largest resident sets seen during one infrakit run.
type peaks struct {
	infrakit int64 // infrakit itself
	provider int64 // the largest of the providers it started
}

// timeSampled is timeInfrakit that also follows the peak RSS (VmHWM) of
// infrakit and of each provider it starts, every 50 ms. wait4's maxrss is
// the largest of infrakit and every provider it waited for, exact but
// mixed; so when the providers' sampled peaks stay below it, it is
// infrakit's, and otherwise infrakit's is its last sample (which may miss
// growth in its last 50 ms).
func timeSampled(t *testing.T, bin, dir string, wantCode int, args ...string) (measurement, peaks) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen peaks
	)
	started := make(chan int, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var pid int
		select {
		case pid = <-started:
		case <-stop:
			return
		}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		var kids []int
		for i := 0; ; i++ {
			if i%10 == 0 { // new providers start rarely; /proc is scanned every 0.5 s
				kids, _ = childrenOf(pid)
			}
			self := hwmOf(pid)
			var provider int64
			for _, k := range kids {
				provider = max(provider, hwmOf(k))
			}
			mu.Lock()
			seen.infrakit, seen.provider = max(seen.infrakit, self), max(seen.provider, provider)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	finish := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer finish() // also when runInfrakit fails the test
	m := runInfrakit(t, bin, dir, wantCode, func(pid int) { started <- pid }, args...)
	finish()
	mu.Lock()
	defer mu.Unlock()
	if seen.provider < m.maxRSS {
		seen.infrakit = m.maxRSS
	}
	return m, seen
}

// hwmOf is the peak resident set (VmHWM) of pid in bytes, 0 once it is
// gone.
func hwmOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
