package main_test

import (
	"encoding/json"
	"testing"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// TestConformance runs the provider conformance suite against the vanilla
// binary, as a host launches it.
func TestConformance(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // after Run's cleanups: the suite left nothing running
	t.Run("Suite", func(t *testing.T) {
		providertest.Run(t, providertest.Config{
			Binary: providertest.Build(t, "."),
			Flavor: map[string]providertest.FlavorCase{
				"vanilla": {
					Valid: json.RawMessage(`{
						"init": ["curl -sSL https://get.docker.com | sh", "docker run -d -p 80:80 stuff/miner"],
						"tags": {"project": "infrakit", "tier": "miners"},
						"attachments": [{"id": "vol-1", "type": "volume"}]
					}`),
					// Vanilla points at the element, not just the attribute.
					Invalid: []providertest.Invalid{
						{Properties: json.RawMessage(`{"init": ["echo ok", 1]}`), Path: []string{"init", "1"}},
						{Properties: json.RawMessage(`{"init": "echo ok"}`), Path: []string{"init"}},
						{Properties: json.RawMessage(`{"tags": {"tier": 2}}`), Path: []string{"tags", "tier"}},
						{Properties: json.RawMessage(`{"attachments": [{"id": "vol-1"}]}`), Path: []string{"attachments", "0", "type"}},
						{Properties: json.RawMessage(`{"colour": "red"}`), Path: []string{"colour"}},
						{Properties: json.RawMessage(`["init"]`)},
					},
					Allocation: flavor.Allocation{Size: 5},
				},
			},
		})
	})
}
