package legacy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"pgregory.net/rapid"
)

// TestParseYAMLPositions: keys and values point at their line and column,
// strings in every quoting style included, and the range of a scalar ends
// where it does in the source.
func TestParseYAMLPositions(t *testing.T) {
	src := "# comment\nkind: group\nmetadata:\n  name: 'cat''tle'\n  tags: {tier: \"w\\\"eb\", n: 10}\nlist:\n  - plain text\n  - |\n    block\n"
	docs, diags := parseYAML(newSource("f.yaml", []byte(src)))
	if diags.HasErrors() || len(docs) != 1 {
		t.Fatalf("%v %d", diags, len(docs))
	}
	doc := docs[0]
	at := func(n *node) string {
		return posString(n.rng.Start.Line, n.rng.Start.Column) + "-" + posString(n.rng.End.Line, n.rng.End.Column)
	}
	md := doc.field("metadata").value
	tags := md.field("tags").value
	for _, tt := range []struct {
		what string
		n    *node
		want string
		text string
	}{
		{"kind", doc.field("kind").value, "2:7-2:12", "group"},
		{"name", md.field("name").value, "4:9-4:19", "cat'tle"},
		{"tier", tags.field("tier").value, "5:16-5:23", `w"eb`},
		{"n", tags.field("n").value, "5:28-5:30", "10"},
		{"plain", doc.field("list").value.items[0], "7:5-7:15", "plain text"},
		{"block", doc.field("list").value.items[1], "8:5-8:6", "block\n"},
	} {
		if got := at(tt.n); got != tt.want || tt.n.text != tt.text {
			t.Errorf("%s at %s %q, want %s %q", tt.what, got, tt.n.text, tt.want, tt.text)
		}
	}
	if f := md.field("tags"); posString(f.nameRange.Start.Line, f.nameRange.Start.Column) != "5:3" {
		t.Errorf("tags key at %v", f.nameRange)
	}
}

func TestParseYAMLScalars(t *testing.T) {
	src := "a: 0x1F\nb: 1.50\nc: true\nd: ~\ne: 2001-12-14\nf: '10'\ng: !!str 3\nh: yes\ni: 18446744073709551615\n"
	docs, diags := parseYAML(newSource("f.yaml", []byte(src)))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := map[string]any{
		"a": json.Number("31"), "b": json.Number("1.5"), "c": true, "d": nil, "e": "2001-12-14",
		"f": "10", "g": "3", "h": "yes", "i": json.Number("18446744073709551615"),
	}
	if got := plain(docs[0]); !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
}

func TestParseYAMLDocuments(t *testing.T) {
	src := "---\n# only a comment\n---\na: 1\n---\n~\n---\n- b\n"
	docs, diags := parseYAML(newSource("f.yaml", []byte(src)))
	if diags.HasErrors() || len(docs) != 2 || docs[0].kind != kindObject || docs[1].kind != kindArray {
		t.Fatalf("want the two documents with content, got %d (%v)", len(docs), diags)
	}
}

func TestParseYAMLErrors(t *testing.T) {
	tests := []struct {
		src, pos, summary, detail string
	}{
		{"a: 1\nb: [1, 2\n", "2:1", "Invalid YAML", "Did not find expected ',' or ']'."},
		{"kind: group\nmetadata:\n  name: g\n tags: {}\n", "4:2", "Invalid YAML", "Did not find expected key."},
		{"a: |\n x\n  y\nb: [\n\n", "4:1", "Invalid YAML", "Did not find expected node content."},
		{"a: 1\n\tb: 2\n", "2:2", "Invalid YAML", "Found a tab character that violates indentation."},
		{"a: b: c\n", "1:1", "Invalid YAML", "Mapping values are not allowed"},
		{"a: &x 1\n<<: *x\n", "2:1", "Unsupported YAML merge key", "write the fields out"},
		{"? [a]\n: 1\n", "1:3", "Invalid key", "plain value"},
		{"a: .inf\n", "1:4", "Invalid number", "not a finite number"},
		{"a: {{.ID}}\n", "1:5", "Invalid key", "quote it, or escape it"},
	}
	for _, tt := range tests {
		_, diags := parseYAML(newSource("f.yaml", []byte(tt.src)))
		if len(diags) != 1 || diags[0].Subject == nil {
			t.Errorf("%q: want one error with a subject, got %v", tt.src, diags)
			continue
		}
		d := diags[0]
		if got := posString(d.Subject.Start.Line, d.Subject.Start.Column); got != tt.pos || d.Summary != tt.summary || !strings.Contains(d.Detail, tt.detail) {
			t.Errorf("%q: %s %s: %q, want %s %s containing %q", tt.src, got, d.Summary, d.Detail, tt.pos, tt.summary, tt.detail)
		}
	}
}

// yamlValue generates what yaml.v3 writes and reads back unchanged:
// strings, whole numbers, booleans, null, lists and maps.
func yamlValue(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		choices := 4
		if depth > 0 {
			choices = 6
		}
		switch rapid.IntRange(0, choices-1).Draw(t, "kind") {
		case 0:
			return rapid.String().Draw(t, "string")
		case 1:
			return json.Number(itoaInt64(rapid.Int64().Draw(t, "int")))
		case 2:
			return rapid.Bool().Draw(t, "bool")
		case 3:
			return nil
		case 4:
			return rapid.SliceOfN(yamlValue(depth-1), 0, 4).Draw(t, "list")
		default:
			return rapid.MapOfN(yamlKey(), yamlValue(depth-1), 0, 4).Draw(t, "map")
		}
	})
}

func itoaInt64(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// yamlOut prepares a generated value for yaml.Marshal (numbers as int64).
func yamlOut(v any) any {
	switch x := v.(type) {
	case json.Number:
		n, _ := x.Int64()
		return n
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = yamlOut(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = yamlOut(e)
		}
		return out
	}
	return v
}

// normalYAML is what yaml.v3 decodes, with numbers as the tree writes them.
func normalYAML(v any) any {
	switch x := v.(type) {
	case int:
		return json.Number(itoaInt64(int64(x)))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalYAML(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = normalYAML(e)
		}
		return out
	}
	return v
}

// yamlKey draws a mapping key. Not "<<": the tree refuses YAML merge keys
// on purpose (specifications write their fields out), where yaml.v3 merges.
func yamlKey() *rapid.Generator[string] {
	return rapid.StringN(1, 8, -1).Filter(func(k string) bool { return k != "<<" })
}

// TestParseYAMLAgreesWithYAMLv3: whatever yaml.v3 writes, the tree reads
// as yaml.v3 itself reads it.
func TestParseYAMLAgreesWithYAMLv3(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.MapOfN(yamlKey(), yamlValue(2), 1, 4).Draw(t, "doc")
		src, err := yaml.Marshal(yamlOut(v))
		if err != nil {
			t.Skip("yaml.v3 cannot write it")
		}
		var want any
		if err := yaml.Unmarshal(src, &want); err != nil {
			t.Skip("yaml.v3 cannot read what it wrote")
		}
		docs, diags := parseYAML(newSource("v.yaml", src))
		if diags.HasErrors() || len(docs) != 1 {
			t.Fatalf("%s\n%v", src, diags)
		}
		if got := plain(docs[0]); !reflect.DeepEqual(got, normalYAML(want)) {
			t.Fatalf("%s\nread %#v\nwant %#v", src, got, normalYAML(want))
		}
	})
}
