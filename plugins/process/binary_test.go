//go:build linux

package main_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/plugins/process/proc"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// TestRestartAdopts drives the binary as the host does: instances outlive
// the provider (killed gracefully, then with SIGKILL), and the next provider
// adopts them, reports their exits at once and destroys them.
func TestRestartAdopts(t *testing.T) {
	bin := builder.Build(t, ".")
	webserver := builder.Build(t, "../../testdata/webserver")
	stateDir := t.TempDir()
	killRecorded(t, stateDir)
	env := "INFRAKIT_PROCESS_DIR=" + stateDir
	tags := map[string]string{"infrakit.group": "web"}
	props := json.RawMessage(`{"command": "` + webserver + `", "ports": {"from": 27000, "to": 27999}}`)

	first := startProvider(t, bin, env)
	var ids []instance.ID
	for range 3 {
		id, err := first.Instance("process").Provision(ctx(t), instance.Spec{Properties: props, Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	addrs := map[instance.ID]string{}
	for _, d := range describe(t, first, tags) {
		addrs[d.ID] = d.Address
		if body := get(t, d.Address); !strings.HasPrefix(body, "instance "+string(d.ID)) {
			t.Fatalf("%s answered %q", d.Address, body)
		}
	}
	if len(addrs) != 3 {
		t.Fatalf("describe lists %v, want %v", addrs, ids)
	}

	first.Kill() // gracefully: the instances must not go with it
	second := startProvider(t, bin, env)
	if got := idsOf(describe(t, second, tags)); !slices.Equal(got, ids) {
		t.Fatalf("after a restart the provider lists %v, want %v", got, ids)
	}
	for id, addr := range addrs {
		if body := get(t, addr); !strings.HasPrefix(body, "instance "+string(id)) {
			t.Fatalf("%s answered %q after the provider restarted", addr, body)
		}
	}

	watchCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := second.Instance("process").(instance.Watcher).Watch(watchCtx, tags)
	if err != nil {
		t.Fatal(err)
	}
	victim := readPID(t, stateDir, ids[0])
	killed := time.Now()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, events, ids[0], 500*time.Millisecond)
	t.Logf("exit of an adopted instance reported %v after SIGKILL", time.Since(killed).Round(time.Millisecond))
	if got := idsOf(describe(t, second, tags)); !slices.Equal(got, ids[1:]) {
		t.Fatalf("after the kill the provider lists %v, want %v", got, ids[1:])
	}

	// A provider killed outright leaves its instances running too.
	if err := syscall.Kill(second.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second.Kill()
	third := startProvider(t, bin, env)
	if got := idsOf(describe(t, third, tags)); !slices.Equal(got, ids[1:]) {
		t.Fatalf("after SIGKILL of the provider, the next lists %v, want %v", got, ids[1:])
	}
	pids := []int{readPID(t, stateDir, ids[1]), readPID(t, stateDir, ids[2])}
	for _, id := range ids[1:] {
		if err := third.Instance("process").Destroy(ctx(t), id, instance.ReasonTerminate); err != nil {
			t.Fatal(err)
		}
	}
	for _, pid := range pids {
		if s, err := proc.ReadStat(pid); err == nil && !s.Exited() {
			t.Errorf("destroyed instance pid %d still runs", pid)
		}
	}
	if got := describe(t, third, nil); len(got) != 0 {
		t.Fatalf("after destroying all, the provider lists %v", idsOf(got))
	}
}

func startProvider(t *testing.T, bin string, env ...string) *plugin.Client {
	t.Helper()
	logs := providertest.LogWriter(t) // registered first, so it runs after Kill
	c, err := plugin.Start(ctx(t), plugin.ClientConfig{
		Name: "process", Path: bin, Env: env, Dir: t.TempDir(),
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func describe(t *testing.T, c *plugin.Client, tags map[string]string) []instance.Description {
	t.Helper()
	ds, err := c.Instance("process").DescribeInstances(ctx(t), tags, false)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func idsOf(ds []instance.Description) []instance.ID {
	out := make([]instance.ID, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func get(t *testing.T, addr string) string {
	t.Helper()
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var last error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := c.Get("http://" + addr + "/")
		if err != nil {
			last = err
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b)
	}
	t.Fatalf("GET http://%s/: %v", addr, last)
	return ""
}

func awaitGone(t *testing.T, events <-chan instance.Event, id instance.ID, within time.Duration) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("the watch ended")
			}
			if e.Type == instance.EventGone && e.ID == id {
				return
			}
		case <-timer.C:
			t.Fatalf("no gone event for %s within %v", id, within)
		}
	}
}

// record is the part of the provider's record file the tests read.
type record struct {
	proc.Identity
}

func readRecord(path string) (record, error) {
	var r record
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	return r, err
}

func readPID(t *testing.T, stateDir string, id instance.ID) int {
	t.Helper()
	r, err := readRecord(filepath.Join(stateDir, "instances", string(id)+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return r.PID
}

// killRecorded registers a cleanup that kills every instance recorded in
// stateDir whose process group is still provably its own, and reaps it if
// it became this process's child: instances outlive providers by design,
// so a failed test would otherwise leave them running. The identities are
// collected as the test goes (a destroyed instance's record disappears).
func killRecorded(t *testing.T, stateDir string) {
	var mu sync.Mutex
	seen := map[string]proc.Identity{}
	collect := func() {
		paths, _ := filepath.Glob(filepath.Join(stateDir, "instances", "*.json"))
		mu.Lock()
		defer mu.Unlock()
		for _, p := range paths {
			if r, err := readRecord(p); err == nil && r.PID > 0 {
				seen[p] = r.Identity
			}
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			collect()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		collect()
		for _, id := range seen {
			_, _ = proc.SignalGroup(id, syscall.SIGKILL)
			reap(id.PID)
		}
	})
}

// reap collects pid once it has exited, if it is a child of the test process.
func reap(pid int) {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err != nil || got == pid {
			return
		}
	}
}
