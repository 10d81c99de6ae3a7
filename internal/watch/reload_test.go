package watch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/syncbuf"
	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// extraGroup is group "web" as a legacy specification, kept outside the
// working directory and named with -f. Its Updating.Count is a field
// infrakit has no use for: a warning.
const extraGroup = `{"ID": "web", "Properties": {
  "Allocation": {"Size": 2},
  "Instance": {"Plugin": "simulator/compute", "Properties": {"note": "a"}},
  "Flavor": {"Plugin": "vanilla", "Properties": {"Init": ["echo web"]}},
  "Updating": {"Count": 2%s}
}}`

// A stack applied with -f files is reloaded with them (Options.ExtraFiles):
// SIGHUP finds the files match the applied stack instead of reporting the
// group removed. Their warnings are logged once, not at every reload, and
// again when they change.
func TestReloadExtraFilesAndWarnings(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, `stack "test" {}

provider "simulator" {}
provider "vanilla" {}
`)
	extra := filepath.Join(t.TempDir(), "web.json")
	writeExtra := func(more string) {
		t.Helper()
		if err := os.WriteFile(extra, []byte(strings.Replace(extraGroup, "%s", more, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeExtra("")
	applyWith(t, w, extra)

	var logs syncbuf.Buffer
	opts := testOptions(w)
	opts.ExtraFiles = []string{extra}
	opts.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	reload := make(chan struct{})
	opts.Reload = reload
	r := start(t, opts)
	testwait.For(t, 10*time.Second, "the first pass", func() bool { return r.status().Passes > 0 })

	reloads := func() []string {
		var out []string
		for _, e := range r.events() {
			if e.Kind == status.EventReload {
				out = append(out, e.Message)
			}
		}
		return out
	}
	warned := func() int { return strings.Count(logs.String(), "reload: the stack files load with warnings") }
	sighup := func(n int) string {
		t.Helper()
		reload <- struct{}{}
		testwait.For(t, 10*time.Second, "reload event", func() bool { return len(reloads()) == n })
		return reloads()[n-1]
	}

	msg := sighup(1)
	if !strings.Contains(msg, "the stack files match the applied stack") || !strings.Contains(msg, "1 warning") {
		t.Errorf("first reload: %q; want the -f file read, matching, with its warning", msg)
	}
	if warned() != 1 || !strings.Contains(logs.String(), "Field not carried over") {
		t.Errorf("the warning should be logged once:\n%s", logs.String())
	}

	if msg := sighup(2); !strings.Contains(msg, "match") || warned() != 1 {
		t.Errorf("second reload of the same files: %q, warnings logged %d times; want once", msg, warned())
	}

	// Other warnings are logged again: two now.
	writeExtra(`, "SkipBeforeInstanceDestroy": true`)
	if msg := sighup(3); !strings.Contains(msg, "match") || !strings.Contains(msg, "2 warnings") || warned() != 2 {
		t.Errorf("reload of files with other warnings: %q, logged %d times; want twice", msg, warned())
	}
	// Files that do not load are logged as errors; once they load again,
	// their warnings are logged again.
	writeExtra(`, "Bogus": true`)
	if msg := sighup(4); !strings.Contains(msg, "do not load") {
		t.Errorf("reload of a broken -f file: %q", msg)
	}
	writeExtra(`, "SkipBeforeInstanceDestroy": true`)
	if msg := sighup(5); !strings.Contains(msg, "match") || warned() != 3 {
		t.Errorf("reload after the files were fixed: %q, logged %d times; want 3", msg, warned())
	}
	if n := len(w.instances()); n != 2 {
		t.Errorf("%d instances, want the applied 2", n)
	}
}

// applyWith plans and applies the working directory's stack with extra
// files, as `infrakit apply -f` does.
func applyWith(t *testing.T, w *workdir, extra ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := operation.New(ctx, operation.Options{WorkDir: w.dir, ExtraFiles: extra, HostEnv: w.env, LockTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st, _, diags := r.LoadStack(ctx)
	if diags.HasErrors() {
		t.Fatalf("load stack: %s", diags.Error())
	}
	p, err := r.Plan(ctx, st, operation.PlanMode{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
}
