package providertest

import (
	"encoding/json"
	"testing"
)

// testConfigure checks that the provider takes its configuration again
// (infrakit configures a running process anew when its block changes) and
// refuses each invalid one with a diagnostic at its path, and leaves it
// configured with Config.ProviderConfig for the checks that follow.
func (s *suite) testConfigure(t *testing.T) {
	valid := s.cfg.ProviderConfig
	if len(valid) == 0 {
		valid = json.RawMessage(`{}`) // what infrakit sends when a block loses its attributes
	}
	reconfigure := func(t *testing.T, after string) {
		t.Helper()
		ctx, cancel := s.ctx(t)
		defer cancel()
		if err := s.client.Configure(ctx, valid); err != nil {
			t.Fatalf("configure with %s %s: %v", valid, after, err)
		}
	}
	if len(s.cfg.ProviderConfig) > 0 {
		reconfigure(t, "a second time")
	}
	for _, inv := range s.cfg.InvalidProviderConfig {
		ctx, cancel := s.ctx(t)
		err := s.client.Configure(ctx, inv.Properties)
		cancel()
		if err := checkDiagnostics(err, inv.Path); err != nil {
			t.Errorf("invalid configuration %s: %v", inv.Properties, err)
		}
		reconfigure(t, "after an invalid one")
	}
}
