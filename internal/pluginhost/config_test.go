package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/provider"
)

// These tests configure real processes of testdata/configured, which
// answers what it was configured with as metrics queries.

// initConfigured installs the configured test provider (and the simulator,
// which takes no configuration) into a fresh working directory.
func initConfigured(t *testing.T) string {
	t.Helper()
	wd := t.TempDir()
	if _, err := Init(context.Background(), wd, []string{"configured", "simulator"}, InitOptions{
		SearchDirs: []SearchDir{{testBin, "-plugin-dir"}},
	}); err != nil {
		t.Fatal(err)
	}
	return wd
}

// ask answers query of c's "config" source: a configured value, or the
// process's count of configures or attempts; -1 for no data.
func ask(t *testing.T, c *plugin.Client, query string) float64 {
	t.Helper()
	s, err := c.Metrics("config").Query(context.Background(), query, time.Time{})
	if err != nil {
		t.Fatalf("query %s: %v", query, err)
	}
	if s.Empty {
		return -1
	}
	return s.Value
}

// client is h.Client that must succeed.
func client(t *testing.T, h *Host, key string) *plugin.Client {
	t.Helper()
	c, err := h.Client(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestHostConfiguresProcesses(t *testing.T) {
	h := newHost(t, initConfigured(t), Options{})
	h.SetConfig("configured", json.RawMessage(`{"scale": 3}`))

	// A new process is configured before it is handed out, once.
	c := client(t, h, "configured")
	if got := ask(t, c, "scale"); got != 3 {
		t.Fatalf("scale = %v, want 3", got)
	}
	h.SetConfig("configured", json.RawMessage(`{ "scale" : 3 }`)) // the same, written anew
	if again := client(t, h, "configured"); again != c {
		t.Fatalf("Client returned another process")
	}
	if got := ask(t, c, "attempts"); got != 1 {
		t.Fatalf("an unchanged configuration was sent again: %v Configure calls", got)
	}

	// A changed one reaches the running process at its next use.
	h.SetConfig("configured", json.RawMessage(`{"scale": 4}`))
	if again := client(t, h, "configured"); again != c {
		t.Fatalf("a configuration change relaunched the process")
	}
	if got := ask(t, c, "scale"); got != 4 {
		t.Fatalf("after the change, scale = %v, want 4", got)
	}

	// Each key has its own configuration.
	h.SetConfig("configured.b", json.RawMessage(`{"scale": 9}`))
	b := client(t, h, "configured.b")
	if b.Pid() == c.Pid() || ask(t, b, "scale") != 9 || ask(t, c, "scale") != 4 {
		t.Fatalf("alias: pid %d (other %d), scale %v; other's scale %v", b.Pid(), c.Pid(), ask(t, b, "scale"), ask(t, c, "scale"))
	}

	// A block that loses its attributes sets the process back to its defaults.
	h.SetConfig("configured", nil)
	client(t, h, "configured")
	if got := ask(t, c, "scale"); got != -1 {
		t.Fatalf("after the attributes went, scale = %v, want none", got)
	}
	if got := ask(t, c, "configures"); got != 3 {
		t.Fatalf("the process took %v configurations, want 3", got)
	}
}

func TestHostDoesNotConfigureWithoutConfig(t *testing.T) {
	h := newHost(t, initConfigured(t), Options{})
	h.SetConfig("configured", json.RawMessage(` {} `))
	c := client(t, h, "configured")
	other := client(t, h, "configured.never-set")
	for _, p := range []*plugin.Client{c, other} {
		if got := ask(t, p, "attempts"); got != 0 {
			t.Errorf("pid %d: %v Configure calls for no configuration, want none", p.Pid(), got)
		}
	}
	// A provider that takes no configuration runs with attributes given.
	h.SetConfig("simulator", json.RawMessage(`{"zone": "b"}`))
	if _, err := client(t, h, "simulator").Metadata(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestHostRefusedConfigLeavesProcess(t *testing.T) {
	h := newHost(t, initConfigured(t), Options{})
	h.SetConfig("configured", json.RawMessage(`{"refuse": true}`))
	for attempt := 1; attempt <= 2; attempt++ {
		_, err := h.Client(context.Background(), "configured")
		var ce *ConfigError
		var diags provider.Diagnostics
		if !errors.As(err, &ce) || ce.Key != "configured" || !errors.As(err, &diags) ||
			err.Error() != `provider "configured": Configure: refuse: Refused: refused as asked` {
			t.Fatalf("Client with a refused configuration = %v, want a *ConfigError with the diagnostics", err)
		}
	}
	// Fixed, the next call configures the process that refused twice.
	h.SetConfig("configured", json.RawMessage(`{"scale": 5}`))
	c := client(t, h, "configured")
	if ask(t, c, "scale") != 5 || ask(t, c, "attempts") != 3 {
		t.Fatalf("scale %v after %v attempts; want 5 after 3 in one process", ask(t, c, "scale"), ask(t, c, "attempts"))
	}
}

func TestHostConfiguresRelaunchedProcess(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	h := newHost(t, initConfigured(t), Options{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	h.now = clock.Now
	h.SetConfig("configured", json.RawMessage(`{"scale": 2}`))
	first := client(t, h, "configured")
	h.SetConfig("configured", json.RawMessage(`{"scale": 6}`)) // not yet handed out
	clock.Advance(2 * time.Second)                             // a healthy run: relaunched at once
	if err := killHard(first.Pid()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the killed provider is seen to exit", first.Exited)
	second := client(t, h, "configured")
	if second.Pid() == first.Pid() {
		t.Fatal("the killed process was handed out")
	}
	if ask(t, second, "scale") != 6 || ask(t, second, "attempts") != 1 {
		t.Fatalf("relaunched: scale %v after %v attempts, want 6 after 1", ask(t, second, "scale"), ask(t, second, "attempts"))
	}
}

func TestHostConfiguresOnceForConcurrentCallers(t *testing.T) {
	h := newHost(t, initConfigured(t), Options{})
	c := client(t, h, "configured")
	h.SetConfig("configured", json.RawMessage(`{"scale": 8}`))
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got, err := h.Client(context.Background(), "configured")
			if err == nil && got != c {
				err = errors.New("another process")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if ask(t, c, "scale") != 8 || ask(t, c, "attempts") != 1 {
		t.Fatalf("scale %v after %v Configure calls, want 8 after 1", ask(t, c, "scale"), ask(t, c, "attempts"))
	}
}

func TestNormalConfig(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"  \n", ""},
		{"{}", ""},
		{" { } ", ""},
		{"null", ""},
		{`{ "a" : 1 }`, `{"a":1}`},
		{`{"a":`, `{"a":`}, // not JSON: kept, for the provider to refuse
	} {
		if got := string(normalConfig(json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("normalConfig(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Spacing never makes a configuration differ.
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.MapOf(rapid.StringMatching(`[a-z]{1,4}`), rapid.IntRange(-5, 5)).Draw(t, "config")
		a, _ := json.Marshal(m)
		b, _ := json.MarshalIndent(m, " ", "\t")
		if na, nb := normalConfig(a), normalConfig(b); string(na) != string(nb) || (len(m) == 0) != (na == nil) {
			t.Fatalf("%s -> %s, %s -> %s", a, na, b, nb)
		}
		if len(m) > 0 && !strings.HasPrefix(string(normalConfig(a)), "{") {
			t.Fatalf("%s normalised to %s", a, normalConfig(a))
		}
	})
}
