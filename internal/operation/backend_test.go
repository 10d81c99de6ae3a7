package operation

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller"
	"github.com/infrakit/infrakit/internal/state"
	stateetcd "github.com/infrakit/infrakit/internal/state/etcd"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
)

// withBackend puts a backend block into stackTemplate's stack block.
func withBackend(size int, block string) string {
	return strings.Replace(fmt.Sprintf(stackTemplate, size, "v1"), `stack "test" {}`, "stack \"test\" {\n"+block+"\n}", 1)
}

func etcdBlock(endpoint, prefix string) string {
	return fmt.Sprintf(`  backend "etcd" {
    endpoints = [%q]
    prefix    = %q
    lease_ttl = "2s"
  }`, endpoint, prefix)
}

// A stack whose backend block is not the backend init recorded is refused
// with a diagnostic at the block (or at the stack block, when the stack has
// none) that says to run init; the runner keeps to the recorded one.
func TestBackendChangedIsADiagnostic(t *testing.T) {
	w := newWorkdir(t, withBackend(1, etcdBlock("http://127.0.0.1:1", "/never")))
	r := w.runner(Options{})
	if _, ok := r.StateStore().(*state.Local); !ok || !r.Backend().IsLocal() {
		t.Fatalf("without a record the runner uses %T (%s), want the local file", r.StateStore(), r.Backend())
	}
	_, _, diags := r.LoadStack(ctxT(t))
	d := backendDiag(t, diags)
	if d.Subject == nil || d.Subject.Start.Line != 3 || !strings.HasSuffix(d.Subject.Filename, "main.hcl") {
		t.Errorf("diagnostic at %v, want the backend block (main.hcl:3)", d.Subject)
	}

	// The other way round: init recorded etcd, the stack says local.
	w2 := newWorkdir(t, fmt.Sprintf(stackTemplate, 1, "v1"))
	if err := stateetcd.WriteRecord(w2.dir, &config.Backend{Type: config.BackendEtcd, Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "/never"}); err != nil {
		t.Fatal(err)
	}
	r2 := w2.runner(Options{})
	if _, ok := r2.StateStore().(*stateetcd.Backend); !ok {
		t.Fatalf("with an etcd record the runner uses %T", r2.StateStore())
	}
	_, _, diags = r2.LoadStack(ctxT(t))
	d = backendDiag(t, diags)
	if d.Subject == nil || d.Subject.Start.Line != 2 {
		t.Errorf("diagnostic at %v, want the stack block (line 2)", d.Subject)
	}
}

func backendDiag(t *testing.T, diags hcl.Diagnostics) *hcl.Diagnostic {
	t.Helper()
	for _, d := range diags {
		if d.Severity == hcl.DiagError && strings.Contains(d.Summary, "infrakit init") {
			if !strings.Contains(d.Detail, "-migrate-state") {
				t.Errorf("detail does not mention -migrate-state: %s", d.Detail)
			}
			return d
		}
	}
	t.Fatalf("no backend diagnostic in %v", diags)
	return nil
}

// Two directories whose init recorded one etcd backend share the state
// (against a real etcd server process): what one applies, the other plans
// as no change, lists, scales and destroys; the state is never a local file.
func TestEtcdBackendFromAnyDirectory(t *testing.T) {
	if _, err := os.Stat(etcdtest.RealBinary); err != nil {
		t.Skipf("%s is absent (apt-get install etcd-server; .ci/run installs it)", etcdtest.RealBinary)
	}
	srv, err := etcdtest.StartProcess(etcdtest.RealBinary, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := ctxT(t)
	sim := "INFRAKIT_SIMULATOR_DIR=" + filepath.Join(t.TempDir(), "sim")
	src := withBackend(3, etcdBlock(srv.Endpoints[0], "/infrakit/any-dir"))
	var rs []*Runner
	for range 2 {
		w := newWorkdir(t, src)
		st, diags := config.Load(w.dir)
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		if err := stateetcd.WriteRecord(w.dir, st.Backend); err != nil {
			t.Fatal(err)
		}
		r := w.runner(Options{HostEnv: []string{sim}, LockTimeout: 10 * time.Second})
		if _, ok := r.StateStore().(*stateetcd.Backend); !ok {
			t.Fatalf("runner state store is %T", r.StateStore())
		}
		rs = append(rs, r)
		t.Cleanup(func() {
			if _, err := os.Stat(filepath.Join(w.dir, StateFile)); err == nil {
				t.Errorf("%s has a local state file", w.dir)
			}
		})
	}
	a, b := rs[0], rs[1]
	planAndApply(t, ctx, a, PlanMode{})
	p, err := b.Plan(ctx, load(t, ctx, b), PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Errorf("the second directory plans changes after the first applied: %+v", p.Groups)
	}
	g, err := describeGroups(t, ctx, b, &controller.Metadata{Name: "miners"})
	if err != nil || len(g) != 1 || len(g[0].Instances) != 3 {
		t.Fatalf("group miners from the second directory: %+v (%v)", g, err)
	}
	must(t, "SetSize 5")(b.Groups().SetSize(ctx, "miners", 5, controller.ScaleOptions{}))
	doc, err := a.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(doc.Groups["miners"].Instances); n != 5 || *doc.Stack.Group("miners").Size != 5 {
		t.Errorf("the first directory reads %d miners recorded, size %d; want 5 and 5", n, *doc.Stack.Group("miners").Size)
	}
	ids := recordedIDs(doc.Groups["miners"])
	if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Errorf("recorded members %v are not each once", ids)
	}
	must(t, "Destroy")(a.Groups().Destroy(ctx, &controller.Metadata{Name: "miners"}))
	if doc, err := b.State(ctx); err != nil || doc.Groups["miners"] != nil {
		t.Errorf("after destroy-group in the first directory the second reads %v (%v)", doc.Groups["miners"], err)
	}
}

// A plan of stack files that rename the stack the state holds is refused
// at the stack block: under the new name every group would be made again and the
// old instances left to nobody. Once destroyed under the old name, the new
// name is fine.
func TestStackRenamedIsADiagnostic(t *testing.T) {
	ctx := ctxT(t)
	w := newWorkdir(t, fmt.Sprintf(stackTemplate, 1, "v1"))
	r := w.runner(Options{})
	defer r.Close()
	planAndApply(t, ctx, r, PlanMode{})
	made := len(w.simulated())

	w.writeStack(strings.Replace(fmt.Sprintf(stackTemplate, 1, "v1"), `stack "test"`, `stack "renamed"`, 1))
	_, err := r.Plan(ctx, load(t, ctx, r), PlanMode{})
	var diags hcl.Diagnostics
	var d *hcl.Diagnostic
	if errors.As(err, &diags) {
		for _, x := range diags {
			if x.Summary == "Stack renamed" {
				d = x
			}
		}
	}
	if d == nil {
		t.Fatalf("renamed stack planned with %v, want a Stack renamed error", err)
	}
	if d.Subject == nil || d.Subject.Start.Line != 2 || !strings.Contains(d.Detail, `stack "test"`) || !strings.Contains(d.Detail, `"renamed"`) {
		t.Errorf("diagnostic at %v: %s", d.Subject, d.Detail)
	}
	if got := len(w.simulated()); got != made {
		t.Errorf("the simulator holds %d instances after the refusal, want %d", got, made)
	}

	planAndApply(t, ctx, r, PlanMode{Destroy: true})
	// Nothing left under the old name: the new one plans.
	if _, err := r.Plan(ctx, load(t, ctx, r), PlanMode{}); err != nil {
		t.Fatalf("plan after destroying the old stack: %v", err)
	}
}
