package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// countsJSON is the "summary" of `plan -json` and the "summary" and
// "planned" of `apply -json` and `destroy -json`: the same fields in each.
type countsJSON struct {
	Add        int `json:"add"`
	Roll       int `json:"roll"`
	Replace    int `json:"replace"`
	Destroy    int `json:"destroy"`
	Publish    int `json:"publish"`
	Republish  int `json:"republish"`
	Unpublish  int `json:"unpublish"`
	Register   int `json:"register"`
	Deregister int `json:"deregister"`
	Authorize  int `json:"authorize"`
	Revoke     int `json:"revoke"`
}

// stepJSON is one step of `plan -json`.
type stepJSON struct {
	ID           int    `json:"id"`
	Kind         string `json:"kind"`
	Object       string `json:"object"`
	After        []int  `json:"after"`
	Group        string `json:"group"`
	Instance     string `json:"instance"`
	Made         int    `json:"made"`
	Awaited      int    `json:"awaited"`
	LoadBalancer string `json:"loadbalancer"`
	Enrollment   string `json:"enrollment"`
}

// planStepsJSON is `plan -json` (format 3.0) as a script reads it.
type planStepsJSON struct {
	FormatVersion string `json:"format_version"`
	Changes       bool   `json:"changes"`
	Ingresses     []struct {
		Ingress string `json:"ingress"`
		Action  string `json:"action"`
	} `json:"ingresses"`
	Steps   []stepJSON `json:"steps"`
	Summary countsJSON `json:"summary"`
}

// step returns the step with ID id (steps are numbered from 1, in order).
func (p planStepsJSON) step(id int) stepJSON {
	if id < 1 || id > len(p.Steps) {
		return stepJSON{}
	}
	return p.Steps[id-1]
}

// planSteps runs `plan -json`.
func (w *workdir) planSteps() planStepsJSON {
	w.t.Helper()
	var p planStepsJSON
	w.jsonOf(&p, "plan", "-json")
	for i, s := range p.Steps {
		if s.ID != i+1 {
			w.t.Fatalf("plan -json: step %d has ID %d", i+1, s.ID)
		}
	}
	return p
}

// applyResultJSON is what `apply -json` and `destroy -json` print.
type applyResultJSON struct {
	Stack   string     `json:"stack"`
	Changes bool       `json:"changes"`
	Summary countsJSON `json:"summary"`
	Planned countsJSON `json:"planned"`
	Failed  []struct {
		Object   string `json:"object"`
		Step     int    `json:"step"`
		Kind     string `json:"kind"`
		Instance string `json:"instance"`
		Error    string `json:"error"`
	} `json:"failed"`
	Skipped int    `json:"skipped"`
	NotRun  int    `json:"not_run"`
	Error   string `json:"error"`
}

// applyJSON runs a -json apply or destroy that must succeed with no step
// failed, skipped or left.
func (w *workdir) applyJSON(args ...string) applyResultJSON {
	w.t.Helper()
	var out applyResultJSON
	w.jsonOf(&out, args...)
	if out.Failed == nil || len(out.Failed) != 0 || out.Skipped != 0 || out.NotRun != 0 || out.Error != "" {
		w.t.Fatalf("infrakit %s: %+v", strings.Join(args, " "), out)
	}
	return out
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
	// Members leave their load balancers in every step below; the delay
	// before they are drained (TestMakeBeforeBreak shows it) only slows
	// this test down.
	w.drainAt("stack.hcl", "0s")
	w.init()

	// The plan (format 3.0) is a graph of steps: the routes are published
	// before any member exists, and each new member is registered and
	// authorized once it runs; its summary counts every step.
	p := w.planSteps()
	if p.FormatVersion != "3.1" || !p.Changes || len(p.Ingresses) != 1 || p.Ingresses[0].Ingress != "test.com" || p.Ingresses[0].Action != "create" {
		t.Fatalf("plan -json: want format 3.0 with ingress test.com to create; got %+v", p)
	}
	if want := (countsJSON{Add: 15, Publish: 3, Register: 20, Authorize: 10}); p.Summary != want {
		t.Fatalf("plan -json summary = %+v, want %+v", p.Summary, want)
	}
	published := map[string]bool{}
	for _, s := range p.Steps {
		switch s.Kind {
		case "publish":
			published[s.LoadBalancer] = true
			for _, d := range s.After {
				if p.step(d).Kind != "record" {
					t.Errorf("publish on %s waits for step %d (%s); a route waits for no member", s.LoadBalancer, d, p.step(d).Kind)
				}
			}
		case "register", "authorize":
			if s.Awaited == 0 || p.step(s.Awaited).Kind != "await" || p.step(s.Awaited).Made != s.Made || !slices.Contains(s.After, s.Awaited) {
				t.Errorf("step %d (%s of a new member on %q) does not wait for the member to run: %+v", s.ID, s.Kind, s.LoadBalancer+s.Enrollment, s)
			}
		}
	}
	if len(published) != 3 || !published["lb1"] || !published["lb2"] || !published["lb3"] {
		t.Fatalf("plan -json publishes routes on %v, want lb1, lb2 and lb3", published)
	}

	w.expect(2, "plan", "-detailed-exitcode")
	// apply reports, field by field, the counts the plan showed.
	if done := w.applyJSON("apply", "-auto-approve", "-json"); done.Summary != p.Summary || done.Planned != p.Summary {
		t.Fatalf("apply -json: summary %+v, planned %+v; the plan said %+v", done.Summary, done.Planned, p.Summary)
	}
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

	// destroy takes every member out of the load balancers and the
	// enrollment, then drains and destroys it, and unpublishes the routes;
	// it reports what its plan counted.
	done := w.applyJSON("destroy", "-auto-approve", "-json")
	if want := (countsJSON{Destroy: 15, Unpublish: 3, Deregister: 20, Revoke: 10}); done.Summary != want || done.Planned != want {
		t.Fatalf("destroy -json: summary %+v, planned %+v, want both %+v", done.Summary, done.Planned, want)
	}
	if files := w.simulatorInstances("compute"); len(files) != 0 {
		t.Fatalf("after destroy the simulator holds %q", files)
	}
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

// TestSavedPlan: `apply PLANFILE` runs the plan `plan -out` saved and
// nothing else, and reports its counts; a plan made before the world moved
// (an instance vanished) or before the state changed (it was applied
// already) is refused, and nothing is done.
func TestSavedPlan(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/e2e")
	w.drainAt("stack.hcl", "0s")
	w.init()
	w.ok("apply", "-auto-approve")

	b, err := os.ReadFile(filepath.Join(w.dir, "stack.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), "size = 10\n") != 1 {
		t.Fatal("testdata/e2e/stack.hcl: want one `size = 10` (the cattle) to change")
	}
	w.writeFile("stack.hcl", strings.Replace(string(b), "size = 10\n", "size = 12\n", 1))
	var stale planStepsJSON
	w.jsonOf(&stale, "plan", "-json", "-out", "grow.plan")
	if want := (countsJSON{Add: 2, Register: 2, Authorize: 2}); stale.Summary != want {
		t.Fatalf("plan -out: summary %+v, want %+v", stale.Summary, want)
	}

	// The world moves: the saved plan is refused and nothing is made.
	gone := w.groups()["cattle"].ids()[0]
	if err := os.Remove(w.instancePath(gone)); err != nil {
		t.Fatal(err)
	}
	before := w.fileStamps("compute")
	if res := w.expect(1, "apply", "grow.plan"); !strings.Contains(res.stderr, "make the plan again") {
		t.Errorf("apply of a plan made before an instance vanished: stderr does not say to make the plan again\n%s", res)
	}
	if after := w.fileStamps("compute"); !equalMaps(before, after) {
		t.Fatalf("a refused saved plan touched the instances:\nbefore %v\nafter  %v", before, after)
	}

	// Planned again, it is applied as saved: the counts it showed are the
	// counts done.
	var p planStepsJSON
	w.jsonOf(&p, "plan", "-json", "-out", "grow.plan")
	if p.Summary.Add != 3 || p.Summary.Register != 3 || p.Summary.Authorize != 3 || p.Summary.Destroy != 0 {
		t.Fatalf("plan -out after %s vanished: summary %+v, want 3 instances to add, registered and authorized", gone, p.Summary)
	}
	if done := w.applyJSON("apply", "-json", "grow.plan"); done.Summary != p.Summary || done.Planned != p.Summary {
		t.Fatalf("apply -json grow.plan: summary %+v, planned %+v; the saved plan said %+v", done.Summary, done.Planned, p.Summary)
	}
	w.checkWalkthrough(5, 12)

	// Applied once, the plan is stale.
	before = w.fileStamps("compute")
	if res := w.expect(1, "apply", "grow.plan"); !strings.Contains(res.stderr, "Saved plan is stale") {
		t.Errorf("a saved plan applied twice: stderr does not say it is stale\n%s", res)
	}
	if after := w.fileStamps("compute"); !equalMaps(before, after) {
		t.Fatalf("a stale saved plan touched the instances")
	}
	w.expect(0, "plan", "-detailed-exitcode")
}
