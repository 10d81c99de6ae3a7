package command

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/infrakit/infrakit/internal/remote"
)

func TestFindFileArgs(t *testing.T) {
	abs := func(p string) string { return filepath.Join("/client/work", p) }
	tests := []struct {
		command       string
		args          []string
		sent          []string // the args as sent; nil: as given
		reads, writes []string
		planFile      bool
	}{
		{command: "plan", args: []string{"-f", "x.hcl", "-var-file=prod.ivars", "-out", "p.plan", "-json"},
			reads: []string{"x.hcl", "prod.ivars"}, writes: []string{"p.plan"}},
		{command: "plan", args: []string{"-var", "size=3", "--out=/tmp/p.plan", "-no-color"},
			writes: []string{"/tmp/p.plan"}},
		// Names that climb out of the directory are sent by their absolute paths.
		{command: "plan", args: []string{"-var-file", "../prod.ivars", "-out=../p.plan", "-f", "sub/../a.hcl"},
			sent:  []string{"-var-file", "/client/prod.ivars", "-out=/client/p.plan", "-f", "sub/../a.hcl"},
			reads: []string{"/client/prod.ivars", "sub/../a.hcl"}, writes: []string{"/client/p.plan"}},
		{command: "apply", args: []string{"-json", "saved.plan"}, reads: []string{"saved.plan"}, planFile: true},
		{command: "apply", args: []string{"--", "-odd.plan"}, reads: []string{"-odd.plan"}, planFile: true},
		{command: "apply", args: []string{"-auto-approve", "-parallelism", "3", "-f", "extra.hcl"}, reads: []string{"extra.hcl"}},
		// A bool flag takes no value: the argument after it is the plan file.
		{command: "apply", args: []string{"-auto-approve", "x.plan"}, reads: []string{"x.plan"}, planFile: true},
		{command: "show", args: []string{"-json", "-f", "legacy.json"}, reads: []string{"legacy.json"}},
		// Positional arguments of other commands name no files.
		{command: "group scale", args: []string{"web", "3", "-f", "a.hcl"}, reads: []string{"a.hcl"}},
		// An unknown flag or a missing value is for the watch to refuse.
		{command: "plan", args: []string{"-bogus", "-f"}},
	}
	for _, tt := range tests {
		args := slices.Clone(tt.args)
		got := findFileArgs(commandFlagSets(t.TempDir(), tt.command), args, tt.command == "apply", abs)
		sent := tt.sent
		if sent == nil {
			sent = tt.args
		}
		if !slices.Equal(args, sent) || !slices.Equal(got.reads, tt.reads) || !slices.Equal(got.writes, tt.writes) || got.planFile != tt.planFile {
			t.Errorf("%s %q: sends %q, reads %q, writes %q, plan file %v; want %q, %q, %q, %v",
				tt.command, tt.args, args, got.reads, got.writes, got.planFile, sent, tt.reads, tt.writes, tt.planFile)
		}
	}
}

// fakeWatch answers POST /v1/cli and /v1/cli/SESSION with the replies
// given, in turn, and records the requests.
type fakeWatch struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	paths   []string
	bodies  []map[string]any
	replies []any
}

func newFakeWatch(t *testing.T, replies ...any) *fakeWatch {
	f := &fakeWatch{t: t, replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.paths = append(f.paths, r.URL.Path)
		f.bodies = append(f.bodies, body)
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error": {"summary": "Wrong API token", "detail": "no"}}`)
			return
		}
		if len(f.replies) == 0 {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error": {"summary": "No such session", "detail": "it ended"}}`)
			return
		}
		_ = json.NewEncoder(w).Encode(f.replies[0])
		f.replies = f.replies[1:]
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// remoteMeta is a test Meta whose commands run against f.
func remoteMeta(t *testing.T, f *fakeWatch, stdin io.Reader) (Meta, *strings.Builder, *strings.Builder) {
	t.Helper()
	stdout, stderr := &strings.Builder{}, &strings.Builder{}
	m := NewMeta(filepath.Join(t.TempDir(), "stackdir"), stdin, stdout, stderr)
	if err := os.Mkdir(m.WorkDir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.Address = f.srv.URL
	t.Setenv(remote.EnvToken, "tok")
	return m, stdout, stderr
}

func runRemoteCommand(t *testing.T, m Meta, name string, args ...string) int {
	t.Helper()
	c, err := Commands(m)[name]()
	if err != nil {
		t.Fatal(err)
	}
	return c.Run(args)
}

func TestRemotePlanSendsFilesAndWritesThePlan(t *testing.T) {
	f := newFakeWatch(t, remote.Response{ExitCode: 2, Stdout: "Plan: 1 to add\n", Stderr: "Warning: w\n",
		Files: map[string][]byte{"p.plan": []byte("PLAN"), "stack.hcl": []byte("overwritten?")}})
	m, stdout, stderr := remoteMeta(t, f, strings.NewReader(""))
	for name, content := range map[string]string{
		"stack.hcl": `stack "s" {}`, "prod.auto.ivars": "size = 3\n", "extra.ivars": "size = 4\n",
		"infrakit.state.json": "{}", ".infrakit.lock.hcl": "", "README.md": "",
	} {
		if err := os.WriteFile(filepath.Join(m.WorkDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("INFRAKIT_VAR_size", "5")
	t.Setenv("INFRAKIT_LOG_NOT_SENT", "x")
	code := runRemoteCommand(t, m, "plan", "-var-file", "extra.ivars", "-var", "a=b", "-out", "p.plan", "-detailed-exitcode")
	if code != 2 || stdout.String() != "Plan: 1 to add\n" || stderr.String() != "Warning: w\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	body := f.bodies[0]
	files, _ := body["files"].(map[string]any)
	var names []string
	for k := range files {
		names = append(names, k)
	}
	slices.Sort(names)
	if f.paths[0] != "/v1/cli" || body["command"] != "plan" || body["dir"] != "stackdir" || body["terminal"] != false ||
		strings.Join(names, " ") != "extra.ivars prod.auto.ivars stack.hcl" || files["stack.hcl"] != "c3RhY2sgInMiIHt9" {
		t.Errorf("request %v", body)
	}
	if args, _ := json.Marshal(body["args"]); string(args) != `["-var-file","extra.ivars","-var","a=b","-out","p.plan","-detailed-exitcode"]` {
		t.Errorf("args %s", args)
	}
	if env, _ := json.Marshal(body["env"]); string(env) != `{"INFRAKIT_VAR_size":"5"}` {
		t.Errorf("env %s", env)
	}
	// The plan is written 0600; a file the command was not asked to write is not.
	fi, err := os.Stat(filepath.Join(m.WorkDir, "p.plan"))
	if b, _ := os.ReadFile(filepath.Join(m.WorkDir, "p.plan")); err != nil || string(b) != "PLAN" || fi.Mode().Perm() != 0o600 {
		t.Errorf("p.plan: %q, %v, %v", b, err, fi)
	}
	if b, _ := os.ReadFile(filepath.Join(m.WorkDir, "stack.hcl")); string(b) != `stack "s" {}` {
		t.Errorf("stack.hcl written by the answer: %q", b)
	}
}

func TestRemoteCommandSendsNoStackFiles(t *testing.T) {
	f := newFakeWatch(t, remote.Response{Stdout: "5\n"}, remote.Response{Stdout: "Apply complete!\n"})
	m, stdout, _ := remoteMeta(t, f, strings.NewReader(""))
	if err := os.WriteFile(filepath.Join(m.WorkDir, "stack.hcl"), []byte(`stack "s" {}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.WorkDir, "saved.plan"), []byte("PLAN"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := runRemoteCommand(t, m, "group scale", "web"); code != 0 || stdout.String() != "5\n" {
		t.Errorf("group scale: exit %d, %q", code, stdout)
	}
	if code := runRemoteCommand(t, m, "apply", "saved.plan"); code != 0 {
		t.Errorf("apply saved.plan: exit %d", code)
	}
	if files, _ := json.Marshal(f.bodies[0]["files"]); string(files) != `{}` {
		t.Errorf("group scale sent %s", files)
	}
	if files, _ := json.Marshal(f.bodies[1]["files"]); string(files) != `{"saved.plan":"UExBTg=="}` {
		t.Errorf("apply PLANFILE sent %s", files)
	}
}

func TestRemoteQuestionIsAskedHere(t *testing.T) {
	question := "Do you want to perform these actions?\n  infrakit will perform the actions described above.\n  Only 'yes' will be accepted to approve.\n\n  Enter a value:"
	f := newFakeWatch(t, remote.Response{Stdout: "the plan\n", Question: question, Session: "s1"},
		remote.Response{ExitCode: 0, Stdout: "Apply complete!\n"})
	m, stdout, _ := remoteMeta(t, f, strings.NewReader("yes\n"))
	if code := runRemoteCommand(t, m, "apply"); code != 0 {
		t.Errorf("exit %d", code)
	}
	if want := "the plan\n" + question + " Apply complete!\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	if f.paths[1] != "/v1/cli/s1" || f.bodies[1]["answer"] != "yes" {
		t.Errorf("answer sent: %v %v", f.paths, f.bodies)
	}
}

func TestRemoteQuestionWithoutATerminal(t *testing.T) {
	// As approve does: a stdin that is no terminal is not asked; the watch
	// is told "no" (so it lets go of the lock) and the refusal is the
	// local one.
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	f := newFakeWatch(t, remote.Response{Stdout: "the plan\n", Question: "Do you really want to destroy group \"web\"?", Session: "s2"},
		remote.Response{ExitCode: 1, Stderr: "Error: Destroy cancelled\n\nonly 'yes' is accepted to approve\n"})
	m, stdout, stderr := remoteMeta(t, f, devnull)
	if code := runRemoteCommand(t, m, "group destroy", "web"); code != 1 {
		t.Errorf("exit %d", code)
	}
	if stdout.String() != "the plan\n" || f.bodies[1]["answer"] != "no" ||
		!strings.Contains(stderr.String(), "Error: Destroy cancelled") ||
		!strings.Contains(stderr.String(), "cannot ask for approval: stdin is not a terminal; run with -auto-approve to destroy without asking") ||
		strings.Contains(stderr.String(), "only 'yes'") {
		t.Errorf("stdout %q, stderr %q, sent %v", stdout, stderr, f.bodies)
	}
}

func TestRemoteErrors(t *testing.T) {
	f := newFakeWatch(t)
	m, stdout, stderr := remoteMeta(t, f, strings.NewReader(""))
	t.Setenv(remote.EnvToken, "wrong")
	if code := runRemoteCommand(t, m, "group ls"); code != 1 || stdout.Len() != 0 ||
		!strings.HasPrefix(stderr.String(), "Error: Wrong API token (401 Unauthorized)\n\n") ||
		!strings.Contains(stderr.String(), "the watch at "+f.srv.URL+" refused the token: set INFRAKIT_TOKEN") {
		t.Errorf("401: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	stderr.Reset()
	m.Address = "localhost:24864"
	if code := runRemoteCommand(t, m, "show"); code != 1 || !strings.Contains(stderr.String(), "Invalid remote address") {
		t.Errorf("bad address: exit %d, stderr %q", code, stderr)
	}

	stderr.Reset()
	m.Address = f.srv.URL
	if code := runRemoteCommand(t, m, "apply", "missing.plan"); code != 1 || !strings.Contains(stderr.String(), "missing.plan") ||
		len(f.paths) != 1 {
		t.Errorf("missing plan file: exit %d, stderr %q, requests %v", code, stderr, f.paths)
	}
}

func TestAddressFlagRefusesLocalCommands(t *testing.T) {
	f := newFakeWatch(t)
	m, _, stderr := remoteMeta(t, f, strings.NewReader(""))
	m.AddressFlag = true
	for _, name := range []string{"init", "validate", "state list", "watch"} {
		stderr.Reset()
		if code := runRemoteCommand(t, m, name); code != 1 ||
			!strings.Contains(stderr.String(), "infrakit "+name+" runs where the state is; it cannot run against a remote watch (-address)") {
			t.Errorf("%s: exit %d, stderr %q", name, code, stderr)
		}
	}
	if len(f.paths) != 0 {
		t.Errorf("requests sent: %v", f.paths)
	}
	// The help is the command's own.
	c, _ := Commands(m)["group scale"]()
	if !strings.Contains(c.Help(), "group scale NAME [N]") {
		t.Errorf("help: %s", c.Help())
	}
}
