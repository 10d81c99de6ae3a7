package filesd

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestRenderGolden: the file Prometheus reads, one target group per
// authorization in ID order, each with its labels and the hidden record.
func TestRenderGolden(t *testing.T) {
	b, err := Render([]Entry{
		{ID: "sd-2", SourceID: "process-b", Address: "127.0.0.1:20002", Labels: map[string]string{"infrakit_instance": "process-b"}},
		{ID: "sd-1", SourceID: "process-a", Address: "127.0.0.1:20001", Props: json.RawMessage(`{"address":"127.0.0.1:20001"}`),
			Tags: map[string]string{"infrakit.enrollment.name": "scrape"}, Labels: map[string]string{"infrakit_group": "web", "infrakit_instance": "process-a"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "targets": [
      "127.0.0.1:20001"
    ],
    "labels": {
      "__infrakit_authorization": "{\"id\":\"sd-1\",\"source_id\":\"process-a\",\"properties\":{\"address\":\"127.0.0.1:20001\"},\"tags\":{\"infrakit.enrollment.name\":\"scrape\"}}",
      "infrakit_group": "web",
      "infrakit_instance": "process-a"
    }
  },
  {
    "targets": [
      "127.0.0.1:20002"
    ],
    "labels": {
      "__infrakit_authorization": "{\"id\":\"sd-2\",\"source_id\":\"process-b\"}",
      "infrakit_instance": "process-b"
    }
  }
]
`
	if string(b) != want {
		t.Fatalf("got\n%s\nwant\n%s", b, want)
	}
	if b, _ := Render(nil); string(b) != "[]\n" {
		t.Fatalf("no entries render as %q, want an empty list", b)
	}
}

func entryGen() *rapid.Generator[Entry] {
	str := rapid.StringMatching(`[a-zA-Z0-9 ."{}\\\-_:/]{0,12}`)
	return rapid.Custom(func(t *rapid.T) Entry {
		e := Entry{
			SourceID: rapid.StringMatching(`[a-z0-9-]{1,12}`).Draw(t, "source"),
			Host:     str.Draw(t, "host"),
			Volume:   str.Draw(t, "volume"),
			Address:  rapid.StringMatching(`[a-z0-9.]{1,10}:[1-9][0-9]{0,4}`).Draw(t, "address"),
			Labels:   rapid.MapOf(rapid.StringMatching(`[a-z_][a-z0-9_]{0,8}`), str).Draw(t, "labels"),
			Tags:     rapid.MapOf(str, str).Draw(t, "tags"),
		}
		if rapid.Bool().Draw(t, "options") {
			e.Options = rapid.SliceOfN(str, 1, 3).Draw(t, "options")
		}
		if rapid.Bool().Draw(t, "props") {
			b, _ := json.Marshal(map[string]string{"note": str.Draw(t, "note")})
			e.Props = b
		}
		return e
	})
}

// TestRenderParseRoundTrip: any entries render to a file that parses back
// to the same entries; a file cut short is an error, never fewer entries.
func TestRenderParseRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		entries := rapid.SliceOfN(entryGen(), 0, 5).Draw(t, "entries")
		for i := range entries {
			entries[i].ID = fmt.Sprintf("sd-%02d", i)
			delete(entries[i].Labels, RecordLabel)
		}
		b, err := Render(entries)
		if err != nil {
			t.Fatal(err)
		}
		got, stray, err := Parse(b)
		if err != nil || stray != 0 {
			t.Fatalf("parse: %v (%d stray)\n%s", err, stray, b)
		}
		if len(got) != len(entries) {
			t.Fatalf("%d entries back, want %d", len(got), len(entries))
		}
		for i, e := range entries {
			g := got[i]
			if g.ID != e.ID || g.SourceID != e.SourceID || g.Host != e.Host || g.Volume != e.Volume || g.Address != e.Address ||
				!slices.Equal(g.Options, e.Options) || !equalMaps(g.Labels, e.Labels) || !equalMaps(g.Tags, e.Tags) ||
				string(canonical(g.Props)) != string(canonical(e.Props)) {
				t.Fatalf("entry %d: got %+v, want %+v", i, g, e)
			}
		}
		if len(entries) > 0 {
			cut := rapid.IntRange(1, len(b)-2).Draw(t, "cut")
			if back, _, err := Parse(b[:cut]); err == nil {
				t.Fatalf("a file cut at %d of %d parsed as %d entries", cut, len(b), len(back))
			}
		}
	})
}

// equalMaps treats nil and empty alike, as JSON does.
func equalMaps(a, b map[string]string) bool { return len(a) == len(b) && maps.Equal(a, b) }

// TestParseDropsStrays: groups another writer added are counted, not read.
func TestParseDropsStrays(t *testing.T) {
	got, stray, err := Parse([]byte(`[
		{"targets": ["10.0.0.1:80"]},
		{"targets": ["10.0.0.2:80"], "labels": {"__infrakit_authorization": "not json"}},
		{"targets": ["10.0.0.3:80", "10.0.0.4:80"], "labels": {"__infrakit_authorization": "{\"id\":\"sd-9\"}"}},
		{"targets": ["10.0.0.5:80"], "labels": {"__infrakit_authorization": "{\"id\":\"sd-1\",\"source_id\":\"m\"}", "a": "b"}}
	]`))
	if err != nil || stray != 3 || len(got) != 1 || got[0].ID != "sd-1" || got[0].Address != "10.0.0.5:80" || got[0].Labels["a"] != "b" {
		t.Fatalf("got %+v, %d stray, %v", got, stray, err)
	}
	if _, _, err := Parse([]byte(`{"targets": []}`)); err == nil {
		t.Fatal("an object parsed as a list of groups")
	}
}
