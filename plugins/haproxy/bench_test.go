package main_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/infrakit/infrakit/plugins/haproxy/haproxytest"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// TestBenchHAProxy reports what a backend change (runtime API) and a route
// change (hitless reload) cost through the provider, as the host sees it.
// It runs only with INFRAKIT_BENCH=1:
//
//	INFRAKIT_BENCH=1 go test -count=1 -run '^TestBenchHAProxy$' -v ./plugins/haproxy
func TestBenchHAProxy(t *testing.T) {
	if os.Getenv("INFRAKIT_BENCH") != "1" {
		t.Skip("set INFRAKIT_BENCH=1 to measure")
	}
	e := newEnv(t)
	c := e.start(t)
	lb := c.LoadBalancer("bench")
	ctx := ctxT(t)
	port := haproxytest.FreePort(t)
	if err := lb.Publish(ctx, httpRoute(port)); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t, "b", nil)
	const runs = 20
	var reg, dereg, pub []time.Duration
	for i := range runs {
		start := time.Now()
		if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{{ID: instance.ID(fmt.Sprint("m", i)), Address: b.addr}}); err != nil {
			t.Fatal(err)
		}
		reg = append(reg, time.Since(start))
		start = time.Now()
		if err := lb.DeregisterBackends(ctx, []instance.ID{instance.ID(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
		dereg = append(dereg, time.Since(start))
	}
	for range 5 {
		p := haproxytest.FreePort(t)
		start := time.Now()
		if err := lb.Publish(ctx, httpRoute(p)); err != nil {
			t.Fatal(err)
		}
		pub = append(pub, time.Since(start))
	}
	report := func(what string, ds []time.Duration) {
		slices.Sort(ds)
		t.Logf("%-32s median %6s  max %6s  (%d runs)", what, ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), len(ds))
	}
	report("register 1 backend (runtime API)", reg)
	report("deregister 1 backend (runtime API)", dereg)
	report("publish a route (hitless reload)", pub)
}
