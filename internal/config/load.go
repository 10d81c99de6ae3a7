package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/infrakit/infrakit/internal/config/legacy"
)

// Block types at the top level of a stack file.
const (
	blockStack        = "stack"
	blockProvider     = "provider"
	blockGroup        = "group"
	blockLoadBalancer = "loadbalancer"
	blockIngress      = "ingress"
	blockEnrollment   = "enrollment"
)

// rootSchema is the top level of every stack file. Schemas are read-only.
var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: blockStack, LabelNames: []string{"name"}},
		{Type: blockProvider, LabelNames: []string{"name"}},
		{Type: blockGroup, LabelNames: []string{"name"}},
		{Type: blockLoadBalancer, LabelNames: []string{"name"}},
		{Type: blockIngress, LabelNames: []string{"name"}},
		{Type: blockEnrollment, LabelNames: []string{"name"}},
		{Type: blockVariable, LabelNames: []string{"name"}},
		{Type: blockLocals},
		{Type: blockOutput, LabelNames: []string{"name"}},
	},
}

// stackSchema is the body of the stack block. Settings of the stack as a
// whole (a backend block, a limits block) are added here and decoded in
// decodeStack.
var stackSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: blockBackend, LabelNames: []string{"type"}}, {Type: blockLimits}},
}

// Load reads a stack: every *.hcl file directly in dir, in name order, then
// each extra file. Hidden files (.infrakit.lock.hcl) are not stack files. dir
// may be empty to read only the extra files.
//
// Specifications in the old formats (legacy group JSON, new-schema YAML or
// JSON; see package legacy) are part of the stack too: the *.json, *.yml and
// *.yaml files of dir that are specifications (legacy.IsSpecification; the
// local state, StateFile, and the files beside it are never read) and
// every extra file with one of those extensions. A file of dir that does
// not parse and does not look like a specification is left out with a
// warning; an extra file is read whatever it holds. The providers and load balancers they name are implied: the
// stack gets a provider or loadbalancer block for each it does not declare.
// A stack whose files have no stack block but some specifications is named
// after the directory (a warning says so).
//
// The returned Stack is never nil and its Files are always set, so callers
// can render the diagnostics with WriteDiagnostics; when the diagnostics have
// errors the rest of the Stack is incomplete and must not be acted on.
func Load(dir string, extra ...string) (*Stack, hcl.Diagnostics) {
	return LoadWith(dir, Inputs{}, extra...)
}

// LoadWith is Load with values for the stack's variables: those of in, and
// the variable files of dir (VarFile, *AutoVarFileSuffix), in the
// precedence described at EnvVarPrefix.
func LoadWith(dir string, in Inputs, extra ...string) (*Stack, hcl.Diagnostics) {
	st := &Stack{Files: map[string]*hcl.File{}}
	raws, diags := collectInputs(st, dir, in)
	if diags.HasErrors() {
		return st, diags
	}
	names, d := stackFiles(st, dir, extra)
	diags = append(diags, d...)
	if diags.HasErrors() {
		return st, diags
	}
	srcs := make([][]byte, len(names))
	for i, name := range names {
		src, d := ReadSource(name)
		diags = append(diags, d...)
		if d.HasErrors() {
			st.Files[name] = &hcl.File{Bytes: src}
			continue
		}
		srcs[i] = src
	}
	return loadSources(st, dir, names, srcs, raws, diags)
}

// impliedStackName names a stack of specifications without a stack block
// after its directory (dir, or the first specification's), as Docker
// Compose names a project: made to obey the rule of stack names.
func impliedStackName(dir string, names []string) string {
	if dir == "" {
		for _, n := range names {
			if legacy.IsFile(n) {
				dir = filepath.Dir(n)
				break
			}
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	name := filepath.Base(abs)
	if name == "." || name == string(filepath.Separator) {
		return ""
	}
	return impliedName(name)
}

// StackFiles lists the stack files of dir, as Load reads them: the *.hcl
// files directly in it, in name order, without hidden files (the lock file
// .infrakit.lock.hcl is not a stack file).
func StackFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".hcl") {
			continue
		}
		names = append(names, filepath.Join(dir, e.Name()))
	}
	return names, nil
}

// StateFile is the local state's file name in a stack's directory
// (operation.StateFile names it for the runner). It is JSON but never a specification: Load does
// not read it, its .backup, or the temporary files its writer leaves
// (StateFile + ".tmp-*"), whatever they hold, so that a damaged state is
// refused by the state backend, with its own message, and not reported
// as a broken specification.
const StateFile = "infrakit.state.json"

// isStateFile reports whether base (a file name without directory) is the
// local state or one of the files its backend keeps beside it.
func isStateFile(base string) bool {
	return base == StateFile || strings.HasPrefix(base, StateFile+".")
}

// specificationFiles lists the *.json, *.yml and *.yaml files directly in
// dir that are specifications, in name order, without hidden files and
// the state's. A file that does not parse and does not look like a
// specification is left out with a warning, its source added to st.Files
// to show the line.
func specificationFiles(st *Stack, dir string) ([]string, hcl.Diagnostics, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var diags hcl.Diagnostics
	for _, e := range entries {
		if !isSpecificationCandidate(e) {
			continue
		}
		name := filepath.Join(dir, e.Name())
		src, limits := ReadSource(name)
		if limits.HasErrors() {
			// Too large or too deep to look into: report it as a stack
			// file would be, rather than guess what it is.
			st.Files[name] = &hcl.File{Bytes: src}
			diags = append(diags, limits...)
			continue
		}
		spec, syntax := legacy.IsSpecification(src, name)
		switch {
		case spec:
			names = append(names, name)
		case syntax != nil:
			st.Files[name] = &hcl.File{Bytes: src}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "File not read: " + e.Name(),
				Detail: fmt.Sprintf("%s is not valid %s (%s), and nothing in it looks like a specification "+
					`(an "ID" or "Properties" field, or a kind of group, ingress or enrollment), so it is not part of the stack. `+
					"If it is meant to be one, fix it, or name it with -f to see every error; otherwise move it out of the directory.",
					e.Name(), formatName(name), strings.TrimSuffix(syntax.Detail, ".")),
				Subject: syntax.Subject,
			})
		}
	}
	return names, diags, nil
}

// isSpecificationCandidate reports whether a directory entry may be a
// specification: a *.json, *.yml or *.yaml file that is not hidden, not the
// state's and not a variable file. Its content decides whether it is one.
func isSpecificationCandidate(e os.DirEntry) bool {
	return !e.IsDir() && !strings.HasPrefix(e.Name(), ".") && legacy.IsFile(e.Name()) && !isStateFile(e.Name()) && !IsVarFile(e.Name())
}

// DirFiles lists every file of dir that LoadWith may read from it, in name
// order: the stack files (StackFiles), the files that may be
// specifications (the loader reads each to decide, and warns about one that
// does not parse) and the variable files (VarFile, *AutoVarFileSuffix, and
// their .json forms). A copy of these files loads as dir does: the remote
// CLI sends them to the watch that plans.
func DirFiles(dir string) ([]string, error) {
	names, err := StackFiles(dir)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if isSpecificationCandidate(e) {
			names = append(names, filepath.Join(dir, e.Name()))
		}
	}
	names = append(names, autoVarFiles(dir)...)
	slices.Sort(names)
	return slices.Compact(names), nil
}

// formatName is "JSON" or "YAML", by the file's extension.
func formatName(name string) string {
	if ext := strings.ToLower(filepath.Ext(name)); ext == ".yml" || ext == ".yaml" {
		return "YAML"
	}
	return "JSON"
}

// stackFiles lists the files Load reads, without duplicates: dir's *.hcl
// files, then its specifications, then the extra files.
func stackFiles(st *Stack, dir string, extra []string) ([]string, hcl.Diagnostics) {
	var names []string
	var diags hcl.Diagnostics
	if dir != "" {
		hclFiles, err := StackFiles(dir)
		var specs []string
		if err == nil {
			specs, diags, err = specificationFiles(st, dir)
		}
		if err != nil {
			return nil, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Cannot read stack directory",
				Detail:   err.Error(),
			}}
		}
		names = append(hclFiles, specs...)
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range append(names, extra...) {
		n = filepath.Clean(n)
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No stack files",
			Detail:   fmt.Sprintf("The directory %q has no *.hcl files and no specifications (*.json, *.yml, *.yaml).", dir),
		})
	}
	return out, diags
}

// loader decodes the blocks of all files into one Stack, collecting diagnostics.
type loader struct {
	st    *Stack
	diags hcl.Diagnostics

	// Declared names, for resolving references and reporting duplicates.
	// The slices keep declaration order for "did you mean" suggestions.
	providers     map[string]*Provider
	providerKeys  []string
	groups        map[string]hcl.Range
	groupNames    []string
	lbs           map[string]hcl.Range
	lbNames       []string
	ingresses     map[string]hcl.Range
	enrollments   map[string]hcl.Range
	publishedPort map[lbPort]hcl.Range
	// lbOwner is the ingress that names each load balancer (the first rule
	// naming it): an ingress owns its load balancers.
	lbOwner map[string]lbRule

	// vars are the declared variables (varNames in order) and varVals
	// their values; localNames the locals in order and localVals their
	// values, as far as computed. Sensitive values are marked.
	vars       map[string]hcl.Range
	varNames   []string
	varVals    map[string]cty.Value
	localNames []string
	localVals  map[string]cty.Value
	outputs    map[string]hcl.Range
	// inputs are the values given for the variables, lowest precedence first.
	inputs []rawValue

	// specs are the specification files among the stack files; impliedName
	// names the stack when no file has a stack block.
	specs       []*legacy.File
	impliedName string
}

// lbRule is where an ingress first names a load balancer.
type lbRule struct {
	ingress string
	at      hcl.Range
}

// lbPort is one port of one load balancer: two routes may not publish it.
type lbPort struct {
	lb   string
	port int
}

func newLoader(st *Stack) *loader {
	return &loader{
		st:            st,
		providers:     map[string]*Provider{},
		groups:        map[string]hcl.Range{},
		lbs:           map[string]hcl.Range{},
		ingresses:     map[string]hcl.Range{},
		enrollments:   map[string]hcl.Range{},
		publishedPort: map[lbPort]hcl.Range{},
		lbOwner:       map[string]lbRule{},
		vars:          map[string]hcl.Range{},
		outputs:       map[string]hcl.Range{},
	}
}

func (l *loader) load(files []*hcl.File) {
	blocks := map[string][]*hcl.Block{}
	for _, f := range files {
		content, d := f.Body.Content(rootSchema)
		l.diags = append(l.diags, d...)
		for _, b := range content.Blocks {
			blocks[b.Type] = append(blocks[b.Type], b)
		}
	}

	l.decodeStack(blocks[blockStack])

	// Variables and locals first: every other block may use them.
	l.decodeVariables(blocks[blockVariable], l.inputs)
	l.decodeLocals(blocks[blockLocals])

	// Declare everything that can be referenced before decoding any body, so
	// references resolve regardless of block and file order.
	for _, b := range blocks[blockProvider] {
		l.decodeProvider(b)
	}
	l.declareImpliedProviders()
	groups := l.declare(blocks[blockGroup], l.groups, &l.groupNames, true)
	lbs := l.declare(blocks[blockLoadBalancer], l.lbs, &l.lbNames, true)
	impliedLBs := l.declareImpliedLoadBalancers()
	ingresses := l.declare(blocks[blockIngress], l.ingresses, nil, false)
	enrollments := l.declare(blocks[blockEnrollment], l.enrollments, nil, false)

	for _, b := range groups {
		l.st.Groups = append(l.st.Groups, l.decodeGroup(b))
	}
	for _, b := range lbs {
		l.st.LoadBalancers = append(l.st.LoadBalancers, l.decodeLoadBalancer(b))
	}
	l.st.LoadBalancers = append(l.st.LoadBalancers, impliedLBs...)
	l.checkImpliedLoadBalancers()
	for _, b := range ingresses {
		l.st.Ingresses = append(l.st.Ingresses, l.decodeIngress(b))
	}
	for _, b := range enrollments {
		l.st.Enrollments = append(l.st.Enrollments, l.decodeEnrollment(b))
	}
	for _, b := range l.declare(blocks[blockOutput], l.outputs, nil, false) {
		l.st.Outputs = append(l.st.Outputs, l.decodeOutput(b))
	}

	if !l.diags.HasErrors() {
		// References only point from later kinds to earlier ones today, so a
		// cycle cannot be written yet; this keeps the guarantee when that changes.
		if _, err := l.st.Graph().TopologicalOrder(); err != nil {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Dependency cycle",
				Detail:   err.Error(),
				Subject:  l.st.DeclRange.Ptr(),
			})
		}
	}
}

// decodeStack checks there is exactly one stack block and decodes it.
func (l *loader) decodeStack(blocks []*hcl.Block) {
	if len(blocks) == 0 && l.impliedName != "" {
		l.st.Name = l.impliedName
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Stack name implied",
			Detail: fmt.Sprintf("No stack file has a stack block, so the stack is named %q after its directory. "+
				"The name is in the infrakit.stack tag of every instance: to keep it if the directory moves, "+
				"add a file stack.hcl holding stack %q {}.", l.impliedName, l.impliedName),
		})
		return
	}
	if len(blocks) == 0 {
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing stack block",
			Detail:   `A stack needs exactly one stack block naming it, like stack "mystack" {}.`,
		})
		return
	}
	for _, b := range blocks[1:] {
		l.errorf(b.DefRange, "Duplicate stack block",
			"A stack has exactly one stack block; the first is at %s.", rangeString(blocks[0].DefRange))
	}
	b := blocks[0]
	l.st.Name = b.Labels[0]
	l.st.DeclRange = b.DefRange
	if err := CheckStackName(l.st.Name); err != nil {
		l.errorf(b.LabelRanges[0], "Invalid stack name", "%s.", upperFirst(err.Error()))
	}
	content, d := b.Body.Content(stackSchema)
	l.diags = append(l.diags, d...)
	l.decodeLimits(b, content.Blocks.OfType(blockLimits))
	l.decodeBackend(b, content.Blocks.OfType(blockBackend))
}

// declare records the names of blocks of one type, reporting duplicates and
// (for referenceable blocks) names that cannot be written in a reference. It
// returns the blocks to decode: the first declaration of each name.
func (l *loader) declare(blocks []*hcl.Block, seen map[string]hcl.Range, order *[]string, referenceable bool) []*hcl.Block {
	var out []*hcl.Block
	for _, b := range blocks {
		name := b.Labels[0]
		if !l.checkName(b, referenceable) {
			continue
		}
		if first, dup := seen[name]; dup {
			l.errorf(b.LabelRanges[0], "Duplicate "+b.Type,
				"A %s named %q is already declared at %s; names must be unique.", b.Type, name, rangeString(first))
			continue
		}
		seen[name] = b.DefRange
		if order != nil {
			*order = append(*order, name)
		}
		out = append(out, b)
	}
	return out
}

// checkName reports a block label that is empty, or that a reference could
// not name (references are HCL identifiers: group.cattle).
func (l *loader) checkName(b *hcl.Block, referenceable bool) bool {
	check := checkLabel
	if referenceable {
		check = checkReferenceableName
	}
	if err := check(b.Type, b.Labels[0]); err != nil {
		l.errorf(b.LabelRanges[0], "Invalid "+b.Type+" name", "%s.", upperFirst(err.Error()))
		return false
	}
	return true
}

// errorf appends an error diagnostic about subject.
func (l *loader) errorf(subject hcl.Range, summary, format string, args ...any) {
	l.diags = append(l.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject.Ptr(),
	})
}

// rangeString is "file:line:col" of where r starts.
func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}
