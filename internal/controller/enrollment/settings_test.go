package enrollment

import (
	"reflect"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
)

// destroy_on_free and sync_interval alone are settings a plan shows as an
// in-place update; an unset sync interval is the default.
func TestSettingChanges(t *testing.T) {
	old := e2eEnrollment()
	if got := SettingChanges(old, e2eEnrollment()); got != nil {
		t.Fatalf("no change: %+v", got)
	}
	changed := e2eEnrollment()
	changed.DestroyOnFree = true
	changed.SyncInterval = config.Duration(time.Minute)
	want := []Setting{{Attribute: "destroy_on_free", Old: "false", New: "true"}, {Attribute: "sync_interval", Old: "5s", New: "1m0s"}}
	if got := SettingChanges(old, changed); !reflect.DeepEqual(got, want) {
		t.Fatalf("SettingChanges = %+v, want %+v", got, want)
	}
	unset := e2eEnrollment()
	unset.SyncInterval = 0
	defaulted := e2eEnrollment()
	defaulted.SyncInterval = config.DefaultSyncInterval
	if got := SettingChanges(defaulted, unset); got != nil {
		t.Fatalf("an unset sync interval is the default: %+v", got)
	}
	moved := e2eEnrollment()
	moved.Target.Provider = "simulator"
	if got, want := SettingChanges(old, moved), []Setting{{Attribute: "target", Old: `simulator.nfs-auth "disk"`, New: `simulator "disk"`}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("a changed target: %+v, want %+v", got, want)
	}
	// All at once, in attribute order; a target is another type too.
	moved.Target.Type = "nfs"
	moved.DestroyOnFree = true
	moved.SyncInterval = 0
	got := SettingChanges(old, moved)
	want = []Setting{
		{Attribute: "target", Old: `simulator.nfs-auth "disk"`, New: `simulator "nfs"`},
		{Attribute: "destroy_on_free", Old: "false", New: "true"},
		{Attribute: "sync_interval", Old: "5s", New: time.Duration(config.DefaultSyncInterval).String()},
	}
	if time.Duration(config.DefaultSyncInterval) == 5*time.Second {
		want = want[:2]
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SettingChanges = %+v, want %+v", got, want)
	}
	if SettingChanges(nil, old) != nil || SettingChanges(old, nil) != nil {
		t.Fatal("a new or removed enrollment has no settings to change")
	}
}
