package main_test

import (
	"encoding/json"
	"testing"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// TestConformance runs the provider conformance suite against the
// healthcheck binary, as a host launches it. The provider serves no
// instance type, so the suite judges a made-up description (FlavorCase
// without Instance): it has no address, and the flavor must answer unknown
// without an error. Probing real instances is tested in the healthcheck
// package, against servers and the webserver the real-provider stack runs.
func TestConformance(t *testing.T) {
	bin := builder.Build(t, ".")
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // after Run's cleanups: the suite left nothing running
	t.Run("Suite", func(t *testing.T) {
		providertest.Run(t, providertest.Config{
			Binary: bin,
			Flavor: map[string]providertest.FlavorCase{
				"healthcheck": {
					Valid: json.RawMessage(`{
						"http": {"path": "/health", "expect_status": 200},
						"timeout": "500ms",
						"healthy_threshold": 1,
						"unhealthy_threshold": 2
					}`),
					Invalid: []providertest.Invalid{
						{Properties: json.RawMessage(`{"tcp": true, "http": {}}`), Path: []string{"tcp"}},
						{Properties: json.RawMessage(`{"tcp": "yes"}`), Path: []string{"tcp"}},
						{Properties: json.RawMessage(`{"http": {"path": "health"}}`), Path: []string{"http", "path"}},
						{Properties: json.RawMessage(`{"http": {"expect_status": 999}}`), Path: []string{"http", "expect_status"}},
						{Properties: json.RawMessage(`{"timeout": "soon"}`), Path: []string{"timeout"}},
						{Properties: json.RawMessage(`{"healthy_threshold": 0}`), Path: []string{"healthy_threshold"}},
						{Properties: json.RawMessage(`{"unhealthy_threshold": 1.5}`), Path: []string{"unhealthy_threshold"}},
						{Properties: json.RawMessage(`{"port": 70000}`), Path: []string{"port"}},
						{Properties: json.RawMessage(`{"interval": "5s"}`), Path: []string{"interval"}},
						{Properties: json.RawMessage(`["http"]`)},
					},
					Allocation: flavor.Allocation{Size: 3},
				},
			},
		})
	})
}
