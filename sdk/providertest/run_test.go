package providertest

import (
	"encoding/json"
	"testing"
)

// TestRunMetricsProvider runs the suite against a metrics provider
// (testdata/gauge) through the real plugin path. Its source answers only
// once configured, so a pass shows Config.ProviderConfig reached it first.
func TestRunMetricsProvider(t *testing.T) {
	Run(t, Config{
		Binary:         Build(t, "./testdata/gauge"),
		ProviderConfig: json.RawMessage(`{"value": 7}`),
		InvalidProviderConfig: []Invalid{
			{Properties: json.RawMessage(`{"value": "seven"}`), Path: []string{"value"}},
		},
		Metrics: map[string]MetricsCase{
			"const": {Query: "value", Empty: "none", Invalid: "value +"},
		},
	})
}
