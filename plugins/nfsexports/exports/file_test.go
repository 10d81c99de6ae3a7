package exports

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenEntries are what the e2e enrollment makes: members of the cattle
// group by ID (the simulator walk-through) and a real one by address.
func goldenEntries() []Entry {
	tags := func(id string) map[string]string {
		return map[string]string{"infrakit.enrollment.name": "nfs", "infrakit.enrollment.source_id": id}
	}
	return []Entry{
		{ID: "exp-0000000b", SourceID: "compute-0000000b", Host: "compute-0000000b", Volume: "/srv/nfs/cattle",
			Properties: json.RawMessage(`{"host":"compute-0000000b","volume":"/srv/nfs/cattle"}`), Tags: tags("compute-0000000b")},
		{ID: "exp-0000000a", SourceID: "compute-0000000a", Host: "10.0.0.7", Volume: "/srv/nfs/cattle", Options: []string{"ro", "root_squash"},
			Properties: json.RawMessage(`{"host":"10.0.0.7","options":["ro","root_squash"],"volume":"/srv/nfs/cattle"}`), Tags: tags("compute-0000000a")},
		{ID: "exp-0000000c", SourceID: "web-1", Host: "10.0.1.0/24", Volume: "/srv/nfs/a", Options: []string{"rw,sync"}},
		// host = member.address of a process instance: the port is dropped.
		{ID: "exp-0000000d", SourceID: "process-1a2b3c4d", Host: "127.0.0.1:20001", Volume: "/srv/nfs/a",
			Properties: json.RawMessage(`{"host":"127.0.0.1:20001","volume":"/srv/nfs/a"}`)},
	}
}

func TestRenderGolden(t *testing.T) {
	got, err := Render(goldenEntries(), defaults())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "golden.exports")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("render differs from %s (run with -update after checking):\n%s", path, got)
	}
	back, stray, err := Parse(got)
	if err != nil || len(stray) != 0 {
		t.Fatalf("parse the golden file: %v %v", stray, err)
	}
	if len(back) != 4 || back[0].ID != "exp-0000000c" || back[1].Host != "127.0.0.1:20001" {
		t.Fatalf("entries come back sorted by volume, host, ID: %+v", back)
	}
}

func TestParseErrors(t *testing.T) {
	good, err := Render(goldenEntries(), defaults())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(good), "\n")
	tests := map[string]string{
		"no final newline":      strings.TrimSuffix(string(good), "\n"),
		"record without export": strings.Join(lines[:len(lines)-2], ""),
		"export line edited":    strings.Replace(string(good), "/srv/nfs/a 10.0.1.0/24", "/srv/nfs/b 10.0.1.0/24", 1),
		"record not JSON":       recordPrefix + "{not json\n/srv h(rw)\n",
		"record without an id":  recordPrefix + `{"host":"h","volume":"/srv"}` + "\n/srv h(rw)\n",
		"the same ID twice":     string(good) + strings.Join(lines[len(lines)-3:len(lines)-1], ""),
	}
	for name, data := range tests {
		if es, _, err := Parse([]byte(data)); err == nil {
			t.Errorf("%s: parsed as %+v", name, es)
		}
	}
	// Hand-added export lines and comments are tolerated and reported.
	es, stray, err := Parse(append(slices.Clone(good), "# a note\n\n/srv/by-hand 10.9.9.9(ro)\n"...))
	if err != nil || len(es) != 4 || !slices.Equal(stray, []string{"/srv/by-hand 10.9.9.9(ro)"}) {
		t.Fatalf("hand edits: %v %v %v", es, stray, err)
	}
	if es, stray, err := Parse(nil); err != nil || es != nil || stray != nil {
		t.Fatalf("an empty file: %v %v %v", es, stray, err)
	}
}

// TestRoundTrip: Parse(Render(entries)) gives the entries back, sorted by
// volume, host and ID, for any entries Authorize would accept.
func TestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 8).Draw(t, "n")
		hosts := []string{"10.0.0.1", "::1", "web-1.example.com", "*.example.com", "10.0.0.0/8", "@ng", "*", "10.0.0.9:8080", "[::1]:22"}
		var in []Entry
		for i := range n {
			e := Entry{
				ID:       fmt.Sprintf("exp-%08x", i),
				SourceID: rapid.StringMatching(`[a-z0-9-]{1,12}`).Draw(t, "source"),
				Host:     rapid.SampledFrom(hosts).Draw(t, "host"),
				Volume:   rapid.SampledFrom([]string{"/srv/a", "/srv/b", "/"}).Draw(t, "volume"),
				Options:  rapid.SliceOfN(rapid.SampledFrom([]string{"rw", "sync", "no_root_squash", "anonuid=7", "rw,sync"}), 0, 3).Draw(t, "options"),
			}
			if len(e.Options) == 0 {
				e.Options = nil // omitted from the record, so read back as nil
			}
			if rapid.Bool().Draw(t, "tagged") {
				e.Tags = map[string]string{"k": rapid.String().Draw(t, "tag")} // any text, even newlines and quotes
			}
			if rapid.Bool().Draw(t, "props") {
				b, _ := json.Marshal(map[string]string{"note": rapid.String().Draw(t, "note")})
				e.Properties = b
			}
			in = append(in, e)
		}
		data, err := Render(in, defaults())
		if err != nil {
			t.Fatal(err)
		}
		out, stray, err := Parse(data)
		if err != nil || len(stray) != 0 {
			t.Fatalf("parse: %v %v\n%s", stray, err, data)
		}
		want := slices.Clone(in)
		slices.SortFunc(want, func(a, b Entry) int {
			return strings.Compare(a.Volume+"\x00"+a.Host+"\x00"+a.ID, b.Volume+"\x00"+b.Host+"\x00"+b.ID)
		})
		if len(want) == 0 {
			want = nil
		}
		if !reflect.DeepEqual(out, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", out, want)
		}
		// A file cut anywhere but at an entry's end is refused, never read
		// as a shorter list that looks whole.
		cut := rapid.IntRange(1, len(data)).Draw(t, "cut")
		es, _, err := Parse(data[:cut])
		if err == nil && cut < len(data) {
			if !strings.HasSuffix(string(data[:cut]), "\n") {
				t.Fatalf("a file cut at %d of %d without a final newline parsed as %d entries", cut, len(data), len(es))
			}
		}
	})
}

func TestEffectiveOptions(t *testing.T) {
	if got := EffectiveOptions(nil, defaults()); !slices.Equal(got, defaults()) {
		t.Errorf("none: %v", got)
	}
	if got := EffectiveOptions([]string{"ro,root_squash", " sync "}, defaults()); !slices.Equal(got, []string{"ro", "root_squash", "sync"}) {
		t.Errorf("split: %v", got)
	}
}

func defaults() []string { return strings.Split(DefaultOptions, ",") }
