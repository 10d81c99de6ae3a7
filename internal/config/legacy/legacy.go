// Package legacy reads the specification formats infrakit used before stack
// files — the legacy group JSON ({"ID": ..., "Properties": {...}}) and the
// new-schema documents (kind, metadata, properties, options; usually YAML,
// sometimes JSON) for groups, ingresses and enrollments — and turns each
// file into stack blocks.
//
// The blocks are built as HCL syntax (hclsyntax) whose source ranges point
// into the JSON or YAML. package config decodes them exactly as it decodes
// *.hcl files, so every check of the stack language applies to old files
// too and its diagnostics carry the old file's line and column. Problems
// only the old formats can have (an unknown field, a field infrakit has no
// use for, a template it cannot translate) are reported here.
//
// The package does not import config, so config can call it.
package legacy

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// File is one specification file read as a stack file.
type File struct {
	// HCL holds the specification as stack blocks (group, ingress,
	// enrollment) in an *hclsyntax.Body whose ranges point into the JSON
	// or YAML; Bytes is the file as read, for showing those lines. It is
	// never nil; after errors its body may be incomplete.
	HCL *hcl.File
	// Providers are the providers the specification names in its Plugin
	// and L4Plugin fields, in order of first use. Old specifications had no
	// provider blocks, so these are implied: a stack that does not declare
	// one gets it (and `infrakit init` installs it).
	Providers []Provider
	// LoadBalancers are the load balancers its ingresses name in L4Plugin
	// ("simulator/lb1" is lb1, served by simulator), implied in the same way.
	LoadBalancers []LoadBalancer
}

// Provider is a provider a specification names.
type Provider struct {
	Name  string
	Alias string
	// Range is where the specification first names it.
	Range hcl.Range
}

// Key is "name" or "name.alias", as config.Provider's.
func (p Provider) Key() string {
	if p.Alias == "" {
		return p.Name
	}
	return p.Name + "." + p.Alias
}

// LoadBalancer is a load balancer an ingress's L4Plugin names.
type LoadBalancer struct {
	Name string
	// Provider is the provider key that serves it.
	Provider string
	// Range is the first L4Plugin naming it.
	Range hcl.Range
}

// PropertiesExpr is an enrollment target's properties converted from a
// specification: it evaluates as the HCL in Source, with {{.ID}}-style
// actions turned into member references, while its ranges point into the
// JSON or YAML. config keeps target properties as HCL source text (they
// are rendered per member later), and takes it from Source.
type PropertiesExpr struct {
	hclsyntax.Expression
	// Source is the HCL text of the expression: { host = member.id, iops = 10 }.
	Source string
}

// UnwrapExpression gives hcl's helpers the expression underneath.
func (e *PropertiesExpr) UnwrapExpression() hcl.Expression { return e.Expression }

// IsFile reports whether name is a specification file by its extension:
// *.json, *.yml or *.yaml.
func IsFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json", ".yml", ".yaml":
		return true
	}
	return false
}

func isYAML(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return ext == ".yml" || ext == ".yaml"
}

// IsSpecification reports whether a JSON or YAML file found in a stack's
// directory is a specification, so that infrakit's own files there (saved
// plans) and other tools' files are not read as one. It is: a JSON value,
// or any YAML document, that is an object (or a list whose first element
// is an object) with an "ID" or "Properties" field, or with "metadata"
// and a "kind" of group, ingress or enrollment; field names and the kind
// in any case. Files named on the command line are read whatever they
// hold.
//
// When the file does not parse, syntax is its first syntax error, and spec
// says whether its text still shows a specification: an "ID" or
// "Properties" key, or a kind of group, ingress or enrollment. Such a file
// is a specification with a mistake, to be read so that the error is
// shown; any other is someone else's broken file, which the caller may
// skip, saying so.
func IsSpecification(src []byte, filename string) (spec bool, syntax *hcl.Diagnostic) {
	yamlFile := isYAML(filename)
	s := newSource(filename, blankLeadingComments(src, yamlFile))
	var docs []*node
	var diags hcl.Diagnostics
	if yamlFile {
		docs, diags = parseYAML(s)
	} else {
		var n *node
		if n, diags = parseJSON(s); n != nil {
			docs = []*node{n}
		}
	}
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			return looksLikeSpecification(src), d
		}
	}
	for _, d := range docs {
		if d.kind == kindArray && len(d.items) > 0 {
			d = d.items[0]
		}
		if isSpecificationObject(d) {
			return true, nil
		}
	}
	return false, nil
}

// isSpecificationObject reports whether n is shaped as a legacy group (an
// ID or Properties field) or a new-schema specification (metadata and a
// kind infrakit reads). A kind of another tool (kind: Deployment) is not
// one; a misspelled field beside a kind of group is, so that its error
// is shown.
func isSpecificationObject(n *node) bool {
	if n.field("ID") != nil || n.field("Properties") != nil {
		return true
	}
	k := n.field("kind")
	if k == nil || k.value.kind != kindString || n.field("metadata") == nil {
		return false
	}
	switch strings.ToLower(k.value.text) {
	case kindGroup, kindIngress, kindEnrollment:
		return true
	}
	return false
}

// specificationMarks are what a specification shows even when it does not
// parse: a legacy group's "ID" or "Properties" key (JSON or YAML, quoted
// or not), or a kind infrakit reads.
var specificationMarks = []*regexp.Regexp{
	regexp.MustCompile(`(?m)(?:^|[\s{,\-])["']?(?:ID|Properties)["']?\s*:`),
	regexp.MustCompile(`(?i)(?:^|[\s{,\-])["']?kind["']?\s*:\s*["']?(?:group|ingress|enrollment)\b`),
}

// looksLikeSpecification reports whether the text of a file that does not
// parse shows one of specificationMarks.
func looksLikeSpecification(src []byte) bool {
	for _, re := range specificationMarks {
		if re.Match(src) {
			return true
		}
	}
	return false
}

// Parse reads one specification file: a JSON value (one specification or
// a list of them) or a stream of YAML documents (each one specification or
// a list). A leading {{/* comment */}} is ignored. Each specification is a
// legacy group ({"ID", "Properties"}) or a new-schema object with a kind
// of group, ingress or enrollment.
//
// The returned File is never nil and its HCL.Bytes is always set, so the
// diagnostics can be shown with the source.
func Parse(src []byte, filename string) (*File, hcl.Diagnostics) {
	yamlFile := isYAML(filename)
	s := newSource(filename, blankLeadingComments(src, yamlFile))
	r := newReader(s, src)
	var docs []*node
	var diags hcl.Diagnostics
	if yamlFile {
		docs, diags = parseYAML(s)
	} else {
		var n *node
		if n, diags = parseJSON(s); n != nil {
			docs = []*node{n}
		}
	}
	if diags.HasErrors() {
		return r.file, diags
	}
	if len(docs) == 0 {
		r.errorf(s.rangeOf(0, 0), "Empty specification", "The file holds no specification.")
	}
	for _, d := range docs {
		r.document(d)
	}
	return r.file, r.diags
}

// reader turns one file's trees into blocks, collecting diagnostics.
type reader struct {
	s     *source
	file  *File
	body  *hclsyntax.Body
	diags hcl.Diagnostics

	providers     map[string]bool
	loadBalancers map[string]LoadBalancer
}

func newReader(s *source, original []byte) *reader {
	body := newBody(s.rangeOf(0, len(s.src)))
	return &reader{
		s:             s,
		body:          body,
		file:          &File{HCL: &hcl.File{Body: body, Bytes: original}},
		providers:     map[string]bool{},
		loadBalancers: map[string]LoadBalancer{},
	}
}

func (r *reader) errorf(subject hcl.Range, summary, format string, args ...any) {
	r.diags = append(r.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject.Ptr(),
	})
}

func (r *reader) warnf(subject hcl.Range, summary, format string, args ...any) {
	r.diags = append(r.diags, &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject.Ptr(),
	})
}

// document reads one JSON value or YAML document: a specification or a
// list of them.
func (r *reader) document(n *node) {
	if n.kind == kindArray {
		for _, item := range n.items {
			r.specification(item)
		}
		return
	}
	r.specification(n)
}

// specification tells the two shapes apart: a kind field means the new
// schema, ID or Properties a legacy group.
func (r *reader) specification(n *node) {
	switch {
	case n.kind != kindObject:
		r.errorf(n.rng, "Invalid specification", "A specification is an object; got %s.", n.kind)
	case n.field("kind") != nil:
		r.newSchema(n)
	case n.field("ID") != nil || n.field("Properties") != nil:
		r.legacyGroup(n)
	default:
		r.errorf(n.startRange(), "Unrecognized specification",
			`An object here is either a new-schema specification, with "kind" (group, ingress or enrollment), "metadata" and "properties", or a legacy group, with "ID" and "Properties".`)
	}
}

// implyProvider records a provider the specification names.
func (r *reader) implyProvider(name, alias string, at hcl.Range) {
	p := Provider{Name: name, Alias: alias, Range: at}
	if r.providers[p.Key()] {
		return
	}
	r.providers[p.Key()] = true
	r.file.Providers = append(r.file.Providers, p)
}

// implyLoadBalancer records a load balancer an L4Plugin names; naming the
// same one with two providers is an error.
func (r *reader) implyLoadBalancer(name, providerKey string, at hcl.Range) bool {
	if first, ok := r.loadBalancers[name]; ok {
		if first.Provider != providerKey {
			r.errorf(at, "Conflicting load balancer",
				"Load balancer %q is served by provider %q at %s; one load balancer has one provider.", name, first.Provider, rangeString(first.Range))
			return false
		}
		return true
	}
	lb := LoadBalancer{Name: name, Provider: providerKey, Range: at}
	r.file.LoadBalancers = append(r.file.LoadBalancers, lb)
	r.loadBalancers[name] = lb
	return true
}
