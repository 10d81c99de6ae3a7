package main_test

import (
	"testing"

	"github.com/infrakit/infrakit/sdk/providertest"
)

// TestConformance runs the provider conformance suite against the binary,
// with a real HAProxy behind it (the suite's backends are TEST-NET
// addresses that never answer; only the bookkeeping is judged).
func TestConformance(t *testing.T) {
	e := newEnv(t)
	providertest.Run(t, providertest.Config{
		Binary:       builder.Build(t, "."),
		Env:          e.vars,
		Dir:          e.dir,
		LoadBalancer: "lb1",
	})
}
