package operation

import (
	"cmp"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/infrakit/infrakit/internal/tags"
)

// The simulator's store, read and broken as its README says users may:
// every object is one JSON file under .infrakit/simulator.

// simDir is a directory of the simulator's store.
func (w *workdir) simDir(elem ...string) string {
	return filepath.Join(append([]string{w.dir, ".infrakit", "simulator"}, elem...)...)
}

// simulated lists the instance files the simulator holds, sorted.
func (w *workdir) simulated() []string {
	w.t.Helper()
	files, err := filepath.Glob(filepath.Join(w.simDir("instances", "compute"), "*.json"))
	if err != nil {
		w.t.Fatal(err)
	}
	var ids []string
	for _, f := range files {
		ids = append(ids, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	return ids
}

// removeInstance makes an instance vanish, as the simulator documents.
func (w *workdir) removeInstance(id string) {
	w.t.Helper()
	if err := os.Remove(filepath.Join(w.simDir("instances", "compute"), id+".json")); err != nil {
		w.t.Fatal(err)
	}
}

// setHealth writes "health" into an instance's file, which the simulator
// flavor reports.
func (w *workdir) setHealth(id, health string) {
	w.t.Helper()
	path := filepath.Join(w.simDir("instances", "compute"), id+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		w.t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		w.t.Fatal(err)
	}
	obj["health"] = health
	if b, err = json.Marshal(obj); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// lbFile reads what the simulator holds for a load balancer, from its file:
// route ports and backend IDs, sorted.
func (w *workdir) lbFile(lb string) (ports []int, backends []string) {
	w.t.Helper()
	b, err := os.ReadFile(w.simDir("loadbalancers", lb+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		w.t.Fatal(err)
	}
	var rec struct {
		Routes []struct {
			LBPort int `json:"lb_port"`
		} `json:"routes"`
		Backends []struct{ ID string } `json:"backends"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		w.t.Fatalf("%s: %v", lb, err)
	}
	for _, r := range rec.Routes {
		ports = append(ports, r.LBPort)
	}
	for _, be := range rec.Backends {
		backends = append(backends, be.ID)
	}
	slices.Sort(ports)
	slices.Sort(backends)
	return ports, backends
}

// authorized reads the member IDs the simulator's "disk" authorizations
// are for (enrollment nfs's), from their files, sorted.
func (w *workdir) authorized() []string {
	w.t.Helper()
	files, err := filepath.Glob(filepath.Join(w.simDir("authorizations", "disk"), "*.json"))
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			w.t.Fatal(err)
		}
		var rec struct {
			SourceID string            `json:"source_id"`
			Tags     map[string]string `json:"tags"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			w.t.Fatalf("%s: %v", f, err)
		}
		if rec.Tags[tags.EnrollmentName] == "nfs" {
			out = append(out, cmp.Or(rec.Tags[tags.EnrollmentSourceID], rec.SourceID))
		}
	}
	slices.Sort(out)
	return out
}

// breakLB makes the simulator fail every call on a load balancer (its file
// no longer decodes) and returns what puts it back.
func (w *workdir) breakLB(lb string) (repair func()) {
	w.t.Helper()
	path := w.simDir("loadbalancers", lb+".json")
	good, err := os.ReadFile(path)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		w.t.Fatal(err)
	}
	// Broken a minute ago, not a moment ago: the simulator takes a file
	// that stopped parsing within its last second for one being rewritten
	// in place, and keeps serving the last good record meanwhile
	// (store.rewriteWindow). The fault wanted is a settled one.
	then := time.Now().Add(-time.Minute)
	if err := os.Chtimes(path, then, then); err != nil {
		w.t.Fatal(err)
	}
	return func() {
		w.t.Helper()
		if err := os.WriteFile(path, good, 0o644); err != nil {
			w.t.Fatal(err)
		}
	}
}
