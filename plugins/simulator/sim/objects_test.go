package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/provider"
)

func TestMetadata(t *testing.T) {
	md := Metadata("0.1.0")
	if md.Name != "simulator" || md.Version != "0.1.0" {
		t.Fatalf("metadata = %+v", md)
	}
	for _, want := range []struct {
		kind provider.Kind
		typ  string
	}{
		{provider.KindInstance, "compute"}, {provider.KindInstance, "net"}, {provider.KindInstance, "disk"},
		{provider.KindFlavor, "simulator"},
		{provider.KindLoadBalancer, "lb1"}, {provider.KindLoadBalancer, "anything"},
		{provider.KindAuthorizer, "disk"},
	} {
		if _, ok := md.Find(want.kind, want.typ); !ok {
			t.Errorf("metadata does not serve %s %q", want.kind, want.typ)
		}
	}
	if _, ok := md.Find(provider.KindInstance, "gpu"); ok {
		t.Error("metadata serves an unknown instance type")
	}
	if o, _ := md.Find(provider.KindInstance, "compute"); !o.Schema.Open {
		t.Error("instance properties should be free-form (Schema.Open)")
	}
}

func TestFlavor(t *testing.T) {
	s := newSim(t, Config{})
	ctx := context.Background()
	f := s.Flavor()

	for _, tc := range []struct {
		props    string
		wantPath []string // nil: valid
	}{
		{``, nil},
		{`{}`, nil},
		{`{"tags": {"tier": "web"}}`, nil},
		{`{"tags": null}`, nil},
		{`[]`, []string{}},
		{`{"tags": ["a"]}`, []string{"tags"}},
		{`{"tags": {"x": 1}}`, []string{"tags", "x"}},
		{`{"color": "red"}`, []string{"color"}},
	} {
		err := f.Validate(ctx, json.RawMessage(tc.props), flavor.Allocation{Size: 1})
		if tc.wantPath == nil {
			if err != nil {
				t.Errorf("Validate(%s) = %v", tc.props, err)
			}
			continue
		}
		var diags provider.Diagnostics
		if !errors.As(err, &diags) || !slices.Equal(diags[0].Path, tc.wantPath) {
			t.Errorf("Validate(%s) = %#v, want a diagnostic at %v", tc.props, err, tc.wantPath)
		}
	}

	in := instance.Spec{Tags: map[string]string{"tier": "db", "keep": "me"}}
	out, err := f.Prepare(ctx, json.RawMessage(`{"tags": {"tier": "web"}}`), in, flavor.Allocation{Size: 1}, flavor.Index{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Tags["tier"] != "web" || out.Tags["keep"] != "me" || in.Tags["tier"] != "db" {
		t.Fatalf("Prepare tags = %v (input now %v)", out.Tags, in.Tags)
	}

	// Health comes from the file of any instance type.
	p := s.Instances("net")
	id, err := p.Provision(ctx, specWithTags(nil))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Dir(), "instances", "net", string(id)+".json")
	setHealth := func(h string) { setHealthIn(t, path, h) }
	health := func() flavor.Health {
		h, err := f.Healthy(ctx, nil, instance.Description{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := health(); h != flavor.HealthHealthy {
		t.Errorf("fresh instance is %s", h)
	}
	for _, tc := range []struct {
		field string
		want  flavor.Health
	}{
		{"unhealthy", flavor.HealthUnhealthy},
		{"unknown", flavor.HealthUnknown},
		{"healthy", flavor.HealthHealthy},
		{"", flavor.HealthHealthy},
	} {
		setHealth(tc.field)
		if h := health(); h != tc.want {
			t.Errorf(`"health": %q reads as %s, want %s`, tc.field, h, tc.want)
		}
	}
	for _, missing := range []instance.ID{"compute-gone", "../x", ""} {
		if h, err := f.Healthy(ctx, nil, instance.Description{ID: missing}); err != nil || h != flavor.HealthUnknown {
			t.Errorf("Healthy(%q) = %s, %v; want unknown", missing, h, err)
		}
	}
	if err := os.WriteFile(path, []byte(`{"health": `), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Healthy(ctx, nil, instance.Description{ID: id}); err == nil {
		t.Error("Healthy of a corrupt file returned no error")
	}
	if err := f.Drain(ctx, nil, instance.Description{ID: id}); err != nil {
		t.Error(err)
	}
}

func TestLoadBalancer(t *testing.T) {
	s := newSim(t, Config{})
	ctx := context.Background()
	lb, err := s.LoadBalancer("lb1")
	if err != nil {
		t.Fatal(err)
	}
	if rs, err := lb.Routes(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("new LB routes = %v, %v", rs, err)
	}
	r8080 := loadbalancer.Route{Port: 8080, Protocol: "HTTP", LoadBalancerPort: 8080, LoadBalancerProtocol: "https", Certificate: "external-cer-id2"}
	r80 := loadbalancer.Route{Port: 80, Protocol: "http", LoadBalancerPort: 80, LoadBalancerProtocol: "https", Certificate: "external-cer-id1"}
	for _, r := range []loadbalancer.Route{r8080, r80} {
		if err := lb.Publish(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	r80.Port = 81 // replaces the route on lb_port 80
	if err := lb.Publish(ctx, r80); err != nil {
		t.Fatal(err)
	}
	rs, err := lb.Routes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r8080.Protocol = "http" // normalized
	if len(rs) != 2 || rs[0] != r80 || rs[1] != r8080 {
		t.Fatalf("routes = %+v", rs)
	}
	for _, bad := range []loadbalancer.Route{
		{Port: 0, Protocol: "http", LoadBalancerPort: 80, LoadBalancerProtocol: "http"},
		{Port: 80, Protocol: "http", LoadBalancerPort: 70000, LoadBalancerProtocol: "http"},
		{Port: 80, Protocol: "gopher", LoadBalancerPort: 80, LoadBalancerProtocol: "http"},
	} {
		if err := lb.Publish(ctx, bad); err == nil {
			t.Errorf("Publish(%+v) accepted", bad)
		}
	}
	if err := lb.Unpublish(ctx, 8080); err != nil {
		t.Fatal(err)
	}
	if err := lb.Unpublish(ctx, 9999); err != nil {
		t.Fatalf("Unpublish of a missing port = %v", err)
	}
	if rs, _ := lb.Routes(ctx); len(rs) != 1 || rs[0].LoadBalancerPort != 80 {
		t.Fatalf("after Unpublish: %+v", rs)
	}

	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{{ID: "b", Address: "10.0.0.2"}, {ID: "a", Address: "10.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{{ID: "b", Address: "10.0.0.22"}}); err != nil {
		t.Fatal(err)
	}
	if err := lb.RegisterBackends(ctx, []loadbalancer.Backend{{ID: ""}}); err == nil {
		t.Error("registered a backend without ID")
	}
	bs, _ := lb.Backends(ctx)
	if len(bs) != 2 || bs[0] != (loadbalancer.Backend{ID: "a", Address: "10.0.0.1"}) || bs[1].Address != "10.0.0.22" {
		t.Fatalf("backends = %+v", bs)
	}
	if err := lb.DeregisterBackends(ctx, []instance.ID{"a", "zzz"}); err != nil {
		t.Fatal(err)
	}
	if bs, _ := lb.Backends(ctx); len(bs) != 1 || bs[0].ID != "b" {
		t.Fatalf("after deregister: %+v", bs)
	}

	hc := loadbalancer.HealthCheck{BackendPort: 80, Healthy: 2, Unhealthy: 3, Interval: 10 * time.Second, Timeout: time.Second}
	if err := lb.ConfigureHealthCheck(ctx, hc); err != nil {
		t.Fatal(err)
	}
	if got, err := lb.HealthCheck(ctx); err != nil || *got != hc {
		t.Fatalf("health check = %+v, %v", got, err)
	}
	if err := lb.ConfigureHealthCheck(ctx, loadbalancer.HealthCheck{BackendPort: -1}); err == nil {
		t.Error("accepted a health check on port -1")
	}

	// Another LB is independent; everything lives in loadbalancers/lb1.json.
	lb2, _ := s.LoadBalancer("lb2")
	if bs, _ := lb2.Backends(ctx); len(bs) != 0 {
		t.Fatalf("lb2 sees lb1's backends: %v", bs)
	}
	b, err := os.ReadFile(filepath.Join(s.Dir(), "loadbalancers", "lb1.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"lb_port": 80`, `"certificate": "external-cer-id1"`, `"id": "b"`, `"interval": "10s"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("lb1.json lacks %s:\n%s", want, b)
		}
	}
	if _, err := s.LoadBalancer("../etc"); err == nil {
		t.Error("accepted a load balancer name with a path separator")
	}
	if l4, err := s.L4(""); err == nil || l4 != nil {
		t.Errorf("L4(\"\") = %v, %v; want nil interface and an error", l4, err)
	}
}

// Any sequence of L4 calls leaves the same routes and backends as a map model.
func TestLoadBalancerMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s, err := New(Config{Dir: t.TempDir(), Logger: hclog.NewNullLogger()})
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		lb, _ := s.LoadBalancer("m")
		routes := map[int]loadbalancer.Route{}
		backends := map[instance.ID]string{}
		port := rapid.SampledFrom([]int{80, 443, 8080})
		id := rapid.SampledFrom([]instance.ID{"i-1", "i-2", "i-3", "i-4"})
		for range rapid.IntRange(1, 25).Draw(rt, "ops") {
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				r := loadbalancer.Route{
					LoadBalancerPort: port.Draw(rt, "lb_port"), LoadBalancerProtocol: "tcp",
					Port: rapid.IntRange(1, 65535).Draw(rt, "port"), Protocol: "tcp",
				}
				if err := lb.Publish(ctx, r); err != nil {
					rt.Fatal(err)
				}
				routes[r.LoadBalancerPort] = r
			case 1:
				p := port.Draw(rt, "unpublish")
				if err := lb.Unpublish(ctx, p); err != nil {
					rt.Fatal(err)
				}
				delete(routes, p)
			case 2:
				var bs []loadbalancer.Backend
				for _, i := range rapid.SliceOfDistinct(id, func(i instance.ID) instance.ID { return i }).Draw(rt, "register") {
					b := loadbalancer.Backend{ID: i, Address: rapid.StringMatching(`10\.0\.0\.[0-9]`).Draw(rt, "addr")}
					bs = append(bs, b)
					backends[b.ID] = b.Address
				}
				if err := lb.RegisterBackends(ctx, bs); err != nil {
					rt.Fatal(err)
				}
			case 3:
				ds := rapid.SliceOf(id).Draw(rt, "deregister")
				if err := lb.DeregisterBackends(ctx, ds); err != nil {
					rt.Fatal(err)
				}
				for _, i := range ds {
					delete(backends, i)
				}
			}
		}
		rs, _ := lb.Routes(ctx)
		if len(rs) != len(routes) || !slices.IsSortedFunc(rs, func(a, b loadbalancer.Route) int { return a.LoadBalancerPort - b.LoadBalancerPort }) {
			rt.Fatalf("routes %+v, model %+v", rs, routes)
		}
		for _, r := range rs {
			if routes[r.LoadBalancerPort] != r {
				rt.Fatalf("route %+v, model %+v", r, routes[r.LoadBalancerPort])
			}
		}
		bs, _ := lb.Backends(ctx)
		if len(bs) != len(backends) {
			rt.Fatalf("backends %+v, model %+v", bs, backends)
		}
		for i, b := range bs {
			if backends[b.ID] != b.Address || (i > 0 && bs[i-1].ID >= b.ID) {
				rt.Fatalf("backends %+v, model %+v", bs, backends)
			}
		}
	})
}

func TestAuthorizer(t *testing.T) {
	s := newSim(t, Config{})
	ctx := context.Background()
	a := s.Authorizer("disk")
	if err := a.Validate(ctx, json.RawMessage(`{"host": "compute-1", "iops": 10}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Validate(ctx, json.RawMessage(`[]`)); err == nil {
		t.Fatal("Validate accepted a list")
	}
	auth := nfs.Authorization{
		SourceID: "compute-0a1b2c3d", Host: "10.1.2.3", Volume: "/exports/data",
		Options: []string{"rw", "sync"}, Properties: json.RawMessage(`{"host":"compute-0a1b2c3d","iops":10}`),
		Tags: map[string]string{"infrakit.enrollment.name": "nfs", "infrakit.enrollment.source_id": "compute-0a1b2c3d"},
	}
	id1, err := a.Authorize(ctx, auth)
	if err != nil {
		t.Fatal(err)
	}
	auth2 := auth
	auth2.SourceID = "compute-11111111"
	id2, err := a.Authorize(ctx, auth2)
	if err != nil {
		t.Fatal(err)
	}
	if id1 == id2 || !strings.HasPrefix(id1, "auth-") {
		t.Fatalf("IDs %q, %q", id1, id2)
	}
	if _, err := a.Authorize(ctx, nfs.Authorization{Host: "x"}); err == nil {
		t.Error("authorized without a source ID")
	}
	if _, err := a.Authorize(ctx, nfs.Authorization{SourceID: "x", Properties: json.RawMessage(`1`)}); err == nil {
		t.Error("authorized with non-object properties")
	}
	got, err := a.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("Describe = %+v", got)
	}
	var first nfs.Authorization
	for _, g := range got {
		if g.ID == id1 {
			first = g
		}
	}
	want := auth
	want.ID = id1
	if first.SourceID != want.SourceID || first.Host != want.Host || first.Volume != want.Volume ||
		!slices.Equal(first.Options, want.Options) || string(first.Properties) != string(want.Properties) ||
		first.Tags["infrakit.enrollment.name"] != "nfs" {
		t.Fatalf("described %+v, want %+v", first, want)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "authorizations", "disk", id1+".json")); err != nil {
		t.Fatal(err)
	}
	if err := a.Revoke(ctx, id1); err != nil {
		t.Fatal(err)
	}
	if err := a.Revoke(ctx, id1); err != nil {
		t.Fatalf("Revoke of a missing ID = %v", err)
	}
	if got, _ := a.Describe(ctx); len(got) != 1 || got[0].ID != id2 {
		t.Fatalf("after Revoke: %+v", got)
	}
}

// Several processes provision, label one instance and register backends on
// one load balancer at once: every update must land.
func TestMultiProcessNoLostUpdates(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	s := newSim(t, Config{})
	ctx := context.Background()
	target, err := s.Instances("compute").Provision(ctx, specWithTags(map[string]string{"owner": "parent"}))
	if err != nil {
		t.Fatal(err)
	}
	const children = 3
	var cmds []*exec.Cmd
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChildDir+"="+s.Dir(), envChildID+"=p"+strconv.Itoa(i), envChildTarget+"="+string(target))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("child %d:\n%s", i, out.String())
			}
		})
		cmds = append(cmds, cmd)
	}
	// This process races too, through the same code paths.
	if err := runChild(s.Dir(), "parent", string(target)); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
	writers := children + 1
	p := s.Instances("compute")
	all := describeAll(t, p, nil)
	if len(all) != writers*childOps+1 {
		t.Fatalf("%d instances, want %d", len(all), writers*childOps+1)
	}
	for i := range children {
		if got := describeAll(t, p, map[string]string{"owner": "p" + strconv.Itoa(i)}); len(got) != childOps {
			t.Fatalf("child %d has %d instances, want %d", i, len(got), childOps)
		}
	}
	var labels []instance.Description
	for _, d := range all {
		if d.ID == target {
			labels = append(labels, d)
		}
	}
	if len(labels) != 1 || len(labels[0].Tags) != writers*childOps+1 {
		t.Fatalf("target has %d tags, want %d", len(labels[0].Tags), writers*childOps+1)
	}
	lb, _ := s.LoadBalancer("shared")
	bs, err := lb.Backends(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != writers*childOps {
		t.Fatalf("%d backends, want %d", len(bs), writers*childOps)
	}
}

// setHealthIn sets the "health" field of an instance file in place, as a
// user injecting health by hand does.
func setHealthIn(t *testing.T, path, health string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["health"] = health
	b, _ = json.Marshal(m)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Describe lists authorizations through a cache, yet sees what changed
// on disk behind it: a file removed by hand, one written by another
// Simulator on the same directory.
func TestAuthorizerDescribeFollowsTheDirectory(t *testing.T) {
	s := newSim(t, Config{})
	other := newSim(t, Config{Dir: s.Dir()})
	ctx := context.Background()
	a := s.Authorizer("disk")
	id1, err := a.Authorize(ctx, nfs.Authorization{SourceID: "m-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.Describe(ctx); err != nil || len(got) != 1 || got[0].ID != id1 {
		t.Fatalf("Describe = %+v, %v; want %s", got, err, id1)
	}
	id2, err := other.Authorizer("disk").Authorize(ctx, nfs.Authorization{SourceID: "m-2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(s.Dir(), "authorizations", "disk", id1+".json")); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the listing following the directory", func() bool {
		got, err := a.Describe(ctx)
		return err == nil && len(got) == 1 && got[0].ID == id2 && got[0].SourceID == "m-2"
	})
}

// Properties come back as they were sent, without the whitespace of the
// indented file: also when a person rewrote the file in another layout.
func TestPropertiesComeBackCompact(t *testing.T) {
	s := newSim(t, Config{})
	ctx := context.Background()
	a := s.Authorizer("disk")
	id, err := a.Authorize(ctx, nfs.Authorization{SourceID: "m-1", Properties: json.RawMessage(`{ "host" : "h",  "iops": 10 }`)})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"host":"h","iops":10}`
	if got, err := a.Describe(ctx); err != nil || len(got) != 1 || string(got[0].Properties) != want {
		t.Fatalf("Describe = %+v, %v; want properties %s", got, err, want)
	}
	path := filepath.Join(s.Dir(), "authorizations", "disk", id+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), `"iops": 10`, "\"iops\":\n\t\t\t11", 1)
	if edited == string(b) {
		t.Fatalf("the file does not hold the indented properties:\n%s", b)
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the edited properties, compact", func() bool {
		got, err := a.Describe(ctx)
		return err == nil && len(got) == 1 && string(got[0].Properties) == `{"host":"h","iops":11}`
	})

	inst := s.Instances("compute")
	iid, err := inst.Provision(ctx, instance.Spec{Properties: json.RawMessage("{\n  \"note\": \"x\"\n}")})
	if err != nil {
		t.Fatal(err)
	}
	descs, err := inst.DescribeInstances(ctx, nil, true)
	if err != nil || len(descs) != 1 || descs[0].ID != iid || string(descs[0].Properties) != `{"note":"x"}` {
		t.Fatalf("DescribeInstances = %+v, %v; want %s with properties {\"note\":\"x\"}", descs, err, iid)
	}
}
