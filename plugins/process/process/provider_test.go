//go:build linux

package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/plugins/process/proc"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/provider"
)

// TestThreeWebservers provisions three webservers: each runs on its own
// port, answers HTTP as itself, logs to its own files, and is listed running.
func TestThreeWebservers(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	web := map[string]string{"group": "web"}
	spec := instance.Spec{Properties: webserverProps(t, map[string]string{"GREETING": "hi"}), Tags: web}
	var ids []instance.ID
	for range 3 {
		ids = append(ids, provision(t, p, spec))
	}
	lid := instance.LogicalID("pet-1")
	other := provision(t, p, instance.Spec{Properties: spec.Properties, Tags: map[string]string{"group": "other"}, LogicalID: &lid})

	ds := describe(t, p, web)
	if got := idsOf(ds); !slices.Equal(got, sorted(ids)) {
		t.Fatalf("describe group=web lists %v, want %v", got, sorted(ids))
	}
	ports := map[string]bool{}
	for _, d := range ds {
		if d.State != instance.StateRunning || !strings.HasPrefix(d.Address, "127.0.0.1:") || d.Properties != nil {
			t.Errorf("instance %s: state %q address %q properties %s", d.ID, d.State, d.Address, d.Properties)
		}
		ports[d.Address] = true
		if body := awaitHTTP(t, d.Address, "/"); !strings.HasPrefix(body, fmt.Sprintf("instance %s pid ", d.ID)) {
			t.Errorf("GET / on %s answered %q, want instance %s", d.Address, body, d.ID)
		}
		rec := readRecord(t, dir, d.ID)
		if rec.PID <= 0 || rec.StartTime == 0 || rec.BootID == "" || fmt.Sprintf("127.0.0.1:%d", rec.Port) != d.Address {
			t.Errorf("record of %s: %+v", d.ID, rec)
		}
		if b, _ := os.ReadFile(rec.Stderr); !strings.Contains(string(b), "listening on "+d.Address) {
			t.Errorf("stderr log %s of %s = %q, want the webserver's start line", rec.Stderr, d.ID, b)
		}
		if filepath.Dir(rec.Stdout) != filepath.Join(dir, "logs") {
			t.Errorf("stdout log of %s is %s, want it under %s/logs", d.ID, rec.Stdout, dir)
		}
	}
	if len(ports) != 3 {
		t.Fatalf("three instances have addresses %v, want three distinct", ports)
	}

	pets := describe(t, p, map[string]string{"group": "other"})
	if len(pets) != 1 || pets[0].ID != other || pets[0].LogicalID == nil || *pets[0].LogicalID != lid {
		t.Fatalf("describe group=other = %+v, want pet %s with logical ID %s", pets, other, lid)
	}
	withProps, err := p.DescribeInstances(context.Background(), map[string]string{"group": "other"}, true)
	if err != nil || len(withProps) != 1 {
		t.Fatal(withProps, err)
	}
	var got map[string]any
	if err := json.Unmarshal(withProps[0].Properties, &got); err != nil || got["command"] != webserverBin(t) {
		t.Fatalf("properties = %s (%v), want the provisioned ones", withProps[0].Properties, err)
	}
	if n := len(describe(t, p, nil)); n != 4 {
		t.Fatalf("describe without tags lists %d instances, want 4", n)
	}
}

// TestKillIsReportedAtOnce: a process killed with SIGKILL is reported gone by
// Watch within 500 ms, and describe no longer lists it.
func TestKillIsReportedAtOnce(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	tags := map[string]string{"group": "web"}
	spec := instance.Spec{Properties: webserverProps(t, nil), Tags: tags}
	var ids []instance.ID
	for range 3 {
		ids = append(ids, provision(t, p, spec))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := p.Watch(ctx, tags)
	if err != nil {
		t.Fatal(err)
	}
	victim := readRecord(t, dir, ids[1])
	killed := time.Now()
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, events, 500*time.Millisecond, func(e instance.Event) bool {
		return e.Type == instance.EventGone && e.ID == ids[1]
	})
	t.Logf("gone reported %v after the kill", time.Since(killed).Round(time.Millisecond))
	if got, want := idsOf(describe(t, p, tags)), sorted([]instance.ID{ids[0], ids[2]}); !slices.Equal(got, want) {
		t.Fatalf("after the kill, describe lists %v, want %v", got, want)
	}
	if _, found, _ := (store{dir: dir}).read(ids[1]); found {
		t.Fatal("the record of the killed instance is still there")
	}
	cancel()
	for range events { // closes once ctx ended
	}
}

// TestAdoption: a provider started on the directory of a closed one lists
// the processes that one started, sees their exits, and destroys them.
func TestAdoption(t *testing.T) {
	dir := t.TempDir()
	first, err := New(Config{Dir: dir, WorkDir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{"group": "web"}
	spec := instance.Spec{Properties: webserverProps(t, nil), Tags: tags}
	a, b := provision(t, first, spec), provision(t, first, spec)
	first.Close()

	second := newProvider(t, dir)
	ds := describe(t, second, tags)
	if got := idsOf(ds); !slices.Equal(got, sorted([]instance.ID{a, b})) {
		t.Fatalf("the second provider lists %v, want %v", got, sorted([]instance.ID{a, b}))
	}
	for _, d := range ds {
		awaitHTTP(t, d.Address, "/")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := second.Watch(ctx, tags)
	if err != nil {
		t.Fatal(err)
	}
	ra := readRecord(t, dir, a)
	killed := time.Now()
	if err := syscall.Kill(ra.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, events, 500*time.Millisecond, func(e instance.Event) bool { return e.Type == instance.EventGone && e.ID == a })
	t.Logf("gone of an adopted instance reported %v after the kill", time.Since(killed).Round(time.Millisecond))

	rb := readRecord(t, dir, b)
	if err := second.Destroy(context.Background(), b, instance.ReasonTerminate); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, events, time.Second, func(e instance.Event) bool { return e.Type == instance.EventGone && e.ID == b })
	if running(rb.PID) {
		t.Fatalf("destroyed adopted instance %s (pid %d) still runs", b, rb.PID)
	}
	if log, _ := os.ReadFile(rb.Stderr); !strings.Contains(string(log), "shutting down") {
		t.Errorf("the webserver did not get a graceful SIGTERM; its log: %s", log)
	}
}

// TestReusedPIDNeverSignalled: a record whose pid now names another process
// (faked with the right pids and a wrong start time or boot) is forgotten,
// and nothing is signalled: not on adoption, describe, destroy, or label.
func TestReusedPIDNeverSignalled(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	// A process that is not the provider's, in a group of its own.
	stranger := exec.Command("sleep", "60")
	stranger.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stranger.Process.Kill(); _ = stranger.Wait() })
	self, err := proc.Identify(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	sid, err := proc.Identify(stranger.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	st := store{dir: dir}
	if err := st.init(); err != nil {
		t.Fatal(err)
	}
	fakes := map[instance.ID]proc.Identity{
		"process-self0001": {PID: self.PID, StartTime: self.StartTime + 1, BootID: self.BootID},
		"process-strange1": {PID: sid.PID, StartTime: sid.StartTime - 1, BootID: sid.BootID},
		"process-reboot01": {PID: sid.PID, StartTime: sid.StartTime, BootID: "an-earlier-boot"},
	}
	write := func() {
		for id, ident := range fakes {
			rec := record{ID: string(id), Identity: ident, Port: 1, Tags: map[string]string{"fake": "yes"}, KillTimeout: time.Second}
			if err := st.write(rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	write()
	p := newProvider(t, dir) // adopts: must forget them all
	if ds := describe(t, p, nil); len(ds) != 0 {
		t.Fatalf("describe lists %v, want none of the fakes", idsOf(ds))
	}
	for id := range fakes {
		if _, found, _ := st.read(id); found {
			t.Errorf("record %s of a reused pid was kept", id)
		}
	}
	write()
	for id := range fakes {
		if err := p.Destroy(context.Background(), id, instance.ReasonTerminate); err != nil {
			t.Errorf("destroy %s: %v", id, err)
		}
	}
	select {
	case s := <-sigs:
		t.Fatalf("the test process got %v", s)
	case <-time.After(100 * time.Millisecond):
	}
	if !running(sid.PID) {
		t.Fatal("the stranger process was signalled")
	}
	for id := range fakes {
		if _, found, _ := st.read(id); found {
			t.Errorf("record %s survived its destroy", id)
		}
	}
}

// TestDestroyKillsTheGroup: Destroy stops the process and what it started.
func TestDestroyKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	// The shell starts a grandchild and waits for it.
	spec := func(script, killTimeout string) instance.Spec {
		return instance.Spec{Properties: props(t, map[string]any{
			"command":      "/bin/sh",
			"args":         []string{"-c", script},
			"kill_timeout": killTimeout,
			"ports":        portRange(),
		})}
	}
	t.Run("SIGTERM", func(t *testing.T) {
		id := provision(t, p, spec(`sleep 300 & echo $! > grandchild-$INFRAKIT_INSTANCE_ID; wait`, "5s"))
		leader := readRecord(t, dir, id).PID
		grandchild := readPIDFile(t, filepath.Join(dir, "grandchild-"+string(id)))
		start := time.Now()
		if err := p.Destroy(context.Background(), id, instance.ReasonTerminate); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("destroy took %v; SIGTERM alone should stop this group", d)
		}
		if running(leader) || running(grandchild) {
			t.Fatalf("after destroy: leader running %v, grandchild running %v", running(leader), running(grandchild))
		}
		if ds := describe(t, p, nil); len(ds) != 0 {
			t.Fatalf("describe after destroy lists %v", idsOf(ds))
		}
		if err := p.Destroy(context.Background(), id, instance.ReasonTerminate); err != nil {
			t.Fatalf("destroy again: %v", err)
		}
	})
	t.Run("SIGKILLAfterGrace", func(t *testing.T) {
		// Both ignore SIGTERM (an ignored signal stays ignored across exec).
		id := provision(t, p, spec(`trap "" TERM; sleep 300 & echo $! > grandchild-$INFRAKIT_INSTANCE_ID; wait`, "300ms"))
		leader := readRecord(t, dir, id).PID
		grandchild := readPIDFile(t, filepath.Join(dir, "grandchild-"+string(id)))
		start := time.Now()
		if err := p.Destroy(context.Background(), id, instance.ReasonTerminate); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
			t.Errorf("destroy took %v, want the 300ms grace and a little", d)
		}
		if running(leader) || running(grandchild) {
			t.Fatalf("after destroy: leader running %v, grandchild running %v", running(leader), running(grandchild))
		}
	})
	t.Run("ContextEndsTheGrace", func(t *testing.T) {
		id := provision(t, p, spec(`trap "" TERM; sleep 300 & wait`, "1m"))
		leader := readRecord(t, dir, id).PID
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := p.Destroy(ctx, id, instance.ReasonTerminate); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("destroy took %v though its context ended after 200ms", d)
		}
		if running(leader) {
			t.Fatal("the leader still runs")
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		for _, id := range []instance.ID{"process-00000000", "../../etc/passwd", ""} {
			if err := p.Destroy(context.Background(), id, instance.ReasonTerminate); err != nil {
				t.Errorf("destroy %q: %v", id, err)
			}
		}
	})
}

// TestExitKillsTheRest: when an instance's main process exits on its own,
// what it left running in its group is killed and the instance is gone.
func TestExitKillsTheRest(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	id := provision(t, p, instance.Spec{Properties: props(t, map[string]any{
		"command": "/bin/sh",
		"args":    []string{"-c", `sleep 300 & echo $! > grandchild; sleep 0.3; exit 3`},
		"ports":   portRange(),
	})})
	grandchild := readPIDFile(t, filepath.Join(dir, "grandchild"))
	testwait.For(t, 5*time.Second, "the leftover grandchild to be killed", func() bool { return !running(grandchild) })
	testwait.For(t, 2*time.Second, "the instance to be gone", func() bool { return len(describe(t, p, nil)) == 0 })
	if _, found, _ := (store{dir: dir}).read(id); found {
		t.Fatal("record kept")
	}
}

func TestLabel(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	id := provision(t, p, instance.Spec{Properties: webserverProps(t, nil), Tags: map[string]string{"a": "1", "b": "1"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := p.Watch(ctx, map[string]string{"a": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Label(context.Background(), id, map[string]string{"b": "2", "c": "3"}); err != nil {
		t.Fatal(err)
	}
	e := awaitEvent(t, events, time.Second, func(e instance.Event) bool { return e.ID == id })
	want := map[string]string{"a": "1", "b": "2", "c": "3"}
	if e.Type != instance.EventChanged || !mapsEqual(e.Instance.Tags, want) {
		t.Fatalf("event after label = %+v, want changed with tags %v", e, want)
	}
	if ds := describe(t, p, map[string]string{"c": "3"}); len(ds) != 1 || !mapsEqual(ds[0].Tags, want) {
		t.Fatalf("describe c=3 = %+v", ds)
	}
	if len(describe(t, p, map[string]string{"b": "1"})) != 0 {
		t.Fatal("the old tag value still matches")
	}
	if err := p.Label(context.Background(), "process-00000000", map[string]string{"x": "y"}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("label of an unknown instance = %v, want not found", err)
	}
}

// TestEnvironmentAndDir: the process gets PORT, its ID, the env property and
// the provider's environment less go-plugin's, and runs in dir.
func TestEnvironmentAndDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PLUGIN_PROTOCOL_VERSIONS", "1")
	t.Setenv("INFRAKIT_PROCESS_TEST_INHERITED", "yes")
	p := newProvider(t, dir)
	lid := instance.LogicalID("10.0.0.7")
	id := provision(t, p, instance.Spec{
		Properties: props(t, map[string]any{
			"command": "sh", // found in PATH
			"args":    []string{"-c", `pwd > pwd.txt; env > env.tmp; mv env.tmp env.txt; exec sleep 300`},
			"env":     map[string]string{"MODE": "test"},
			"dir":     "work",
			"ports":   portRange(),
		}),
		LogicalID: &lid,
		Init:      "echo init",
	})
	var env string
	testwait.For(t, 5*time.Second, "env.txt", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "work", "env.txt"))
		env = string(b)
		return err == nil && strings.Contains(env, "PORT=")
	})
	rec := readRecord(t, dir, id)
	lines := strings.Split(env, "\n")
	for _, want := range []string{
		fmt.Sprintf("PORT=%d", rec.Port), "INFRAKIT_INSTANCE_ID=" + string(id), "MODE=test",
		"INFRAKIT_LOGICAL_ID=10.0.0.7", "INFRAKIT_INIT=echo init", "INFRAKIT_PROCESS_TEST_INHERITED=yes",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("environment lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, "PLUGIN_PROTOCOL_VERSIONS") {
		t.Errorf("go-plugin's variables leaked into the instance:\n%s", env)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "work", "pwd.txt"))
	if got := strings.TrimSpace(string(b)); got != filepath.Join(dir, "work") {
		t.Errorf("working directory %q, want %q", got, filepath.Join(dir, "work"))
	}
}

func TestProvisionErrors(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	// A one-port range whose port is held by someone else.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldPort := held.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		name  string
		props map[string]any
		path  string // the diagnostic's path; empty: not a diagnostic
		want  string
	}{
		{"not found in PATH", map[string]any{"command": "infrakit-no-such-command"}, "command", "not found"},
		{"no such file", map[string]any{"command": "./bin/nothing"}, "command", "no such file"},
		{"not executable", map[string]any{"command": "./data.txt"}, "command", "not an executable"},
		{"no dir", map[string]any{"command": "sh", "dir": "nowhere"}, "dir", "not a directory"},
		{"invalid", map[string]any{"command": 1}, "command", "must be a string"},
		{"no free port", map[string]any{"command": "sh", "ports": map[string]int{"from": heldPort, "to": heldPort}}, "", "no free port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, "data.txt"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			id, err := p.Provision(context.Background(), instance.Spec{Properties: props(t, tc.props)})
			if err == nil {
				t.Fatalf("provision = %s, want an error", id)
			}
			var diags provider.Diagnostics
			isDiag := errors.As(err, &diags)
			if tc.path != "" && (!isDiag || len(diags) == 0 || strings.Join(diags[0].Path, ".") != tc.path) {
				t.Errorf("error %v: want a diagnostic at %q", err, tc.path)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	if ds := describe(t, p, nil); len(ds) != 0 {
		t.Fatalf("failed provisions left %v", idsOf(ds))
	}
	// Validate warns, without failing, about a command it cannot find now.
	err = p.Validate(context.Background(), props(t, map[string]any{"command": "infrakit-no-such-command"}))
	var diags provider.Diagnostics
	if !errors.As(err, &diags) || diags.HasErrors() || len(diags) != 1 || diags[0].Path[0] != "command" {
		t.Fatalf("validate of a missing command = %v, want one warning at command", err)
	}
	if err := p.Validate(context.Background(), props(t, map[string]any{"command": "sh"})); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentProviders: two providers on one directory (as the CLI's and
// a watch's are) provisioning at once never hand out the same port, and
// each sees the other's instances.
func TestConcurrentProviders(t *testing.T) {
	dir := t.TempDir()
	a, b := newProvider(t, dir), newProvider(t, dir)
	r := portRange()
	r.To = r.From + 19 // 20 ports for 16 instances: choices collide unless coordinated
	spec := instance.Spec{Properties: props(t, map[string]any{
		"command": "sleep", "args": []string{"300"}, "ports": r,
	})}
	var mu sync.Mutex
	var ids []instance.ID
	var wg sync.WaitGroup
	for i := range 16 {
		p := a
		if i%2 == 1 {
			p = b
		}
		wg.Go(func() {
			id, err := p.Provision(context.Background(), spec)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, id := range ids {
		killOnCleanup(t, readRecord(t, dir, id).Identity)
	}
	ports := map[string]instance.ID{}
	for _, d := range describe(t, a, nil) {
		if other, dup := ports[d.Address]; dup {
			t.Errorf("%s and %s both got %s", other, d.ID, d.Address)
		}
		ports[d.Address] = d.ID
	}
	if len(ports) != 16 || len(describe(t, b, nil)) != 16 {
		t.Fatalf("%d distinct addresses; b lists %d; want 16", len(ports), len(describe(t, b, nil)))
	}
}

func idsOf(ds []instance.Description) []instance.ID {
	out := make([]instance.ID, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func sorted(ids []instance.ID) []instance.ID {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
