package enrollment

import (
	"strconv"
	"time"

	"github.com/infrakit/infrakit/internal/config"
)

// Setting is an enrollment attribute a stack changes that needs no call to
// the target (destroy_on_free, sync_interval): applying the stack stores
// it, and a plan shows it as an in-place update of the enrollment. A
// changed target is one too, shown beside what moves (the revocations at
// the old target, the authorizations at the new): with no authorization to
// move, the change is still stored.
type Setting struct {
	Attribute string `json:"attribute"`
	Old       string `json:"old"`
	New       string `json:"new"`
}

// SettingChanges are the settings that differ from old (the enrollment as
// applied) to new (as the stack has it), in attribute order. A sync
// interval of zero is the default's.
func SettingChanges(old, new *config.Enrollment) []Setting {
	if old == nil || new == nil {
		return nil
	}
	var out []Setting
	if TargetChanged(old, new) {
		out = append(out, Setting{Attribute: "target", Old: TargetString(old.Target), New: TargetString(new.Target)})
	}
	if old.DestroyOnFree != new.DestroyOnFree {
		out = append(out, Setting{Attribute: "destroy_on_free",
			Old: strconv.FormatBool(old.DestroyOnFree), New: strconv.FormatBool(new.DestroyOnFree)})
	}
	if a, b := syncInterval(old), syncInterval(new); a != b {
		out = append(out, Setting{Attribute: "sync_interval", Old: a.String(), New: b.String()})
	}
	return out
}

// TargetString is a target as plans show it: `simulator.nfs-auth "disk"`.
func TargetString(t config.EnrollmentTarget) string {
	return t.Provider + " " + strconv.Quote(t.Type)
}

func syncInterval(e *config.Enrollment) time.Duration {
	if e.SyncInterval <= 0 {
		return time.Duration(config.DefaultSyncInterval)
	}
	return time.Duration(e.SyncInterval)
}
