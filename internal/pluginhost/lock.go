package pluginhost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// Lock is the lock file: for every provider the stack uses, the version
// installed and the checksums its binary may have. It is meant to be
// committed, so a stack runs the same providers everywhere.
//
// A Lock is a value owned by one goroutine; it is not safe for concurrent use.
type Lock struct {
	providers map[string]LockedProvider
}

// LockedProvider is one provider block of the lock file.
type LockedProvider struct {
	Name    string
	Version string
	// Hashes are the accepted checksums of the binary (one per platform the
	// lock has been used on), sorted.
	Hashes []Hash
}

// Accepts reports whether h is one of the locked checksums.
func (p LockedProvider) Accepts(h Hash) bool { return slices.Contains(p.Hashes, h) }

// NewLock returns an empty lock.
func NewLock() *Lock { return &Lock{providers: map[string]LockedProvider{}} }

// Provider returns the locked entry for a provider name.
func (l *Lock) Provider(name string) (LockedProvider, bool) {
	p, ok := l.providers[name]
	return p, ok
}

// Providers returns every entry, sorted by name.
func (l *Lock) Providers() []LockedProvider {
	out := make([]LockedProvider, 0, len(l.providers))
	for _, p := range l.providers {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Set adds or replaces the entry for p.Name. Hashes are copied, sorted and
// deduplicated so the file is stable.
func (l *Lock) Set(p LockedProvider) {
	hs := slices.Clone(p.Hashes)
	slices.Sort(hs)
	p.Hashes = slices.Compact(hs)
	l.providers[p.Name] = p
}

// Remove drops the entry for a provider name; it reports whether there was one.
func (l *Lock) Remove(name string) bool {
	_, ok := l.providers[name]
	delete(l.providers, name)
	return ok
}

// lockHeader is written above the blocks so people know not to hand-edit.
const lockHeader = `# This file is maintained automatically by "infrakit init" and "infrakit plugins".
# Manual edits may be lost in future updates. Commit it with your stack.
`

// Bytes renders the lock file: one provider block per entry, sorted by name,
// formatted by hclwrite.
func (l *Lock) Bytes() []byte {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	for i, p := range l.Providers() {
		if i > 0 {
			body.AppendNewline()
		}
		b := body.AppendNewBlock("provider", []string{p.Name}).Body()
		b.SetAttributeValue("version", cty.StringVal(p.Version))
		hashes := make([]cty.Value, len(p.Hashes))
		for j, h := range p.Hashes {
			hashes[j] = cty.StringVal(string(h))
		}
		if len(hashes) == 0 {
			b.SetAttributeValue("hashes", cty.ListValEmpty(cty.String))
		} else {
			b.SetAttributeValue("hashes", cty.ListVal(hashes))
		}
	}
	return append([]byte(lockHeader+"\n"), hclwrite.Format(f.Bytes())...)
}

// Save writes the lock file of workdir atomically.
func (l *Lock) Save(workdir string) error {
	data := l.Bytes()
	return atomicfile.WriteFile(filepath.Join(workdir, LockFileName), data, 0o644)
}

// LoadLock reads the lock file of workdir. A missing file is an empty lock.
// A malformed one is reported as hcl.Diagnostics (usable with errors.As) whose
// messages start with file:line.
func LoadLock(workdir string) (*Lock, error) {
	path := filepath.Join(workdir, LockFileName)
	src, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewLock(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lock file: %w", err)
	}
	lock, diags := ParseLock(src, path)
	if diags.HasErrors() {
		return nil, diags
	}
	return lock, nil
}

// ParseLock parses lock file source. filename is used in diagnostics.
func ParseLock(src []byte, filename string) (*Lock, hcl.Diagnostics) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	body := file.Body.(*hclsyntax.Body)
	lock := NewLock()
	for _, attr := range sortedAttributes(body.Attributes) {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unexpected attribute in lock file",
			Detail:   fmt.Sprintf("The lock file holds only provider blocks; %q is not one.", attr.Name),
			Subject:  attr.NameRange.Ptr(),
		})
	}
	seen := map[string]hcl.Range{}
	for _, block := range body.Blocks {
		if block.Type != "provider" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unsupported block type in lock file",
				Detail:   fmt.Sprintf("The lock file holds only provider blocks, not %q.", block.Type),
				Subject:  block.TypeRange.Ptr(),
			})
			continue
		}
		if len(block.Labels) != 1 || block.Labels[0] == "" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Provider block needs one name",
				Detail:   `Write provider "<name>" { ... }.`,
				Subject:  block.DefRange().Ptr(),
			})
			continue
		}
		name := block.Labels[0]
		if prev, dup := seen[name]; dup {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate provider in lock file",
				Detail:   fmt.Sprintf("Provider %q is already locked at %s.", name, prev),
				Subject:  block.DefRange().Ptr(),
			})
			continue
		}
		seen[name] = block.DefRange()
		p, pdiags := decodeLockedProvider(name, block)
		diags = append(diags, pdiags...)
		if !pdiags.HasErrors() {
			lock.Set(p)
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return lock, diags
}

// decodeLockedProvider reads the body of one provider block.
func decodeLockedProvider(name string, block *hclsyntax.Block) (LockedProvider, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	p := LockedProvider{Name: name}
	for _, nested := range block.Body.Blocks {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unsupported block in provider lock",
			Detail:   fmt.Sprintf("A locked provider has only version and hashes, not a %q block.", nested.Type),
			Subject:  nested.TypeRange.Ptr(),
		})
	}
	attrs := block.Body.Attributes
	for _, attr := range sortedAttributes(attrs) {
		if attr.Name != "version" && attr.Name != "hashes" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unsupported attribute in provider lock",
				Detail:   fmt.Sprintf("A locked provider has only version and hashes, not %q.", attr.Name),
				Subject:  attr.NameRange.Ptr(),
			})
		}
	}
	for _, required := range []string{"version", "hashes"} {
		if _, ok := attrs[required]; !ok {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Missing attribute in provider lock",
				Detail:   fmt.Sprintf("Provider %q needs %q; run `infrakit init` to rewrite the lock file.", name, required),
				Subject:  block.DefRange().Ptr(),
			})
		}
	}
	if attr, ok := attrs["version"]; ok {
		v, vdiags := attr.Expr.Value(nil)
		diags = append(diags, vdiags...)
		switch {
		case vdiags.HasErrors():
		case v.Type() != cty.String || v.IsNull() || !v.IsKnown() || v.AsString() == "":
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid provider version",
				Detail:   "version must be a non-empty string.",
				Subject:  attr.Expr.Range().Ptr(),
			})
		default:
			p.Version = v.AsString()
		}
	}
	if attr, ok := attrs["hashes"]; ok {
		hashes, hdiags := decodeHashes(attr)
		diags = append(diags, hdiags...)
		p.Hashes = hashes
	}
	return p, diags
}

// decodeHashes reads a list of "sha256:<hex>" strings.
func decodeHashes(attr *hclsyntax.Attribute) ([]Hash, hcl.Diagnostics) {
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		return nil, diags
	}
	ty := v.Type()
	if v.IsNull() || !v.IsKnown() || !(ty.IsTupleType() || ty.IsListType()) {
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid provider hashes",
			Detail:   `hashes must be a list of "sha256:<hex>" strings.`,
			Subject:  attr.Expr.Range().Ptr(),
		})
	}
	// Point at the element that is wrong when the expression is a literal list.
	var elems []hclsyntax.Expression
	if tuple, ok := attr.Expr.(*hclsyntax.TupleConsExpr); ok {
		elems = tuple.Exprs
	}
	var hashes []Hash
	i := 0
	for it := v.ElementIterator(); it.Next(); i++ {
		_, ev := it.Element()
		subject := attr.Expr.Range()
		if i < len(elems) {
			subject = elems[i].Range()
		}
		if ev.Type() != cty.String || ev.IsNull() || !ev.IsKnown() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid provider hash",
				Detail:   `Each hash must be a "sha256:<hex>" string.`,
				Subject:  subject.Ptr(),
			})
			continue
		}
		h, err := ParseHash(ev.AsString())
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid provider hash",
				Detail:   err.Error() + ".",
				Subject:  subject.Ptr(),
			})
			continue
		}
		hashes = append(hashes, h)
	}
	return hashes, diags
}

// sortedAttributes returns attributes in source order so diagnostics are stable.
func sortedAttributes(attrs hclsyntax.Attributes) []*hclsyntax.Attribute {
	out := make([]*hclsyntax.Attribute, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SrcRange.Start.Byte < out[j].SrcRange.Start.Byte })
	return out
}
