package properties

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/provider"
)

type spec struct {
	Name    string
	Count   int
	Ratio   float64
	On      bool
	Wait    time.Duration
	Args    []string
	Env     map[string]string
	Missing bool
}

// parse is how a provider uses a Decoder: one walk, every error collected.
func parse(raw string) (spec, provider.Diagnostics) {
	var d Decoder
	var s spec
	f, ok := d.Object(json.RawMessage(raw), nil, []string{"name", "count", "ratio", "on", "wait", "args", "env", "nested"}, "the test properties")
	if !ok {
		return s, d.Diags
	}
	if v, ok := f.Get("name"); ok {
		s.Name, _ = d.String(v, []string{"name"})
	} else {
		s.Missing = true
	}
	if v, ok := f.Get("count"); ok {
		s.Count, _ = d.Int(v, []string{"count"})
	}
	if v, ok := f.Get("ratio"); ok {
		s.Ratio, _ = d.Number(v, []string{"ratio"})
	}
	if v, ok := f.Get("on"); ok {
		s.On, _ = d.Bool(v, []string{"on"})
	}
	if v, ok := f.Get("wait"); ok {
		s.Wait, _ = d.Duration(v, []string{"wait"})
	}
	if v, ok := f.Get("args"); ok {
		s.Args = d.StringList(v, []string{"args"})
	}
	if v, ok := f.Get("env"); ok {
		s.Env = d.StringMap(v, []string{"env"})
	}
	if v, ok := f.Get("nested"); ok {
		d.Object(v, []string{"nested"}, []string{"a"}, "nested")
	}
	return s, d.Diags
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  spec
		paths []string // attribute paths of the errors, in order
		words []string // each must appear in some error's summary or detail
	}{
		{name: "all set", in: `{"name":"a","count":3,"ratio":0.5,"on":true,"wait":"2s","args":["x","y"],"env":{"K":"V"}}`,
			want: spec{Name: "a", Count: 3, Ratio: 0.5, On: true, Wait: 2 * time.Second, Args: []string{"x", "y"}, Env: map[string]string{"K": "V"}}},
		{name: "nulls are unset", in: `{"name":null,"count":null}`, want: spec{Missing: true}},
		{name: "not an object", in: `[1]`, paths: []string{""}, words: []string{"The test properties must be an object, got list"}},
		{name: "nothing", in: ``, paths: []string{""}, words: []string{"got nothing"}},
		{name: "unknown keys sorted", in: `{"zz":1,"aa":2,"name":"n"}`, want: spec{Name: "n"}, paths: []string{"aa", "zz"},
			words: []string{`An argument named "aa" is not expected in the test properties. The arguments expected there are "name", "count"`}},
		{name: "wrong types", in: `{"name":1,"count":"3","on":"yes","ratio":true}`, want: spec{}, paths: []string{"name", "count", "ratio", "on"},
			words: []string{"name must be a string, got number", "count must be a whole number, got string", "on must be true or false", "ratio must be a number, got bool"}},
		{name: "fraction", in: `{"name":"n","count":1.5}`, want: spec{Name: "n"}, paths: []string{"count"}, words: []string{"got 1.5"}},
		{name: "durations", in: `{"name":"n","wait":"soon"}`, want: spec{Name: "n"}, paths: []string{"wait"}, words: []string{`wait "soon" is not a duration`}},
		{name: "negative duration", in: `{"name":"n","wait":"-1s"}`, want: spec{Name: "n"}, paths: []string{"wait"}, words: []string{"must not be negative"}},
		{name: "list elements at their index", in: `{"name":"n","args":["a",2,"c"]}`, want: spec{Name: "n", Args: []string{"a", "c"}},
			paths: []string{"args.1"}, words: []string{"args.1 must be a string"}},
		{name: "map values at their key", in: `{"name":"n","env":{"A":"1","B":2}}`, want: spec{Name: "n", Env: map[string]string{"A": "1"}},
			paths: []string{"env.B"}},
		{name: "nested unknown key", in: `{"name":"n","nested":{"b":1}}`, want: spec{Name: "n"}, paths: []string{"nested.b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, diags := parse(tt.in)
			var paths []string
			var text strings.Builder
			for _, d := range diags {
				if d.Severity != provider.Error {
					t.Errorf("severity %v, want error", d.Severity)
				}
				paths = append(paths, strings.Join(d.Path, "."))
				text.WriteString(d.Summary + ": " + d.Detail + "\n")
			}
			if !slices.Equal(paths, tt.paths) {
				t.Errorf("error paths %q, want %q\n%s", paths, tt.paths, text.String())
			}
			for _, w := range tt.words {
				if !strings.Contains(text.String(), w) {
					t.Errorf("no error says %q:\n%s", w, text.String())
				}
			}
			if len(tt.paths) == 0 && tt.want.Name == "" && !tt.want.Missing {
				return
			}
			if got.Name != tt.want.Name || got.Count != tt.want.Count || got.Ratio != tt.want.Ratio || got.On != tt.want.On ||
				got.Wait != tt.want.Wait || !slices.Equal(got.Args, tt.want.Args) || len(got.Env) != len(tt.want.Env) || got.Missing != tt.want.Missing {
				t.Errorf("decoded %+v, want %+v", got, tt.want)
			}
			for k, v := range tt.want.Env {
				if got.Env[k] != v {
					t.Errorf("env[%s] = %q, want %q", k, got.Env[k], v)
				}
			}
		})
	}
}

// Sibling paths built from one parent must not share storage.
func TestAppendDoesNotAlias(t *testing.T) {
	parent := make([]string, 1, 8)
	parent[0] = "p"
	a := Append(parent, "a")
	b := Append(parent, "b")
	if a[1] != "a" || b[1] != "b" {
		t.Fatalf("a=%q b=%q", a, b)
	}
}

func TestErrIsNilWithoutErrors(t *testing.T) {
	var d Decoder
	if d.Err() != nil {
		t.Fatal("empty decoder has an error")
	}
	d.Errorf([]string{"x"}, "S", "d %d", 1)
	if err := d.Err(); err == nil || !strings.Contains(err.Error(), "d 1") {
		t.Fatalf("err = %v", err)
	}
}

func TestEnvironment(t *testing.T) {
	var d Decoder
	env := d.Environment(json.RawMessage(`{"A":"1","":"x","B=C":"y","PORT":"9"}`), []string{"env"}, []string{"PORT"}, "the test provider for each instance")
	if env["A"] != "1" {
		t.Errorf("env = %v", env)
	}
	var got []string
	for _, dg := range d.Diags {
		got = append(got, strings.Join(dg.Path, ".")+": "+dg.Summary+": "+dg.Detail)
	}
	want := []string{
		`env.: Invalid environment variable name: "" cannot be an environment variable name.`,
		`env.B=C: Invalid environment variable name: "B=C" cannot be an environment variable name.`,
		`env.PORT: Reserved environment variable: PORT is set by the test provider for each instance.`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("diagnostics\n%q\nwant\n%q", got, want)
	}
}
