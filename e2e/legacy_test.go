package e2e

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// copyLegacy copies every file of testdata/legacy/DIR (stack.hcl and the
// old-format specifications) into the workdir and returns their names.
func (w *workdir) copyLegacy(dir string) []string {
	w.t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "legacy", dir, "*"))
	if err != nil || len(files) == 0 {
		w.t.Fatalf("no files in testdata/legacy/%s (%v)", dir, err)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			w.t.Fatal(err)
		}
		w.writeFile(filepath.Base(f), string(b))
		names = append(names, filepath.Base(f))
	}
	return names
}

// groupInstances lists, for each group `group ls -json` shows, what the
// simulator holds for each of its compute instances, without what differs
// between two applies of the same stack (the ID, tags whose value is the ID,
// address, creation time), sorted: the instances as a provider sees them.
func (w *workdir) groupInstances() map[string][]string {
	w.t.Helper()
	out := map[string][]string{}
	for name, g := range w.groups() {
		contents := []string{}
		for _, id := range g.ids() {
			b, err := os.ReadFile(filepath.Join(w.dir, ".infrakit", "simulator", "instances", "compute", id+".json"))
			if err != nil {
				w.t.Fatalf("group %s instance %s: %v", name, id, err)
			}
			var rec struct {
				Type        string            `json:"type"`
				LogicalID   *string           `json:"logical_id"`
				Tags        map[string]string `json:"tags"`
				Properties  json.RawMessage   `json:"properties"`
				Init        string            `json:"init"`
				Attachments json.RawMessage   `json:"attachments"`
			}
			if err := json.Unmarshal(b, &rec); err != nil {
				w.t.Fatalf("instance %s: %v", id, err)
			}
			for k, v := range rec.Tags {
				if v == id {
					delete(rec.Tags, k)
				}
			}
			norm, err := json.Marshal(rec)
			if err != nil {
				w.t.Fatal(err)
			}
			contents = append(contents, string(norm))
		}
		slices.Sort(contents)
		out[name] = contents
	}
	return out
}

// walkthroughLBs are the walk-through's load balancers and the group each
// routes to.
var walkthroughLBs = map[string]string{"lb1": "miners", "lb2": "miners", "lb3": "cattle"}

// applied is what an applied walk-through holds, with the IDs the providers
// chose normalised away, so that two applies of the same stack compare equal.
type applied struct {
	instances map[string][]string // group -> its instances' contents
	routes    map[string]string   // load balancer -> its routes as JSON
	backends  map[string]int      // load balancer -> number of backends
	auths     []string            // nfs authorizations' properties, member ids as "<member>"
}

// observe reads the groups, the routes and backends of lb1, lb2 and lb3 and
// the authorizations of enrollment nfs through the CLI, checking on the way
// that every load balancer has routes and a backend per member of its
// group, and every authorization names its member as host with iops 10.
func (w *workdir) observe() applied {
	w.t.Helper()
	a := applied{instances: w.groupInstances(), routes: map[string]string{}, backends: map[string]int{}}
	gs := w.groups()
	for lb, group := range walkthroughLBs {
		var r routesJSON
		w.jsonOf(&r, "lb", "routes", "ls", lb, "-json")
		if r.LoadBalancer != lb || len(r.Routes) == 0 {
			w.t.Fatalf("lb routes ls %s -json: want the load balancer's routes; got %+v", lb, r)
		}
		b, err := json.Marshal(r.Routes)
		if err != nil {
			w.t.Fatal(err)
		}
		a.routes[lb] = string(b)
		members := gs[group].ids()
		if got := w.backends(lb); len(got) != len(members) || !slices.Equal(got, members) {
			w.t.Fatalf("%s backends = %q, want the %d %s %q", lb, got, len(members), group, members)
		}
		a.backends[lb] = len(members)
	}
	for _, auth := range w.authorizations("nfs").Authorizations {
		if auth.SourceID == "" || auth.Properties["host"] != auth.SourceID || auth.Properties["iops"] != float64(10) {
			w.t.Fatalf("authorization %s for %q has properties %v, want host = member id and iops = 10", auth.ID, auth.SourceID, auth.Properties)
		}
		shape := map[string]any{}
		for k, v := range auth.Properties {
			if v == auth.SourceID {
				v = "<member>"
			}
			shape[k] = v
		}
		b, err := json.Marshal(shape)
		if err != nil {
			w.t.Fatal(err)
		}
		a.auths = append(a.auths, string(b))
	}
	slices.Sort(a.auths)
	return a
}

// sameAs reports every way in which b, applied from the converted HCL,
// differs from a, applied from the old-format files.
func (a applied) sameAs(t *testing.T, b applied) {
	t.Helper()
	if len(a.instances) != len(b.instances) {
		t.Errorf("the converted stack has groups %v, the old files %v", slices.Sorted(maps.Keys(b.instances)), slices.Sorted(maps.Keys(a.instances)))
	}
	for group, want := range a.instances {
		got, ok := b.instances[group]
		switch {
		case !ok:
			t.Errorf("the converted stack has no group %s", group)
		case len(got) != len(want):
			t.Errorf("group %s: %d instances from the converted stack, %d from the old files", group, len(got), len(want))
		case !slices.Equal(got, want):
			t.Errorf("group %s: the converted stack made other instances\nfrom HCL:\n%s\nfrom the old files:\n%s",
				group, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	for lb := range walkthroughLBs {
		if a.routes[lb] != b.routes[lb] {
			t.Errorf("%s routes from the converted stack %s, from the old files %s", lb, b.routes[lb], a.routes[lb])
		}
		if a.backends[lb] != b.backends[lb] {
			t.Errorf("%s has %d backends from the converted stack, %d from the old files", lb, b.backends[lb], a.backends[lb])
		}
	}
	if !slices.Equal(a.auths, b.auths) {
		t.Errorf("nfs authorizations from the converted stack (%d):\n%s\nfrom the old files (%d):\n%s",
			len(b.auths), strings.Join(b.auths, "\n"), len(a.auths), strings.Join(a.auths, "\n"))
	}
}

// TestLegacyWalkthrough runs the walk-through from its old-format files
// (testdata/legacy/json and testdata/legacy/yaml) with the real binaries:
// init installs the providers the specifications imply (there is no
// provider block), validate asks them about every group, load balancer and
// authorizer type, and apply makes the groups. Then `infrakit convert`
// prints the files as HCL: planned where the old files were applied it
// changes nothing, and applied in a fresh directory it makes the same
// instances (by group), the same routes on lb1, lb2 and lb3, a backend per
// member of each load balancer's group, and the same authorizations.
func TestLegacyWalkthrough(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			old := newWorkdir(t)
			files := old.copyLegacy(format)
			res := old.ok("init", "-plugin-dir", binDir)
			for _, want := range []string{"Installed simulator", "Installed vanilla"} {
				if !strings.Contains(res.stdout, want) {
					t.Errorf("init does not install the implied providers: lacks %q\n%s", want, res)
				}
			}
			if res := old.ok("validate"); !strings.Contains(res.stdout, "Success!") || res.stderr != "" {
				t.Errorf("validate:\n%s", res)
			}
			old.expect(2, "plan", "-detailed-exitcode")
			// From nothing, the old files and the walk-through's HCL plan
			// the same groups, routes, backends and authorizations: the
			// same steps, in the same order, with the same dependencies.
			hcl := newWorkdir(t)
			hcl.copyStack("testdata/e2e")
			hcl.init()
			var fromOld, fromHCL map[string]json.RawMessage
			old.jsonOf(&fromOld, "plan", "-json")
			hcl.jsonOf(&fromHCL, "plan", "-json")
			for _, k := range []string{"format_version", "stack", "changes", "groups", "ingresses", "enrollments", "steps", "summary"} {
				if len(fromHCL[k]) == 0 {
					t.Errorf("plan -json has no %q", k)
				}
				if string(fromOld[k]) != string(fromHCL[k]) {
					t.Errorf("plan -json %q from the old files:\n%s\nfrom the HCL:\n%s", k, fromOld[k], fromHCL[k])
				}
			}
			old.ok("apply", "-auto-approve")
			old.expect(0, "plan", "-detailed-exitcode")
			groups := old.groups()
			if len(groups["miners"].Instances) != 5 || len(groups["cattle"].Instances) != 10 {
				t.Fatalf("miners %d and cattle %d instances, want 5 and 10", len(groups["miners"].Instances), len(groups["cattle"].Instances))
			}
			for _, inst := range groups["cattle"].Instances {
				if inst.Tags["infrakit.stack"] != "mystack" || inst.Tags["tier"] != "web" {
					t.Fatalf("cattle instance %s tags %v", inst.ID, inst.Tags)
				}
			}
			made := old.observe()
			if n := len(made.auths); n != 10 {
				t.Fatalf("nfs holds %d authorizations, want one per cattle instance (10)", n)
			}

			converted := old.ok(append([]string{"convert"}, files...)...)
			if converted.stderr != "" {
				t.Errorf("convert warns about the walk-through:\n%s", converted)
			}
			if again := old.ok("convert", filepath.Base(old.writeConverted(converted.stdout))); again.stdout != converted.stdout {
				t.Errorf("convert of its own output differs:\n%s\n---\n%s", converted.stdout, again.stdout)
			}

			// Where the old files were applied, the HCL plans no change.
			for _, f := range files {
				if err := os.Remove(filepath.Join(old.dir, f)); err != nil {
					t.Fatal(err)
				}
			}
			old.expect(0, "plan", "-detailed-exitcode")

			// In a fresh directory, the HCL makes the same instances.
			fresh := newWorkdir(t)
			fresh.writeFile("main.hcl", converted.stdout)
			fresh.init()
			fresh.ok("apply", "-auto-approve")
			made.sameAs(t, fresh.observe())
		})
	}
}

// writeConverted writes converted HCL as main.hcl and returns its path.
func (w *workdir) writeConverted(src string) string {
	w.t.Helper()
	w.writeFile("main.hcl", src)
	return filepath.Join(w.dir, "main.hcl")
}
