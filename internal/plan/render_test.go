package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
)

// examplePlan has one group of every action.
func examplePlan(t testing.TB) *Plan {
	t.Helper()
	miners := cattleGroup("miners", 5, "v1")
	cattle := cattleGroup("cattle", 12, "v1")
	web := cattleGroup("web", 2, "v2")
	db := petGroup("db", "10.0.0.1", "10.0.0.2")
	shrink := cattleGroup("small", 1, "v1")
	back := cattleGroup("back", 1, "v1")
	same := cattleGroup("same", 2, "v1")
	h1 := hashOf(t, miners)
	doc := stored(7, "cattle", "web", "db", "small", "back", "same", "old", "loose", "lost")
	doc.Groups["back"].Freed = true
	doc.Groups["loose"].Freed = true
	dbMembers := running("d", 1, hashOf(t, db))
	dbMembers[0].LogicalID = "10.0.0.1"
	world := World{
		Members: map[string][]group.Member{
			"cattle": running("c", 10, h1),
			"web":    running("w", 2, h1),
			"db":     dbMembers,
			"small":  running("s", 2, h1),
			"back":   running("b", 1, h1),
			"same":   running("x", 2, h1),
			"old":    running("o", 3, h1),
			"loose":  running("l", 1, h1),
		},
		Failed: map[string]error{"lost": errors.New(`provider "simulator": DescribeInstances: connection refused`)},
	}
	p, err := Compute(stackOf(miners, cattle, web, db, shrink, back, same), doc, world, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const wantHuman = `infrakit will perform the following actions:

  # group.miners will be created
  + group "miners" {
      + instances = 5
    }

  # group.cattle will be updated in-place
  ~ group "cattle" {
      ~ instances = 10 -> 12
      + 2 new instances
    }

  # group.web will be rolled: 2 instances will be replaced
-/+ group "web" {
    -/+ instance "w-0"
    -/+ instance "w-1"
      # in 2 batches, each once the one before it is done
    }

  # group.db will be updated in-place
  ~ group "db" {
      ~ instances = 1 -> 2
      + instance (logical_id = "10.0.0.2")
    }

  # group.small will be updated in-place
  ~ group "small" {
      ~ instances = 2 -> 1
      - instance "s-0" (scale-down)
    }

  # group.back is free and will be managed again
  ~ group "back" {
      ~ managed = false -> true
    }

  # group.loose is free and not in the stack: its 1 instance is left untouched

  # group.old will be destroyed
  - group "old" {
      - instances = 3
      - instance "o-0"
      - instance "o-1"
      - instance "o-2"
    }

Plan: 8 instances to add, 2 to roll, 4 to destroy.

Warning: group "lost" could not be observed

  provider "simulator": DescribeInstances: connection refused

Its changes are not part of this plan.
`

func TestRenderHuman(t *testing.T) {
	var b bytes.Buffer
	if err := RenderHuman(&b, examplePlan(t), HumanOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != wantHuman {
		t.Errorf("RenderHuman =\n%s\nwant\n%s\ndiff at: %q", got, wantHuman, firstDiff(got, wantHuman))
	}
}

func TestRenderHumanNoChanges(t *testing.T) {
	g := cattleGroup("miners", 2, "v1")
	doc := withStatus(stored(2, "miners"), "loose", state.GroupStatus{Freed: true})
	p, err := Compute(stackOf(g), doc, World{Members: map[string][]group.Member{
		"miners": running("m", 2, hashOf(t, g)),
		"loose":  running("l", 3, "old"),
	}}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := RenderHuman(&b, p, HumanOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	want := "  # group.loose is free and not in the stack: its 3 instances are left untouched\n\n" +
		"\x1b[1mNo changes.\x1b[0m Your stack matches the desired configuration.\n"
	if b.String() != want {
		t.Errorf("RenderHuman = %q, want %q", b.String(), want)
	}
}

func TestRenderHumanColor(t *testing.T) {
	var b bytes.Buffer
	if err := RenderHuman(&b, examplePlan(t), HumanOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"  \x1b[32m+\x1b[0m group \"miners\" {",
		"  \x1b[33m~\x1b[0m group \"cattle\" {",
		"\x1b[31m-\x1b[0m/\x1b[32m+\x1b[0m group \"web\" {",
		"  \x1b[31m-\x1b[0m group \"old\" {",
		"\x1b[1mPlan:\x1b[0m 8 instances to add",
		"\x1b[33mWarning:\x1b[0m group \"lost\"",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("colored output lacks %q:\n%s", want, out)
		}
	}
	// Stripped of colors it is the plain rendering.
	plain := out
	for _, code := range []string{green, yellow, red, bold, reset} {
		plain = strings.ReplaceAll(plain, code, "")
	}
	if plain != wantHuman {
		t.Errorf("colored output without colors differs at %q", firstDiff(plain, wantHuman))
	}
}

func TestRenderHumanCapsLongLists(t *testing.T) {
	g := cattleGroup("big", 100, "v2")
	p, err := Compute(stackOf(g), stored(1, "big"), World{Members: map[string][]group.Member{"big": running("b", 100, "v1")}}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		max       int
		lines     int
		remainder string
	}{{0, 10, "# (90 more not shown)"}, {3, 3, "# (97 more not shown)"}, {-1, 100, ""}} {
		var b bytes.Buffer
		if err := RenderHuman(&b, p, HumanOptions{MaxListed: tc.max}); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(b.String(), "-/+ instance "); n != tc.lines {
			t.Errorf("MaxListed %d: %d instance lines, want %d", tc.max, n, tc.lines)
		}
		if tc.remainder != "" && !strings.Contains(b.String(), tc.remainder) {
			t.Errorf("MaxListed %d: output lacks %q", tc.max, tc.remainder)
		}
		if !strings.Contains(b.String(), "# group.big will be rolled: 100 instances will be replaced") {
			t.Errorf("MaxListed %d: header wrong:\n%s", tc.max, b.String())
		}
	}
}

func TestRenderJSON(t *testing.T) {
	var b bytes.Buffer
	if err := RenderJSON(&b, examplePlan(t)); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), "\n") != 1 || !strings.HasSuffix(b.String(), "\n") {
		t.Errorf("RenderJSON should write one line, got %q", b.String())
	}
	// Decode loosely, as a consumer would, so the test pins names and shapes.
	var got struct {
		FormatVersion string `json:"format_version"`
		Stack         string
		Changes       bool
		Groups        []map[string]any
		Summary       map[string]int
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.FormatVersion != JSONFormatVersion || got.Stack != "mystack" || !got.Changes {
		t.Errorf("header = %+v", got)
	}
	if want := map[string]int{"add": 8, "roll": 2, "replace": 0, "destroy": 4, "publish": 0, "republish": 0, "unpublish": 0,
		"register": 0, "deregister": 0, "authorize": 0, "revoke": 0}; !reflect.DeepEqual(got.Summary, want) {
		t.Errorf("summary = %v, want %v", got.Summary, want)
	}
	actions := map[string]string{}
	for _, g := range got.Groups {
		actions[g["group"].(string)] = g["action"].(string)
		for _, k := range []string{"group", "action", "before", "after", "create", "create_logical_ids", "destroy", "roll"} {
			v, ok := g[k]
			if !ok || v == nil {
				t.Errorf("group %v: field %q missing or null", g["group"], k)
			}
		}
	}
	wantActions := map[string]string{"miners": "create", "cattle": "update", "web": "roll", "db": "update", "small": "update",
		"back": "resume", "same": "no-op", "loose": "free", "old": "destroy", "lost": "unknown"}
	if !reflect.DeepEqual(actions, wantActions) {
		t.Errorf("actions = %v, want %v", actions, wantActions)
	}
	jp := NewJSONPlan(examplePlan(t))
	byName := map[string]JSONGroup{}
	for _, g := range jp.Groups {
		byName[g.Group] = g
	}
	if g := byName["web"]; !reflect.DeepEqual(g.Roll, []instance.ID{"w-0", "w-1"}) || g.Create != 0 {
		t.Errorf("web = %+v", g)
	}
	if g := byName["db"]; !reflect.DeepEqual(g.CreateLogicalIDs, []string{"10.0.0.2"}) || g.Create != 1 || g.Before != 1 || g.After != 2 {
		t.Errorf("db = %+v", g)
	}
	if g := byName["old"]; !reflect.DeepEqual(g.Destroy, []instance.ID{"o-0", "o-1", "o-2"}) {
		t.Errorf("old = %+v", g)
	}
	if g := byName["lost"]; !strings.Contains(g.Error, "connection refused") {
		t.Errorf("lost = %+v", g)
	}
}

func firstDiff(a, b string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return a[max(0, i-20):min(len(a), i+20)]
		}
	}
	return "(one is a prefix of the other)"
}
