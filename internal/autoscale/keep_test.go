package autoscale

import (
	"testing"

	"github.com/infrakit/infrakit/internal/config"
)

func scaledGroup(name string, size, start, lo, hi int) *config.Group {
	return &config.Group{Name: name, Size: &size, Autoscale: &config.Autoscale{StartSize: start, Min: lo, Max: hi}}
}

func stackOf(gs ...*config.Group) *config.Stack { return &config.Stack{Name: "s", Groups: gs} }

func TestKeep(t *testing.T) {
	fixed := 3
	tests := []struct {
		name     string
		desired  *config.Group
		stored   *config.Group
		wantSize int
		wantKept bool
	}{
		{"first apply takes the start size", scaledGroup("web", 2, 2, 2, 12), nil, 2, false},
		{"unchanged stack keeps the autoscaler's size", scaledGroup("web", 2, 2, 2, 12), scaledGroup("web", 7, 2, 2, 12), 7, true},
		{"a new start size replaces it", scaledGroup("web", 3, 3, 2, 12), scaledGroup("web", 7, 2, 2, 12), 3, false},
		{"a new max replaces it", scaledGroup("web", 2, 2, 2, 6), scaledGroup("web", 7, 2, 2, 12), 2, false},
		{"a new min replaces it", scaledGroup("web", 2, 2, 1, 12), scaledGroup("web", 7, 2, 2, 12), 2, false},
		{"a group that was sized by hand starts at its start size", scaledGroup("web", 2, 2, 2, 12), &config.Group{Name: "web", Size: &fixed}, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stored *config.Stack
			if tt.stored != nil {
				stored = stackOf(tt.stored)
			}
			desired := stackOf(tt.desired)
			before := *tt.desired.Size
			out, owned := Keep(desired, stored)
			if got := *out.Group("web").Size; got != tt.wantSize {
				t.Errorf("size = %d, want %d", got, tt.wantSize)
			}
			if len(owned) != 1 || owned[0].Kept != tt.wantKept || owned[0].Size != tt.wantSize || owned[0].Note == "" {
				t.Errorf("ownership = %+v, want kept=%v size=%d and a note", owned, tt.wantKept, tt.wantSize)
			}
			if *desired.Group("web").Size != before {
				t.Errorf("Keep modified the desired stack's size: %d, was %d", *desired.Group("web").Size, before)
			}
		})
	}
}

func TestKeepLeavesGroupsWithoutAutoscale(t *testing.T) {
	n, m := 3, 5
	desired := stackOf(&config.Group{Name: "web", Size: &n})
	out, owned := Keep(desired, stackOf(&config.Group{Name: "web", Size: &m}))
	if out != desired || len(owned) != 0 {
		t.Fatalf("Keep changed a group without autoscale: %v %+v", out, owned)
	}
}
