package e2e

import (
	"encoding/json"
	"slices"
	"testing"
)

// The -json shapes of DESIGN.md, declared here as a user's script reads them.
type backendsJSON struct {
	LoadBalancer string   `json:"loadbalancer"`
	Backends     []string `json:"backends"`
}

type routesJSON struct {
	LoadBalancer string `json:"loadbalancer"`
	Routes       []struct {
		LBPort      int    `json:"lb_port"`
		LBProtocol  string `json:"lb_protocol"`
		Port        int    `json:"port"`
		Protocol    string `json:"protocol"`
		Certificate string `json:"certificate"`
	} `json:"routes"`
}

type authorizationsJSON struct {
	Enrollment     string `json:"enrollment"`
	Authorizations []struct {
		ID         string         `json:"id"`
		SourceID   string         `json:"source_id"`
		Properties map[string]any `json:"properties"`
	} `json:"authorizations"`
}

func (w *workdir) jsonOf(v any, args ...string) {
	w.t.Helper()
	res := w.ok(args...)
	if err := json.Unmarshal([]byte(res.stdout), v); err != nil {
		w.t.Fatalf("%v\n%s", err, res)
	}
}

// backends runs `lb backends ls NAME -json` and returns the IDs, sorted.
func (w *workdir) backends(lb string) []string {
	w.t.Helper()
	var out backendsJSON
	w.jsonOf(&out, "lb", "backends", "ls", lb, "-json")
	if out.LoadBalancer != lb {
		w.t.Fatalf("lb backends ls %s -json: loadbalancer = %q", lb, out.LoadBalancer)
	}
	slices.Sort(out.Backends)
	return out.Backends
}

// authorizations runs `enrollment describe NAME -json` (flag first, to
// show flags may stand before the name).
func (w *workdir) authorizations(name string) authorizationsJSON {
	w.t.Helper()
	var out authorizationsJSON
	w.jsonOf(&out, "enrollment", "describe", "-json", name)
	if out.Enrollment != name {
		w.t.Fatalf("enrollment describe: enrollment = %q, want %q", out.Enrollment, name)
	}
	return out
}

// checkWalkthrough checks that lb1 and lb2 route to the miners, lb3 to the
// cattle, and nfs holds one authorization per cattle member, rendered from it.
func (w *workdir) checkWalkthrough(miners, cattle int) {
	w.t.Helper()
	gs := w.groups()
	m, c := gs["miners"].ids(), gs["cattle"].ids()
	if len(m) != miners || len(c) != cattle {
		w.t.Fatalf("group ls: %d miners and %d cattle, want %d and %d", len(m), len(c), miners, cattle)
	}
	for _, lb := range []string{"lb1", "lb2"} {
		if got := w.backends(lb); !slices.Equal(got, m) && len(got)+len(m) > 0 {
			w.t.Fatalf("%s backends = %q, want the miners %q", lb, got, m)
		}
	}
	if got := w.backends("lb3"); !slices.Equal(got, c) && len(got)+len(c) > 0 {
		w.t.Fatalf("lb3 backends = %q, want the cattle %q", got, c)
	}
	auths := w.authorizations("nfs")
	var sources []string
	for _, a := range auths.Authorizations {
		if a.Properties["host"] != a.SourceID || a.Properties["iops"] != float64(10) {
			w.t.Fatalf("authorization %s for %s has properties %v, want host = member id and iops = 10", a.ID, a.SourceID, a.Properties)
		}
		sources = append(sources, a.SourceID)
	}
	slices.Sort(sources)
	if !slices.Equal(sources, c) && len(sources)+len(c) > 0 {
		w.t.Fatalf("nfs authorizes %q, want exactly the cattle %q", sources, c)
	}
}

// TestWalkthrough is issue 5's walk-through of DESIGN.md's e2e stack with the
// real binaries: apply, scale both groups, destroy the miners, free the
// cattle, apply again. (Healing with watch running is watch's test.)
func TestWalkthrough(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/e2e")
	w.init()

	// The plan shows the routes to publish before any member exists.
	var p struct {
		Changes   bool `json:"changes"`
		Ingresses []struct {
			Ingress       string `json:"ingress"`
			Action        string `json:"action"`
			LoadBalancers []struct {
				Publish []any `json:"publish"`
			} `json:"loadbalancers"`
		} `json:"ingresses"`
		Summary struct {
			Routes int `json:"routes"`
		} `json:"summary"`
	}
	w.jsonOf(&p, "plan", "-json")
	if !p.Changes || len(p.Ingresses) != 1 || p.Ingresses[0].Ingress != "test.com" || p.Summary.Routes != 3 {
		t.Fatalf("plan -json: want ingress test.com with 3 routes to publish; got %+v", p)
	}

	w.expect(2, "plan", "-detailed-exitcode")
	w.ok("apply", "-auto-approve")
	w.expect(0, "plan", "-detailed-exitcode")
	w.checkWalkthrough(5, 10)

	var routes routesJSON
	w.jsonOf(&routes, "lb", "routes", "ls", "lb2", "-json")
	if routes.LoadBalancer != "lb2" || len(routes.Routes) != 1 {
		t.Fatalf("lb routes ls lb2: want exactly one route; got %+v", routes)
	}
	if r := routes.Routes[0]; r.LBPort != 8080 || r.LBProtocol != "https" || r.Port != 8080 || r.Protocol != "http" || r.Certificate != "external-cer-id2" {
		t.Fatalf("lb2 route = %+v, want 8080 https -> 8080 http, certificate external-cer-id2", r)
	}

	// The group verbs leave backends and authorizations right when they
	// return, without a watch.
	w.ok("group", "scale", "miners", "10")
	w.ok("group", "scale", "cattle", "20")
	w.checkWalkthrough(10, 20)
	if n := len(w.authorizations("nfs").Authorizations); n != 20 {
		t.Fatalf("nfs holds %d authorizations after scaling cattle to 20, want 20", n)
	}
	victim := w.groups()["cattle"].ids()[0]
	w.ok("group", "destroy-instances", "cattle", victim)
	w.checkWalkthrough(10, 19)

	w.ok("group", "destroy", "miners", "-auto-approve")
	if got := w.backends("lb1"); len(got) != 0 {
		t.Fatalf("lb1 backends after group destroy miners = %q, want none", got)
	}
	if got := w.backends("lb2"); len(got) != 0 {
		t.Fatalf("lb2 backends after group destroy miners = %q, want none", got)
	}

	// Freeing the cattle touches nothing in the provider.
	stamps, lb3, auths := w.fileStamps("compute"), w.backends("lb3"), w.authorizations("nfs")
	w.ok("group", "free", "cattle")
	if got := w.fileStamps("compute"); !equalMaps(got, stamps) {
		t.Fatalf("group free changed instance files")
	}
	if got := w.backends("lb3"); !slices.Equal(got, lb3) {
		t.Fatalf("group free changed lb3: %q -> %q", lb3, got)
	}
	if got := w.authorizations("nfs"); len(got.Authorizations) != len(auths.Authorizations) {
		t.Fatalf("group free changed the authorizations: %d -> %d", len(auths.Authorizations), len(got.Authorizations))
	}

	// A later apply resumes: the stack's sizes again, everything following.
	w.ok("apply", "-auto-approve")
	w.expect(0, "plan", "-detailed-exitcode")
	w.checkWalkthrough(5, 10)

	// Freeing the ingress and the enrollment leaves them as they are while
	// the groups change; apply resumes them.
	w.ok("ingress", "free", "test.com")
	w.ok("enrollment", "free", "nfs")
	before := w.backends("lb3")
	w.ok("group", "scale", "cattle", "12")
	if got := w.backends("lb3"); !slices.Equal(got, before) {
		t.Fatalf("a freed ingress was synced: lb3 %q -> %q", before, got)
	}
	w.ok("apply", "-auto-approve")
	w.checkWalkthrough(5, 10)

	// destroy tears the ingress and the enrollment down first.
	w.ok("destroy", "-auto-approve")
	for _, lb := range []string{"lb1", "lb2", "lb3"} {
		var r routesJSON
		w.jsonOf(&r, "lb", "routes", "ls", lb, "-json")
		if len(r.Routes) != 0 || len(w.backends(lb)) != 0 {
			t.Fatalf("after destroy %s still has routes %+v or backends", lb, r.Routes)
		}
	}
	if n := len(w.authorizations("nfs").Authorizations); n != 0 {
		t.Fatalf("after destroy nfs holds %d authorizations", n)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
