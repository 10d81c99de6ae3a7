package config

import (
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/infrakit/infrakit/internal/config/legacy"
)

// LoadSources is Load of files already in memory, by name: each is a stack
// file by its extension (*.hcl, or a specification in *.json, *.yml or
// *.yaml), read in name order, held to the limits of CheckSource. It reads
// nothing from disk, which makes it what the fuzz targets and other
// callers holding the text use.
func LoadSources(sources map[string][]byte) (*Stack, hcl.Diagnostics) {
	return LoadSourcesWith(sources, Inputs{})
}

// LoadSourcesWith is LoadSources with values for the variables (its
// -var-file files are read from disk).
func LoadSourcesWith(sources map[string][]byte, in Inputs) (*Stack, hcl.Diagnostics) {
	st := &Stack{Files: map[string]*hcl.File{}}
	raws, diags := collectInputs(st, "", in)
	if diags.HasErrors() {
		return st, diags
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range sources {
			if !yield(name) {
				return
			}
		}
	})
	srcs := make([][]byte, len(names))
	for i, name := range names {
		src := sources[name]
		if src == nil {
			src = []byte{}
		}
		d := CheckSource(name, src)
		diags = append(diags, d...)
		if d.HasErrors() {
			st.Files[name] = &hcl.File{Bytes: src}
			continue
		}
		srcs[i] = src
	}
	return loadSources(st, "", names, srcs, raws, diags)
}

// loadSources parses and loads the files names, whose sources are srcs (nil
// for one already refused, with diags saying why: its st.Files entry is set).
func loadSources(st *Stack, dir string, names []string, srcs [][]byte, raws []rawValue, diags hcl.Diagnostics) (*Stack, hcl.Diagnostics) {
	refused := map[string]bool{}
	for i, name := range names {
		if srcs[i] == nil && st.Files[name] != nil {
			refused[name] = true
		}
	}
	parser := hclparse.NewParser()
	var files []*hcl.File
	var specs []*legacy.File
	for i, name := range names {
		src := srcs[i]
		switch {
		case refused[name]:
			continue
		case !legacy.IsFile(name):
			f, d := parser.ParseHCL(src, name)
			diags = append(diags, d...)
			if f != nil {
				files = append(files, f)
			}
			continue
		}
		spec, d := legacy.Parse(src, name)
		diags = append(diags, d...)
		if spec != nil {
			st.Files[name] = spec.HCL
			files = append(files, spec.HCL)
			specs = append(specs, spec)
		}
	}
	for name, f := range parser.Files() {
		st.Files[name] = f
	}
	if diags.HasErrors() {
		return st, diags
	}
	l := newLoader(st)
	l.specs = specs
	l.inputs = raws
	if len(specs) > 0 {
		l.impliedName = impliedStackName(dir, names)
	}
	l.load(files)
	return st, append(diags, l.diags...)
}
