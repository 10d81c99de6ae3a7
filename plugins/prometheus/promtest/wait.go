package promtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/infrakit/infrakit/internal/testwait"
)

// Within is a bound for waits on Prometheus: target changes reach its
// scrape manager at most every 5 seconds (its discovery update throttle),
// a scrape follows within a scrape interval, and a busy machine stretches
// both.
const Within = 90 * time.Second

// callTimeout bounds each API call of a wait.
const callTimeout = 10 * time.Second

// WaitTargets waits until the Job's active targets are exactly addrs
// (host:port, as the file_sd files list them; none for no targets), each
// scraped successfully (health "up"), and returns them by address. A
// failure shows the targets seen last.
func (s *Server) WaitTargets(tb testing.TB, addrs ...string) map[string]v1.ActiveTarget {
	tb.Helper()
	want := slices.Sorted(slices.Values(addrs))
	var last []v1.ActiveTarget
	var lastErr error
	defer func() {
		if tb.Failed() {
			tb.Logf("last active targets: %s (error: %v)", describe(last), lastErr)
		}
	}()
	testwait.For(tb, Within, fmt.Sprintf("prometheus scrapes exactly %q, all up", want), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		last, lastErr = s.Targets(ctx)
		if lastErr != nil || len(last) != len(want) {
			return false
		}
		for _, t := range last {
			if !slices.Contains(want, address(t)) || t.Health != v1.HealthGood {
				return false
			}
		}
		return true
	})
	out := make(map[string]v1.ActiveTarget, len(last))
	for _, t := range last {
		out[address(t)] = t
	}
	return out
}

// address is the host:port a target is scraped at.
func address(t v1.ActiveTarget) string {
	if a := t.DiscoveredLabels[model.AddressLabel]; a != "" {
		return a
	}
	return string(t.Labels[model.InstanceLabel])
}

func describe(ts []v1.ActiveTarget) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s %s %v", address(t), t.Health, t.Labels)
		if t.LastError != "" {
			parts[i] += " (" + t.LastError + ")"
		}
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// WaitValue waits until query's value (a scalar, or a vector of one
// sample) satisfies ok, and returns it; what says what is awaited. A
// failure shows the result seen last.
func (s *Server) WaitValue(tb testing.TB, query, what string, ok func(float64) bool) float64 {
	tb.Helper()
	var got float64
	var last string
	defer func() {
		if tb.Failed() {
			tb.Logf("query %s last returned %s", query, last)
		}
	}()
	testwait.For(tb, Within, fmt.Sprintf("%s: query %s", what, query), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		v, _, _, err := s.API.Query(ctx, query, time.Time{})
		if err != nil {
			last = "error: " + err.Error()
			return false
		}
		last = v.String()
		f, one := number(v)
		if !one {
			return false
		}
		got = f
		return ok(f)
	})
	return got
}

// number is v's one value, if it has exactly one.
func number(v model.Value) (float64, bool) {
	switch r := v.(type) {
	case *model.Scalar:
		return float64(r.Value), true
	case model.Vector:
		if len(r) == 1 && r[0].Histogram == nil {
			return float64(r[0].Value), true
		}
	}
	return 0, false
}

// Labels returns a target's labels after relabeling as plain strings.
func Labels(t v1.ActiveTarget) map[string]string {
	out := make(map[string]string, len(t.Labels))
	for k, v := range t.Labels {
		out[string(k)] = string(v)
	}
	return out
}
