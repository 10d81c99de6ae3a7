package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"pgregory.net/rapid"
)

func sampleDoc() *Document {
	size := 3
	doc := NewDocument()
	doc.Serial = 7
	doc.Stack = &config.Stack{
		Name:      "mystack",
		Providers: []*config.Provider{{Name: "simulator"}, {Name: "simulator", Alias: "nfs-auth"}, {Name: "vanilla"}},
		Groups: []*config.Group{{
			Name:     "cattle",
			Size:     &size,
			Tags:     map[string]string{"tier": "web", "project": "e2e"},
			Instance: config.Plugin{Provider: "simulator", Type: "compute", Properties: json.RawMessage(`{"note":"a && b <c>"}`)},
			Flavors:  []config.Plugin{{Provider: "vanilla"}},
		}},
	}
	g := doc.Group("cattle")
	g.Instances = append(g.Instances,
		Instance{ID: "i-1", ConfigHash: "abc", State: "running", Address: "10.0.0.1:80"},
		Instance{ID: "i-2", LogicalID: "10.0.0.2", State: "pending"})
	doc.Group("miners").Freed = true
	return doc
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	doc := sampleDoc()
	data, err := Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("}\n")) || !bytes.Contains(data, []byte("\n  \"serial\": 7,\n")) {
		t.Errorf("not indented JSON with a trailing newline:\n%s", data)
	}
	if !bytes.Contains(data, []byte(`a && b <c>`)) {
		t.Errorf("HTML-escaped output:\n%s", data)
	}
	// Stable order: map keys sorted, so encoding twice gives the same bytes.
	if i, j := bytes.Index(data, []byte(`"project"`)), bytes.Index(data, []byte(`"tier"`)); i < 0 || j < i {
		t.Errorf("map keys not sorted:\n%s", data)
	}
	again, _ := Encode(doc)
	if !bytes.Equal(data, again) {
		t.Error("two encodings differ")
	}
	got, err := Decode("s.json", data)
	if err != nil {
		t.Fatal(err)
	}
	reenc, _ := Encode(got)
	if !bytes.Equal(reenc, data) {
		t.Errorf("decode+encode changed the document:\n%s\n---\n%s", data, reenc)
	}
}

func TestDecodeRefuses(t *testing.T) {
	valid := `{"version": 1, "serial": 3, "lineage": "L"}`
	for _, tc := range []struct {
		name, data string
		want       string // regexp the message must match
	}{
		{"empty", ``, `^state s\.json: is empty \(truncated by a crash\?\); refusing to use or overwrite it$`},
		{"whitespace", " \n\t", `is empty`},
		{"nul bytes", "\x00\x00\x00\x00", `NUL bytes`},
		{"truncated", valid[:20], `is truncated: the JSON ends early at line 1, col 20`},
		{"truncated multi-line", "{\n  \"version\": 1,\n  \"serial\": 3,\n  \"lin", `is truncated: .*line 4, col 6`},
		{"syntax error", "{\n  \"version\": 1,\n  \"serial\": 3 x\n}", `is not valid JSON: line 3, col 15: invalid character 'x'`},
		{"trailing garbage", valid + "}", `is not valid JSON: line 1, col 44: invalid character '}' after top-level value`},
		{"two documents", valid + valid, `is not valid JSON`},
		{"array", `[1,2]`, `is not a JSON object \(found array\)`},
		{"string", `"x"`, `is not a JSON object \(found string\)`},
		{"wrong type", "{\"version\": 1,\n \"serial\": \"three\", \"lineage\": \"L\"}", `line 2, col 18: .*serial`},
		{"newer format", `{"version": 2, "serial": 3, "lineage": "L"}`,
			`^state s\.json: was written by a newer infrakit \(format 2\); this build reads up to 1; refusing to use or overwrite it$`},
		{"newer format with other types", `{"version": 9, "serial": "x", "lineage": {"a": 1}}`, `newer infrakit \(format 9\)`},
		{"no version", `{"serial": 3, "lineage": "L"}`, `has no "version"`},
		{"null", `null`, `has no "version"`},
		{"negative version", `{"version": -1, "serial": 3, "lineage": "L"}`, `invalid version -1`},
		{"no lineage", `{"version": 1, "serial": 3}`, `has no "lineage"`},
		{"empty lineage", `{"version": 1, "serial": 3, "lineage": ""}`, `has no "lineage"`},
		{"serial 0", `{"version": 1, "serial": 0, "lineage": "L"}`, `has serial 0`},
		{"no serial", `{"version": 1, "lineage": "L"}`, `has serial 0`},
		{"bad duration", `{"version": 1, "serial": 1, "lineage": "L", "stack": {"groups": [{"update": {"health_timeout": "soon"}}]}}`, `cannot be decoded: .*soon`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := Decode("s.json", []byte(tc.data))
			if doc != nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode = %v, %v; want ErrInvalid", doc, err)
			}
			var inv *InvalidError
			if !errors.As(err, &inv) || inv.State != "s.json" {
				t.Fatalf("error %T %v does not carry the state name", err, err)
			}
			if !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Errorf("message %q does not match %q", err, tc.want)
			}
		})
	}
}

func TestDecodeAcceptsUnknownFieldsAndOldStyleSpacing(t *testing.T) {
	doc, err := Decode("s.json", []byte(`{"lineage":"L","serial":2,"version":1,"later_field":{"x":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if doc.Lineage != "L" || doc.Serial != 2 || doc.IsNew() {
		t.Errorf("got %+v", doc)
	}
}

func TestPosition(t *testing.T) {
	data := []byte("ab\ncd\nef")
	for _, tc := range []struct {
		offset    int64
		line, col int
	}{
		{0, 1, 1}, {1, 1, 1}, {2, 1, 2}, {3, 1, 3}, {4, 2, 1}, {5, 2, 2}, {8, 3, 2}, {99, 3, 2},
	} {
		if l, c := position(data, tc.offset); l != tc.line || c != tc.col {
			t.Errorf("position(%d) = %d:%d, want %d:%d", tc.offset, l, c, tc.line, tc.col)
		}
	}
}

func TestNewLineage(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		l := NewLineage()
		if !re.MatchString(l) {
			t.Fatalf("lineage %q is not a v4 UUID", l)
		}
		if seen[l] {
			t.Fatalf("lineage %q repeated", l)
		}
		seen[l] = true
	}
}

func TestNewDocumentAndGroup(t *testing.T) {
	doc := NewDocument()
	if !doc.IsNew() || doc.Version != FormatVersion || doc.Lineage == "" {
		t.Fatalf("NewDocument() = %+v", doc)
	}
	g := doc.Group("miners")
	g.Freed = true
	if doc.Group("miners") != g || !doc.Groups["miners"].Freed {
		t.Error("Group does not return the same record")
	}
	var zero Document
	zero.Group("x").UpdateStopped = true
	if !zero.Groups["x"].UpdateStopped {
		t.Error("Group on a zero Document did not create the map")
	}
	data, _ := Encode(&zero)
	if !strings.Contains(string(data), `"instances": []`) {
		t.Errorf("a new group should encode instances as [], got:\n%s", data)
	}
}

// jsonValue generates arbitrary JSON values up to depth levels of nesting.
func jsonValue(depth int) *rapid.Generator[any] {
	toAny := func(g any) *rapid.Generator[any] {
		switch g := g.(type) {
		case *rapid.Generator[bool]:
			return rapid.Map(g, func(v bool) any { return v })
		case *rapid.Generator[float64]:
			return rapid.Map(g, func(v float64) any { return v })
		case *rapid.Generator[string]:
			return rapid.Map(g, func(v string) any { return v })
		case *rapid.Generator[[]any]:
			return rapid.Map(g, func(v []any) any { return v })
		case *rapid.Generator[map[string]any]:
			return rapid.Map(g, func(v map[string]any) any { return v })
		}
		panic("unreachable")
	}
	str := rapid.OneOf(rapid.String(), rapid.SampledFrom([]string{`"`, `\`, `\"`, `{"a":[1,2]}`, "<&>", "\n\t", "\u2028", "\x00", "\xff"}))
	leaf := rapid.OneOf(rapid.Just[any](nil), toAny(rapid.Bool()), toAny(rapid.Float64Range(-1e6, 1e6)), toAny(str))
	if depth == 0 {
		return leaf
	}
	inner := jsonValue(depth - 1)
	return rapid.OneOf(leaf,
		toAny(rapid.SliceOfN(inner, 0, 4)),
		toAny(rapid.MapOfN(str, inner, 0, 4)))
}

// The one-pass indenter agrees with json.Indent on any JSON value.
func TestPropertyIndentCompactMatchesJSONIndent(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		v := jsonValue(4).Draw(rt, "value")
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(rapid.Bool().Draw(rt, "escapeHTML"))
		if err := enc.Encode(v); err != nil {
			rt.Fatal(err)
		}
		compact := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		var want bytes.Buffer
		if err := json.Indent(&want, compact, "", "  "); err != nil {
			rt.Fatal(err)
		}
		if got := indentCompact(nil, compact); !bytes.Equal(got, want.Bytes()) {
			rt.Fatalf("indentCompact(%s) =\n%s\nwant\n%s", compact, got, want.Bytes())
		}
	})
}

// Encode is exactly the standard library's indented encoding.
func TestEncodeMatchesEncoderIndent(t *testing.T) {
	deep := bigDocument(30)
	deep.Stack.Groups[0].Instance.Properties = json.RawMessage(`{"a": {"b": [1, {"c": []}, {}], "d": "x\"y"}, "e": [[[]]]}`)
	for _, doc := range []*Document{sampleDoc(), NewDocument(), deep} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			t.Fatal(err)
		}
		got, err := Encode(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("Encode =\n%s\nwant\n%s", got, want.Bytes())
		}
	}
}

func TestNewlineDeepIndent(t *testing.T) {
	if got := newline(nil, 40); len(got) != 81 || strings.Trim(string(got[1:]), " ") != "" {
		t.Errorf("newline(40) = %q", got)
	}
}
