package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// binDir holds the binaries TestMain built; set once before any test runs
// and only read afterwards.
var binDir string

// commandTimeout bounds one infrakit invocation, so a hang fails the test
// with the command's output instead of hitting the go test deadline.
const commandTimeout = 3 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "infrakit-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := buildBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}

// buildBinaries builds infrakit and the providers into dir, named as
// `make build` names them in bin/.
func buildBinaries(dir string) error {
	builds := map[string]string{
		"infrakit":                      "github.com/infrakit/infrakit",
		"infrakit-provider-simulator":   "github.com/infrakit/infrakit/plugins/simulator",
		"infrakit-provider-vanilla":     "github.com/infrakit/infrakit/plugins/vanilla",
		"infrakit-provider-process":     "github.com/infrakit/infrakit/plugins/process",
		"infrakit-provider-healthcheck": "github.com/infrakit/infrakit/plugins/healthcheck",
		"infrakit-provider-haproxy":     "github.com/infrakit/infrakit/plugins/haproxy",
		"infrakit-provider-nfsexports":  "github.com/infrakit/infrakit/plugins/nfsexports",
		"infrakit-provider-docker":      "github.com/infrakit/infrakit/plugins/docker",
		"infrakit-provider-prometheus":  "github.com/infrakit/infrakit/plugins/prometheus",
		"infrakit-provider-etcdmember":  "github.com/infrakit/infrakit/plugins/etcdmember",
		// The HTTP server the process instances of testdata/real run.
		"webserver": "github.com/infrakit/infrakit/testdata/webserver",
	}
	for name, pkg := range builds {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	return nil
}

// workdir is a scratch stack directory in which a test runs infrakit.
type workdir struct {
	t   *testing.T
	dir string
	env []string
}

// newWorkdir returns an empty scratch directory with a clean environment:
// none of the INFRAKIT_* variables of the caller's shell, and a HOME of its
// own so ~/.infrakit/plugins cannot supply a provider.
func newWorkdir(t *testing.T) *workdir {
	t.Helper()
	w := &workdir{t: t, dir: t.TempDir()}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "INFRAKIT_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		w.env = append(w.env, kv)
	}
	w.env = append(w.env, "HOME="+t.TempDir())
	return w
}

// copyStack copies the *.hcl files of a testdata directory (relative to the
// module root) into the workdir.
func (w *workdir) copyStack(testdataDir string) {
	w.t.Helper()
	files, err := filepath.Glob(filepath.Join("..", testdataDir, "*.hcl"))
	if err != nil || len(files) == 0 {
		w.t.Fatalf("no stack files in %s (%v)", testdataDir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			w.t.Fatal(err)
		}
		w.writeFile(filepath.Base(f), string(b))
	}
}

// groupBlock is the first line of a group block in a stack file.
var groupBlock = regexp.MustCompile(`(?m)^(group "[^"]+" \{)$`)

// drainAt sets drain_delay = d in every group block of the workdir's stack
// file name: for tests in which the delay before a member that left its
// load balancers is drained only slows them down.
func (w *workdir) drainAt(name, d string) {
	w.t.Helper()
	b, err := os.ReadFile(filepath.Join(w.dir, name))
	if err != nil {
		w.t.Fatal(err)
	}
	if !groupBlock.Match(b) {
		w.t.Fatalf("%s has no group block", name)
	}
	w.writeFile(name, groupBlock.ReplaceAllString(string(b), fmt.Sprintf("$1\n  drain_delay = %q", d)))
}

func (w *workdir) writeFile(name, content string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, name), []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// result is one finished infrakit invocation.
type result struct {
	args           []string
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("infrakit %s: exit %d\n--- stdout:\n%s--- stderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// run runs infrakit with args in the workdir and returns what happened.
func (w *workdir) run(args ...string) result {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "infrakit"), args...)
	cmd.Dir = w.dir
	cmd.Env = w.env
	cmd.Stdin = strings.NewReader("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	res := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		w.t.Fatalf("timed out after %s: %s", commandTimeout, res)
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		w.t.Fatalf("infrakit %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// expect runs infrakit and fails the test unless it exits with code.
func (w *workdir) expect(code int, args ...string) result {
	w.t.Helper()
	res := w.run(args...)
	if res.code != code {
		w.t.Fatalf("want exit %d; %s", code, res)
	}
	return res
}

// ok runs infrakit and fails the test unless it succeeds.
func (w *workdir) ok(args ...string) result {
	w.t.Helper()
	return w.expect(0, args...)
}

// init installs the providers the stack names from the built binaries.
func (w *workdir) init() {
	w.t.Helper()
	w.ok("init", "-plugin-dir", binDir)
}

// groupJSON is the `group ls -json` / `group describe -json` shape of
// DESIGN.md, declared here as a user's script would read it.
type groupJSON struct {
	Group     string `json:"group"`
	Size      *int   `json:"size"`
	Freed     bool   `json:"freed"`
	Instances []struct {
		ID        string            `json:"id"`
		LogicalID *string           `json:"logical_id"`
		Tags      map[string]string `json:"tags"`
		State     string            `json:"state"`
		Health    string            `json:"health"`
	} `json:"instances"`
}

// ids returns the instance IDs of g, sorted.
func (g groupJSON) ids() []string {
	var out []string
	for _, inst := range g.Instances {
		out = append(out, inst.ID)
	}
	slices.Sort(out)
	return out
}

// groups runs `group ls -json` and returns the groups by name.
func (w *workdir) groups() map[string]groupJSON {
	w.t.Helper()
	res := w.ok("group", "ls", "-json")
	var list []groupJSON
	if err := json.Unmarshal([]byte(res.stdout), &list); err != nil {
		w.t.Fatalf("group ls -json is not a JSON array of groups: %v\n%s", err, res)
	}
	out := map[string]groupJSON{}
	for _, g := range list {
		out[g.Group] = g
	}
	return out
}

// planJSON is the part of `plan -json` the tests read.
type planJSON struct {
	Changes bool `json:"changes"`
	Groups  []struct {
		Group  string `json:"group"`
		Action string `json:"action"`
		Before int    `json:"before"`
		After  int    `json:"after"`
	} `json:"groups"`
}

// plan runs `plan -json` and returns the action planned for each group.
func (w *workdir) plan() map[string]string {
	w.t.Helper()
	res := w.ok("plan", "-json")
	var p planJSON
	if err := json.Unmarshal([]byte(res.stdout), &p); err != nil {
		w.t.Fatalf("plan -json: %v\n%s", err, res)
	}
	out := map[string]string{}
	for _, g := range p.Groups {
		out[g.Group] = g.Action
	}
	return out
}

// simulatorInstances lists the simulator's instance files of one type
// ("compute"), sorted: what the provider holds, read without infrakit.
func (w *workdir) simulatorInstances(typ string) []string {
	w.t.Helper()
	files, err := filepath.Glob(filepath.Join(w.dir, ".infrakit", "simulator", "instances", typ, "*.json"))
	if err != nil {
		w.t.Fatal(err)
	}
	var ids []string
	for _, f := range files {
		ids = append(ids, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	slices.Sort(ids)
	return ids
}

// fileStamps returns name -> size and modification time of every instance
// file, to show that a command left the provider's objects untouched.
func (w *workdir) fileStamps(typ string) map[string]string {
	w.t.Helper()
	out := map[string]string{}
	for _, id := range w.simulatorInstances(typ) {
		fi, err := os.Stat(filepath.Join(w.dir, ".infrakit", "simulator", "instances", typ, id+".json"))
		if err != nil {
			w.t.Fatal(err)
		}
		out[id] = fmt.Sprintf("%d@%s", fi.Size(), fi.ModTime().Format(time.RFC3339Nano))
	}
	return out
}
