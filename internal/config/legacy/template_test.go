package legacy

import (
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestBlankLeadingComments(t *testing.T) {
	tests := []struct {
		src, want string
		yaml      bool
	}{
		{"{{/* c */}}\n{}", "           \n{}", false},
		{"  {{- /* a\nb */ -}}{}", "          \n        {}", false},
		{"# top\n{{/* c */}}\nkind: x\n{{/* later: kept */}}", "# top\n           \nkind: x\n{{/* later: kept */}}", true},
		{"# not a JSON comment\n{{/* c */}}", "# not a JSON comment\n{{/* c */}}", false},
		{"{{/* unterminated", "{{/* unterminated", false},
		{"{{/* a */}}{{/* b */}}[]", "                      []", false},
		{"\ufeff{}", "   {}", false},
		{`{"a": "{{/* in a string */}}"}`, `{"a": "{{/* in a string */}}"}`, false},
	}
	for _, tt := range tests {
		if got := string(blankLeadingComments([]byte(tt.src), tt.yaml)); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.src, got, tt.want)
		}
	}
}

// TestBlankLeadingCommentsKeepsPositions: whatever the input, blanking
// keeps its length and every line break where it was, so every position in
// the rest of the file is unchanged.
func TestBlankLeadingCommentsKeepsPositions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOf(rapid.SampledFrom([]string{"{{/*", "*/}}", "{{- /*", "*/ -}}", "\n", " ", "#", "x", "{}", "é"})).Draw(t, "parts")
		src := []byte(strings.Join(parts, ""))
		out := blankLeadingComments(src, rapid.Bool().Draw(t, "yaml"))
		if len(out) != len(src) {
			t.Fatalf("length %d, want %d", len(out), len(src))
		}
		for i := range src {
			if (src[i] == '\n') != (out[i] == '\n') {
				t.Fatalf("line break moved at %d: %q -> %q", i, src, out)
			}
			if out[i] != src[i] && out[i] != ' ' {
				t.Fatalf("byte %d changed to %q", i, out[i])
			}
		}
	})
}

func TestMemberTemplate(t *testing.T) {
	id, lid := &memberRef{attr: "id"}, &memberRef{attr: "logical_id"}
	tests := []struct {
		in    string
		parts []templatePart
		err   string
	}{
		{in: "plain"},
		{in: "{{.ID}}", parts: []templatePart{{ref: id}}},
		{in: "{{ .ID }}", parts: []templatePart{{ref: id}}},
		{in: "{{- .ID -}}", parts: []templatePart{{ref: id}}},
		{in: `\{\{.ID\}\}`, parts: []templatePart{{ref: id}}},
		{in: `\{\{ .LogicalID \}\}`, parts: []templatePart{{ref: lid}}},
		{in: `{{ "{{" }}.ID}}`, parts: []templatePart{{ref: id}}},
		{in: `{{ "{{" }} .ID {{ "}}" }}`, parts: []templatePart{{ref: id}}},
		{in: "{{`{{`}}.ID}}", parts: []templatePart{{ref: id}}},
		{in: "host-{{.ID}}:2049", parts: []templatePart{{text: "host-"}, {ref: id}, {text: ":2049"}}},
		{in: "{{.Tags.tier}}", parts: []templatePart{{ref: &memberRef{attr: "tags", tag: "tier"}}}},
		{in: `{{ index .Tags "infrakit.group" }}`, parts: []templatePart{{ref: &memberRef{attr: "tags", tag: "infrakit.group"}}}},
		{in: "{{.ID}}{{.LogicalID}}", parts: []templatePart{{ref: id}, {ref: lid}}},
		{in: "{{ .Properties.ip }}", err: "{{ .Properties.ip }} cannot be translated"},
		{in: "{{ var `x` }}", err: "cannot be translated; the supported forms are"},
		{in: "{{ unclosed", parts: nil},
	}
	for _, tt := range tests {
		parts, ok, err := memberTemplate(tt.in)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want %q", tt.in, err, tt.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.in, err)
		case ok != (tt.parts != nil) || !reflect.DeepEqual(parts, tt.parts):
			t.Errorf("%q: %v %+v, want %+v", tt.in, ok, parts, tt.parts)
		}
	}
}
