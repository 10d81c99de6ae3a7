//go:build linux

package process

import (
	"net"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/sdk/instance"
)

func TestChoosePort(t *testing.T) {
	all := func(int) bool { return true }
	for _, tc := range []struct {
		name     string
		r        PortRange
		taken    []int
		start    int
		bindable func(int) bool
		want     int
		ok       bool
	}{
		{"start is free", PortRange{100, 109}, nil, 105, all, 105, true},
		{"skips taken", PortRange{100, 109}, []int{105, 106}, 105, all, 107, true},
		{"wraps around", PortRange{100, 109}, []int{108, 109}, 108, all, 100, true},
		{"skips unbindable", PortRange{100, 109}, nil, 100, func(p int) bool { return p > 103 }, 104, true},
		{"start outside the range", PortRange{100, 109}, nil, 123, all, 103, true},
		{"start below the range", PortRange{100, 109}, nil, 97, all, 107, true},
		{"full", PortRange{100, 102}, []int{100, 101, 102}, 100, all, 0, false},
		{"nothing binds", PortRange{100, 102}, nil, 100, func(int) bool { return false }, 0, false},
		{"one port", PortRange{7, 7}, nil, 7, all, 7, true},
		{"empty range", PortRange{8, 7}, nil, 7, all, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken := map[int]bool{}
			for _, p := range tc.taken {
				taken[p] = true
			}
			got, ok := choosePort(tc.r, taken, tc.start, tc.bindable)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("choosePort = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestChoosePortProperties: the port is in range, free and bindable, and one
// is found whenever any port qualifies.
func TestChoosePortProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		from := rapid.IntRange(1, 65000).Draw(t, "from")
		r := PortRange{from, from + rapid.IntRange(0, 40).Draw(t, "width")}
		taken := map[int]bool{}
		for _, p := range rapid.SliceOf(rapid.IntRange(r.From, r.To)).Draw(t, "taken") {
			taken[p] = true
		}
		unbindable := map[int]bool{}
		for _, p := range rapid.SliceOf(rapid.IntRange(r.From, r.To)).Draw(t, "unbindable") {
			unbindable[p] = true
		}
		start := rapid.IntRange(0, 70000).Draw(t, "start")
		got, ok := choosePort(r, taken, start, func(p int) bool { return !unbindable[p] })
		anyFree := false
		for p := r.From; p <= r.To; p++ {
			anyFree = anyFree || (!taken[p] && !unbindable[p])
		}
		if ok != anyFree {
			t.Fatalf("ok = %v, but a free port exists: %v", ok, anyFree)
		}
		if ok && (got < r.From || got > r.To || taken[got] || unbindable[got]) {
			t.Fatalf("chose %d: out of %v, taken or unbindable", got, r)
		}
	})
}

func TestBindableLocal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if bindableLocal(ln.Addr().(*net.TCPAddr).Port) {
		t.Fatal("a port being listened on is bindable")
	}
}

func TestChildEnv(t *testing.T) {
	inherited := []string{
		"PATH=/usr/bin", "HOME=/root", "MODE=inherited", "PORT=1", "INFRAKIT_LOGICAL_ID=stale",
		"PLUGIN_PROTOCOL_VERSIONS=1", "PLUGIN_CLIENT_CERT=x", "INFRAKIT_PROVIDER_PLUGIN=cookie",
		"INFRAKIT_PLUGIN_HOST_PID=7", "INFRAKIT_PROCESS_DIR=/x", "=weird", "NOEQUALS",
	}
	got := childEnv(inherited, map[string]string{"MODE": "mine", "EXTRA": "a=b"}, 20001, "process-1", "", "")
	want := []string{
		"EXTRA=a=b", "HOME=/root", "INFRAKIT_INSTANCE_ID=process-1", "MODE=mine", "PATH=/usr/bin", "PORT=20001",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("childEnv =\n%q\nwant\n%q", got, want)
	}
	got = childEnv(nil, nil, 8080, "process-2", "10.0.0.1", "echo hi")
	want = []string{"INFRAKIT_INIT=echo hi", "INFRAKIT_INSTANCE_ID=process-2", "INFRAKIT_LOGICAL_ID=10.0.0.1", "PORT=8080"}
	if !slices.Equal(got, want) {
		t.Fatalf("childEnv(pet) =\n%q\nwant\n%q", got, want)
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[instance.ID]bool{
		"process-0a1b2c3d": true, "": false, "../x": false, "a/b": false, ".lock": false, `a\b`: false,
	} {
		if got := validID(id); got != want {
			t.Errorf("validID(%q) = %v, want %v", id, got, want)
		}
	}
	if !strings.HasPrefix(string(must(newID())), "process-") {
		t.Error("IDs start with the provider's name")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestConfig(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if got := ConfigFromEnv(getenv).Dir; got != DefaultDir {
		t.Errorf("default dir %q, want %q", got, DefaultDir)
	}
	env[EnvDir] = "/var/lib/infrakit/process"
	if got := ConfigFromEnv(getenv).Dir; got != "/var/lib/infrakit/process" {
		t.Errorf("dir %q from %s", got, EnvDir)
	}
	// A relative state directory is relative to the work directory (the
	// stack directory, where the host starts providers).
	work := t.TempDir()
	p, err := New(Config{WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if want := work + "/" + DefaultDir; p.Dir() != want {
		t.Errorf("state directory %q, want %q", p.Dir(), want)
	}
}
