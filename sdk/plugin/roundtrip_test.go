package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/provider"
)

// These tests run every SPI method against the test provider in a real
// subprocess, over the real wire.

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantDiagnostics asserts err is `provider "test": <method>: ` + diagnostics equal to want.
func wantDiagnostics(t *testing.T, err error, method string, want provider.Diagnostics) {
	t.Helper()
	var got provider.Diagnostics
	if !errors.As(err, &got) {
		t.Fatalf("want diagnostics, got %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diagnostics:\n got %#v\nwant %#v", got, want)
	}
	if prefix := `provider "test": ` + method + ": "; !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("error %q does not start with %q", err, prefix)
	}
}

func wantError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n got %v\nwant %s", err, want)
	}
}

// waitLogged waits, within a generous bound, for a line of the provider's
// log holding every one of parts to reach the host's logger: go-plugin
// relays the provider's stderr on its own goroutine, so a line may arrive
// after the call's answer.
func waitLogged(logs fmt.Stringer, parts ...string) bool {
	has := func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !has() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	return has()
}

func TestRoundTrip(t *testing.T) {
	c, logs := startTest(t, "")

	t.Run("Metadata", func(t *testing.T) {
		m, err := c.Metadata(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		want := provider.Metadata{Name: "test", Version: "1.2.3", Objects: []provider.Object{
			{Kind: provider.KindInstance, Type: "compute", Schema: provider.Schema{Attributes: map[string]provider.Attribute{
				"note": {Type: "string", Description: "free text"},
				"bad":  {Type: "list(string)"},
			}}},
			// Served but not declared: Serve lists them with an open schema.
			{Kind: provider.KindInstance, Type: "nowatch", Schema: provider.Schema{Open: true}},
			{Kind: provider.KindFlavor, Type: "vanilla", Schema: provider.Schema{Open: true}},
			{Kind: provider.KindAuthorizer, Type: "disk", Schema: provider.Schema{Open: true}},
			{Kind: provider.KindMetrics, Type: "testql", Schema: provider.Schema{Open: true}},
			{Kind: provider.KindLoadBalancer, Type: provider.AnyName, Schema: provider.Schema{Open: true}},
		}}
		if !reflect.DeepEqual(m, want) {
			t.Fatalf("metadata:\n got %#v\nwant %#v", m, want)
		}
	})

	t.Run("Instance", func(t *testing.T) {
		ctx := ctxT(t)
		p := c.Instance("compute")

		if err := p.Validate(ctx, json.RawMessage(`{"note":"hi"}`)); err != nil {
			t.Fatal(err)
		}
		err := p.Validate(ctx, json.RawMessage(`{"bad":["x"],"old":1}`))
		wantDiagnostics(t, err, "Validate", provider.Diagnostics{
			{Severity: provider.Warning, Summary: "Deprecated attribute", Detail: "old is going away", Path: []string{"old"}},
			{Severity: provider.Error, Summary: "Invalid value", Detail: "bad is not allowed", Path: []string{"bad", "0"}},
		})
		// Warnings alone pass, and are logged on the host.
		if err := p.Validate(ctx, json.RawMessage(`{"old":1}`)); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "Deprecated attribute") {
			t.Errorf("warning not logged by the host:\n%s", logs)
		}
		// A plain error arrives as its message, not as diagnostics.
		err = p.Validate(ctx, json.RawMessage(`[1]`))
		var diags provider.Diagnostics
		if errors.As(err, &diags) {
			t.Fatalf("plain error came back as diagnostics: %v", err)
		}
		wantError(t, err, `provider "test": Validate: properties are not a JSON object: json: cannot unmarshal array into Go value of type map[string]interface {}`)

		lid := instance.LogicalID("10.0.0.9")
		spec := instance.Spec{
			Properties:  json.RawMessage(`{"note":"pet"}`),
			Tags:        map[string]string{"infrakit.group": "pets", "tier": "web"},
			Init:        "echo hello",
			LogicalID:   &lid,
			Attachments: []instance.Attachment{{ID: "vol-1", Type: "volume"}},
		}
		id, err := p.Provision(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.DescribeInstances(ctx, map[string]string{"infrakit.group": "pets"}, true)
		if err != nil {
			t.Fatal(err)
		}
		want := []instance.Description{{ID: id, LogicalID: &lid, Tags: spec.Tags, Properties: spec.Properties, Address: got[0].Address, State: instance.StateRunning}}
		if !reflect.DeepEqual(got, want) || got[0].Address == "" {
			t.Fatalf("describe:\n got %#v\nwant %#v", got, want)
		}
		if !waitLogged(logs, "provisioned", string(id)) {
			t.Errorf("provider log line did not reach the host logger:\n%s", logs)
		}

		if err := p.Label(ctx, id, map[string]string{"tier": "db", "new": "yes"}); err != nil {
			t.Fatal(err)
		}
		got, err = p.DescribeInstances(ctx, map[string]string{"infrakit.group": "pets", "new": "yes"}, false)
		if err != nil {
			t.Fatal(err)
		}
		wantTags := map[string]string{"infrakit.group": "pets", "tier": "db", "new": "yes"}
		if len(got) != 1 || !reflect.DeepEqual(got[0].Tags, wantTags) || got[0].Properties != nil {
			t.Fatalf("after label, without properties: %#v", got)
		}

		for range 2 { // destroying what is gone is not an error
			if err := p.Destroy(ctx, id, instance.ReasonScaleDown); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := p.DescribeInstances(ctx, map[string]string{"infrakit.group": "pets"}, false); err != nil || len(got) != 0 {
			t.Fatalf("after destroy: %v, %v", got, err)
		}
		if !waitLogged(logs, "destroyed", "reason=scale-down") {
			t.Errorf("destroy reason did not reach the provider:\n%s", logs)
		}
	})

	t.Run("InstanceErrors", func(t *testing.T) {
		ctx := ctxT(t)
		p := c.Instance("compute")
		_, err := p.Provision(ctx, instance.Spec{Tags: map[string]string{"fail": "plain"}})
		wantError(t, err, `provider "test": Provision: capacity exhausted`)

		_, err = p.Provision(ctx, instance.Spec{Tags: map[string]string{"fail": "unsupported"}})
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("want ErrUnsupported, got %v", err)
		}

		// A state outside the SPI's is refused at the provider's edge.
		if _, err := p.Provision(ctx, instance.Spec{Tags: map[string]string{"fail": "state"}}); err != nil {
			t.Fatal(err)
		}
		_, err = p.DescribeInstances(ctx, map[string]string{"fail": "state"}, false)
		if err == nil || !strings.Contains(err.Error(), `provider "test": DescribeInstances: provider returned an invalid result: instance "i-`) ||
			!strings.Contains(err.Error(), `unknown instance state "booting"`) {
			t.Fatalf("got %v", err)
		}

		_, err = p.Provision(ctx, instance.Spec{Tags: map[string]string{"fail": "noid"}})
		wantError(t, err, `provider "test": Provision: provider returned no instance ID`)

		err = c.Instance("nope").Validate(ctx, nil)
		wantError(t, err, `provider "test": Validate: instance type "nope" is not served by this provider (it serves: compute, nowatch)`)
	})

	t.Run("Watch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p := c.Instance("compute")
		events, err := p.(instance.Watcher).Watch(ctx, map[string]string{"infrakit.group": "watched"})
		if err != nil {
			t.Fatal(err)
		}
		next := func() instance.Event {
			t.Helper()
			select {
			case e, ok := <-events:
				if !ok {
					t.Fatal("watch closed early")
				}
				return e
			case <-ctx.Done():
				t.Fatal("no event")
			}
			return instance.Event{}
		}
		tags := map[string]string{"infrakit.group": "watched"}
		id, err := p.Provision(ctx, instance.Spec{Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		e := next()
		if e.Type != instance.EventChanged || e.ID != id || e.Instance == nil || e.Instance.ID != id ||
			!reflect.DeepEqual(e.Instance.Tags, tags) || e.Instance.State != instance.StateRunning {
			t.Fatalf("provision event: %#v", e)
		}
		if err := p.Label(ctx, id, map[string]string{"x": "y"}); err != nil {
			t.Fatal(err)
		}
		if e := next(); e.Type != instance.EventChanged || e.Instance.Tags["x"] != "y" {
			t.Fatalf("label event: %#v", e)
		}
		if err := p.Destroy(ctx, id, instance.ReasonTerminate); err != nil {
			t.Fatal(err)
		}
		if e := next(); e.Type != instance.EventGone || e.ID != id || e.Instance != nil {
			t.Fatalf("destroy event: %#v", e)
		}
		cancel()
		for range events { // the channel closes once ctx ends
		}
	})

	t.Run("WatchRefused", func(t *testing.T) {
		ctx := ctxT(t)
		_, err := c.Instance("compute").(instance.Watcher).Watch(ctx, map[string]string{"refuse": "yes"})
		wantDiagnostics(t, err, "Watch", provider.AttributeError("Cannot watch", "refused as asked", "tags", "refuse"))

		_, err = c.Instance("nowatch").(instance.Watcher).Watch(ctx, nil)
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("want ErrUnsupported, got %v", err)
		}
		wantError(t, err, `provider "test": Watch: unsupported operation: instance type "nowatch" cannot be watched`)
	})

	t.Run("Flavor", func(t *testing.T) {
		ctx := ctxT(t)
		f := c.Flavor("vanilla")
		pets := flavor.Allocation{LogicalIDs: []instance.LogicalID{"a", "b"}}
		if err := f.Validate(ctx, json.RawMessage(`{}`), pets); err != nil {
			t.Fatal(err)
		}
		err := f.Validate(ctx, nil, flavor.Allocation{Size: -1})
		wantDiagnostics(t, err, "Validate", provider.AttributeError("Invalid size", "size must not be negative", "size"))
		// A flavor's warnings alone reach the host too, as diagnostics
		// with no error among them (validate shows them and goes on).
		err = f.Validate(ctx, json.RawMessage(`{"old":1}`), pets)
		wantDiagnostics(t, err, "Validate", provider.Diagnostics{
			{Severity: provider.Warning, Summary: "Deprecated attribute", Detail: "old is going away", Path: []string{"old"}},
		})

		lid := instance.LogicalID("a")
		in := instance.Spec{Properties: json.RawMessage(`{"x":1}`), Tags: map[string]string{"t": "1"}, Init: "first\n", LogicalID: &lid}
		out, err := f.Prepare(ctx, json.RawMessage(`{"init":["x"]}`), in, pets, flavor.Index{Group: "miners", Sequence: 7})
		if err != nil {
			t.Fatal(err)
		}
		want := instance.Spec{
			Properties:  in.Properties,
			Tags:        map[string]string{"t": "1", "flavor": "vanilla", "size": "0/2"},
			Init:        "first\necho miners-7 {\"init\":[\"x\"]}\n",
			LogicalID:   &lid,
			Attachments: []instance.Attachment{{ID: "vol-miners", Type: "volume"}},
		}
		if !reflect.DeepEqual(out, want) {
			t.Fatalf("prepare:\n got %#v\nwant %#v", out, want)
		}

		for _, h := range []flavor.Health{flavor.HealthHealthy, flavor.HealthUnhealthy, flavor.HealthUnknown, ""} {
			got, err := f.Healthy(ctx, nil, instance.Description{ID: "i", Tags: map[string]string{"health": string(h)}, State: instance.StateRunning})
			if err != nil || got != h {
				t.Fatalf("healthy %q: got %q, %v", h, got, err)
			}
		}
		_, err = f.Healthy(ctx, nil, instance.Description{ID: "i", Tags: map[string]string{"health": "bogus"}})
		wantError(t, err, `provider "test": Healthy: provider returned an invalid result: unknown health "bogus" (want healthy, unhealthy or unknown)`)
		// The host refuses to send what the wire cannot carry.
		_, err = f.Healthy(ctx, nil, instance.Description{ID: "i", State: "booting"})
		wantError(t, err, `provider "test": Healthy: instance "i": unknown instance state "booting" (want pending, running or terminating)`)

		if err := f.Drain(ctx, nil, instance.Description{ID: "i", State: instance.StateTerminating}); err != nil {
			t.Fatal(err)
		}
		err = f.Drain(ctx, nil, instance.Description{ID: "i", State: instance.StatePending})
		wantError(t, err, `provider "test": Drain: drain i: instance is pending, not terminating`)
	})

	t.Run("LoadBalancer", func(t *testing.T) {
		ctx := ctxT(t)
		lb := c.LoadBalancer("lb1")
		r80 := loadbalancer.Route{Port: 80, Protocol: loadbalancer.HTTP, LoadBalancerPort: 80, LoadBalancerProtocol: loadbalancer.HTTPS, Certificate: "external-cer-id1"}
		r22 := loadbalancer.Route{Port: 22, Protocol: loadbalancer.TCP, LoadBalancerPort: 2222, LoadBalancerProtocol: loadbalancer.TCP}
		for _, r := range []loadbalancer.Route{r80, r22} {
			if err := lb.Publish(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		err := lb.Publish(ctx, loadbalancer.Route{Port: 1})
		wantDiagnostics(t, err, "Publish", provider.AttributeError("Invalid port", "lb_port must be positive", "route", "lb_port"))
		if got, err := lb.Routes(ctx); err != nil || !reflect.DeepEqual(got, []loadbalancer.Route{r80, r22}) {
			t.Fatalf("routes: %#v, %v", got, err)
		}
		if err := lb.Unpublish(ctx, 80); err != nil {
			t.Fatal(err)
		}
		if got, err := c.LoadBalancer("lb2").Routes(ctx); err != nil || len(got) != 0 {
			t.Fatalf("lb2 shares lb1's routes: %#v, %v", got, err)
		}
		hc := loadbalancer.HealthCheck{BackendPort: 8080, Healthy: 2, Unhealthy: 3, Interval: 1500 * time.Millisecond, Timeout: time.Second}
		if err := lb.ConfigureHealthCheck(ctx, hc); err != nil {
			t.Fatal(err)
		}
		// The test provider shows its health check as a pseudo route.
		wantRoutes := []loadbalancer.Route{r22, {Port: 8080, Protocol: "health", LoadBalancerPort: 203, Certificate: "1.5s/1s"}}
		if got, err := lb.Routes(ctx); err != nil || !reflect.DeepEqual(got, wantRoutes) {
			t.Fatalf("routes after health check:\n got %#v\nwant %#v (%v)", got, wantRoutes, err)
		}

		backends := []loadbalancer.Backend{{ID: "i-1", Address: "10.0.0.1:80"}, {ID: "i-2"}, {ID: "i-3", Address: "h3"}}
		if err := lb.RegisterBackends(ctx, backends); err != nil {
			t.Fatal(err)
		}
		if err := lb.DeregisterBackends(ctx, []instance.ID{"i-2", "i-9"}); err != nil {
			t.Fatal(err)
		}
		if got, err := lb.Backends(ctx); err != nil || !reflect.DeepEqual(got, []loadbalancer.Backend{backends[0], backends[2]}) {
			t.Fatalf("backends: %#v, %v", got, err)
		}

		_, err = c.LoadBalancer("missing").Routes(ctx)
		wantError(t, err, `provider "test": Routes: load balancer "missing" is not served by this provider`)
		_, err = c.LoadBalancer("broken").Backends(ctx)
		wantError(t, err, `provider "test": Backends: load balancer "broken": cannot reach the load balancer API`)
	})

	t.Run("Authorizer", func(t *testing.T) {
		ctx := ctxT(t)
		a := c.Authorizer("disk")
		err := a.Validate(ctx, json.RawMessage(`{"bad":1}`))
		wantDiagnostics(t, err, "Validate", provider.AttributeError("Invalid value", "bad is not allowed", "bad", "0"))

		auth := nfs.Authorization{
			SourceID:   "i-7",
			Host:       "10.0.0.7",
			Volume:     "/exports/data",
			Options:    []string{"rw", "sync"},
			Properties: json.RawMessage(`{"host":"i-7","iops":10}`),
			Tags:       map[string]string{"infrakit.enrollment.name": "nfs", "infrakit.enrollment.source_id": "i-7"},
		}
		id, err := a.Authorize(ctx, auth)
		if err != nil || id == "" {
			t.Fatalf("authorize: %q, %v", id, err)
		}
		_, err = a.Authorize(ctx, nfs.Authorization{SourceID: "i-8"})
		wantDiagnostics(t, err, "Authorize", provider.AttributeError("Missing host", "an authorization needs a host", "host"))

		auth.ID = id
		if got, err := a.Describe(ctx); err != nil || !reflect.DeepEqual(got, []nfs.Authorization{auth}) {
			t.Fatalf("describe:\n got %#v\nwant %#v (%v)", got, []nfs.Authorization{auth}, err)
		}
		for range 2 {
			if err := a.Revoke(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := a.Describe(ctx); err != nil || len(got) != 0 {
			t.Fatalf("after revoke: %#v, %v", got, err)
		}
		_, err = c.Authorizer("tape").Describe(ctx)
		wantError(t, err, `provider "test": Describe: nfs type "tape" is not served by this provider (it serves: disk)`)
	})
}

// A provider that describes what it provisions (compute) sends the
// description, tags left out when they are the spec's and restored on
// the host; one that does not (nowatch hides the method) gives the
// host an ID alone; a state outside the SPI's costs the description,
// never the ID of an instance that exists.
func TestProvisionDescribed(t *testing.T) {
	c, logs := startTest(t, "")
	ctx := ctxT(t)
	p := c.Instance("compute").(instance.DescribingProvisioner)
	spec := instance.Spec{Properties: json.RawMessage(`{"note":"d"}`), Tags: map[string]string{"infrakit.group": "described"}}
	d, err := p.ProvisionDescribed(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := c.Instance("compute").DescribeInstances(ctx, spec.Tags, true)
	if err != nil || len(listed) != 1 || !reflect.DeepEqual(d, listed[0]) {
		t.Fatalf("provisioned as %#v, listed as %#v (%v)", d, listed, err)
	}
	extra := map[string]string{"infrakit.group": "described", "tag": "added"}
	d, err = p.ProvisionDescribed(ctx, instance.Spec{Tags: extra})
	if want := map[string]string{"infrakit.group": "described", "tag": "added", "added": "by the provider"}; err != nil || !reflect.DeepEqual(d.Tags, want) {
		t.Fatalf("tags the provider added: %#v (%v)", d, err)
	}
	d, err = c.Instance("nowatch").(instance.DescribingProvisioner).ProvisionDescribed(ctx, spec)
	if err != nil || d.ID == "" || d.State != "" || d.Tags != nil {
		t.Fatalf("from a provider that describes nothing: %#v (%v)", d, err)
	}
	d, err = p.ProvisionDescribed(ctx, instance.Spec{Tags: map[string]string{"fail": "state"}})
	if err != nil || d.ID == "" || d.State != "" {
		t.Fatalf("described with a bad state: %#v (%v)", d, err)
	}
	if !waitLogged(logs, "provisioned instance described wrongly", string(d.ID)) {
		t.Errorf("the provider did not say why it sent no description:\n%s", logs)
	}
}
