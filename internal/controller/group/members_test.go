package group

import (
	"reflect"
	"testing"

	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

func TestMembersFromDescriptions(t *testing.T) {
	pet := instance.LogicalID("10.0.0.1")
	empty := instance.LogicalID("")
	descs := []instance.Description{
		{ID: "i-1", State: instance.StateRunning, Address: "10.0.0.9:80",
			Tags: map[string]string{tags.ConfigHash: "h1", tags.Group: "cattle"}},
		{ID: "i-2", LogicalID: &pet, State: instance.StatePending,
			Tags: map[string]string{tags.ConfigHash: "h1", tags.LogicalID: "ignored-when-provider-says"}},
		{ID: "i-3", LogicalID: &empty, Tags: map[string]string{tags.LogicalID: "10.0.0.2"}},
		{ID: "i-4", State: instance.StateTerminating},
	}
	health := map[instance.ID]flavor.Health{"i-1": flavor.HealthHealthy, "i-3": flavor.HealthUnhealthy, "i-4": ""}
	want := []Member{
		{ID: "i-1", ConfigHash: "h1", State: instance.StateRunning, Health: flavor.HealthHealthy, Address: "10.0.0.9:80"},
		{ID: "i-2", LogicalID: "10.0.0.1", ConfigHash: "h1", State: instance.StatePending, Health: flavor.HealthUnknown},
		{ID: "i-3", LogicalID: "10.0.0.2", State: instance.StateRunning, Health: flavor.HealthUnhealthy},
		{ID: "i-4", State: instance.StateTerminating, Health: flavor.HealthUnknown},
	}
	if got := MembersFromDescriptions(descs, health); !reflect.DeepEqual(got, want) {
		t.Errorf("MembersFromDescriptions =\n  %+v\nwant\n  %+v", got, want)
	}
	if got := MembersFromDescriptions(nil, nil); got == nil || len(got) != 0 {
		t.Errorf("MembersFromDescriptions(nil) = %#v, want empty non-nil", got)
	}
}
