package ingress

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// These tests decide with the pure functions (Diff, Teardown, Registered)
// from what a real simulator lists, carry the changes out through the
// load balancer SPI as a plan's steps would, and check what the simulator
// then holds: the decisions hold against a real provider's listing (its
// spelling of routes and backends), and once carried out leave nothing
// to do.

// e2eIngress is the ingress of DESIGN.md's e2e stack.
func e2eIngress() *config.Ingress {
	rule := func(lb, grp string, port int, cert string) config.Rule {
		return config.Rule{LoadBalancer: lb, Groups: []string{grp}, Routes: []config.Route{{
			LBPort: port, LBProtocol: loadbalancer.HTTPS, Port: port, Protocol: loadbalancer.HTTP, Certificate: cert,
		}}}
	}
	return &config.Ingress{Name: "test.com", SyncInterval: config.Duration(3 * time.Second), Rules: []config.Rule{
		rule("lb1", "miners", 80, "external-cer-id1"),
		rule("lb2", "miners", 8080, "external-cer-id2"),
		rule("lb3", "cattle", 8888, "external-cer-id3"),
	}}
}

func backendIDs(t *testing.T, l4 loadbalancer.L4) []instance.ID {
	t.Helper()
	bs, err := l4.Backends(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []instance.ID
	for _, b := range bs {
		ids = append(ids, b.ID)
	}
	slices.Sort(ids)
	return ids
}

func memberIDs(ms []group.Member) []instance.ID {
	var ids []instance.ID
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids
}

func routesOf(t *testing.T, l4 loadbalancer.L4) []loadbalancer.Route {
	t.Helper()
	rs, err := l4.Routes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// healthCheckFile reads the health check the simulator stored for a load
// balancer (the SPI has no getter).
func healthCheckFile(t *testing.T, dir, lb string) (port int, ok bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "loadbalancers", lb+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		HealthCheck *struct {
			BackendPort int `json:"backend_port"`
		} `json:"healthcheck"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.HealthCheck == nil {
		return 0, false
	}
	return rec.HealthCheck.BackendPort, true
}

// diffLB is Diff of what l4 lists now.
func diffLB(t *testing.T, l4 loadbalancer.L4, d DesiredLB, members map[string][]group.Member, known bool) Changes {
	t.Helper()
	bs, err := l4.Backends(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return Diff(d, routesOf(t, l4), bs, members, known)
}

// carryOut makes the changes through the SPI in a plan's order: new
// backends registered, then the routes changed (a republish is an
// unpublish and a publish), the health check configured after them, and
// what leaves deregistered last.
func carryOut(t *testing.T, l4 loadbalancer.L4, ch Changes) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	register := slices.Clone(ch.Register)
	for _, r := range ch.Readdress {
		register = append(register, r.New)
	}
	if len(register) > 0 {
		must(l4.RegisterBackends(ctx, register))
	}
	for _, r := range ch.Unpublish {
		must(l4.Unpublish(ctx, r.LoadBalancerPort))
	}
	for _, r := range ch.Republish {
		must(l4.Unpublish(ctx, r.Old.LoadBalancerPort))
		must(l4.Publish(ctx, r.New))
	}
	for _, r := range ch.Publish {
		must(l4.Publish(ctx, r))
	}
	if ch.HealthCheck != nil {
		must(l4.ConfigureHealthCheck(ctx, *ch.HealthCheck))
	}
	if len(ch.Deregister) > 0 {
		must(l4.DeregisterBackends(ctx, ids(ch.Deregister)))
	}
}

func ids(bs []loadbalancer.Backend) []instance.ID {
	out := make([]instance.ID, len(bs))
	for i, b := range bs {
		out[i] = b.ID
	}
	return out
}

// The e2e walk-through, as far as the ingress goes: backends follow the
// groups, routes follow the rules, and a converged load balancer needs
// nothing, not even its health check.
func TestDiffFollowsMembership(t *testing.T) {
	ctx := context.Background()
	sim, dir := startSimulator(t)
	miners := provision(t, sim, "miners", 5)
	cattle := provision(t, sim, "cattle", 10)
	desired := DesiredLBs(e2eIngress())
	lbs := map[string]loadbalancer.L4{}
	for _, d := range desired {
		lbs[d.LoadBalancer] = sim.LoadBalancer(d.LoadBalancer)
	}
	all := map[string][]group.Member{"miners": miners, "cattle": cattle}

	for _, d := range desired {
		ch := diffLB(t, lbs[d.LoadBalancer], d, all, true)
		if want := len(all[d.Groups[0]]); len(ch.Register) != want || len(ch.Publish) != 1 || ch.HealthCheck == nil {
			t.Fatalf("%s: first diff %+v, want %d registers, a route and a health check", d.LoadBalancer, ch, want)
		}
		carryOut(t, lbs[d.LoadBalancer], ch)
	}
	for lb, grp := range map[string]string{"lb1": "miners", "lb2": "miners", "lb3": "cattle"} {
		if got, want := backendIDs(t, lbs[lb]), memberIDs(all[grp]); !slices.Equal(got, want) {
			t.Fatalf("%s backends %v, want the %s %v", lb, got, grp, want)
		}
	}
	// Backends carry the members' real addresses.
	bs, _ := lbs["lb1"].Backends(ctx)
	for _, b := range bs {
		i := slices.IndexFunc(miners, func(m group.Member) bool { return m.ID == b.ID })
		if b.Address == "" || b.Address != miners[i].Address {
			t.Fatalf("backend %s has address %q, member has %q", b.ID, b.Address, miners[i].Address)
		}
	}
	want := loadbalancer.Route{LoadBalancerPort: 8080, LoadBalancerProtocol: "https", Port: 8080, Protocol: "http", Certificate: "external-cer-id2"}
	if got := routesOf(t, lbs["lb2"]); len(got) != 1 || got[0] != want {
		t.Fatalf("lb2 routes %+v, want exactly %+v", got, want)
	}
	for lb, port := range map[string]int{"lb1": 80, "lb2": 8080, "lb3": 8888} {
		if got, ok := healthCheckFile(t, dir, lb); !ok || got != port {
			t.Fatalf("%s health check on port %d (set %v), want %d", lb, got, ok, port)
		}
	}

	// Converged: nothing to do, not even the health check.
	for _, d := range desired {
		if ch := diffLB(t, lbs[d.LoadBalancer], d, all, true); !ch.Empty() {
			t.Fatalf("%s: diff of the converged load balancer %+v", d.LoadBalancer, ch)
		}
	}

	// Two miners go away.
	for _, m := range miners[:2] {
		if err := sim.Instance("compute").Destroy(ctx, m.ID, instance.ReasonScaleDown); err != nil {
			t.Fatal(err)
		}
	}
	all["miners"] = members(t, sim, "miners")
	for _, d := range desired {
		ch := diffLB(t, lbs[d.LoadBalancer], d, all, true)
		wantGone := 2
		if d.LoadBalancer == "lb3" {
			wantGone = 0
		}
		if len(ch.Deregister) != wantGone || len(ch.Register)+len(ch.Publish)+len(ch.Unpublish) != 0 || ch.HealthCheck != nil {
			t.Fatalf("%s: diff after 2 miners left %+v, want %d deregisters only", d.LoadBalancer, ch, wantGone)
		}
		carryOut(t, lbs[d.LoadBalancer], ch)
	}
	if got := backendIDs(t, lbs["lb1"]); !slices.Equal(got, memberIDs(all["miners"])) || len(got) != 3 {
		t.Fatalf("lb1 backends %v, want the 3 miners left", got)
	}

	// Unknown membership (say the cattle could not be listed): nothing is
	// deregistered although no members are passed; routes still sync.
	if err := lbs["lb3"].Publish(ctx, loadbalancer.Route{LoadBalancerPort: 9999, LoadBalancerProtocol: "tcp", Port: 1, Protocol: "tcp"}); err != nil {
		t.Fatal(err)
	}
	ch := diffLB(t, lbs["lb3"], desired[2], nil, false)
	if len(ch.Unpublish) != 1 || ch.Unpublish[0].LoadBalancerPort != 9999 || !ch.BackendsHeld || len(ch.Deregister) != 0 {
		t.Fatalf("unknown membership diff of lb3 %+v", ch)
	}
	carryOut(t, lbs["lb3"], ch)
	if got := backendIDs(t, lbs["lb3"]); len(got) != 10 {
		t.Fatalf("lb3 lost backends on unknown membership: %v", got)
	}
}

// A member whose address changed is re-registered with the new one; a
// route whose certificate and backend port change is republished, and the
// health check follows the new port.
func TestDiffReaddressesAndRepublishes(t *testing.T) {
	ctx := context.Background()
	sim, dir := startSimulator(t)
	miners := provision(t, sim, "miners", 3)
	in := e2eIngress()
	in.Rules = in.Rules[:1]
	lb := sim.LoadBalancer("lb1")
	all := map[string][]group.Member{"miners": miners}
	carryOut(t, lb, diffLB(t, lb, DesiredLBs(in)[0], all, true))

	miners[1].Address = "192.0.2.7"
	ch := diffLB(t, lb, DesiredLBs(in)[0], all, true)
	if len(ch.Readdress) != 1 || ch.Readdress[0].New.ID != miners[1].ID || len(ch.Register)+len(ch.Deregister) != 0 {
		t.Fatalf("diff after an address change %+v", ch)
	}
	carryOut(t, lb, ch)
	bs, _ := lb.Backends(ctx)
	if i := slices.IndexFunc(bs, func(b loadbalancer.Backend) bool { return b.ID == miners[1].ID }); i < 0 || bs[i].Address != "192.0.2.7" {
		t.Fatalf("backends %+v", bs)
	}

	in.Rules[0].Routes[0].Certificate = "external-cer-new"
	in.Rules[0].Routes[0].Port = 8000
	ch = diffLB(t, lb, DesiredLBs(in)[0], all, true)
	if len(ch.Republish) != 1 || ch.Republish[0].Old.Certificate != "external-cer-id1" || ch.HealthCheck == nil || ch.HealthCheck.BackendPort != 8000 ||
		len(ch.Publish)+len(ch.Unpublish)+len(ch.Register)+len(ch.Deregister) != 0 {
		t.Fatalf("diff after a route change %+v", ch)
	}
	carryOut(t, lb, ch)
	if got := routesOf(t, lb); len(got) != 1 || got[0].Certificate != "external-cer-new" || got[0].Port != 8000 {
		t.Fatalf("routes after the republish %+v", got)
	}
	if port, _ := healthCheckFile(t, dir, "lb1"); port != 8000 {
		t.Fatalf("health check on %d after the backend port changed, want 8000", port)
	}
	if again := diffLB(t, lb, DesiredLBs(in)[0], all, true); !again.Empty() {
		t.Fatalf("diff after the changes %+v", again)
	}
}

// A member leaving is taken out of the load balancers that list it
// (Registered), with the address they hold, and nothing else; an ingress
// destroyed takes everything off its load balancers but what another
// ingress still naming one wants (Teardown).
func TestRegisteredAndTeardown(t *testing.T) {
	sim, _ := startSimulator(t)
	miners := provision(t, sim, "miners", 3)
	cattle := provision(t, sim, "cattle", 2)
	in := e2eIngress()
	in.Rules[0].Groups = []string{"miners", "cattle"} // lb1 routes to both groups
	all := map[string][]group.Member{"miners": miners, "cattle": cattle}
	lbs := map[string]loadbalancer.L4{}
	for _, d := range DesiredLBs(in) {
		lbs[d.LoadBalancer] = sim.LoadBalancer(d.LoadBalancer)
		carryOut(t, lbs[d.LoadBalancer], diffLB(t, lbs[d.LoadBalancer], d, all, true))
	}

	leaving := []instance.ID{miners[0].ID, "not-registered"}
	for lb, want := range map[string]int{"lb1": 1, "lb2": 1, "lb3": 0} {
		bs, err := lbs[lb].Backends(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := Registered(bs, leaving)
		if len(got) != want || want == 1 && (got[0].ID != miners[0].ID || got[0].Address != miners[0].Address) {
			t.Fatalf("%s: Registered = %+v, want %d backend of %s", lb, got, want, miners[0].ID)
		}
	}

	// A stranger registered on lb3, which another ingress names for the
	// cattle on the same port.
	if err := lbs["lb3"].RegisterBackends(context.Background(), []loadbalancer.Backend{{ID: "stranger"}}); err != nil {
		t.Fatal(err)
	}
	other := &config.Ingress{Name: "other", Rules: []config.Rule{in.Rules[2]}}
	var steps int
	for _, d := range DesiredLBs(in) {
		lb := lbs[d.LoadBalancer]
		bs, _ := lb.Backends(context.Background())
		remain := Wanted(d.LoadBalancer, []*config.Ingress{other})
		ch := Teardown(remain, routesOf(t, lb), bs, all, true)
		if len(ch.Publish)+len(ch.Republish)+len(ch.Register)+len(ch.Readdress) != 0 || ch.HealthCheck != nil {
			t.Fatalf("%s: Teardown adds %+v", d.LoadBalancer, ch)
		}
		steps += len(ch.Unpublish) + len(ch.Deregister)
		carryOut(t, lb, ch)
	}
	// lb1: 1 route and 5 backends; lb2: 1 route and 3 backends; lb3: the stranger.
	if steps != 11 {
		t.Fatalf("teardown took %d routes and backends off, want 11", steps)
	}
	for lb, want := range map[string]int{"lb1": 0, "lb2": 0, "lb3": 2} {
		if got := backendIDs(t, lbs[lb]); len(got) != want {
			t.Fatalf("%s has backends %v after the teardown, want %d", lb, got, want)
		}
	}
	if got := backendIDs(t, lbs["lb3"]); !slices.Equal(got, memberIDs(cattle)) || len(routesOf(t, lbs["lb3"])) != 1 {
		t.Fatalf("lb3 holds %v and %v, want what the other ingress wants", got, routesOf(t, lbs["lb3"]))
	}
}
