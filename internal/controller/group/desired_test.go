package group

import (
	"encoding/json"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
)

func minerGroup() *config.Group {
	size := 5
	return &config.Group{
		Name: "miners",
		Size: &size,
		Tags: map[string]string{"project": "e2e"},
		Instance: config.Plugin{Provider: "simulator", Type: "compute",
			Properties: json.RawMessage(`{"note":"custom field for miners","n":10}`)},
		Flavors: []config.Plugin{
			{Provider: "vanilla", Properties: json.RawMessage(`{"init":["a","b"],"tags":{"tier":"miners"}}`)},
		},
		Update: config.UpdatePolicy{MaxParallel: 2, MaxUnavailable: 1},
		Health: config.HealthPolicy{ReplaceUnhealthy: true},
	}
}

func TestDesiredFromConfig(t *testing.T) {
	g := minerGroup()
	d := DesiredFromConfig(g)
	if d.Size == nil || *d.Size != 5 || d.IsPets() {
		t.Errorf("Size = %v, want 5", d.Size)
	}
	*g.Size = 7 // the Desired must not alias the config
	if *d.Size != 5 {
		t.Error("Desired.Size aliases the config's size")
	}
	if d.ConfigHash == "" || d.ConfigHash != g.ConfigHash() || d.MaxParallel != 2 || d.MaxUnavailable != 1 || !d.ReplaceUnhealthy {
		t.Errorf("Desired = %+v", d)
	}
	g.Size, g.LogicalIDs = nil, []string{"x", "y"}
	if d := DesiredFromConfig(g); !d.IsPets() || len(d.LogicalIDs) != 2 {
		t.Errorf("pets Desired = %+v", d)
	}
	// A size change never makes members out of date.
	if DesiredFromConfig(g).ConfigHash != d.ConfigHash {
		t.Error("the size changed the desired config hash")
	}
}
