package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// The limits on input. They exist so that a typo (size = 1000000000) or a
// hostile file is refused with a diagnostic instead of driving a plan, a
// watch pass or the parser out of memory or stack; each is far above what
// a real stack needs.
const (
	// DefaultMaxGroupSize bounds a group's size (or its number of logical
	// IDs) unless the stack block's limits block says otherwise.
	DefaultMaxGroupSize = 100_000
	// MaxMaxGroupSize is the most max_group_size may say: beyond it a
	// plan's steps alone outgrow the memory of an ordinary machine.
	MaxMaxGroupSize = 10_000_000
	// MaxFileSize bounds one stack file (HCL, legacy JSON or YAML); it is
	// checked before the file is parsed.
	MaxFileSize = 4 << 20
	// MaxNestingDepth bounds how deep brackets, braces, parentheses and
	// template interpolations nest in a stack file; it is checked before
	// the file is parsed, whose recursion would otherwise follow it.
	MaxNestingDepth = 64
	// MaxPropertyValueSize bounds one string inside the properties of an
	// instance, flavor or enrollment target, or one tag value.
	MaxPropertyValueSize = 256 << 10
	// MaxPropertiesSize bounds the properties of one block, encoded as the
	// JSON (or, for an enrollment target, the source text) sent to the
	// provider: well below what one gRPC message may carry.
	MaxPropertiesSize = 1 << 20
)

// blockLimits is the limits block inside the stack block.
const blockLimits = "limits"

var limitsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "max_group_size"}},
}

// Limits is the stack block's limits block. It is part of the stored stack,
// so that `group scale` and every read of the state enforce the same limit
// the files set. A nil *Limits means the defaults.
type Limits struct {
	// MaxGroupSize bounds each group's size and number of logical IDs
	// (0: DefaultMaxGroupSize).
	MaxGroupSize int `json:"max_group_size,omitempty"`

	DeclRange         hcl.Range `json:"-"`
	MaxGroupSizeRange hcl.Range `json:"-"`
}

// MaxGroupSize is the most instances one group of the stack may have.
func (s *Stack) MaxGroupSize() int {
	if s == nil || s.Limits == nil || s.Limits.MaxGroupSize == 0 {
		return DefaultMaxGroupSize
	}
	return s.Limits.MaxGroupSize
}

// checkMaxGroupSize is the rule for max_group_size itself.
func checkMaxGroupSize(n int) error {
	if n < 1 || n > MaxMaxGroupSize {
		return fmt.Errorf("max_group_size must be between 1 and %d; got %d", MaxMaxGroupSize, n)
	}
	return nil
}

// CheckGroupSize is the rule for a group's size (or its number of logical
// IDs, counted "instances" too): between 0 and the stack's MaxGroupSize.
// `group scale` and the stored stack obey it as the files do.
func CheckGroupSize(st *Stack, group string, n int) error {
	limit := st.MaxGroupSize()
	switch {
	case n < 0:
		return fmt.Errorf("group %q: the size must be at least 0; got %d", group, n)
	case n > limit:
		return fmt.Errorf("group %q: %d instances is more than the stack allows (%d, %s); "+
			"to allow more, set max_group_size in the limits block of the stack block, like stack %q { limits { max_group_size = %d } }",
			group, n, limit, limitSource(st), st.Name, n)
	}
	return nil
}

// limitSource says where the stack's group size limit comes from.
func limitSource(st *Stack) string {
	if st == nil || st.Limits == nil || st.Limits.MaxGroupSize == 0 {
		return "the default max_group_size"
	}
	return "its max_group_size"
}

// decodeLimits decodes the stack block's limits block (at most one).
func (l *loader) decodeLimits(stack *hcl.Block, blocks []*hcl.Block) {
	b := l.single(stack, blockLimits, blocks, "")
	if b == nil {
		return
	}
	content, d := b.Body.Content(limitsSchema)
	l.diags = append(l.diags, d...)
	lim := &Limits{DeclRange: b.DefRange}
	if a := content.Attributes["max_group_size"]; a != nil {
		n, ok := l.intAttr(a, 1, MaxMaxGroupSize, false)
		if !ok {
			return
		}
		lim.MaxGroupSize = n
		lim.MaxGroupSizeRange = a.Expr.Range()
	}
	l.st.Limits = lim
}

// checkGroupSizeAt reports a group size (or number of logical IDs) over
// the limit at subject, and says where the limit is set.
func (l *loader) checkGroupSizeAt(subject hcl.Range, group string, n int) bool {
	err := CheckGroupSize(l.st, group, n)
	if err == nil {
		return true
	}
	d := &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Group too large",
		Detail:   upperFirst(err.Error()) + ".",
		Subject:  subject.Ptr(),
	}
	if lim := l.st.Limits; lim != nil && lim.MaxGroupSizeRange.Filename != "" {
		d.Detail += fmt.Sprintf(" The limit is set at %s.", rangeString(lim.MaxGroupSizeRange))
	}
	l.diags = append(l.diags, d)
	return false
}

// oversized finds the first string in v (a value, or an attribute name or
// map key) longer than MaxPropertyValueSize: its path, its length and its
// first bytes. found is false when there is none.
func oversized(v cty.Value) (path cty.Path, size int, prefix string, found bool) {
	path, size, prefix, _, found = oversizedKey(v)
	return path, size, prefix, found
}

// oversizedKey is oversized, also saying whether what it found is an
// attribute name or map key (at the end of path) rather than a value.
func oversizedKey(v cty.Value) (path cty.Path, size int, prefix string, isKey, found bool) {
	_ = cty.Walk(v, func(p cty.Path, val cty.Value) (bool, error) {
		if found {
			return false, nil
		}
		if n := len(p); n > 0 {
			var key string
			switch s := p[n-1].(type) {
			case cty.GetAttrStep:
				key = s.Name
			case cty.IndexStep:
				if s.Key.Type() == cty.String && s.Key.IsKnown() && !s.Key.IsNull() {
					key = s.Key.AsString()
				}
			}
			if len(key) > MaxPropertyValueSize {
				path, size, prefix, isKey, found = p.Copy(), len(key), key, true, true
				return false, nil
			}
		}
		if val.Type() == cty.String && val.IsKnown() && !val.IsNull() {
			if s := val.AsString(); len(s) > MaxPropertyValueSize {
				path, size, prefix, found = p.Copy(), len(s), s, true
				return false, nil
			}
		}
		return true, nil
	})
	return path, size, clip(prefix, 40), isKey, found
}

// tooLargeValue is the message about a value oversized found.
func tooLargeValue(what string, size int, prefix string) string {
	return fmt.Sprintf("%s is %d bytes; a property value (or tag) is at most %d bytes (%s). It starts %q. "+
		"Keep large data (scripts, certificates, images) outside the stack and have the instance fetch it.",
		what, size, MaxPropertyValueSize, byteSize(MaxPropertyValueSize), prefix)
}

// tooLargeProperties is the message about properties over MaxPropertiesSize.
func tooLargeProperties(size int) string {
	return fmt.Sprintf("The properties are %d bytes as sent to the provider; one block's properties are at most %d bytes (%s).",
		size, MaxPropertiesSize, byteSize(MaxPropertiesSize))
}

// CheckProperties is the rule for the properties of an instance or flavor
// block as stored: a JSON object of at most MaxPropertiesSize bytes whose
// strings are each at most MaxPropertyValueSize.
func CheckProperties(raw json.RawMessage) error {
	if len(raw) > MaxPropertiesSize {
		return errors.New(strings.TrimSuffix(tooLargeProperties(len(raw)), "."))
	}
	v, err := jsonValue(raw)
	if err != nil {
		return fmt.Errorf("the properties are not JSON: %w", err)
	}
	if !isObjectLike(v) {
		return fmt.Errorf("the properties must be an object; got %s", v.Type().FriendlyName())
	}
	if p, size, prefix, found := oversized(v); found {
		return errors.New(strings.TrimSuffix(tooLargeValue("The value at "+pathString(p), size, prefix), "."))
	}
	return nil
}

// checkPropertiesAt reports properties v (encoded as b) over the limits at
// the part of expr they are about.
func (l *loader) checkPropertiesAt(expr hcl.Expression, v cty.Value, b []byte) bool {
	if p, size, prefix, isKey, found := oversizedKey(v); found {
		subject, key, _ := exprAt(expr, pathNames(p))
		what := "This value"
		if isKey {
			subject, what = key, "This key"
		}
		l.errorf(subject, "Property value too large", "%s", tooLargeValue(what, size, prefix))
		return false
	}
	if len(b) > MaxPropertiesSize {
		l.errorf(expr.Range(), "Properties too large", "%s", tooLargeProperties(len(b)))
		return false
	}
	return true
}

// pathNames is a cty path as exprAt follows it: attribute names, map keys
// and tuple indexes as strings.
func pathNames(p cty.Path) []string {
	var out []string
	for _, step := range p {
		switch s := step.(type) {
		case cty.GetAttrStep:
			out = append(out, s.Name)
		case cty.IndexStep:
			switch {
			case !s.Key.IsKnown() || s.Key.IsNull():
				return out
			case s.Key.Type() == cty.String:
				out = append(out, s.Key.AsString())
			case s.Key.Type() == cty.Number:
				out = append(out, s.Key.AsBigFloat().Text('f', -1))
			}
		}
	}
	return out
}

// CheckTag is the rule for one user tag: its key and value each at most
// MaxPropertyValueSize (that the key is not infrakit's own is
// tags.IsReserved's rule).
func CheckTag(key, value string) error {
	switch {
	case len(key) > MaxPropertyValueSize:
		return errors.New(strings.TrimSuffix(tooLargeValue("A tag key", len(key), clip(key, 40)), "."))
	case len(value) > MaxPropertyValueSize:
		return errors.New(strings.TrimSuffix(tooLargeValue(fmt.Sprintf("The value of tag %s", quoteName(key)), len(value), clip(value, 40)), "."))
	}
	return nil
}
