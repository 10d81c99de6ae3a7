package watch

import (
	"context"
	"errors"
	"testing"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
)

// The per-step gate refuses once the term ended, once the lease is in
// doubt by this process's clock, and when etcd says the fence is gone;
// the lifelong term of the local backend is not gated.
func TestStepGate(t *testing.T) {
	step := plan.Step{Kind: plan.StepProvision, Group: "g"}
	term, end := context.WithCancel(context.Background())
	defer end()
	standing, verified := true, 0
	var verr error
	g := &stepGate{standing: func() bool { return standing }, verify: func(context.Context) error { verified++; return verr }}
	check := g.check(term)
	if err := check(term, step); err != nil || verified != 1 {
		t.Fatalf("standing: %v after %d verifications", err, verified)
	}
	if err := check(term, step); err != nil || verified != 1 {
		t.Fatalf("a step right after: %v, %d verifications (want the last one reused)", err, verified)
	}
	standing = false
	if err := check(term, step); !errors.Is(err, election.ErrRenewalOverdue) || !deposed(err) {
		t.Fatalf("in doubt: %v, want ErrRenewalOverdue", err)
	}
	standing, g.verified, verr = true, g.verified.Add(-2*verifyEvery), election.ErrDeposed
	if err := check(term, step); !errors.Is(err, election.ErrDeposed) {
		t.Fatalf("fence gone: %v, want ErrDeposed", err)
	}
	end()
	if err := check(term, step); !errors.Is(err, errNotLeader) {
		t.Fatalf("term ended: %v, want errNotLeader", err)
	}
	var eo execute.Options
	newLease(nil, newSerials(), 0).guard(&eo)
	if eo.Before != nil || eo.Abort != nil {
		t.Error("the lifelong term is gated")
	}
}
