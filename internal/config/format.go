package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// Format returns src in canonical HCL layout (what `infrakit fmt` writes).
// Source with syntax errors is not formatted: the diagnostics say where the
// errors are, so a half-understood file is never rewritten; nor is one
// over the limits of CheckSource.
func Format(src []byte, filename string) ([]byte, hcl.Diagnostics) {
	if diags := CheckSource(filename, src); diags.HasErrors() {
		return nil, diags
	}
	if _, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos); diags.HasErrors() {
		return nil, diags
	}
	return hclwrite.Format(src), nil
}
