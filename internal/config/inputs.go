package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Variable values come from, lowest precedence first (Terraform's order,
// with Terraform's names changed):
//
//  1. the variable block's default;
//  2. the environment: INFRAKIT_VAR_name=value;
//  3. the file infrakit.ivars (or infrakit.ivars.json) in the stack's directory;
//  4. the files *.auto.ivars and *.auto.ivars.json there, in name order;
//  5. -var name=value and -var-file FILE, in command-line order.
//
// A later source wins. A value from the environment or -var is the text
// itself for a variable of type string, number or bool, and an HCL
// expression (["a", "b"], { a = 1 }) for any other type. A variable file
// holds name = value attributes in HCL, or one JSON object when its name
// ends in .json; its values are literal (no references or functions).
const (
	// EnvVarPrefix starts the environment variables that set stack variables.
	EnvVarPrefix = "INFRAKIT_VAR_"
	// VarFile is the variable file read from the stack's directory.
	VarFile = "infrakit.ivars"
	// AutoVarFileSuffix ends the other variable files read from it.
	AutoVarFileSuffix = ".auto.ivars"
)

// VarArg is one -var NAME=VALUE (Name, Value) or -var-file FILE (File).
type VarArg struct {
	Name, Value string
	File        string
}

// Inputs are the variable values the command gives, besides the variable
// files of the stack's directory, which the loader reads itself.
type Inputs struct {
	// Env is the environment, "KEY=value" (os.Environ()).
	Env []string
	// Args are the -var and -var-file flags, in command-line order.
	Args []VarArg
}

// IsVarFile reports whether base (a file name) is a variable file the loader
// reads from the stack's directory, which is then no stack file.
func IsVarFile(base string) bool {
	b := strings.TrimSuffix(base, ".json")
	return b == VarFile || strings.HasSuffix(b, AutoVarFileSuffix)
}

// rawValue is one value given for a variable, not yet converted to its type.
type rawValue struct {
	name string
	// expr is set for a value from a file; text for one from -var or the
	// environment.
	expr hcl.Expression
	text string
	// source says where it came from, for messages; at is where in a file.
	source string
	at     hcl.Range
	// undeclared says what to do with a value for no declared variable:
	// "error" (command line), "warning" (auto-loaded files) or "" (ignore,
	// the environment holds other stacks' too).
	undeclared hcl.DiagnosticSeverity
}

// collectInputs gathers the given values in precedence order, lowest first.
// Parsed variable files are added to st.Files for diagnostics.
func collectInputs(st *Stack, dir string, in Inputs) ([]rawValue, hcl.Diagnostics) {
	var out []rawValue
	var diags hcl.Diagnostics
	for _, kv := range in.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, EnvVarPrefix) || len(k) == len(EnvVarPrefix) {
			continue
		}
		name := k[len(EnvVarPrefix):]
		out = append(out, rawValue{name: name, text: v, source: "the environment variable " + k,
			at: syntheticRange("<value for var." + name + ">")})
	}
	parser := hclparse.NewParser()
	if dir != "" {
		for _, f := range autoVarFiles(dir) {
			vals, d := readVarFile(parser, st, f, hcl.DiagWarning)
			out, diags = append(out, vals...), append(diags, d...)
		}
	}
	for _, a := range in.Args {
		if a.File != "" {
			vals, d := readVarFile(parser, st, a.File, hcl.DiagError)
			out, diags = append(out, vals...), append(diags, d...)
			continue
		}
		out = append(out, rawValue{name: a.Name, text: a.Value, source: "-var " + a.Name,
			at: syntheticRange("<value for var." + a.Name + ">"), undeclared: hcl.DiagError})
	}
	return out, diags
}

// syntheticRange stands for a value given outside any file.
func syntheticRange(name string) hcl.Range {
	return hcl.Range{Filename: name, Start: hcl.InitialPos, End: hcl.InitialPos}
}

// autoVarFiles are the variable files of dir in the order they apply.
func autoVarFiles(dir string) []string {
	var files []string
	for _, n := range []string{VarFile, VarFile + ".json"} {
		if fi, err := os.Stat(filepath.Join(dir, n)); err == nil && !fi.IsDir() {
			files = append(files, filepath.Join(dir, n))
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return files
	}
	var auto []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && (strings.HasSuffix(n, AutoVarFileSuffix) || strings.HasSuffix(n, AutoVarFileSuffix+".json")) {
			auto = append(auto, filepath.Join(dir, n))
		}
	}
	slices.Sort(auto)
	return append(files, auto...)
}

// readVarFile reads one variable file's name = value attributes.
func readVarFile(parser *hclparse.Parser, st *Stack, name string, undeclared hcl.DiagnosticSeverity) ([]rawValue, hcl.Diagnostics) {
	src, diags := ReadSource(name)
	if diags.HasErrors() {
		st.Files[name] = &hcl.File{Bytes: src}
		return nil, diags
	}
	var f *hcl.File
	var d hcl.Diagnostics
	if strings.HasSuffix(name, ".json") {
		f, d = parser.ParseJSON(src, name)
	} else {
		f, d = parser.ParseHCL(src, name)
	}
	diags = append(diags, d...)
	if f == nil {
		return nil, diags
	}
	st.Files[name] = f
	attrs, d := f.Body.JustAttributes()
	diags = append(diags, d...)
	var out []rawValue
	for _, a := range attrs {
		out = append(out, rawValue{name: a.Name, expr: a.Expr, source: name, at: a.Range, undeclared: undeclared})
	}
	// Attributes come as a map; keep the file's order for stable messages.
	slices.SortFunc(out, func(a, b rawValue) int { return a.at.Start.Byte - b.at.Start.Byte })
	return out, diags
}

// value is the raw value as a cty value for a variable of type ty.
func (r rawValue) value(ty cty.Type) (cty.Value, hcl.Diagnostics) {
	if r.expr != nil {
		// Variable files hold literal values, evaluated with no scope.
		return r.expr.Value(nil)
	}
	if ty.IsPrimitiveType() {
		return cty.StringVal(r.text), nil
	}
	expr, diags := hclsyntax.ParseExpression([]byte(r.text), r.at.Filename, hcl.InitialPos)
	if diags.HasErrors() {
		return cty.DynamicVal, diags
	}
	return expr.Value(nil)
}

// describe names the source for messages: "-var size", "stack.ivars:3".
func (r rawValue) describe() string {
	if r.expr != nil {
		return fmt.Sprintf("%s:%d", r.at.Filename, r.at.Start.Line)
	}
	return r.source
}
