package tags

import (
	"maps"
	"testing"
)

func TestIsReserved(t *testing.T) {
	for _, k := range []string{Stack, Group, ConfigHash, LogicalID, EnrollmentName, EnrollmentSourceID,
		"INFRAKIT.stack", "Infrakit.Group", "infraKIT.anything", "infrakit."} {
		if !IsReserved(k) {
			t.Errorf("IsReserved(%q) = false, want true", k)
		}
	}
	for _, k := range []string{"project", "tier", "infrakit", "INFRAKIT", "xinfrakit.group", "infrakit-stack", "", "ınfrakit.stack"} {
		if IsReserved(k) {
			t.Errorf("IsReserved(%q) = true, want false", k)
		}
	}
}

func TestSelectorAndMember(t *testing.T) {
	sel := GroupSelector("mystack", "miners")
	if want := map[string]string{"infrakit.stack": "mystack", "infrakit.group": "miners"}; !maps.Equal(sel, want) {
		t.Errorf("GroupSelector = %v, want %v", sel, want)
	}
	cattle := Member("mystack", "cattle", "h1", "")
	if want := map[string]string{"infrakit.stack": "mystack", "infrakit.group": "cattle", "infrakit.config.hash": "h1"}; !maps.Equal(cattle, want) {
		t.Errorf("Member(cattle) = %v, want %v", cattle, want)
	}
	pet := Member("mystack", "db", "h2", "10.0.0.1")
	if pet[LogicalID] != "10.0.0.1" || len(pet) != 4 {
		t.Errorf("Member(pet) = %v, want 4 tags with logical id", pet)
	}
	// Every member carries the selector's tags, so listing by selector finds it.
	for k, v := range GroupSelector("mystack", "db") {
		if pet[k] != v {
			t.Errorf("member tags %v miss selector tag %s=%s", pet, k, v)
		}
	}
}
