package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// TestConformance runs the provider conformance suite against the simulator
// binary, as a host launches it: once as configured by default, and once
// with a provision delay so instances are seen pending (and turning running
// while watched).
func TestConformance(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // after every subtest's cleanup: the suite left nothing running
	bin := providertest.Build(t, ".")

	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"Default", nil},
		{"ProvisionDelay", []string{"INFRAKIT_SIMULATOR_PROVISION_DELAY=1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := simulatorConfig(bin)
			// Each run gets its own store, so runs never see each other.
			dir := t.TempDir()
			cfg.Env = append([]string{"INFRAKIT_SIMULATOR_DIR=" + dir}, tc.env...)
			if err := os.MkdirAll(filepath.Join(dir, "metrics"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "metrics", "requests"), []byte("42.5\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			providertest.Run(t, cfg)
		})
	}
}

// simulatorConfig has a case for everything the simulator serves.
func simulatorConfig(bin string) providertest.Config {
	// Instance properties are free-form; only a non-object is rejected, as a
	// whole (an empty path).
	instanceCase := providertest.InstanceCase{
		Valid: json.RawMessage(`{"note": "custom field for miners", "cpus": 2}`),
		Invalid: []providertest.Invalid{
			{Properties: json.RawMessage(`["not", "an", "object"]`)},
			{Properties: json.RawMessage(`"compute"`)},
		},
	}
	return providertest.Config{
		Binary: bin,
		Instance: map[string]providertest.InstanceCase{
			"compute": instanceCase,
			"net":     instanceCase,
			"disk":    instanceCase,
		},
		Flavor: map[string]providertest.FlavorCase{
			"simulator": {
				Valid: json.RawMessage(`{"tags": {"tier": "web"}}`),
				Invalid: []providertest.Invalid{
					{Properties: json.RawMessage(`{"colour": "red"}`), Path: []string{"colour"}},
					{Properties: json.RawMessage(`{"tags": "web"}`), Path: []string{"tags"}},
					{Properties: json.RawMessage(`{"tags": {"tier": 3}}`), Path: []string{"tags", "tier"}},
				},
				Allocation: flavor.Allocation{Size: 1},
				// The simulator flavor reads health from the instance's file.
				Instance: "compute",
			},
		},
		LoadBalancer: "lb1",
		Authorizer: map[string]providertest.AuthorizerCase{
			"disk": {
				Valid: json.RawMessage(`{"host": "compute-0a1b2c3d", "iops": 10}`),
				Invalid: []providertest.Invalid{
					{Properties: json.RawMessage(`[1]`)},
				},
			},
		},
		Metrics: map[string]providertest.MetricsCase{
			"file": {Query: "requests", Empty: "never_written", Invalid: "no/such name"},
		},
	}
}
