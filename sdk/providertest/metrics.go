package providertest

import (
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/metrics"
)

// concurrentQueries is how many Query calls the Concurrency test makes at
// once: every autoscaled group's checks may ask one source together.
const concurrentQueries = 10

func (s *suite) testMetrics(t *testing.T, typ string, c MetricsCase) {
	src := s.client.Metrics(typ)
	if c.Query == "" {
		t.Fatalf("Config.Metrics[%q].Query is empty", typ)
	}
	t.Run("Query", func(t *testing.T) {
		ctx, cancel := s.ctx(t)
		defer cancel()
		sample, err := src.Query(ctx, c.Query, time.Time{})
		if err := checkSample(sample, err, time.Time{}); err != nil {
			t.Errorf("query %q now: %v", c.Query, err)
		}
	})
	t.Run("QueryAt", func(t *testing.T) {
		// A whole second just past, which every source can evaluate at.
		at := time.Now().Truncate(time.Second)
		ctx, cancel := s.ctx(t)
		defer cancel()
		sample, err := src.Query(ctx, c.Query, at)
		if err := checkSample(sample, err, at); err != nil {
			t.Errorf("query %q at %s: %v", c.Query, at.Format(time.RFC3339), err)
		}
	})
	if c.Empty != "" {
		t.Run("Empty", func(t *testing.T) {
			ctx, cancel := s.ctx(t)
			defer cancel()
			sample, err := src.Query(ctx, c.Empty, time.Time{})
			if err := checkEmptySample(sample, err); err != nil {
				t.Errorf("query %q: %v", c.Empty, err)
			}
		})
	}
	if c.Invalid != "" {
		t.Run("Invalid", func(t *testing.T) {
			ctx, cancel := s.ctx(t)
			defer cancel()
			_, err := src.Query(ctx, c.Invalid, time.Time{})
			if err := checkRefused(err); err != nil {
				t.Errorf("invalid query %q: %v", c.Invalid, err)
			}
		})
	}
	t.Run("Concurrency", func(t *testing.T) { s.testMetricsConcurrency(t, src, c) })
}

// testMetricsConcurrency asks the same query concurrentQueries times at
// once; each must be answered.
func (s *suite) testMetricsConcurrency(t *testing.T, src metrics.Source, c MetricsCase) {
	ctx, cancel := s.ctx(t)
	defer cancel()
	errs := make([]error, concurrentQueries)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			sample, err := src.Query(ctx, c.Query, time.Time{})
			errs[i] = checkSample(sample, err, time.Time{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent query %d of %d: %v", i+1, concurrentQueries, err)
		}
	}
}
