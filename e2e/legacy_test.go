package e2e

import (
	"encoding/json"
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

// instanceContents lists what the simulator holds for each compute
// instance, without what differs between two applies of the same stack
// (IDs, addresses, times), sorted: the instances as a provider sees them.
func (w *workdir) instanceContents() []string {
	w.t.Helper()
	var out []string
	for _, id := range w.simulatorInstances("compute") {
		b, err := os.ReadFile(filepath.Join(w.dir, ".infrakit", "simulator", "instances", "compute", id+".json"))
		if err != nil {
			w.t.Fatal(err)
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
		norm, err := json.Marshal(rec)
		if err != nil {
			w.t.Fatal(err)
		}
		out = append(out, string(norm))
	}
	slices.Sort(out)
	return out
}

// TestLegacyWalkthrough runs the walk-through from its old-format files
// (testdata/legacy/json and testdata/legacy/yaml) with the real binaries:
// init installs the providers the specifications imply (there is no
// provider block), validate asks them about every group, load balancer and
// authorizer type, and apply makes the groups. Then `infrakit convert`
// prints the files as HCL: planned where the old files were applied it
// changes nothing, and applied in a fresh directory it makes the same
// instances.
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
			made := old.instanceContents()

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
			if got := fresh.instanceContents(); !slices.Equal(got, made) {
				t.Errorf("the converted stack made other instances\nfrom HCL:\n%s\nfrom the old files:\n%s",
					strings.Join(got, "\n"), strings.Join(made, "\n"))
			}
		})
	}
}

// writeConverted writes converted HCL as main.hcl and returns its path.
func (w *workdir) writeConverted(src string) string {
	w.t.Helper()
	w.writeFile("main.hcl", src)
	return filepath.Join(w.dir, "main.hcl")
}
