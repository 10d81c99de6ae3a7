package watch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/infrakit/infrakit/internal/autoscale"
	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
	stateetcd "github.com/infrakit/infrakit/internal/state/etcd"
	"github.com/infrakit/infrakit/sdk/provider"
)

// evaluate is one evaluation of a group's autoscaler: it queries the
// checks, decides, and writes the new size when the decision changes it.
// It runs outside the loop and touches nothing of it.
func (s *service) evaluate(ctx context.Context, t *term, spec groupSpec, in autoscale.Input) scaleResult {
	a := spec.cfg.Autoscale
	in.Readings = s.readChecks(ctx, a)
	if ctx.Err() != nil {
		return scaleResult{}
	}
	in.Now = time.Now()
	d := autoscale.Decide(in)
	r := scaleResult{decision: d, decided: true}
	if !d.Changes() {
		return r
	}
	doc, err := s.writeSize(ctx, t, spec, in.Current, d.Desired)
	switch {
	case errors.Is(err, errStale):
		// Someone else wrote the state since: decide again on the new one.
		return scaleResult{}
	case err != nil:
		return scaleResult{err: fmt.Errorf("setting the size to %d: %w", d.Desired, err)}
	}
	r.doc = doc
	return r
}

// readChecks queries each check of a (one reading each, in order). A
// provider that fails, or serves no metrics, gives a reading with an error:
// the decision keeps the size.
func (s *service) readChecks(ctx context.Context, a *config.Autoscale) []autoscale.Reading {
	out := make([]autoscale.Reading, len(a.Checks))
	timeout := min(s.opts.CallTimeout, max(evaluationInterval(a), time.Second))
	for i, c := range a.Checks {
		out[i] = autoscale.Reading{Check: c.Name, TargetPerInstance: c.TargetPerInstance}
		v, empty, err := s.query(ctx, c, timeout)
		switch {
		case err != nil:
			out[i].Error = err.Error()
		case empty || math.IsNaN(v) || math.IsInf(v, 0):
			out[i].Empty = true
		default:
			out[i].Value = v
		}
	}
	return out
}

// query asks check c's metrics provider for its value.
func (s *service) query(ctx context.Context, c config.Check, timeout time.Duration) (float64, bool, error) {
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, err := s.prov.client(qctx, c.Source)
	if err != nil {
		return 0, false, err
	}
	md, err := client.Metadata(qctx)
	if err != nil {
		s.prov.failed(ctx, c.Source, "Metadata", err)
		return 0, false, err
	}
	types := md.Types(provider.KindMetrics)
	if len(types) == 0 {
		return 0, false, fmt.Errorf("provider %q serves no metrics", c.Source)
	}
	sample, err := client.Metrics(types[0]).Query(qctx, c.Query, time.Time{})
	if err != nil {
		s.prov.failed(ctx, c.Source, "Query", err)
		return 0, false, err
	}
	return sample.Value, sample.Empty, nil
}

// writeSize stores size to for the group in the state, through the lease,
// when the stored size is still from: the intent the group's next pass
// converges to. It returns the state as written.
func (s *service) writeSize(ctx context.Context, t *term, spec groupSpec, from, to int) (*state.Document, error) {
	if err := t.acquireSize(ctx, spec); err != nil {
		return nil, err
	}
	err := t.lease.setSize(spec.cfg.Name, from, to, t.fences()...)
	t.lease.release()
	if errors.Is(err, stateetcd.ErrFenced) {
		s.rec.FencedWriteRefused()
	}
	if err != nil {
		return nil, err
	}
	return readState(ctx, s.store)
}
