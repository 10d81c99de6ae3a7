package main_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/infrakit/infrakit/plugins/docker/dockertest"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// TestConformance runs the provider conformance suite against the docker
// binary, as a host launches it; its instances are real containers of the
// web image. They are on no network: the suite needs no address, and
// Docker starts such containers (20 at once in the Concurrency case) much
// faster; the container package's tests cover the bridge network.
func TestConformance(t *testing.T) {
	if client == nil {
		t.Skip("skipping: " + skipReason)
	}
	providertest.Run(t, providertest.Config{
		Binary: builder.Build(t, "."),
		Env:    []string{"INFRAKIT_DOCKER_DIR=" + t.TempDir()},
		Instance: map[string]providertest.InstanceCase{
			"container": {
				Valid: json.RawMessage(fmt.Sprintf(`{
					"image": %q,
					"env": {"PORT": "8080"},
					"labels": {%q: %q},
					"network": "none",
					"ports": ["8080"],
					"memory": "32m",
					"cpus": 0.5,
					"stop_timeout": "2s"
				}`, image, suiteLabel, dockertest.RunLabel())),
				Invalid: []providertest.Invalid{
					{Properties: json.RawMessage(`{"env": {"PORT": "8080"}}`), Path: []string{"image"}},
					{Properties: json.RawMessage(`{"image": 3}`), Path: []string{"image"}},
					{Properties: json.RawMessage(`{"image": "web", "command": ["/web", 2]}`), Path: []string{"command", "1"}},
					{Properties: json.RawMessage(`{"image": "web", "env": {"INFRAKIT_INIT": "x"}}`), Path: []string{"env", "INFRAKIT_INIT"}},
					{Properties: json.RawMessage(`{"image": "web", "labels": {"infrakit.group": "x"}}`), Path: []string{"labels", "infrakit.group"}},
					{Properties: json.RawMessage(`{"image": "web", "ports": ["8080", "http"]}`), Path: []string{"ports", "1"}},
					{Properties: json.RawMessage(`{"image": "web", "memory": "1k"}`), Path: []string{"memory"}},
					{Properties: json.RawMessage(`{"image": "web", "cpus": 0}`), Path: []string{"cpus"}},
					{Properties: json.RawMessage(`{"image": "web", "restart": "sometimes"}`), Path: []string{"restart"}},
					{Properties: json.RawMessage(`{"image": "web", "stop_timeout": "soon"}`), Path: []string{"stop_timeout"}},
					{Properties: json.RawMessage(`{"image": "web", "colour": "red"}`), Path: []string{"colour"}},
					{Properties: json.RawMessage(`["web"]`)},
				},
			},
		},
	})
}
