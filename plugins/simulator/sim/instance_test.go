package sim

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infrakit/infrakit/plugins/simulator/store"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/provider"
)

type instanceID = instance.ID

func specWithTags(tags map[string]string) instance.Spec {
	return instance.Spec{Tags: tags, Properties: json.RawMessage(`{"note":"x"}`)}
}

func describeAll(t *testing.T, p *Instances, tags map[string]string) []instance.Description {
	t.Helper()
	ds, err := p.DescribeInstances(context.Background(), tags, true)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func ids(ds []instance.Description) []string {
	var out []string
	for _, d := range ds {
		out = append(out, string(d.ID))
	}
	return out
}

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    Config
		wantErr string
	}{
		{name: "defaults", want: Config{Dir: DefaultDir}},
		{name: "all knobs", env: map[string]string{
			EnvDir: "/tmp/x", EnvProvisionDelay: "2s", EnvDescribeDelay: "150ms",
			EnvCapacity: "10", EnvFailureRate: "0.25",
		}, want: Config{Dir: "/tmp/x", ProvisionDelay: 2 * time.Second, DescribeDelay: 150 * time.Millisecond, Capacity: 10, FailureRate: 0.25}},
		{name: "bad delay", env: map[string]string{EnvProvisionDelay: "2"}, wantErr: EnvProvisionDelay},
		{name: "negative delay", env: map[string]string{EnvDescribeDelay: "-1s"}, wantErr: EnvDescribeDelay},
		{name: "bad capacity", env: map[string]string{EnvCapacity: "lots"}, wantErr: EnvCapacity},
		{name: "negative capacity", env: map[string]string{EnvCapacity: "-1"}, wantErr: EnvCapacity},
		{name: "rate above one", env: map[string]string{EnvFailureRate: "1.5"}, wantErr: EnvFailureRate},
		{name: "rate NaN", env: map[string]string{EnvFailureRate: "NaN"}, wantErr: EnvFailureRate},
		{name: "two errors", env: map[string]string{EnvFailureRate: "x", EnvCapacity: "y"}, wantErr: EnvCapacity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigFromEnv(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Dir != tc.want.Dir || got.ProvisionDelay != tc.want.ProvisionDelay || got.DescribeDelay != tc.want.DescribeDelay ||
				got.Capacity != tc.want.Capacity || got.FailureRate != tc.want.FailureRate {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestValidateInstanceProperties(t *testing.T) {
	p := newSim(t, Config{}).Instances("compute")
	for _, tc := range []struct {
		props string
		ok    bool
	}{
		{``, true},
		{`null`, true},
		{`{}`, true},
		{`{"note": "custom", "nested": {"any": [1, true]}}`, true},
		{`[1]`, false},
		{`"text"`, false},
		{`3`, false},
		{`{"broken"`, false},
	} {
		err := p.Validate(context.Background(), json.RawMessage(tc.props))
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%s) = %v, want ok=%v", tc.props, err, tc.ok)
		}
		var diags provider.Diagnostics
		if err != nil && !errors.As(err, &diags) {
			t.Errorf("Validate(%s) error is %T, want provider.Diagnostics", tc.props, err)
		}
		if _, err := p.Provision(context.Background(), instance.Spec{Properties: json.RawMessage(tc.props)}); (err == nil) != tc.ok {
			t.Errorf("Provision(%s) = %v, want ok=%v", tc.props, err, tc.ok)
		}
	}
}

func TestInstanceLifecycle(t *testing.T) {
	s := newSim(t, Config{})
	ctx := context.Background()
	p := s.Instances("compute")
	logical := instance.LogicalID("10.0.0.7")
	spec := instance.Spec{
		Properties:  json.RawMessage(`{"note":"custom field"}`),
		Tags:        map[string]string{"infrakit.group": "miners", "project": "e2e"},
		Init:        "echo hello",
		LogicalID:   &logical,
		Attachments: []instance.Attachment{{ID: "vol-1", Type: "disk"}},
	}
	pet, err := p.Provision(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(pet), "compute-") || len(pet) != len("compute-")+8 {
		t.Fatalf("ID %q is not compute-<8 hex>", pet)
	}
	other, err := p.Provision(ctx, specWithTags(map[string]string{"infrakit.group": "cattle"}))
	if err != nil {
		t.Fatal(err)
	}
	// The file is where the docs say, and holds what people edit.
	b, err := os.ReadFile(filepath.Join(s.Dir(), "instances", "compute", string(pet)+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk map[string]any
	if err := json.Unmarshal(b, &onDisk); err != nil {
		t.Fatal(err)
	}
	if onDisk["init"] != "echo hello" || onDisk["logical_id"] != "10.0.0.7" {
		t.Fatalf("instance file lacks init/logical_id: %s", b)
	}

	ds := describeAll(t, p, map[string]string{"infrakit.group": "miners"})
	if len(ds) != 1 || ds[0].ID != pet {
		t.Fatalf("describe miners = %v, want [%s]", ids(ds), pet)
	}
	d := ds[0]
	if d.State != instance.StateRunning || d.Address != "10.0.0.7" || *d.LogicalID != logical ||
		string(d.Properties) != `{"note":"custom field"}` || d.Tags["project"] != "e2e" {
		t.Fatalf("description = %+v (properties %s)", d, d.Properties)
	}
	if ds := describeAll(t, p, nil); len(ds) != 2 {
		t.Fatalf("describe all = %v, want 2", ids(ds))
	}
	if ds, _ := p.DescribeInstances(ctx, nil, false); ds[0].Properties != nil {
		t.Fatal("properties returned without withProperties")
	}
	if ds := describeAll(t, s.Instances("net"), nil); len(ds) != 0 {
		t.Fatalf("net sees compute instances: %v", ids(ds))
	}

	if err := p.Label(ctx, other, map[string]string{"infrakit.group": "miners", "new": "tag"}); err != nil {
		t.Fatal(err)
	}
	if ds := describeAll(t, p, map[string]string{"infrakit.group": "miners"}); len(ds) != 2 {
		t.Fatalf("after Label, describe miners = %v, want 2", ids(ds))
	}
	if err := p.Label(ctx, "compute-missing", map[string]string{"a": "b"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Label of a missing instance = %v, want ErrNotFound", err)
	}

	if err := p.Destroy(ctx, pet, instance.ReasonScaleDown); err != nil {
		t.Fatal(err)
	}
	if err := p.Destroy(ctx, pet, instance.ReasonTerminate); err != nil {
		t.Fatalf("second Destroy = %v, want nil", err)
	}
	if ds := describeAll(t, p, nil); len(ds) != 1 || ds[0].ID != other {
		t.Fatalf("after Destroy = %v, want [%s]", ids(ds), other)
	}
	if err := p.Destroy(ctx, "../escape", instance.ReasonTerminate); err == nil {
		t.Fatal("Destroy accepted a path as an ID")
	}
}

// Faults are injected by editing files; the simulator must follow them and
// never fail on a person's half-written file.
func TestHandEditedFiles(t *testing.T) {
	s := newSim(t, Config{})
	ctx := context.Background()
	p := s.Instances("compute")
	a, _ := p.Provision(ctx, specWithTags(nil))
	b, _ := p.Provision(ctx, specWithTags(nil))
	dir := filepath.Join(s.Dir(), "instances", "compute")

	if err := os.Remove(filepath.Join(dir, string(a)+".json")); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("compute-halfdone.json", `{"id": "compute-half`)
	write("compute-byhand.json", `{"tags": {"x": "y"}, "state": "terminating"}`)
	write("compute-weird.json", `{"state": "exploded"}`)

	ds := describeAll(t, p, nil)
	got := map[instance.ID]instance.Description{}
	for _, d := range ds {
		got[d.ID] = d
	}
	if _, ok := got[a]; ok {
		t.Error("removed instance still described")
	}
	if _, ok := got["compute-halfdone"]; ok {
		t.Error("corrupt file described")
	}
	if len(got) != 3 {
		t.Fatalf("described %v, want b, byhand, weird", ids(ds))
	}
	if d := got["compute-byhand"]; d.State != instance.StateTerminating || d.Address != address("compute-byhand", nil) || d.Tags["x"] != "y" {
		t.Errorf("hand-written instance = %+v", d)
	}
	if d := got["compute-weird"]; d.State != instance.StateRunning || d.Tags == nil {
		t.Errorf("unknown hand-written state should read as running: %+v", d)
	}
	if got[b].State != instance.StateRunning {
		t.Errorf("b = %+v", got[b])
	}
	if err := p.Label(ctx, "compute-halfdone", map[string]string{"a": "b"}); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("Label of a corrupt file = %v, want ErrCorrupt", err)
	}
}

func TestAddress(t *testing.T) {
	ip := instance.LogicalID("192.168.1.20")
	name := instance.LogicalID("db-1")
	for _, tc := range []struct {
		id      instance.ID
		logical *instance.LogicalID
		want    string
	}{
		{"compute-00000000", nil, address("compute-00000000", nil)}, // stable
		{"compute-0a1b2c3d", &ip, "192.168.1.20"},
		{"compute-0a1b2c3d", &name, address("compute-0a1b2c3d", nil)},
	} {
		got := address(tc.id, tc.logical)
		if got != tc.want {
			t.Errorf("address(%s) = %s, want %s", tc.id, got, tc.want)
		}
		if tc.logical == nil && !strings.HasPrefix(got, "10.") {
			t.Errorf("address(%s) = %s, want 10.x.y.z", tc.id, got)
		}
	}
	if address("compute-a", nil) == address("compute-b", nil) {
		t.Error("different IDs got the same address")
	}
}

func TestProvisionDelayAgreesAcrossProcesses(t *testing.T) {
	clock := newFakeClock()
	dir := t.TempDir()
	slow := newSim(t, Config{Dir: dir, ProvisionDelay: 2 * time.Second, Now: clock.Now})
	// A second "process" without the knob must see the same state: it comes
	// from the file, not from the reader's configuration.
	other := newSim(t, Config{Dir: dir, Now: clock.Now})
	ctx := context.Background()
	id, err := slow.Instances("compute").Provision(ctx, specWithTags(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		advance time.Duration
		want    instance.State
	}{
		{0, instance.StatePending},
		{1999 * time.Millisecond, instance.StatePending},
		{time.Millisecond, instance.StateRunning},
	} {
		clock.Advance(step.advance)
		for _, s := range []*Simulator{slow, other} {
			ds := describeAll(t, s.Instances("compute"), nil)
			if len(ds) != 1 || ds[0].ID != id || ds[0].State != step.want {
				t.Fatalf("at +%v: %+v, want %s", step.advance, ds, step.want)
			}
		}
	}
}

func TestCapacity(t *testing.T) {
	dir := t.TempDir()
	// Two Simulators on one directory race like two processes.
	sims := []*Simulator{newSim(t, Config{Dir: dir, Capacity: 5}), newSim(t, Config{Dir: dir, Capacity: 5})}
	ctx := context.Background()
	var ok, full atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			_, err := sims[i%2].Instances("compute").Provision(ctx, specWithTags(nil))
			switch {
			case err == nil:
				ok.Add(1)
			case strings.Contains(err.Error(), "out of capacity") && strings.Contains(err.Error(), EnvCapacity):
				full.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 5 || full.Load() != 15 {
		t.Fatalf("%d provisioned, %d refused; want 5 and 15", ok.Load(), full.Load())
	}
	// The cap is per type.
	if _, err := sims[0].Instances("disk").Provision(ctx, specWithTags(nil)); err != nil {
		t.Fatalf("disk is capped by compute's instances: %v", err)
	}
	ds := describeAll(t, sims[0].Instances("compute"), nil)
	if err := sims[0].Instances("compute").Destroy(ctx, ds[0].ID, instance.ReasonTerminate); err != nil {
		t.Fatal(err)
	}
	if _, err := sims[1].Instances("compute").Provision(ctx, specWithTags(nil)); err != nil {
		t.Fatalf("a freed slot was not reusable: %v", err)
	}
}

func TestFailureRate(t *testing.T) {
	dice := []float64{0.1, 0.9, 0.29, 0.3}
	var i int
	s := newSim(t, Config{FailureRate: 0.3, Rand: func() float64 { v := dice[i%len(dice)]; i++; return v }})
	p := s.Instances("net")
	var failed []int
	for n := range dice {
		_, err := p.Provision(context.Background(), specWithTags(nil))
		if err != nil {
			if !strings.Contains(err.Error(), EnvFailureRate) {
				t.Errorf("failure does not name the knob: %v", err)
			}
			failed = append(failed, n)
		}
	}
	if len(failed) != 2 || failed[0] != 0 || failed[1] != 2 {
		t.Fatalf("failed provisions %v, want [0 2] (dice below 0.3)", failed)
	}
	if ds := describeAll(t, p, nil); len(ds) != 2 {
		t.Fatalf("failed provisions left instances behind: %v", ids(ds))
	}
}

func TestDescribeDelay(t *testing.T) {
	s := newSim(t, Config{DescribeDelay: 80 * time.Millisecond})
	p := s.Instances("compute")
	start := time.Now()
	if _, err := p.DescribeInstances(context.Background(), nil, false); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Fatalf("DescribeInstances took %v, want >= 80ms", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := p.DescribeInstances(ctx, nil, false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled DescribeInstances = %v, want deadline exceeded", err)
	}
}

func TestConcurrentLabelsLoseNothing(t *testing.T) {
	dir := t.TempDir()
	sims := []*Simulator{newSim(t, Config{Dir: dir}), newSim(t, Config{Dir: dir})}
	ctx := context.Background()
	id, err := sims[0].Instances("compute").Provision(ctx, specWithTags(map[string]string{"base": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := sims[i%2].Instances("compute").Label(ctx, id, map[string]string{"k" + string(rune('A'+i)): "v"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ds := describeAll(t, sims[0].Instances("compute"), nil)
	if len(ds[0].Tags) != n+1 {
		t.Fatalf("%d tags after %d concurrent labels, want %d", len(ds[0].Tags), n, n+1)
	}
}

// A Label racing a Destroy must never write the instance back to life.
func TestLabelNeverResurrects(t *testing.T) {
	s := newSim(t, Config{})
	ctx := context.Background()
	p := s.Instances("compute")
	for range 20 {
		id, err := p.Provision(ctx, specWithTags(nil))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for range 5 {
				if err := p.Label(ctx, id, map[string]string{"a": "b"}); err != nil && !errors.Is(err, store.ErrNotFound) {
					t.Error(err)
				}
			}
		})
		wg.Go(func() {
			if err := p.Destroy(ctx, id, instance.ReasonTerminate); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
	}
	if ds := describeAll(t, p, nil); len(ds) != 0 {
		t.Fatalf("destroyed instances came back: %v", ids(ds))
	}
}

// A description's logical ID is the caller's own: changing it cannot
// change what the next DescribeInstances returns. Its tags and properties
// are shared with the listing cache, read-only (instance.Description).
func TestDescriptionLogicalIDIsCallersOwn(t *testing.T) {
	p := newSim(t, Config{}).Instances("compute")
	logical := instance.LogicalID("db-1")
	spec := specWithTags(map[string]string{"a": "1"})
	spec.LogicalID = &logical
	if _, err := p.Provision(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	first := describeAll(t, p, nil)
	*first[0].LogicalID = "changed"
	again := describeAll(t, p, nil)
	if again[0].Tags["a"] != "1" || *again[0].LogicalID != "db-1" {
		t.Fatalf("a caller's change leaked into the cache: %+v", again[0])
	}
}
