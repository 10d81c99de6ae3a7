package main_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/infrakit/infrakit/plugins/prometheus/promtest"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// TestConformance runs the provider conformance suite against the binary,
// configured with a real Prometheus's address: promql queries it, file_sd
// writes a target file in the suite's working directory.
func TestConformance(t *testing.T) {
	prom := promtest.Start(t, promtest.Config{})
	providertest.Run(t, providertest.Config{
		Binary:         builder.Build(t, "."),
		Env:            []string{"INFRAKIT_PROMETHEUS_DIR=" + filepath.Join(t.TempDir(), "state")},
		ProviderConfig: json.RawMessage(`{"address": "` + prom.URL + `", "timeout": "20s"}`),
		InvalidProviderConfig: []providertest.Invalid{
			{Properties: json.RawMessage(`{"address": "127.0.0.1:9090"}`), Path: []string{"address"}},
			{Properties: json.RawMessage(`{"address": "` + prom.URL + `", "timeout": "soon"}`), Path: []string{"timeout"}},
			{Properties: json.RawMessage(`{"address": "` + prom.URL + `", "ca_file": "ca.pem"}`), Path: []string{"ca_file"}},
			{Properties: json.RawMessage(`{"adress": "` + prom.URL + `"}`), Path: []string{"adress"}},
		},
		Metrics: map[string]providertest.MetricsCase{
			"promql": {Query: "vector(3)", Empty: `no_such_metric{job="none"}`, Invalid: "sum(rate(x[1m])"},
		},
		Authorizer: map[string]providertest.AuthorizerCase{
			"file_sd": {
				Valid: json.RawMessage(`{"file": "prometheus/web.json", "address": "127.0.0.1:20001", "labels": {"infrakit_group": "web"}}`),
				Invalid: []providertest.Invalid{
					{Properties: json.RawMessage(`{"address": "127.0.0.1:20001"}`), Path: []string{"file"}},
					{Properties: json.RawMessage(`{"file": "web.yml", "address": "127.0.0.1:20001"}`), Path: []string{"file"}},
					{Properties: json.RawMessage(`{"file": "web.json"}`), Path: []string{"address"}},
					{Properties: json.RawMessage(`{"file": "web.json", "address": "http://127.0.0.1:20001"}`), Path: []string{"address"}},
					{Properties: json.RawMessage(`{"file": "web.json", "address": "127.0.0.1:1", "labels": {"infrakit.group": "web"}}`), Path: []string{"labels", "infrakit.group"}},
					{Properties: json.RawMessage(`{"file": "web.json", "address": "127.0.0.1:1", "labels": {"__scheme__": "https"}}`), Path: []string{"labels", "__scheme__"}},
					{Properties: json.RawMessage(`{"file": "web.json", "address": "127.0.0.1:1", "port": 1}`), Path: []string{"port"}},
					{Properties: json.RawMessage(`[1]`)},
				},
			},
		},
	})
}
