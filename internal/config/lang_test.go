package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/infrakit/infrakit/internal/config"
)

// langStack uses a variable of each type, a validation, locals, functions
// and outputs; every size and property derives from them.
const langStack = `
stack "lang" {}
provider "simulator" {}

variable "name" {
  type    = string
  default = "web"
}
variable "size" {
  type    = number
  default = 2
  validation {
    condition     = var.size >= 0 && var.size <= 10
    error_message = "size must be between 0 and 10."
  }
}
variable "public" {
  type    = bool
  default = false
}
variable "zones" {
  type    = list(string)
  default = ["a", "b"]
}
variable "labels" {
  type    = map(string)
  default = { team = "core" }
}
variable "db" {
  type = object({ host = string, port = number })
  default = { host = "db.local", port = 5432 }
}
variable "token" {
  type      = string
  default   = "s3cret"
  sensitive = true
}

locals {
  prefix = upper(var.name)
}
locals {
  full = format("%s-%d", local.prefix, var.size)
}

group "web" {
  size = var.size
  tags = merge(var.labels, { zone = join(",", var.zones) })
  instance {
    provider   = simulator
    type       = "vm"
    properties = { name = local.full, public = var.public, db = "${var.db.host}:${var.db.port}", token = var.token }
  }
  flavor { provider = simulator }
}

output "addresses" {
  value = group.web.members[*].address
}
output "count" {
  value       = length(group.web.members)
  description = "members"
}
output "full" { value = local.full }
output "token" {
  value     = var.token
  sensitive = true
}
`

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLanguageValues(t *testing.T) {
	type props struct {
		Name, DB, Token string
		Public          bool
	}
	tests := []struct {
		name  string
		files map[string]string
		in    config.Inputs
		size  int
		props props
		tags  map[string]string
	}{
		{name: "defaults", size: 2,
			props: props{Name: "WEB-2", DB: "db.local:5432", Token: "s3cret"},
			tags:  map[string]string{"team": "core", "zone": "a,b"}},
		{name: "env", in: config.Inputs{Env: []string{"INFRAKIT_VAR_size=3", "INFRAKIT_VAR_zones=[\"x\"]", "INFRAKIT_VAR_other=1", "HOME=/"}}, size: 3,
			props: props{Name: "WEB-3", DB: "db.local:5432", Token: "s3cret"},
			tags:  map[string]string{"team": "core", "zone": "x"}},
		{name: "infrakit.ivars over env",
			files: map[string]string{"infrakit.ivars": "size = 4\npublic = true\n"},
			in:    config.Inputs{Env: []string{"INFRAKIT_VAR_size=3"}}, size: 4,
			props: props{Name: "WEB-4", DB: "db.local:5432", Token: "s3cret", Public: true},
			tags:  map[string]string{"team": "core", "zone": "a,b"}},
		{name: "auto files in name order over infrakit.ivars",
			files: map[string]string{"infrakit.ivars": "size = 4\n", "a.auto.ivars": "size = 5\nname = \"api\"\n", "b.auto.ivars.json": `{"size": 6, "db": {"host": "h", "port": 1}}`},
			size:  6, props: props{Name: "API-6", DB: "h:1", Token: "s3cret"},
			tags: map[string]string{"team": "core", "zone": "a,b"}},
		{name: "command line in order over files",
			files: map[string]string{"a.auto.ivars": "size = 5\n", "extra.ivars": "size = 7\nlabels = { team = \"ops\" }\n"},
			in:    config.Inputs{Args: []config.VarArg{{Name: "size", Value: "8"}, {File: "extra.ivars"}, {Name: "token", Value: "t"}}},
			size:  7, props: props{Name: "WEB-7", DB: "db.local:5432", Token: "t"},
			tags: map[string]string{"team": "ops", "zone": "a,b"}},
		{name: "-var after -var-file wins",
			files: map[string]string{"extra.ivars": "size = 7\n"},
			in:    config.Inputs{Args: []config.VarArg{{File: "extra.ivars"}, {Name: "size", Value: "1"}, {Name: "labels", Value: `{ a = "b" }`}}},
			size:  1, props: props{Name: "WEB-1", DB: "db.local:5432", Token: "s3cret"},
			tags: map[string]string{"a": "b", "zone": "a,b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{"stack.hcl": langStack}
			for k, v := range tt.files {
				files[k] = v
			}
			dir := writeDir(t, files)
			for i, a := range tt.in.Args {
				if a.File != "" {
					tt.in.Args[i].File = filepath.Join(dir, a.File)
				}
			}
			st, diags := config.LoadWith(dir, tt.in)
			if diags.HasErrors() || len(diags) > 0 {
				t.Fatalf("diagnostics:\n%s", render(st, diags))
			}
			g := st.Group("web")
			if g.Size == nil || *g.Size != tt.size {
				t.Fatalf("size = %v, want %d", g.Size, tt.size)
			}
			var got props
			if err := json.Unmarshal(g.Instance.Properties, &got); err != nil {
				t.Fatal(err)
			}
			if got != tt.props {
				t.Errorf("properties = %+v, want %+v", got, tt.props)
			}
			if len(g.Tags) != len(tt.tags) {
				t.Errorf("tags = %v, want %v", g.Tags, tt.tags)
			}
			for k, v := range tt.tags {
				if g.Tags[k] != v {
					t.Errorf("tags = %v, want %v", g.Tags, tt.tags)
				}
			}
		})
	}
}

func TestLanguageErrors(t *testing.T) {
	base := "stack \"s\" {}\nprovider \"simulator\" {}\n"
	group := func(size string) string {
		return "group \"g\" {\n  size = " + size + "\n  instance {\n    provider = simulator\n    type = \"vm\"\n  }\n  flavor { provider = simulator }\n}\n"
	}
	tests := []struct {
		name    string
		src     string
		files   map[string]string
		args    []config.VarArg
		at      string // file:line of the error
		summary string
		detail  string
	}{
		{name: "undeclared reference", src: base + group("var.sise"), at: "stack.hcl:4",
			summary: "Reference to undeclared input variable", detail: `No variable "sise"`},
		{name: "undeclared -var", src: base + "variable \"size\" { default = 1 }\n" + group("var.size"),
			args: []config.VarArg{{Name: "sise", Value: "1"}}, summary: "Value for undeclared variable", detail: "Did you mean size?"},
		{name: "undeclared in -var-file", src: base + "variable \"size\" { default = 1 }\n" + group("var.size"),
			files: map[string]string{"v.ivars": "size = 1\nsise = 2\n"}, args: []config.VarArg{{File: "v.ivars"}},
			at: "v.ivars:2", summary: "Value for undeclared variable"},
		{name: "wrong type in file", src: base + "variable \"size\" { type = number }\n" + group("var.size"),
			files: map[string]string{"v.ivars": "size = \"many\"\n"}, args: []config.VarArg{{File: "v.ivars"}},
			at: "v.ivars:1", summary: "Invalid value for variable", detail: "a number is required"},
		{name: "wrong type on command line", src: base + "variable \"zones\" { type = list(string) }\n" + group("length(var.zones)"),
			args: []config.VarArg{{Name: "zones", Value: "{ a = [1] }"}}, at: "stack.hcl:3", summary: "Invalid value for variable", detail: "-var zones"},
		{name: "missing required", src: base + "variable \"size\" { type = number }\n" + group("var.size"),
			at: "stack.hcl:3", summary: "No value for required variable"},
		{name: "failed validation", src: base + "variable \"size\" {\n  type = number\n  validation {\n    condition = var.size < 5\n    error_message = \"Too big.\"\n  }\n}\n" + group("var.size"),
			args: []config.VarArg{{Name: "size", Value: "9"}}, at: "stack.hcl:6", summary: "Invalid value for variable", detail: "Too big."},
		{name: "cycle in locals", src: base + "locals {\n  a = local.b + 1\n}\nlocals {\n  b = local.a\n}\n" + group("local.a"),
			at: "stack.hcl:4", summary: "Cycle in local values", detail: "stack.hcl:7"},
		{name: "undeclared local", src: base + "locals {\n  a = 1\n}\n" + group("local.aa"),
			at: "stack.hcl:7", summary: "Reference to undeclared local value", detail: "Did you mean local.a?"},
		{name: "unknown function", src: base + group("sizeof([1])"),
			at: "stack.hcl:4", summary: "Call to unknown function"},
		{name: "bad type expression", src: base + "variable \"x\" { type = lust(string) }\n" + group("1"),
			at: "stack.hcl:3", summary: "Invalid type specification"},
		{name: "sensitive output not marked", src: base + "variable \"t\" {\n  default = \"x\"\n  sensitive = true\n}\noutput \"t\" { value = \"${var.t}!\" }\n" + group("1"),
			at: "stack.hcl:7", summary: "Output refers to sensitive values"},
		{name: "output of undeclared", src: base + "output \"o\" { value = var.nope }\n" + group("1"),
			at: "stack.hcl:3", summary: "Reference to undeclared input variable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{"stack.hcl": tt.src}
			for k, v := range tt.files {
				files[k] = v
			}
			dir := writeDir(t, files)
			for i, a := range tt.args {
				if a.File != "" {
					tt.args[i].File = filepath.Join(dir, a.File)
				}
			}
			st, diags := config.LoadWith(dir, config.Inputs{Args: tt.args})
			if !diags.HasErrors() {
				t.Fatalf("no error; diagnostics:\n%s", render(st, diags))
			}
			for _, d := range diags {
				if d.Severity != hcl.DiagError || d.Summary != tt.summary || !strings.Contains(d.Detail, tt.detail) {
					continue
				}
				if tt.at != "" {
					if d.Subject == nil {
						t.Fatalf("%s has no source range", d.Summary)
					}
					file, line, _ := strings.Cut(tt.at, ":")
					if filepath.Base(d.Subject.Filename) != file || itoa(d.Subject.Start.Line) != line {
						t.Fatalf("%s at %s:%d, want %s", d.Summary, d.Subject.Filename, d.Subject.Start.Line, tt.at)
					}
				}
				return
			}
			t.Fatalf("want %q containing %q; got:\n%s", tt.summary, tt.detail, render(st, diags))
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestLanguageOutputs(t *testing.T) {
	st := mustLoad(t, langStack)
	// A plan does not know the members yet.
	vals, diags := st.EvalOutputs(nil)
	if diags.HasErrors() {
		t.Fatal(render(st, diags))
	}
	if vals["addresses"].Value.IsKnown() || !vals["full"].Value.IsKnown() {
		t.Errorf("in a plan addresses must be unknown and full known: %#v", vals)
	}
	obs := &config.Observed{Members: map[string][]config.ObservedMember{
		"web": {{ID: "i-1", Address: "10.0.0.1", State: "running"}, {ID: "i-2", Address: "10.0.0.2"}},
	}}
	// The stack as a saved plan or the state keeps it evaluates the same.
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var stored config.Stack
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*config.Stack{st, &stored} {
		vals, diags = s.EvalOutputs(obs)
		if diags.HasErrors() {
			t.Fatal(render(s, diags))
		}
		want := map[string]cty.Value{
			"addresses": cty.TupleVal([]cty.Value{cty.StringVal("10.0.0.1"), cty.StringVal("10.0.0.2")}),
			"count":     cty.NumberIntVal(2),
			"full":      cty.StringVal("WEB-2"),
			"token":     cty.StringVal("s3cret"),
		}
		for name, w := range want {
			got := vals[name].Value
			if got.Type().IsListType() {
				got = cty.TupleVal(got.AsValueSlice())
			}
			if !got.RawEquals(w) {
				t.Errorf("output %s = %#v, want %#v", name, got, w)
			}
		}
		if !vals["token"].Sensitive || vals["full"].Sensitive {
			t.Errorf("sensitive flags wrong: %#v", vals)
		}
	}
	out, err := json.Marshal(vals["count"])
	if err != nil || string(out) != `{"sensitive":false,"type":"number","value":2}` {
		t.Errorf("output JSON = %s, %v", out, err)
	}
	var back config.OutputValue
	if err := json.Unmarshal(out, &back); err != nil || !back.Value.RawEquals(cty.NumberIntVal(2)) {
		t.Errorf("output JSON round trip = %#v, %v", back, err)
	}
}

func TestLanguageFunctions(t *testing.T) {
	tests := []struct{ expr, want string }{
		{`join("-", split(",", "a,b"))`, `"a-b"`},
		{`lookup({ a = 1 }, "b", 2)`, `2`},
		{`length("four")`, `4`},
		{`length([1, 2])`, `2`},
		{`jsonencode({ a = [1] })`, `"{\"a\":[1]}"`},
		{`jsondecode("[1]")[0]`, `1`},
		{`concat([1], [2])[1]`, `2`},
		{`contains(["a"], "a")`, `true`},
		{`keys({ b = 1, a = 2 })[0]`, `"a"`},
		{`values({ a = 5 })[0]`, `5`},
		{`min(3, 1, 2) + max(1, 5)`, `6`},
		{`replace(substr(trimspace("  hello "), 0, 4), "l", "L")`, `"heLL"`},
		{`tonumber(tostring(7))`, `7`},
		{`length(tolist(["a"])) + length(tomap({ a = 1 }))`, `2`},
		{`coalesce("", "x")`, `"x"`},
		{`length(flatten([[1], [2, 3]]))`, `3`},
		{`length(distinct([1, 1, 2]))`, `2`},
		{`element(["a", "b"], 3)`, `"b"`},
		{`length(range(3))`, `3`},
		{`lower(upper("Ab"))`, `"ab"`},
		{`merge({ a = 1 }, { b = 2 }).b`, `2`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			src := "stack \"s\" {}\nprovider \"simulator\" {}\nlocals {\n  x = " + tt.expr + "\n  want = " + tt.want + "\n}\n" +
				"variable \"ok\" {\n  default = true\n  validation {\n    condition = var.ok\n    error_message = \"x\"\n  }\n}\n"
			st := mustLoad(t, src)
			got, want := st.Locals["x"].Value, st.Locals["want"].Value
			if got.Equals(want) != cty.True {
				t.Errorf("%s = %#v, want %s", tt.expr, got, tt.want)
			}
		})
	}
}
