package enrollment

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// A View reads as `enrollment describe -json` prints it: {"enrollment",
// "authorizations": [{"id", "source_id", "properties"}]}, the member taken
// from the source ID tag, missing properties as {} and no authorizations
// as [].
func TestViewOf(t *testing.T) {
	tagged := authz("a1", "c1", `{"host":"c1","iops":10}`)
	tagged.SourceID = "stale"
	v := ViewOf("nfs", []nfs.Authorization{tagged, {ID: "a2", SourceID: "c2"}})
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"enrollment":"nfs","authorizations":[{"id":"a1","source_id":"c1","properties":{"host":"c1","iops":10}},` +
		`{"id":"a2","source_id":"c2","properties":{}}]}`
	if string(b) != want {
		t.Fatalf("view\n got %s\nwant %s", b, want)
	}
	if b, _ := json.Marshal(ViewOf("nfs", nil)); string(b) != `{"enrollment":"nfs","authorizations":[]}` {
		t.Fatalf("empty view %s", b)
	}
}

// What a group wants decides how many authorizations are held: its size
// (never negative), or its distinct logical IDs; a group not in the stack
// wants nothing.
func TestWantOf(t *testing.T) {
	size, neg := 3, -1
	for _, tc := range []struct {
		name string
		g    *config.Group
		want Want
	}{
		{"no group", nil, Want{}},
		{"cattle", &config.Group{Size: &size}, Want{Size: 3}},
		{"negative size", &config.Group{Size: &neg}, Want{}},
		{"pets", &config.Group{LogicalIDs: []string{"p2", "p1", "p2"}}, Want{Size: 2, LogicalIDs: []string{"p2", "p1"}}},
	} {
		if got := WantOf(tc.g); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: WantOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// Ours and SourceOf read ownership from the tags.
func TestOursAndSourceOf(t *testing.T) {
	a := authz("a1", "c1", `{}`)
	if !Ours("nfs", a) || Ours("other", a) || Ours("", nfs.Authorization{}) {
		t.Error("Ours does not go by the name tag")
	}
	a.SourceID = "c9"
	if SourceOf(a) != "c1" {
		t.Errorf("SourceOf = %s, want the source ID tag's c1", SourceOf(a))
	}
	delete(a.Tags, tags.EnrollmentSourceID)
	if SourceOf(a) != "c9" {
		t.Errorf("SourceOf without the tag = %s, want SourceID c9", SourceOf(a))
	}
}
