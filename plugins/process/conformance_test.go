//go:build linux

package main_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/infrakit/infrakit/sdk/providertest"
)

// TestConformance runs the provider conformance suite against the process
// binary, as a host launches it; its instances are real webservers.
func TestConformance(t *testing.T) {
	bin := builder.Build(t, ".")
	webserver := builder.Build(t, "../../testdata/webserver")
	stateDir := t.TempDir()
	killRecorded(t, stateDir) // runs after the suite's own cleanups
	from := 30000 + 100*rand.IntN(50)

	providertest.Run(t, providertest.Config{
		Binary: bin,
		Env:    []string{"INFRAKIT_PROCESS_DIR=" + stateDir},
		Instance: map[string]providertest.InstanceCase{
			"process": {
				Valid: json.RawMessage(fmt.Sprintf(`{
					"command": %q,
					"args": [],
					"env": {"WEBSERVER_FAIL": "0"},
					"ports": {"from": %d, "to": %d},
					"kill_timeout": "2s"
				}`, webserver, from, from+99)),
				Invalid: []providertest.Invalid{
					{Properties: json.RawMessage(`{"args": ["x"]}`), Path: []string{"command"}},
					{Properties: json.RawMessage(`{"command": 3}`), Path: []string{"command"}},
					{Properties: json.RawMessage(`{"command": "x", "args": ["a", 2]}`), Path: []string{"args", "1"}},
					{Properties: json.RawMessage(`{"command": "x", "env": {"PORT": "80"}}`), Path: []string{"env", "PORT"}},
					{Properties: json.RawMessage(`{"command": "x", "ports": {"from": 30000, "to": 20000}}`), Path: []string{"ports"}},
					{Properties: json.RawMessage(`{"command": "x", "ports": {"from": 1, "to": 99999}}`), Path: []string{"ports", "to"}},
					{Properties: json.RawMessage(`{"command": "x", "kill_timeout": "soon"}`), Path: []string{"kill_timeout"}},
					{Properties: json.RawMessage(`{"command": "x", "colour": "red"}`), Path: []string{"colour"}},
					{Properties: json.RawMessage(`["x"]`)},
				},
			},
		},
	})
}
